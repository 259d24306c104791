//! What the multi-process tests share: children are the test binary run again with
//! `RINGTRACE_CHILD` naming their role (its `child` test runs it and exits), and they
//! report with one `RESULT n n ...` line on stdout.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};

/// Runs this test binary as a child in `role`, with `args`.
pub fn spawn_child(role: &str, args: &[&str]) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1", "-q"])
        .env("RINGTRACE_CHILD", role)
        .env("RINGTRACE_CHILD_ARGS", args.join("\u{1f}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Waits for a child and returns the numbers of its `RESULT` line.
pub fn result_of(child: Child) -> Vec<u64> {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "child failed: {:?}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("RESULT")).unwrap_or_else(|| panic!("no result in {text}"));
    line.split_whitespace().skip(1).map(|w| w.parse().unwrap()).collect()
}
