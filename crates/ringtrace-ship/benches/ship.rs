//! Shipping into Kafka: `ringtrace-ship ship` against the pipeline a user could build
//! today from the same pieces, `ringtrace consume --format json | kcat -P` (a message
//! per line), in paired rounds.
//!
//! Each round writes the same records (64-byte payloads, `--records`, 2,000,000 by
//! default) from a thread of this process into a fresh 4 MiB ring file, drained by
//! each contender into a fresh topic of 6 partitions (replication 3, lz4, `acks=all`,
//! idempotent producers on both sides) until the writer is gone and all is
//! acknowledged. The two run back to back, in alternating order. A row gives the wall
//! time and the CPU time of the contender's processes (their `cutime + cstime`, from
//! this process's `/proc/self/stat`, 10 ms ticks), as records per second and CPU ns per
//! record. The verdicts are medians over rounds of ratios taken within each round:
//! records per CPU-second of the agent (target: at least 2 M/s), and that figure over the
//! pipeline's (target: at least 5x).
//!
//! Needs a cluster (`bash scripts/kafka.sh start DIR`; brokers from
//! `RINGTRACE_KAFKA_BROKERS` or `--brokers`), `kcat` (Debian: `kcat`), and the
//! `ringtrace` command built beside this bench (`cargo build --release -p
//! ringtrace-cli`). Run: `cargo bench -p ringtrace-ship --bench ship -- [--rounds N] [--records N]
//! [--only ship]`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use ringtrace::{MpscRing, Wakeup};

/// Clock ticks per second of `/proc` CPU times (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
const TICKS: f64 = 100.0;

/// CPU seconds of this process's waited-for children (and theirs): `cutime + cstime`.
fn children_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name (which may hold spaces), from field 3 on.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[13].parse::<u64>().unwrap() + f[14].parse::<u64>().unwrap();
    ticks as f64 / TICKS
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn topic(brokers: &str, what: &str) -> String {
    let nonce = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let name = format!("ringtrace-bench-{what}-{nonce}");
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", brokers).create().expect("admin client");
    let t = NewTopic::new(&name, 6, TopicReplication::Fixed(3));
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for r in futures_executor::block_on(admin.create_topics([&t], &opts)).expect("create_topics") {
        r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
    }
    name
}

/// One contender's run: wall seconds and CPU seconds of its processes.
struct Run {
    wall: f64,
    cpu: f64,
}

