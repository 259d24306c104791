//! `ringtrace ship` (the `kafka` feature) against the test command's Kafka cluster: the
//! agent in the command drains a ring into a topic, `decode kafka://` reads every
//! record back once; a first SIGTERM or SIGINT ends it after its round, its state stored.
//! Without a cluster these skip with a message, unless `RINGTRACE_REQUIRE` names
//! `kafka` (the test command's does), where they fail.
#![cfg(feature = "kafka")]

mod common;

use std::time::{Duration, Instant};

use common::kafka::{brokers, create_topic};
use common::*;

/// A ring file holding records `0..n` (each its index, 8 bytes), its producer gone.
fn ring_with(n: u64) -> std::path::PathBuf {
    let ring = temp("ship.ring");
    let r = ringtrace::MpscRing::builder(1 << 20).create(&ring).unwrap();
    let mut p = r.producer().unwrap();
    for i in 0..n {
        p.output(&i.to_le_bytes(), ringtrace::Wakeup::Default).unwrap();
    }
    ring
}

/// `ship`'s arguments for host `host` on `topic`, its state at `state` (the sources to
/// follow).
fn ship_args<'a>(brokers: &'a str, topic: &'a str, host: &'a str, state: &'a std::path::Path) -> Vec<&'a str> {
    let state = state.to_str().unwrap();
    vec!["ship", "--brokers", brokers, "--topic", topic, "--host", host, "--state", state]
}

#[test]
fn ship_drains_a_ring_and_decode_reads_every_record_back_once() {
    let Some(brokers) = brokers() else { return };
    let topic = create_topic(&brokers, "ship-drain", 2);
    let (ring, state) = (ring_with(5000), temp("ship.state"));
    let mut args = ship_args(&brokers, &topic, "web-2", &state);
    args.extend(["--until-disconnected", ring.to_str().unwrap()]);
    let o = run(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("shipped=5000 "), "{}", o.stdout);
    let o = run(&["decode", "--json", &format!("kafka://{brokers}/{topic}")]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let seqs: Vec<u64> = o
        .stdout
        .lines()
        .map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!((j["host"].as_str(), j["source"].as_str()), (Some("web-2"), ring.to_str()));
            let seq = j["seq"].as_u64().unwrap();
            let bytes = match (j["data"].as_str(), j["hex"].as_str()) {
                (Some(text), _) => text.as_bytes().to_vec(),
                (None, Some(hex)) => {
                    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
                }
                _ => panic!("no payload: {l}"),
            };
            assert_eq!(bytes, seq.to_le_bytes(), "{l}");
            seq
        })
        .collect();
    assert_eq!(seqs, (0..5000).collect::<Vec<_>>());
}

/// A first SIGTERM or SIGINT asks: the agent ends its round and stops, its report
/// printed and its state stored, and the command exits 128 + the signal's number (143,
/// 130), as `ringtrace-ship ship` does.
#[test]
fn a_first_sigterm_or_sigint_stops_ship_after_its_round() {
    let Some(brokers) = brokers() else { return };
    for (signal, exit) in [(rustix::process::Signal::TERM, 143), (rustix::process::Signal::INT, 130)] {
        let topic = create_topic(&brokers, &format!("ship-{exit}"), 2);
        let (ring, state) = (ring_with(1000), temp("ship.state"));
        let mut args = ship_args(&brokers, &topic, "web-3", &state);
        args.push(ring.to_str().unwrap());
        let (mut child, out, err) = spawn(&args);
        // Its first round stored: the records are shipped.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !state.exists() {
            assert!(Instant::now() < deadline, "no round stored: {}", std::fs::read_to_string(&err).unwrap());
            assert!(child.0.try_wait().unwrap().is_none(), "ship ended: {}", std::fs::read_to_string(&err).unwrap());
            std::thread::sleep(Duration::from_millis(10));
        }
        let pid = rustix::process::Pid::from_raw(child.0.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        let status = child.wait(Duration::from_secs(60), "ship");
        assert_eq!(code(status, "ship"), exit, "{signal:?}: {}", std::fs::read_to_string(&err).unwrap());
        let stdout = std::fs::read_to_string(out).unwrap();
        assert!(stdout.starts_with("shipped=1000 "), "{signal:?}: {stdout}");
        let o = run(&["stat", "--format", "json", state.to_str().unwrap()]);
        let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        assert_eq!(j["sources"][0]["next_seq"].as_u64(), Some(1000), "{}", o.stdout);
    }
}
