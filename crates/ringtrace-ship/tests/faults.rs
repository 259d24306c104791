//! Faults of the cluster under a running agent: a broker SIGKILLed and started again,
//! and the whole cluster down for 10 seconds, without a spool directory and with one
//! (and an agent SIGKILLed while rounds wait in it). These stop and start the test command's
//! nodes (`scripts/kafka.sh kill` and `revive`, on the cluster directory named by
//! `RINGTRACE_KAFKA_DIR`), so they run one at a time, in a test binary of their own.
//! And a fault of the client's own making, on librdkafka's mock cluster: a message it
//! reports delivered that the broker never wrote.
//!
//! Faults under a topic being streamed back (`fleet::stream_topic`): records deleted
//! (`DeleteRecords`), the topic deleted, a broker SIGKILLed and started again; and
//! records or the topic deleted under a whole-topic read (`fleet::read_topic`).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use ringtrace::{ReserveError, Wakeup};
use ringtrace_fixtures::{skip, Feature};
use ringtrace_ship::fleet::{FleetStats, FollowError, ReadOptions};

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

/// A writer of about 20,000 records a second into `p` that never waits, until `stop`:
/// the indices the ring took, and how many it refused.
fn steady_writer(
    mut p: ringtrace::Producer,
    h: u32,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(Vec<u64>, u64)> {
    std::thread::spawn(move || {
        let (mut taken, mut refused) = (Vec::new(), 0u64);
        let mut i = 0u64;
        while !stop.load(Relaxed) {
            match p.output(&record(h, 0, i), Wakeup::Default) {
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
    })
}

/// A `key=value` number of the agent's report.
fn reported(report: &str, key: &str) -> u64 {
    let value = report.split_whitespace().find_map(|w| w.strip_prefix(key).and_then(|w| w.strip_prefix('=')));
    value.unwrap_or_else(|| panic!("no {key} in {report:?}")).parse().unwrap()
}

/// The spool's round files left in `dir`.
fn spool_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map_or(0, |d| d.filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "spool")).count())
}

