//! Recorded values in every export, against a model of what the docs promise: a
//! proptest draws doubles of every class, integers of every width around the i64 and
//! 2^53 edges, and text with NULs and backslashes, records them as events, and reads
//! them back from `decode --format json`, the Chrome export (both: integers beyond
//! ±(2^53 − 1) and 128-bit ones as decimal strings, NaN and the infinities as the
//! strings `NaN`, `Infinity`, `-Infinity`), OTLP (integers of any width `int` exactly
//! where they fit an i64, the same strings for the doubles OTLP/JSON cannot hold) and
//! CTF (text with a backslash written `\\` and a NUL `\0`, read back exactly).

mod common;

use common::{dispatch, TempDir};
use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use proptest::prelude::*;
use ringtrace_export::{chrome, ctf, otlp};
use ringtrace_tracing::decode::text::{self, Format};
use ringtrace_tracing::decode::Trace;
use ringtrace_tracing::Builder;
use serde_json::Value as Json;

/// JavaScript's `Number.MAX_SAFE_INTEGER`.
const SAFE: i128 = (1 << 53) - 1;

/// The values of one event.
#[derive(Clone, Debug)]
struct Values {
    f: f64,
    i: i128,
    u: u128,
    a: u64,
    b: i64,
    s: String,
}

fn double() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(-f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-0.0),
        Just(f64::MIN_POSITIVE / 4.0),
        Just(f64::MAX),
        Just(9_007_199_254_740_993.0),
    ]
}

/// Integers around `at`.
fn near(at: i128) -> impl Strategy<Value = i128> {
    (-3i128..=3).prop_map(move |d| at.saturating_add(d))
}

fn wide() -> impl Strategy<Value = i128> {
    prop_oneof![
        any::<i128>(),
        near(0),
        near(SAFE),
        near(-SAFE),
        near(i128::from(i64::MAX)),
        near(i128::from(i64::MIN)),
        near(i128::from(u64::MAX)),
        near(i128::MIN + 3),
        near(i128::MAX - 3),
    ]
}

fn text() -> impl Strategy<Value = String> {
    let c = prop_oneof![Just('\\'), Just('\0'), Just('0'), Just('a'), Just('"'), any::<char>()];
    proptest::collection::vec(c, 0..12).prop_map(String::from_iter)
}

fn values() -> impl Strategy<Value = Values> {
    (double(), wide(), wide(), wide(), wide(), text()).prop_map(|(f, i, u, a, b, s)| Values {
        f,
        i,
        // Negative draws wrap to just below 2^128.
        u: u as u128,
        a: u64::try_from(a).unwrap_or(a.unsigned_abs() as u64),
        b: i64::try_from(b).unwrap_or(b as i64),
        s,
    })
}

fn record(events: &[Values]) -> Trace {
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(1 << 20).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || {
        for v in events {
            tracing::info!(f = v.f, i = v.i, u = v.u, a = v.a, b = v.b, s = v.s.as_str());
        }
    });
    let mut dump = Vec::new();
    recorder.dump_to(&mut dump).unwrap();
    Trace::from_bytes(&dump, "dump".as_ref()).unwrap()
}

/// The docs' JSON of a double: a number, or for NaN and the infinities a string.
fn check_json_double(got: &Json, x: f64) -> Result<(), TestCaseError> {
    match got {
        Json::String(s) if x.is_nan() => prop_assert_eq!(s, "NaN"),
        Json::String(s) if x.is_infinite() => prop_assert_eq!(s, if x > 0.0 { "Infinity" } else { "-Infinity" }),
        // The writer's digits are the shortest that read back exactly, and the tests
        // read them with serde_json's `float_roundtrip` reader.
        Json::Number(n) if x.is_finite() => {
            let got = n.as_f64().unwrap();
            prop_assert!(got == x, "{} read back as {}", x, got);
        }
        other => prop_assert!(false, "{x} written as {other}"),
    }
    Ok(())
}

/// The docs' JSON of a 64-bit integer: a number within ±(2^53 − 1), a decimal string
/// beyond.
fn check_json_int(got: &Json, x: i128) -> Result<(), TestCaseError> {
    if x.abs() <= SAFE {
        prop_assert_eq!(got.as_i64().map(i128::from), Some(x), "{} for {}", got, x);
    } else {
        prop_assert_eq!(got.as_str().map(str::to_owned), Some(x.to_string()), "{} for {}", got, x);
    }
    Ok(())
}

/// An event's values as the JSON of decode and of the Chrome export hold them.
fn check_json_values(fields: &Json, v: &Values) -> Result<(), TestCaseError> {
    check_json_double(&fields["f"], v.f)?;
    // 128-bit integers: decimal strings whatever their value.
    prop_assert_eq!(fields["i"].as_str().map(str::to_owned), Some(v.i.to_string()));
    prop_assert_eq!(fields["u"].as_str().map(str::to_owned), Some(v.u.to_string()));
    check_json_int(&fields["a"], i128::from(v.a))?;
    check_json_int(&fields["b"], i128::from(v.b))?;
    prop_assert_eq!(fields["s"].as_str(), Some(v.s.as_str()));
    Ok(())
}

fn check_decode(trace: &Trace, events: &[Values]) -> Result<(), TestCaseError> {
    let mut out = Vec::new();
    text::write(trace, Format::Json, &mut out).unwrap();
    let lines: Vec<Json> = String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    prop_assert_eq!(lines.len(), events.len());
    for (line, v) in lines.iter().zip(events) {
        check_json_values(&line["fields"], v)?;
    }
    Ok(())
}

