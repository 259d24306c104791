//! Rings shared between processes, with real child processes: producers in two
//! processes and a consumer in a third (both modes, checksummed records, exact
//! accounting, cross-process wakeups); a memfd handed over a Unix socket; a producer
//! killed with SIGKILL in the middle of a record; recovery after every process died;
//! files that are truncated, foreign, corrupt or world-writable; creators racing.
//!
//! Children are this test binary run again with `RINGTRACE_CHILD` set: the `child`
//! test below runs the role it names and exits.
#![cfg(not(loom))]

mod common;

use std::convert::Infallible;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Child;

use common::{result_of, spawn_child};
use std::time::{Duration, Instant};

use ringtrace::config::{ProducerKind, WakeupPolicy};
use ringtrace::{Access, Error, FlightRecorder, MpscRing, Producer, ReserveError, RingBuf, Stats, Wakeup};

const RECORDS: u64 = 200_000;
/// Records of the sampled wakeup test.
const SAMPLED: u64 = 5_000;

/// FNV-1a.
fn checksum(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ b as u32).wrapping_mul(0x0100_0193))
}

/// Record: seq u64 | producer u32 | checksum u32 | payload of 0..48 bytes.
fn record(id: u32, seq: u64, buf: &mut Vec<u8>) {
    buf.clear();
    let len = (seq % 49) as usize;
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend_from_slice(&id.to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.extend((0..len).map(|k| (seq as usize * 31 + k) as u8 ^ id as u8));
    let sum = checksum(&buf[16..]);
    buf[12..16].copy_from_slice(&sum.to_le_bytes());
}

/// Checks a record; returns (producer, seq).
fn check(rec: &[u8]) -> (u32, u64) {
    assert!(rec.len() >= 16, "short record {rec:?}");
    let seq = u64::from_le_bytes(rec[0..8].try_into().unwrap());
    let id = u32::from_le_bytes(rec[8..12].try_into().unwrap());
    let sum = u32::from_le_bytes(rec[12..16].try_into().unwrap());
    assert_eq!(checksum(&rec[16..]), sum, "corrupt record from producer {id} seq {seq}");
    assert_eq!(rec.len() - 16, (seq % 49) as usize);
    (id, seq)
}

fn temp_path(name: &str) -> PathBuf {
    let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let p = dir.join(format!("ringtrace-test-{}-{name}.ring", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// A child process, killed if the test ends (or fails) while it runs.
struct Kid(Option<Child>);

impl std::ops::Deref for Kid {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.0.as_ref().unwrap()
    }
}
impl std::ops::DerefMut for Kid {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }
}
impl Drop for Kid {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs this binary as a child in `role`.
fn spawn(role: &str, args: &[&str]) -> Kid {
    Kid(Some(spawn_child(role, args)))
}

/// Waits for a child and returns its `RESULT ...` line's words.
fn finish(mut kid: Kid) -> Vec<u64> {
    result_of(kid.0.take().unwrap())
}

/// The child side. Does nothing in a normal test run.
#[test]
fn child() {
    let Ok(role) = std::env::var("RINGTRACE_CHILD") else { return };
    let args: Vec<String> = std::env::var("RINGTRACE_CHILD_ARGS").unwrap().split('\u{1f}').map(str::to_owned).collect();
    let result = match role.as_str() {
        "produce-discard" => produce(MpscRing::open(&args[0]).unwrap().producer().unwrap(), &args[1]),
        "produce-overwrite" => produce(FlightRecorder::open(&args[0]).unwrap().producer().unwrap(), &args[1]),
        "consume-discard" => consume_discard(&args[0]),
        "consume-overwrite" => consume_overwrite(&args[0]),
        "produce-memfd" => {
            let fd: i32 = args[0].parse().unwrap();
            // SAFETY: the parent left this descriptor open for us (no CLOEXEC).
            let sock = unsafe { UnixStream::from_raw_fd(fd) };
            produce(MpscRing::receive(&sock, Access::Full).unwrap().producer().unwrap(), &args[1])
        }
        "die-mid-record" => die_mid_record(&args[0], &args[1]),
        "produce-sampled" => {
            let ring = MpscRing::open(&args[0]).unwrap();
            let mut p = ring.producer().unwrap();
            let mut x = 0x2545_f491u64;
            for i in 0..SAMPLED {
                // 0 to 60 us apart: the consumer is caught up and asleep, arming, or
                // busy, at every kind of moment.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let t = Instant::now();
                while t.elapsed() < Duration::from_micros(x % 60) {}
                // Full only if the consumer stopped (asleep for good): keep trying, so
                // that the test reports the consumer.
                while p.output(&i.to_le_bytes(), Wakeup::Default).is_err() {
                    std::thread::yield_now();
                }
            }
            vec![SAMPLED]
        }
        "consume-sampled" => {
            let ring = MpscRing::open_with(&args[0], Access::Consumer).unwrap();
            let mut c = ring.consumer().unwrap();
            println!("ATTACHED");
            std::io::stdout().flush().unwrap();
            let mut next = 0;
            while next < SAMPLED {
                // No timeout: a lost wakeup leaves this process asleep for good.
                c.poll(None, |d| {
                    assert_eq!(d, next.to_le_bytes());
                    next += 1;
                    Ok::<(), Infallible>(())
                })
                .unwrap();
            }
            vec![next]
        }
        "map-and-touch" => map_and_touch(&args[0]),
        "pause-and-wait" => {
            let ring = FlightRecorder::open(&args[0]).unwrap();
            let _paused = ring.pause().unwrap();
            println!("PAUSED");
            std::io::stdout().flush().unwrap();
            std::thread::sleep(Duration::from_secs(60));
            unreachable!("killed while waiting")
        }
        "consume-some" => {
            let ring = MpscRing::open(&args[0]).unwrap();
            let mut c = ring.consumer().unwrap();
            let n = c.consume_n(3, |_| Ok::<(), Infallible>(())).unwrap();
            assert_eq!(n, 3);
            println!("CONSUMED");
            std::io::stdout().flush().unwrap();
            std::thread::sleep(Duration::from_secs(60));
            unreachable!("killed while waiting")
        }
        "hold-consumer" => {
            let ring = MpscRing::open(&args[0]).unwrap();
            let _c = ring.consumer().unwrap();
            println!("ATTACHED");
            std::io::stdout().flush().unwrap();
            std::thread::sleep(Duration::from_secs(60));
            unreachable!("killed while waiting")
        }
        other => panic!("unknown role {other}"),
    };
    println!("RESULT {}", result.iter().map(u64::to_string).collect::<Vec<_>>().join(" "));
    std::io::stdout().flush().unwrap();
    std::process::exit(0);
}

/// Writes `RECORDS` records as producer `id`; a refused reserve is retried (discard)
/// or counted (overwrite). Returns [committed, refused].
fn produce<K: ProducerKind, M: ringtrace::config::Mode>(mut p: Producer<K, M>, id: &str) -> Vec<u64>
where
    Producer<K, M>: Output,
{
    let id: u32 = id.parse().unwrap();
    let mut buf = Vec::new();
    let (mut committed, mut refused) = (0, 0);
    for seq in 0..RECORDS {
        record(id, seq, &mut buf);
        loop {
            match p.put(&buf) {
                Ok(()) => break committed += 1,
                Err(ReserveError::Full { .. }) => {
                    refused += 1;
                    std::thread::yield_now();
                }
                Err(_) => {
                    refused += 1;
                    break;
                }
            }
        }
    }
    vec![committed, refused]
}

/// `output` for both modes.
trait Output {
    fn put(&mut self, data: &[u8]) -> Result<(), ReserveError>;
}
impl<K: ProducerKind> Output for Producer<K, ringtrace::config::Discard> {
    fn put(&mut self, data: &[u8]) -> Result<(), ReserveError> {
        self.output(data, Wakeup::Default)
    }
}
impl<K: ProducerKind> Output for Producer<K, ringtrace::config::Overwrite> {
    fn put(&mut self, data: &[u8]) -> Result<(), ReserveError> {
        self.output(data, Wakeup::Default)
    }
}

/// Consumes until `2 * RECORDS` records arrived, checking each and the order of each
/// producer's. Returns [consumed].
fn consume_discard(path: &str) -> Vec<u64> {
    let ring = MpscRing::open_with(path, Access::Consumer).unwrap();
    assert!(matches!(ring.producer(), Err(Error::ReadOnly { .. })));
    let mut c = ring.consumer().unwrap();
    let mut next = [0u64; 2];
    let mut n = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while n < 2 * RECORDS {
        assert!(Instant::now() < deadline, "consumer timed out at {n}");
        n += c
            .poll(Some(Duration::from_secs(1)), |rec| {
                let (id, seq) = check(rec);
                assert_eq!(seq, next[id as usize], "producer {id} out of order");
                next[id as usize] += 1;
                Ok::<(), Infallible>(())
            })
            .unwrap() as u64;
    }
    vec![n]
}

/// Follows an overwrite ring until both producers are done and it is drained.
/// Returns [consumed, overwritten seen].
fn consume_overwrite(path: &str) -> Vec<u64> {
    let ring = FlightRecorder::open_with(path, Access::Consumer).unwrap();
    let mut c = ring.consumer().unwrap();
    let mut last = [None::<u64>; 2];
    let mut n = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    let done = Path::new(path).with_extension("done");
    loop {
        assert!(Instant::now() < deadline, "consumer timed out at {n}");
        let got = c
            .consume(|rec| {
                let (id, seq) = check(rec);
                let prev = last[id as usize].replace(seq);
                assert!(prev.is_none_or(|p| p < seq), "producer {id} out of order");
                Ok::<(), Infallible>(())
            })
            .unwrap();
        n += got as u64;
        if got == 0 {
            if done.exists() && c.consume(|_| Ok::<(), Infallible>(())).unwrap() == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    vec![n, c.overwritten_unread()]
}

/// Reserves a record, writes half of it, says so, and waits to be killed.
fn die_mid_record(path: &str, mode: &str) -> Vec<u64> {
    let say = || {
        println!("RESERVED");
        std::io::stdout().flush().unwrap();
        std::thread::sleep(Duration::from_secs(60));
    };
    if mode == "spsc" {
        let ring = ringtrace::SpscRing::open(path).unwrap();
        let mut p = ring.producer().unwrap();
        let mut r = p.reserve(64).unwrap();
        r[..32].fill(7);
        say();
        r.commit();
    } else if mode == "overwrite" {
        let ring = FlightRecorder::open(path).unwrap();
        let mut p = ring.producer().unwrap();
        let mut r = p.reserve(64).unwrap();
        r.write(0, &[7; 32]).unwrap();
        say();
        r.commit();
    } else {
        let ring = MpscRing::open(path).unwrap();
        let mut p = ring.producer().unwrap();
        let mut r = p.reserve(64).unwrap();
        r[..32].fill(7);
        say();
        r.commit();
    }
    unreachable!("killed while waiting")
}

/// Maps a ring file and reads its records every millisecond, forever.
fn map_and_touch(path: &str) -> Vec<u64> {
    let ring = FlightRecorder::open(path).unwrap();
    println!("MAPPED");
    std::io::stdout().flush().unwrap();
    loop {
        let _ = ring.snapshot();
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn wait_for_line(child: &mut Kid, want: &str) {
    let out = child.stdout.as_mut().unwrap();
    let mut line = String::new();
    let mut reader = BufReader::new(out);
    loop {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "child ended before {want}");
        if line.trim() == want {
            return;
        }
    }
}

#[test]
fn discard_producers_in_two_processes_consumer_in_a_third() {
    let path = temp_path("discard");
    let ring = MpscRing::builder(64 * 1024).wakeup_policy(WakeupPolicy::CaughtUp).create(&path).unwrap();
    let p = path.to_str().unwrap();
    let consumer = spawn("consume-discard", &[p]);
    let producers = [spawn("produce-discard", &[p, "0"]), spawn("produce-discard", &[p, "1"])];
    let logs: Vec<_> = producers.into_iter().map(finish).collect();
    let consumed = finish(consumer)[0];
    let s: Stats = ring.stats();
    assert_eq!(consumed, 2 * RECORDS);
    assert_eq!(logs.iter().map(|l| l[0]).sum::<u64>(), 2 * RECORDS);
    assert_eq!((s.committed, s.consumed, s.dead), (2 * RECORDS, 2 * RECORDS, 0));
    assert_eq!(s.lost, logs.iter().map(|l| l[1]).sum::<u64>(), "every refusal is counted in the file");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn overwrite_producers_in_two_processes_consumer_in_a_third() {
    let path = temp_path("overwrite");
    let ring = FlightRecorder::builder(64 * 1024).create(&path).unwrap();
    let p = path.to_str().unwrap();
    let consumer = spawn("consume-overwrite", &[p]);
    let producers = [spawn("produce-overwrite", &[p, "0"]), spawn("produce-overwrite", &[p, "1"])];
    let logs: Vec<_> = producers.into_iter().map(finish).collect();
    std::fs::write(path.with_extension("done"), b"").unwrap();
    let r = finish(consumer);
    let s = ring.stats();
    let committed: u64 = logs.iter().map(|l| l[0]).sum();
    assert_eq!(s.committed, committed);
    assert_eq!(s.lost, logs.iter().map(|l| l[1]).sum::<u64>());
    assert_eq!(s.committed, r[0] + s.overwritten_unread, "committed = consumed + overwritten unread: {s:?}");
    assert_eq!(r[1], s.overwritten_unread);
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(path.with_extension("done")).unwrap();
}

/// Waits for `child` at most `limit`; kills it and fails if it is still running.
fn finish_within(mut child: Kid, limit: Duration, what: &str) -> Vec<u64> {
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{what} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    finish(child)
}

#[test]
fn cross_process_wakeups_are_never_lost() {
    let path = temp_path("sampled");
    let _ring = MpscRing::builder(64 * 1024).wakeup_policy(WakeupPolicy::CaughtUp).create(&path).unwrap();
    let p = path.to_str().unwrap();
    let mut consumer = spawn("consume-sampled", &[p]);
    wait_for_line(&mut consumer, "ATTACHED");
    let producer = spawn("produce-sampled", &[p]);
    assert_eq!(
        finish_within(
            producer,
            Duration::from_secs(120),
            "the producer (a full ring: the consumer slept through a wakeup?)"
        )[0],
        SAMPLED
    );
    // The consumer sleeps with no timeout: only a lost wakeup keeps it asleep.
    assert_eq!(finish_within(consumer, Duration::from_secs(60), "the consumer (a lost wakeup)")[0], SAMPLED);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn memfd_handed_over_a_unix_socket() {
    let ring = MpscRing::builder(64 * 1024).build_shared().unwrap();
    assert!(ring.is_shared());
    let (ours, theirs) = UnixStream::pair().unwrap();
    rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty()).unwrap();
    let fd = theirs.as_raw_fd().to_string();
    let mut c = ring.consumer().unwrap();
    let child = spawn("produce-memfd", &[&fd, "0"]);
    drop(theirs);
    ring.send(&ours).unwrap();
    let mut next = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while next < RECORDS {
        assert!(Instant::now() < deadline);
        c.poll(Some(Duration::from_secs(1)), |rec| {
            assert_eq!(check(rec), (0, next));
            next += 1;
            Ok::<(), Infallible>(())
        })
        .unwrap();
    }
    assert_eq!(finish(child)[0], RECORDS);
    // A private ring cannot be sent.
    assert!(MpscRing::new(4096).unwrap().send(&ours).is_err());
}

#[test]
fn unsealed_memfd_is_refused() {
    let fd = rustix::fs::memfd_create("x", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&fd, 1 << 20).unwrap();
    let err = MpscRing::from_fd(fd, Access::Full).unwrap_err();
    assert!(err.to_string().contains("not sealed against shrinking"), "{err}");
}

/// Writes 100 records behind a dead producer's unfinished one; the consumer must step
/// over it (counted once in `dead`) and deliver them all, in order.
fn drain_past_a_dead_record<K: ProducerKind>(ring: &RingBuf<K>, p: &mut Producer<K>) {
    for i in 0..100u64 {
        p.output(&i.to_le_bytes(), Wakeup::Default).unwrap();
    }
    let mut c = ring.consumer().unwrap();
    let mut got = Vec::new();
    let t = Instant::now();
    while got.len() < 100 {
        assert!(t.elapsed() < Duration::from_secs(10), "jammed behind the dead record: {:?}", ring.stats());
        c.poll(Some(Duration::from_secs(1)), |d| {
            got.push(u64::from_le_bytes(d.try_into().unwrap()));
            Ok::<(), Infallible>(())
        })
        .unwrap();
    }
    assert_eq!(got, (0..100).collect::<Vec<_>>());
    assert_eq!(ring.stats().dead, 1);
}

#[test]
fn producer_killed_mid_record_discard() {
    let path = temp_path("kill-discard");
    let ring = MpscRing::create_default(&path);
    let mut child = spawn("die-mid-record", &[path.to_str().unwrap(), "discard"]);
    wait_for_line(&mut child, "RESERVED");
    child.kill().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(9));
    let mut p = ring.producer().unwrap();
    drain_past_a_dead_record(&ring, &mut p);
    std::fs::remove_file(&path).unwrap();
}

/// A consumer that polls with `consume` (never `poll` or `wait`) steps over a dead
/// producer's record after the same time as one that sleeps, however seldom it calls:
/// the check is made by time, not after a count of empty calls.
#[test]
fn a_consumer_polling_slowly_steps_over_a_dead_record_in_time() {
    let path = temp_path("kill-slow-poll");
    let ring = MpscRing::create_default(&path);
    let mut child = spawn("die-mid-record", &[path.to_str().unwrap(), "discard"]);
    wait_for_line(&mut child, "RESERVED");
    child.kill().unwrap();
    child.wait().unwrap();
    let mut p = ring.producer().unwrap();
    p.output(b"after", Wakeup::Default).unwrap();
    let mut c = ring.consumer().unwrap();
    let t = Instant::now();
    let mut calls = 0u32;
    let mut got = Vec::new();
    // 20 ms between calls: a check every 256 empty calls would come after 5 s.
    while got.is_empty() && t.elapsed() < Duration::from_secs(4) {
        calls += 1;
        c.consume(|d| {
            got.push(d.to_vec());
            Ok::<(), Infallible>(())
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(got, [b"after".to_vec()], "still jammed after {:?} and {calls} calls: {:?}", t.elapsed(), ring.stats());
    assert_eq!(ring.stats().dead, 1);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn producer_killed_mid_record_overwrite() {
    let path = temp_path("kill-overwrite");
    let ring = FlightRecorder::builder(16 * 1024).create(&path).unwrap();
    let mut child = spawn("die-mid-record", &[path.to_str().unwrap(), "overwrite"]);
    wait_for_line(&mut child, "RESERVED");
    child.kill().unwrap();
    child.wait().unwrap();
    // Lap the ring many times: the dead record must be stepped over, not block forever.
    let mut p = ring.producer().unwrap();
    let mut ok = 0u64;
    for i in 0..20_000u64 {
        ok += u64::from(p.output(&i.to_le_bytes(), Wakeup::NoWakeup).is_ok());
    }
    let s = ring.stats();
    assert!(ok > 19_000, "reserves kept failing behind the dead record: {ok} ok, {s:?}");
    assert_eq!(s.dead, 1, "{s:?}");
    let snap = ring.snapshot().unwrap();
    assert_eq!(snap.iter().next_back(), Some(&19_999u64.to_le_bytes()[..]));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn records_recovered_after_every_process_died() {
    let path = temp_path("recover");
    let ring = FlightRecorder::builder(16 * 1024).create(&path).unwrap();
    let p = path.to_str().unwrap();
    // One producer process writes and exits; another dies holding a record.
    finish(spawn("produce-overwrite", &[p, "0"]));
    let mut child = spawn("die-mid-record", &[p, "overwrite"]);
    wait_for_line(&mut child, "RESERVED");
    child.kill().unwrap();
    child.wait().unwrap();
    drop(ring); // the last process using the file lets go
    let ring = FlightRecorder::open(&path).unwrap();
    let snap = ring.snapshot().unwrap();
    let seqs: Vec<u64> = snap.iter().map(|r| check(r).1).collect();
    assert!(seqs.len() > 100, "{} records recovered", seqs.len());
    assert_eq!(*seqs.last().unwrap(), RECORDS - 1, "the newest records survive");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "contiguous");
    assert_eq!(snap.unfinished(), 1, "the dead producer's record is reported unfinished");
    // The untrusted reader (what `ringtrace snapshot FILE` uses; it never maps the file)
    // recovers the same records and steps over the dead one.
    let file = ringtrace::inspect::RingFile::open(&path).unwrap();
    let recs = file.records().unwrap();
    let read: Vec<u64> = recs.iter().map(|r| check(r.payload).1).collect();
    assert_eq!(read, seqs);
    assert_eq!(recs.unfinished_count(), 1);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_truncated_ring_file_kills_processes_that_map_it_with_sigbus() {
    let path = temp_path("truncate");
    let ring = FlightRecorder::builder(64 * 1024).create(&path).unwrap();
    ring.producer().unwrap().output(b"x", Wakeup::Default).unwrap();
    let mut child = spawn("map-and-touch", &[path.to_str().unwrap()]);
    wait_for_line(&mut child, "MAPPED");
    // Documented behaviour of named files (which cannot be sealed): whoever maps one
    // that another process truncates dies of SIGBUS at its next access.
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(4096).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc_sigbus()), "{status:?}");
    // Attaching to the truncated file is an error, not a signal.
    let err = FlightRecorder::open(&path).unwrap_err();
    assert!(err.to_string().contains("the header alone needs"), "{err}");
    std::mem::forget(ring); // its mapping now faults; never touch it again
    std::fs::remove_file(&path).unwrap();
}

fn libc_sigbus() -> i32 {
    7 // SIGBUS on x86-64 and aarch64 Linux
}

#[test]
fn bad_ring_files_are_clear_errors() {
    let path = temp_path("bad");
    type Mutation = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Mutation, &str)> = vec![
        ("magic", Box::new(|b: &mut Vec<u8>| b[0] ^= 0xff), "not a ringtrace ring file"),
        ("zero magic", Box::new(|b: &mut Vec<u8>| b[..8].fill(0)), "not initialized yet"),
        ("version", Box::new(|b: &mut Vec<u8>| b[8] = 99), "layout version 99"),
        (
            "capacity",
            Box::new(|b: &mut Vec<u8>| b[24..32].copy_from_slice(&12345u64.to_ne_bytes())),
            "capacity is 12345",
        ),
        ("truncated", Box::new(|b: &mut Vec<u8>| b.truncate(10_000)), "truncated"),
        ("tiny", Box::new(|b: &mut Vec<u8>| b.truncate(100)), "header alone"),
        ("positions", Box::new(|b: &mut Vec<u8>| b[128..136].copy_from_slice(&3u64.to_ne_bytes())), "inconsistent"),
    ];
    // A valid image to mutate.
    let good = {
        let ring = MpscRing::builder(4096).create(&path).unwrap();
        ring.producer().unwrap().output(b"x", Wakeup::Default).unwrap();
        drop(ring);
        std::fs::read(&path).unwrap()
    };
    for (name, mutate, want) in cases {
        let mut bytes = good.clone();
        mutate(&mut bytes);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let err = MpscRing::open(&path).unwrap_err();
        assert!(err.to_string().contains(want), "{name}: {err}");
    }
    // The right file, the wrong type.
    std::fs::write(&path, &good).unwrap();
    let err = FlightRecorder::open(&path).unwrap_err();
    assert!(err.to_string().contains("mpsc discard ring, not the mpsc overwrite"), "{err}");
    // World-writable.
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let err = MpscRing::open(&path).unwrap_err();
    assert!(err.to_string().contains("writable by every user"), "{err}");
    // Random bytes, a directory, a FIFO (must not block), a missing file.
    std::fs::remove_file(&path).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let random: Vec<u8> = (0..20_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&path, random).unwrap();
    assert!(MpscRing::open(&path).unwrap_err().to_string().contains("not a ringtrace ring file"));
    std::fs::remove_file(&path).unwrap();
    assert!(MpscRing::open(std::env::temp_dir()).unwrap_err().to_string().contains("opening ring file"));
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        0,
    )
    .unwrap();
    assert!(MpscRing::open(&path).unwrap_err().to_string().contains("not a regular file"));
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(MpscRing::open(&path), Err(Error::File { .. })));
}

#[test]
fn creators_racing_for_one_path_one_wins() {
    let path = temp_path("race");
    let winners: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8).map(|_| s.spawn(|| MpscRing::builder(4096).create(&path))).collect();
        hs.into_iter()
            .map(|h| match h.join().unwrap() {
                Ok(_) => 1,
                Err(Error::File { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists => 0,
                Err(e) => panic!("unexpected error {e}"),
            })
            .sum()
    });
    assert_eq!(winners, 1);
    assert!(MpscRing::open(&path).is_ok(), "the winner's file is whole");
    std::fs::remove_file(&path).unwrap();
    // Never through a symlink: the target is left alone.
    let target = temp_path("target");
    std::fs::write(&target, b"precious").unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    assert!(MpscRing::builder(4096).create(&path).is_err());
    assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&target).unwrap();
    // Created with mode 0600.
    MpscRing::builder(4096).create(&path).unwrap();
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_dead_consumer_is_taken_over() {
    let path = temp_path("dead-consumer");
    let ring = MpscRing::create_default(&path);
    let mut child = spawn("hold-consumer", &[path.to_str().unwrap()]);
    wait_for_line(&mut child, "ATTACHED");
    match ring.consumer() {
        Err(Error::ConsumerAttached { pid }) => assert_eq!(pid, child.id()),
        other => panic!("expected ConsumerAttached, got {other:?}"),
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(ring.consumer().is_ok(), "the dead process's consumer role is taken over");
    std::fs::remove_file(&path).unwrap();
}

trait CreateDefault: Sized {
    fn create_default(path: &Path) -> Self;
}
impl CreateDefault for MpscRing {
    fn create_default(path: &Path) -> Self {
        MpscRing::builder(64 * 1024).create(path).unwrap()
    }
}

#[test]
fn a_dead_pausers_pause_ends() {
    let path = temp_path("dead-pauser");
    let ring = FlightRecorder::builder(16 * 1024).create(&path).unwrap();
    let mut child = spawn("pause-and-wait", &[path.to_str().unwrap()]);
    wait_for_line(&mut child, "PAUSED");
    let mut p = ring.producer().unwrap();
    assert!(p.output(b"x", Wakeup::NoWakeup).is_err(), "paused");
    child.kill().unwrap();
    child.wait().unwrap();
    // Producers find the pauser dead after a few refusals and end its pause.
    let ok = (0..1000u64).filter(|i| p.output(&i.to_le_bytes(), Wakeup::NoWakeup).is_ok()).count();
    assert!(ok > 900, "still paused: {ok} of 1000 went in");
    assert!(!ring.is_paused());
    drop(ring.pause().expect("the ring can be paused again"));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_consumer_taken_over_mid_line_starts_at_a_record() {
    let path = temp_path("consumer-mid-line");
    let ring = MpscRing::create_default(&path);
    let mut p = ring.producer().unwrap();
    for i in 0..10u64 {
        p.output(&i.to_le_bytes(), Wakeup::NoWakeup).unwrap(); // 16-byte records
    }
    // The dead consumer read 3 records (48 bytes) and handed back whole lines only (0).
    let mut child = spawn("consume-some", &[path.to_str().unwrap()]);
    wait_for_line(&mut child, "CONSUMED");
    child.kill().unwrap();
    child.wait().unwrap();
    let mut c = ring.consumer().unwrap();
    let mut got = Vec::new();
    c.consume(|d| {
        got.push(u64::from_le_bytes(d.try_into().unwrap()));
        Ok::<(), Infallible>(())
    })
    .unwrap();
    assert_eq!(got, (3..10).collect::<Vec<_>>(), "resumes at the dead consumer's record boundary");
    p.output(&10u64.to_le_bytes(), Wakeup::NoWakeup).unwrap();
    assert_eq!(c.iter().next(), Some(&10u64.to_le_bytes()[..]));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_single_producer_taken_over_from_a_dead_one_mid_record() {
    let path = temp_path("spsc-takeover");
    let ring = ringtrace::SpscRing::builder(64 * 1024).create(&path).unwrap();
    let mut child = spawn("die-mid-record", &[path.to_str().unwrap(), "spsc"]);
    wait_for_line(&mut child, "RESERVED");
    child.kill().unwrap();
    child.wait().unwrap();
    let mut p = ring.producer().expect("the dead producer's role is taken over");
    drain_past_a_dead_record(&ring, &mut p);
    std::fs::remove_file(&path).unwrap();
}