/// The whole cluster down for 10 seconds with a spool directory, under a writer that
/// never waits: the rounds Kafka does not take within the spool wait go to disk and
/// the ring is drained on. Midway the agent is SIGKILLed with rounds in its spool and
/// a new one started on the same state and spool, while the cluster is still down.
/// Nothing is refused, and once the cluster is back the spool is sent first: every
/// record read back once, in order, and the spool left empty.
#[test]
fn with_a_spool_the_whole_cluster_down_refuses_nothing_across_an_agent_killed() {
    let Some(brokers) = brokers() else { return };
    let Some(dir) = cluster_dir() else { return };
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let topic = create_topic(&brokers, "spooled", 3);
    let tmp = TempDir::new("spooled");
    let ring = tmp.path().join("s0.ring");
    // 8 MiB: 5.8 s of the writer, for the agent's restart (up to 2 s asking an absent
    // cluster about the topic).
    let p = ring_producer(&ring, 8 << 20);
    let (state, spool) = (tmp.path().join("agent.state"), tmp.path().join("spool"));
    let start = || {
        let mut cmd = agent(&brokers, &topic, "host7", &state, std::slice::from_ref(&ring));
        cmd.args(["--spool-wait", "500ms", "--spool"]).arg(&spool);
        cmd.spawn().unwrap()
    };
    let mut first = start();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = steady_writer(p, 7, stop.clone());
    first_round(&state);
    let down = Instant::now();
    for n in 1..=3 {
        nodes("kill", &dir, &[n]);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while spool_files(&spool) < 3 {
        assert!(Instant::now() < deadline, "three rounds spooled within 30 s of the outage");
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill().unwrap(); // SIGKILL, rounds in the spool
    first.wait().unwrap();
    let at_kill = spool_files(&spool);
    let second = start();
    std::thread::sleep(Duration::from_secs(10).saturating_sub(down.elapsed()));
    let held = spool_files(&spool);
    nodes("revive", &dir, &[1, 2, 3]);
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Relaxed);
    let (taken, refused) = writer.join().unwrap();
    let out = wait_output(second, Duration::from_secs(300));
    assert!(out.status.success(), "agent exited with {}", out.status);
    let report = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let fleet = read_all(&brokers, &topic);
    let stats = fleet.stats();
    eprintln!(
        "cluster down 10 s, spool: {} records taken, {refused} refused, {at_kill} rounds spooled when the first \
         agent was killed, {held} at the end of the outage; second agent: {report}; read back: {stats:?}",
        taken.len()
    );
    assert!(held > at_kill, "the second agent spooled on while the cluster was down");
    assert_eq!(refused, 0, "the spool kept the ring drained");
    assert_eq!((reported(&report, "ring_lost"), reported(&report, "spool_lost")), (0, 0), "{report}");
    assert!(reported(&report, "unspooled") > 0, "the second agent sent the spool: {report}");
    assert_eq!(spool_files(&spool), 0, "the spool is empty once delivered");
    let saved = ringtrace_ship::state::State::load(&state).unwrap().expect("the state file");
    let c = saved.sources[0].counts;
    assert_eq!((c.spooled, c.spool_lost, c.ring_lost), (0, 0, 0), "{saved}");
    assert_eq!(saved.spool_head, saved.spool_tail, "{saved}");
    assert_eq!((stats.damaged, stats.missing), (0, 0));
    let name = ring.display().to_string();
    let read: Vec<(u64, &[u8])> = fleet.source("host7", &name).map(|e| (e.seq, e.payload)).collect();
    // Where the records read back and those the ring took part, if they do.
    let first_diff = read.iter().zip(&taken).position(|(&(_, p), &i)| p != record(7, 0, i));
    let at = |k: Option<usize>| k.map(|k| (k, read.get(k).map(|r| r.0), taken.get(k).copied()));
    assert_eq!(
        read.len(),
        taken.len(),
        "every record the ring took, once: first difference (index, seq read, record taken) {:?}, first seqs read \
         {:?}, last {:?}",
        at(first_diff.or(Some(read.len().min(taken.len())))),
        read.first().map(|r| r.0),
        read.last().map(|r| r.0)
    );
    assert_eq!(first_diff, None, "the record read at {:?} is not the one the ring took", at(first_diff));
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
    let p = ring_producer(&ring, 1 << 18);
    let state = tmp.path().join("agent.state");
    let mut cmd = agent(&brokers, &topic, "host6", &state, std::slice::from_ref(&ring));
    cmd.args(["--ack-timeout", "2s"]);
    let agent = cmd.spawn().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // About 20,000 records a second, never waiting: a full ring refuses.
    let writer = steady_writer(p, 6, stop.clone());
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
    let failed = reported(&report, "failed_rounds");
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

/// librdkafka reports a message delivered without the broker's acknowledgement, and
/// without an offset, when it infers the delivery: from the acknowledgement of a later
/// batch in flight while this one's request failed (wrong where the partition holds
/// nothing of the producer yet and so takes any first sequence number: a new producer's
/// first batch refused for want of in-sync replicas as a restarted cluster recovers,
/// its second taken), or from the broker calling the batch a duplicate. Here the mock broker
/// answers the agent's first produce request with `DUPLICATE_SEQUENCE_NUMBER` having
/// written nothing: the agent sends the round again, and every record is read back once.
#[test]
fn a_round_reported_delivered_without_an_offset_is_sent_again() {
    use rdkafka::mocking::MockCluster;
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

    let mock = MockCluster::new(1).expect("librdkafka's mock cluster");
    mock.create_topic("inferred", 1, 1).unwrap();
    mock.request_errors(RDKafkaApiKey::Produce, &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_DUPLICATE_SEQUENCE_NUMBER]);
    let brokers = mock.bootstrap_servers();
    let per_source = 20_000u64;
    let tmp = TempDir::new("inferred");
    let ring = tmp.path().join("s0.ring");
    let p = ring_producer(&ring, 1 << 20);
    let state = tmp.path().join("agent.state");
    let agent = agent(&brokers, "inferred", "host8", &state, std::slice::from_ref(&ring)).spawn().unwrap();
    let writer = std::thread::spawn(move || write_records(p, 8, 0, 0..per_source));
    let (fleet, report) = finish(vec![writer], agent, &brokers, "inferred");
    let stats = fleet.stats();
    eprintln!("agent: {report}; read back: {stats:?}");
    assert_eq!((stats.damaged, stats.missing, stats.records), (0, 0, per_source));
    check_source(&fleet, "host8", &ring.display().to_string(), 8, 0, 0..per_source);
    assert!(reported(&report, "failed_rounds") > 0, "the round reported delivered without an offset failed: {report}");
}

/// What a streamed read handed out: each source's sequence numbers in the order they
/// came, as runs `a..b` of consecutive ones; the read's counters (or its error), its
/// warnings, and how long it went on after `act` ran.
struct Acted {
    seqs: BTreeMap<String, Vec<(u64, u64)>>,
    stats: Result<FleetStats, String>,
    warnings: Vec<String>,
    after_act: Duration,
}

/// Streams `topic` back with `opts`, running `act` once as the `at`th record goes out.
fn stream_acting(brokers: &str, topic: &str, opts: &ReadOptions, at: u64, act: impl FnOnce()) -> Acted {
    let (mut seqs, mut warnings) = (BTreeMap::<String, Vec<(u64, u64)>>::new(), Vec::new());
    let (mut n, mut act, mut acted) = (0u64, Some(act), None);
    let stats = ringtrace_ship::fleet::stream_topic(
        brokers,
        topic,
        opts,
        |i| -> Result<(), ()> {
            n += 1;
            if n == at {
                if let Some(act) = act.take() {
                    act();
                    acted = Some(Instant::now());
                }
            }
            let (runs, seq) = (seqs.entry(i.entry.source.to_string()).or_default(), i.entry.seq);
            match runs.last_mut() {
                Some(run) if run.1 == seq => run.1 += 1,
                _ => runs.push((seq, seq + 1)),
            }
            Ok(())
        },
        |w| {
            eprintln!("warning: {w}");
            warnings.push(w)
        },
    )
    .map_err(|e| match e {
        FollowError::Kafka(e) => e.to_string(),
        other => format!("{other:?}"),
    });
    let after_act = acted.expect("the read went past the record to act at").elapsed();
    Acted { seqs, stats, warnings, after_act }
}

/// Messages of 1,000 records each: `messages` of source `source` into `partition`
/// from sequence 0, record `seq` stamped `seq` x 0.1 ms.
fn filled(partition: i32, source: &str, messages: u64) -> impl Iterator<Item = (i32, Vec<u8>)> + '_ {
    (0..messages).map(move |m| (partition, batch_spread("h", source, m * 1000, 1000, 100_000)))
}

