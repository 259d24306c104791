//! One recorder, two exports: the trace export of its dump on its host, and the fleet
//! export of the objects its agent ships of the same records (`entry_json`), give the
//! same events, slices and values on each thread, in Perfetto, Chrome and CTF, and the
//! same spans, span events and log records in OTLP; times differ by one offset, the
//! host's clock against the fleet's.

mod common;

use common::shown::{chrome_threads, ctf_streams, otlp_shown, perfetto_threads, same, same_otlp};
use common::TempDir;
use proptest::prelude::*;
use ringtrace_ship::fleet::export::{chrome, ctf, otlp, perfetto};
use ringtrace_ship::fleet::{Fleet, Timeline};
use ringtrace_ship::frame::{BatchWriter, Content, TimeSource};
use ringtrace_tracing::decode::text::entry_json;
use ringtrace_tracing::decode::Trace;
use tracing_subscriber::layer::SubscriberExt;

/// The fleet's time of a record: its host time plus this.
const OFFSET: u64 = 1_000_000_000_000;

/// One step of a thread.
#[derive(Clone, Debug)]
enum Op {
    /// Enter a new span (`which` of three callsites) with a field.
    Span(u8, i64),
    /// Exit the innermost span entered (and close it).
    Exit,
    /// Record a field of the innermost span.
    Record(u64),
    /// An event: its level (0 TRACE to 4 ERROR), its callsite, its values.
    Event(u8, u8, Values),
}

#[derive(Clone, Debug)]
struct Values {
    u: u64,
    i: i64,
    f: f64,
    b: bool,
    s: String,
    w: u128,
}

fn values() -> impl Strategy<Value = Values> {
    let int = prop_oneof![any::<i64>(), -3i64..3, Just((1 << 53) + 1), Just(-(1 << 53) - 1)];
    let double = prop_oneof![any::<f64>(), Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(2.0)];
    let text = proptest::collection::vec(prop_oneof![Just('a'), Just('"'), Just('\\'), any::<char>()], 0..8);
    (any::<u64>(), int, double, any::<bool>(), text, any::<u128>()).prop_map(|(u, i, f, b, s, w)| Values {
        u,
        i,
        f,
        b,
        s: String::from_iter(s),
        w,
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..3, any::<i64>()).prop_map(|(w, v)| Op::Span(w, v)),
        Just(Op::Exit),
        any::<u64>().prop_map(Op::Record),
        (0u8..5, 0u8..3, values()).prop_map(|(l, c, v)| Op::Event(l, c, v)),
    ]
}

/// A `tracing` event at level `$level` (0 TRACE to 4 ERROR): a callsite per level.
macro_rules! at {
    ($level:expr, $($args:tt)+) => {
        match $level {
            0 => tracing::trace!($($args)+),
            1 => tracing::debug!($($args)+),
            2 => tracing::info!($($args)+),
            3 => tracing::warn!($($args)+),
            _ => tracing::error!($($args)+),
        }
    };
}

/// Runs `ops` on a thread named `name`; spans still entered at its end are left open
/// (never exited) where `leave_open`.
fn run(ops: &[Op], leave_open: bool) {
    let mut entered: Vec<tracing::span::EnteredSpan> = Vec::new();
    for op in ops {
        match op {
            Op::Span(0, v) => {
                entered.push(tracing::info_span!("load", v = *v, later = tracing::field::Empty).entered())
            }
            Op::Span(1, v) => entered
                .push(tracing::debug_span!(target: "net", "send", v = *v, later = tracing::field::Empty).entered()),
            Op::Span(_, v) => {
                entered.push(tracing::trace_span!("idle", n = *v as u64, later = tracing::field::Empty).entered())
            }
            Op::Exit => drop(entered.pop()),
            Op::Record(x) => {
                if let Some(s) = entered.last() {
                    s.record("later", *x);
                }
            }
            Op::Event(l, 0, v) => {
                let Values { u, i, f, b, s, w } = v;
                at!(*l, u = *u, i = *i, f = *f, b = *b, s = s.as_str(), w = *w, "said {}", s);
            }
            Op::Event(l, 1, v) => at!(*l, target: "net", d = ?v.s, i = v.i, "sent"),
            Op::Event(l, _, v) => at!(*l, f = v.f, u = v.u),
        }
    }
    if leave_open {
        entered.into_iter().for_each(std::mem::forget);
    }
}

