//! `--only merge --explain`: what the `merge` row's time goes to, by experiment.
//!
//! Run on the row's topic after its rounds, each variant `--rounds` times:
//!
//! * **Reading, taken apart.** [`fleet::read_topic`] is a consumer (the library's
//!   configuration) that reads each partition's offsets, is assigned them, polls every
//!   message and pushes it into a [`Timeline`], then sorts each source
//!   ([`Timeline::finish`]). The same steps are repeated here with a consumer of this
//!   bench, so that each can be timed and its configuration changed one setting at a
//!   time:
//!   * `fetch only`: the library's settings, the messages polled and dropped (the
//!     floor Kafka and librdkafka set);
//!   * `fetch + decode`: the library's settings and the library's work (the same as
//!     `read_topic`);
//!   * `... backoff 10 ms`: with `fetch.queue.backoff.ms` 10 instead of librdkafka's
//!     1,000 (how long it postpones a partition's next fetch once its local queue holds
//!     more than `queued.max.messages.kbytes`, 64 MiB by default, which a reader slower
//!     than its fetches reaches);
//!   * `... queue 1 GiB`: with `queued.max.messages.kbytes` 1 GiB instead.
//!
//!   Each gives the time to its first message (metadata, offsets, connections), then
//!   wall time, this process's CPU, and the brokers' CPU (their `utime + stime`, 10 ms
//!   ticks, from the pids in `DIR/pids` of `scripts/kafka.sh` when `--kafka-dir DIR` is
//!   given).
//! * **Merging and exporting, taken apart**: the merge alone ([`Fleet::timeline`]
//!   walked, each entry's sequence number summed), the export into `io::sink()` (merge
//!   and encoding), and the export into a file (as the row does).

use std::fs::File;
use std::io::BufWriter;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use ringtrace_ship::fleet::{export, Fleet, Timeline};

use crate::{arg, median, now_ns, process_cpu, Bench, TICKS};

/// CPU seconds of the brokers so far (`utime + stime` of each pid in `DIR/pids`), or
/// `None` without `--kafka-dir`.
pub(crate) fn brokers_cpu() -> Option<f64> {
    let dir = arg("--kafka-dir")?;
    let pids = std::fs::read_to_string(format!("{dir}/pids")).ok()?;
    let mut ticks = 0u64;
    for pid in pids.split_whitespace().filter(|w| w.bytes().all(|b| b.is_ascii_digit())) {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        ticks += f[11].parse::<u64>().ok()? + f[12].parse::<u64>().ok()?;
    }
    Some(ticks as f64 / TICKS)
}

/// One timed read: seconds to the first message, wall, this process's CPU, brokers' CPU.
struct Read {
    first: f64,
    wall: f64,
    cpu: f64,
    brokers: Option<f64>,
}

/// Reads `topic` from start to end with the library's consumer settings plus `extra`;
/// with `decode`, pushes every message into a timeline and finishes it, as
/// `fleet::read_topic` does. Checks that `n` records were read when decoding.
fn read(brokers: &str, topic: &str, extra: &[(&str, &str)], decode: bool, n: u64) -> Read {
    let (c0, b0, t0) = (process_cpu(), brokers_cpu(), Instant::now());
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", brokers)
        .set("group.id", format!("ringtrace-bench-explain-{}", now_ns()))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false");
    for (k, v) in extra {
        config.set(*k, *v);
    }
    let consumer: BaseConsumer = config.create().expect("consumer");
    let timeout = Duration::from_secs(30);
    let metadata = consumer.fetch_metadata(Some(topic), timeout).expect("metadata");
    let mut ends = Vec::new();
    let mut assignment = TopicPartitionList::new();
    for p in metadata.topics()[0].partitions() {
        let (low, high) = consumer.fetch_watermarks(topic, p.id(), timeout).expect("watermarks");
        if high > low {
            assignment.add_partition_offset(topic, p.id(), Offset::Offset(low)).unwrap();
            ends.push((p.id(), high, low));
        }
    }
    consumer.assign(&assignment).expect("assign");
    let mut timeline = Timeline::new();
    let mut first = None;
    let mut open = ends.len();
    let deadline = Instant::now() + Duration::from_secs(300);
    while open > 0 {
        assert!(Instant::now() < deadline, "explain: {topic} not read in 300 s");
        let Some(m) = consumer.poll(Duration::from_millis(100)) else { continue };
        let m = m.expect("a message");
        first.get_or_insert_with(|| t0.elapsed().as_secs_f64());
        let Some(end) = ends.iter_mut().find(|e| e.0 == m.partition()) else { continue };
        if m.offset() >= end.1 {
            continue;
        }
        if decode {
            timeline.push(m.payload().unwrap_or_default()).expect("a batch");
        }
        let was_open = end.2 < end.1;
        end.2 = m.offset() + 1;
        if was_open && end.2 >= end.1 {
            open -= 1;
        }
    }
    if decode {
        let fleet = timeline.finish();
        assert_eq!(fleet.stats().records, n);
    }
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), (process_cpu() - c0).as_secs_f64());
    Read { first: first.unwrap_or(0.0), wall, cpu, brokers: b0.zip(brokers_cpu()).map(|(a, b)| b - a) }
}