/// A partition's records deleted under the read (`DeleteRecords`, its low watermark
/// moved past the reader's position): the reader resumes at the new low watermark and
/// counts the offsets it lost, rather than fail or wait for its idle bound. Deleted up
/// to offset 350 of 500, and all of them.
#[test]
fn records_deleted_under_the_read_are_skipped_and_counted() {
    let Some(brokers) = brokers() else { return };
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    for before in [350, 500] {
        let topic = create_topic(&brokers, &format!("records-deleted-{before}"), 2);
        produce_to(&brokers, &topic, filled(1, "small", 20).chain(filled(0, "big", 500)));
        let opts = ReadOptions::default().idle(Duration::from_secs(60));
        let read = stream_acting(&brokers, &topic, &opts, 1, || {
            assert_eq!(delete_records(&brokers, &topic, 0, before), before);
        });
        let stats =
            read.stats.unwrap_or_else(|e| panic!("the read failed {:?} after the deletion: {e}", read.after_act));
        eprintln!("records before offset {before} deleted: {stats:?}, {:?} after the deletion", read.after_act);
        assert!(read.after_act < Duration::from_secs(20), "{:?}", read.after_act);
        assert_eq!(read.seqs["small"], [(0, 20_000)]);
        let (big, before) = (&read.seqs["big"], before as u64);
        let cut = big[0].1;
        let mut want = vec![(0, cut)];
        if before < 500 {
            want.push((before * 1000, 500_000));
        }
        assert_eq!(big, &want, "up to the reader's position, then from offset {before} on");
        assert_eq!(cut % 1000, 0, "whole messages: {cut}");
        assert_eq!((stats.expired, stats.vanished), (before - cut / 1000, 0));
        let (records, missing) =
            (cut + 20_000 + (500 - before) * 1000, if before < 500 { before * 1000 - cut } else { 0 });
        assert_eq!((stats.records, stats.missing, stats.damaged), (records, missing, 0));
        let said = read.warnings.iter().filter(|w| w.contains("deleted before they were read")).count();
        assert_eq!(said, 1, "{:#?}", read.warnings);
    }
}

