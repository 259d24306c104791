//! ringtrace's rows: a 1 MiB ring (65,536 records of 8 bytes plus 8-byte headers).

use std::convert::Infallible;
use std::sync::Mutex;
use std::time::Duration;

use ringtrace::{Consumer, Mode, Mpsc, ProducerKind, RingBuf, Spsc, Wakeup, WakeupPolicy};

use crate::harness::{batched, run_back_to_back, run_parallel, Measured, RunCfg};
use crate::{Progress, Row, Selection};

const RING: u64 = 1 << 20;
const BATCH: usize = 500;

fn count<K: ProducerKind, M: Mode>(c: &mut Consumer<K, M>) -> u64 {
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
                c.poll(Some(Duration::from_millis(100)), |d| {
                    std::hint::black_box(d);
                    Ok::<(), Infallible>(())
                })
                .expect("poll") as u64
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
    out
}
