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

/// Produces each `(partition, Kafka timestamp in ms, message)` in order, acknowledged:
/// messages "sent" at chosen times (their CreateTime).
fn produce_at(brokers: &str, topic: &str, messages: &[(i32, i64, Vec<u8>)]) {
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .create()
        .unwrap();
    for (partition, ms, m) in messages {
        let record = BaseRecord::<(), _>::to(topic).partition(*partition).timestamp(*ms).payload(m);
        p.send(record).map_err(|(e, _)| e).unwrap();
    }
    p.flush(Duration::from_secs(60)).unwrap();
}

/// A batch of one record of `source`, sequence `seq`, time `time_ns`.
fn one_record(source: &str, seq: u64, time_ns: u64) -> Vec<u8> {
    let mut w =
        ringtrace_ship::frame::BatchWriter::new("h", source, seq, ringtrace_ship::frame::TimeSource::Drained, 0)
            .unwrap();
    w.push(time_ns, &record(0, 0, seq)).unwrap();
    w.finish()
}

/// With a bound on the send time (`ReadOptions::sent_before`), each partition is read up
/// to its first message sent at or after it and no further; a message sent before it
/// holding an older record (an agent's round sent late) is read; the messages left are
/// counted in `unread`, exactly. Without the bound, or with one past every message,
/// the whole topic is read and nothing is counted.
#[test]
fn a_bound_on_the_send_time_stops_each_partition_there_and_counts_what_is_left() {
    let Some(brokers) = brokers() else { return };
    let topic = create_topic(&brokers, "until", 2);
    // Ten minutes ago, a whole second (brokers refuse timestamps too far ahead of them).
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let t0 = (now_ms - 600_000) / 1000 * 1000;
    let ns = |ms: i64| ms as u64 * 1_000_000;
    let mut messages = Vec::new();
    // Partition 0: a message a second, from t0 (sequence i sent at t0 + i s).
    for i in 0..10 {
        let sent = t0 + i * 1000;
        messages.push((0, sent, one_record("p0", i as u64, ns(sent) - 1_000_000)));
    }
    // Partition 1: a message a second from t0 + 0.5 s; then sequence 6, of t0 + 4 s, sent
    // at t0 + 6.5 s (late, within the bound), sequence 7, of t0 + 4.5 s, sent at t0 + 8 s
    // (past it), and sequence 8 at t0 + 9 s.
    for i in 0..6 {
        let sent = t0 + i * 1000 + 500;
        messages.push((1, sent, one_record("p1", i as u64, ns(sent) - 1_000_000)));
    }
    messages.push((1, t0 + 6_500, one_record("p1", 6, ns(t0 + 4_000))));
    messages.push((1, t0 + 8_000, one_record("p1", 7, ns(t0 + 4_500))));
    messages.push((1, t0 + 9_000, one_record("p1", 8, ns(t0 + 9_000) - 1_000_000)));
    produce_at(&brokers, &topic, &messages);

    let read = |sent_before: Option<u64>| {
        let (got, stats) = stream_all(
            &brokers,
            &topic,
            &ReadOptions::default().sent_before(sent_before).idle(Duration::from_secs(60)),
        );
        let mut seqs: Vec<(String, u64)> = got.into_iter().map(|(_, source, seq, _, _)| (source, seq)).collect();
        seqs.sort();
        (seqs, stats)
    };
    let seqs = |p0: std::ops::Range<u64>, p1: std::ops::Range<u64>| -> Vec<(String, u64)> {
        (p0.map(|s| ("p0".to_string(), s))).chain(p1.map(|s| ("p1".to_string(), s))).collect()
    };

    // Stopping at t0 + 7 s: partition 0 at offset 7 (3 left), partition 1 at offset 7,
    // the message sent at t0 + 8 s (2 left); the late message of t0 + 6.5 s read.
    let (got, stats) = read(Some(ns(t0 + 7_000)));
    assert_eq!(got, seqs(0..7, 0..7));
    assert_eq!((stats.unread, stats.records, stats.missing), (5, 14, 0), "{stats:?}");
    // Kafka's timestamps are milliseconds: the message of t0 + 7 s may have been sent
    // before a bound a nanosecond later, and is read.
    let (got, stats) = read(Some(ns(t0 + 7_000) + 1));
    assert_eq!((got, stats.unread), (seqs(0..8, 0..7), 4), "{stats:?}");
    // Before every message: nothing read, all counted.
    let (got, stats) = read(Some(ns(t0 - 1_000)));
    assert_eq!((got.len(), stats.unread), (0, 19), "{stats:?}");
    // Without a bound, and with one past every message: all read, nothing counted.
    let everything = seqs(0..10, 0..9);
    for bound in [None, Some(ns(now_ms + 3_600_000)), Some(u64::MAX)] {
        let (got, stats) = read(bound);
        assert_eq!((&got, stats.unread), (&everything, 0), "{bound:?}: {stats:?}");
    }
}
