//! `tracing`: the cost of one `tracing` event with two fields (a `u64` and a short
//! `&str`) inside a span, through `ringtrace-tracing` (flight recorder and stream) and
//! the layers a user would otherwise pick: `tracing-appender`'s non-blocking writer with
//! `fmt` into a file, `tracing-flight-recorder`, `tracing-chrome`, `tracing-perfetto`,
//! and a layer that does nothing (the floor: `tracing`'s own dispatch and the span
//! registry). Every subscriber is `tracing_subscriber::registry()` with the one layer,
//! installed in each writer thread with `dispatcher::with_default`.
//!
//! Each writer thread runs batches: a span made and entered, 100 events in it, the span
//! exited and closed; the span's cost is spread over its events (`tracing-perfetto`
//! writes a span's events when the span closes). Rows at 1, 2 and 4 writer threads.
//!
//! Every figure is per event *recorded*: events emitted less those the layer counted
//! as lost (`ringtrace-tracing`'s stream when its rings are full, `tracing-appender`'s
//! lossy queue when full), which `drops/s` shows. `Mrec/s`: events recorded per second
//! of wall time. `ns/rec` (in the JSON, `ns_per_rec`): the writer threads' CPU time per
//! event recorded (`CLOCK_THREAD_CPUTIME_ID`, summed over writers), what the program
//! pays on its own threads. `wall_ns_per_rec` (what the verdicts compare): wall time per
//! event recorded. `cpu_ns_per_rec`: the whole process's CPU time per event recorded,
//! which adds the layers' background threads (the stream's drain, `tracing-appender`'s
//! worker, `tracing-chrome`'s writer). Work a layer leaves for after the window
//! (flushing a file when its guard drops) is not counted.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::Barrier;
use std::time::Instant;

use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

use crate::harness::{process_cpu, Measured, RunCfg};
use crate::{Progress, Row, Selection};

const THREADS: [usize; 3] = [1, 2, 4];
/// Events per span.
const BATCH: u64 = 100;
const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// The do-nothing layer: the floor.
struct Noop;
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Noop {}

/// A subscriber under test: its dispatcher, its count of events lost so far, and what
/// finishes it after the window (flushing, removing its file).
struct Under {
    dispatch: Dispatch,
    lost: Box<dyn Fn() -> u64>,
    finish: Box<dyn FnOnce()>,
}

fn none() -> Box<dyn Fn() -> u64> {
    Box::new(|| 0)
}

/// A path in the temporary directory, unique to this process, nothing there yet.
pub(crate) fn temp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("ringtrace-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn file(name: &str) -> (std::fs::File, PathBuf) {
    let p = temp(name);
    (std::fs::File::create(&p).expect("bench temp file"), p)
}

/// Makes implementation `imp` (`variant`).
fn make(imp: &str, variant: &str) -> Under {
    let reg = tracing_subscriber::registry;
    match (imp, variant) {
        ("ringtrace-tracing", "flight") => {
            let (layer, recorder) =
                ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(1 << 20).build().expect("recorder");
            Under {
                dispatch: Dispatch::new(reg().with(layer)),
                lost: Box::new(move || recorder.stats().lost),
                finish: Box::new(|| ()),
            }
        }
        ("ringtrace-tracing", _) => {
            let p = temp("stream.rtt");
            let (layer, recorder) =
                ringtrace_tracing::Builder::stream(&p).per_thread_bytes(1 << 20).build().expect("recorder");
            let recorder = std::sync::Arc::new(recorder);
            let r2 = recorder.clone();
            Under {
                dispatch: Dispatch::new(reg().with(layer)),
                lost: Box::new(move || r2.stats().lost),
                finish: Box::new(move || {
                    drop(recorder);
                    let _ = std::fs::remove_file(&p);
                }),
            }
        }
        ("tracing-appender", _) => {
            let (f, p) = file("appender.log");
            let (nb, guard) = tracing_appender::non_blocking(f);
            let errors = nb.error_counter();
            let layer = tracing_subscriber::fmt::layer().with_writer(nb).with_ansi(false);
            Under {
                dispatch: Dispatch::new(reg().with(layer)),
                lost: Box::new(move || errors.dropped_lines() as u64),
                finish: Box::new(move || {
                    drop(guard);
                    let _ = std::fs::remove_file(&p);
                }),
            }
        }
        ("tracing-flight-recorder", _) => {
            let recorder = tracing_flight_recorder::FlightRecorder::new(1000);
            let layer = tracing_flight_recorder::FlightRecorderLayer::new(recorder);
            Under { dispatch: Dispatch::new(reg().with(layer)), lost: none(), finish: Box::new(|| ()) }
        }
        ("tracing-chrome", _) => {
            let p = temp("chrome.json");
            let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new().file(&p).build();
            Under {
                dispatch: Dispatch::new(reg().with(layer)),
                lost: none(),
                finish: Box::new(move || {
                    drop(guard);
                    let _ = std::fs::remove_file(&p);
                }),
            }
        }
        ("tracing-perfetto", _) => {
            let (f, p) = file("perfetto.pftrace");
            let layer = tracing_perfetto::PerfettoLayer::new(std::sync::Mutex::new(f));
            Under {
                dispatch: Dispatch::new(reg().with(layer)),
                lost: none(),
                finish: Box::new(move || {
                    let _ = std::fs::remove_file(&p);
                }),
            }
        }
        _ => Under { dispatch: Dispatch::new(reg().with(Noop)), lost: none(), finish: Box::new(|| ()) },
    }
}

