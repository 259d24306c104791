//! Exports, read back by a reader of their own format: every event and every field of
//! the trace appears, with its time exact to the nanosecond.

mod common;

use common::{dispatch, TempDir};
use ringtrace_export::chrome;
use ringtrace_tracing::decode::{Trace, Value};
use ringtrace_tracing::Builder;
use serde_json::Value as Json;

fn trace_with_spans_events_and_losses(dir: &TempDir) -> Trace {
    // A stream with small rings, so that some events are lost and counted.
    let (layer, recorder) = Builder::stream(dir.join("s.rtt")).per_thread_bytes(4096).build().unwrap();
    let d = dispatch(layer);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let d = d.clone();
            std::thread::Builder::new()
                .name(format!("w{t}"))
                .spawn_scoped(s, move || {
                    tracing::dispatcher::with_default(&d, || {
                        for round in 0..50u64 {
                            let outer = tracing::info_span!("outer", t, round);
                            let _o = outer.enter();
                            let inner = tracing::info_span!("inner");
                            let _i = inner.enter();
                            for seq in 0..200u64 {
                                tracing::info!(
                                    seq,
                                    s = "text",
                                    f = 0.25,
                                    b = false,
                                    i = -1i64,
                                    big = u128::MAX,
                                    "ev {seq}"
                                );
                            }
                        }
                    })
                })
                .unwrap();
        }
    });
    recorder.finish().unwrap();
    Trace::open(dir.join("s.rtt")).unwrap()
}

/// Bytes as the exports write them: lowercase hexadecimal.
fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn json_of(v: &Value) -> Json {
    match v {
        Value::U64(x) => Json::from(*x),
        Value::I64(x) => Json::from(*x),
        Value::F64(x) => Json::from(*x),
        Value::Bool(x) => Json::from(*x),
        Value::U128(x) => Json::from(x.to_string()),
        Value::I128(x) => Json::from(x.to_string()),
        Value::Str(s) | Value::Debug(s) | Value::Error(s) => Json::from(s.as_str()),
        Value::Bytes(b) => Json::from(hex(b)),
    }
}

