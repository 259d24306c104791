//! What the flight-recorder examples leave behind is what their instructions name: each
//! example is run (its source compiled into this test), then every `ringtrace` command
//! its header gives, and the README's for its snapshot file, as written, with `/tmp/`
//! read as the temporary directory the example wrote into.
//!
//! One test in this file: it sets `TMPDIR` (where `std::env::temp_dir` points the
//! examples) before any other thread could read the environment.

use std::path::{Path, PathBuf};

mod common;

use common::BIN;

#[path = "../../ringtrace/examples/flight_recorder.rs"]
mod ring_example;

#[path = "../../ringtrace-tracing/examples/flight_recorder.rs"]
mod tracing_example;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `ringtrace ...` command lines of `text` that name a file under
/// `/tmp/ringtrace-example/`, with `$ `, indentation and Rust's `//!` taken off.
fn instructions(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let line = line.trim_start().trim_start_matches("//!").trim();
        for span in std::iter::once(line).chain(line.split('`').skip(1).step_by(2)) {
            if span.starts_with("ringtrace ")
                && span.contains("/tmp/ringtrace-example/")
                && !found.contains(&span.to_owned())
            {
                found.push(span.to_owned());
            }
        }
    }
    found
}

/// Runs `line` (a `ringtrace` command, words split at spaces) with `/tmp/` read as `tmp`;
/// its stdout, or why it failed.
fn run(line: &str, tmp: &Path) -> Result<String, String> {
    let args: Vec<String> = line
        .split_whitespace()
        .skip(1)
        .map(|w| match w.strip_prefix("/tmp/") {
            Some(rest) => tmp.join(rest).to_str().unwrap().to_owned(),
            None => w.to_owned(),
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = common::run(&args);
    if o.code != 0 || o.stdout.is_empty() {
        return Err(format!("`{line}`: exit {}, {} bytes out: {}", o.code, o.stdout.len(), o.stderr));
    }
    Ok(o.stdout)
}

#[test]
fn the_examples_leave_what_their_instructions_read() {
    let tmp = common::temp("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    // The only test of this binary, before any thread reads the environment.
    std::env::set_var("TMPDIR", &tmp);
    assert_eq!(std::env::temp_dir(), tmp);
    assert!(Path::new(BIN).is_file());

    ring_example::main().unwrap();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let source = std::fs::read_to_string(repo().join("crates/ringtrace/examples/flight_recorder.rs")).unwrap();
    let (from_readme, from_source) = (instructions(&readme), instructions(&source));
    assert!(
        from_readme.iter().any(|l| l.starts_with("ringtrace snapshot ")),
        "README.md names no `ringtrace snapshot` of the flight_recorder example's file: {from_readme:?}"
    );
    assert!(!from_source.is_empty(), "the flight_recorder example names no command to read its file");
    for line in from_readme.iter().chain(&from_source) {
        let out = run(line, &tmp).unwrap();
        // Records of 16 bytes: thread, then sequence number; the newest first with -r.
        assert!(out.lines().count() > 100, "`{line}`: {out}");
    }

    tracing_example::main().unwrap();
    let source = std::fs::read_to_string(repo().join("crates/ringtrace-tracing/examples/flight_recorder.rs")).unwrap();
    let lines = instructions(&source);
    assert!(lines.len() >= 2, "{lines:?}");
    for line in &lines {
        let out = run(line, &tmp).unwrap();
        assert!(out.contains("slow job"), "`{line}`: {out}");
    }
}