/// What a whole-topic read (`fleet::read_topic`) gave, its warnings, and how long it
/// went on after `act` ran.
struct ReadActed {
    fleet: Result<ringtrace_ship::fleet::Fleet, String>,
    warnings: Vec<String>,
    after_act: Duration,
}

/// Reads `topic` whole (within 60 s), running `act` once at the read's first warning:
/// that of the foreign message at offset 0 of partition 0 ([`ahead_of_the_read`]).
fn read_acting(brokers: &str, topic: &str, act: impl FnOnce()) -> ReadActed {
    let (mut warnings, mut act, mut acted) = (Vec::new(), Some(act), None);
    let fleet = ringtrace_ship::fleet::read_topic(brokers, topic, Duration::from_secs(60), |w| {
        if let Some(act) = act.take() {
            assert!(w.contains("partition 0 offset 0: skipped"), "the first warning: {w}");
            act();
            acted = Some(Instant::now());
        }
        warnings.push(w);
    })
    .map_err(|e| e.to_string());
    for w in warnings.iter().filter(|w| !w.contains(": skipped:")) {
        eprintln!("warning: {w}");
    }
    let after_act = acted.expect("the read warned of the foreign message").elapsed();
    ReadActed { fleet, warnings, after_act }
}

/// Partition 0 of a topic whose records can be deleted ahead of a whole-topic read: a
/// foreign message (the read's first warning), 150 foreign ones of 512 KiB (more than
/// the 64 MiB librdkafka prefetches, so the reader's position is among them while the
/// read waits in its warning), then `big` messages of 1,000 records of source "big".
fn ahead_of_the_read(big: u64) -> impl Iterator<Item = (i32, Vec<u8>)> {
    let foreign = std::iter::once((0, b"not a batch".to_vec())).chain((0..150).map(|_| (0, vec![0x5a; 512 << 10])));
    foreign.chain(filled(0, "big", big))
}

/// Records deleted under a whole-topic read (`DeleteRecords` past the reader's
/// position): the read goes on from the partition's new start, counting the offsets
/// it lost, soon rather than at its deadline. Deleted up to the 10th of 20 batches
/// after the foreign messages, and all of them.
#[test]
fn records_deleted_under_a_whole_topic_read_are_skipped_and_counted() {
    let Some(brokers) = brokers() else { return };
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    for before in [161, 171] {
        let topic = create_topic(&brokers, &format!("read-records-deleted-{before}"), 2);
        produce_to(&brokers, &topic, filled(1, "small", 20).chain(ahead_of_the_read(20)));
        let read = read_acting(&brokers, &topic, || {
            assert_eq!(delete_records(&brokers, &topic, 0, before), before);
        });
        let fleet =
            read.fleet.unwrap_or_else(|e| panic!("the read failed {:?} after the deletion: {e}", read.after_act));
        let stats = fleet.stats();
        eprintln!("records before offset {before} deleted: {stats:?}, {:?} after the deletion", read.after_act);
        assert!(read.after_act < Duration::from_secs(20), "{:?}", read.after_act);
        // The foreign messages read before the deletion stopped the reader.
        let cut = read.warnings.iter().filter(|w| w.contains(": skipped:")).count() as u64;
        assert!(cut < 151, "the reader was past the foreign messages when the records went: {cut}");
        let (before, kept) = (before as u64, 171 - before as u64);
        assert_eq!((stats.expired, stats.vanished, stats.damaged), (before - cut, 0, cut));
        assert_eq!((stats.records, stats.missing, stats.duplicates), (20_000 + kept * 1000, 0, 0));
        check_source(&fleet, "h", "small", 0, 0, 0..20_000);
        check_source(&fleet, "h", "big", 0, 0, (20 - kept) * 1000..20_000);
        let said = read.warnings.iter().filter(|w| w.contains("deleted before they were read")).count();
        assert_eq!(said, 1, "{:#?}", read.warnings.iter().filter(|w| !w.contains(": skipped:")).collect::<Vec<_>>());
    }
}

