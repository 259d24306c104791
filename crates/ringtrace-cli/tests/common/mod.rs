//! What the command's integration tests share: running the binary with a deadline,
//! killing it if a test fails, and checking the one-line error contract.

#![allow(dead_code)] // each test binary uses its own part

#[cfg(feature = "kafka")]
pub mod kafka;
pub mod sink;

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_ringtrace");
pub const DEADLINE: Duration = Duration::from_secs(20);

/// A fresh path in the test's temporary directory.
pub fn temp(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "cli-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A child process killed (and reaped) on drop: a failing test leaves none behind.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl Guard {
    /// Waits at most `limit` for the child (the guard kills it if the test fails here).
    pub fn wait(&mut self, limit: Duration, what: &str) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(start.elapsed() < limit, "`ringtrace {what}` did not finish within {limit:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The exit code; fails the test on death by a signal.
pub fn code(status: ExitStatus, what: &str) -> i32 {
    assert!(status.signal().is_none(), "`ringtrace {what}` died of signal {:?}", status.signal());
    status.code().unwrap()
}

pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Starts the binary with stdout and stderr going to files (so that a large output
/// cannot block it).
pub fn spawn(args: &[&str]) -> (Guard, PathBuf, PathBuf) {
    let out = temp("stdout");
    let err = temp("stderr");
    let child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    (Guard(child), out, err)
}

/// Runs the binary to completion (at most `DEADLINE`).
pub fn run(args: &[&str]) -> Output {
    let (mut child, out, err) = spawn(args);
    let what = args.join(" ");
    let code = code(child.wait(DEADLINE, &what), &what);
    Output { code, stdout: std::fs::read_to_string(out).unwrap(), stderr: std::fs::read_to_string(err).unwrap() }
}

/// The peak resident memory (`VmHWM`) of process `pid`, in KiB, while it lives.
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Runs the binary to completion (at most `limit`), sampling its peak memory every
/// millisecond: the peak (KiB) and its output (exit code -1 if a signal ended it).
pub fn run_sampled(args: &[&str], limit: Duration) -> (u64, Output) {
    let (mut child, out, err) = spawn(args);
    let pid = child.0.id();
    let (mut peak, start) = (0, Instant::now());
    let status = loop {
        if let Some(kib) = peak_kib(pid) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < limit, "{args:?} did not finish");
        std::thread::sleep(Duration::from_millis(1));
    };
    let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
    (peak, Output { code: status.code().unwrap_or(-1), stdout: read(out), stderr: read(err) })
}

/// Asserts exit status 1, no output and one stderr line `ringtrace: error: <...msg...>`
/// naming `source`, on every reading command.
pub fn fails(source: &str, msg: &str) {
    for cmd in [&["stat"][..], &["stat", "--format", "json"], &["tail"], &["tail", "--follow"], &["snapshot"]] {
        let mut args = cmd.to_vec();
        args.push(source);
        let o = run(&args);
        assert_eq!(o.code, 1, "{args:?}: {}", o.stderr);
        assert!(o.stdout.is_empty(), "{args:?}: {}", o.stdout);
        assert_eq!(o.stderr.lines().count(), 1, "{args:?}: {}", o.stderr);
        assert!(o.stderr.starts_with("ringtrace: error: ") && o.stderr.contains(msg), "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(source), "{args:?}: the error does not name {source}: {}", o.stderr);
    }
}
