//! Faults of the cluster under a running agent: a broker SIGKILLed and started again,
//! and the whole cluster down for 10 seconds. These stop and start the test command's
//! nodes (`scripts/kafka.sh kill` and `revive`, on the cluster directory named by
//! `RINGTRACE_KAFKA_DIR`), so they run one at a time, in a test binary of their own.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use ringtrace::{ReserveError, Wakeup};

/// One fault at a time: the cluster is shared.
static CLUSTER: Mutex<()> = Mutex::new(());

/// The cluster directory, or `None` after [`skip`] (a failure where Kafka is required).
fn cluster_dir() -> Option<PathBuf> {
    match std::env::var("RINGTRACE_KAFKA_DIR") {
        Ok(d) if !d.is_empty() => Some(PathBuf::from(d)),
        _ => {
            skip(Feature::Kafka, "no cluster directory to stop nodes in: RINGTRACE_KAFKA_DIR is not set");
            None
        }
    }
}

/// `scripts/kafka.sh ACTION DIR NODE...`, which must succeed.
fn nodes(action: &str, dir: &PathBuf, which: &[u32]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/kafka.sh");
    let status =
        Command::new("bash").arg(script).arg(action).arg(dir).args(which.iter().map(u32::to_string)).status().unwrap();
    assert!(status.success(), "kafka.sh {action} {} {which:?}: {status}", dir.display());
}

/// Waits until the agent stored its first acknowledged round.
fn first_round(state: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !state.exists() {
        assert!(Instant::now() < deadline, "no round acknowledged in a minute");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A broker SIGKILLed while the agent ships, and started again: every record read back
/// once, in order.
#[test]
fn a_broker_killed_and_restarted_mid_run_loses_and_duplicates_nothing() {
    let Some(brokers) = brokers() else { return };
    let Some(dir) = cluster_dir() else { return };
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let per_source = 300_000u64;
    let topic = create_topic(&brokers, "broker-killed", 6);
    let tmp = TempDir::new("broker-killed");
    let rings: Vec<_> = (0..2).map(|s| tmp.path().join(format!("s{s}.ring"))).collect();
    let producers: Vec<_> = rings.iter().map(|p| ring_producer(p, 1 << 20)).collect();
    let state = tmp.path().join("agent.state");
    let agent = agent(&brokers, &topic, "host5", &state, &rings).spawn().unwrap();
    let writers: Vec<_> = (producers.into_iter().enumerate())
        .map(|(s, p)| std::thread::spawn(move || write_records(p, 5, s as u32, 0..per_source)))
        .collect();
    first_round(&state);
    nodes("kill", &dir, &[2]);
    std::thread::sleep(Duration::from_secs(2));
    nodes("revive", &dir, &[2]);
    let (fleet, report) = finish(writers, agent, &brokers, &topic);
    let stats = fleet.stats();
    eprintln!("broker 2 killed and revived; agent: {report}; read back: {stats:?}");
    assert_eq!((stats.damaged, stats.missing, stats.records), (0, 0, per_source * 2));
    for (s, ring) in rings.iter().enumerate() {
        check_source(&fleet, "host5", &ring.display().to_string(), 5, s as u32, 0..per_source);
    }
}

/// The whole cluster down for 10 seconds under writers that never wait: the agent's
/// rounds fail and are retried, the rings refuse what does not fit and count it, and
/// once the cluster is back every record the rings took is read back once, in order.
#[test]
fn the_whole_cluster_down_for_ten_seconds_is_waited_out_and_refusals_counted() {
    let Some(brokers) = brokers() else { return };
    let Some(dir) = cluster_dir() else { return };
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let topic = create_topic(&brokers, "cluster-down", 3);
    let tmp = TempDir::new("cluster-down");
    let ring = tmp.path().join("s0.ring");
    let mut p = ring_producer(&ring, 1 << 18);
    let state = tmp.path().join("agent.state");
    let mut cmd = agent(&brokers, &topic, "host6", &state, std::slice::from_ref(&ring));
    cmd.args(["--ack-timeout", "2"]);
    let agent = cmd.spawn().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop_w = stop.clone();
    // About 20,000 records a second, never waiting: a full ring refuses.
    let writer = std::thread::spawn(move || {
        let (mut taken, mut refused) = (Vec::new(), 0u64);
        let mut i = 0u64;
        while !stop_w.load(Relaxed) {
            match p.output(&record(6, 0, i), Wakeup::Default) {
                Ok(()) => taken.push(i),
                Err(ReserveError::Full { .. }) => refused += 1,
                Err(e) => panic!("record {i}: {e}"),
            }
            i += 1;
            if i % 20 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        (taken, refused)
    });
    first_round(&state);
    for n in 1..=3 {
        nodes("kill", &dir, &[n]);
    }
    std::thread::sleep(Duration::from_secs(10));
    nodes("revive", &dir, &[1, 2, 3]);
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Relaxed);
    let (taken, refused) = writer.join().unwrap();
    let out = wait_output(agent, Duration::from_secs(300));
    assert!(out.status.success(), "agent exited with {}", out.status);
    let report = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let fleet = read_all(&brokers, &topic);
    let stats = fleet.stats();
    eprintln!(
        "cluster down 10 s: {} records taken by the ring, {refused} refused; agent: {report}; read back: {stats:?}",
        taken.len()
    );
    assert!(refused > 0, "the ring filled while the cluster was down");
    assert!(report.contains(&format!("ring_lost={refused}")), "the agent reports the ring's refusals: {report}");
    let failed: u64 =
        report.split_whitespace().find_map(|w| w.strip_prefix("failed_rounds=")).unwrap().parse().unwrap();
    assert!(failed > 0, "rounds failed while the cluster was down: {report}");
    // The state file says the same, for `ringtrace-ship stat` and `ringtrace stat`.
    let saved = ringtrace_ship::state::State::load(&state).unwrap().expect("the state file");
    assert_eq!(saved.failed_rounds, failed, "{saved}");
    let counts = saved.sources[0].counts;
    assert_eq!((counts.ring_lost, counts.shipped), (refused, taken.len() as u64), "{saved}");
    let stat = Command::new(env!("CARGO_BIN_EXE_ringtrace-ship")).arg("stat").arg(&state).output().unwrap();
    let stat = String::from_utf8_lossy(&stat.stdout);
    assert!(stat.contains(&format!("{refused} refused by the ring")), "{stat}");
    assert_eq!((stats.damaged, stats.missing), (0, 0));
    let got: Vec<u64> = fleet.source("host6", &ring.display().to_string()).map(|e| e.seq).collect();
    assert_eq!(got.len(), taken.len(), "every record the ring took is read back once");
    for (e, &i) in fleet.source("host6", &ring.display().to_string()).zip(&taken) {
        assert_eq!(e.payload, record(6, 0, i), "seq {}", e.seq);
    }
}