/// The topic deleted under a whole-topic read: the read fails soon, saying so, rather
/// than at its deadline.
#[test]
fn a_topic_deleted_under_a_whole_topic_read_fails_it_soon() {
    let Some(brokers) = brokers() else { return };
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let topic = create_topic(&brokers, "read-topic-deleted", 2);
    produce_to(&brokers, &topic, filled(1, "small", 20).chain(ahead_of_the_read(20)));
    let read = read_acting(&brokers, &topic, || delete_topic(&brokers, &topic));
    let Err(e) = read.fleet else { panic!("the read of a topic deleted under it did not fail") };
    eprintln!("topic deleted: {e}, {:?} after the deletion", read.after_act);
    assert!(read.after_act < Duration::from_secs(25), "{:?}", read.after_act);
    assert!(e.contains("no longer in the cluster"), "{e}");
}

/// The topic deleted under the read: once its partitions have given errors and no
/// message for a while, the reader asks the cluster again, finds the topic gone, and
/// ends with what it read, counting the offsets left unread; within 20 s, not at its
/// idle bound.
#[test]
fn a_topic_deleted_under_the_read_ends_it_with_what_was_read() {
    let Some(brokers) = brokers() else { return };
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let topic = create_topic(&brokers, "topic-deleted", 2);
    produce_to(&brokers, &topic, filled(1, "small", 20).chain(filled(0, "big", 500)));
    let opts = ReadOptions::default().idle(Duration::from_secs(60));
    let read = stream_acting(&brokers, &topic, &opts, 1, || delete_topic(&brokers, &topic));
    let stats = read.stats.unwrap_or_else(|e| panic!("the read failed {:?} after the deletion: {e}", read.after_act));
    eprintln!("topic deleted: {stats:?}, {:?} after the deletion", read.after_act);
    assert!(read.after_act < Duration::from_secs(20), "{:?}", read.after_act);
    assert_eq!(read.seqs["small"], [(0, 20_000)]);
    let big = &read.seqs["big"];
    let cut = big[0].1;
    assert_eq!(big, &[(0, cut)], "up to the reader's position");
    assert_eq!(cut % 1000, 0, "whole messages: {cut}");
    assert!(cut < 500_000, "the reader had not read the whole partition when the topic went: {cut}");
    assert_eq!((stats.vanished, stats.expired), (500 - cut / 1000, 0));
    assert_eq!((stats.records, stats.missing, stats.damaged), (cut + 20_000, 0, 0));
    let said = read.warnings.iter().filter(|w| w.contains("no longer in the cluster")).count();
    assert_eq!(said, 1, "{:#?}", read.warnings);
}

/// The resident memory of this process now, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).expect("VmRSS");
    line.trim().trim_end_matches("kB").trim().parse().unwrap()
}