/// Writes `n` records into a fresh ring at `ring`, while `drain` (spawned after the
/// writer attached) drains it; returns when the drain's processes exited.
fn run(ring: &Path, n: u64, drain: impl FnOnce() -> Vec<std::process::Child>) -> Run {
    let _ = std::fs::remove_file(ring);
    let r = MpscRing::builder(4 << 20).create(ring).expect("ring file");
    let mut p = r.producer().expect("producer");
    let cpu0 = children_cpu();
    let t0 = Instant::now();
    let children = drain();
    let writer = std::thread::spawn(move || {
        let mut rec = [0u8; 64];
        for i in 0..n {
            rec[..8].copy_from_slice(&i.to_le_bytes());
            p.output_wait(&rec, Wakeup::Default, Some(Duration::from_secs(120))).expect("room within 2 minutes");
        }
    });
    writer.join().unwrap();
    for mut c in children {
        let status = c.wait().unwrap();
        assert!(status.success(), "a drain process exited with {status}");
    }
    let wall = t0.elapsed().as_secs_f64();
    Run { wall, cpu: children_cpu() - cpu0 }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let brokers = arg("--brokers").or_else(|| std::env::var("RINGTRACE_KAFKA_BROKERS").ok()).unwrap_or_else(|| {
        eprintln!("no cluster: set RINGTRACE_KAFKA_BROKERS or --brokers (bash scripts/kafka.sh start DIR)");
        std::process::exit(2)
    });
    let rounds: usize = arg("--rounds").map_or(5, |s| s.parse().expect("--rounds N"));
    // `--only ship`: the agent's rows alone (for profiling it), no verdict.
    let only = arg("--only");
    let n: u64 = arg("--records").map_or(2_000_000, |s| s.parse().expect("--records N"));
    let exe = std::env::current_exe().unwrap();
    let bin_dir = exe.parent().and_then(Path::parent).expect("target/release");
    let ringtrace: PathBuf = bin_dir.join("ringtrace");
    assert!(ringtrace.exists(), "{} missing: cargo build --release -p ringtrace-cli", ringtrace.display());
    let agent = env!("CARGO_BIN_EXE_ringtrace-ship");
    let dir = std::env::temp_dir().join(format!("ringtrace-ship-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ring = dir.join("bench.ring");

    println!("{n} records of 64 bytes a round, {rounds} rounds; CPU = the drain's processes");
    println!("{:<6} {:<26} {:>10} {:>12} {:>14}", "round", "contender", "wall s", "records/s", "CPU ns/record");
    let (mut per_cpu, mut ratio) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let ship = |ring: &Path| {
            let t = topic(&brokers, "ship");
            let state = dir.join("agent.state");
            let _ = std::fs::remove_file(&state);
            run(ring, n, || {
                let c = Command::new(agent)
                    .args([
                        "ship",
                        "--brokers",
                        &brokers,
                        "--topic",
                        &t,
                        "--host",
                        "bench",
                        "--until-disconnected",
                        "--state",
                    ])
                    .arg(&state)
                    .arg(ring)
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("ringtrace-ship");
                vec![c]
            })
        };
        let naive = |ring: &Path| {
            let t = topic(&brokers, "kcat");
            run(ring, n, || {
                let mut consume = Command::new(&ringtrace)
                    .args(["consume", "--format", "json"])
                    .arg(ring)
                    .stdout(Stdio::piped())
                    .spawn()
                    .expect("ringtrace consume");
                let out = consume.stdout.take().unwrap();
                let kcat = Command::new("kcat")
                    .args(["-P", "-b", &brokers, "-t", &t])
                    .args([
                        "-X",
                        "enable.idempotence=true",
                        "-X",
                        "acks=all",
                        "-X",
                        "compression.type=lz4",
                        "-X",
                        "linger.ms=5",
                    ])
                    .stdin(out)
                    .spawn()
                    .expect("kcat (Debian: apt-get install kcat)");
                vec![consume, kcat]
            })
        };
        if only.as_deref() == Some("ship") {
            let a = ship(&ring);
            println!(
                "{round:<6} {:<26} {:>10.2} {:>12.0} {:>14.0}",
                "ringtrace-ship",
                a.wall,
                n as f64 / a.wall,
                a.cpu * 1e9 / n as f64
            );
            continue;
        }
        let (a, b) = if round % 2 == 0 {
            let a = ship(&ring);
            (a, naive(&ring))
        } else {
            let b = naive(&ring);
            (ship(&ring), b)
        };
        for (name, r) in [("ringtrace-ship", &a), ("consume | kcat -P", &b)] {
            println!(
                "{round:<6} {name:<26} {:>10.2} {:>12.0} {:>14.0}",
                r.wall,
                n as f64 / r.wall,
                r.cpu * 1e9 / n as f64
            );
        }
        let ship_rate = n as f64 / a.cpu.max(1.0 / TICKS);
        let naive_rate = n as f64 / b.cpu.max(1.0 / TICKS);
        per_cpu.push(ship_rate);
        ratio.push(ship_rate / naive_rate);
    }
    let _ = std::fs::remove_dir_all(&dir);
    if per_cpu.is_empty() {
        return;
    }
    let (m, r) = (median(per_cpu), median(ratio));
    println!("verdicts (medians over {rounds} rounds):");
    println!(
        "  records shipped per agent CPU-second: {m:.0} (target >= 2,000,000): {}",
        if m >= 2e6 { "met" } else { "MISSED" }
    );
    println!(
        "  per CPU-second, agent / consume|kcat: {r:.2}x (target >= 5x): {}",
        if r >= 5.0 { "met" } else { "MISSED" }
    );
}
