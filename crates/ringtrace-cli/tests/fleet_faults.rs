//! `kafka://` readers across a broker crash: the leader of a topic's partition
//! SIGKILLed (`scripts/kafka.sh kill`, on the cluster directory named by
//! `RINGTRACE_KAFKA_DIR`) while `tail -f` follows the topic, and `decode` and `stat`
//! run right after the kill and while the node is down. With replication 3 and
//! `min.insync.replicas=2` Kafka serves the topic on through one node down (once its
//! controller has moved the leadership, after the broker's session timeout): so must
//! the readers, riding through the client's transient errors (a broker's connection
//! refused, a leader gone) and counting them. The node is started again at the end.
//! In a test binary of its own: it stops a node of the shared cluster.
#![cfg(feature = "kafka")]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::kafka::{brokers, create_topic, now_ns};
use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use ringtrace_fixtures::{skip, Feature};
use ringtrace_ship::frame::{BatchWriter, TimeSource};

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

/// `scripts/kafka.sh ACTION DIR NODE`, which must succeed.
fn node(action: &str, dir: &PathBuf, which: i32) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/kafka.sh");
    let status = Command::new("bash").arg(script).arg(action).arg(dir).arg(which.to_string()).status().unwrap();
    assert!(status.success(), "kafka.sh {action} {} {which}: {status}", dir.display());
}

/// A node killed, started again when dropped (the test failing included).
struct Killed<'a>(&'a PathBuf, i32);

impl Drop for Killed<'_> {
    fn drop(&mut self) {
        node("revive", self.0, self.1);
    }
}

/// An idempotent `acks=all` producer with `topic`'s metadata.
fn producer(brokers: &str, topic: &str) -> BaseProducer {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .create()
        .unwrap();
    p.client().fetch_metadata(Some(topic), Duration::from_secs(30)).unwrap();
    p
}

/// Sends batches of 100 records of source `h`/`r`, sequences `seqs`, acknowledged
/// (through a broker down: acks=all with two of three replicas in sync).
fn send(p: &BaseProducer, topic: &str, seqs: std::ops::Range<u64>) {
    for first in seqs.clone().step_by(100) {
        let mut w = BatchWriter::new("h", "r", first, TimeSource::Drained, 0).unwrap();
        for seq in first..(first + 100).min(seqs.end) {
            w.push(now_ns(), format!("rec {seq}").as_bytes()).unwrap();
        }
        p.send(BaseRecord::to(topic).key("h/r").payload(&w.finish())).map_err(|(e, _)| e).unwrap();
    }
    p.flush(Duration::from_secs(120)).unwrap();
}

/// The node leading partition 0 of `topic` (its `node.id`, which is its number in
/// `kafka.sh`).
fn leader(brokers: &str, topic: &str) -> i32 {
    let leader = leader_now(brokers, topic);
    assert!((1..=3).contains(&leader), "partition 0 of {topic} has leader {leader}");
    leader
}

/// The leader of `topic`'s partition 0 as the metadata names it now: -1 while it has
/// none, or while the metadata cannot be had.
fn leader_now(brokers: &str, topic: &str) -> i32 {
    let p: BaseProducer = ClientConfig::new().set("bootstrap.servers", brokers).create().unwrap();
    let Ok(meta) = p.client().fetch_metadata(Some(topic), Duration::from_secs(30)) else { return -1 };
    let t = meta.topics().iter().find(|t| t.name() == topic);
    t.and_then(|t| t.partitions().first().map(|p| p.leader())).unwrap_or(-1)
}

/// The sequence numbers of `decode --json` lines (or `tail --json`), each with how
/// many times it came.
fn seqs(stdout: &str) -> BTreeMap<u64, usize> {
    let mut out = BTreeMap::new();
    for l in stdout.lines() {
        let j: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        *out.entry(j["seq"].as_u64().unwrap()).or_default() += 1;
    }
    out
}

