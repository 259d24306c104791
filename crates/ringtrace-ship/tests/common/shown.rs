//! What a trace shows, thread by thread, read back from each format: the host export
//! of a recorder and the fleet export of the same recorder shipped compare through these.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use ringtrace_export::perfetto::proto;

/// What a thread shows, in order: `(kind, name, category, arguments, time ns)`.
pub type Shown = Vec<(String, String, String, String, u64)>;

/// A packet sequence's state as a reader keeps it: its default track, and its interned
/// strings by (kind: event name, category, annotation name, string value; iid).
type Sequence = (Option<u64>, BTreeMap<(u8, u64), String>);

/// A Perfetto trace's tracks by thread name.
pub fn perfetto_threads(bytes: &[u8]) -> BTreeMap<String, Shown> {
    use proto::debug_annotation::{NameField as AName, Value};
    use proto::trace_packet::{Data, OptionalTrustedPacketSequenceId as SeqId};
    use proto::track_event::NameField;
    let trace = proto::Trace::decode(bytes).unwrap();
    let mut names: BTreeMap<u64, String> = BTreeMap::new();
    let mut out: BTreeMap<String, Shown> = BTreeMap::new();
    let mut seqs: BTreeMap<u32, Sequence> = BTreeMap::new();
    for p in trace.packet {
        let Some(SeqId::TrustedPacketSequenceId(seq)) = p.optional_trusted_packet_sequence_id else { panic!() };
        match p.data {
            Some(Data::TrackDescriptor(d)) => {
                if let Some(t) = d.thread {
                    names.insert(d.uuid.unwrap(), t.thread_name.unwrap());
                }
            }
            Some(Data::TrackEvent(ev)) => {
                if p.sequence_flags.unwrap_or(0) & 1 != 0 {
                    seqs.insert(seq, Default::default());
                }
                let st = seqs.entry(seq).or_default();
                if let Some(d) = p.trace_packet_defaults.and_then(|d| d.track_event_defaults) {
                    st.0 = d.track_uuid;
                }
                if let Some(i) = p.interned_data {
                    st.1.extend(i.event_names.into_iter().map(|n| ((0, n.iid.unwrap()), n.name.unwrap())));
                    st.1.extend(i.event_categories.into_iter().map(|n| ((1, n.iid.unwrap()), n.name.unwrap())));
                    st.1.extend(i.debug_annotation_names.into_iter().map(|n| ((2, n.iid.unwrap()), n.name.unwrap())));
                    st.1.extend(
                        i.debug_annotation_string_values
                            .into_iter()
                            .map(|n| ((3, n.iid.unwrap()), String::from_utf8_lossy(&n.str.unwrap()).into_owned())),
                    );
                }
                let name = match ev.name_field {
                    Some(NameField::NameIid(i)) => st.1[&(0, i)].clone(),
                    Some(NameField::Name(n)) => n,
                    None => String::new(),
                };
                let cats: Vec<&str> = ev.category_iids.iter().map(|i| st.1[&(1, *i)].as_str()).collect();
                let args: Vec<String> = (ev.debug_annotations.into_iter())
                    .map(|a| {
                        let key = match a.name_field.unwrap() {
                            AName::NameIid(i) => st.1[&(2, i)].clone(),
                            AName::Name(n) => n,
                        };
                        let v = match a.value.unwrap() {
                            Value::StringValueIid(i) => format!("str {}", st.1[&(3, i)]),
                            Value::DoubleValue(d) => format!("double {:?}", d.to_bits()),
                            other => format!("{other:?}"),
                        };
                        format!("{key}={v}")
                    })
                    .collect();
                let thread = names[&ev.track_uuid.or(st.0).unwrap()].clone();
                let kind = format!("{:?}", ev.r#type);
                out.entry(thread).or_default().push((kind, name, cats.join(","), args.join(" "), p.timestamp.unwrap()));
            }
            _ => {}
        }
    }
    out
}

/// A Chrome trace's events by thread name (its `M` events name them).
pub fn chrome_threads(bytes: &[u8]) -> BTreeMap<String, Shown> {
    let v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let names: BTreeMap<(i64, i64), String> = (events.iter())
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| ((e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap()), e["args"]["name"].as_str().unwrap().into()))
        .collect();
    let mut out: BTreeMap<String, Shown> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] != "M") {
        let thread = names[&(e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap())].clone();
        // `ts` in µs with three decimals: read to the ns.
        let ts = (e["ts"].as_f64().unwrap() * 1000.0).round() as u64;
        let s = |k: &str| e[k].as_str().unwrap_or("").to_owned();
        out.entry(thread).or_default().push((s("ph"), s("name"), s("cat"), e["args"].to_string(), ts));
    }
    out
}

