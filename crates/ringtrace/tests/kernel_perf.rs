//! perf event rings read from the kernel: forward (the kernel respects the tail, drops
//! and reports what does not fit) and backward (a flight recorder the kernel
//! overwrites). Each test skips, with one line saying why, where `perf_event_open` is not
//! permitted or the event is not supported (fails where `RINGTRACE_REQUIRE` lists
//! `perf`); any other failure fails it.

use std::convert::Infallible;
use std::hint::black_box;
use std::time::{Duration, Instant};

use ringtrace::kernel::perf::{
    BackwardRing, EventBuilder, ForwardRing, KernelError, PerfEvent, Sample, Software, RECORD_LOST, RECORD_SAMPLE,
    SAMPLE_ADDR, SAMPLE_TID, SAMPLE_TIME,
};
use ringtrace::ConsumeError;
use ringtrace_fixtures::{skip, Feature};

/// Opens the event, or prints why the test is skipped and returns `None` (fails the
/// test instead where `RINGTRACE_REQUIRE` lists `perf`).
fn open_or_skip(test: &str, b: EventBuilder) -> Option<PerfEvent> {
    match b.open() {
        Ok(e) => Some(e),
        Err(e @ KernelError::Open { .. }) => {
            let KernelError::Open { source, .. } = &e else { unreachable!() };
            if matches!(source.raw_os_error(), Some(libc::EACCES | libc::EPERM | libc::ENOENT)) {
                skip(Feature::Perf, format!("{test}: {e}"));
                return None;
            }
            panic!("{e}")
        }
        Err(e) => panic!("{e}"),
    }
}