/// The recorder's dump of `threads` run one after the other, each a thread of its own.
fn record(threads: &[(Vec<Op>, bool)]) -> Trace {
    let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(1 << 20).build().unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    for (n, (ops, open)) in threads.iter().enumerate() {
        let d = dispatch.clone();
        let ops = ops.clone();
        let open = *open;
        std::thread::Builder::new()
            .name(format!("worker-{n}"))
            .spawn(move || tracing::dispatcher::with_default(&d, || run(&ops, open)))
            .unwrap()
            .join()
            .unwrap();
    }
    let mut dump = Vec::new();
    recorder.dump_to(&mut dump).unwrap();
    Trace::from_bytes(&dump, "dump".as_ref()).unwrap()
}

/// The fleet of the agent's objects of `trace`'s entries, one events source.
fn shipped(trace: &Trace) -> Fleet {
    let mut w = BatchWriter::new("h", "/rec", 0, TimeSource::Drained, 0).unwrap().with_content(Content::Events);
    for e in trace.entries() {
        w.push(OFFSET + e.ts_ns, entry_json(trace, &e).as_bytes()).unwrap();
    }
    let mut t = Timeline::new();
    t.push(&w.finish()).unwrap();
    t.finish()
}

fn check(threads: &[(Vec<Op>, bool)]) -> Result<(), TestCaseError> {
    let trace = record(threads);
    let fleet = shipped(&trace);
    let (mut h, mut f) = (Vec::new(), Vec::new());
    ringtrace_export::perfetto::write(&trace, &mut h).unwrap();
    perfetto(&fleet, fleet.timeline(), &mut f).unwrap();
    same(&perfetto_threads(&h), &perfetto_threads(&f), (OFFSET.into(), 0), "perfetto").map_err(TestCaseError::fail)?;
    let (mut h, mut f) = (Vec::new(), Vec::new());
    ringtrace_export::chrome::write(&trace, &mut h).unwrap();
    let done = chrome(&fleet, fleet.timeline(), &mut f).unwrap();
    same(&chrome_threads(&h), &chrome_threads(&f), (OFFSET.into(), 0), "chrome").map_err(TestCaseError::fail)?;
    prop_assert_eq!(done.records, trace.entries().count() as u64);
    let dir = TempDir::new("events");
    ringtrace_export::ctf::write(&trace, &dir.path().join("host")).unwrap();
    ctf(&fleet, fleet.timeline(), &dir.path().join("fleet")).unwrap();
    prop_assert_eq!(ctf_streams(&dir.path().join("host")), ctf_streams(&dir.path().join("fleet")));
    let h = ringtrace_export::otlp::convert(&trace, &ringtrace_export::otlp::Options::default());
    let f = otlp(&fleet, fleet.timeline());
    // The host's OTLP times are its wall clock's (its process chunk's reading).
    let p = trace.process.as_ref().expect("the dump's process chunk");
    let offset = i128::from(OFFSET) - (i128::from(p.realtime_ns) - i128::from(p.monotonic_ns));
    let (h, f) = (otlp_shown(&h.traces, &h.logs), otlp_shown(&f.traces, &f.logs));
    same_otlp(&h, &f, (offset, 0)).map_err(TestCaseError::fail)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_recorder_shipped_exports_as_on_its_host(
        threads in proptest::collection::vec((proptest::collection::vec(op(), 0..40), any::<bool>()), 1..3),
    ) {
        check(&threads)?;
    }
}
