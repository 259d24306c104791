//! The command as a pipeline: `write --wait` producers and a `consume` reader carry
//! any number of records through a small ring, exactly once and in each writer's
//! order; `consume` takes the ring's one consumer role and hands back only what it has
//! printed (a failed stdout, or one closed or open only for reading, leaves the records
//! in the ring); a signal the caller ignores stays ignored; `tail --timeout` ends a
//! follow.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringtrace::{MpscRing, Wakeup};

mod common;

use common::{code, run, spawn, temp, Guard, BIN};

/// Lines each writer writes: `RINGTRACE_PIPELINE_LINES`, default 1,000,000.
fn lines_per_writer() -> u64 {
    std::env::var("RINGTRACE_PIPELINE_LINES").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000)
}

/// A generous bound for the whole pipeline, idle or on a loaded machine.
const PIPELINE: Duration = Duration::from_secs(300);

#[test]
fn three_writers_through_a_64k_ring_arrive_exactly_once_in_order() {
    let n = lines_per_writer();
    let ring = temp("pipe.ring");
    let ring = ring.to_str().unwrap();
    let o = run(&["create", ring, "--capacity", "64k"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let total = (3 * n).to_string();
    // `-f`: a writer may finish before the next attaches; without it, consume would
    // end there, as a FIFO's reader sees end of file when its last writer closes.
    let (mut consumer, out, err) = spawn(&["consume", ring, "-f", "-n", &total, "--timeout", "60s"]);
    let mut writers: Vec<Guard> = (0..3)
        .map(|_| {
            let child = Command::new(BIN)
                .args(["write", ring, "--wait"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            Guard(child)
        })
        .collect();
    // Each writer's lines: "w<writer> <sequence>", fed from a thread of its own.
    let feeders: Vec<_> = writers
        .iter_mut()
        .enumerate()
        .map(|(w, g)| {
            let mut stdin = g.0.stdin.take().unwrap();
            std::thread::spawn(move || {
                let mut buf = Vec::with_capacity(1 << 16);
                for i in 0..n {
                    writeln!(buf, "w{w} {i}").unwrap();
                    if buf.len() > 60_000 {
                        stdin.write_all(&buf).unwrap();
                        buf.clear();
                    }
                }
                stdin.write_all(&buf).unwrap();
            })
        })
        .collect();
    for f in feeders {
        f.join().unwrap();
    }
    for (w, g) in writers.iter_mut().enumerate() {
        let status = g.wait(PIPELINE, "write --wait");
        let mut stderr = String::new();
        std::io::Read::read_to_string(g.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        assert_eq!(code(status, "write --wait"), 0, "writer {w}: {stderr}");
        assert!(stderr.contains(&format!("wrote {n} record(s)")), "writer {w}: {stderr}");
    }
    let status = consumer.wait(PIPELINE, "consume");
    assert_eq!(code(status, "consume"), 0, "{}", std::fs::read_to_string(&err).unwrap());
    let got = std::fs::read_to_string(&out).unwrap();
    let mut next = [0u64; 3];
    let mut count = 0u64;
    for line in got.lines() {
        let (w, i) = line.split_once(' ').unwrap_or_else(|| panic!("bad line {line:?}"));
        let w: usize = w.strip_prefix('w').and_then(|w| w.parse().ok()).unwrap_or_else(|| panic!("bad line {line:?}"));
        let i: u64 = i.parse().unwrap();
        assert_eq!(i, next[w], "writer {w}: record {i} where {} was due (lost, duplicated or reordered)", next[w]);
        next[w] += 1;
        count += 1;
    }
    assert_eq!(next, [n; 3], "every line of every writer, exactly once");
    assert_eq!(count, 3 * n);
    // The ring's own books agree: nothing refused, nothing left.
    let stat = run(&["stat", "--format", "json", ring]);
    let v: serde_json::Value = serde_json::from_str(&stat.stdout).unwrap();
    assert_eq!(v["lost"], 0, "{}", stat.stdout);
}

#[test]
fn consume_ends_when_the_producers_are_gone_and_takes_the_one_consumer_role() {
    let path = temp("r.ring");
    let ring = MpscRing::builder(64 << 10).create(&path).unwrap();
    let p = path.to_str().unwrap();
    {
        let mut producer = ring.producer().unwrap();
        for i in 0..100 {
            producer.output(format!("r{i}").as_bytes(), Wakeup::Default).unwrap();
        }
        // A second consumer is refused while one is attached.
        let held = ring.consumer().unwrap();
        let o = run(&["consume", p, "-n", "1"]);
        assert_eq!(o.code, 1, "{}", o.stderr);
        assert!(o.stderr.contains("already has a consumer"), "{}", o.stderr);
        drop(held);
    }
    // Every producer gone: consume prints what is there and ends, as at end of file.
    let o = run(&["consume", p]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let want: Vec<String> = (0..100).map(|i| format!("r{i}")).collect();
    assert_eq!(o.stdout.lines().collect::<Vec<_>>(), want);
    // Consumed: the ring is empty now, for readers that do not consume too.
    assert_eq!(run(&["tail", p]).stdout, "");
    // Sources consume does not drain are refused with what to use instead.
    let snap = temp("s.snap");
    std::fs::write(&snap, b"").unwrap();
    let o = run(&["consume", snap.to_str().unwrap()]);
    assert_eq!(o.code, 1);
}

#[test]
fn an_interrupted_consume_loses_no_record() {
    let path = temp("r.ring");
    let ring = MpscRing::builder(64 << 10).create(&path).unwrap();
    let p = path.to_str().unwrap();
    // A producer that goes on writing, waiting for room.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let ring = MpscRing::open(&path).unwrap();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut producer = ring.producer().unwrap();
            let mut written = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match producer.output_wait(
                    format!("{written}").as_bytes(),
                    Wakeup::Default,
                    Some(Duration::from_millis(50)),
                ) {
                    Ok(()) => written += 1,
                    Err(ringtrace::ReserveError::Timeout { .. }) => {}
                    // The consumer was interrupted: wait for the next one.
                    Err(ringtrace::ReserveError::Disconnected { .. }) => std::thread::sleep(Duration::from_millis(1)),
                    Err(e) => panic!("{e}"),
                }
            }
            written
        })
    };
    let (mut consumer, out, _err) = spawn(&["consume", p]);
    let start = Instant::now();
    while std::fs::metadata(&out).map_or(0, |m| m.len()) < 100_000 {
        assert!(start.elapsed() < Duration::from_secs(60), "consume printed nothing");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(Command::new("kill").args(["-INT", &consumer.0.id().to_string()]).status().unwrap().success());
    let status = consumer.wait(Duration::from_secs(20), "consume");
    assert_eq!(status.code(), Some(130), "{status:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().unwrap();
    drop(ring);
    // What consume printed, then what is still in the ring: every record once, in order.
    let printed = std::fs::read_to_string(&out).unwrap();
    let rest = run(&["consume", p]);
    assert_eq!(rest.code, 0, "{}", rest.stderr);
    let all: Vec<u64> = printed.lines().chain(rest.stdout.lines()).map(|l| l.parse().unwrap()).collect();
    assert_eq!(all, (0..written).collect::<Vec<_>>(), "records lost or repeated around the interrupt");
}

#[test]
fn tail_follow_ends_after_its_timeout() {
    let path = temp("r.ring");
    let _ring = MpscRing::builder(64 << 10).create(&path).unwrap();
    let start = Instant::now();
    let o = run(&["tail", "-f", "--timeout", "300ms", path.to_str().unwrap()]);
    assert_eq!((o.code, o.stdout.as_str()), (0, ""), "{}", o.stderr);
    assert!(start.elapsed() >= Duration::from_millis(300));
}

/// Runs the binary with stdout on the full device (every write fails with ENOSPC).
fn run_to_full(args: &[&str]) -> (i32, String) {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let o = Command::new(BIN).args(args).stdin(Stdio::null()).stdout(full).stderr(Stdio::piped()).output().unwrap();
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn a_consume_whose_output_fails_leaves_its_records_in_the_ring() {
    let lines = |n: usize, from: usize| (from..n).map(|i| format!("r{i}")).collect::<Vec<_>>();
    // A discard ring: the pass read and not printed is put back, every record stays.
    let path = temp("d.ring");
    let p = path.to_str().unwrap();
    {
        let ring = MpscRing::builder(64 << 10).create(&path).unwrap();
        let mut producer = ring.producer().unwrap();
        for i in 0..100 {
            producer.output(format!("r{i}").as_bytes(), Wakeup::Default).unwrap();
        }
    }
    let (status, err) = run_to_full(&["consume", p]);
    assert_eq!(status, 1, "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    let o = run(&["consume", p]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout.lines().collect::<Vec<_>>(), lines(100, 0), "records lost with the failed output");

    // An overwrite ring: a consume call hands back what it read, so only the record
    // being written when stdout failed is gone, and the message says so.
    let path = temp("o.ring");
    let p = path.to_str().unwrap();
    {
        let ring = ringtrace::FlightRecorder::builder(64 << 10).create(&path).unwrap();
        let mut producer = ring.producer().unwrap();
        for i in 0..100 {
            producer.output(format!("r{i}").as_bytes(), Wakeup::Default).unwrap();
        }
    }
    let (status, err) = run_to_full(&["consume", p]);
    assert_eq!(status, 1, "{err}");
    assert!(err.contains("the record being written is consumed and lost"), "{err}");
    let o = run(&["consume", p]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout.lines().collect::<Vec<_>>(), lines(100, 1), "more than the record being written lost");
}

/// A signal's bit in a `SigIgn`/`SigCgt` mask of `/proc/PID/status`.
fn signal_mask(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mask = status.lines().find_map(|l| l.strip_prefix(field))?;
    u64::from_str_radix(mask.trim(), 16).ok()
}

#[test]
fn a_signal_the_caller_ignores_stays_ignored() {
    let path = temp("r.ring");
    let ring = MpscRing::builder(64 << 10).create(&path).unwrap();
    let _producer = ring.producer().unwrap();
    // As `nohup` starts it: SIGHUP ignored.
    let child = Command::new("bash")
        .args(["-c", "trap '' HUP; exec \"$0\" consume \"$1\""])
        .args([BIN, path.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut consumer = Guard(child);
    let pid = consumer.0.id();
    // Once the command is the ring's consumer (its handlers are installed, and the first
    // SIGINT only asks it to stop), SIGHUP must still be ignored, not caught.
    let (hup, int) = (1u64 << 0, 1u64 << 1);
    let start = Instant::now();
    loop {
        let stat = run(&["stat", "--format", "json", path.to_str().unwrap()]);
        let v: serde_json::Value = serde_json::from_str(&stat.stdout).unwrap();
        if v["consumer_attached"] == pid {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "consume never attached: {}", stat.stdout);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_ne!(signal_mask(pid, "SigCgt:").unwrap() & int, 0, "SIGINT is not taken");
    assert_ne!(signal_mask(pid, "SigIgn:").unwrap() & hup, 0, "SIGHUP, ignored by the caller, was taken over");
    // SIGINT still stops it gracefully.
    assert!(Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap().success());
    assert_eq!(consumer.wait(Duration::from_secs(20), "consume").code(), Some(130));
}

#[test]
fn write_and_consume_attach_to_another_users_ring_only_when_asked() {
    if !ringtrace_fixtures::have_root("give a ring file to another user (chown)") {
        return;
    }
    let path = temp("theirs.ring");
    let p = path.to_str().unwrap();
    assert_eq!(run(&["create", p, "--capacity", "64k"]).code, 0);
    // Its owner could truncate it under this command's mapping (SIGBUS).
    std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
    let mut writer = Command::new(BIN).args(["write", p]).stdin(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // It refuses before reading its input, so the pipe may already be closed.
    match writer.stdin.take().unwrap().write_all(b"refused\n") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing to the writer's stdin: {e}"),
        _ => {}
    }
    let o = writer.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("belongs to another user"), "{o:?}");
    let o = run(&["consume", p, "--timeout", "100ms"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("belongs to another user"), "{}", o.stderr);
    // Asked for: it is shared on purpose.
    let mut writer = Command::new(BIN).args(["write", p, "--any-owner"]).stdin(Stdio::piped()).spawn().unwrap();
    writer.stdin.take().unwrap().write_all(b"shared on purpose\n").unwrap();
    assert!(writer.wait().unwrap().success());
    let o = run(&["consume", p, "--any-owner"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "shared on purpose\n"), "{}", o.stderr);
}

/// Runs the binary through bash with stdout as `redirect` makes it: `>&-` closed,
/// `1</dev/null` open only for reading. Its exit status and stderr.
fn run_with_stdout(args: &[&str], redirect: &str) -> (i32, String) {
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!("exec \"$0\" \"$@\" {redirect}"))
        .arg(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn a_consume_whose_stdout_is_closed_or_read_only_takes_no_record() {
    let lines: Vec<String> = (0..3).map(|i| format!("r{i}")).collect();
    for overwrite in [false, true] {
        for redirect in [">&-", "1</dev/null"] {
            let path = temp("closed.ring");
            let p = path.to_str().unwrap();
            let mut args = vec!["create", p, "--capacity", "4k"];
            if overwrite {
                args.extend(["--mode", "overwrite"]);
            }
            assert_eq!(run(&args).code, 0);
            let mut writer =
                Command::new(BIN).args(["write", p]).stdin(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
            writer.stdin.take().unwrap().write_all(b"r0\nr1\nr2\n").unwrap();
            assert!(writer.wait().unwrap().success());
            let what = format!("consume {redirect} of a{} ring", if overwrite { "n overwrite" } else { " discard" });
            let (status, err) = run_with_stdout(&["consume", p], redirect);
            assert_eq!(status, 1, "{what}: {err}");
            assert_eq!(err.lines().count(), 1, "{what}: {err}");
            assert!(err.starts_with("ringtrace: error: ") && err.contains("stdout"), "{what}: {err}");
            assert!(err.contains("no record was consumed"), "{what}: {err}");
            // Every record is still there for the next consumer.
            let o = run(&["consume", p]);
            assert_eq!(o.code, 0, "{what}: {}", o.stderr);
            assert_eq!(o.stdout.lines().collect::<Vec<_>>(), lines, "{what}: records lost");
        }
    }
    // The commands that only read say so too, rather than succeed printing nothing.
    let path = temp("read.ring");
    let p = path.to_str().unwrap();
    assert_eq!(run(&["create", p, "--capacity", "4k"]).code, 0);
    for cmd in ["snapshot", "tail", "stat"] {
        let (status, err) = run_with_stdout(&[cmd, p], "1</dev/null");
        assert_eq!(status, 1, "{cmd}: {err}");
        assert!(err.contains("cannot write to stdout"), "{cmd}: {err}");
    }
}
