//! The dump paths: from a panic hook, from outside a live process, and after the
//! process was killed with SIGKILL. Each runs this test binary again as the child
//! process (`CHILD` names what it does).

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{dispatch, TempDir};
use ringtrace_tracing::decode::{Trace, Value};
use ringtrace_tracing::Builder;

const EVENTS: u64 = 1000;

/// The child's part: records `EVENTS` events into a recorder directory (and a panic
/// hook's dump path), says "ready" on stdout, then panics, or waits to be killed. Not
/// a test: ignored, and run by [`spawn`] with `--ignored`.
#[test]
#[ignore = "a child role: run by this binary's dump tests"]
fn child() {
    let Ok(what) = std::env::var("CHILD") else { panic!("not a test: run by this binary's dump tests with CHILD set") };
    let dir = std::path::PathBuf::from(std::env::var("CHILD_DIR").unwrap());
    let (layer, recorder) =
        Builder::flight_recorder().per_thread_bytes(256 << 10).directory(dir.join("rec")).build().unwrap();
    recorder.install_panic_hook(dir.join("panic.rtt")).unwrap();
    let d = dispatch(layer);
    tracing::dispatcher::set_global_default(d).unwrap();
    let span = tracing::info_span!("job", id = 1u64);
    let _e = span.enter();
    for seq in 0..EVENTS {
        tracing::info!(seq, "working");
    }
    println!("ready");
    if what == "panic" {
        panic!("the child fails on purpose");
    }
    // Killed by the parent; gives up after a minute so a failed parent leaves no process.
    std::thread::sleep(Duration::from_secs(60));
}

fn spawn(what: &str, dir: &Path) -> std::process::Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--ignored", "--nocapture", "--test-threads=1"])
        .env("CHILD", what)
        .env("CHILD_DIR", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The child prints "ready", or exits (and its stdout ends): the loop ends either way.
    let out = BufReader::new(child.stdout.take().unwrap());
    let ready = out.lines().map_while(Result::ok).any(|l| l.contains("ready"));
    assert!(ready, "the child did not get ready");
    child
}

fn check(trace: &Trace) {
    let events = trace.events();
    assert_eq!(events.len() as u64, EVENTS);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.field("seq"), Some(&Value::U64(i as u64)));
        assert_eq!(e.message(), Some("working"));
        assert_eq!(e.spans[0].name, "job");
    }
    assert_eq!(trace.lost(), 0);
}

#[test]
fn a_panic_dumps_the_flight_recorder_before_the_process_dies() {
    let dir = TempDir::new("panic");
    let child = spawn("panic", &dir.0);
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("flight recorder dumped to"), "{stderr}");
    assert!(stderr.contains("the child fails on purpose"), "the previous hook ran too: {stderr}");
    let trace = Trace::open(dir.join("panic.rtt")).unwrap();
    assert!(!trace.problems.incomplete);
    check(&trace);
}

#[test]
fn a_live_process_is_read_from_outside_without_stopping_it() {
    let dir = TempDir::new("live");
    let mut child = spawn("wait", &dir.0);
    let trace = Trace::open(dir.join("rec"));
    let alive = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(alive, "the child was still running while it was read");
    check(&trace.unwrap());
}

#[test]
fn a_process_killed_with_sigkill_leaves_a_readable_directory() {
    let dir = TempDir::new("killed");
    let mut child = spawn("wait", &dir.0);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let trace = Trace::open(dir.join("rec")).unwrap();
    assert!(!trace.problems.any(), "{:?}", trace.problems);
    check(&trace);
    assert_eq!(trace.process.as_ref().unwrap().pid, child.id());
}