#[test]
fn chrome_json_holds_every_event_field_and_loss_and_nests_slices() {
    let dir = TempDir::new("chrome");
    let trace = trace_with_spans_events_and_losses(&dir);
    assert!(trace.lost() > 0, "the test needs losses");
    let mut out = Vec::new();
    let x = chrome::write(&trace, &mut out).unwrap();
    let v: Json = serde_json::from_slice(&out).expect("valid JSON");
    let evs = v["traceEvents"].as_array().unwrap();

    // Every event, in order, with its time to the nanosecond, its thread and every field.
    let instants: Vec<&Json> = evs.iter().filter(|e| e["ph"] == "i" && e["cat"] != "ringtrace").collect();
    let events = trace.events();
    assert_eq!(instants.len(), events.len());
    assert_eq!(x.events as usize, events.len());
    for (j, e) in instants.iter().zip(&events) {
        let ts_ns = (j["ts"].as_f64().unwrap() * 1000.0).round() as u64;
        assert_eq!(ts_ns, e.ts_ns);
        assert_eq!(j["tid"].as_u64().unwrap(), u64::from(e.thread.unwrap().tid));
        assert_eq!(j["name"], e.message().unwrap());
        assert_eq!(j["args"]["level"], "INFO");
        for f in &e.fields {
            assert_eq!(j["args"][&*f.name], json_of(&f.value), "field {}", f.name);
        }
    }
    // Every loss, counted where it happened.
    let lost: u64 = evs
        .iter()
        .filter(|e| e["name"] == "ringtrace: events lost")
        .map(|e| e["args"]["count"].as_u64().unwrap())
        .sum();
    assert_eq!(lost + trace.stat("unreported").unwrap_or(0), trace.lost());
    // Thread names, and B/E nesting per thread with matching counts.
    let names: Vec<&str> =
        evs.iter().filter(|e| e["name"] == "thread_name").map(|e| e["args"]["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"w0") && names.contains(&"w1"), "{names:?}");
    let mut depth = std::collections::HashMap::<u64, i64>::new();
    for e in evs {
        let d = depth.entry(e["tid"].as_u64().unwrap()).or_default();
        match e["ph"].as_str().unwrap() {
            "B" => *d += 1,
            "E" => {
                *d -= 1;
                assert!(*d >= 0, "an E without its B");
            }
            _ => {}
        }
    }
    assert!(depth.values().all(|&d| d == 0));
    let begins = evs.iter().filter(|e| e["ph"] == "B").count() as u64;
    assert_eq!(begins, x.slices);
    // The span's fields are the slice's args.
    let outer = evs.iter().find(|e| e["ph"] == "B" && e["name"] == "outer").unwrap();
    assert!(outer["args"]["t"].is_u64() && outer["args"]["round"].is_u64(), "{outer}");
}

#[test]
fn a_flight_recorder_whose_enters_were_overwritten_exports_nested_slices() {
    let dir = TempDir::new("chrome-flight");
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(4096).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || {
        let _long = tracing::info_span!("long").entered();
        for i in 0..2000u64 {
            let _s = tracing::info_span!("short", i).entered();
            tracing::info!(i);
        }
    });
    recorder.dump(dir.join("d.rtt")).unwrap();
    let trace = Trace::open(dir.join("d.rtt")).unwrap();
    let mut out = Vec::new();
    let x = chrome::write(&trace, &mut out).unwrap();
    let v: Json = serde_json::from_slice(&out).unwrap();
    let evs = v["traceEvents"].as_array().unwrap();
    assert!(x.unmatched_exits > 0, "the oldest enters were overwritten: {x:?}");
    let b = evs.iter().filter(|e| e["ph"] == "B").count();
    let e = evs.iter().filter(|e| e["ph"] == "E").count();
    assert_eq!(b, e);
    assert_eq!(x.events as usize, trace.events().len());
}

/// A Perfetto trace read back with the generated message types: per sequence, the
/// interned names resolved, each instant's name, time, thread and annotations.
#[test]
fn perfetto_protobuf_holds_every_event_field_and_loss_with_names_interned_per_thread() {
    let dir = TempDir::new("perfetto");
    let trace = trace_with_spans_events_and_losses(&dir);
    assert_eq!(perfetto_matches(&trace), 2, "one sequence per thread");
}

/// A trace of more records than an export writes in one piece: written by two threads
/// of export, each half of the records on sequences of its own, and still every event
/// as decoded. One thread of writing, so that both halves hold its records whatever the
/// scheduling (the example the test command checks with Perfetto's own classes has
/// four, in halves too).
#[test]
fn a_large_perfetto_export_in_halves_holds_every_event() {
    let dir = TempDir::new("perfetto-halves");
    let (layer, recorder) = Builder::stream(dir.join("s.rtt")).per_thread_bytes(16 << 20).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || {
        for round in 0..800u64 {
            let _s = tracing::info_span!("round", round).entered();
            for seq in 0..100u64 {
                tracing::info!(seq, s = "text", "ev");
            }
        }
    });
    recorder.finish().unwrap();
    let trace = Trace::open(dir.join("s.rtt")).unwrap();
    assert!(trace.len() > 1 << 16, "{} records", trace.len());
    assert_eq!(trace.lost(), 0);
    let sequences = perfetto_matches(&trace);
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        assert_eq!(sequences, 2, "the thread's records on a sequence of each half");
    }
}

