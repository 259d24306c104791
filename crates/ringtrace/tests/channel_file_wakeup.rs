//! A channel file's doorbell (version 2: the bell line in its header page): an idle
//! reader sleeps until a commit wakes it, a writer in another process never leaves it
//! asleep, a version 1 file is still read (its reader looks every millisecond), and
//! what another process writes into the bell line never holds a poll past its timeout.
//!
//! Children are this test binary run again with `RINGTRACE_CHILD` set (as in
//! `tests/channel_shm.rs`).
#![cfg(not(loom))]

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::asleep::voluntary_switches;
use common::channel::{parse, record};
use common::Kid;
use ringtrace::clock::Monotonic;
use ringtrace::config::Discard;
use ringtrace::format::channel::{BELL_FLAG, BELL_FUTEX, CHANNEL_VERSION, CHANNEL_VERSION_1};
use ringtrace::inspect::channel::ChannelFile;
use ringtrace::{Channel, Wakeup};

/// Added to a writer's tag on its last record.
const END: u64 = 100;

fn create(name: &str) -> (std::path::PathBuf, Channel<Discard, Monotonic>) {
    let path = common::temp_file(name, "chan");
    let channel = Channel::<Discard, Monotonic>::builder(1 << 16)
        .max_producers(4)
        .slack(Duration::ZERO)
        .create(&path, Monotonic)
        .unwrap();
    (path, channel)
}

/// Writes `v` at byte `at` of the file, as another process could.
fn poke(path: &Path, at: usize, v: u32) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&v.to_ne_bytes(), at as u64).unwrap();
}

fn peek(path: &Path, at: usize) -> u32 {
    let mut b = [0u8; 4];
    std::fs::File::open(path).unwrap().read_exact_at(&mut b, at as u64).unwrap();
    u32::from_ne_bytes(b)
}

