//! One mapping for both OTLP paths: the same events, recorded by the tracing layer,
//! converted once as a trace (`ringtrace_export::otlp::convert`: events outside any
//! span are log records) and once as the JSON objects the agent ships of them
//! (`entry_json`) through the fleet's export, give the same severity, body, attributes
//! and dropped count, values of the same types. The fleet adds `ringtrace.seq`, its own.
//! The agent's JSON holds integers beyond ±(2^53 − 1) and 128-bit ones as decimal
//! strings: the object's `kinds` tell them from text.

use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use proptest::prelude::*;
use ringtrace_tracing::decode::text::entry_json;
use ringtrace_tracing::decode::{EntryKind, Trace};
use tracing_subscriber::layer::SubscriberExt;

use super::super::otlp;
use crate::fleet::Timeline;
use crate::frame::{BatchWriter, Content, TimeSource};

/// JavaScript's `Number.MAX_SAFE_INTEGER`: the agent writes 64-bit integers beyond it
/// as decimal strings, and values near it are drawn.
const SAFE: i128 = (1 << 53) - 1;

/// The recorder's text bound in these tests: longer text is cut (`ringtrace.cut`).
const MAX_VALUE: usize = 12;

/// One event: its level (0 TRACE to 4 ERROR), which callsite (`shape`), its values.
#[derive(Clone, Debug)]
struct Drawn {
    level: u8,
    shape: u8,
    a: u64,
    b: i64,
    f: f64,
    s: String,
    t: bool,
    i: i128,
    u: u128,
}

fn wide() -> impl Strategy<Value = i128> {
    let near = |at: i128| (-2i128..=2).prop_map(move |d| at.saturating_add(d));
    prop_oneof![
        any::<i128>(),
        near(0),
        near(SAFE),
        near(-SAFE),
        near(i128::from(i64::MAX)),
        near(i128::from(i64::MIN)),
        near(i128::from(u64::MAX)),
    ]
}

fn double() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(1.0),
        Just(-0.0),
        Just(1e20),
        Just(9_007_199_254_740_993.0),
        (-1000i32..1000).prop_map(f64::from),
    ]
}

fn drawn() -> impl Strategy<Value = Drawn> {
    let text = proptest::collection::vec(prop_oneof![Just('a'), Just('"'), Just('\\'), any::<char>()], 0..20)
        .prop_map(String::from_iter);
    (0u8..5, 0u8..5, wide(), wide(), double(), text, any::<bool>(), wide(), wide()).prop_map(
        |(level, shape, a, b, f, s, t, i, u)| Drawn {
            level,
            shape,
            a: u64::try_from(a).unwrap_or(a.unsigned_abs() as u64),
            b: i64::try_from(b).unwrap_or(b as i64),
            f,
            s,
            t,
            i,
            u: u as u128,
        },
    )
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

fn record(events: &[Drawn]) -> Trace {
    let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder()
        .per_thread_bytes(1 << 20)
        .max_value_bytes(MAX_VALUE)
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        for d in events {
            let s = d.s.as_str();
            match d.shape {
                0 => at!(d.level, a = d.a, b = d.b, f = d.f, s, t = d.t, "said {}", d.s),
                1 => at!(d.level, a = d.a, f = d.f, s),
                // Fields named as attributes the mapping adds.
                2 => at!(d.level, thread.id = d.a, code.namespace = s, ringtrace.cut = d.t, "shadowing"),
                3 => at!(d.level, i = d.i, u = d.u, "wide"),
                // A message that is not text.
                _ => at!(d.level, message = d.b, t = d.t),
            }
        }
    });
    let mut dump = Vec::new();
    recorder.dump_to(&mut dump).unwrap();
    Trace::from_bytes(&dump, "dump".as_ref()).unwrap()
}

