//! Flight recorders (overwrite-mode ring files) shipped into a real Kafka cluster:
//! producers that never wait overwrite what the agent has not read, and the agent
//! ships every other record once, under its own number, and counts the rest.
//!
//! The cluster is the test command's (see `fleet.rs`).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use common::*;
use ringtrace::{FlightRecorder, Wakeup};
use ringtrace_ship::state::State;

/// A writer thread filling a new flight recorder of 64 KiB at `path` with records
/// `0..n` of (h, s), a thousand at a time with `pause` between: faster than the agent
/// drains it at times, so producers overwrite.
fn flight_writer(path: &Path, h: u32, s: u32, n: u64, pause: Duration) -> JoinHandle<()> {
    let ring = FlightRecorder::builder(1 << 16).create(path).expect("flight recorder");
    let mut p = ring.producer().expect("producer");
    drop(ring);
    std::thread::spawn(move || {
        for i in 0..n {
            p.output(&record(h, s, i), Wakeup::Default).expect("an overwrite ring takes every record");
            if i % 1000 == 999 {
                std::thread::sleep(pause);
            }
        }
    })
}

/// The records of `source`, by sequence number, each checked to be the record of that
/// index: `(read, last seq)`.
fn check_numbers(fleet: &ringtrace_ship::fleet::Fleet, host: &str, source: &str, h: u32, s: u32) -> (u64, u64) {
    let mut seen = BTreeMap::new();
    for e in fleet.source(host, source) {
        assert_eq!(e.payload, record(h, s, e.seq), "{source}: seq {} carries another record", e.seq);
        assert!(seen.insert(e.seq, ()).is_none(), "{source}: seq {} twice after the reader's dedup", e.seq);
    }
    (seen.len() as u64, seen.keys().next_back().copied().unwrap_or(0))
}

/// One agent, two flight recorders: each record read back is the one its number says,
/// and the records read plus those the agent counted overwritten are all written.
#[test]
fn a_flight_recorders_records_arrive_under_their_numbers_and_the_overwritten_are_counted() {
    let Some(brokers) = brokers() else { return };
    let n = 200_000u64;
    let topic = create_topic(&brokers, "flight", 2);
    let dir = TempDir::new("flight");
    let rings: Vec<_> = (0..2).map(|s| dir.path().join(format!("f{s}.ring"))).collect();
    let writers: Vec<_> =
        rings.iter().enumerate().map(|(s, p)| flight_writer(p, 3, s as u32, n, Duration::from_millis(5))).collect();
    let state = dir.path().join("agent.state");
    let out = wait_output(agent(&brokers, &topic, "host3", &state, &rings).spawn().unwrap(), Duration::from_secs(300));
    assert!(out.status.success(), "the agent exited with {}", out.status);
    for w in writers {
        w.join().unwrap();
    }
    let report = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let fleet = read_all(&brokers, &topic);
    let saved = State::load(&state).unwrap().unwrap();
    let mut overwritten_total = 0;
    for (s, ring) in rings.iter().enumerate() {
        let name = ring.display().to_string();
        let (read, last) = check_numbers(&fleet, "host3", &name, 3, s as u32);
        let entry = saved.get(&name).unwrap();
        let overwritten = entry.counts.overwritten;
        eprintln!("{name}: {read} read back, {overwritten} overwritten before the agent read them, of {n}");
        assert_eq!(last, n - 1, "the last record written is shipped");
        assert_eq!(read + overwritten, n, "every record read back once or counted overwritten");
        assert_eq!((entry.consumed, entry.next_seq), (read, n));
        overwritten_total += overwritten;
    }
    assert_eq!(fleet.stats().duplicates, 0);
    assert!(report.contains(&format!("overwritten={overwritten_total}")), "{report}");
}

/// An agent SIGKILLed at several moments and restarted on its state file: every record
/// read back is still the one its number says, once; the agent's last state accounts
/// for every record written (read in its rounds, or overwritten), and the records read
/// back hold at least those it read.
#[test]
fn an_agent_killed_while_shipping_a_flight_recorder_ships_no_record_under_a_wrong_number() {
    let Some(brokers) = brokers() else { return };
    let n = 400_000u64;
    let topic = create_topic(&brokers, "flight-killed", 1);
    let dir = TempDir::new("flight-killed");
    let ring = dir.path().join("f.ring");
    // Writing lasts 4 s at least, for the agents killed meanwhile.
    let writer = flight_writer(&ring, 4, 0, n, Duration::from_millis(10));
    let state = dir.path().join("agent.state");
    let rings = [ring.clone()];
    let kills = kill_mid_run(&state, &[0, 300, 1_500, 4_000], || {
        agent(&brokers, &topic, "host4", &state, &rings).spawn().unwrap()
    });
    let out = wait_output(agent(&brokers, &topic, "host4", &state, &rings).spawn().unwrap(), Duration::from_secs(300));
    assert!(out.status.success(), "the agent exited with {}", out.status);
    writer.join().unwrap();
    let fleet = read_all(&brokers, &topic);
    let name = ring.display().to_string();
    let (read, last) = check_numbers(&fleet, "host4", &name, 4, 0);
    let saved = State::load(&state).unwrap().unwrap();
    let entry = saved.get(&name).unwrap();
    eprintln!(
        "killed {kills} time(s): {read} read back ({} copies dropped), {} overwritten, of {n}",
        fleet.stats().duplicates,
        entry.counts.overwritten
    );
    assert!(kills >= 2, "the agent was killed while it ran");
    assert_eq!(last, n - 1);
    assert_eq!(entry.consumed + entry.counts.overwritten, n, "{entry:?}");
    assert!(read >= entry.consumed && read <= n, "{read} read back, {entry:?}");
}