/// A broker SIGKILLed while a topic of 6 partitions (about 170 MB, foreign and
/// damaged messages among its batches) is streamed back, and started again 3 s later:
/// every record read once, in each source's order, none late; each bad message skipped
/// and counted; the transient errors counted; and the process's memory grows by less
/// than 80 MiB (the merge's 4 MiB, librdkafka's prefetch and fetches in flight), not
/// with the topic.
#[test]
fn a_broker_killed_under_the_read_loses_nothing_and_memory_stays_bounded() {
    let Some(brokers) = brokers() else { return };
    let Some(dir) = cluster_dir() else { return };
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let topic = create_topic(&brokers, "read-broker-killed", 6);
    let per = 400u64;
    // Foreign and damaged messages among the batches, at 6 places of each partition
    // (and one of them large).
    let bad_at = |m: u64| m % 70 == 35;
    let bad_ones = |m: u64, p: i32| {
        let mut flipped = batch_spread("h", &format!("s{p}"), m * 1000, 10, 100_000);
        flipped[60] ^= 1;
        let truncated = batch_spread("h", "other", 0, 100, 100_000);
        let foreign = format!("{{\"another\": \"producer\", \"partition\": {p}}}").into_bytes();
        let junk = if m == 105 && p == 3 { vec![0x5a; 600 << 10] } else { Vec::new() };
        [flipped, truncated[..truncated.len() - 5].to_vec(), foreign, junk]
    };
    let bad = (0..per).filter(|&m| bad_at(m)).count() as u64 * 4 * 6;
    // Made as they are sent: the test's own memory is not the read's.
    let messages = (0..per).flat_map(|m| {
        (0..6).flat_map(move |p| {
            let good = (p, batch_spread("h", &format!("s{p}"), m * 1000, 1000, 100_000));
            let bad = if bad_at(m) { bad_ones(m, p).to_vec() } else { Vec::new() };
            std::iter::once(good).chain(bad.into_iter().map(move |b| (p, b)))
        })
    });
    let mut bytes = 0u64;
    produce_to(&brokers, &topic, messages.inspect(|(_, m)| bytes += m.len() as u64));
    let names: Vec<String> = (0..6).map(|p| format!("s{p}")).collect();
    let total = per * 1000 * 6;
    let max_held = 4 << 20;
    let opts = ReadOptions::default().max_held(max_held).idle(Duration::from_secs(120));
    // The process's memory, sampled every 2 ms through the read.
    let (stop, base) = (Arc::new(AtomicBool::new(false)), rss_kib());
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !stop.load(Relaxed) {
                peak = peak.max(rss_kib());
                std::thread::sleep(Duration::from_millis(2));
            }
            peak
        })
    };
    let mut revive = None;
    let start = Instant::now();
    let read = stream_acting(&brokers, &topic, &opts, total / 10, || {
        nodes("kill", &dir, &[2]);
        let dir = dir.clone();
        revive = Some(std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(3));
            nodes("revive", &dir, &[2]);
        }));
    });
    stop.store(true, Relaxed);
    let peak = sampler.join().unwrap();
    revive.expect("the broker was killed").join().unwrap();
    let stats = read.stats.unwrap_or_else(|e| panic!("the read failed: {e}"));
    let grew = peak.saturating_sub(base);
    eprintln!(
        "broker 2 killed at a tenth of the read: {stats:?}; read in {:?}; memory grew by {} MiB (from {} MiB)",
        start.elapsed(),
        grew >> 10,
        base >> 10
    );
    for name in &names {
        assert_eq!(read.seqs[name], [(0, per * 1000)], "{name}: every record once, in order");
    }
    assert_eq!(
        (stats.records, stats.duplicates, stats.missing, stats.late, stats.damaged, stats.batches),
        (total, 0, 0, 0, bad, per * 6)
    );
    assert_eq!((stats.expired, stats.vanished), (0, 0));
    assert!(stats.transient > 0, "the broker's death was heard: {stats:?}");
    let skipped = read.warnings.iter().filter(|w| w.contains("skipped")).count() as u64;
    assert_eq!(skipped, bad, "{:#?}", read.warnings);
    // Reading 86 MB of such a topic grew it by 54 MiB.
    let bound = 80 << 10;
    assert!(bytes >> 10 > 2 * bound, "the topic ({} MiB) is more than twice the bound", bytes >> 20);
    assert!(
        grew < bound,
        "memory grew by {} MiB reading {} MiB (at most {} MiB)",
        grew >> 10,
        bytes >> 20,
        bound >> 10
    );
}
