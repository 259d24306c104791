//! ringtrace's rows: a 1 MiB ring (65,536 records of 8 bytes plus 8-byte headers), but
//! for `snapshot`, which sweeps the ring's size.

use std::convert::Infallible;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ringtrace::config::{Mpsc, ProducerKind, Spsc, WakeupPolicy};
use ringtrace::{ConsumeError, Consumer, FlightRecorder, RingBuf, Snapshot, Wakeup};

use crate::harness::{batched, run_back_to_back, run_parallel, Measured, RunCfg};
use crate::{Progress, Row, Selection};

const RING: u64 = 1 << 20;
const BATCH: usize = 500;

fn count<K: ProducerKind>(c: &mut Consumer<K>) -> u64 {
    c.consume(|d| {
        std::hint::black_box(d);
        Ok::<(), Infallible>(())
    })
    .expect("infallible") as u64
}

fn parallel<K: ProducerKind>(cfg: &RunCfg, producers: usize, policy: Option<WakeupPolicy>) -> Measured {
    let ring = match policy {
        None => RingBuf::<K>::new(RING),
        Some(p) => RingBuf::<K>::builder(RING).wakeup_policy(p).build(),
    }
    .expect("valid ring");
    let mut c = ring.consumer().expect("first consumer");
    let first = Mutex::new(Some(ring.producer().expect("first producer")));
    let make = |_| {
        let mut p = first.lock().unwrap().take().unwrap_or_else(|| ring.producer().expect("mpsc producer"));
        move || p.output(&std::hint::black_box(42u64).to_le_bytes(), Wakeup::Default).is_ok()
    };
    if policy.is_some() {
        // Sampled: the consumer sleeps until woken (or 100 ms pass, at the end).
        run_parallel(
            cfg,
            producers,
            make,
            Some(move || {
                match c.poll(Some(Duration::from_millis(100)), |d| {
                    std::hint::black_box(d);
                    Ok::<(), Infallible>(())
                }) {
                    Ok(n) => n as u64,
                    // The run ended and its producers are gone.
                    Err(ringtrace::ConsumeError::Disconnected) => 0,
                    Err(e) => panic!("poll: {e}"),
                }
            }),
        )
    } else {
        run_parallel(cfg, producers, make, Some(move || count(&mut c)))
    }
}

/// Back to back, treated as the peers are there: a constant value pushed, records
/// counted without their payload being read (rtrb's `commit_all` and the disruptor's
/// `count` do not read them either; the reading step still loads every header).
fn back_to_back<K: ProducerKind>(cfg: &RunCfg, reserve: bool) -> Measured {
    let ring = RingBuf::<K>::new(RING).expect("valid ring");
    let mut c = ring.consumer().expect("consumer");
    let mut p = ring.producer().expect("producer");
    let drain = move || c.consume(|_| Ok::<(), Infallible>(())).expect("infallible") as u64;
    if reserve {
        run_back_to_back(
            cfg,
            BATCH,
            batched(|| match p.reserve(8) {
                Ok(mut r) => {
                    r.copy_from_slice(&42u64.to_le_bytes());
                    r.commit();
                    true
                }
                Err(_) => false,
            }),
            drain,
        )
    } else {
        run_back_to_back(cfg, BATCH, batched(|| p.output(&42u64.to_le_bytes(), Wakeup::Default).is_ok()), drain)
    }
}

/// `overwrite-contention`: `producers` threads write into a flight recorder, with no
/// reader or with a thread taking snapshots back to back. Nothing consumes, so the row
/// counts records committed (the harness reports `committed` when none are delivered).
fn overwrite(cfg: &RunCfg, producers: usize, snapshots: bool) -> Measured {
    let ring = FlightRecorder::new(RING).expect("valid ring");
    let make = |_| {
        let mut p = ring.producer().expect("mpsc producer");
        // Refused only when making room would overwrite a record still being written:
        // a drop, as a full ring is in discard mode.
        move || p.output(&std::hint::black_box(42u64).to_le_bytes(), Wakeup::Default).is_ok()
    };
    if !snapshots {
        return run_parallel(cfg, producers, make, None::<fn() -> u64>);
    }
    let mut snap = Snapshot::new();
    let reader = || {
        match ring.snapshot_into(&mut snap) {
            Ok(()) => {
                std::hint::black_box(snap.len());
            }
            // Producers lapped the copy 16 times: the reader loaded the ring as much as
            // a snapshot that succeeded, which is what this row measures; take the next.
            Err(ConsumeError::Busy) => {}
            Err(e) => panic!("snapshot of a ring only ringtrace writes: {e}"),
        }
        // Records captured are not records delivered: 0 keeps the row producer-side.
        0
    };
    run_parallel(cfg, producers, make, Some(reader))
}

