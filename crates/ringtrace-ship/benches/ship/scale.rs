//! The `merge-scale` and `merge-partitions` rows: a fleet topic read back by the
//! streamed command export, `ringtrace export --format FORMAT kafka://BROKERS/TOPIC -o
//! FILE` (the command built beside the bench, with its `kafka` feature), a process an
//! export, timed and sampled as the `merge` row's streamed exports are
//! ([`stream_export`]: wall time, the child's CPU time, its peak resident memory
//! `VmHWM` sampled every millisecond, and a check that it wrote every record of the 4
//! hosts and 12 sources).
//!
//! Each topic is filled once, before the rounds, by the `merge` row's producer
//! ([`produce`]: 4 hosts × 3 sources, 64-byte incompressible payloads, batches of up to
//! 256 KiB keyed `host/source`, each source's batches in turn), replicated 3 times, and
//! deleted when the row ends or panics ([`Topics`]).
//!
//! * `merge-scale`: two topics of 4 partitions, `--scale-records SMALL,LARGE` records
//!   (1,000,000 and 10,000,000 by default), both of a fleet shipping 100,000 records a
//!   second (the small one's times span 10 s, the large one's 100 s). Each round exports, for Perfetto then CTF,
//!   the small topic and the large one back to back (the order alternating from round
//!   to round). Targets, for each format: the large export's peak resident memory at
//!   most 256 MiB; its peak over the small export's, taken inside the round, at most
//!   1.2x (memory does not grow with the topic); the large export at least 2 M
//!   records/s of wall time.
//! * `merge-partitions`: two topics of the same `--partitions-records` records
//!   (4,000,000 by default), one of 4 partitions and one of 1. Each round exports both
//!   into Perfetto back to back (order alternating). Target: the 4-partition export's
//!   records/s over the 1-partition one's, taken inside the round, at least 1.6x (the
//!   reader fetching and decoding partitions at once on the 2 cores); the reader's CPU
//!   ns per record of each beside it.
//!
//! Verdicts are medians over rounds (of the ratios taken inside each round where there
//! is a peer), with their spread and how many rounds met the target.

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};

use crate::explain::brokers_cpu;
use crate::merge::{produce, stream_export, Streamed, SPAN_NS, STREAM_PEAK_MIB, TARGET};
use crate::{load, median, spread, verdict, Bench, Topics};

/// The `merge-scale` row's records are this far apart in time (over all sources): its
/// fleet ships 100,000 records a second. What a read back holds is the records within
/// its reorder bound of each other (1 s: 100,000 records here), which grows with the
/// fleet's rate, not with the topic's length: the row keeps the rate and varies the
/// length.
const SCALE_RECORD_NS: u64 = 10_000;
/// Partitions of the `merge-scale` row's topics.
const SCALE_PARTITIONS: i32 = 4;
/// The target: the large export's peak over the small one's.
const PEAK_GROWTH: f64 = 1.2;
/// The target: records/s of the 4-partition export over the 1-partition one's.
const PARTITIONS_SPEEDUP: f64 = 1.6;
/// The formats exported: `--format`, the name printed, the output's extension.
const FORMATS: [(&str, &str, &str); 2] = [("perfetto", "Perfetto", "pftrace"), ("ctf", "CTF", "ctf")];

/// Fills a fresh topic of `partitions` partitions with `n` records and prints what
/// went where (the partitioner places the 12 `host/source` keys; a partition's share
/// bounds what reading partitions at once can gain).
fn fill(brokers: &str, topics: &mut Topics, what: &str, partitions: i32, n: u64, span_ns: u64) -> String {
    let t = topics.create(what, partitions);
    let t0 = Instant::now();
    let (messages, bytes) = produce(brokers, &t, n, span_ns);
    println!(
        "{what}: {n} records in {partitions} partition(s), {messages} batches ({:.1} MB before lz4) produced in {:.1} s; \
         batches a partition: {}",
        bytes as f64 / 1e6,
        t0.elapsed().as_secs_f64(),
        batches(brokers, &t, partitions).iter().map(i64::to_string).collect::<Vec<_>>().join(" ")
    );
    t
}

/// Messages (batches) in each partition of `topic`: its high watermarks.
fn batches(brokers: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "ringtrace-bench-watermarks")
        .create()
        .expect("consumer");
    (0..partitions)
        .map(|p| {
            let (lo, hi) = c.fetch_watermarks(topic, p, Duration::from_secs(30)).expect("watermarks");
            hi - lo
        })
        .collect()
}

