//! The queues users would otherwise pick, measured with the same harness and 8-byte
//! (`u64`) records. Capacity is equal in records: 65,536 (ringtrace uses a 1 MiB ring,
//! which holds 65,536 records of 8 bytes plus their 8-byte headers).
//!
//! In `overwrite-contention` the peer is crossbeam's `ArrayQueue::force_push`, the only
//! concurrent queue among Rust crates that overwrites its oldest element when full.
//!
//! Not here: bbqueue. Its framed mode is single-producer and single-consumer with one
//! grant per side, and its 0.7 API has no bounded, non-blocking framed grant that fits a
//! drop-counting loop without reimplementing its frame header, so a row would measure
//! the adapter rather than the crate.

use std::sync::{Arc, Mutex};

use crossbeam_queue::ArrayQueue;
use disruptor::{build_multi_producer, build_single_producer, BusySpin, Producer};

use crate::harness::{batched, run_back_to_back, run_parallel, RunCfg};
use crate::{Progress, Row, Selection};

/// Records of capacity for every peer.
pub const CAPACITY: usize = 1 << 16;

#[derive(Clone, Copy, Default)]
struct Event {
    v: u64,
}

/// All peer rows the selection asks for.
pub fn rows(cfg: &RunCfg, sel: &Selection, progress: &mut Progress) -> Vec<Row> {
    let mut out = Vec::new();
    let contention = sel.producer_counts();
    if sel.wants("parallel") {
        progress.step("parallel crossbeam-arrayqueue");
        out.push(Row::new("parallel", "crossbeam-arrayqueue", "mpmc", 1, &arrayqueue(cfg, 1)));
        progress.step("parallel crossbeam-channel");
        out.push(Row::new("parallel", "crossbeam-channel", "try", 1, &channel(cfg, 1)));
        progress.step("parallel rtrb");
        out.push(Row::new("parallel", "rtrb", "spsc", 1, &rtrb_parallel(cfg)));
        progress.step("parallel disruptor sp");
        out.push(Row::new("parallel", "disruptor", "sp", 1, &disruptor_sp(cfg)));
        progress.step("parallel disruptor mp");
        out.push(Row::new("parallel", "disruptor", "mp", 1, &disruptor_mp(cfg, 1)));
    }
    if sel.wants("sampled") {
        progress.step("sampled crossbeam-channel");
        out.push(Row::new("sampled", "crossbeam-channel", "recv-blocking", 1, &channel_blocking(cfg)));
    }
    if sel.wants("back-to-back") {
        progress.step("back-to-back peers");
        out.extend(back_to_back(cfg));
    }
    if sel.wants("contention") {
        for &p in &contention {
            progress.step(&format!("contention peers producers={p}"));
            out.push(Row::new("contention", "crossbeam-arrayqueue", "mpmc", p, &arrayqueue(cfg, p)));
            out.push(Row::new("contention", "crossbeam-channel", "try", p, &channel(cfg, p)));
            out.push(Row::new("contention", "disruptor", "mp", p, &disruptor_mp(cfg, p)));
        }
    }
    if sel.wants("overwrite-contention") {
        for &p in &contention {
            progress.step(&format!("overwrite-contention crossbeam-arrayqueue producers={p}"));
            let (b, q) = ("overwrite-contention", "crossbeam-arrayqueue");
            out.push(Row::new(b, q, "force_push/no-reader", p, &arrayqueue_force_push(cfg, p, false)));
            out.push(Row::new(b, q, "force_push/popping", p, &arrayqueue_force_push(cfg, p, true)));
        }
    }
    out
}

fn arrayqueue(cfg: &RunCfg, producers: usize) -> crate::harness::Measured {
    let q = Arc::new(ArrayQueue::<u64>::new(CAPACITY));
    let qc = q.clone();
    run_parallel(
        cfg,
        producers,
        |_| {
            let q = q.clone();
            move || q.push(std::hint::black_box(42)).is_ok()
        },
        Some(move || {
            let mut n = 0;
            while let Some(v) = qc.pop() {
                std::hint::black_box(v);
                n += 1;
            }
            n
        }),
    )
}

/// The `overwrite-contention` peer: producers `force_push` (which never fails: a full
/// queue gives up its oldest element), with no reader or with a thread popping, the
/// nearest this queue has to ringtrace's snapshot reader. Like ringtrace's overwrite
/// rows, the row counts records pushed: the popping thread reports none delivered.
fn arrayqueue_force_push(cfg: &RunCfg, producers: usize, popping: bool) -> crate::harness::Measured {
    let q = ArrayQueue::<u64>::new(CAPACITY);
    let make = |_| {
        let q = &q;
        move || {
            q.force_push(std::hint::black_box(42));
            true
        }
    };
    if !popping {
        return run_parallel(cfg, producers, make, None::<fn() -> u64>);
    }
    let pop = || {
        while let Some(v) = q.pop() {
            std::hint::black_box(v);
        }
        0
    };
    run_parallel(cfg, producers, make, Some(pop))
}