/// The child side: not a test (see `common::child_role`).
#[test]
#[ignore = "a child role: run by this binary's multi-process tests (common::spawn_child)"]
fn child() {
    let (role, args) = common::child_role();
    match role.as_str() {
        // Writes a record, waits for the parent's byte on stdin saying it was
        // delivered, pauses in a drawn way, for `args[2]` ms; the last record's tag is
        // the writer's plus END.
        "paced" => {
            let c = Channel::<Discard, Monotonic>::open(&args[0]).unwrap();
            let tag: u64 = args[1].parse().unwrap();
            let run = Duration::from_millis(args[2].parse().unwrap());
            let mut p = c.producer().unwrap();
            let mut stdin = std::io::stdin().lock();
            let start = Instant::now();
            let (mut seq, mut last) = (0u64, false);
            while !last {
                last = start.elapsed() >= run;
                p.output(&record(tag + if last { END } else { 0 }, seq), Wakeup::Default).unwrap();
                seq += 1;
                // EOF: the parent is gone (a failed test); nothing to wait for.
                let mut ack = [0u8; 1];
                if stdin.read_exact(&mut ack).is_err() {
                    return;
                }
                match (seq * 7 + tag) % 4 {
                    0 => {}
                    1 => (0..seq % 500).for_each(|_| std::hint::spin_loop()),
                    2 => std::thread::yield_now(),
                    _ => std::thread::sleep(Duration::from_micros(seq % 50)),
                }
            }
            println!("RESULT {seq}");
        }
        // Writes `args[2]` records as fast as it can, waking the reader; yields on a full
        // ring and counts the refusals.
        "burst" => {
            let c = Channel::<Discard, Monotonic>::open(&args[0]).unwrap();
            let tag: u64 = args[1].parse().unwrap();
            let n: u64 = args[2].parse().unwrap();
            let mut p = c.producer().unwrap();
            let mut refused = 0;
            for i in 0..n {
                match p.output(&record(tag, i), Wakeup::Default) {
                    Ok(()) => {}
                    Err(ringtrace::ReserveError::Full { .. }) => {
                        refused += 1;
                        std::thread::yield_now();
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            println!("RESULT {refused}");
        }
        other => panic!("unknown role {other}"),
    }
}

/// A reader that looked every millisecond woke about 300 times in this test; a reader
/// on the file's bell, a handful. The writer is another handle of the file (its own
/// mapping of the bell line), in a thread.
#[test]
fn an_idle_channel_file_reader_sleeps_until_a_commit_wakes_it() {
    let (path, channel) = create("idle");
    let mut reader = channel.reader().unwrap();
    let theirs = Channel::<Discard, Monotonic>::open(&path).unwrap();
    let mut producer = theirs.producer().unwrap();
    let before = voluntary_switches();
    let start = Instant::now();
    let mut got = Vec::new();
    std::thread::scope(|s| {
        let producer = &mut producer;
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            producer.output(b"late", Wakeup::Default).unwrap();
        });
        let n = reader.poll(Some(Duration::from_secs(30)), |r| got.push(r.data.to_vec())).unwrap();
        assert_eq!(n, 1);
    });
    let (elapsed, switches) = (start.elapsed(), voluntary_switches() - before);
    assert_eq!(got, [b"late".to_vec()]);
    assert!(elapsed >= Duration::from_millis(300), "woke before the commit: {elapsed:?}");
    assert!(switches < 30, "the idle reader woke {switches} times in {elapsed:?}");
    // The reader slept on the bell line, and the commit rang it.
    assert_ne!(peek(&path, BELL_FUTEX), 0, "the futex word was never rung");
    assert_eq!(peek(&path, BELL_FLAG), 0, "the flag is withdrawn after the sleep");
    assert_eq!(ChannelFile::open(&path).unwrap().header().version, CHANNEL_VERSION);
    std::fs::remove_file(&path).unwrap();
}

/// Writers in two other processes that each wait for their last record to be delivered
/// (the parent's byte on their stdin) before they write the next, with drawn pauses, so
/// that commits land at every point of the reader's way to sleep. A lost wakeup leaves
/// a record unread for the whole 10 s timeout of the reader's poll.
#[test]
fn no_commit_from_another_process_is_left_unread() {
    const WRITERS: usize = 2;
    let (path, channel) = create("paced");
    let mut reader = channel.reader().unwrap();
    let p = path.to_str().unwrap();
    let mut kids: Vec<Kid> = (0..WRITERS)
        .map(|t| {
            let child = Command::new(std::env::current_exe().unwrap())
                .args(common::CHILD_TEST)
                .env("RINGTRACE_CHILD", "paced")
                .env("RINGTRACE_CHILD_ARGS", [p, &t.to_string(), "1500"].join("\u{1f}"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap();
            Kid(child)
        })
        .collect();
    let mut acks: Vec<_> = kids.iter_mut().map(|k| k.0.stdin.take().unwrap()).collect();
    let mut next = [0u64; WRITERS];
    let (mut total, mut ended) = (0u64, 0);
    while ended < WRITERS {
        let began = Instant::now();
        let n = reader
            .poll(Some(Duration::from_secs(10)), |rec| {
                let (tag, seq) = parse(&rec);
                let t = (tag % END) as usize;
                assert_eq!(next[t], seq, "writer {t}: in order, none missing");
                next[t] = seq + 1;
                ended += usize::from(tag >= END);
                acks[t].write_all(&[1]).unwrap();
                acks[t].flush().unwrap();
            })
            .unwrap();
        total += n as u64;
        let slept = began.elapsed();
        assert!(
            n > 0 && slept < Duration::from_secs(9),
            "a commit left the reader asleep for {slept:?} ({total} read)"
        );
    }
    drop(acks);
    let written: Vec<u64> = kids
        .into_iter()
        .map(|mut k| {
            let out = k.0.stdout.take().unwrap();
            let mut text = String::new();
            std::io::BufReader::new(out).read_to_string(&mut text).unwrap();
            let line = text.lines().find(|l| l.starts_with("RESULT")).unwrap_or_else(|| panic!("no result: {text}"));
            line[7..].trim().parse().unwrap()
        })
        .collect();
    assert_eq!(next.to_vec(), written, "every record each writer wrote was read");
    assert!(total > 100, "the writers wrote {total}");
    let stats = channel.stats();
    assert_eq!((stats.written, stats.read, stats.lost), (total, total, 0), "{stats:?}");
    std::fs::remove_file(&path).unwrap();
}

/// Two processes writing as fast as they can, each commit through the bell, and a
/// reader in `poll`: every record arrives whole, in its writer's order, or was refused
/// (counted); nothing else.
#[test]
fn writers_in_two_processes_ringing_the_bell_lose_nothing_uncounted() {
    const N: u64 = 100_000;
    let (path, channel) = create("burst");
    let mut reader = channel.reader().unwrap();
    let p = path.to_str().unwrap();
    let n = N.to_string();
    let mut kids: Vec<Option<std::process::Child>> =
        (1..=2).map(|t| Some(common::spawn_child("burst", &[p, &t.to_string(), &n]))).collect();
    let mut got = [Vec::new(), Vec::new()];
    let mut take = |r: ringtrace::channel::ChannelRecord<'_>| {
        let (tag, seq) = parse(&r);
        got[tag as usize - 1].push(seq);
        Ok::<_, std::convert::Infallible>(())
    };
    let mut refused = [0u64; 2];
    while kids.iter().any(Option::is_some) {
        let _ = reader.poll(Some(Duration::from_millis(200)), &mut take);
        for (i, k) in kids.iter_mut().enumerate() {
            if k.as_mut().is_some_and(|c| c.try_wait().unwrap().is_some()) {
                refused[i] = common::result_of(k.take().unwrap())[0];
            }
        }
    }
    reader.drain(&mut take).unwrap();
    drop(reader);
    for (t, seqs) in got.iter().enumerate() {
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "writer {t}: in order");
        assert_eq!(seqs.len() as u64 + refused[t], N, "writer {t}: every record read or refused");
    }
    let stats = channel.stats();
    assert_eq!(
        (stats.written, stats.read, stats.lost),
        (2 * N - refused[0] - refused[1], stats.written, refused[0] + refused[1])
    );
    std::fs::remove_file(&path).unwrap();
}

/// A version 1 file (no bell line: its writers never ring) is still read: its reader
/// looks every millisecond rather than sleeping on a bell nobody rings.
#[test]
fn a_version_1_channel_file_is_still_read_by_polling() {
    let (path, channel) = create("v1");
    drop(channel);
    poke(&path, 8, CHANNEL_VERSION_1);
    assert_eq!(ChannelFile::open(&path).unwrap().header().version, CHANNEL_VERSION_1);
    let ours = Channel::<Discard, Monotonic>::open(&path).unwrap();
    let mut reader = ours.reader().unwrap();
    let theirs = Channel::<Discard, Monotonic>::open(&path).unwrap();
    let mut producer = theirs.producer().unwrap();
    let before = voluntary_switches();
    let mut got = Vec::new();
    std::thread::scope(|s| {
        let producer = &mut producer;
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            producer.output(b"old", Wakeup::Default).unwrap();
        });
        let n = reader.poll(Some(Duration::from_secs(30)), |r| got.push(r.data.to_vec())).unwrap();
        assert_eq!(n, 1);
    });
    let switches = voluntary_switches() - before;
    assert_eq!(got, [b"old".to_vec()]);
    assert!(switches >= 40, "a version 1 file's reader naps a millisecond at a time: {switches} wakeups in 200 ms");
    // Nothing rang or armed the bell line a version 1 file does not have.
    assert_eq!((peek(&path, BELL_FLAG), peek(&path, BELL_FUTEX)), (0, 0));
    // A version this build does not know is refused, and the message says which.
    poke(&path, 8, 3);
    let e = Channel::<Discard, Monotonic>::open(&path).unwrap_err().to_string();
    assert!(e.contains("channel version") && e.contains('3'), "{e}");
    std::fs::remove_file(&path).unwrap();
}

