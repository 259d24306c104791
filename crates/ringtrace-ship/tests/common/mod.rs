//! What the Kafka tests share: the cluster's address, topics, ring files, checksummed
//! records, the agent's command and the checks of what was read back.
#![allow(dead_code)]

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use ringtrace::{MpscRing, Producer, ReserveError, Wakeup};

use ringtrace_ship::fleet::{Fleet, FleetStats, ReadOptions};
use ringtrace_ship::frame::{BatchWriter, TimeSource};

pub mod shown;

#[allow(unused_imports)] // each test binary uses its own part
pub use ringtrace_fixtures::kafka_brokers as brokers;

/// A topic of its own for a test, `partitions` wide, replicated 3 times.
pub fn create_topic(brokers: &str, what: &str, partitions: i32) -> String {
    let nonce = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let name = format!("ringtrace-test-{what}-{}-{nonce}", std::process::id());
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", brokers).create().expect("admin client");
    let topic = NewTopic::new(&name, partitions, TopicReplication::Fixed(3));
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = futures_executor::block_on(admin.create_topics([&topic], &opts)).expect("create_topics");
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
    }
    name
}

/// A directory removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("ringtrace-ship-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A ring file of `capacity` bytes at `path`, and a producer attached to it.
pub fn ring_producer(path: &Path, capacity: u64) -> Producer {
    let ring = MpscRing::builder(capacity).create(path).expect("ring file");
    ring.producer().expect("producer")
}

/// Record `i` of source `s` of host `h`: 64 bytes ending in a CRC32C of the rest.
pub fn record(h: u32, s: u32, i: u64) -> [u8; 64] {
    let mut r = [0u8; 64];
    r[0..4].copy_from_slice(&h.to_le_bytes());
    r[4..8].copy_from_slice(&s.to_le_bytes());
    r[8..16].copy_from_slice(&i.to_le_bytes());
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(h << 8 | s);
    for b in r[16..60].iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let crc = crc32c::crc32c(&r[..60]);
    r[60..].copy_from_slice(&crc.to_le_bytes());
    r
}

/// Writes records `range` of (h, s), waiting for room, and for a consumer while the
/// agent is down (killed, not yet restarted); returns how many were refused (the wait
/// timed out, two minutes).
pub fn write_records(mut p: Producer, h: u32, s: u32, range: Range<u64>) -> u64 {
    let mut refused = 0;
    for i in range {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            match p.output_wait(
                &record(h, s, i),
                Wakeup::Default,
                Some(deadline.saturating_duration_since(Instant::now())),
            ) {
                Ok(()) => break,
                Err(ReserveError::Disconnected { .. }) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(_) => {
                    refused += 1;
                    break;
                }
            }
        }
    }
    refused
}

/// The agent's command for `rings`, stopping once their producers are gone.
pub fn agent(brokers: &str, topic: &str, host: &str, state: &Path, rings: &[PathBuf]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ringtrace-ship"));
    c.args(["ship", "--to", &format!("kafka://{brokers}/{topic}"), "--host", host, "--until-disconnected", "--state"])
        .arg(state)
        .args(rings)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    c
}

/// Waits for `child` until `timeout`, then kills it and fails.
pub fn wait_child(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("agent still running after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` as [`wait_child`] does, with its stdout.
pub fn wait_output(mut child: Child, timeout: Duration) -> Output {
    wait_child(&mut child, timeout);
    child.wait_with_output().unwrap()
}

/// Starts agents with `start` one after another, each SIGKILLed `pause` after it
/// stored an acknowledged round (its state file at `state` changed), for each of
/// `pauses` (microseconds): mid-run, with batches in flight or just acknowledged.
/// Returns how many were killed (one that finished first is not).
pub fn kill_mid_run(state: &Path, pauses: &[u64], start: impl Fn() -> Child) -> u32 {
    let mut kills = 0;
    for &pause_us in pauses {
        let before = std::fs::read(state).ok();
        let mut a = start();
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::fs::read(state).ok() == before && Instant::now() < deadline && a.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_micros(200));
        }
        assert_ne!(std::fs::read(state).ok(), before, "the agent acknowledged a round within a minute");
        std::thread::sleep(Duration::from_micros(pause_us));
        if a.try_wait().unwrap().is_none() {
            a.kill().unwrap(); // SIGKILL
            kills += 1;
        }
        a.wait().unwrap();
    }
    kills
}

