//! The `ship` row: `ringtrace-ship ship` against `ringtrace consume --format json RING |
//! kcat -P -b BROKERS -t TOPIC -X enable.idempotence=true -X acks=all -X
//! compression.type=lz4 -X linger.ms=5` (a message per line; [`KCAT_OPTIONS`]), in
//! paired rounds. The row prints that command line and kcat's version first.
//!
//! Each round writes the same records (64-byte payloads: the record's index, 8 bytes
//! little-endian, then 56 zero bytes: `consume --format json` prints them as `data`
//! with `\u0000` escapes, about 400 bytes a line, or as 128 hex digits where an index
//! byte is not UTF-8; `--records`, 2,000,000 by default) from a thread of this process into a fresh 4 MiB ring file, drained by
//! each contender into a fresh topic of 6 partitions (replication 3, lz4, `acks=all`,
//! idempotent producers on both sides) until the writer is gone and all is
//! acknowledged. The two run back to back, in alternating order. A row gives the wall
//! time and the CPU time of the contender's processes (their `cutime + cstime`, from
//! this process's `/proc/self/stat`, 10 ms ticks), as records per second and CPU ns per
//! record. The verdicts are medians over rounds of ratios taken within each round:
//! records per CPU-second of the agent (target: at least 2 M/s), and that figure over the
//! pipeline's (target: at least 5x).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringtrace::{MpscRing, Wakeup};

use crate::{children_cpu, delete_topics, median, ringtrace_command, topic, verdict, Bench, PARTITIONS, TICKS};

/// kcat's options after `-P -b BROKERS -t TOPIC`: the agent's delivery settings (an
/// idempotent producer, `acks=all`, lz4) and a short linger, printed with the row.
const KCAT_OPTIONS: [&str; 8] =
    ["-X", "enable.idempotence=true", "-X", "acks=all", "-X", "compression.type=lz4", "-X", "linger.ms=5"];

/// One contender's run: wall seconds and CPU seconds of its processes.
struct Run {
    wall: f64,
    cpu: f64,
}

/// Writes `n` records into a fresh ring at `ring`, while `drain` (spawned after the
/// writer attached) drains it; returns when the drain's processes exited.
fn run_one(ring: &Path, n: u64, drain: impl FnOnce() -> Vec<std::process::Child>) -> Run {
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

/// Runs the row: `n` records a round. With `agent_only`, the agent's rounds alone and
/// no verdict.
pub fn run(bench: &Bench, n: u64, agent_only: bool) {
    let (brokers, rounds, dir) = (&bench.brokers, bench.rounds, &bench.dir);
    let ringtrace = if agent_only { None } else { Some(ringtrace_command()) };
    let agent = env!("CARGO_BIN_EXE_ringtrace-ship");
    let ring = dir.join("bench.ring");
    let mut topics = Vec::new();

    println!("ship: {n} records of 64 bytes a round, {rounds} rounds; CPU = the drain's processes");
    if !agent_only {
        println!(
            "pipeline: {} consume --format json RING | kcat -P -b BROKERS -t TOPIC {} (kcat {})",
            ringtrace.as_deref().unwrap().display(),
            KCAT_OPTIONS.join(" "),
            kcat_version()
        );
    }
    println!("{:<6} {:<26} {:>10} {:>12} {:>14}", "round", "contender", "wall s", "records/s", "CPU ns/record");
    let (mut per_cpu, mut ratio) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut ship = |ring: &Path| {
            let t = topic(brokers, "ship", PARTITIONS);
            topics.push(t.clone());
            let state = dir.join("agent.state");
            let _ = std::fs::remove_file(&state);
            run_one(ring, n, || {
                let c = Command::new(agent)
                    .args([
                        "ship",
                        "--to",
                        &format!("kafka://{brokers}/{t}"),
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
        if agent_only {
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
        let mut naive_topics = Vec::new();
        let mut naive = |ring: &Path| {
            let t = topic(brokers, "kcat", PARTITIONS);
            naive_topics.push(t.clone());
            run_one(ring, n, || {
                let mut consume = Command::new(ringtrace.as_deref().unwrap())
                    .args(["consume", "--format", "json"])
                    .arg(ring)
                    .stdout(Stdio::piped())
                    .spawn()
                    .expect("ringtrace consume");
                let out = consume.stdout.take().unwrap();
                let kcat = Command::new("kcat")
                    .args(["-P", "-b", brokers, "-t", &t])
                    .args(KCAT_OPTIONS)
                    .stdin(out)
                    .spawn()
                    .expect("kcat (Debian: apt-get install kcat)");
                vec![consume, kcat]
            })
        };
        let (a, b) = if round % 2 == 0 {
            let a = ship(&ring);
            (a, naive(&ring))
        } else {
            let b = naive(&ring);
            (ship(&ring), b)
        };
        topics.append(&mut naive_topics);
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
    let _ = std::fs::remove_file(&ring);
    delete_topics(brokers, &topics);
    if per_cpu.is_empty() {
        return;
    }
    let (m, r) = (median(per_cpu), median(ratio));
    println!("verdicts (medians over {rounds} rounds):");
    println!("  records shipped per agent CPU-second: {m:.0} (target >= 2,000,000): {}", verdict(m >= 2e6));
    println!("  per CPU-second, agent / consume|kcat: {r:.2}x (target >= 5x): {}", verdict(r >= 5.0));
}

/// kcat's version line from `kcat -V` (`Version 1.7.1 (JSON, ..., librdkafka 2.0.2`), up
/// to its list of built-in features.
fn kcat_version() -> String {
    let out = Command::new("kcat").arg("-V").output().expect("kcat (Debian: apt-get install kcat)");
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().find(|l| l.starts_with("Version")) {
        Some(l) => l.split(" builtin.features").next().unwrap_or(l).trim().to_string(),
        None => "version unknown".into(),
    }
}
