//! `perf-backward`: full reads of a kernel flight recorder, a perf event's ring mapped
//! read-only with `write_backward` (`ringtrace::kernel::perf::BackwardRing`).
//!
//! A `page-faults` software event (one sample per fault, `SAMPLE_IP | SAMPLE_TID |
//! SAMPLE_TIME | SAMPLE_ADDR | SAMPLE_PERIOD`: 48-byte records, a typical perf sample)
//! writes into a 1 MiB ring (256 data pages) until the kernel has written several times
//! its size, so it holds the newest ~21,800 records and its oldest is partly
//! overwritten. Page faults are the fastest software event to generate (a fresh 64 MiB
//! allocation touched page by page) and, with a period of 1, the kernel never throttles
//! them (the timer events stop at `perf_event_max_sample_rate`, 100,000 a second).
//!
//! Then, for the window, full reads back to back: pause the output
//! (`PERF_EVENT_IOC_PAUSE_OUTPUT`), walk from the newest record to the oldest whole one
//! over the whole ring, resume. The callback adds up each record's size and time field,
//! so the walk is not optimized away. Rows:
//!
//! * `buf=1MiB`: a record is a perf record walked; `ns_per_rec` is the time per record
//!   (the two ioctls of each read included, spread over its records);
//! * `buf=1MiB/per-read`: a record is one whole read; `ns_per_rec` is the time of one
//!   full read of the ring (the target: under 1 ms), `record_bytes` the bytes it walks.
//!
//! Where `perf_event_open` is not permitted (or the ring cannot be mapped), one line on
//! stderr says why and there are no rows.

use std::convert::Infallible;
use std::hint::black_box;
use std::time::{Duration, Instant};

use ringtrace::kernel::perf::{
    BackwardRing, KernelError, PerfEvent, Software, SAMPLE_ADDR, SAMPLE_IP, SAMPLE_PERIOD, SAMPLE_TID, SAMPLE_TIME,
};
use ringtrace::ConsumeError;

use crate::{Measured, Progress, Row, RunCfg, Selection};

const BENCH: &str = "perf-backward";
/// 1 MiB of 4 KiB pages.
const DATA_PAGES: usize = 256;
/// Fill until the kernel has written this many times the ring's size.
const FILL_ROUNDS: u64 = 4;
/// Give up filling after this long (a kernel that writes slower than expected).
const FILL_LIMIT: Duration = Duration::from_secs(5);
const SAMPLE_TYPE: u64 = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_ADDR | SAMPLE_PERIOD;
/// Header, ip, pid/tid, time, addr, period.
const RECORD_BYTES: usize = 48;
/// Offset of the time field in such a record.
const TIME_AT: usize = 24;

/// Page faults in this thread: a fresh 64 MiB allocation (above glibc's largest mmap
/// threshold, so always newly mapped), one write per 4 KiB page.
fn fault_pages() {
    let mut v = vec![0u8; 64 << 20];
    for i in (0..v.len()).step_by(4096) {
        v[i] = 1;
    }
    black_box(&v);
}

/// What a run measured: reads, records walked, and the window.
struct Reads {
    reads: u64,
    records: u64,
    bytes: u64,
    elapsed: Duration,
}

/// Opens and fills the ring, then times full reads.
fn measure(cfg: &RunCfg) -> Result<Reads, String> {
    let event = PerfEvent::software(Software::PageFaults)
        .sample_period(1)
        .sample_type(SAMPLE_TYPE)
        .backward(true)
        .open()
        .map_err(|e| e.to_string())?;
    let mut ring = BackwardRing::new(&event, DATA_PAGES).map_err(|e| e.to_string())?;
    let cap = ring.capacity() as u64;
    let t = Instant::now();
    while ring.written() < FILL_ROUNDS * cap {
        if t.elapsed() > FILL_LIMIT {
            return Err(format!(
                "the kernel wrote {} bytes of page-fault samples in {FILL_LIMIT:?}, not {} (fewer faults than \
                 expected: transparent huge pages?)",
                ring.written(),
                FILL_ROUNDS * cap
            ));
        }
        fault_pages();
    }
    let mut sum = 0u64;
    let first = full_read(&mut ring, &mut sum).map_err(|e| e.to_string())?;
    if (first.0 + 2) * RECORD_BYTES as u64 <= cap {
        return Err(format!("a full read of the {cap}-byte ring found only {} records", first.0));
    }
    let warm = Instant::now();
    while warm.elapsed() < cfg.warmup.min(Duration::from_millis(50)) {
        full_read(&mut ring, &mut sum).map_err(|e| e.to_string())?;
    }
    let t0 = Instant::now();
    let (mut reads, mut records, mut bytes) = (0u64, 0u64, 0u64);
    // At least one read in the window.
    loop {
        let (n, b) = full_read(&mut ring, &mut sum).map_err(|e| e.to_string())?;
        (reads, records, bytes) = (reads + 1, records + n, bytes + b);
        if t0.elapsed() >= cfg.duration {
            break;
        }
    }
    let elapsed = t0.elapsed();
    black_box(sum);
    Ok(Reads { reads, records, bytes, elapsed })
}