/// One export's line: records/s, CPU ns/record, peak MiB.
fn cells(n: u64, x: &Streamed) -> String {
    format!("{:>12.0} {:>9.0} {:>9.1}", n as f64 / x.wall, x.cpu * 1e9 / n as f64, mib(x))
}

fn mib(x: &Streamed) -> f64 {
    x.peak_kib as f64 / 1024.0
}

/// The median of `v`, its spread and how many of its values `met`, as printed.
fn summary(v: &[f64], met: impl Fn(f64) -> bool, digits: usize) -> (f64, String) {
    let (lo, hi) = spread(v);
    let m = median(v.to_vec());
    let k = v.iter().filter(|&&x| met(x)).count();
    (m, format!("rounds {lo:.digits$} to {hi:.digits$}, {k}/{} met", v.len()))
}

/// The `merge-scale` row: `small` and `large` records, `bench.rounds` rounds.
pub fn run_scale(bench: &Bench, small: u64, large: u64) {
    let (brokers, rounds) = (bench.brokers.as_str(), bench.rounds);
    let mut topics = Topics::new(brokers);
    // A fleet's topic grows longer at its fleet's rate: both topics at one rate.
    let ts = fill(brokers, &mut topics, "merge-scale", SCALE_PARTITIONS, small, small * SCALE_RECORD_NS);
    let tl = fill(brokers, &mut topics, "merge-scale", SCALE_PARTITIONS, large, large * SCALE_RECORD_NS);
    println!(
        "merge-scale: {rounds} rounds of `ringtrace export --format perfetto|ctf kafka://...` of {small} then {large} \
         records (order alternating); CPU = the command's"
    );
    println!(
        "{:<6} {:<9} {:>9} {:>12} {:>9} {:>9} {:>11} {:>5}",
        "round", "format", "records", "records/s", "CPU ns/r", "peak MiB", "peak ratio", "load"
    );
    // For each round and format: the small export's figures, the large one's.
    let mut rows: Vec<[(Streamed, Streamed); 2]> = Vec::new();
    for round in 0..rounds {
        let load = load();
        let mut row = Vec::new();
        for (format, _, ext) in FORMATS {
            let out = bench.dir.join(format!("scale.{ext}"));
            let export = |t: &str, n: u64| stream_export(bench, t, format, &out, n);
            let (s, l) = if round % 2 == 0 {
                let s = export(&ts, small);
                (s, export(&tl, large))
            } else {
                let l = export(&tl, large);
                (export(&ts, small), l)
            };
            println!("{round:<6} {format:<9} {small:>9} {} {:>11} {load:>5}", cells(small, &s), "");
            println!("{:<6} {:<9} {large:>9} {} {:>10.2}x", "", "", cells(large, &l), mib(&l) / mib(&s));
            row.push((s, l));
        }
        rows.push([row[0], row[1]]);
    }
    drop(topics);
    println!("verdict (medians over {rounds} rounds):");
    for (k, (_, what, _)) in FORMATS.iter().enumerate() {
        let pairs: Vec<(Streamed, Streamed)> = rows.iter().map(|r| r[k]).collect();
        let peaks: Vec<f64> = pairs.iter().map(|(_, l)| mib(l)).collect();
        let (peak, peak_s) = summary(&peaks, |x| x <= STREAM_PEAK_MIB as f64, 1);
        let growth: Vec<f64> = pairs.iter().map(|(s, l)| mib(l) / mib(s)).collect();
        let (g, g_s) = summary(&growth, |x| x <= PEAK_GROWTH, 2);
        let rates: Vec<f64> = pairs.iter().map(|(_, l)| large as f64 / l.wall).collect();
        let (rate, rate_s) = summary(&rates, |x| x >= TARGET, 0);
        let small_rate = median(pairs.iter().map(|(s, _)| small as f64 / s.wall).collect());
        let small_peak = median(pairs.iter().map(|(s, _)| mib(s)).collect());
        let ns = |n: u64, f: &dyn Fn(&(Streamed, Streamed)) -> f64| {
            median(pairs.iter().map(|p| f(p) * 1e9 / n as f64).collect())
        };
        println!(
            "  {what}, {large} records: peak resident {peak:.1} MiB ({peak_s}; target <= {STREAM_PEAK_MIB} MiB): {}",
            verdict(peak <= STREAM_PEAK_MIB as f64)
        );
        println!(
            "  {what}, peak of {large} / peak of {small} records: {g:.2}x ({g_s}; target <= {PEAK_GROWTH}x): {}",
            verdict(g <= PEAK_GROWTH)
        );
        println!(
            "  {what}, {large} records: {rate:.0} records/s ({rate_s}; target >= {TARGET:.0}): {}; {:.0} CPU ns/record",
            verdict(rate >= TARGET),
            ns(large, &|p| p.1.cpu)
        );
        println!(
            "  {what}, {small} records: {small_rate:.0} records/s, {:.0} CPU ns/record, peak resident {small_peak:.1} MiB",
            ns(small, &|p| p.0.cpu)
        );
    }
}

