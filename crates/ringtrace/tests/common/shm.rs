//! What the tests of rings shared between processes (`tests/shm*.rs`) share: the
//! checksummed records, the ring files' paths, child processes and the roles they run.

use std::convert::Infallible;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use ringtrace::config::ProducerKind;
use ringtrace::{Access, ConsumeError, Error, FlightRecorder, MpscRing, Producer, ReserveError, Wakeup};

use super::{fnv1a, result_of, spawn_child, temp_file};

pub const RECORDS: u64 = 200_000;
/// Records of the sampled wakeup test.
pub const SAMPLED: u64 = 5_000;

/// Record: seq u64 | producer u32 | checksum u32 | payload of 0..48 bytes.
pub fn record(id: u32, seq: u64, buf: &mut Vec<u8>) {
    buf.clear();
    let len = (seq % 49) as usize;
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend_from_slice(&id.to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.extend((0..len).map(|k| (seq as usize * 31 + k) as u8 ^ id as u8));
    let sum = fnv1a(&buf[16..]);
    buf[12..16].copy_from_slice(&sum.to_le_bytes());
}

/// Checks a record; returns (producer, seq).
pub fn check(rec: &[u8]) -> (u32, u64) {
    assert!(rec.len() >= 16, "short record {rec:?}");
    let seq = u64::from_le_bytes(rec[0..8].try_into().unwrap());
    let id = u32::from_le_bytes(rec[8..12].try_into().unwrap());
    let sum = u32::from_le_bytes(rec[12..16].try_into().unwrap());
    assert_eq!(fnv1a(&rec[16..]), sum, "corrupt record from producer {id} seq {seq}");
    assert_eq!(rec.len() - 16, (seq % 49) as usize);
    (id, seq)
}

/// A path for a ring file of this test process, in `/dev/shm` where there is one.
pub fn temp_path(name: &str) -> PathBuf {
    temp_file(name, "ring")
}

/// A child process, killed if the test ends (or fails) while it runs.
pub struct Kid(Option<Child>);

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
pub fn spawn(role: &str, args: &[&str]) -> Kid {
    Kid(Some(spawn_child(role, args)))
}

/// Waits for a child and returns its `RESULT ...` line's words.
pub fn finish(mut kid: Kid) -> Vec<u64> {
    result_of(kid.0.take().unwrap())
}

/// The child side, which each test binary's ignored `child` test calls: runs the role
/// that `RINGTRACE_CHILD` names and exits ([`child_role`](super::child_role)).
pub fn child() {
    let (role, args) = super::child_role();
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
        "produce-waiting" => {
            // Every record written: a full ring makes the producer wait for room.
            let ring = MpscRing::open(&args[0]).unwrap();
            let mut p = ring.producer().unwrap();
            let id: u32 = args[1].parse().unwrap();
            let mut buf = Vec::new();
            for seq in 0..RECORDS {
                record(id, seq, &mut buf);
                p.output_wait(&buf, Wakeup::Default, Some(Duration::from_secs(60))).unwrap();
            }
            vec![RECORDS]
        }
        "hold-producer" => {
            let ring = MpscRing::open(&args[0]).unwrap();
            let mut p = ring.producer().unwrap();
            p.output(b"before dying", Wakeup::Default).unwrap();
            println!("ATTACHED");
            std::io::stdout().flush().unwrap();
            std::thread::sleep(Duration::from_secs(60));
            unreachable!("killed while waiting")
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
        // Counted as delivered, whatever the call returns after.
        let polled = c.poll(Some(Duration::from_secs(1)), |rec| {
            let (id, seq) = check(rec);
            assert_eq!(seq, next[id as usize], "producer {id} out of order");
            next[id as usize] += 1;
            n += 1;
            Ok::<(), Infallible>(())
        });
        match polled {
            Ok(_) => {}
            // Every producer attached so far left and all it wrote is read: the other
            // process may not have attached yet (a loaded machine starts it late).
            Err(ConsumeError::Disconnected) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("consuming: {e}"),
        }
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

pub fn wait_for_line(child: &mut Kid, want: &str) {
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
