//! `write --wait` and `write`'s report: `--wait=TIMEOUT` bounds one record's wait for
//! room, and once a record waited in vain the next ones do not each wait again; a
//! consumer that went away may come back, and is waited for; the report of what was
//! written and refused is said however the command ends (the input's end, an input that
//! cannot be read, SIGINT, SIGTERM), and counts exactly what the ring received.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringtrace::inspect::RingFile;

mod common;

use common::{code, run, spawn, temp, Guard, BIN, DEADLINE};

/// A new 4 KiB discard ring file.
fn ring() -> String {
    let path = temp("w.ring");
    let o = run(&["create", path.to_str().unwrap(), "--capacity", "4k"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    path.to_str().unwrap().to_owned()
}

/// A file of `n` lines of `len` bytes (`len` of 700: five fill the 4 KiB ring).
fn lines(n: usize, len: usize) -> String {
    let path = temp("input.txt");
    let text: String = (0..n).map(|i| format!("{:0>len$}\n", i)).collect();
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// The ring's counters (committed, lost), as its file has them.
fn counters(ring: &str) -> (u64, u64) {
    let s = RingFile::open(ring).unwrap().state().unwrap();
    (s.committed, s.lost)
}

/// The number after `word` in `text` (`wrote 5`).
fn number_after(text: &str, word: &str) -> u64 {
    let at = text.find(word).unwrap_or_else(|| panic!("no {word:?} in {text}")) + word.len();
    text[at..].trim_start().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

#[test]
fn without_a_consumer_one_record_waits_then_the_rest_are_refused_at_once() {
    let r = ring();
    let input = lines(50, 700);
    let start = Instant::now();
    let o = run(&["write", &r, "--wait=200ms", "--drop", &input]);
    let took = start.elapsed();
    assert_eq!(o.code, 0, "{}", o.stderr);
    // 45 records find the ring full: waiting 200 ms each would take 9 s.
    assert!(took < Duration::from_secs(5), "the writer took {took:?}: {}", o.stderr);
    let (committed, lost) = counters(&r);
    assert_eq!(committed, 5, "{}", o.stderr);
    assert_eq!(number_after(&o.stderr, "wrote "), committed, "{}", o.stderr);
    assert_eq!(number_after(&o.stderr, "refused "), 45, "{}", o.stderr);
    // The ring counts each refused record once, as the report does.
    assert_eq!(lost, 45, "{}", o.stderr);
    assert!(o.stderr.contains("1 after waiting for room as long as --wait allowed"), "{}", o.stderr);
}

#[test]
fn a_consumer_that_went_away_is_waited_for_and_the_records_go_to_the_next() {
    let r = ring();
    // The ring full, and its consumer gone: one attached, took a record, and left.
    assert_eq!(run(&["write", &r, &lines(5, 700)]).code, 0);
    let o = run(&["consume", &r, "-n", "1"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(run(&["write", &r, &lines(1, 700)]).code, 0);
    // 536 bytes free: not one of these fits.
    let (mut writer, _out, err) = spawn(&["write", &r, "--wait", &lines(20, 600)]);
    // The writer waits for a consumer rather than refusing what is left.
    std::thread::sleep(Duration::from_millis(300));
    assert!(writer.0.try_wait().unwrap().is_none(), "the writer gave up: {}", std::fs::read_to_string(&err).unwrap());
    let o = run(&["consume", &r, "-n", "25", "--timeout", "10s"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout.lines().count(), 25, "{}", o.stdout);
    assert_eq!(code(writer.wait(DEADLINE, "write --wait"), "write --wait"), 0);
    let said = std::fs::read_to_string(&err).unwrap();
    assert!(said.contains("wrote 20 record(s)") && !said.contains("refused"), "{said}");
}

/// Starts `write RING --wait` reading a pipe: the child, and the pipe's end.
fn writer_on_a_pipe(ring: &str) -> (Guard, std::process::ChildStdin, std::path::PathBuf) {
    let err = temp("stderr");
    let mut child = Command::new(BIN)
        .args(["write", ring, "--wait"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    (Guard(child), stdin, err)
}

/// Waits until the ring has committed `n` records.
fn until_committed(ring: &str, n: u64) {
    let start = Instant::now();
    while counters(ring).0 < n {
        assert!(start.elapsed() < DEADLINE, "the writer committed {} of {n} records", counters(ring).0);
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn signal(child: &Guard, name: &str) {
    let pid = child.0.id().to_string();
    assert!(Command::new("kill").args([&format!("-{name}"), &pid]).status().unwrap().success());
}

#[test]
fn a_signal_while_it_reads_or_waits_gets_the_report_and_128_plus_the_signal() {
    // Waiting for input: three lines written, the pipe still open.
    let r = ring();
    let (mut child, mut stdin, err) = writer_on_a_pipe(&r);
    stdin.write_all(b"a\nb\nc\n").unwrap();
    until_committed(&r, 3);
    signal(&child, "INT");
    assert_eq!(code(child.wait(DEADLINE, "write"), "write"), 130);
    let said = std::fs::read_to_string(&err).unwrap();
    assert!(said.contains("wrote 3 record(s)") && said.contains("SIGINT"), "{said}");

    // Waiting for room that no consumer makes: the report counts what the ring has.
    let r = ring();
    let (mut child, mut stdin, err) = writer_on_a_pipe(&r);
    let line = format!("{:0>700}\n", 0);
    for _ in 0..8 {
        stdin.write_all(line.as_bytes()).unwrap();
    }
    until_committed(&r, 5);
    signal(&child, "TERM");
    assert_eq!(code(child.wait(DEADLINE, "write"), "write"), 143);
    let said = std::fs::read_to_string(&err).unwrap();
    assert!(said.contains("SIGTERM"), "{said}");
    assert_eq!(number_after(&said, "wrote "), counters(&r).0, "{said}");
    drop(stdin);
}

#[test]
fn an_input_that_cannot_be_read_still_gets_the_report() {
    let r = ring();
    let good = lines(3, 10);
    let dir = temp("dir");
    std::fs::create_dir_all(&dir).unwrap();
    let o = run(&["write", &r, &good, dir.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(o.stderr.starts_with("ringtrace: error: "), "{}", o.stderr);
    assert!(o.stderr.contains("wrote 3 record(s)"), "{}", o.stderr);
    assert!(o.stderr.contains(&format!("cannot read {}", dir.display())), "{}", o.stderr);
    assert_eq!(counters(&r).0, 3);
}