/// Another process may write anything into the bell line: a poll never lasts past its
/// timeout (plus scheduling), never panics, and records an honest writer commits are
/// still read.
#[test]
fn a_hostile_bell_line_never_holds_a_poll_past_its_timeout() {
    let (path, channel) = create("hostile");
    let mut reader = channel.reader().unwrap();
    // Garbage, and no writer: the poll sleeps until its timeout, and no longer.
    for (flag, futex) in [(0xdead_beef, u32::MAX), (1, 12345), (0, 0), (u32::MAX, 1)] {
        poke(&path, BELL_FLAG, flag);
        poke(&path, BELL_FUTEX, futex);
        let began = Instant::now();
        let n = reader.poll(Some(Duration::from_millis(100)), |_| ()).unwrap();
        let took = began.elapsed();
        assert_eq!(n, 0);
        assert!(took >= Duration::from_millis(100) && took < Duration::from_millis(600), "{took:?}");
    }
    // A process rewriting both words all the time, and an honest writer: every poll
    // ends by its deadline, and every record is read.
    let theirs = Channel::<Discard, Monotonic>::open(&path).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut next = 0u64;
    let mut check = |r: ringtrace::channel::ChannelRecord<'_>| {
        assert_eq!(parse(&r), (7, next), "in order, none missing");
        next += 1;
        Ok::<_, std::convert::Infallible>(())
    };
    let written = std::thread::scope(|s| {
        let stop = &stop;
        s.spawn(|| {
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            let mut x = 0x9e37_79b9u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let flag = if x % 3 == 0 { 1 } else { x };
                f.write_all_at(&flag.to_ne_bytes(), BELL_FLAG as u64).unwrap();
                f.write_all_at(&x.to_ne_bytes(), BELL_FUTEX as u64).unwrap();
                std::thread::sleep(Duration::from_micros(u64::from(x % 300)));
            }
        });
        let writer = s.spawn(|| {
            let mut p = theirs.producer().unwrap();
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                p.output(&record(7, n), Wakeup::Default).unwrap();
                n += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            n
        });
        let start = Instant::now();
        for round in 0u64.. {
            if start.elapsed() >= Duration::from_millis(1000) {
                break;
            }
            let timeout = Duration::from_millis(if round % 2 == 0 { 5 } else { 50 });
            let began = Instant::now();
            reader.poll(Some(timeout), &mut check).unwrap();
            let took = began.elapsed();
            assert!(took < timeout + Duration::from_millis(500), "a poll of {timeout:?} took {took:?}");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap()
    });
    reader.drain(&mut check).unwrap();
    assert_eq!(next, written, "every record read");
    assert!(written > 50, "{written}");
    std::fs::remove_file(&path).unwrap();
}

