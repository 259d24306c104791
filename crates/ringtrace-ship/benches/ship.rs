//! Shipping into Kafka: five rows, each against a real cluster.
//!
//! * `ship` ([`throughput`]): `ringtrace-ship ship` against the pipeline a user could
//!   build today from the same pieces, `ringtrace consume --format json | kcat -P` (a
//!   message per line), in paired rounds: records per CPU-second of the agent (target:
//!   at least 2 M/s), and that figure over the pipeline's (target: at least 5x).
//! * `latency` ([`latency`]): a real agent process on one ring fed at a steady 100,000
//!   records/s, followed live by a fleet reader ([`ringtrace_ship::fleet::Follow`]):
//!   the time from a record's commit into the ring to its arrival at the reader, p50,
//!   p99, p99.9 and max per round (target: p99 under 250 ms), split at the moment the
//!   agent drained the record.
//! * `merge` ([`merge`]): the fleet reader merging 4 hosts of 3 sources each into one
//!   Perfetto trace: `fleet::read_topic`, then `fleet::export::perfetto` of
//!   `Fleet::timeline` into a file (target: at least 2 M records/s for both), and the
//!   same topic streamed back by `ringtrace export kafka://` into Perfetto and CTF.
//! * `merge-scale` ([`scale`]): the streamed export of topics of 1,000,000 and
//!   10,000,000 records (4 partitions) into Perfetto and CTF, back to back in each
//!   round: peak resident memory (targets: at most 256 MiB, and the large topic's at
//!   most 1.2x the small one's) and records/s (target: at least 2 M/s).
//! * `merge-partitions` ([`scale`]): the streamed export into Perfetto of the same
//!   records in 4 partitions and in 1, back to back in each round: the ratio of their
//!   records/s (target: at least 1.6x) and the reader's CPU ns per record.
//!
//! Every row reports wall time and CPU time beside it, as CPU ns per record. Where a
//! target has a peer (`ship`, `merge-scale`'s peak ratio, `merge-partitions`), its
//! verdict is the median over rounds of the ratios taken within each round; the other
//! verdicts are medians of the per-round figures, with their spread and how many rounds
//! met the target. Speed is measured and printed here,
//! never asserted; what is checked is that the records arrived (`merge` asserts every
//! one, once; `latency` reports any that did not, and counts the ones the ring
//! refused), since a bench that lost records would time something else. No wait is
//! bounded by counting iterations: every wait has a monotonic deadline.
//!
//! Needs a cluster (`bash scripts/kafka.sh start DIR`; brokers from
//! `RINGTRACE_KAFKA_BROKERS` or `--brokers`). The `ship` row also needs `kcat`
//! (Debian: `kcat`) and the `ringtrace` command built beside this bench (`cargo build
//! --release -p ringtrace-cli`). Each row creates its topics (6 partitions, replication
//! 3; the cluster does not create topics on use; `merge-scale` and `merge-partitions`
//! choose their own partitions) and deletes them when done, or when it panics.
//!
//! Run: `cargo bench -p ringtrace-ship --bench ship -- [--rounds N]
//! [--only ship|latency|merge|merge-scale|merge-partitions] [--records N] [--rate N]
//! [--seconds S] [--merge-records N] [--explain [--kafka-dir DIR]]
//! [--scale-records SMALL,LARGE] [--partitions-records N]`. Without `--only`, all five
//! rows run, in that order; `--rounds` (5 by default) applies to each. `--records` is the `ship` row's records a round, `--rate` and `--seconds`
//! the `latency` row's records a second and measured seconds a round (1 s of warm-up
//! comes before), `--merge-records` the `merge` row's records. `--explain` adds the
//! `merge` row's experiments ([`explain`]: what its time goes to), with the brokers' CPU
//! when `--kafka-dir` names the directory `scripts/kafka.sh` started them in.
//! `--scale-records` is the `merge-scale` row's two topics' records (1,000,000 and
//! 10,000,000 by default), `--partitions-records` the `merge-partitions` row's
//! (4,000,000 by default). The streamed rows need the `ringtrace` command built with
//! its `kafka` feature (`cargo build --release -p ringtrace-cli --features kafka`).

// The rows, one file each under `benches/ship/` (not `benches/ship/main.rs`, which cargo
// would take for a bench target of its own).
#[path = "ship/explain.rs"]
mod explain;
#[path = "ship/latency.rs"]
mod latency;
#[path = "ship/merge.rs"]
mod merge;
#[path = "ship/scale.rs"]
mod scale;
#[path = "ship/throughput.rs"]
mod throughput;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

/// Clock ticks per second of `/proc` CPU times (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
const TICKS: f64 = 100.0;

/// The rows `--only` selects.
const ROWS: [&str; 5] = ["ship", "latency", "merge", "merge-scale", "merge-partitions"];

/// What every row is given.
#[derive(Debug)]
struct Bench {
    /// Kafka's bootstrap servers.
    brokers: String,
    /// Rounds of each row.
    rounds: usize,
    /// A directory of this run's files (ring files, state files, traces).
    dir: PathBuf,
}

/// The run's directory goes with it, at the end or while a panic unwinds (a streamed
/// export of 10,000,000 records writes about 800 MB there).
impl Drop for Bench {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// CPU seconds of this process's waited-for children (and theirs): `cutime + cstime`.
fn children_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name (which may hold spaces), from field 3 on.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[13].parse::<u64>().unwrap() + f[14].parse::<u64>().unwrap();
    ticks as f64 / TICKS
}

