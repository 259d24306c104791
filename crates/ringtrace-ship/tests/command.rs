//! The `ringtrace-ship` command as a user runs it: `ship` asked to stop by a first
//! SIGTERM or SIGINT (it ends its round, prints its counters, stores its state and
//! exits 128 + the signal's number, as `ringtrace ship` does), `stat` of the state file
//! in text and JSON, and `read` of the topic.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use ringtrace::Wakeup;
use rustix::process::{kill_process, Pid, Signal};

const BIN: &str = env!("CARGO_BIN_EXE_ringtrace-ship");

/// `ringtrace-ship ARGS`, to its end: (exit code, stdout, stderr). The output goes to
/// files in `dir` (a pipe read only at the end would fill and stall the command).
fn run(dir: &TempDir, args: &[&str]) -> (Option<i32>, String, String) {
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = wait_child(&mut child, Duration::from_secs(120));
    (status.code(), std::fs::read_to_string(out).unwrap(), std::fs::read_to_string(err).unwrap())
}

/// A first SIGTERM, and a first SIGINT, while the agent follows a ring whose producer
/// is still attached: the agent ends its round, prints its counters and exits 143 or
/// 130; its state holds every record it shipped. `stat` prints that state as text and
/// as JSON, and `read` reads every record back once.
#[test]
fn a_first_sigterm_or_sigint_ends_the_round_with_the_counters_printed() {
    let Some(brokers) = brokers() else { return };
    for (signal, code) in [(Signal::TERM, 143), (Signal::INT, 130)] {
        let topic = create_topic(&brokers, &format!("signal-{code}"), 1);
        let tmp = TempDir::new(&format!("signal-{code}"));
        let ring = tmp.path().join("s.ring");
        let mut p = ring_producer(&ring, 1 << 20);
        for i in 0..1000 {
            p.output(&record(1, 0, i), Wakeup::Default).unwrap();
        }
        let state = tmp.path().join("agent.state");
        let mut cmd = agent(&brokers, &topic, "sig", &state, std::slice::from_ref(&ring));
        let child = cmd.stderr(Stdio::piped()).spawn().unwrap();
        // Its first round stored: the records are shipped. The producer stays
        // attached, so only the signal ends the agent.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !state.exists() {
            assert!(Instant::now() < deadline, "no round stored in 60 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        kill_process(Pid::from_raw(child.id() as i32).unwrap(), signal).unwrap();
        let out = wait_output(child, Duration::from_secs(60));
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(code), "{signal:?}: {}; stderr: {stderr}", out.status);
        assert!(stdout.starts_with("shipped=1000 "), "{signal:?}: the counters: {stdout:?}");
        drop(p);

        let (status, text, err) = run(&tmp, &["stat", state.to_str().unwrap()]);
        assert_eq!(status, Some(0), "{err}");
        assert!(text.contains("1000 shipped"), "{text}");
        let (status, json, err) = run(&tmp, &["stat", "--format", "json", state.to_str().unwrap()]);
        assert_eq!(status, Some(0), "{err}");
        let j: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
        assert_eq!(j["host"], "sig");
        let s = &j["sources"][0];
        assert_eq!(s["source"].as_str(), ring.to_str());
        assert_eq!((s["shipped"].as_u64(), s["next_seq"].as_u64()), (Some(1000), Some(1000)), "{json}");
        assert_eq!((s["too_large"].as_u64(), s["ring_lost"].as_u64()), (Some(0), Some(0)), "{json}");

        let (status, lines, err) = run(&tmp, &["read", "--brokers", &brokers, "--topic", &topic]);
        assert_eq!(status, Some(0), "{err}");
        let seqs: Vec<u64> = lines.lines().map(|l| l.split(' ').nth(3).unwrap().parse().unwrap()).collect();
        assert_eq!(seqs, (0..1000).collect::<Vec<_>>());
        assert!(err.contains("records=1000 duplicates=0"), "{err}");
    }
}