/// Exports `trace` to Perfetto and reads it back: every instant as decoded, in time
/// order, every loss, every slice closed. The sequences the packets came on.
fn perfetto_matches(trace: &Trace) -> usize {
    use prost::Message;
    use ringtrace_export::perfetto::{self, proto};

    let mut out = Vec::new();
    let x = perfetto::write(trace, &mut out).unwrap();
    let t = proto::Trace::decode(out.as_slice()).expect("a valid Trace");
    // Track uuid to thread id; each sequence's default track.
    let mut tracks = std::collections::HashMap::new();
    let mut default_track = std::collections::HashMap::new();
    // Per sequence: interned event names, annotation names and annotation string
    // values, `(iid, text)`.
    type Interned = (Vec<(u64, String)>, Vec<(u64, String)>, Vec<(u64, String)>);
    let mut interned: std::collections::HashMap<u32, Interned> = Default::default();
    let mut instants = Vec::new();
    let (mut begins, mut ends, mut lost) = (0u64, 0u64, 0u64);
    for p in &t.packet {
        let Some(proto::trace_packet::OptionalTrustedPacketSequenceId::TrustedPacketSequenceId(seq)) =
            p.optional_trusted_packet_sequence_id
        else {
            panic!("every packet has a sequence")
        };
        match &p.data {
            Some(proto::trace_packet::Data::TrackDescriptor(d)) => {
                if let Some(th) = &d.thread {
                    tracks.insert(d.uuid.unwrap(), th.tid.unwrap() as u32);
                }
            }
            Some(proto::trace_packet::Data::TrackEvent(e)) => {
                let st = interned.entry(seq).or_default();
                if p.sequence_flags.unwrap() & 1 != 0 {
                    *st = Default::default(); // cleared
                }
                if let Some(d) = p.trace_packet_defaults.as_ref().and_then(|d| d.track_event_defaults.as_ref()) {
                    default_track.insert(seq, d.track_uuid.unwrap());
                }
                let track = e.track_uuid.or(default_track.get(&seq).copied()).expect("a track");
                if let Some(i) = &p.interned_data {
                    st.0.extend(i.event_names.iter().map(|n| (n.iid.unwrap(), n.name.clone().unwrap())));
                    st.1.extend(i.debug_annotation_names.iter().map(|n| (n.iid.unwrap(), n.name.clone().unwrap())));
                    st.2.extend(
                        i.debug_annotation_string_values
                            .iter()
                            .map(|s| (s.iid.unwrap(), String::from_utf8(s.str.clone().unwrap()).unwrap())),
                    );
                }
                let look =
                    |table: &Vec<(u64, String)>, iid: u64| table.iter().find(|(i, _)| *i == iid).unwrap().1.clone();
                match e.r#type() {
                    proto::track_event::Type::SliceBegin => begins += 1,
                    proto::track_event::Type::SliceEnd => ends += 1,
                    proto::track_event::Type::Instant => {
                        let Some(proto::track_event::NameField::NameIid(n)) = e.name_field else { panic!() };
                        let name = look(&st.0, n);
                        let args: Vec<(String, proto::debug_annotation::Value)> = e
                            .debug_annotations
                            .iter()
                            .map(|a| {
                                let Some(proto::debug_annotation::NameField::NameIid(i)) = a.name_field else {
                                    panic!()
                                };
                                let value = match a.value.clone().unwrap() {
                                    proto::debug_annotation::Value::StringValueIid(s) => {
                                        proto::debug_annotation::Value::StringValue(look(&st.2, s))
                                    }
                                    v => v,
                                };
                                (look(&st.1, i), value)
                            })
                            .collect();
                        if name == ringtrace_export::LOST_NAME {
                            let Some((_, proto::debug_annotation::Value::UintValue(c))) = args.first() else {
                                panic!()
                            };
                            lost += c;
                        } else {
                            instants.push((p.timestamp.unwrap(), tracks[&track], name, args));
                        }
                    }
                    other => panic!("{other:?}"),
                }
            }
            None => panic!("an empty packet"),
        }
    }
    // Halves interleave; each is in time order, and the first's times are all before
    // the second's: a stable sort by time gives the decoded order.
    instants.sort_by_key(|i| i.0);
    let events = trace.events();
    assert_eq!(instants.len(), events.len());
    assert_eq!(x.events as usize, events.len());
    for ((ts, tid, name, args), e) in instants.iter().zip(&events) {
        assert_eq!(*ts, e.ts_ns, "time exact to the nanosecond");
        assert_eq!(*tid, e.thread.unwrap().tid);
        assert_eq!(name, e.message().unwrap());
        for f in &e.fields {
            let (_, v) = args.iter().find(|(n, _)| *n == f.name).unwrap_or_else(|| panic!("field {}", f.name));
            use proto::debug_annotation::Value as A;
            let expect = match &f.value {
                Value::U64(x) => A::UintValue(*x),
                Value::I64(x) => A::IntValue(*x),
                Value::F64(x) => A::DoubleValue(*x),
                Value::Bool(x) => A::BoolValue(*x),
                Value::U128(x) => A::StringValue(x.to_string()),
                Value::I128(x) => A::StringValue(x.to_string()),
                Value::Str(s) | Value::Debug(s) | Value::Error(s) => A::StringValue(s.clone()),
                Value::Bytes(b) => A::StringValue(hex(b)),
            };
            assert_eq!(*v, expect, "field {}", f.name);
        }
    }
    assert_eq!(lost + trace.stat("unreported").unwrap_or(0), trace.lost());
    assert_eq!((begins, ends), (x.slices, x.slices));
    interned.len()
}

