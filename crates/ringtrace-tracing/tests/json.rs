//! `decode --format json` lines and 64-bit integers: identifiers and absolute times are
//! decimal strings, recorded integer values JSON numbers where every reader reads them
//! exactly (at most 2^53 - 1 from zero) and decimal strings beyond, each exact.

mod common;

use common::{dispatch, TempDir};
use ringtrace_tracing::decode::text::{self, Format};
use ringtrace_tracing::decode::Trace;
use ringtrace_tracing::Builder;
use serde_json::Value as Json;

/// JavaScript's `Number.MAX_SAFE_INTEGER`.
const SAFE: u64 = (1 << 53) - 1;

/// Every integer number in `v` is one a double holds exactly.
fn every_number_exact_in_a_double(v: &Json, line: &str) {
    match v {
        Json::Number(n) => {
            if let Some(u) = n.as_u64() {
                assert!(u <= SAFE, "{u} in {line}");
            } else if let Some(i) = n.as_i64() {
                assert!(i.unsigned_abs() <= SAFE, "{i} in {line}");
            }
        }
        Json::Array(a) => a.iter().for_each(|v| every_number_exact_in_a_double(v, line)),
        Json::Object(o) => o.values().for_each(|v| every_number_exact_in_a_double(v, line)),
        _ => {}
    }
}

fn json_lines(trace: &Trace) -> Vec<Json> {
    let mut out = Vec::new();
    text::write(trace, Format::Json, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    out.lines()
        .map(|l| {
            let v: Json = serde_json::from_str(l).unwrap();
            every_number_exact_in_a_double(&v, l);
            v
        })
        .collect()
}

#[test]
fn large_integers_round_trip_exactly_as_strings_and_small_ones_stay_numbers() {
    let dir = TempDir::new("json-big");
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(64 << 10).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || {
        let span = tracing::info_span!("s", big = u64::MAX, small = 7u64);
        let _e = span.enter();
        tracing::info!(
            max = u64::MAX,
            safe = SAFE,
            above = SAFE + 1,
            neg_safe = -(SAFE as i64),
            neg_above = -(SAFE as i64) - 1,
            min = i64::MIN,
            small = 42u64,
            neg = -3i64,
            wide = 5u128,
            ratio = 0.5,
            "m"
        );
    });
    recorder.dump(dir.join("d.rtt")).unwrap();
    let trace = Trace::open(dir.join("d.rtt")).unwrap();
    let lines = json_lines(&trace);
    assert_eq!(lines.len(), 1);
    let (line, e) = (&lines[0], &trace.events()[0]);
    let f = &line["fields"];
    assert_eq!(f["max"], "18446744073709551615");
    assert_eq!(f["max"].as_str().unwrap().parse::<u64>().unwrap(), u64::MAX);
    assert_eq!(f["above"], (SAFE + 1).to_string().as_str());
    assert_eq!(f["neg_above"], (-(SAFE as i64) - 1).to_string().as_str());
    assert_eq!(f["min"].as_str().unwrap().parse::<i64>().unwrap(), i64::MIN);
    assert_eq!((f["safe"].as_u64(), f["neg_safe"].as_i64()), (Some(SAFE), Some(-(SAFE as i64))));
    assert_eq!((f["small"].as_u64(), f["neg"].as_i64(), f["ratio"].as_f64()), (Some(42), Some(-3), Some(0.5)));
    // 128-bit integers are strings whatever their size.
    assert_eq!(f["wide"], "5");
    // The time and the span id: strings, always.
    assert_eq!(line["ts_ns"], e.ts_ns.to_string().as_str());
    assert_eq!(line["ts_ns"].as_str().unwrap().parse::<u64>().unwrap(), e.ts_ns);
    let span = &line["spans"][0];
    assert_eq!(span["id"], e.spans[0].id.to_string().as_str());
    assert_eq!(
        (&span["fields"]["big"], span["fields"]["small"].as_u64()),
        (&Json::from("18446744073709551615"), Some(7))
    );
    // The thread id is a u32: a number.
    assert_eq!(line["tid"].as_u64(), e.thread.map(|t| u64::from(t.tid)));
}

#[test]
fn lost_event_lines_carry_their_time_as_a_string_and_their_count_as_a_number() {
    let dir = TempDir::new("json-lost");
    // 4 KiB rings: the writer outruns the drain's millisecond sleeps.
    let (layer, recorder) = Builder::stream(dir.join("s.rtt")).per_thread_bytes(4096).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || {
        for seq in 0..200_000u64 {
            tracing::info!(seq);
        }
    });
    assert!(recorder.finish().unwrap().lost > 0, "the test needs a full ring");
    let trace = Trace::open(dir.join("s.rtt")).unwrap();
    let lines = json_lines(&trace);
    let lost: Vec<&Json> = lines.iter().filter(|l| l.get("lost").is_some()).collect();
    assert!(!lost.is_empty());
    for l in &lost {
        assert!(l["ts_ns"].as_str().unwrap().parse::<u64>().is_ok(), "{l}");
        assert!(l["lost"].as_u64().is_some_and(|n| n > 0), "{l}");
    }
    let counted: u64 = lost.iter().map(|l| l["lost"].as_u64().unwrap()).sum();
    assert_eq!(counted + trace.stat("unreported").unwrap_or(0), trace.lost());
}