fn channel(cfg: &RunCfg, producers: usize) -> crate::harness::Measured {
    let (tx, rx) = crossbeam_channel::bounded::<u64>(CAPACITY);
    run_parallel(
        cfg,
        producers,
        |_| {
            let tx = tx.clone();
            move || tx.try_send(std::hint::black_box(42)).is_ok()
        },
        Some(move || rx.try_iter().map(std::hint::black_box).count() as u64),
    )
}

/// The `sampled` peer: a consumer that blocks in `recv_timeout` until a producer's send
/// wakes it, then drains what is there without blocking (the same shape as ringtrace's
/// `poll`).
fn channel_blocking(cfg: &RunCfg) -> crate::harness::Measured {
    let (tx, rx) = crossbeam_channel::bounded::<u64>(CAPACITY);
    run_parallel(
        cfg,
        1,
        |_| {
            let tx = tx.clone();
            move || tx.try_send(std::hint::black_box(42)).is_ok()
        },
        Some(move || match rx.recv_timeout(std::time::Duration::from_millis(100)) {
            Ok(v) => {
                std::hint::black_box(v);
                1 + rx.try_iter().map(std::hint::black_box).count() as u64
            }
            Err(_) => 0,
        }),
    )
}

fn rtrb_parallel(cfg: &RunCfg) -> crate::harness::Measured {
    let (p, mut c) = rtrb::RingBuffer::<u64>::new(CAPACITY);
    let p = Mutex::new(Some(p));
    run_parallel(
        cfg,
        1,
        |_| {
            let mut p = p.lock().unwrap().take().expect("one producer");
            move || p.push(std::hint::black_box(42)).is_ok()
        },
        Some(move || {
            let n = c.slots();
            if n == 0 {
                return 0;
            }
            let chunk = c.read_chunk(n).expect("n slots are readable");
            for v in chunk.into_iter() {
                std::hint::black_box(v);
            }
            n as u64
        }),
    )
}

/// A disruptor consumer's step: every event published now, each value through
/// `black_box`; the count. (A macro: the poller's type names the sequencer.)
macro_rules! drain_poller {
    ($poller:ident) => {
        match $poller.poll() {
            Ok(mut guard) => (&mut guard).fold(0, |n, e| {
                std::hint::black_box(e.v);
                n + 1
            }),
            Err(_) => 0,
        }
    };
}

fn disruptor_sp(cfg: &RunCfg) -> crate::harness::Measured {
    let (mut poller, builder) = build_single_producer(CAPACITY, Event::default, BusySpin).new_event_poller();
    let p = Mutex::new(Some(builder.build()));
    run_parallel(
        cfg,
        1,
        |_| {
            let mut p = p.lock().unwrap().take().expect("one producer");
            move || p.try_publish(|e| e.v = std::hint::black_box(42)).is_ok()
        },
        Some(move || drain_poller!(poller)),
    )
}

fn disruptor_mp(cfg: &RunCfg, producers: usize) -> crate::harness::Measured {
    let (mut poller, builder) = build_multi_producer(CAPACITY, Event::default, BusySpin).new_event_poller();
    let master = Mutex::new(builder.build());
    run_parallel(
        cfg,
        producers,
        |_| {
            let mut p = master.lock().unwrap().clone();
            move || p.try_publish(|e| e.v = std::hint::black_box(42)).is_ok()
        },
        Some(move || drain_poller!(poller)),
    )
}

fn back_to_back(cfg: &RunCfg) -> Vec<Row> {
    const BATCH: usize = 500;
    let mut out = Vec::new();
    let q = ArrayQueue::<u64>::new(CAPACITY);
    let m =
        run_back_to_back(cfg, BATCH, batched(|| q.push(42).is_ok()), || std::iter::from_fn(|| q.pop()).count() as u64);
    out.push(Row::new("back-to-back", "crossbeam-arrayqueue", "mpmc", 1, &m));
    let (tx, rx) = crossbeam_channel::bounded::<u64>(CAPACITY);
    let m = run_back_to_back(cfg, BATCH, batched(|| tx.try_send(42).is_ok()), || rx.try_iter().count() as u64);
    out.push(Row::new("back-to-back", "crossbeam-channel", "try", 1, &m));
    let (mut p, mut c) = rtrb::RingBuffer::<u64>::new(CAPACITY);
    let m = run_back_to_back(cfg, BATCH, batched(|| p.push(42).is_ok()), || {
        let n = c.slots();
        if n > 0 {
            c.read_chunk(n).expect("readable").commit_all();
        }
        n as u64
    });
    out.push(Row::new("back-to-back", "rtrb", "spsc", 1, &m));
    let (mut poller, builder) = build_single_producer(CAPACITY, Event::default, BusySpin).new_event_poller();
    let mut p = builder.build();
    let m = run_back_to_back(cfg, BATCH, batched(|| p.try_publish(|e| e.v = 42).is_ok()), || match poller.poll() {
        Ok(mut guard) => (&mut guard).count() as u64,
        Err(_) => 0,
    });
    out.push(Row::new("back-to-back", "disruptor", "sp", 1, &m));
    out
}
