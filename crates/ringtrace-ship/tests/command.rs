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

/// `ship` is one command: its destination is `--to`, the old `--brokers`/`--topic` are
/// usage errors naming it, every duration is written with its unit, options of the
/// other destination are refused by name, and a source an OTLP delivery cannot read is
/// named. None of these needs a cluster or an endpoint: all are refused before one is
/// asked.
#[test]
fn ship_takes_its_destination_from_to_and_durations_with_their_unit() {
    let tmp = TempDir::new("ship-usage");
    let kafka = "kafka://127.0.0.1:1/t";
    for (args, code, says) in [
        (
            &["ship", "--brokers", "b:1", "r"][..],
            2,
            "--brokers is gone: write the destination as --to kafka://BROKERS/TOPIC",
        ),
        (&["ship", "--topic", "t", "r"], 2, "--topic is gone"),
        (&["ship", "--to", "b:1/t", "r"], 2, "a destination is kafka://BROKERS/TOPIC"),
        (&["ship", "--to", kafka, "--duration", "5", "r"], 2, "`5`: a duration needs a unit, as in 5s or 5ms"),
        (&["ship", "--to", kafka, "--ack-timeout", "2", "r"], 2, "as in 2s or 2ms"),
        (&["ship", "--to", kafka, "--spool-wait", "0.5", "r"], 2, "as in 0.5s or 0.5ms"),
        (&["read", "--brokers", "b:1", "--topic", "t", "--timeout", "60"], 2, "as in 60s or 60ms"),
        (&["ship", "--to", kafka, "--service", "s", "--host", "h", "--state", "s", "r"], 1, "--service is OTLP's"),
        (&["ship", "--to", kafka, "--state", "s", "r"], 1, "ship needs --host"),
        (&["ship", "--host", "h", "--state", "s", "r"], 1, "ship needs --to kafka://BROKERS/TOPIC"),
        (&["ship", "--to", "otlp://127.0.0.1:1", "--state", "s", "r"], 1, "--state is Kafka's"),
        (&["ship", "--to", "otlp://127.0.0.1:1", "r"], 1, "ringtrace-ship: r: "),
    ] {
        let (status, _, err) = run(&tmp, args);
        assert_eq!(status, Some(code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// The agent's log lines (here: a damaged round in its spool, counted as lost) reach
/// stderr as it has always printed them, `ringtrace-ship: MESSAGE`, with no time or
/// level; the counters go to stdout. Needs no cluster: the agent stops after
/// --duration, its ring empty.
#[test]
fn the_agents_log_lines_are_printed_as_they_were() {
    let tmp = TempDir::new("ship-log");
    let ring = tmp.path().join("r.ring");
    let _p = ring_producer(&ring, 1 << 16);
    let state = tmp.path().join("agent.state");
    let spool = tmp.path().join("spool");
    std::fs::create_dir(&spool).unwrap();
    std::fs::set_permissions(&spool, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let pending = ringtrace_ship::state::State { host: "h".into(), spool_head: 0, spool_tail: 1, ..Default::default() };
    pending.store(&state).unwrap();
    let damaged = spool.join(format!("{:020}.spool", 0));
    std::fs::write(&damaged, b"not a round").unwrap();
    let (status, out, err) = run(
        &tmp,
        &[
            "ship",
            "--to",
            "kafka://127.0.0.1:1/t",
            "--host",
            "h",
            "--duration",
            "500ms",
            "--spool",
            spool.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
            ring.to_str().unwrap(),
        ],
    );
    assert_eq!(status, Some(0), "{err}");
    let line = format!(
        "ringtrace-ship: damaged spool file {}: truncated: 11 bytes, fewer than the 32 of an empty round: its records \
         are lost, and counted (spool_lost)\n",
        damaged.display()
    );
    assert!(err.lines().any(|l| format!("{l}\n") == line), "{err}");
    assert!(out.starts_with("shipped=0 batches=0 "), "{out}");
}

/// The sources' log lines, printed as they always were: a file of a directory given
/// that is not a ring is skipped with a line naming it, and a record too large for a
/// message is said (a marker takes its place). Needs no cluster: the agent reads its
/// round and stops after --duration.
#[test]
fn the_sources_log_lines_are_printed_as_they_were() {
    let tmp = TempDir::new("ship-source-log");
    let ring = tmp.path().join("r.ring");
    let mut p = ring_producer(&ring, 1 << 16);
    p.output_wait(&[7u8; 10_000], Wakeup::Default, Some(Duration::from_secs(60))).unwrap();
    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let junk = plain.join("notes.txt");
    std::fs::write(&junk, b"not a ring").unwrap();
    let state = tmp.path().join("agent.state");
    let (status, _, err) = run(
        &tmp,
        &[
            "ship",
            "--to",
            "kafka://127.0.0.1:1/t",
            "--host",
            "h",
            "--duration",
            "500ms",
            "--max-message",
            "8192",
            "--state",
            state.to_str().unwrap(),
            ring.to_str().unwrap(),
            plain.to_str().unwrap(),
        ],
    );
    assert_eq!(status, Some(0), "{err}");
    let skipped = format!("ringtrace-ship: skipping {}: ", junk.display());
    assert!(err.lines().any(|l| l.starts_with(&skipped)), "{err}");
    let too_large = format!(
        "ringtrace-ship: {}: record 0 is 10000 bytes: with its batch's header it passes the largest message, 8192 \
         bytes; a marker is shipped in its place",
        ring.display()
    );
    assert!(err.lines().any(|l| l == too_large), "{err}");
    drop(p);
}
