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
    // Leaked: a few bytes a test, for arguments borrowed as the others are.
    let to: &'a str = Box::leak(format!("kafka://{brokers}/{topic}").into_boxed_str());
    vec!["ship", "--to", to, "--host", host, "--state", state]
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

/// The sequence number a `SeqProgram` record carries in its first 8 bytes, checked
/// against the whole payload it must be (`expected_payload`, `payload` bytes).
fn bpf_seq(bytes: &[u8], payload: u32) -> u64 {
    let seq = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    assert_eq!(bytes, &ringtrace_fixtures::expected_payload(seq, payload)[..], "record {seq} damaged");
    seq
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

/// Waits (at most 60 s) until `done` holds, `what` naming it; the child's stderr at
/// `err` tells why not.
fn wait_until(mut done: impl FnMut() -> bool, child: &mut Guard, err: &std::path::Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        let stderr = || std::fs::read_to_string(err).unwrap();
        assert!(Instant::now() < deadline, "{what}: not by the deadline: {}", stderr());
        assert!(child.0.try_wait().unwrap().is_none(), "{what}: the command ended: {}", stderr());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Stops `child` with SIGINT: it exits 130.
fn interrupt(child: &mut Guard, err: &std::path::Path, what: &str) {
    let pid = rustix::process::Pid::from_raw(child.0.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let status = child.wait(Duration::from_secs(60), what);
    assert_eq!(code(status, what), 130, "{what}: {}", std::fs::read_to_string(err).unwrap());
}

/// `ringtrace ship` and `ringtrace consume` of one BPF map at once: a map has one
/// consumer position, so whichever reader starts second is refused, naming the first,
/// in both orders. Every record the program wrote is then either in Kafka or printed by
/// the consumer, exactly once, intact.
#[test]
fn ship_and_consume_of_one_bpf_map_refuse_each_other() {
    let Some(brokers) = brokers() else { return };
    if !ringtrace_fixtures::have_bpf() {
        return;
    }
    const PAYLOAD: u32 = 24;
    let map = ringtrace_fixtures::RingMap::create(1 << 20).unwrap();
    let spec = ringtrace_fixtures::ProgSpec { payload: PAYLOAD, ..Default::default() };
    let prog = ringtrace_fixtures::SeqProgram::load(std::os::fd::AsFd::as_fd(&map), spec).unwrap();
    let id = map.id().unwrap();
    let src = format!("bpf-id:{id}");
    let topic = create_topic(&brokers, "ship-bpf-one-reader", 1);
    let state = temp("ship-bpf.state");
    let uid = rustix::process::getuid().as_raw();
    let refused = |o: &Output, holder: &Guard, what: &str| {
        assert_eq!((o.code, o.stdout.as_str()), (1, ""), "{what} was not refused: {}", o.stderr);
        let who = format!("map {id} already has a reader (pid {}, uid {uid})", holder.0.id());
        assert!(o.stderr.contains(&who), "{what}: {:?} does not say {who:?}", o.stderr);
    };

    // The agent first: a consumer is refused.
    prog.run(100).unwrap();
    let mut args = ship_args(&brokers, &topic, "bpf-host", &state);
    args.push(&src);
    let (mut agent, _, agent_err) = spawn(&args);
    wait_until(|| state.exists(), &mut agent, &agent_err, "the agent stored its first round");
    let o = run(&["consume", "-n", "1", "--timeout", "2s", "--format", "hex", &src]);
    refused(&o, &agent, "consume beside ship");
    prog.run(100).unwrap();
    interrupt(&mut agent, &agent_err, "ship");

    // The consumer first: an agent is refused.
    let (mut consumer, out, err) = spawn(&["consume", "--follow", "--format", "hex", &src]);
    prog.run(100).unwrap();
    let printed = || -> Vec<u64> {
        std::fs::read_to_string(&out).unwrap().lines().map(|l| bpf_seq(&unhex(l), PAYLOAD)).collect()
    };
    wait_until(|| printed().contains(&299), &mut consumer, &err, "consume printed the last record");
    let mut args = ship_args(&brokers, &topic, "bpf-host", &state);
    args.extend(["--until-disconnected", &src]);
    let o = run(&args);
    refused(&o, &consumer, "ship beside consume");
    interrupt(&mut consumer, &err, "consume --follow");
    let consumed = printed();

    // The consumer gone, the agent ships the rest.
    prog.run(100).unwrap();
    let o = run(&args);
    assert_eq!(o.code, 0, "ship after the consumer: {}", o.stderr);

    let o = run(&["decode", "--json", &format!("kafka://{brokers}/{topic}")]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let shipped: Vec<u64> = o
        .stdout
        .lines()
        .map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!((j["host"].as_str(), j["source"].as_str()), (Some("bpf-host"), Some(src.as_str())), "{l}");
            match (j["data"].as_str(), j["hex"].as_str()) {
                (Some(text), _) => bpf_seq(text.as_bytes(), PAYLOAD),
                (None, Some(hex)) => bpf_seq(&unhex(hex), PAYLOAD),
                _ => panic!("no payload: {l}"),
            }
        })
        .collect();
    assert!(shipped.windows(2).all(|w| w[0] < w[1]), "shipped in order, each once: {shipped:?}");
    assert!(shipped.contains(&0) && shipped.contains(&399), "both agents shipped: {shipped:?}");
    let mut all: Vec<u64> = shipped.iter().chain(&consumed).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..400).collect::<Vec<_>>(), "every record once: shipped {shipped:?}, consumed {consumed:?}");
}