/// The fleet's log records of the agent's objects of `trace`'s entries that `pick` takes,
/// shipped as one events source.
fn shipped(trace: &Trace, pick: impl Fn(&EntryKind<'_>) -> bool) -> Vec<LogRecord> {
    let mut w = BatchWriter::new("h", "/rec#0", 0, TimeSource::Drained, 0).unwrap().with_content(Content::Events);
    for e in trace.entries() {
        if pick(&e.kind) {
            w.push(1_700_000_000_000_000_000 + e.ts_ns, entry_json(trace, &e).as_bytes()).unwrap();
        }
    }
    let mut t = Timeline::new();
    t.push(&w.finish()).unwrap();
    let fleet = t.finish();
    let x = otlp(&fleet, fleet.timeline());
    x.logs.resource_logs.into_iter().flat_map(|r| r.scope_logs).flat_map(|s| s.log_records).collect()
}

fn value(kv: &KeyValue) -> Option<&V> {
    kv.value.as_ref()?.value.as_ref()
}

fn check(events: &[Drawn]) -> Result<(), TestCaseError> {
    let trace = record(events);
    let c = ringtrace_export::otlp::convert(&trace, &ringtrace_export::otlp::Options::default());
    let from_trace: Vec<&LogRecord> =
        c.logs.resource_logs.iter().flat_map(|r| &r.scope_logs).flat_map(|s| &s.log_records).collect();
    let from_fleet = shipped(&trace, |k| matches!(k, EntryKind::Event(_)));
    prop_assert_eq!(from_trace.len(), events.len());
    prop_assert_eq!(from_fleet.len(), events.len());
    for ((t, f), d) in from_trace.iter().zip(&from_fleet).zip(events) {
        prop_assert_eq!((t.severity_number, &t.severity_text), (f.severity_number, &f.severity_text), "{:?}", d);
        let body = t.body.as_ref().and_then(|b| b.value.as_ref());
        prop_assert_eq!(body, f.body.as_ref().and_then(|b| b.value.as_ref()), "{:?}", d);
        let want: Vec<(&str, Option<V>)> = (t.attributes.iter()).map(|a| (a.key.as_str(), value(a).cloned())).collect();
        let got: Vec<(&str, Option<V>)> = (f.attributes.iter())
            .filter(|a| a.key != "ringtrace.seq")
            .map(|a| (a.key.as_str(), value(a).cloned()))
            .collect();
        prop_assert_eq!(&got, &want, "{:?}", d);
        prop_assert_eq!(t.dropped_attributes_count, f.dropped_attributes_count, "{:?}", d);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_trace_event_and_the_agents_object_of_it_give_the_same_log_record(
        events in proptest::collection::vec(drawn(), 1..6),
    ) {
        check(&events)?;
    }
}

/// Each shape once, at each level: what the proptest draws at random, for certain.
#[test]
fn every_shape_and_level_gives_the_same_log_record() {
    let base = Drawn {
        level: 0,
        shape: 0,
        a: 1 << 60,
        b: -7,
        f: f64::NAN,
        s: "a text longer than the bound".into(),
        t: true,
        i: -5,
        u: u128::MAX,
    };
    let events: Vec<Drawn> = (0..5u8)
        .flat_map(|shape| (0..5u8).map(move |level| (shape, level)))
        .map(|(shape, level)| Drawn { level, shape, ..base.clone() })
        .collect();
    check(&events).unwrap();
}

/// Events a full ring refused: the trace's `lost` entry and the agent's object of it
/// give the same WARN record, but for `thread.id`, which the object does not carry.
#[test]
fn lost_events_give_the_same_log_record() {
    let path = std::env::temp_dir().join(format!("ringtrace-ship-parity-lost-{}.rtt", std::process::id()));
    // 4 KiB rings: the writer outruns the drain's millisecond sleeps.
    let (layer, recorder) = ringtrace_tracing::Builder::stream(&path).per_thread_bytes(4096).build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        for seq in 0..200_000u64 {
            tracing::info!(seq);
        }
    });
    assert!(recorder.finish().unwrap().lost > 0, "the test needs a full ring");
    let trace = Trace::open(&path).unwrap();
    let c = ringtrace_export::otlp::convert(&trace, &ringtrace_export::otlp::Options::default());
    let from_fleet = shipped(&trace, |k| matches!(k, EntryKind::Lost { .. }));
    std::fs::remove_file(&path).unwrap();
    let from_trace: Vec<&LogRecord> = (c.logs.resource_logs.iter().flat_map(|r| &r.scope_logs))
        .flat_map(|s| &s.log_records)
        .filter(|r| r.attributes.iter().any(|a| a.key == "ringtrace.lost"))
        .collect();
    assert!(!from_trace.is_empty());
    assert_eq!(from_trace.len(), from_fleet.len());
    for (t, f) in from_trace.iter().zip(&from_fleet) {
        assert_eq!((t.severity_number, &t.severity_text, &t.body), (f.severity_number, &f.severity_text, &f.body));
        let keep = |k: &str| k != "thread.id" && k != "ringtrace.seq";
        let attrs = |r: &LogRecord| r.attributes.iter().filter(|a| keep(&a.key)).cloned().collect::<Vec<_>>();
        assert_eq!(attrs(t), attrs(f));
    }
}
