//! Channel files into a real Kafka cluster: writer threads, each with a slot of a
//! channel file, fill it with checksummed records; the agent (the `ringtrace-ship`
//! binary) ships every slot as a source of its own, `PATH#SLOT`, its records' times
//! from their stamps; the fleet reader reads the topic back.
//!
//! The cluster is the test command's (`scripts/kafka.sh`), named by
//! `RINGTRACE_KAFKA_BROKERS`; without it these tests skip, unless `RINGTRACE_REQUIRE`
//! names `kafka`.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;
use ringtrace::channel::ChannelProducer;
use ringtrace::clock::Monotonic;
use ringtrace::config::Discard;
use ringtrace::{Channel, ReserveError, Wakeup};
use ringtrace_ship::fleet::Fleet;

fn wall_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// Every how many records a writer notes the wall clock.
const NOTE_EVERY: u64 = 997;

/// Writes records `0..n` of (h, s) through `p`, waiting for room (two minutes at
/// most a record, the agent may be down); returns the wall-clock times it wrote some
/// of them at, `(i, before, after)`. Dropping the producer at the end leaves the slot.
fn write(mut p: ChannelProducer<Discard, Monotonic>, h: u32, s: u32, n: u64) -> Vec<(u64, u64, u64)> {
    let mut notes = Vec::new();
    for i in 0..n {
        let deadline = Instant::now() + Duration::from_secs(120);
        let before = wall_ns();
        loop {
            match p.output(&record(h, s, i), Wakeup::Default) {
                Ok(()) => break,
                Err(ReserveError::Full { .. }) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(e) => panic!("writer {s}: record {i}: {e}"),
            }
        }
        if i % NOTE_EVERY == 0 {
            notes.push((i, before, wall_ns()));
        }
    }
    notes
}

/// Writers on slots of a new channel file at `path` of `slots` slots, `writers` of
/// them taken before any writes (so the agent cannot see the channel finished before
/// the last writer began).
fn writers(path: &Path, slots: u32, writers: u32, h: u32, n: u64) -> Vec<JoinHandle<Vec<(u64, u64, u64)>>> {
    let channel = Channel::<Discard, Monotonic>::builder(1 << 18).max_producers(slots).create(path, Monotonic).unwrap();
    let producers: Vec<_> = (0..writers).map(|_| channel.producer().unwrap()).collect();
    (producers.into_iter().enumerate()).map(|(s, p)| std::thread::spawn(move || write(p, h, s as u32, n))).collect()
}

/// Every writer's records read back once, in order, from one slot each; times
/// monotone per slot and within `slack_ns` of when they were written.
fn check(fleet: &Fleet, host: &str, path: &Path, h: u32, notes: &[Vec<(u64, u64, u64)>], n: u64, slack_ns: u64) {
    let prefix = format!("{}#", path.display());
    let mut writer_of_slot = BTreeMap::new();
    for (_, source) in fleet.sources().filter(|(h, s)| *h == host && s.starts_with(&prefix)) {
        let entries: Vec<_> = fleet.source(host, source).collect();
        if entries.is_empty() {
            continue;
        }
        let s = u32::from_le_bytes(entries[0].payload[4..8].try_into().unwrap());
        assert!(writer_of_slot.insert(s, source.to_string()).is_none(), "writer {s} in two slots");
        assert_eq!(entries.len() as u64, n, "{source}: writer {s}'s records, each once");
        for (i, e) in entries.iter().enumerate() {
            assert_eq!(e.payload, record(h, s, i as u64), "{source}: record {i} (seq {})", e.seq);
        }
        assert!(entries.windows(2).all(|w| w[0].time_ns <= w[1].time_ns), "{source}: times in order");
        for &(i, before, after) in &notes[s as usize] {
            let t = entries[i as usize].time_ns;
            assert!(
                t + slack_ns >= before && t <= after + slack_ns,
                "{source}: record {i} at {t}, written between {before} and {after}"
            );
        }
    }
    assert_eq!(writer_of_slot.len(), notes.len(), "every writer's slot shipped: {writer_of_slot:?}");
}

/// 4 writer threads on a channel file of 6 slots (2 never used), 400,000 records in
/// all: every record read back once, each slot in order, its times monotone and
/// within a few ms of the writing.
#[test]
fn writer_threads_of_a_channel_file_deliver_every_record_once_in_order_with_their_times() {
    let Some(brokers) = brokers() else { return };
    let per_writer = 100_000u64;
    let topic = create_topic(&brokers, "channel", 6);
    let dir = TempDir::new("channel");
    let path = dir.path().join("app.chan");
    let writers = writers(&path, 6, 4, 3, per_writer);
    let agent =
        agent(&brokers, &topic, "host3", &dir.path().join("agent.state"), std::slice::from_ref(&path)).spawn().unwrap();
    let notes: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let (fleet, report) = finish(Vec::new(), agent, &brokers, &topic);
    let stats = fleet.stats();
    eprintln!("channel: last agent: {report}; read back: {stats:?}");
    assert_eq!((stats.damaged, stats.missing, stats.duplicates), (0, 0, 0));
    assert_eq!(stats.records, per_writer * 4);
    check(&fleet, "host3", &path, 3, &notes, per_writer, 5_000_000);
}

/// The agent SIGKILLed at several moments and restarted on the same state file while
/// 3 threads write into a channel file: every record read back once after the reader
/// drops the copies.
#[test]
fn an_agent_of_a_channel_killed_and_restarted_loses_nothing() {
    let Some(brokers) = brokers() else { return };
    let per_writer = 150_000u64;
    let topic = create_topic(&brokers, "channel-killed", 4);
    let dir = TempDir::new("channel-killed");
    let path = dir.path().join("app.chan");
    let state = dir.path().join("agent.state");
    let writers = writers(&path, 4, 3, 8, per_writer);
    let kills = kill_mid_run(&state, &[0, 500, 3_000, 10_000], || {
        agent(&brokers, &topic, "host8", &state, std::slice::from_ref(&path)).spawn().unwrap()
    });
    let last = agent(&brokers, &topic, "host8", &state, std::slice::from_ref(&path)).spawn().unwrap();
    let notes: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let (fleet, report) = finish(Vec::new(), last, &brokers, &topic);
    let stats = fleet.stats();
    eprintln!("channel: killed {kills} time(s); last agent: {report}; read back: {stats:?}");
    assert!(kills >= 2, "the agent was killed while it ran");
    assert_eq!((stats.damaged, stats.missing), (0, 0));
    assert_eq!(stats.records, per_writer * 3);
    // A record's time is its stamp's, whichever agent shipped it: within a few ms of
    // its writing even when it waited in the ring for an agent to restart.
    check(&fleet, "host8", &path, 8, &notes, per_writer, 5_000_000);
}
