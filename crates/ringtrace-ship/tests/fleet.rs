//! Delivery into a real Kafka cluster: agents (the `ringtrace-ship` binary, one
//! process per simulated host) drain ring files that writers in this process fill
//! with checksummed records, and the fleet reader reads the topic back.
//!
//! The cluster is the test command's (`scripts/kafka.sh`, three nodes, replication 3,
//! `min.insync.replicas=2`), named by `RINGTRACE_KAFKA_BROKERS`. Without it these tests
//! skip with a message, unless `RINGTRACE_REQUIRE` names `kafka` (the test command
//! sets it), where they fail.

mod common;

use std::time::{Duration, Instant};

use common::*;
use ringtrace_ship::fleet::ReadOptions;

/// 4 hosts x 3 sources, 2,000,000 records in all (`RINGTRACE_FLEET_RECORDS` to change),
/// compressed with lz4, zstd or not at all:
/// every record read back exactly once, each source in order, none damaged.
#[test]
fn four_hosts_of_three_sources_deliver_every_record_once_in_order() {
    let Some(brokers) = brokers() else { return };
    let total: u64 = std::env::var("RINGTRACE_FLEET_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000_000);
    let (hosts, per_host) = (4u32, 3u32);
    let per_source = total.div_ceil(u64::from(hosts * per_host));
    let topic = create_topic(&brokers, "fleet", 12);
    let dir = TempDir::new("fleet");
    let start = Instant::now();
    let mut writers = Vec::new();
    let mut agents = Vec::new();
    for h in 0..hosts {
        let rings: Vec<_> = (0..per_host).map(|s| dir.path().join(format!("h{h}-s{s}.ring"))).collect();
        let producers: Vec<_> = rings.iter().map(|p| ring_producer(p, 1 << 20)).collect();
        let mut cmd = agent(&brokers, &topic, &format!("host{h}"), &dir.path().join(format!("h{h}.state")), &rings);
        // Hosts 0 and 1 compress with lz4 (the default), 2 with zstd, 3 not at all.
        match h {
            2 => cmd.args(["--compression", "zstd"]),
            3 => cmd.args(["--compression", "none"]),
            _ => &mut cmd,
        };
        agents.push(cmd.spawn().unwrap());
        for (s, p) in producers.into_iter().enumerate() {
            writers.push(std::thread::spawn(move || write_records(p, h, s as u32, 0..per_source)));
        }
    }
    let lost: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(lost, 0, "writers wait for room: nothing is refused");
    for mut a in agents {
        let status = wait_child(&mut a, Duration::from_secs(300));
        assert!(status.success(), "agent exited with {status}");
    }
    let shipped = start.elapsed();
    let fleet = read_all(&brokers, &topic);
    let stats = fleet.stats();
    eprintln!("fleet: {} records shipped by 4 agents in {shipped:?}; read back: {stats:?}", per_source * 12);
    assert_eq!(stats.damaged, 0);
    assert_eq!(stats.missing, 0);
    assert_eq!(stats.duplicates, 0, "no agent failed or restarted: the idempotent producer sends no copy");
    assert_eq!(stats.records, per_source * 12);
    for h in 0..hosts {
        for s in 0..per_host {
            let name = dir.path().join(format!("h{h}-s{s}.ring")).display().to_string();
            check_source(&fleet, &format!("host{h}"), &name, h, s, 0..per_source);
        }
    }
    let merged: Vec<u64> = fleet.timeline().map(|e| e.time_ns).collect();
    assert_eq!(merged.len() as u64, per_source * 12);
    assert!(merged.windows(2).all(|w| w[0] <= w[1]), "the timeline is in time order");
    // Streamed back in bounded memory: the same records, counts and (none late) order;
    // and with a bound of 1 MiB held, which pauses the partitions ahead all the way.
    check_streamed(&fleet, &stream_all(&brokers, &topic, &ReadOptions::default()));
    check_streamed(&fleet, &stream_all(&brokers, &topic, &ReadOptions::default().max_held(1 << 20)));
}

/// An agent SIGKILLed at several moments and restarted on the same state file:
/// every record read back once after the reader drops the copies it counts.
#[test]
fn an_agent_killed_and_restarted_loses_nothing_and_its_copies_are_dropped() {
    let Some(brokers) = brokers() else { return };
    let per_source = 200_000u64;
    let topic = create_topic(&brokers, "killed", 4);
    let dir = TempDir::new("killed");
    let rings: Vec<_> = (0..2).map(|s| dir.path().join(format!("s{s}.ring"))).collect();
    let producers: Vec<_> = rings.iter().map(|p| ring_producer(p, 1 << 18)).collect();
    let state = dir.path().join("agent.state");
    let writers: Vec<_> = (producers.into_iter().enumerate())
        .map(|(s, p)| std::thread::spawn(move || write_records(p, 7, s as u32, 0..per_source)))
        .collect();
    // Each agent is killed a while after it stored an acknowledged round.
    let kills = kill_mid_run(&state, &[0, 300, 1_500, 4_000, 9_000, 20_000], || {
        agent(&brokers, &topic, "host7", &state, &rings).spawn().unwrap()
    });
    // The last agent runs until the writers are done and everything is shipped.
    let last = agent(&brokers, &topic, "host7", &state, &rings).spawn().unwrap();
    let (fleet, report) = finish(writers, last, &brokers, &topic);
    let stats = fleet.stats();
    eprintln!("killed {kills} time(s); last agent: {report}; read back: {stats:?}");
    assert!(kills >= 4, "the agent was killed while it ran");
    assert_eq!((stats.damaged, stats.missing), (0, 0));
    assert_eq!(stats.records, per_source * 2);
    for (s, ring) in rings.iter().enumerate() {
        check_source(&fleet, "host7", &ring.display().to_string(), 7, s as u32, 0..per_source);
    }
    // Streamed, the copies are dropped as they come: the same records and counts.
    check_streamed(&fleet, &stream_all(&brokers, &topic, &ReadOptions::default()));
}

/// Messages that are not batches, and damaged batches, in the topic: the reader skips
/// and counts each, and delivers the good ones.
#[test]
fn the_reader_skips_and_counts_foreign_and_damaged_messages() {
    let Some(brokers) = brokers() else { return };
    let topic = create_topic(&brokers, "hostile", 3);
    let good = batch_of("h", "src", 0, 10);
    let mut flipped = good.clone();
    flipped[60] ^= 1;
    let mut version = good.clone();
    version[4] = 9;
    let messages: Vec<Vec<u8>> = vec![
        b"{\"another\": \"producer\"}".to_vec(),
        good[..good.len() - 3].to_vec(),
        flipped,
        version,
        Vec::new(),
        good.clone(),
        batch_of("h", "src", 10, 5),
    ];
    produce_raw(&brokers, &topic, &messages);
    let mut warnings = Vec::new();
    let fleet =
        ringtrace_ship::fleet::read_topic(&brokers, &topic, Duration::from_secs(60), |w| warnings.push(w)).unwrap();
    let s = fleet.stats();
    assert_eq!((s.damaged, s.batches, s.records, s.duplicates, s.missing), (5, 2, 15, 0, 0), "{warnings:#?}");
    assert_eq!(warnings.len(), 5);
    assert!(warnings.iter().any(|w| w.contains("version 9")), "{warnings:#?}");
    let seqs: Vec<u64> = fleet.source("h", "src").map(|e| e.seq).collect();
    assert_eq!(seqs, (0..15).collect::<Vec<_>>());
    // Streamed: the same messages skipped and said, the same records.
    let (mut seqs, mut said) = (Vec::new(), Vec::new());
    let opts = ReadOptions::default().idle(Duration::from_secs(60));
    let s = ringtrace_ship::fleet::stream_topic(
        &brokers,
        &topic,
        &opts,
        |i| -> Result<(), ()> {
            seqs.push(i.entry.seq);
            Ok(())
        },
        |w| said.push(w),
    )
    .unwrap();
    assert_eq!((s.damaged, s.batches, s.records, s.duplicates, s.missing), (5, 2, 15, 0, 0), "{said:#?}");
    assert_eq!(said.len(), 5, "{said:#?}");
    assert_eq!(seqs, (0..15).collect::<Vec<_>>());
}

/// A topic read the moment its creation returns is found (the broker asked may learn of
/// it a moment after the controller), every time; a topic that was never created is
/// called missing after the reader asked for a few seconds, not at the read's timeout.
#[test]
fn a_topic_just_created_is_found_and_one_never_created_is_called_missing() {
    let Some(brokers) = brokers() else { return };
    for i in 0..8 {
        let topic = create_topic(&brokers, &format!("fresh{i}"), 3);
        let fleet = ringtrace_ship::fleet::read_topic(&brokers, &topic, Duration::from_secs(60), |_| {})
            .unwrap_or_else(|e| panic!("reading {topic} right after creating it: {e}"));
        assert_eq!(fleet.stats().records, 0);
    }
    let start = std::time::Instant::now();
    let err = ringtrace_ship::fleet::read_topic(&brokers, "ringtrace-never-created", Duration::from_secs(60), |_| {})
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("no topic ringtrace-never-created"), "{err}");
    let took = start.elapsed();
    assert!(took >= Duration::from_secs(4) && took < Duration::from_secs(20), "{took:?}");
}
