//! An async agent: one tokio task drains a ring file that producer threads write, another
//! a pinned BPF ring buffer map that a kernel program writes, each through
//! `ringtrace::tokio::AsyncReader`; the agent prints each source's rate every second for
//! three seconds, stops the producers, drains what is left, and checks its counts: every
//! record of the ring once and in order per producer, and every record of the map read or
//! counted as dropped by the kernel. Exits nonzero on a mismatch.
//!
//! Run: `cargo run --release -p ringtrace --features tokio --example async_agent`
//!
//! The BPF source needs CAP_BPF (root); without it the agent says so and reads the ring
//! alone.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ringtrace::kernel::bpf::BpfRingBuf;
use ringtrace::tokio::AsyncReader;
use ringtrace::{Access, ConsumeError, Consumer, MpscRing, ReserveError, Wakeup};
use ringtrace_fixtures::{bpf_skip_reason, expected_payload, BpfFs, Counters, ProgSpec, RingMap, SeqProgram};
use tokio::sync::watch;

type Error = Box<dyn std::error::Error + Send + Sync>;

const PRODUCERS: u64 = 2;
const SECONDS: u64 = 3;

/// A ring record: producer, sequence number, and a checksum of both.
fn record(tag: u64, seq: u64) -> [u8; 24] {
    let mut r = [0u8; 24];
    r[..8].copy_from_slice(&tag.to_le_bytes());
    r[8..16].copy_from_slice(&seq.to_le_bytes());
    r[16..].copy_from_slice(&checksum(tag, seq).to_le_bytes());
    r
}