/// Asserts that `seqs` holds `0..n`, each once.
fn each_once(seqs: &BTreeMap<u64, usize>, n: u64, what: &str, stderr: &str) {
    let twice: Vec<_> = seqs.iter().filter(|(_, &c)| c != 1).collect();
    let missing = (0..n).filter(|s| !seqs.contains_key(s)).count();
    assert!(
        twice.is_empty() && missing == 0 && seqs.len() as u64 == n,
        "{what}: {} sequence numbers, {missing} of 0..{n} missing, more than once: {twice:?}; stderr: {stderr}",
        seqs.len()
    );
}

/// `decode --json` and `stat --format json` of `src`, all at once (4 of each): each must
/// exit 0 with `n` records, each once.
fn reads(src: &str, n: u64, when: &str) {
    let limit = Duration::from_secs(200);
    std::thread::scope(|s| {
        for i in 0..8 {
            s.spawn(move || {
                let args: &[&str] =
                    if i % 2 == 0 { &["decode", "--json", src] } else { &["stat", "--format", "json", src] };
                let (mut child, out, err) = spawn(args);
                let what = format!("{} {when}", args[0]);
                let status = code(child.wait(limit, &what), &what);
                let (stdout, stderr) = (std::fs::read_to_string(out).unwrap(), std::fs::read_to_string(err).unwrap());
                assert_eq!(status, 0, "{what}: {stderr}");
                if i % 2 == 0 {
                    each_once(&seqs(&stdout), n, &what, &stderr);
                } else {
                    let j: serde_json::Value = serde_json::from_str(&stdout).unwrap();
                    assert_eq!((j["records"].as_u64(), j["missing"].as_u64()), (Some(n), Some(0)), "{what}: {stderr}");
                }
                eprintln!("{what}: {n} records; {}", stderr.trim());
            });
        }
    });
}

/// The leader of a one-partition topic SIGKILLed: `tail -f` (following since before
/// the kill), `decode` and `stat` (four of each at once, right after the kill, and again
/// after records were sent with the node down) each read every record once and exit 0.
#[test]
fn readers_ride_through_the_partition_leader_killed() {
    let Some(brokers) = brokers() else { return };
    let Some(dir) = cluster_dir() else { return };
    let topic = create_topic(&brokers, "leader-killed", 1);
    let src = format!("kafka://{brokers}/{topic}");
    let p = producer(&brokers, &topic);
    let since = now_ns().to_string();
    // The follow ends 60 s after its last record: longer than the outage's reads.
    let (mut tail, tail_out, tail_err) = spawn(&["tail", "-f", "--json", "--since", &since, "--timeout", "60s", &src]);
    send(&p, &topic, 0..1000);
    // `tail` is reading: its first records are out.
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&tail_out).unwrap().len() == 0 {
        assert!(tail.0.try_wait().unwrap().is_none(), "tail exited: {}", std::fs::read_to_string(&tail_err).unwrap());
        assert!(Instant::now() < deadline, "tail -f printed nothing in 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }

    let killed = leader(&brokers, &topic);
    node("kill", &dir, killed);
    let _revive = Killed(&dir, killed);
    let down = Instant::now();
    reads(&src, 1000, "right after the kill");
    send(&p, &topic, 1000..2000);
    std::thread::sleep(Duration::from_secs(12).saturating_sub(down.elapsed()));
    // The controller moves the leadership once the dead node's session times out: on a
    // loaded machine that may be later than 12 s.
    let moved = Instant::now() + Duration::from_secs(90);
    while !matches!(leader_now(&brokers, &topic), l if l != killed && (1..=3).contains(&l)) {
        assert!(Instant::now() < moved, "the leadership did not move in 90 s");
        std::thread::sleep(Duration::from_millis(250));
    }
    reads(&src, 2000, "with the node down");

    let status = tail.wait(Duration::from_secs(180), "tail -f");
    let stderr = std::fs::read_to_string(&tail_err).unwrap();
    assert_eq!(code(status, "tail -f"), 0, "{stderr}");
    each_once(&seqs(&std::fs::read_to_string(&tail_out).unwrap()), 2000, "tail -f", &stderr);
    eprintln!("tail -f: {}", stderr.trim());
    assert!(
        stderr.contains("transient Kafka errors ridden through"),
        "the follow counted the errors it rode through: {stderr}"
    );
}
