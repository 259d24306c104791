//! What the integration tests share. The multi-process tests: children are the test
//! binary run again with `RINGTRACE_CHILD` naming their role (its ignored `child` test,
//! which [`child_role`] keeps from passing as a test, runs it and exits), and they
//! report with one `RESULT n n ...` line on stdout. Checksums and
//! temporary files; the records of the channel tests ([`channel`]); the shared-ring
//! tests' records, files and child roles ([`shm`]); the BPF map tests' skip and checks
//! ([`bpf`]); whether a thread sleeps in a wait, and whether a doorbell rang ([`asleep`]).
#![allow(dead_code)]

pub mod asleep;
#[macro_use]
pub mod bpf;
pub mod channel;
pub mod shm;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A flight recorder of `cap` bytes that retires nothing ahead of its producers, so
/// that its positions are exactly the kernel's (`retire_ahead(0)`).
pub fn exact(cap: u64) -> ringtrace::FlightRecorder {
    ringtrace::FlightRecorder::builder(cap).retire_ahead(0).build().unwrap()
}

/// FNV-1a, the records' checksum.
pub fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ b as u32).wrapping_mul(0x0100_0193))
}

/// A fresh path `ringtrace-test-<pid>-<name>.<ext>` for a file of this test process, in
/// `/dev/shm` where there is one (any file there is removed first).
pub fn temp_file(name: &str, ext: &str) -> PathBuf {
    let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let p = dir.join(format!("ringtrace-test-{}-{name}.{ext}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// The arguments that run this test binary's ignored `child` test alone.
pub const CHILD_TEST: [&str; 6] = ["--exact", "child", "--ignored", "--nocapture", "--test-threads=1", "-q"];

/// The role (`RINGTRACE_CHILD`) and arguments (`RINGTRACE_CHILD_ARGS`) of a child run by
/// [`spawn_child`]. The `child` tests are `#[ignore]`d, so that a test run counts only
/// real tests; run without a role (`--ignored`), this panics rather than pass.
pub fn child_role() -> (String, Vec<String>) {
    let Ok(role) = std::env::var("RINGTRACE_CHILD") else {
        panic!("not a test: the child role of this binary's multi-process tests, run by them with RINGTRACE_CHILD set")
    };
    let args = std::env::var("RINGTRACE_CHILD_ARGS").unwrap_or_default().split('\u{1f}').map(str::to_owned).collect();
    (role, args)
}

/// Runs this test binary as a child in `role`, with `args`.
pub fn spawn_child(role: &str, args: &[&str]) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(CHILD_TEST)
        .env("RINGTRACE_CHILD", role)
        .env("RINGTRACE_CHILD_ARGS", args.join("\u{1f}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// A child killed (and reaped) when dropped: a failing test leaves none behind.
pub struct Kid(pub Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Kid {
    /// Reads the child's stdout until a line `want`, for at most 30 s (on a thread of
    /// its own: a blocking read has no deadline); the lines before it are discarded.
    /// Takes the child's stdout: call it once.
    pub fn wait_for(&mut self, want: &str) {
        let out = self.0.stdout.take().expect("the child's stdout, once");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(out)) {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut seen = Vec::new();
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
                Ok(line) if line.trim() == want => return,
                Ok(line) => seen.push(line),
                Err(e) => panic!("no {want:?} from the child ({e}); it said {seen:?}"),
            }
        }
    }
}

/// Waits for a child and returns the numbers of its `RESULT` line.
pub fn result_of(child: Child) -> Vec<u64> {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "child failed: {:?}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("RESULT")).unwrap_or_else(|| panic!("no result in {text}"));
    line.split_whitespace().skip(1).map(|w| w.parse().unwrap()).collect()
}