/// A read of the experiment: its name, the consumer settings it adds, whether it
/// decodes.
type Variant<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);

/// Runs the experiments on `topic` of `n` records, `rounds` times each, and prints the
/// medians.
pub fn run(bench: &Bench, topic: &str, n: u64) {
    let (brokers, rounds) = (&bench.brokers, bench.rounds);
    let variants: [Variant; 4] = [
        ("fetch only", &[], false),
        ("fetch + decode (= read_topic)", &[], true),
        ("... backoff 10 ms", &[("fetch.queue.backoff.ms", "10")], true),
        ("... queue 1 GiB", &[("queued.max.messages.kbytes", "1048576")], true),
    ];
    println!("explain: reading, taken apart (medians over {rounds} rounds, in turn)");
    println!(
        "  {:<30} {:>8} {:>11} {:>10} {:>14}  wall s of each round",
        "variant", "first s", "records/s", "CPU ns/r", "brokers ns/r"
    );
    let mut results: Vec<Vec<Read>> = variants.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (i, (_, extra, decode)) in variants.iter().enumerate() {
            results[i].push(read(brokers, topic, extra, *decode, n));
        }
    }
    for ((name, _, _), rs) in variants.iter().zip(&results) {
        let med = |f: &dyn Fn(&Read) -> f64| median(rs.iter().map(f).collect());
        let brokers = if rs.iter().all(|r| r.brokers.is_some()) {
            format!("{:.0}", med(&|r| r.brokers.unwrap() * 1e9 / n as f64))
        } else {
            "-".to_string()
        };
        println!(
            "  {:<30} {:>8.3} {:>11.0} {:>10.0} {:>14}  {}",
            name,
            med(&|r| r.first),
            med(&|r| n as f64 / r.wall),
            med(&|r| r.cpu * 1e9 / n as f64),
            brokers,
            rs.iter().map(|r| format!("{:.2}", r.wall)).collect::<Vec<_>>().join(" ")
        );
    }

    let fleet = ringtrace_ship::fleet::read_topic(brokers, topic, Duration::from_secs(300), |w| eprintln!("{w}"))
        .expect("reading the topic");
    let path = bench.dir.join("explain.pftrace");
    type Step<'a> = (&'a str, &'a dyn Fn(&Fleet));
    let merge_only = |f: &Fleet| {
        let sum = f.timeline().fold(0u64, |s, e| s.wrapping_add(e.seq));
        std::hint::black_box(sum);
    };
    let to_sink = |f: &Fleet| {
        export::perfetto(f, f.timeline(), &mut std::io::sink()).expect("export");
    };
    let to_file = |f: &Fleet| {
        let mut out = BufWriter::new(File::create(&path).expect("the trace file"));
        export::perfetto(f, f.timeline(), &mut out).expect("export");
    };
    let steps: [Step; 3] =
        [("merge alone", &merge_only), ("merge + export to sink", &to_sink), ("merge + export to a file", &to_file)];
    println!("explain: merging and exporting, taken apart (medians over {rounds} rounds)");
    println!("  {:<30} {:>11} {:>10}", "step", "records/s", "CPU ns/r");
    for (name, step) in steps {
        let (mut walls, mut cpus) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let (c0, t0) = (process_cpu(), Instant::now());
            step(&fleet);
            walls.push(n as f64 / t0.elapsed().as_secs_f64());
            cpus.push((process_cpu() - c0).as_secs_f64() * 1e9 / n as f64);
            let _ = std::fs::remove_file(&path);
        }
        println!("  {:<30} {:>11.0} {:>10.0}", name, median(walls), median(cpus));
    }
}
