//! The async readers (`ringtrace::tokio`) under load: producer threads write millions
//! of checksummed records in bursts with random pauses while an async reader drains the
//! ring, on a current-thread and on a multi-thread runtime; every record must arrive
//! once, in order per producer, and no wakeup may be lost (a wait that times out while a
//! record is ready fails the test). Then BPF ring buffer maps, a ring set and perf rings
//! read asynchronously (each skips with a one-line reason where the kernel does not let
//! this process use them, or fails where `RINGTRACE_REQUIRE` lists the feature).
#![cfg(feature = "tokio")]

#[macro_use]
mod common;

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::channel::{checksum, record};
use ringtrace::kernel::bpf::{BpfRingBuf, RingSet};
use ringtrace::kernel::perf::{
    BackwardRing, EventBuilder, ForwardRing, KernelError, PerfEvent, PerfRecord, Sample, Software, RECORD_SAMPLE,
    SAMPLE_TID, SAMPLE_TIME,
};
use ringtrace::tokio::AsyncReader;
use ringtrace::{Consumer, MpscRing, ReserveError, Wakeup};
use ringtrace_fixtures::{expected_payload, skip, Feature, ProgSpec, RingMap, SeqProgram};
use tokio::time::timeout;
use tokio_stream::StreamExt;

/// How long a wait may take before the test looks whether a wakeup was lost.
const PATIENCE: Duration = Duration::from_secs(10);
/// The bound on the whole of one stress run (producers' retries included).
const RUN_LIMIT: Duration = Duration::from_secs(120);

const PRODUCERS: u64 = 3;

fn per_producer() -> u64 {
    if cfg!(debug_assertions) {
        60_000
    } else {
        700_000
    }
}

/// xorshift64*: the producers' burst lengths and pauses.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Producer `tag` writes `n` records in bursts of 1 to 20,000, pausing 0 to 2 ms between
/// bursts; a full ring is retried, backing off, until `deadline`.
fn produce(ring: &MpscRing, tag: u64, n: u64, deadline: Instant, finished: Arc<AtomicUsize>) {
    let mut p = ring.producer().unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (tag + 1));
    let mut seq = 0;
    while seq < n {
        let burst = (1 + rng.next() % 20_000).min(n - seq);
        for _ in 0..burst {
            let rec = record(tag, seq);
            let mut nap = Duration::from_micros(1);
            loop {
                match p.output(&rec, Wakeup::Default) {
                    Ok(()) => break,
                    Err(ReserveError::Full { .. }) => {
                        assert!(Instant::now() < deadline, "producer {tag}: ring full until the deadline");
                        std::thread::sleep(nap);
                        nap = (nap * 2).min(Duration::from_millis(1));
                    }
                    Err(e) => panic!("producer {tag}: {e}"),
                }
            }
            seq += 1;
        }
        std::thread::sleep(Duration::from_micros(rng.next() % 2_000));
    }
    finished.fetch_add(1, Ordering::Release);
}

/// Each producer's next sequence number: records checked, in order, once.
struct Tracker {
    next: Vec<u64>,
    seen: u64,
}

impl Tracker {
    fn new() -> Tracker {
        Tracker { next: vec![0; PRODUCERS as usize], seen: 0 }
    }
    fn check(&mut self, rec: &[u8]) {
        assert_eq!(rec.len(), 24, "record of {} bytes", rec.len());
        let word = |i: usize| u64::from_le_bytes(rec[i * 8..i * 8 + 8].try_into().unwrap());
        let (tag, seq) = (word(0), word(1));
        assert_eq!(word(2), checksum(tag, seq), "torn record: producer {tag} seq {seq}");
        let next = &mut self.next[tag as usize];
        assert_eq!(seq, *next, "producer {tag}: seq {seq} where {next} was due");
        *next += 1;
        self.seen += 1;
    }
    fn done(&self) -> bool {
        self.seen == PRODUCERS * per_producer()
    }
}

/// Starts the producers on a 4 MiB ring.
fn start() -> (MpscRing, Vec<std::thread::JoinHandle<()>>, Arc<AtomicUsize>) {
    let ring = MpscRing::new(4 << 20).unwrap();
    let finished = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + RUN_LIMIT;
    let threads = (0..PRODUCERS)
        .map(|tag| {
            let (ring, finished) = (ring.clone(), finished.clone());
            std::thread::spawn(move || produce(&ring, tag, per_producer(), deadline, finished))
        })
        .collect();
    (ring, threads, finished)
}

