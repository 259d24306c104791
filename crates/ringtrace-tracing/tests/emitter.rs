//! The [`Emitter`]: events and spans given as data (the C API's path) decode as the
//! layer's do. A proptest draws values of every kind, long texts and byte strings, and
//! record and value bounds, and checks what decoding gives back against what was given:
//! every value kept is the one given (text and bytes a prefix, marked cut exactly when
//! shorter), in field order, and every value not kept is counted dropped.

use proptest::prelude::*;
use ringtrace_tracing::decode::{Trace, Value};
use ringtrace_tracing::{Builder, CallsiteInfo, CallsiteKind, Emitter, FieldValue, Level, Recorder};

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("ringtrace-emitter-{}-{name}", std::process::id()))
}

fn site(e: &Emitter, key: usize, kind: CallsiteKind, name: &str, fields: &[&str]) -> u32 {
    e.register(
        key,
        &CallsiteInfo {
            kind,
            level: Level::INFO,
            name,
            target: "c",
            file: Some("t.c"),
            line: Some(key as u32),
            fields,
        },
    )
}

fn dump(recorder: &Recorder, name: &str) -> Trace {
    let path = temp(name);
    recorder.dump(&path).expect("dump");
    let trace = Trace::open(&path).expect("decode the dump");
    let _ = std::fs::remove_file(&path);
    trace
}

#[derive(Clone, Debug)]
enum Given {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Str(String),
    Bytes(Vec<u8>),
}

impl Given {
    fn as_field(&self) -> FieldValue<'_> {
        match self {
            Given::U64(x) => FieldValue::U64(*x),
            Given::I64(x) => FieldValue::I64(*x),
            Given::F64(x) => FieldValue::F64(*x),
            Given::Bool(x) => FieldValue::Bool(*x),
            Given::Str(s) => FieldValue::Str(s),
            Given::Bytes(b) => FieldValue::Bytes(b),
        }
    }
}

fn given() -> impl Strategy<Value = Given> {
    prop_oneof![
        any::<u64>().prop_map(Given::U64),
        any::<i64>().prop_map(Given::I64),
        any::<f64>().prop_filter("NaN is not equal to itself", |x| !x.is_nan()).prop_map(Given::F64),
        any::<bool>().prop_map(Given::Bool),
        ".{0,80}".prop_map(Given::Str),
        proptest::collection::vec(any::<u8>(), 0..120).prop_map(Given::Bytes),
    ]
}

