//! `scale-pause`: how long a writer of a full flight recorder is refused while the ring
//! is paused and copied out, by ring size.
//!
//! A `FlightRecorder` of 16 MiB, 256 MiB or 1 GiB and one writer thread writing 64-byte
//! records (`output`, `Wakeup::NoWakeup`) without pause. Once it has written 1.25 times
//! the ring (so the ring is full and has wrapped), the main thread takes
//! `ring.pause()`, `paused.snapshot()` and drops the guard (resuming the ring); later,
//! with the ring full again, a second cycle pauses and resumes with no snapshot. The
//! writer reads the clock when its first reserve is refused with
//! `ReserveError::Paused` and at its first accepted reserve after: that span is the
//! refused window, as the writer saw it. Rows, each counting one cycle as its "record",
//! so that `ns/rec` is the time:
//!
//! * `window/SIZE`: the writer's refused window of pause, snapshot, resume;
//! * `pause/SIZE`: how long `pause()` took, from the main thread;
//! * `snapshot/SIZE`: how long `snapshot()` of the paused ring took;
//! * `pause-resume/SIZE`: the writer's refused window of a pause and resume alone;
//! * `into-snapshot/SIZE`: the writer's refused window of `pause()?.into_snapshot()`,
//!   which resumes once the bytes are copied and indexes the copy after.
//!
//! The target: a pause refuses writers for the records still being written, not for
//! the ring's length (`pause()` checks the ring before it refuses anyone), so the
//! `pause-resume` window of 1 GiB is within 4x of 16 MiB's in the same round. The
//! windows with a copy grow with the bytes copied, by nature: reported, no target. The rings are made and filled in the first round and kept
//! (1.3 GiB resident) until the last that measures them: filling 1 GiB takes longer
//! than what is measured. A round of the three sizes takes about 6 s (the snapshot of
//! 1 GiB alone 3.5 s), so the rows run in the first 3 rounds only (quick mode: 1).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ringtrace::{FlightRecorder, ReserveError, Wakeup};

use crate::harness::Measured;
use crate::{Progress, Row};

pub(super) const BENCH: &str = "scale-pause";
/// Ring sizes and their rows' names.
const SIZES: [(u64, &str); 3] = [(16 << 20, "16MiB"), (256 << 20, "256MiB"), (1 << 30, "1GiB")];
/// A record's payload.
const PAYLOAD: usize = 64;
/// A record in the ring: its 8-byte header and the payload.
const RECORD_BYTES: u64 = 8 + PAYLOAD as u64;
/// Rounds that measure the rows (the first ones; quick mode: 1).
const ROUNDS: usize = 3;
/// How long the main thread waits for the writer to see a cycle's end.
const PATIENCE: Duration = Duration::from_secs(10);

/// The rings, kept from the first round to the last.
static RINGS: Mutex<Vec<(FlightRecorder, bool)>> = Mutex::new(Vec::new());

/// What the writer publishes.
#[derive(Default)]
struct Board {
    stop: AtomicBool,
    /// Records written.
    written: AtomicU64,
    /// Refused windows seen, and the last one's length in ns.
    windows: AtomicU64,
    last_window_ns: AtomicU64,
}

/// The writer: writes until `stop`, timing each run of refusals.
fn writer(ring: &FlightRecorder, b: &Board) {
    let mut p = ring.producer().expect("producer");
    let rec = [5u8; PAYLOAD];
    let (mut written, mut refused_since) = (0u64, None::<Instant>);
    while !b.stop.load(Relaxed) {
        for _ in 0..256 {
            match p.output(&rec, Wakeup::NoWakeup) {
                Ok(()) => {
                    written += 1;
                    if let Some(t) = refused_since.take() {
                        b.last_window_ns.store(t.elapsed().as_nanos() as u64, Relaxed);
                        b.windows.fetch_add(1, Relaxed);
                    }
                }
                Err(ReserveError::Paused { .. }) => {
                    refused_since.get_or_insert_with(Instant::now);
                }
                // Another producer's record in flight: none here.
                Err(_) => {}
            }
        }
        b.written.store(written, Relaxed);
    }
}