/// After a wait of [`PATIENCE`] timed out: a record ready means its wakeup was lost; with
/// nothing ready, every producer done means records were lost.
fn timed_out(c: &Consumer, finished: &AtomicUsize, t: &Tracker) {
    assert!(!c.ready(), "lost wakeup: a record was ready and the reader slept {PATIENCE:?}");
    assert!(
        finished.load(Ordering::Acquire) < PRODUCERS as usize || c.available() > 0,
        "producers done, ring empty, {} of {} records seen",
        t.seen,
        PRODUCERS * per_producer()
    );
}

#[test]
fn current_thread_runtime_reads_every_record_once_in_order() {
    let (ring, threads, finished) = start();
    let consumer = ring.consumer().unwrap();
    drop(ring);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let t = rt.block_on(async {
        let mut reader = AsyncReader::new(consumer).unwrap();
        let mut t = Tracker::new();
        let mut waits = 0u64;
        while !t.done() {
            reader.get_mut().consume(|rec| t.check(rec)).unwrap();
            if t.done() {
                break;
            }
            waits += 1;
            match timeout(PATIENCE, reader.readable()).await {
                Ok(r) => r.unwrap(),
                Err(_) => timed_out(reader.get_ref(), &finished, &t),
            }
        }
        println!("current-thread: {} records, {waits} waits", t.seen);
        t
    });
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(t.next, vec![per_producer(); PRODUCERS as usize]);
}

#[test]
fn multi_thread_runtime_streams_every_record_once_in_order() {
    let (ring, threads, finished) = start();
    let consumer = ring.consumer().unwrap();
    drop(ring);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let t = rt.block_on(async move {
        let task = tokio::spawn(async move {
            let mut records = AsyncReader::new(consumer).unwrap().into_stream();
            let mut t = Tracker::new();
            while !t.done() {
                match timeout(PATIENCE, records.next()).await {
                    Ok(Some(rec)) => t.check(&rec.unwrap()),
                    Ok(None) => panic!("stream ended"),
                    Err(_) => timed_out(records.get_ref().get_ref(), &finished, &t),
                }
            }
            // Nothing left behind, nothing taken twice.
            assert_eq!(records.get_ref().get_ref().available(), 0);
            t
        });
        task.await.unwrap()
    });
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(t.next, vec![per_producer(); PRODUCERS as usize]);
    println!("multi-thread: {} records", t.seen);
}

/// Sequence number of a BPF fixture record.
fn seq(rec: &[u8]) -> u64 {
    u64::from_ne_bytes(rec[..8].try_into().unwrap())
}

/// Runs `prog` `total` times in bursts with pauses of 0 to 2 ms, on its own thread.
fn run_bursts(prog: SeqProgram, total: u32, seed: u64) -> std::thread::JoinHandle<SeqProgram> {
    std::thread::spawn(move || {
        let mut rng = Rng(seed);
        let mut done = 0;
        while done < total {
            let burst = (1 + rng.next() % 5_000).min(u64::from(total - done)) as u32;
            prog.run(burst).unwrap();
            done += burst;
            std::thread::sleep(Duration::from_micros(rng.next() % 2_000));
        }
        prog
    })
}

/// Checks one map's records: in order, each once, skipping only seqs the kernel dropped
/// (counted in `gaps`, compared with the program's count of drops).
#[derive(Default)]
struct SeqCheck {
    next: u64,
    seen: u64,
    gaps: u64,
}

impl SeqCheck {
    fn check(&mut self, rec: &[u8], payload: u32) {
        let s = seq(rec);
        assert!(s >= self.next, "seq {s} after {}", self.next);
        self.gaps += s - self.next;
        assert_eq!(rec, &expected_payload(s, payload)[..]);
        self.next = s + 1;
        self.seen += 1;
    }
}

