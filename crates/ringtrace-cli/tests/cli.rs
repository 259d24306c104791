//! Runs the `ringtrace` binary on good, bad and hostile ring files: exit status 0, 1
//! (one line `ringtrace: error: ...` on stderr) or 2 (usage), never a signal or a hang.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ringtrace::inspect::image::{self, ImageBuilder};
use ringtrace::inspect::RingMode;

const BIN: &str = env!("CARGO_BIN_EXE_ringtrace");
const DEADLINE: Duration = Duration::from_secs(20);

/// A fresh path in the test's temporary directory.
fn temp(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "cli-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Waits for `child` at most `DEADLINE`; kills it and fails the test past that. Fails on
/// death by a signal. Returns the exit code.
fn wait(mut child: Child, what: &str) -> i32 {
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > DEADLINE {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("`ringtrace {what}` did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.signal().is_none(), "`ringtrace {what}` died of signal {:?}", status.signal());
    status.code().unwrap()
}

/// Runs the binary (stdout and stderr to files so that a large output cannot block it).
fn run(args: &[&str]) -> Output {
    let out = temp("stdout");
    let err = temp("stderr");
    let child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let code = wait(child, &args.join(" "));
    Output { code, stdout: std::fs::read_to_string(out).unwrap(), stderr: std::fs::read_to_string(err).unwrap() }
}

/// Asserts exit status 1 and a single stderr line `ringtrace: error: <...msg...>`, on
/// every reading command.
fn fails(path: &str, msg: &str) {
    for cmd in [&["stat"][..], &["tail"], &["snapshot"], &["tail", "--follow"], &["stat", "--json"]] {
        let mut args = cmd.to_vec();
        args.push(path);
        let o = run(&args);
        assert_eq!(o.code, 1, "{args:?}: {}", o.stderr);
        assert!(o.stdout.is_empty(), "{args:?}: {}", o.stdout);
        assert_eq!(o.stderr.lines().count(), 1, "{args:?}: {}", o.stderr);
        assert!(o.stderr.starts_with("ringtrace: error: ") && o.stderr.contains(msg), "{args:?}: {}", o.stderr);
    }
}

fn write_image(name: &str, img: &[u8]) -> String {
    let path = temp(name);
    std::fs::write(&path, img).unwrap();
    path.to_str().unwrap().to_owned()
}

fn valid() -> Vec<u8> {
    ImageBuilder::new(4096, RingMode::Overwrite)
        .start(4096 - 24)
        .record(b"first")
        .record(b"second\n")
        .pid(77)
        .record(b"\xff\x00bin")
        .build()
}

#[test]
fn missing_file_directory_fifo_and_devices_fail_cleanly() {
    fails("/nonexistent/ring", "cannot open /nonexistent/ring: No such file or directory");
    let dir = temp("dir");
    std::fs::create_dir(&dir).unwrap();
    fails(dir.to_str().unwrap(), "is a directory, not a regular file");
    let fifo = temp("fifo");
    let ok = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(ok.success());
    fails(fifo.to_str().unwrap(), "is a FIFO, not a regular file");
    fails("/dev/zero", "/dev/zero is a character device, not a regular file");
    fails("/dev/null", "is a character device");
}

#[test]
fn bad_files_fail_with_one_line() {
    fails(&write_image("empty", &[]), "ring file is 0 bytes, the header alone needs 8192");
    let random: Vec<u8> = (0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    fails(&write_image("random", &random), "not a ringtrace ring file: magic is 0x");
    let mut img = valid();
    img[..8].copy_from_slice(b"NOTARING");
    fails(&write_image("magic", &img), "magic is 0x474e495241544f4e, expected \"RINGTRC\\0\"");
    let mut img = valid();
    image::set_u32(&mut img, image::VERSION_AT, 3);
    fails(&write_image("version", &img), "layout version 3 is not supported (this ringtrace reads version 4)");
    let mut img = valid();
    img.truncate(10_000);
    fails(&write_image("truncated", &img), "file is 10000 bytes but capacity 4096 needs 12288 (truncated?)");
    let mut img = valid();
    image::set_u64(&mut img, image::OVER_POS_AT, 1 << 40);
    fails(&write_image("over", &img), "positions are inconsistent: overwrite 1099511627776 is past producer");
    let mut img = valid();
    image::set_u64(&mut img, image::PRODUCER_POS_AT, u64::MAX - 7);
    fails(&write_image("prod", &img), "positions are inconsistent: producer 18446744073709551608 is more than");
}

#[test]
fn valid_image_reads() {
    let path = write_image("valid", &valid());
    let o = run(&["tail", &path]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    assert_eq!(o.stdout, "first\nsecond\\n\n\\xff\\u{0}bin\n");
    let o = run(&["tail", "-n", "1", "--format", "json", &path]);
    assert_eq!(o.stdout, "{\"pos\":4104,\"pid\":77,\"len\":5,\"hex\":\"ff0062696e\"}\n");
    let o = run(&["snapshot", "--reverse", "--format", "hex", &path]);
    assert_eq!(o.stdout, "ff0062696e\n7365636f6e640a\n6669727374\n");
    let out = temp("snap.txt");
    let o = run(&["snapshot", &path, "-o", out.to_str().unwrap()]);
    assert_eq!((o.code, o.stdout.as_str()), (0, ""));
    assert_eq!(std::fs::read_to_string(out).unwrap(), "first\nsecond\\n\n\\xff\\u{0}bin\n");
    let o = run(&["stat", &path]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for want in ["mode          overwrite", "capacity      4096 bytes", "committed 3", "positions 4072..4120"] {
        assert!(o.stdout.contains(want), "{want}: {}", o.stdout);
    }
    let o = run(&["stat", "--json", &path]);
    assert!(o.stdout.starts_with("{\"path\":") && o.stdout.contains("\"committed\":3,"), "{}", o.stdout);
}

#[test]
fn corrupt_records_are_a_warning() {
    let mut img = ImageBuilder::new(4096, RingMode::Discard).record(b"ok").record(b"bad").build();
    image::set_u64(&mut img, image::DATA_AT + 16, 0x0000_0001_0000_1000u64.to_le());
    let o = run(&["snapshot", &write_image("corrupt", &img)]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "ok\n"));
    assert!(o.stderr.contains("warning: corrupt record header") && o.stderr.lines().count() == 1);
}

#[test]
fn usage_errors_exit_2() {
    for args in [&["tail"][..], &["stat", "a", "b"], &["tail", "--format", "xml", "x"], &["nope"], &[]] {
        let o = run(args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
    }
}

#[test]
fn broken_pipe_exits_quietly() {
    let mut b = ImageBuilder::new(1 << 16, RingMode::Discard);
    for i in 0..500u32 {
        b = b.record(&[i as u8; 100]);
    }
    let path = write_image("big", &b.build());
    let mut child = Command::new(BIN)
        .args(["snapshot", "--format", "hex", &path])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap(); // closes the pipe
    assert_eq!(line.len(), 201);
    let mut stderr = child.stderr.take().unwrap();
    assert_eq!(wait(child, "snapshot | head -1"), 0);
    let mut err = String::new();
    stderr.read_to_string(&mut err).unwrap();
    assert_eq!(err, "");
}

#[test]
fn follow_prints_new_records_and_losses() {
    let path = temp("live.ring");
    let img = |b: ImageBuilder| std::fs::write(&path, b.build()).unwrap();
    let base = || ImageBuilder::new(4096, RingMode::Overwrite).record(b"old");
    img(base());
    let mut child = Command::new(BIN)
        .args(["tail", "--follow", "--format", "json", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("\"data\":\"old\""), "{first}");
    // A new record committed (the file rewritten in place with one more).
    std::fs::write(&path, base().record(b"new").build()).unwrap();
    let next = lines.next().unwrap().unwrap();
    assert!(next.contains("\"pos\":16") && next.contains("\"data\":\"new\""), "{next}");
    // The ring moves far ahead: what follow missed is reported on stderr.
    let mut far = ImageBuilder::new(4096, RingMode::Overwrite).start(64 * 100);
    far = far.record(b"far");
    std::fs::write(&path, far.build()).unwrap();
    let next = lines.next().unwrap().unwrap();
    assert!(next.contains("\"data\":\"far\""), "{next}");
    child.kill().unwrap();
    child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    // The image builder says 100 records were retired before 6400; 2 were seen.
    assert_eq!(err, "ringtrace: 98 record(s) were overwritten before they could be printed\n");
}