/// CPU time of this process so far, every thread of it (`CLOCK_PROCESS_CPUTIME_ID`,
/// to the nanosecond): this bench's own threads and librdkafka's.
fn process_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Wall-clock (`CLOCK_REALTIME`) nanoseconds since the Unix epoch: the clock the agent
/// stamps records with.
fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// The value after `name` on the command line.
fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

/// Whether the flag `name` is on the command line.
fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

/// The value of option `name` parsed, or `default`.
fn arg_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    arg(name).map_or(default, |s| s.parse().unwrap_or_else(|_| panic!("{name}: {s:?} is not a number")))
}

fn admin(brokers: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new().set("bootstrap.servers", brokers).create().expect("admin client")
}

/// Partitions of the rows' topics, but for the `merge-scale` and `merge-partitions`
/// rows' own.
const PARTITIONS: i32 = 6;

/// Creates a fresh topic `ringtrace-bench-WHAT-NONCE` of `partitions` partitions,
/// replicated 3 times, and returns its name.
fn topic(brokers: &str, what: &str, partitions: i32) -> String {
    let nonce = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let name = format!("ringtrace-bench-{what}-{nonce}");
    let t = NewTopic::new(&name, partitions, TopicReplication::Fixed(3));
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for r in futures_executor::block_on(admin(brokers).create_topics([&t], &opts)).expect("create_topics") {
        r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
    }
    name
}

/// A row's topics, deleted when this is dropped: at the row's end, and while a panic
/// unwinds (a topic of 10,000,000 records takes about 3 GB of the cluster's disks).
struct Topics<'a> {
    brokers: &'a str,
    names: Vec<String>,
}

impl<'a> Topics<'a> {
    fn new(brokers: &'a str) -> Topics<'a> {
        Topics { brokers, names: Vec::new() }
    }

    /// A fresh topic (see [`topic`]), deleted with the others.
    fn create(&mut self, what: &str, partitions: i32) -> String {
        let name = topic(self.brokers, what, partitions);
        self.names.push(name.clone());
        name
    }
}

impl Drop for Topics<'_> {
    fn drop(&mut self) {
        delete_topics(self.brokers, &self.names);
    }
}

/// Deletes the bench's `topics` (they would otherwise stay on the cluster's disks for
/// the default retention of 7 days); a failure is told, not fatal.
fn delete_topics(brokers: &str, topics: &[String]) {
    if topics.is_empty() {
        return;
    }
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    match futures_executor::block_on(admin(brokers).delete_topics(&names, &opts)) {
        Ok(results) => {
            for r in results {
                if let Err((t, e)) = r {
                    eprintln!("deleting topic {t}: {e}");
                }
            }
        }
        Err(e) => eprintln!("deleting the bench's topics: {e}"),
    }
}

/// The median (the upper one of an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The smallest and largest of `v`, for the spread beside a median.
fn spread(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// The 1-minute load average, printed beside each round: the VM's two cores are shared
/// with the brokers and with other work, and a round run under load shows it.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split(' ').next().map(str::to_string))
        .unwrap_or_default()
}

/// "met" or "MISSED".
fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

fn main() {
    let brokers = arg("--brokers").or_else(|| std::env::var("RINGTRACE_KAFKA_BROKERS").ok()).unwrap_or_else(|| {
        eprintln!("no cluster: set RINGTRACE_KAFKA_BROKERS or --brokers (bash scripts/kafka.sh start DIR)");
        std::process::exit(2)
    });
    let rounds: usize = arg_or("--rounds", 5);
    assert!(rounds > 0, "--rounds: at least 1");
    // `--only ROW`: that row alone. `--only ship` gives the agent's rows without the
    // pipeline's or the verdicts (for profiling the agent).
    let only = arg("--only");
    if let Some(o) = only.as_deref().filter(|o| !ROWS.contains(o)) {
        eprintln!("--only {o}: one of {}", ROWS.join(", "));
        std::process::exit(2)
    }
    let runs = |row: &str| only.as_deref().is_none_or(|o| o == row);
    let sizes = arg("--scale-records").unwrap_or_else(|| "1000000,10000000".into());
    let parse = |s: &str| s.trim().parse::<u64>().ok().filter(|&n| n > 0);
    let Some((Some(small), Some(large))) = sizes.split_once(',').map(|(a, b)| (parse(a), parse(b))) else {
        eprintln!("--scale-records {sizes}: two record counts, SMALL,LARGE");
        std::process::exit(2)
    };
    let dir = std::env::temp_dir().join(format!("ringtrace-ship-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bench = Bench { brokers, rounds, dir };
    if runs("ship") {
        throughput::run(&bench, arg_or("--records", 2_000_000), only.is_some());
    }
    if runs("latency") {
        let rate = arg_or("--rate", 100_000);
        let seconds: f64 = arg_or("--seconds", 10.0);
        latency::run(&bench, rate, Duration::from_secs(1), Duration::from_secs_f64(seconds));
    }
    if runs("merge") {
        merge::run(&bench, arg_or("--merge-records", 2_000_000));
    }
    if runs("merge-scale") {
        scale::run_scale(&bench, small, large);
    }
    if runs("merge-partitions") {
        scale::run_partitions(&bench, arg_or("--partitions-records", 4_000_000));
    }
}

/// The `ringtrace` command built beside this bench (`target/release/ringtrace`).
fn ringtrace_command() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin_dir = exe.parent().and_then(Path::parent).expect("target/release");
    let ringtrace = bin_dir.join("ringtrace");
    assert!(ringtrace.exists(), "{} missing: cargo build --release -p ringtrace-cli", ringtrace.display());
    ringtrace
}