#[test]
fn a_bpf_ring_buffer_read_asynchronously_delivers_every_record() {
    need_bpf!();
    let total = 200_000;
    // Large enough for every record (24 bytes each with its header): none is dropped.
    let map = RingMap::create(8 << 20).unwrap();
    let prog = SeqProgram::load(map.as_fd(), ProgSpec { payload: 16, ..Default::default() }).unwrap();
    let ring = BpfRingBuf::from_fd(map.into()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let writer = run_bursts(prog, total, 7);
    let (c, mut reader) = rt.block_on(async {
        let mut reader = AsyncReader::new(ring).unwrap();
        let mut c = SeqCheck::default();
        let deadline = Instant::now() + RUN_LIMIT;
        while c.next < u64::from(total) {
            assert!(Instant::now() < deadline, "records still missing at the deadline");
            match timeout(PATIENCE, reader.consume(|rec: &[u8]| c.check(rec, 16))).await {
                Ok(r) => {
                    r.unwrap();
                }
                Err(_) => assert!(!reader.get_ref().ready(), "lost wakeup: a record was ready for {PATIENCE:?}"),
            }
        }
        (c, reader)
    });
    let prog = writer.join().unwrap();
    let k = prog.counters().unwrap();
    assert_eq!(k.attempts, u64::from(total));
    assert_eq!((k.drops, c.gaps, c.seen), (0, 0, k.attempts), "every record written was read");
    assert_eq!(reader.get_mut().stats().consumed, c.seen);
}

#[test]
fn a_ring_set_streamed_asynchronously_delivers_every_map_in_order() {
    need_bpf!();
    let total = 100_000;
    let mut set = RingSet::new().unwrap();
    let mut writers = Vec::new();
    for i in 0..2u64 {
        // Large enough for every record (16 bytes each with its header): none is dropped.
        let map = RingMap::create(4 << 20).unwrap();
        let prog = SeqProgram::load(map.as_fd(), ProgSpec { payload: 8, ..Default::default() }).unwrap();
        set.add(BpfRingBuf::from_fd(map.into()).unwrap()).unwrap();
        writers.push((prog, i));
    }
    let writers: Vec<_> = writers.into_iter().map(|(prog, i)| run_bursts(prog, total, 11 + i)).collect();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let checks = rt.block_on(async {
        tokio::spawn(async move {
            let mut records = AsyncReader::new(set).unwrap().into_stream();
            let mut checks = [SeqCheck::default(), SeqCheck::default()];
            let deadline = Instant::now() + RUN_LIMIT;
            while checks.iter().any(|c| c.next < u64::from(total)) {
                assert!(Instant::now() < deadline, "records still missing at the deadline");
                match timeout(PATIENCE, records.next()).await {
                    Ok(Some(item)) => {
                        let (i, rec) = item.unwrap();
                        checks[i].check(&rec, 8);
                    }
                    Ok(None) => panic!("stream ended"),
                    Err(_) => {
                        let mut set = records.into_inner().into_inner();
                        let left = set.consume(|_, _| ()).unwrap();
                        assert_eq!(left, 0, "lost wakeup: {left} records were ready for {PATIENCE:?}");
                        records = AsyncReader::new(set).unwrap().into_stream();
                    }
                }
            }
            checks
        })
        .await
        .unwrap()
    });
    for (w, c) in writers.into_iter().zip(&checks) {
        let k = w.join().unwrap().counters().unwrap();
        assert_eq!((k.drops, c.gaps, c.seen), (0, 0, k.attempts), "every record written was read");
    }
}

/// Opens the event, or prints why the test is skipped and returns `None` (fails the
/// test instead where `RINGTRACE_REQUIRE` lists `perf`).
fn open_or_skip(test: &str, b: EventBuilder) -> Option<PerfEvent> {
    match b.open() {
        Ok(e) => Some(e),
        Err(e @ KernelError::Open { .. }) => {
            skip(Feature::Perf, format!("{test}: {e}"));
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// A thread that, each time it is told to, makes at least `pages` page faults and says
/// so; and its thread id, for an event that measures it.
fn faulting_thread(pages: usize) -> (i32, std::sync::mpsc::Sender<()>, std::sync::mpsc::Receiver<()>) {
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        tid_tx.send(rustix::thread::gettid().as_raw_nonzero().get()).unwrap();
        for () in go_rx {
            // 64 MiB, above glibc's largest mmap threshold: freshly mapped every time,
            // so each page written faults.
            let mut v = vec![0u8; 64 << 20];
            for i in (0..pages * 4096).step_by(4096) {
                v[i] = 1;
            }
            std::hint::black_box(&v);
            drop(v);
            done_tx.send(()).unwrap();
        }
    });
    (tid_rx.recv().unwrap(), go_tx, done_rx)
}

/// The samples of a thread's page faults: its own, in time order; counted.
struct Samples {
    tid: u32,
    n: u64,
    last_time: u64,
}

impl Samples {
    fn check(&mut self, rec: &PerfRecord<'_>) {
        if let Some(s) = Sample::parse(rec, SAMPLE_TID | SAMPLE_TIME) {
            assert_eq!(s.tid, Some(self.tid));
            let time = s.time.unwrap();
            assert!(time >= self.last_time, "samples out of time order");
            self.last_time = time;
            self.n += 1;
        }
    }
}

#[test]
fn a_forward_perf_ring_wakes_its_async_reader() {
    let (tid, go, done) = faulting_thread(512);
    let st = SAMPLE_TID | SAMPLE_TIME;
    let b = PerfEvent::software(Software::PageFaults).pid(tid).sample_period(1).sample_type(st).wakeup_events(1);
    let Some(ev) = open_or_skip("forward async", b) else { return };
    let ring = ForwardRing::new(&ev, 64).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut reader = AsyncReader::new(ring).unwrap();
        let mut seen = Samples { tid: tid as u32, n: 0, last_time: 0 };
        for _round in 0..2 {
            // The faults come while the reader waits: only the event's wakeup ends it.
            go.send(()).unwrap();
            let want = seen.n + 512;
            while seen.n < want {
                let n = timeout(PATIENCE, reader.consume(|rec: PerfRecord<'_>| seen.check(&rec)))
                    .await
                    .expect("no wakeup while the thread faulted")
                    .unwrap();
                assert!(n > 0);
            }
            done.recv().unwrap();
        }
        // Then one record at a time, as a stream.
        go.send(()).unwrap();
        let want = seen.n + 512;
        let mut records = reader.stream();
        while seen.n < want {
            let item = timeout(PATIENCE, records.next()).await.expect("no wakeup").unwrap().unwrap();
            seen.check(&item.record());
        }
        done.recv().unwrap();
        assert_eq!(reader.get_ref().lost(), 0);
        let samples = seen.n;
        println!("forward async: {samples} samples");
    });
}

#[test]
fn a_backward_perf_ring_streams_batches_newest_first() {
    let (tid, go, done) = faulting_thread(256);
    let st = SAMPLE_TIME;
    let b = PerfEvent::software(Software::PageFaults)
        .pid(tid)
        .sample_period(1)
        .sample_type(st)
        .wakeup_events(1)
        .backward(true);
    let Some(ev) = open_or_skip("backward async", b) else { return };
    let ring = BackwardRing::new(&ev, 32).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut records = AsyncReader::new(ring).unwrap().into_stream();
        let mut newest_before = 0;
        // The sample times of a batch, checked newest first and newer than every batch
        // before.
        let mut check = |batch: Vec<ringtrace::tokio::PerfItem>| {
            assert!(!batch.is_empty());
            let times: Vec<u64> = batch
                .iter()
                .filter(|r| r.kind == RECORD_SAMPLE)
                .filter_map(|r| Sample::parse(&r.record(), st).and_then(|s| s.time))
                .collect();
            assert!(times.windows(2).all(|w| w[0] >= w[1]), "a batch is newest first");
            assert!(times.iter().all(|&t| t > newest_before), "a batch repeated older records");
            newest_before = newest_before.max(times.first().copied().unwrap_or(0));
            times.len()
        };
        for _round in 0..3 {
            // The faults come while the reader waits: only the event's wakeup ends it.
            // (Records the kernel writes while a read has the ring paused are dropped, and
            // counted in a LOST record: a backward ring's batches need not add up to the
            // faults.)
            go.send(()).unwrap();
            let batch = timeout(PATIENCE, records.next()).await.expect("no wakeup").unwrap().unwrap();
            let mut samples = check(batch);
            done.recv().unwrap();
            if !records.get_mut().get_mut().arm().unwrap() {
                let rest = timeout(PATIENCE, records.next()).await.expect("records were ready").unwrap().unwrap();
                samples += check(rest);
            }
            assert!(samples > 0);
            assert!(records.get_mut().get_mut().arm().unwrap(), "everything written was read");
        }
    });
}