/// A CTF export: every stream file whole packets, back to back, whose sizes add up;
/// the losses in the packets' `events_discarded`; and babeltrace2 reads it all.
#[test]
fn ctf_streams_are_whole_packets_that_count_losses_and_babeltrace2_reads() {
    use ringtrace_export::ctf;

    let dir = TempDir::new("ctf");
    let trace = trace_with_spans_events_and_losses(&dir);
    let out = dir.join("ctf");
    let x = ctf::write(&trace, &out).unwrap();
    assert_eq!(x.events as usize, trace.events().len());
    let metadata = std::fs::read_to_string(out.join("metadata")).unwrap();
    assert!(metadata.starts_with("/* CTF 1.8 */"));
    let u = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let mut discarded = 0;
    let mut streams = 0;
    for f in std::fs::read_dir(&out).unwrap() {
        let f = f.unwrap();
        if !f.file_name().to_string_lossy().starts_with("stream-") {
            continue;
        }
        streams += 1;
        let b = std::fs::read(f.path()).unwrap();
        let (mut at, mut last) = (0, 0);
        while at < b.len() {
            assert_eq!(u32::from_le_bytes(b[at..at + 4].try_into().unwrap()), 0xC1FC_1FC1, "packet magic");
            let (begin, end, content, size) = (u(&b, at + 24), u(&b, at + 32), u(&b, at + 40), u(&b, at + 48));
            assert!(begin <= end);
            assert_eq!(content, size);
            assert_eq!(size % 8, 0);
            last = u(&b, at + 56);
            at += (size / 8) as usize;
        }
        assert_eq!(at, b.len(), "the file is whole packets");
        discarded += last;
    }
    assert_eq!(streams, 2);
    assert_eq!(discarded + trace.stat("unreported").unwrap_or(0), trace.lost());
    // The test command installs babeltrace2 (and requires it); a developer's machine may lack it.
    if ringtrace_fixtures::have_babeltrace2() {
        let o = std::process::Command::new("babeltrace2").arg(&out).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let lines = String::from_utf8(o.stdout).unwrap();
        let events = lines.lines().filter(|l| !l.contains(" ringtrace:span_")).count();
        assert_eq!(events as u64, x.events);
        assert!(String::from_utf8_lossy(&o.stderr).contains("discarded"), "babeltrace2 reports the losses");
    }
}

/// A channel file of raw records (not written by the tracing layer) reads as a trace:
/// each record an event on its slot's track with its length and first bytes.
#[test]
fn a_channel_of_raw_records_exports_each_record_as_an_event_on_its_writers_track() {
    use ringtrace::channel::Channel;
    use ringtrace::clock::Monotonic;
    use ringtrace::config::Discard;
    use ringtrace::Wakeup;

    let dir = TempDir::new("raw");
    let path = dir.join("raw.chan");
    let ch = Channel::<Discard, Monotonic>::builder(4096).max_producers(2).create(&path, Monotonic).unwrap();
    let (mut a, mut b) = (ch.producer().unwrap(), ch.producer().unwrap());
    a.output(b"hello", Wakeup::Default).unwrap();
    b.output(&[0xAB; 40], Wakeup::Default).unwrap();
    a.output(b"", Wakeup::Default).unwrap();
    let trace = Trace::open(&path).unwrap();
    let events = trace.events();
    assert_eq!(events.len(), 3);
    assert!(events.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    assert_eq!(events[0].field("len"), Some(&Value::U64(5)));
    assert_eq!(events[0].field("head"), Some(&Value::Str("68656c6c6f".into())));
    assert_eq!(events[0].thread.unwrap().name, format!("slot {}", a.id()));
    assert_eq!(events[1].field("len"), Some(&Value::U64(40)));
    assert_eq!(events[1].field("head"), Some(&Value::Str("ab".repeat(16))));
    assert!(events[1].fields[1].cut, "the head shows 16 of the 40 bytes");
    assert_eq!(events[2].field("len"), Some(&Value::U64(0)));
    let mut json = Vec::new();
    assert_eq!(chrome::write(&trace, &mut json).unwrap().events, 3);
    let v: Json = serde_json::from_slice(&json).unwrap();
    let instants = v["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "i").count();
    assert_eq!(instants, 3);
    let mut pb = Vec::new();
    assert_eq!(ringtrace_export::perfetto::write(&trace, &mut pb).unwrap().events, 3);
    assert_eq!(ringtrace_export::ctf::write(&trace, &dir.join("ctf")).unwrap().events, 3);
}