fn check_chrome(trace: &Trace, events: &[Values]) -> Result<(), TestCaseError> {
    let mut out = Vec::new();
    chrome::write(trace, &mut out).unwrap();
    let doc: Json = serde_json::from_slice(&out).unwrap();
    let instants: Vec<&Json> = doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "i").collect();
    prop_assert_eq!(instants.len(), events.len());
    for (e, v) in instants.iter().zip(events) {
        check_json_values(&e["args"], v)?;
    }
    Ok(())
}

/// The docs' OTLP value of an integer of any width.
fn otlp_int(x: i128) -> V {
    i64::try_from(x).map_or_else(|_| V::StringValue(x.to_string()), V::IntValue)
}

fn check_otlp(trace: &Trace, events: &[Values]) -> Result<(), TestCaseError> {
    let c = otlp::convert(trace, &otlp::Options::default());
    let records: Vec<_> =
        c.logs.resource_logs.iter().flat_map(|r| &r.scope_logs).flat_map(|s| &s.log_records).collect();
    prop_assert_eq!(records.len(), events.len());
    for (r, v) in records.iter().zip(events) {
        let attr = |k: &str| {
            r.attributes.iter().find(|a| a.key == k).and_then(|a| a.value.clone()).and_then(|v| v.value).unwrap()
        };
        match attr("f") {
            V::StringValue(s) if v.f.is_nan() => prop_assert_eq!(s, "NaN"),
            V::StringValue(s) if v.f.is_infinite() => {
                prop_assert_eq!(s, if v.f > 0.0 { "Infinity" } else { "-Infinity" })
            }
            V::DoubleValue(d) if v.f.is_finite() => prop_assert_eq!(d.to_bits(), v.f.to_bits()),
            other => prop_assert!(false, "{} as {:?}", v.f, other),
        }
        prop_assert_eq!(attr("i"), otlp_int(v.i));
        let u = i128::try_from(v.u).map_or_else(|_| V::StringValue(v.u.to_string()), otlp_int);
        prop_assert_eq!(attr("u"), u);
        prop_assert_eq!(attr("a"), otlp_int(i128::from(v.a)));
        prop_assert_eq!(attr("b"), otlp_int(i128::from(v.b)));
        prop_assert_eq!(attr("s"), V::StringValue(v.s.clone()));
    }
    Ok(())
}

/// Reads a CTF string at `at` and reverses the documented escapes; `Err` where the
/// bytes are not what the encoding writes (a backslash before anything but `\` or `0`).
fn ctf_string(b: &[u8], at: &mut usize) -> Result<String, TestCaseError> {
    let end = *at + b[*at..].iter().position(|&c| c == 0).unwrap();
    let raw = &b[*at..end];
    *at = end + 1;
    let mut out = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        match (raw[i], raw.get(i + 1)) {
            (b'\\', Some(b'\\')) => out.push(b'\\'),
            (b'\\', Some(b'0')) => out.push(0),
            (b'\\', next) => return Err(TestCaseError::fail(format!("a lone backslash before {next:?} in {raw:?}"))),
            (c, _) => {
                out.push(c);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    Ok(String::from_utf8(out).unwrap())
}

fn u64_at(b: &[u8], at: &mut usize) -> u64 {
    let x = u64::from_le_bytes(b[*at..*at + 8].try_into().unwrap());
    *at += 8;
    x
}

fn check_ctf(trace: &Trace, events: &[Values]) -> Result<(), TestCaseError> {
    let tmp = TempDir::new("values-ctf");
    let dir = tmp.join("ctf");
    ctf::write(trace, &dir).unwrap();
    let streams: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|f| f.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("stream-"))
        .collect();
    prop_assert_eq!(streams.len(), 1);
    let b = std::fs::read(&streams[0]).unwrap();
    // One packet: its header and context (magic, uuid, stream id; begin, end, content
    // size, packet size, events discarded; tid), then the events.
    let content = usize::try_from(u64::from_le_bytes(b[40..48].try_into().unwrap()) / 8).unwrap();
    prop_assert_eq!(content, b.len());
    let mut at = 4 + 16 + 4 + 8 * 5 + 4;
    for v in events {
        at += 4 + 8; // event header: class id, timestamp
        prop_assert_eq!(u64_at(&b, &mut at), v.f.to_bits());
        prop_assert_eq!(ctf_string(&b, &mut at)?, v.i.to_string());
        prop_assert_eq!(ctf_string(&b, &mut at)?, v.u.to_string());
        prop_assert_eq!(u64_at(&b, &mut at), v.a);
        prop_assert_eq!(u64_at(&b, &mut at) as i64, v.b);
        prop_assert_eq!(ctf_string(&b, &mut at)?, v.s.clone());
    }
    prop_assert_eq!(at, b.len());
    let meta = std::fs::read_to_string(dir.join("metadata")).unwrap();
    prop_assert!(meta.contains(r"\\ are a backslash and \0 a NUL"), "{}", meta);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn decode_json_writes_values_as_documented(events in proptest::collection::vec(values(), 1..6)) {
        check_decode(&record(&events), &events)?;
    }

    #[test]
    fn chrome_writes_values_as_documented(events in proptest::collection::vec(values(), 1..6)) {
        check_chrome(&record(&events), &events)?;
    }

    #[test]
    fn otlp_writes_values_as_documented(events in proptest::collection::vec(values(), 1..6)) {
        check_otlp(&record(&events), &events)?;
    }

    #[test]
    fn ctf_writes_values_as_documented(events in proptest::collection::vec(values(), 1..6)) {
        check_ctf(&record(&events), &events)?;
    }
}