/// A writer that took the flag and died before its `FUTEX_WAKE` (or a process that
/// keeps clearing the flag) leaves writers seeing no sleeper: none rings. A record
/// committed then is still read within a look of the reader's (it rechecks every
/// 200 ms, as a shared ring's consumer does), not at the end of its 10 s poll.
#[test]
fn a_flag_cleared_behind_the_readers_back_delays_a_record_by_a_recheck_at_most() {
    let (path, channel) = create("cleared");
    let mut reader = channel.reader().unwrap();
    let theirs = Channel::<Discard, Monotonic>::open(&path).unwrap();
    let mut producer = theirs.producer().unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let took = std::thread::scope(|s| {
        let stop = &stop;
        let path = &path;
        s.spawn(move || {
            let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                f.write_all_at(&0u32.to_ne_bytes(), BELL_FLAG as u64).unwrap();
                std::thread::sleep(Duration::from_micros(50));
            }
        });
        let producer = &mut producer;
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            producer.output(b"unrung", Wakeup::Default).unwrap();
        });
        let began = Instant::now();
        let mut got = Vec::new();
        while got.is_empty() && began.elapsed() < Duration::from_secs(10) {
            reader.poll(Some(Duration::from_secs(10)), |r| got.push(r.data.to_vec())).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(got, [b"unrung".to_vec()]);
        began.elapsed()
    });
    assert!(took < Duration::from_secs(2), "the record waited {took:?} for a ring that never came");
    std::fs::remove_file(&path).unwrap();
}