/// Joins the writers (none may have had a record refused), waits for the agent to
/// exit successfully, and reads the whole topic back; returns it with the agent's
/// report (its stdout).
pub fn finish(writers: Vec<JoinHandle<u64>>, agent: Child, brokers: &str, topic: &str) -> (Fleet, String) {
    let lost: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(lost, 0, "writers wait for room: nothing is refused");
    let out = wait_output(agent, Duration::from_secs(300));
    assert!(out.status.success(), "the agent exited with {}", out.status);
    (read_all(brokers, topic), String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The whole topic, read back.
pub fn read_all(brokers: &str, topic: &str) -> Fleet {
    ringtrace_ship::fleet::read_topic(brokers, topic, Duration::from_secs(300), |w| panic!("{w}"))
        .expect("reading the topic")
}

/// A topic streamed back: each record's host, source, sequence number, time and
/// payload's checksum, in the order handed out; and the counts.
pub type Streamed = (Vec<(String, String, u64, u64, u32)>, FleetStats);

/// The whole topic, streamed back through the bounded merge with `opts`: each record's
/// host, source, sequence number, time and payload's checksum, in the order handed out.
pub fn stream_all(brokers: &str, topic: &str, opts: &ReadOptions) -> Streamed {
    let mut out = Vec::new();
    let stats = ringtrace_ship::fleet::stream_topic(
        brokers,
        topic,
        opts,
        |i| -> Result<(), ()> {
            let e = i.entry;
            out.push((e.host.to_string(), e.source.to_string(), e.seq, e.time_ns, crc32c::crc32c(e.payload)));
            Ok(())
        },
        |w| panic!("{w}"),
    )
    .expect("streaming the topic");
    (out, stats)
}

/// The streamed read `streamed` holds the fleet's records, each once, intact, and its
/// counts are the fleet's; in the timeline's order where none was late.
pub fn check_streamed(fleet: &Fleet, streamed: &Streamed) {
    let (got, stats) = streamed;
    let want: Vec<_> = fleet
        .timeline()
        .map(|e| (e.host.to_string(), e.source.to_string(), e.seq, e.time_ns, crc32c::crc32c(e.payload)))
        .collect();
    let f = fleet.stats();
    assert_eq!(
        (stats.batches, stats.records, stats.duplicates, stats.missing, stats.damaged, stats.too_large),
        (f.batches, f.records, f.duplicates, f.missing, f.damaged, f.too_large)
    );
    if stats.late == 0 {
        assert!(got == &want, "streamed in another order than the timeline's, with no record late");
    } else {
        eprintln!("streamed: {} records late (out of time order by more than the bound)", stats.late);
        let (mut got, mut want) = (got.clone(), want);
        got.sort();
        want.sort();
        assert!(got == want, "streamed records differ from the timeline's");
    }
}

/// Source `name` of `host` holds exactly records `range` of (h, s), in order, intact.
pub fn check_source(fleet: &Fleet, host: &str, name: &str, h: u32, s: u32, range: Range<u64>) {
    let mut expect = range.clone();
    for e in fleet.source(host, name) {
        let i = expect.next().unwrap_or_else(|| panic!("{host} {name}: more records than {range:?}"));
        assert_eq!(e.payload, record(h, s, i), "{host} {name}: record {i} (seq {})", e.seq);
    }
    assert_eq!(expect.next(), None, "{host} {name}: records missing from {range:?}");
}

/// A batch of `n` records of `source` from sequence `first`.
pub fn batch_of(host: &str, source: &str, first: u64, n: u64) -> Vec<u8> {
    let mut w = BatchWriter::new(host, source, first, TimeSource::Drained, 0).unwrap();
    for i in first..first + n {
        w.push(1_000 + i, &record(0, 0, i)).unwrap();
    }
    w.finish()
}

/// Produces `messages` as they are, one partition, acknowledged.
pub fn produce_raw(brokers: &str, topic: &str, messages: &[Vec<u8>]) {
    produce_to(brokers, topic, messages.iter().map(|m| (0, m.clone())));
}

/// Produces each `(partition, message)` as it is, in order, all acknowledged.
pub fn produce_to(brokers: &str, topic: &str, messages: impl IntoIterator<Item = (i32, Vec<u8>)>) {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        // Little held: a test that measures its own memory after producing starts low.
        .set("queue.buffering.max.kbytes", "16384")
        .create()
        .unwrap();
    for (partition, m) in messages {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut record = BaseRecord::<(), _>::to(topic).partition(partition).payload(&m);
        // A full queue waits for deliveries, a minute at most.
        while let Err((e, back)) = p.send(record) {
            assert!(Instant::now() < deadline, "producing to {topic}: {e}");
            p.poll(Duration::from_millis(10));
            record = back;
        }
        p.poll(Duration::ZERO);
    }
    p.flush(Duration::from_secs(60)).unwrap();
}

/// A batch of `n` records (64 bytes each, [`record`] of (0, 0, seq)) of `source` from
/// sequence `first`, record `seq` stamped `seq * step_ns`.
pub fn batch_spread(host: &str, source: &str, first: u64, n: u64, step_ns: u64) -> Vec<u8> {
    let mut w = BatchWriter::new(host, source, first, TimeSource::Drained, 0).unwrap();
    for i in first..first + n {
        w.push(i * step_ns, &record(0, 0, i)).unwrap();
    }
    w.finish()
}

/// An admin client of `brokers`, and options that wait 30 s for the operation.
fn admin(brokers: &str) -> (AdminClient<DefaultClientContext>, AdminOptions) {
    let admin = ClientConfig::new().set("bootstrap.servers", brokers).create().expect("admin client");
    (
        admin,
        AdminOptions::new()
            .operation_timeout(Some(Duration::from_secs(30)))
            .request_timeout(Some(Duration::from_secs(30))),
    )
}

/// Deletes the records of `partition` of `topic` before offset `before` (Kafka's
/// `DeleteRecords`: its low watermark moves there); returns the new low watermark.
pub fn delete_records(brokers: &str, topic: &str, partition: i32, before: i64) -> i64 {
    let (admin, opts) = admin(brokers);
    let mut offsets = rdkafka::TopicPartitionList::new();
    offsets.add_partition_offset(topic, partition, rdkafka::Offset::Offset(before)).unwrap();
    let done = futures_executor::block_on(admin.delete_records(&offsets, &opts)).expect("delete_records");
    let e = done.find_partition(topic, partition).expect("the partition in the answer");
    e.error().unwrap_or_else(|err| panic!("deleting records of {topic} [{partition}]: {err}"));
    match e.offset() {
        rdkafka::Offset::Offset(low) => low,
        other => panic!("deleting records of {topic} [{partition}]: low watermark {other:?}"),
    }
}

/// Deletes `topic`.
pub fn delete_topic(brokers: &str, topic: &str) {
    let (admin, opts) = admin(brokers);
    let results = futures_executor::block_on(admin.delete_topics(&[topic], &opts)).expect("delete_topics");
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("deleting topic {t}: {e}"));
    }
}