/// One full read (pause, walk newest to oldest, resume): `(records, bytes)` walked. The
/// callback folds each record's size and time field into `sum`.
fn full_read(ring: &mut BackwardRing, sum: &mut u64) -> Result<(u64, u64), KernelError> {
    let mut bytes = 0u64;
    let n = ring
        .read(|rec| {
            bytes += rec.bytes.len() as u64;
            let time =
                rec.bytes.get(TIME_AT..).and_then(|b| b.first_chunk::<8>()).map_or(0, |b| u64::from_ne_bytes(*b));
            *sum = sum.wrapping_add(time ^ rec.bytes.len() as u64);
            Ok::<(), Infallible>(())
        })
        .map_err(|e| match e {
            ConsumeError::Kernel(e) => e,
            ConsumeError::Callback(never) => match never {},
            _ => unreachable!("a read fails with a perf error or the callback's"),
        })?;
    Ok((n as u64, bytes))
}

/// The `perf-backward` rows, if selected.
pub fn rows(cfg: &RunCfg, sel: &Selection, progress: &mut Progress) -> Vec<Row> {
    if !sel.wants(BENCH) {
        return Vec::new();
    }
    progress.step(&format!("{BENCH} ringtrace buf=1MiB"));
    let r = match measure(cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{BENCH}: rows left out: {e}");
            return Vec::new();
        }
    };
    // CPU time: not measured, the records are the kernel's.
    let per_rec = Measured { delivered: r.records, committed: r.records, drops: 0, elapsed: r.elapsed, cpu: None };
    let per_read = Measured { delivered: r.reads, committed: r.reads, drops: 0, elapsed: r.elapsed, cpu: None };
    let mut rec_row = Row::new(BENCH, "ringtrace", "buf=1MiB", 1, &per_rec);
    rec_row.record_bytes = RECORD_BYTES;
    let mut read_row = Row::new(BENCH, "ringtrace", "buf=1MiB/per-read", 1, &per_read);
    read_row.record_bytes = (r.bytes / r.reads.max(1)) as usize;
    vec![rec_row, read_row]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_backward_rows_in_a_quick_run() {
        let cfg = RunCfg { warmup: Duration::from_millis(80), duration: Duration::from_millis(200) };
        let sel = Selection { filter: Some(BENCH.into()), exact: true, quick: true };
        let mut progress = Progress { n: 0, tty: false, round: String::new() };
        let t = Instant::now();
        let rows = rows(&cfg, &sel, &mut progress);
        let took = t.elapsed();
        for r in &rows {
            println!(
                "{} {} {}: {:.2} Mrec/s, {:.1} ns/rec, {} bytes/rec",
                r.bench, r.imp, r.variant, r.mrec_per_s, r.ns_per_rec, r.record_bytes
            );
        }
        println!("took {took:?}");
        if rows.is_empty() {
            return; // perf_event_open not permitted: said on stderr
        }
        assert_eq!(rows.len(), 2);
        assert!(took < Duration::from_secs(3), "quick run took {took:?}");
        let per_read = &rows[1];
        assert!(per_read.record_bytes > (1 << 20) - 2 * RECORD_BYTES && per_read.record_bytes <= 1 << 20);
    }
}