/// A CTF trace's streams as `scripts/ctfread.py` reads them: each stream's events
/// (name and fields), the streams sorted.
pub fn ctf_streams(dir: &Path) -> Vec<Vec<String>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ctfread.py");
    let out = Command::new("python3").arg(script).arg(dir).output().unwrap();
    assert!(out.status.success(), "ctfread: {}", String::from_utf8_lossy(&out.stderr));
    let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // Python's JSON lines (`NaN` and `Infinity` as they are): the stream, then from
    // the name on (the times are the two clocks').
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let stream = line.split('"').nth(3).unwrap().to_owned();
        let from = line.find(r#""name": "#).or_else(|| line.find(r#""lost": "#)).unwrap();
        by.entry(stream).or_default().push(line[from..].to_owned());
    }
    let mut streams: Vec<Vec<String>> = by.into_values().collect();
    streams.sort();
    streams
}

/// Host and fleet agree thread by thread, each fleet time its host time plus `offset`,
/// give or take `slack` ns.
pub fn same(
    host: &BTreeMap<String, Shown>,
    fleet: &BTreeMap<String, Shown>,
    (offset, slack): (i128, u64),
    what: &str,
) -> Result<(), String> {
    let threads = |m: &BTreeMap<String, Shown>| m.keys().cloned().collect::<Vec<_>>();
    if threads(host) != threads(fleet) {
        return Err(format!("{what}: threads {:?} against {:?}", threads(host), threads(fleet)));
    }
    for (thread, h) in host {
        let f = &fleet[thread];
        if h.len() != f.len() {
            return Err(format!("{what} {thread}: {} against {} records:\n{h:?}\nagainst {f:?}", h.len(), f.len()));
        }
        for (i, (a, b)) in h.iter().zip(f).enumerate() {
            if (&a.0, &a.1, &a.2, &a.3) != (&b.0, &b.1, &b.2, &b.3) {
                return Err(format!("{what} {thread} record {i}: {a:?}\nagainst {b:?}"));
            }
            let off = i128::from(b.4) - i128::from(a.4) - offset;
            if off.unsigned_abs() > u128::from(slack) {
                return Err(format!(
                    "{what} {thread} record {i}: time {} + {offset} against {} ({off} ns off)",
                    a.4, b.4
                ));
            }
        }
    }
    Ok(())
}

/// What an OTLP export shows of a recorder, an item each: its spans (name, its
/// parent's name and start, attributes, span events with their attributes), then its
/// log records (but the fleet's `ringtrace.seq`); beside each, its times (a span's
/// start, end and events'). Spans are sorted by what they show, then by start. Ids are
/// left out: they hash the process id, which the agent's objects do not carry.
pub fn otlp_shown(traces: &ExportTraceServiceRequest, logs: &ExportLogsServiceRequest) -> Vec<(String, Vec<u64>)> {
    let spans: Vec<&Span> = traces.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans).collect();
    let records: Vec<_> = logs.resource_logs.iter().flat_map(|r| &r.scope_logs).flat_map(|s| &s.log_records).collect();
    let attrs = |a: &[KeyValue]| {
        let kept: Vec<_> = a.iter().filter(|a| a.key != "ringtrace.seq").map(|a| (&a.key, &a.value)).collect();
        format!("{kept:?}")
    };
    let by_id: HashMap<&[u8], &Span> = spans.iter().map(|s| (s.span_id.as_slice(), *s)).collect();
    let mut shown: Vec<(String, Vec<u64>)> = spans
        .iter()
        .map(|s| {
            let events: Vec<_> =
                s.events.iter().map(|e| (&e.name, attrs(&e.attributes), e.dropped_attributes_count)).collect();
            let parent = by_id.get(s.parent_span_id.as_slice()).map(|p| (&p.name, attrs(&p.attributes)));
            let text = format!(
                "span {:?} parent {parent:?} {} {events:?} links {}",
                s.name,
                attrs(&s.attributes),
                s.links.len()
            );
            let mut times = vec![s.start_time_unix_nano, s.end_time_unix_nano];
            times.extend(s.events.iter().map(|e| e.time_unix_nano));
            (text, times)
        })
        .collect();
    shown.sort();
    shown.extend(records.iter().map(|r| {
        let body = r.body.as_ref().map(|b| &b.value);
        (
            format!("log {} {body:?} {} {}", r.severity_number, attrs(&r.attributes), r.dropped_attributes_count),
            vec![r.time_unix_nano],
        )
    }));
    shown
}

/// Host and fleet OTLP exports show the same items ([`otlp_shown`]), each fleet time
/// its host time plus `offset`, give or take `slack` ns.
pub fn same_otlp(
    host: &[(String, Vec<u64>)],
    fleet: &[(String, Vec<u64>)],
    (offset, slack): (i128, u64),
) -> Result<(), String> {
    if host.len() != fleet.len() {
        return Err(format!("otlp: {} items against {}", host.len(), fleet.len()));
    }
    for (i, (h, f)) in host.iter().zip(fleet).enumerate() {
        if h.0 != f.0 || h.1.len() != f.1.len() {
            return Err(format!("otlp item {i}: {h:?}\nagainst {f:?}"));
        }
        for (a, b) in h.1.iter().zip(&f.1) {
            let off = i128::from(*b) - i128::from(*a) - offset;
            if off.unsigned_abs() > u128::from(slack) {
                return Err(format!("otlp item {i} ({}): time {a} + {offset} against {b} ({off} ns off)", h.0));
            }
        }
    }
    Ok(())
}
