//! The log records of events outside any span and of lost events, as the mapping
//! both OTLP exports share makes them (`ringtrace_export::otlp::model`).

use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use ringtrace_export::otlp::{convert, Options};
use ringtrace_tracing::decode::Trace;
use tracing_subscriber::layer::SubscriberExt;

use super::attr;

fn logs(trace: &Trace) -> Vec<LogRecord> {
    let c = convert(trace, &Options::default());
    c.logs.resource_logs.into_iter().flat_map(|r| r.scope_logs).flat_map(|s| s.log_records).collect()
}

fn body(r: &LogRecord) -> Option<&V> {
    r.body.as_ref()?.value.as_ref()
}

/// The target as `code.namespace`; a message that is not text keeps its type; the
/// names of values cut at the recorder's bound in `ringtrace.cut`; a field named as an
/// attribute the mapping adds keeps its value, and the attribute left out is counted
/// as dropped.
#[test]
fn an_event_outside_spans_has_its_target_typed_message_cut_values_and_drops() {
    let (layer, recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).max_value_bytes(8).build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        tracing::warn!(target: "app::db", message = 42u64, long = "more than eight bytes");
        tracing::info!(code.namespace = "mine", thread.name = 3u64, "short");
    });
    let mut dump = Vec::new();
    recorder.dump_to(&mut dump).unwrap();
    let trace = Trace::from_bytes(&dump, "dump".as_ref()).unwrap();
    let r = logs(&trace);
    assert_eq!(r.len(), 2);
    assert_eq!((r[0].severity_number, body(&r[0])), (13, Some(&V::IntValue(42))));
    assert_eq!(attr(&r[0].attributes, "code.namespace"), Some(&V::StringValue("app::db".into())));
    assert_eq!(attr(&r[0].attributes, "long"), Some(&V::StringValue("more tha".into())));
    let cut = V::ArrayValue(ArrayValue { values: vec![AnyValue { value: Some(V::StringValue("long".into())) }] });
    assert_eq!(attr(&r[0].attributes, "ringtrace.cut"), Some(&cut));
    assert!(matches!(attr(&r[0].attributes, "thread.id"), Some(V::IntValue(_))));
    assert_eq!(r[0].dropped_attributes_count, 0);
    assert_eq!(body(&r[1]), Some(&V::StringValue("short".into())));
    assert_eq!(attr(&r[1].attributes, "code.namespace"), Some(&V::StringValue("mine".into())));
    assert_eq!(attr(&r[1].attributes, "thread.name"), Some(&V::IntValue(3)));
    assert_eq!(attr(&r[1].attributes, "ringtrace.cut"), None);
    assert_eq!(r[1].dropped_attributes_count, 2, "code.namespace and thread.name left out");
}

/// Events a thread's full ring refused: a WARN log record says how many, in the words
/// of `ringtrace decode`, the count in `ringtrace.lost`.
#[test]
fn lost_events_are_a_warning_in_decodes_words() {
    let path = std::env::temp_dir().join(format!("rtt-otlp-lost-{}.rtt", std::process::id()));
    // 4 KiB rings: the writer outruns the drain's millisecond sleeps.
    let (layer, recorder) = ringtrace_tracing::Builder::stream(&path).per_thread_bytes(4096).build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        for seq in 0..200_000u64 {
            tracing::info!(seq);
        }
    });
    assert!(recorder.finish().unwrap().lost > 0, "the test needs a full ring");
    let trace = Trace::open(&path).unwrap();
    let lost: Vec<LogRecord> = logs(&trace).into_iter().filter(|r| r.severity_number == 13).collect();
    std::fs::remove_file(&path).unwrap();
    assert!(!lost.is_empty());
    for r in &lost {
        let Some(&V::IntValue(n)) = attr(&r.attributes, "ringtrace.lost") else { panic!("{r:?}") };
        assert!(n > 0);
        assert_eq!(body(r), Some(&V::StringValue(format!("ringtrace: {n} events lost here (ring full)"))));
        assert_eq!(r.severity_text, "WARN");
        assert!(matches!(attr(&r.attributes, "thread.name"), Some(V::StringValue(_))));
    }
}