/// Fills a flight recorder of `capacity` bytes with 8-byte records, then times
/// snapshots of it with no producer running: `committed` counts the records the
/// snapshots captured, so the row's ns/rec is a snapshot's time per record captured.
fn snapshot(cfg: &RunCfg, capacity: u64) -> Measured {
    let ring = FlightRecorder::new(capacity).expect("valid ring");
    let mut p = ring.producer().expect("producer");
    // Twice as many 16-byte footprints as the ring holds: it has wrapped, and holds
    // what a flight recorder under load holds.
    for i in 0..capacity / 8 {
        p.output(&i.to_le_bytes(), Wakeup::Default).expect("a lone producer of a running ring is never refused");
    }
    let mut snap = Snapshot::new();
    let mut take = || {
        ring.snapshot_into(&mut snap).expect("no producer runs, so nothing overwrites the copy");
        std::hint::black_box(snap.len()) as u64
    };
    // At least one snapshot before the window, so that those timed reuse its memory.
    let t = Instant::now();
    take();
    while t.elapsed() < cfg.warmup {
        take();
    }
    // At least one in the window too, so that a window shorter than a 16 MiB snapshot
    // still times one.
    let (t0, cpu0) = (Instant::now(), crate::harness::process_cpu());
    let mut captured = take();
    while t0.elapsed() < cfg.duration {
        captured += take();
    }
    let cpu = Some(crate::harness::process_cpu().saturating_sub(cpu0));
    Measured { delivered: 0, committed: captured, drops: 0, elapsed: t0.elapsed(), cpu }
}

/// All ringtrace rows the selection asks for.
pub fn rows(cfg: &RunCfg, sel: &Selection, progress: &mut Progress) -> Vec<Row> {
    let mut out = Vec::new();
    if sel.wants("parallel") {
        progress.step("parallel ringtrace mpsc");
        out.push(Row::new("parallel", "ringtrace", "mpsc", 1, &parallel::<Mpsc>(cfg, 1, None)));
        progress.step("parallel ringtrace spsc");
        out.push(Row::new("parallel", "ringtrace", "spsc", 1, &parallel::<Spsc>(cfg, 1, None)));
    }
    if sel.wants("back-to-back") {
        progress.step("back-to-back ringtrace");
        out.push(Row::new("back-to-back", "ringtrace", "mpsc", 1, &back_to_back::<Mpsc>(cfg, true)));
        out.push(Row::new("back-to-back", "ringtrace", "spsc", 1, &back_to_back::<Spsc>(cfg, true)));
    }
    if sel.wants("reserve-vs-output") {
        progress.step("reserve-vs-output ringtrace");
        for (k, reserve) in [("reserve", true), ("output", false)] {
            out.push(Row::new(
                "reserve-vs-output",
                "ringtrace",
                format!("mpsc/{k}"),
                1,
                &back_to_back::<Mpsc>(cfg, reserve),
            ));
            out.push(Row::new(
                "reserve-vs-output",
                "ringtrace",
                format!("spsc/{k}"),
                1,
                &back_to_back::<Spsc>(cfg, reserve),
            ));
        }
    }
    if sel.wants("sampled") {
        let marks: &[(u64, &str)] = if sel.quick {
            &[(0, "caught-up"), (4 << 10, "wm=4KiB"), (64 << 10, "wm=64KiB")]
        } else {
            &[
                (0, "caught-up"),
                (1 << 10, "wm=1KiB"),
                (4 << 10, "wm=4KiB"),
                (16 << 10, "wm=16KiB"),
                (64 << 10, "wm=64KiB"),
                (256 << 10, "wm=256KiB"),
            ]
        };
        for &(w, name) in marks {
            progress.step(&format!("sampled ringtrace {name}"));
            let policy = if w == 0 { WakeupPolicy::CaughtUp } else { WakeupPolicy::Watermark(w) };
            out.push(Row::new(
                "sampled",
                "ringtrace",
                format!("mpsc/{name}"),
                1,
                &parallel::<Mpsc>(cfg, 1, Some(policy)),
            ));
        }
    }
    if sel.wants("contention") {
        for &p in &sel.producer_counts() {
            progress.step(&format!("contention ringtrace producers={p}"));
            out.push(Row::new("contention", "ringtrace", "mpsc", p, &parallel::<Mpsc>(cfg, p, None)));
        }
    }
    if sel.wants("overwrite-contention") {
        for &p in &sel.producer_counts() {
            progress.step(&format!("overwrite-contention ringtrace producers={p}"));
            let b = "overwrite-contention";
            out.push(Row::new(b, "ringtrace", "overwrite/no-reader", p, &overwrite(cfg, p, false)));
            out.push(Row::new(b, "ringtrace", "overwrite/snapshots", p, &overwrite(cfg, p, true)));
            // The reference: the `contention` row's discard ring and consumer, run here
            // so that it shares the overwrite rows' weather.
            out.push(Row::new(b, "ringtrace", "discard/consumer", p, &parallel::<Mpsc>(cfg, p, None)));
        }
    }
    if sel.wants("snapshot") {
        for (capacity, name) in [(64 << 10, "ring=64KiB"), (1 << 20, "ring=1MiB"), (16 << 20, "ring=16MiB")] {
            progress.step(&format!("snapshot ringtrace {name}"));
            out.push(Row::new("snapshot", "ringtrace", name, 1, &snapshot(cfg, capacity)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_rows_count_the_records_a_full_ring_holds() {
        // Zero windows: one snapshot timed, so `committed` is one snapshot's records.
        let cfg = RunCfg { warmup: Duration::ZERO, duration: Duration::ZERO };
        let cap = 64 << 10;
        let m = snapshot(&cfg, cap);
        // 16-byte footprints; the default retire-ahead (1 KiB here) plus the record
        // that overwrote may be given up, and the next header word is kept zeroed.
        assert!(((cap - 1024 - 16) / 16..=(cap - 8) / 16).contains(&m.committed), "{m:?}");
        assert_eq!(m.delivered, 0);
    }
}