/// Checks the decoded value of given value `g`: equal, or (text, bytes) a prefix,
/// marked cut exactly when shorter, at most `max_value` bytes.
fn check_value(g: &Given, v: &Value, cut: bool, max_value: usize) -> Result<(), TestCaseError> {
    match (g, v) {
        (Given::U64(a), Value::U64(b)) => prop_assert_eq!(a, b),
        (Given::I64(a), Value::I64(b)) => prop_assert_eq!(a, b),
        (Given::F64(a), Value::F64(b)) => prop_assert_eq!(a.to_bits(), b.to_bits()),
        (Given::Bool(a), Value::Bool(b)) => prop_assert_eq!(a, b),
        (Given::Str(a), Value::Str(b)) => {
            prop_assert!(a.starts_with(b.as_str()) && b.len() <= max_value, "{b:?} from {a:?}");
            prop_assert_eq!(cut, b.len() < a.len());
        }
        (Given::Bytes(a), Value::Bytes(b)) => {
            prop_assert!(a.starts_with(b) && b.len() <= max_value, "{b:?} from {a:?}");
            prop_assert_eq!(cut, b.len() < a.len());
        }
        (g, v) => prop_assert!(false, "{g:?} came back as {v:?}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn values_come_back_as_given_or_counted(
        values in proptest::collection::vec(given(), 0..40),
        max_record in 64usize..1024,
        max_value in 1usize..100,
    ) {
        let (_layer, recorder) = Builder::flight_recorder()
            .per_thread_bytes(64 << 10)
            .max_record_bytes(max_record)
            .max_value_bytes(max_value)
            .build()
            .unwrap();
        let e = recorder.emitter();
        let names: Vec<String> = (0..values.len()).map(|i| format!("f{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let cs = site(&e, 1, CallsiteKind::Event, "event t.c:1", &names);
        let fields: Vec<FieldValue<'_>> = values.iter().map(Given::as_field).collect();
        e.event(cs, fields.iter().copied());
        let trace = dump(&recorder, "prop.rtt");
        let events = trace.events();
        prop_assert_eq!(events.len(), 1);
        let ev = &events[0];
        let mut last = None;
        for f in &ev.fields {
            let i: usize = f.name.strip_prefix('f').and_then(|n| n.parse().ok()).expect("a field the callsite names");
            prop_assert!(last.is_none_or(|l| l < i), "fields out of order");
            last = Some(i);
            check_value(&values[i], &f.value, f.cut, max_value)?;
        }
        prop_assert_eq!(ev.fields.len() + usize::from(ev.dropped), values.len());
        let cut = ev.dropped > 0 || ev.fields.iter().any(|f| f.cut);
        prop_assert_eq!(recorder.stats().cut, u64::from(cut));
        // What fits whole is kept whole.
        let size: usize = values.iter().map(|g| 4 + match g {
            Given::Str(s) => s.len(),
            Given::Bytes(b) => b.len(),
            _ => 16,
        }).sum();
        let fits_values = values.iter().all(|g| match g {
            Given::Str(s) => s.len() <= max_value,
            Given::Bytes(b) => b.len() <= max_value,
            _ => true,
        });
        if fits_values && 17 + size + 4 <= max_record {
            prop_assert!(!cut, "{} bytes of values in a {max_record}-byte record were cut", size);
        }
    }
}

#[test]
fn spans_nest_and_name_the_events_in_them() {
    let (_layer, recorder) = Builder::flight_recorder().per_thread_bytes(64 << 10).build().unwrap();
    let e = recorder.emitter();
    let outer = site(&e, 1, CallsiteKind::Span, "request", &["id"]);
    let inner = site(&e, 2, CallsiteKind::Span, "query", &["table"]);
    let ev = site(&e, 3, CallsiteKind::Event, "event t.c:3", &["message", "rows"]);
    let a = e.enter_span(outer, [FieldValue::U64(7)]);
    let b = e.enter_span(inner, [FieldValue::Str("users")]);
    assert!(a != 0 && b != 0 && a != b && a >> 63 == 1);
    e.event(ev, [FieldValue::Str("read"), FieldValue::U64(3)]);
    assert!(e.exit_span(b));
    assert!(!e.exit_span(b), "a span exited twice is refused");
    e.event(ev, [FieldValue::Str("done"), FieldValue::U64(0)]);
    assert!(e.exit_span(a));
    e.event(ev, [FieldValue::Str("outside"), FieldValue::U64(0)]);
    // Registering again gives the same number, whatever the info.
    assert_eq!(site(&e, 3, CallsiteKind::Span, "other", &[]), ev);

    let trace = dump(&recorder, "spans.rtt");
    let events = trace.events();
    let spans: Vec<Vec<&str>> = events.iter().map(|e| e.spans.iter().map(|s| s.name.as_str()).collect()).collect();
    assert_eq!(spans, vec![vec!["request", "query"], vec!["request"], vec![]]);
    assert_eq!(events[0].message(), Some("read"));
    assert_eq!(events[0].field("rows"), Some(&Value::U64(3)));
    let table = &events[0].spans[1].fields.as_ref().expect("the span's fields")[0];
    assert_eq!((table.name.as_ref(), &table.value), ("table", &Value::Str("users".into())));
    assert_eq!(events[0].callsite.map(|c| (c.file.as_deref(), c.line)), Some((Some("t.c"), Some(3))));
}

#[test]
fn a_thread_without_a_rust_name_is_named_as_the_kernel_names_it() {
    let (_layer, recorder) = Builder::flight_recorder().per_thread_bytes(64 << 10).build().unwrap();
    let e = recorder.emitter();
    let ev = site(&e, 1, CallsiteKind::Event, "event t.c:1", &["message"]);
    std::thread::scope(|s| {
        s.spawn(|| {
            rustix::thread::set_name(c"c-worker").unwrap();
            e.event(ev, [FieldValue::Str("hello")]);
        });
    });
    let trace = dump(&recorder, "names.rtt");
    let events = trace.events();
    assert_eq!(events[0].thread.map(|t| t.label()), Some("c-worker".into()));
}

#[test]
fn a_retired_recorder_records_nothing_more_and_its_thread_states_go() {
    let (_la, a) = Builder::flight_recorder().per_thread_bytes(64 << 10).build().unwrap();
    let (_lb, b) = Builder::flight_recorder().per_thread_bytes(64 << 10).build().unwrap();
    let (ea, eb) = (a.emitter(), b.emitter());
    let sa = site(&ea, 1, CallsiteKind::Event, "event t.c:1", &["message"]);
    let sb = site(&eb, 1, CallsiteKind::Event, "event t.c:1", &["message"]);
    std::thread::scope(|s| {
        s.spawn(|| {
            ea.event(sa, [FieldValue::Str("before")]);
            eb.event(sb, [FieldValue::Str("b")]);
            a.retire();
            ea.event(sa, [FieldValue::Str("after")]);
            // The thread's state for `a` went; `b`'s is kept and still records.
            eb.event(sb, [FieldValue::Str("b again")]);
        });
    });
    let (sa_, sb_) = (a.stats(), b.stats());
    assert_eq!((sa_.written, sa_.teardown), (1, 1), "{sa_:?}");
    assert_eq!(sb_.written, 2, "{sb_:?}");
    let trace = dump(&a, "retired.rtt");
    assert_eq!(trace.events().iter().map(|e| e.message().unwrap().to_owned()).collect::<Vec<_>>(), ["before"]);
}