/// Every implementation: `(impl, variant)`.
pub const IMPLS: [(&str, &str); 7] = [
    ("ringtrace-tracing", "flight"),
    ("ringtrace-tracing", "stream"),
    ("tracing-appender", "non_blocking+fmt"),
    ("tracing-flight-recorder", "1000-events"),
    ("tracing-chrome", "file"),
    ("tracing-perfetto", "file"),
    ("noop-layer", "registry"),
];

fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    // A thread's CPU time is never negative.
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// One row: `threads` writers for the window.
fn measure(cfg: &RunCfg, imp: &str, variant: &str, threads: usize) -> Row {
    let under = make(imp, variant);
    let phase = AtomicU8::new(WARMUP);
    let barrier = Barrier::new(threads + 1);
    let (m, writer_cpu) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (phase, barrier, d) = (&phase, &barrier, under.dispatch.clone());
                s.spawn(move || {
                    tracing::dispatcher::with_default(&d, || {
                        barrier.wait();
                        let (mut n, mut start) = (0u64, None);
                        loop {
                            let span = tracing::info_span!("batch");
                            let entered = span.enter();
                            for _ in 0..BATCH {
                                tracing::info!(n, s = "short");
                                n += 1;
                            }
                            drop(entered);
                            drop(span);
                            match phase.load(Relaxed) {
                                WARMUP => {}
                                MEASURE => {
                                    if start.is_none() {
                                        start = Some((thread_cpu_ns(), n));
                                    }
                                }
                                _ => break,
                            }
                        }
                        let cpu = thread_cpu_ns();
                        start.map_or((0, 0), |(c0, n0)| (n - n0, cpu - c0))
                    })
                })
            })
            .collect();
        barrier.wait();
        std::thread::sleep(cfg.warmup);
        let (t0, cpu0, lost0) = (Instant::now(), process_cpu(), (under.lost)());
        phase.store(MEASURE, Relaxed);
        std::thread::sleep(cfg.duration);
        phase.store(STOP, Relaxed);
        let (elapsed, cpu, lost) = (t0.elapsed(), process_cpu() - cpu0, (under.lost)() - lost0);
        let mut m = Measured { elapsed, cpu: Some(cpu), drops: lost, ..Measured::default() };
        let mut writer_cpu = 0;
        for h in handles {
            let (events, c) = h.join().expect("writer thread");
            m.committed += events;
            writer_cpu += c;
        }
        (m, writer_cpu)
    });
    (under.finish)();
    // Events recorded: emitted less those the layer counted lost (in the window; a
    // writer's last batch may straddle its end).
    let mut m = m;
    m.drops = m.drops.min(m.committed);
    m.delivered = m.committed - m.drops;
    let mut r = Row::new("tracing", imp, variant, threads, &m);
    r.ns_per_rec = if m.delivered > 0 { writer_cpu as f64 / m.delivered as f64 } else { f64::INFINITY };
    r
}

/// The `tracing` rows, if selected: every implementation at every thread count, back
/// to back.
pub fn rows(cfg: &RunCfg, sel: &Selection, progress: &mut Progress) -> Vec<Row> {
    if !sel.wants("tracing") {
        return Vec::new();
    }
    // Which implementation goes first rotates from call (round) to call.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let first = CALLS.fetch_add(1, Relaxed);
    let mut out = Vec::new();
    for threads in THREADS {
        for i in 0..IMPLS.len() {
            let (imp, variant) = IMPLS[(first + i) % IMPLS.len()];
            progress.step(&format!("tracing {imp} {variant} p={threads}"));
            out.push(measure(cfg, imp, variant, threads));
        }
    }
    out
}