/// Waits for `f` to hold, for at most [`PATIENCE`].
fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < PATIENCE, "{BENCH}: the writer did not {what} in {PATIENCE:?}");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// One row counting a single cycle that took `t`.
fn one(variant: String, t: Duration) -> Row {
    let m = Measured { delivered: 1, committed: 1, drops: 0, elapsed: t, cpu: None };
    let mut row = Row::new(BENCH, "ringtrace", variant, 1, &m);
    row.record_bytes = PAYLOAD;
    row
}

/// Records a cycle's writer writes first into a ring already full.
const MORE: u64 = 1 << 16;

/// Sets the stop flag when dropped: a panic of the main thread stops the writer too,
/// so that the scope it is in can end.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Relaxed);
    }
}

/// Runs `cycle` (which pauses the ring and resumes it) until the writer was refused in
/// it, at most 5 times: a writer descheduled through a short pause never sees it.
/// Returns the writer's refused window and what `cycle` returned.
fn refused<T>(ring: &FlightRecorder, b: &Board, mut cycle: impl FnMut() -> T) -> (Duration, T) {
    for _ in 0..5 {
        let windows = b.windows.load(Relaxed);
        let out = cycle();
        // Once the writer published 512 more writes after the resume, a refused window
        // of this cycle was published before them.
        let after = b.written.load(Relaxed) + 512;
        wait_for("write after the resume", || b.written.load(Relaxed) >= after);
        if b.windows.load(Relaxed) > windows {
            return (Duration::from_nanos(b.last_window_ns.load(Relaxed)), out);
        }
    }
    panic!("{BENCH}: the writer was never refused in 5 pauses ({:?})", ring.stats());
}

/// The cycles of one ring: its four rows. A `fresh` ring is filled first.
fn cycles(ring: &FlightRecorder, name: &str, fresh: bool) -> Vec<Row> {
    let b = Board::default();
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&b.stop);
        s.spawn(|| writer(ring, &b));
        let write = |n: u64| {
            let until = b.written.load(Relaxed) + n;
            wait_for("write", || b.written.load(Relaxed) >= until);
        };
        // A fresh ring is filled and wrapped; one filled in an earlier round is full
        // (pauses and snapshots take nothing out of a flight recorder).
        write(if fresh { ring.capacity() * 5 / 4 / RECORD_BYTES } else { MORE });
        let (window, (pause_t, snap_t)) = refused(ring, &b, || {
            let t = Instant::now();
            let paused = ring.pause().expect("pause");
            let pause_t = t.elapsed();
            let t = Instant::now();
            let snap = paused.snapshot();
            let snap_t = t.elapsed();
            drop(paused);
            std::hint::black_box(&snap);
            drop(snap);
            (pause_t, snap_t)
        });
        write(MORE);
        let (bare, ()) = refused(ring, &b, || drop(ring.pause().expect("pause")));
        write(MORE);
        let (copied, ()) =
            refused(ring, &b, || drop(std::hint::black_box(ring.pause().expect("pause").into_snapshot())));
        vec![
            one(format!("window/{name}"), window),
            one(format!("pause/{name}"), pause_t),
            one(format!("snapshot/{name}"), snap_t),
            one(format!("pause-resume/{name}"), bare),
            one(format!("into-snapshot/{name}"), copied),
        ]
    })
}

/// The rows of every size, in an order alternating from round to round.
pub(super) fn rows(quick: bool, round: usize, rounds: usize, progress: &mut Progress) -> Vec<Row> {
    let measuring = if quick { 1 } else { ROUNDS }.min(rounds);
    if round >= measuring {
        return Vec::new();
    }
    let mut rings = RINGS.lock().unwrap_or_else(|e| e.into_inner());
    if rings.is_empty() {
        for (bytes, _) in SIZES {
            rings.push((FlightRecorder::new(bytes).expect("valid ring"), true));
        }
    }
    let mut out = Vec::new();
    for i in super::alternate(&[0, 1, 2], round) {
        let name = SIZES[i].1;
        progress.step(&format!("{BENCH} ring={name}"));
        let (ring, fresh) = &mut rings[i];
        out.extend(cycles(ring, name, *fresh));
        *fresh = false;
    }
    if round + 1 >= measuring {
        rings.clear();
    }
    out
}