fn checksum(tag: u64, seq: u64) -> u64 {
    (tag ^ seq.rotate_left(17)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The ring's consumer: attached to the ring file by path, as a separate agent process
/// would. Its async reader waits on the ring's socket doorbell (a ring file's consumer
/// names one when it arms; producers in any process ring it).
fn ring_source(cap: u64, path: &PathBuf) -> Result<(MpscRing, Consumer), Error> {
    let ring = MpscRing::builder(cap).create(path)?;
    let consumer = MpscRing::open_with(path, Access::Consumer)?.consumer()?;
    Ok((ring, consumer))
}

/// Producer `tag`: bursts of 1000 records with 1 ms pauses until `stop`; a full ring
/// makes it wait for room (at most 10 s), never lose a record. Returns how many it wrote.
fn produce(ring: MpscRing, tag: u64, stop: Arc<AtomicBool>) -> Result<u64, ReserveError> {
    let mut p = ring.producer().expect("producer");
    let mut seq = 0;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..1000 {
            p.output_wait(&record(tag, seq), Wakeup::Default, Some(Duration::from_secs(10)))?;
            seq += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(seq)
}

/// Drains the ring until told to stop, then once more; each producer's records in order.
async fn drain_ring(
    consumer: Consumer,
    count: Arc<AtomicU64>,
    mut stop: watch::Receiver<bool>,
) -> Result<Vec<u64>, Error> {
    let mut reader = AsyncReader::new(consumer)?;
    let mut next = vec![0u64; PRODUCERS as usize];
    let mut check = |rec: &[u8]| -> Result<(), String> {
        let word = |i: usize| u64::from_le_bytes(rec[i * 8..i * 8 + 8].try_into().unwrap());
        let (tag, seq) = (word(0), word(1));
        if rec.len() != 24 || word(2) != checksum(tag, seq) || next.get(tag as usize) != Some(&seq) {
            return Err(format!("bad record: producer {tag} seq {seq}"));
        }
        next[tag as usize] += 1;
        count.fetch_add(1, Ordering::Relaxed);
        Ok(())
    };
    loop {
        // `consume` is cancel safe: when `stop` wins, no record was taken.
        tokio::select! {
            r = reader.consume(&mut check) => match r {
                Ok(_) => {}
                // Every producer handle is gone and their records are read.
                Err(ConsumeError::Disconnected) => break,
                Err(e) => return Err(e.into()),
            },
            _ = stop.changed() => break,
        }
    }
    // The producers have stopped: what they wrote is all committed.
    reader.get_mut().consume(&mut check)?;
    Ok(next)
}

/// Drains the BPF map until told to stop, then once more; its sequence numbers increase,
/// skipping only what the kernel dropped. Returns (read, skipped).
async fn drain_bpf(
    ring: BpfRingBuf,
    count: Arc<AtomicU64>,
    mut stop: watch::Receiver<bool>,
) -> Result<(u64, u64), Error> {
    let mut reader = AsyncReader::new(ring)?;
    let (mut next, mut skipped) = (0u64, 0u64);
    let mut check = |rec: &[u8]| -> Result<(), String> {
        let seq = u64::from_ne_bytes(rec[..8].try_into().unwrap());
        if seq < next || rec != &expected_payload(seq, 16)[..] {
            return Err(format!("bad BPF record: seq {seq} after {next}"));
        }
        skipped += seq - next;
        next = seq + 1;
        count.fetch_add(1, Ordering::Relaxed);
        Ok(())
    };
    loop {
        tokio::select! {
            r = reader.consume(&mut check) => { r?; }
            _ = stop.changed() => break,
        }
    }
    reader.get_mut().consume(&mut check)?;
    Ok((count.load(Ordering::Relaxed), skipped))
}

/// The BPF source: a map pinned in a bpffs, as a loader (bpftool, libbpf, aya) leaves
/// it, opened by its path; a program writes 500 records into it per millisecond until
/// `stop`. `None`, said why, where BPF is not available.
type BpfSource = (BpfRingBuf, std::thread::JoinHandle<Counters>, BpfFs);
fn bpf_source(stop: Arc<AtomicBool>) -> Result<Option<BpfSource>, Error> {
    if let Some(why) = bpf_skip_reason() {
        println!("BPF source skipped: {why}");
        return Ok(None);
    }
    let fs = match BpfFs::mount() {
        Ok(fs) => fs,
        Err(e) => {
            println!("BPF source skipped: cannot mount a bpffs to pin the map: {e}");
            return Ok(None);
        }
    };
    let map = RingMap::create(8 << 20)?;
    let prog = SeqProgram::load(map.as_fd(), ProgSpec { payload: 16, ..Default::default() })?;
    map.pin(&fs.path("events"))?;
    let ring = BpfRingBuf::open_pinned(fs.path("events"))?;
    let runner = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            prog.run(500).expect("BPF_PROG_TEST_RUN");
            std::thread::sleep(Duration::from_millis(1));
        }
        prog.counters().expect("program counters")
    });
    Ok(Some((ring, runner, fs)))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let dir = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let path = dir.join(format!("ringtrace-async-agent-{}.ring", std::process::id()));
    let (ring, consumer) = ring_source(1 << 22, &path)?;
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|tag| {
            let (ring, stop) = (ring.clone(), stop.clone());
            std::thread::spawn(move || produce(ring, tag, stop))
        })
        .collect();
    let bpf = bpf_source(stop.clone())?;

    let (stop_tx, stop_rx) = watch::channel(false);
    let (ring_count, bpf_count) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let ring_task = tokio::spawn(drain_ring(consumer, ring_count.clone(), stop_rx.clone()));
    let (bpf_task, runner, _bpffs) = match bpf {
        Some((map, runner, fs)) => {
            (Some(tokio::spawn(drain_bpf(map, bpf_count.clone(), stop_rx))), Some(runner), Some(fs))
        }
        None => (None, None, None),
    };

    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let (mut last_ring, mut last_bpf) = (0, 0);
    for second in 1..=SECONDS {
        tick.tick().await;
        let (r, b) = (ring_count.load(Ordering::Relaxed), bpf_count.load(Ordering::Relaxed));
        println!("{second} s: ring {} records/s, bpf {} records/s", r - last_ring, b - last_bpf);
        (last_ring, last_bpf) = (r, b);
    }

    // Stop the writers (joined off the runtime thread: a producer may be waiting for
    // room that only the drain task makes), then the readers.
    stop.store(true, Ordering::Relaxed);
    let written = tokio::task::spawn_blocking(move || {
        producers.into_iter().map(|p| p.join().expect("producer thread")).collect::<Result<Vec<u64>, _>>()
    })
    .await??;
    let counters = match runner {
        Some(r) => Some(tokio::task::spawn_blocking(move || r.join().expect("BPF runner")).await?),
        None => None,
    };
    stop_tx.send(true)?;
    let read = ring_task.await??;
    let mut ok = true;
    println!("ring: written {written:?}, read {read:?}");
    ok &= read == written;
    if let (Some(task), Some(k)) = (bpf_task, counters) {
        let (seen, skipped) = task.await??;
        println!("bpf: written {}, read {seen}, dropped by the kernel {}", k.attempts, k.drops);
        ok &= seen + k.drops == k.attempts && skipped == k.drops;
    }
    drop(ring);
    let _ = std::fs::remove_file(&path);
    if !ok {
        eprintln!("async_agent: counts do not match");
        std::process::exit(1);
    }
    println!("async_agent: every record accounted for");
    Ok(())
}