/// The `merge-partitions` row: `n` records in 4 partitions and in 1, `bench.rounds`
/// rounds.
pub fn run_partitions(bench: &Bench, n: u64) {
    let (brokers, rounds) = (bench.brokers.as_str(), bench.rounds);
    let mut topics = Topics::new(brokers);
    let t4 = fill(brokers, &mut topics, "merge-partitions", 4, n, SPAN_NS);
    let t1 = fill(brokers, &mut topics, "merge-partitions", 1, n, SPAN_NS);
    println!(
        "merge-partitions: {rounds} rounds of `ringtrace export --format perfetto kafka://...` of {n} records in 4 \
         partitions and in 1 (order alternating); CPU = the command's"
    );
    println!(
        "{:<6} {:<11} {:>12} {:>9} {:>9} {:>9} {:>5} {:>9}",
        "round", "partitions", "records/s", "CPU ns/r", "peak MiB", "4p / 1p", "load", "brokers"
    );
    let out = bench.dir.join("partitions.pftrace");
    let mut rows: Vec<(Streamed, Streamed)> = Vec::new();
    // The brokers' CPU seconds during each export (with `--kafka-dir`): 4 partitions', 1's.
    let mut brokers: Vec<(f64, f64)> = Vec::new();
    for round in 0..rounds {
        let load = load();
        let export = |t: &str| {
            let b0 = brokers_cpu();
            let x = stream_export(bench, t, "perfetto", &out, n);
            (x, b0.zip(brokers_cpu()).map_or(f64::NAN, |(a, b)| b - a))
        };
        let ((four, b4), (one, b1)) = if round % 2 == 0 {
            let four = export(&t4);
            (four, export(&t1))
        } else {
            let one = export(&t1);
            (export(&t4), one)
        };
        let b = |s: f64| format!("{:>9.0}", s * 1e9 / n as f64);
        println!("{round:<6} {:<11} {} {:>9} {load:>5} {}", 4, cells(n, &four), "", b(b4));
        println!("{:<6} {:<11} {} {:>8.2}x {:>5} {}", "", 1, cells(n, &one), one.wall / four.wall, "", b(b1));
        rows.push((four, one));
        brokers.push((b4, b1));
    }
    drop(topics);
    let ratios: Vec<f64> = rows.iter().map(|(four, one)| one.wall / four.wall).collect();
    let (m, m_s) = summary(&ratios, |x| x >= PARTITIONS_SPEEDUP, 2);
    let rate = |f: &dyn Fn(&(Streamed, Streamed)) -> f64| median(rows.iter().map(|r| n as f64 / f(r)).collect());
    let ns = |f: &dyn Fn(&(Streamed, Streamed)) -> f64| median(rows.iter().map(|r| f(r) * 1e9 / n as f64).collect());
    println!("verdict (medians over {rounds} rounds):");
    println!(
        "  read back into Perfetto, 4 partitions / 1 partition: {m:.2}x records/s ({m_s}; target >= \
         {PARTITIONS_SPEEDUP}x): {}",
        verdict(m >= PARTITIONS_SPEEDUP)
    );
    println!(
        "  4 partitions {:.0} records/s, {:.0} CPU ns/record; 1 partition {:.0} records/s, {:.0} CPU ns/record",
        rate(&|r| r.0.wall),
        ns(&|r| r.0.cpu),
        rate(&|r| r.1.wall),
        ns(&|r| r.1.cpu)
    );
    // What the two cores allow: the reader's CPU and the brokers' for each record.
    let b = |f: fn(&(f64, f64)) -> f64| median(brokers.iter().map(|x| f(x) * 1e9 / n as f64).collect());
    let (b4, b1) = (b(|x| x.0), b(|x| x.1));
    if b4.is_finite() && b1.is_finite() {
        let (c4, c1) = (ns(&|r| r.0.cpu) + b4, ns(&|r| r.1.cpu) + b1);
        println!(
            "  brokers' CPU ns/record: 4 partitions {b4:.0}, 1 partition {b1:.0}; reader and brokers together {c4:.0} \
             and {c1:.0} ns a record, so 2 cores read at most {:.0} and {:.0} records/s",
            2e9 / c4,
            2e9 / c1
        );
    }
}
