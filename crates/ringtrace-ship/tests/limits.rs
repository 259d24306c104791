//! Records larger than a Kafka message: the agent neither stops nor wedges on them
//! (a restarted agent would meet the same record again), and none goes silently. Each
//! is shipped as a marker that keeps its sequence number and says its length; the
//! agent counts it (`too_large`), and the reader counts it and warns.

mod common;

use std::time::Duration;

use common::*;
use ringtrace::Wakeup;
use ringtrace_ship::frame::{HEADER_LEN, RECORD_HEADER_LEN};

fn pad8(n: usize) -> usize {
    n.next_multiple_of(8)
}

/// The agent's report line, as `key=value` pairs.
fn report(out: &str, key: &str) -> u64 {
    out.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key} in {out:?}"))
        .parse()
        .unwrap()
}

/// Waits for the agent to exit successfully and reads the topic back; every warning
/// of the reader must be about a record too large to ship. Returns the fleet and the
/// agent's report.
fn finish_allowing(agent: std::process::Child, brokers: &str, topic: &str) -> (ringtrace_ship::fleet::Fleet, String) {
    let out = wait_output(agent, Duration::from_secs(120));
    assert!(out.status.success(), "the agent exited with {}", out.status);
    let mut warned = 0u64;
    let fleet = ringtrace_ship::fleet::read_topic(brokers, topic, Duration::from_secs(120), |w| {
        assert!(w.contains("too large for a Kafka message"), "{w}");
        warned += 1;
    })
    .expect("reading the topic");
    assert_eq!(warned, fleet.stats().too_large, "one warning a marker");
    (fleet, String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Writes `sizes` records to a fresh ring, ships them with `extra` agent arguments,
/// and reads them back; returns the fleet and the agent's report.
fn ship_sizes(what: &str, sizes: &[usize], extra: &[&str]) -> Option<(ringtrace_ship::fleet::Fleet, String, String)> {
    let brokers = brokers()?;
    let topic = create_topic(&brokers, what, 1);
    let dir = TempDir::new(what);
    let ring = dir.path().join("big.ring");
    let mut p = ring_producer(&ring, 16 << 20);
    let mut cmd = agent(&brokers, &topic, "h", &dir.path().join("agent.state"), std::slice::from_ref(&ring));
    cmd.args(extra);
    let child = cmd.spawn().unwrap();
    for (i, &n) in sizes.iter().enumerate() {
        let body: Vec<u8> = (0..n).map(|j| (i * 31 + j) as u8).collect();
        p.output_wait(&body, Wakeup::Default, Some(Duration::from_secs(60))).unwrap();
    }
    drop(p);
    let (fleet, out) = finish_allowing(child, &brokers, &topic);
    Some((fleet, out, ring.display().to_string()))
}

/// A 3 MiB record between two small ones, with Kafka's default message limits: the
/// small ones arrive, the large one is a counted marker in its place.
#[test]
fn a_record_larger_than_a_message_is_counted_and_the_agent_goes_on() {
    let sizes = [64, 3 << 20, 64];
    let Some((fleet, out, source)) = ship_sizes("too-large", &sizes, &[]) else { return };
    // The agent and the reader count alike: `shipped` the records delivered whole (the
    // reader's `records`), `too_large` the markers.
    assert_eq!(report(&out, "shipped"), 2, "{out}");
    assert_eq!(report(&out, "too_large"), 1, "{out}");
    let s = fleet.stats();
    assert_eq!((s.records, s.too_large, s.missing, s.duplicates, s.damaged), (2, 1, 0, 0, 0), "{s:?}");
    let seqs: Vec<u64> = fleet.source("h", &source).map(|e| e.seq).collect();
    assert_eq!(seqs, [0, 2], "the marker keeps sequence 1: the reader sees no gap");
}

/// Record lengths on both sides of the smallest message limit (8 KiB): a record arrives whole
/// exactly when its batch alone fits the limit; every other one is a marker.
#[test]
fn the_message_limit_is_exact() {
    let limit = ringtrace_ship::agent::MIN_MAX_MESSAGE;
    let sizes: Vec<usize> = (limit - 200..limit + 40).step_by(7).collect();
    let Some((fleet, out, source)) = ship_sizes("limit", &sizes, &["--max-message", &limit.to_string()]) else {
        return;
    };
    let alone = |n: usize| HEADER_LEN + pad8(1 + source.len()) + RECORD_HEADER_LEN + pad8(n);
    let fits: Vec<u64> = (0..sizes.len() as u64).filter(|&i| alone(sizes[i as usize]) <= limit).collect();
    assert!(!fits.is_empty() && fits.len() < sizes.len(), "the sizes straddle the limit");
    let got: Vec<u64> = fleet.source("h", &source).map(|e| e.seq).collect();
    assert_eq!(got, fits);
    for e in fleet.source("h", &source) {
        let i = e.seq as usize;
        assert_eq!(e.payload.len(), sizes[i]);
        assert!(e.payload.iter().enumerate().all(|(j, &b)| b == (i * 31 + j) as u8), "record {i} intact");
    }
    let markers = (sizes.len() - fits.len()) as u64;
    assert_eq!(report(&out, "too_large"), markers, "{out}");
    assert_eq!(report(&out, "shipped"), fits.len() as u64, "{out}");
    assert_eq!(fleet.stats().too_large, markers);
    assert_eq!(fleet.stats().missing, 0);
}
