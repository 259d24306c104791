//! `waiting`: producers that wait for room instead of losing records. ringtrace's
//! `output_wait` (asleep on the room doorbell until the consumer's publication wakes
//! it) against crossbeam-channel's blocking `send` (parked until a receive makes room),
//! at 1 and 2 producers, 8-byte records, each queue holding 65,536 of them. Both
//! consumers read with the harness's idle policy (spin, then yield), so the rows differ
//! only in how producers wait. Producers are faster than the consumer here, so the
//! queue is full most of the time and the waiting path is what is measured. A row
//! counts records delivered.

use std::time::Duration;

use ringtrace::{MpscRing, Wakeup};

use crate::harness::{run_parallel, Measured, RunCfg};
use crate::peers::CAPACITY;
use crate::{Progress, Row, Selection};

/// Bytes of ringtrace's ring: 65,536 records of 8 bytes with their 8-byte headers.
const RING: u64 = 1 << 20;
/// A waiting producer gives up after this, so that it sees the end of the run (its
/// consumer stops reading then).
const GIVE_UP: Duration = Duration::from_millis(100);

/// The `waiting` rows.
pub fn rows(cfg: &RunCfg, sel: &Selection, progress: &mut Progress) -> Vec<Row> {
    let mut out = Vec::new();
    if !sel.wants("waiting") {
        return out;
    }
    for p in [1, 2] {
        progress.step(&format!("waiting ringtrace producers={p}"));
        out.push(Row::new("waiting", "ringtrace", "output-wait", p, &ringtrace_waiting(cfg, p)));
        progress.step(&format!("waiting crossbeam-channel producers={p}"));
        out.push(Row::new("waiting", "crossbeam-channel", "send-blocking", p, &crossbeam_blocking(cfg, p)));
    }
    out
}

fn ringtrace_waiting(cfg: &RunCfg, producers: usize) -> Measured {
    let ring = MpscRing::new(RING).expect("valid ring");
    let mut c = ring.consumer().expect("consumer");
    run_parallel(
        cfg,
        producers,
        |_| {
            let mut p = ring.producer().expect("producer");
            move || p.output_wait(&std::hint::black_box(42u64).to_le_bytes(), Wakeup::Default, Some(GIVE_UP)).is_ok()
        },
        Some(move || {
            c.consume(|d: &[u8]| {
                std::hint::black_box(d);
            })
            .expect("a ring only this process writes") as u64
        }),
    )
}

fn crossbeam_blocking(cfg: &RunCfg, producers: usize) -> Measured {
    let (tx, rx) = crossbeam_channel::bounded::<u64>(CAPACITY);
    run_parallel(
        cfg,
        producers,
        |_| {
            let tx = tx.clone();
            move || tx.send_timeout(std::hint::black_box(42), GIVE_UP).is_ok()
        },
        Some(move || rx.try_iter().map(std::hint::black_box).count() as u64),
    )
}