/// Burns this thread's CPU for `d`.
fn spin(d: Duration) {
    let t = Instant::now();
    let mut x = 0u64;
    while t.elapsed() < d {
        for _ in 0..1000 {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

/// Page faults in this thread: a fresh 64 MiB allocation (above glibc's largest mmap
/// threshold, so always newly mapped), one write per 4 KiB page.
fn fault_pages() {
    let mut v = vec![0u8; 64 << 20];
    for i in (0..v.len()).step_by(4096) {
        v[i] = 1;
    }
    black_box(&v);
}

/// The samples' `(pid, tid, time)` of one read, and every record's type.
fn read_forward(ring: &mut ForwardRing, sample_type: u64) -> (Vec<(u32, u32, u64)>, Vec<u32>) {
    let (mut samples, mut kinds) = (Vec::new(), Vec::new());
    ring.read(|rec| {
        kinds.push(rec.kind);
        if let Some(s) = Sample::parse(&rec, sample_type) {
            samples.push((s.pid.unwrap(), s.tid.unwrap(), s.time.unwrap()));
        }
        Ok::<(), Infallible>(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    (samples, kinds)
}

#[test]
fn forward_ring_delivers_this_threads_samples_in_time_order_once() {
    let st = SAMPLE_TIME | SAMPLE_TID;
    let b =
        PerfEvent::software(Software::TaskClock).sample_period(10_000).sample_type(st).clockid(libc::CLOCK_MONOTONIC);
    let Some(ev) = open_or_skip("forward", b) else { return };
    let mut ring = ForwardRing::new(&ev, 64).unwrap();
    assert_eq!(ring.capacity(), 64 * 4096);
    spin(Duration::from_millis(50));
    // Disabled, so that it stops sampling the reader itself: then the read empties it.
    ev.disable().unwrap();
    let (first, _) = read_forward(&mut ring, st);
    assert!(!first.is_empty(), "no samples after 50 ms of CPU");
    let (pid, tid) = (std::process::id(), rustix::thread::gettid().as_raw_nonzero().get() as u32);
    for &(p, t, _) in &first {
        assert_eq!((p, t), (pid, tid));
    }
    assert!(first.windows(2).all(|w| w[0].2 <= w[1].2), "timestamps go back");
    assert_eq!(ring.pending_bytes(), 0);

    ev.enable().unwrap();
    spin(Duration::from_millis(20));
    let (second, _) = read_forward(&mut ring, st);
    assert!(!second.is_empty());
    let last_first = first.last().unwrap().2;
    assert!(second.iter().all(|s| s.2 > last_first), "the second read delivered old records");
    assert!(second.windows(2).all(|w| w[0].2 <= w[1].2));
    println!("forward: {} then {} samples, lost {}", first.len(), second.len(), ring.lost());
}

#[test]
fn forward_ring_reports_what_the_kernel_dropped() {
    let st = SAMPLE_TIME | SAMPLE_TID;
    let b = PerfEvent::software(Software::TaskClock).sample_period(10_000).sample_type(st);
    let Some(ev) = open_or_skip("forward lost", b) else { return };
    let mut ring = ForwardRing::new(&ev, 1).unwrap();
    // 1 data page holds ~170 samples of 24 bytes: 30 ms of CPU at one per 10 µs overflows it.
    spin(Duration::from_millis(30));
    // The kernel writes PERF_RECORD_LOST before the first record that fits after the
    // reader made room: read, let it sample again, read.
    // Until a deadline, not a count of rounds: a loaded machine gives this thread less
    // CPU per round, so fewer samples.
    let mut lost_records = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let (_, kinds) = read_forward(&mut ring, st);
        lost_records += kinds.iter().filter(|k| **k == RECORD_LOST).count();
        if lost_records > 0 {
            break;
        }
        spin(Duration::from_millis(2));
    }
    assert!(lost_records > 0, "no PERF_RECORD_LOST after overflowing one page");
    assert!(ring.lost() > 0);
    println!("forward lost: {} LOST records, {} samples lost", lost_records, ring.lost());
}

/// One read of a backward ring: `(type, time)` of every record (time for samples only)
/// and the bytes walked.
fn read_backward(ring: &mut BackwardRing, sample_type: u64, new_only: bool) -> (Vec<(u32, Option<u64>)>, u64) {
    let mut recs = Vec::with_capacity(1 << 16);
    let mut bytes = 0u64;
    let f = |rec: ringtrace::kernel::perf::PerfRecord<'_>| {
        bytes += rec.bytes.len() as u64;
        recs.push((rec.kind, Sample::parse(&rec, sample_type).and_then(|s| s.time)));
        Ok::<(), Infallible>(())
    };
    let r = if new_only { ring.read_new(f) } else { ring.read(f) };
    let n = r.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(n, recs.len());
    (recs, bytes)
}

fn times(recs: &[(u32, Option<u64>)]) -> Vec<u64> {
    recs.iter().filter(|r| r.0 == RECORD_SAMPLE).filter_map(|r| r.1).collect()
}

#[test]
fn backward_ring_holds_the_newest_records_newest_first() {
    let st = SAMPLE_TIME;
    let b = PerfEvent::software(Software::CpuClock)
        .sample_period(10_000)
        .sample_type(st)
        .clockid(libc::CLOCK_MONOTONIC)
        .backward(true);
    let Some(ev) = open_or_skip("backward", b) else { return };
    let mut ring = BackwardRing::new(&ev, 4).unwrap();
    let cap = ring.capacity() as u64;
    let t = Instant::now();
    while ring.written() <= 10 * cap {
        assert!(t.elapsed() < Duration::from_secs(20), "the kernel wrote only {} bytes in 20 s", ring.written());
        spin(Duration::from_millis(5));
    }
    let mut p = ring.pause().unwrap();
    let head = p.head().unwrap();
    let mut first_pos = None;
    p.read(|rec| {
        first_pos.get_or_insert(rec.pos);
        Ok::<(), Infallible>(())
    })
    .unwrap();
    assert_eq!(first_pos, Some(head), "the first record delivered is at data_head");
    p.resume().unwrap();

    for round in 0..2 {
        let (recs, bytes) = read_backward(&mut ring, st, false);
        let ts = times(&recs);
        assert!(ts.windows(2).all(|w| w[0] >= w[1]), "round {round}: not newest first");
        // The newest sample comes first (a PERF_RECORD_LOST may come before it: samples
        // the kernel dropped while the previous read paused the output).
        assert!(recs.iter().take(2).any(|r| r.0 == RECORD_SAMPLE));
        assert_eq!(Some(ts[0]), ts.iter().copied().max());
        // The walk stops only at a record that does not fit in what is left of the
        // ring: at most one record's size (samples 16 bytes, throttle records 32) short.
        assert!(bytes <= cap && bytes > cap - 64, "round {round}: walked {bytes} of {cap} bytes");
        println!("backward round {round}: {} records, {} samples, {bytes} bytes", recs.len(), ts.len());
    }

    // Only what was written since the last read.
    let (before, _) = read_backward(&mut ring, st, false);
    let newest = times(&before)[0];
    spin(Duration::from_millis(3));
    let (new, bytes) = read_backward(&mut ring, st, true);
    assert!(bytes < cap);
    assert!(times(&new).iter().all(|t| *t > newest), "read_new delivered old records");
    assert!(times(&new).windows(2).all(|w| w[0] >= w[1]));
}

#[test]
fn backward_ring_of_1_mib_delivers_every_whole_record() {
    let st = SAMPLE_TIME | SAMPLE_ADDR | SAMPLE_TID; // 32-byte records
    let b = PerfEvent::software(Software::PageFaults)
        .sample_period(1)
        .sample_type(st)
        .clockid(libc::CLOCK_MONOTONIC)
        .backward(true);
    let Some(ev) = open_or_skip("backward 1 MiB", b) else { return };
    let mut ring = match BackwardRing::new(&ev, 256) {
        Ok(r) => r,
        // Past perf_event_mlock_kb and RLIMIT_MEMLOCK without CAP_IPC_LOCK.
        Err(e)
            if matches!(&e, KernelError::Map { source, .. }
                if matches!(source.raw_os_error(), Some(libc::EPERM | libc::ENOMEM))) =>
        {
            return skip(Feature::Perf, format!("backward 1 MiB: {e}"));
        }
        Err(e) => panic!("{e}"),
    };
    let cap = ring.capacity() as u64;
    assert_eq!(cap, 1 << 20);
    let t = Instant::now();
    while ring.written() <= 3 * cap {
        assert!(t.elapsed() < Duration::from_secs(30), "the kernel wrote only {} bytes in 30 s", ring.written());
        fault_pages();
    }
    assert_eq!(ring.written() % 32, 0);
    let (recs, bytes) = read_backward(&mut ring, st, false);
    // All records are 32-byte samples and the ring's size is a multiple of 32: they tile
    // it, and the oldest one ends exactly where the newest begins.
    assert_eq!(bytes, cap);
    assert_eq!(recs.len() as u64, cap / 32);
    assert!(recs.iter().all(|r| r.0 == RECORD_SAMPLE));
    let ts = times(&recs);
    assert!(ts.windows(2).all(|w| w[0] >= w[1]), "not newest first");

    // Again, after more faults (the first read's pause may add a LOST record).
    fault_pages();
    let (recs2, bytes2) = read_backward(&mut ring, st, false);
    assert!(bytes2 <= cap && bytes2 > cap - 32);
    let ts2 = times(&recs2);
    assert!(ts2.windows(2).all(|w| w[0] >= w[1]));
    assert!(ts2[0] > ts[0]);
}

#[test]
fn rings_refuse_events_written_the_other_way() {
    let fwd = PerfEvent::software(Software::PageFaults).sample_period(1).sample_type(SAMPLE_TIME);
    let Some(ev) = open_or_skip("direction", fwd) else { return };
    assert!(!ev.is_backward());
    let mut ring = BackwardRing::new(&ev, 1).unwrap();
    fault_pages();
    let e = ring.read(|_| Ok::<(), Infallible>(())).unwrap_err();
    assert!(matches!(e, ConsumeError::Kernel(KernelError::Direction { .. })), "{e}");
    assert!(e.to_string().contains("backward(true)"), "{e}");

    let bwd = PerfEvent::software(Software::PageFaults).sample_period(1).sample_type(SAMPLE_TIME).backward(true);
    let Some(ev) = open_or_skip("direction", bwd) else { return };
    let mut ring = ForwardRing::new(&ev, 1).unwrap();
    fault_pages();
    let e = ring.read(|_| Ok::<(), Infallible>(())).unwrap_err();
    assert!(matches!(e, ConsumeError::Kernel(KernelError::Direction { .. })), "{e}");
}

#[test]
fn invalid_page_counts_and_waiting() {
    let b = PerfEvent::software(Software::PageFaults).sample_period(1).wakeup_events(1);
    let Some(ev) = open_or_skip("pages", b) else { return };
    for pages in [0, 3, 6] {
        let e = ForwardRing::new(&ev, pages).unwrap_err();
        assert!(matches!(e, KernelError::InvalidPages { .. }), "{e}");
        assert!(e.to_string().contains("power of two"), "{e}");
    }
    let mut ring = ForwardRing::new(&ev, 2).unwrap();
    // Mapped once: a second ring of another size is refused by the kernel.
    assert!(matches!(ForwardRing::new(&ev, 4), Err(KernelError::Map { .. })));
    ring.read(|_| Ok::<(), Infallible>(())).unwrap();
    ev.disable().unwrap();
    let _ = ring.wait(Some(Duration::ZERO)).unwrap(); // takes a wakeup still pending
                                                      // The page faults that wake it below, made while it is disabled, write and signal nothing.
    let pending = ring.pending_bytes();
    fault_pages();
    assert!(!ring.wait(Some(Duration::ZERO)).unwrap(), "woken with the event disabled");
    assert_eq!(ring.pending_bytes(), pending, "written with the event disabled");
    ev.enable().unwrap();
    fault_pages();
    assert!(ring.wait(Some(Duration::from_secs(5))).unwrap(), "no wakeup after page faults");
}
