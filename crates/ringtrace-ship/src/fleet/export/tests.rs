//! The exports read back: Perfetto with the prost types, Chrome with serde_json, CTF
//! with babeltrace2 (where installed), each against the entries given.

use std::collections::{BTreeMap, HashMap as Map};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use proptest::prelude::*;
use prost::Message;
use ringtrace_export::perfetto::proto;

use super::payload::{text_of, Head};
use super::*;
use crate::fleet::Timeline;
use crate::frame::{BatchWriter, TimeSource};

/// A fleet to make: each (host, source) and its records' (time, payload).
type Spec = Vec<(String, String, Vec<(u64, Vec<u8>)>)>;

/// The fleet of `spec`, each source cut into batches of up to 5 records (a source
/// without records has one empty batch: the fleet lists it, with no entry).
fn fleet_of(spec: &Spec) -> Fleet {
    let mut t = Timeline::new();
    for (host, source, recs) in spec {
        let mut seq = 0;
        for chunk in recs.chunks(5).chain(recs.is_empty().then_some(&[][..])) {
            let mut w = BatchWriter::new(host, source, seq, TimeSource::Drained, 0).unwrap();
            for (time, payload) in chunk {
                w.push(*time, payload).unwrap();
            }
            t.push(&w.finish()).unwrap();
            seq += chunk.len() as u64;
        }
    }
    t.finish()
}

/// A record as an export should show it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shown {
    pid: i64,
    tid: i64,
    host: String,
    source: String,
    seq: u64,
    time_ns: u64,
    len: u64,
    head: String,
    text: Option<String>,
}

/// The pids and tids the module docs promise: hosts 1.. in the fleet's order, then
/// sources after them.
fn numbers(fleet: &Fleet) -> (Map<String, i64>, Map<(String, String), i64>) {
    let mut pids = Map::new();
    for (h, _) in fleet.sources() {
        let n = pids.len() as i64 + 1;
        pids.entry(h.to_owned()).or_insert(n);
    }
    let hosts = pids.len() as i64;
    let tids = fleet.sources().enumerate().map(|(i, (h, s))| ((h.to_owned(), s.to_owned()), hosts + 1 + i as i64));
    (pids, tids.collect())
}

fn expected(fleet: &Fleet, entries: &[Entry<'_>]) -> Vec<Shown> {
    let (pids, tids) = numbers(fleet);
    entries
        .iter()
        .map(|e| {
            let hex: String = e.payload.iter().take(16).map(|b| format!("{b:02x}")).collect();
            Shown {
                pid: pids[e.host],
                tid: tids[&(e.host.to_owned(), e.source.to_owned())],
                host: e.host.to_owned(),
                source: e.source.to_owned(),
                seq: e.seq,
                time_ns: e.time_ns,
                len: e.payload.len() as u64,
                head: hex,
                text: model_text(e.payload),
            }
        })
        .collect()
}

/// The `text` rule of the module docs, written another way.
fn model_text(p: &[u8]) -> Option<String> {
    let mut p = p;
    if p.last() == Some(&b'\n') {
        p = &p[..p.len() - 1];
        if p.last() == Some(&b'\r') {
            p = &p[..p.len() - 1];
        }
    }
    let s = String::from_utf8(p.to_vec()).ok()?;
    if s.is_empty() || s.chars().any(|c| c.is_control() && c != '\t') {
        return None;
    }
    Some(s.chars().take(64).collect())
}

/// Processes as `(pid, name)`.
type Procs = Vec<(i64, String)>;
/// Threads as `(pid, tid, name)`.
type Threads = Vec<(i64, i64, String)>;
/// Chrome metadata events as `(name, pid, tid, args)`.
type Meta = Vec<(String, i64, i64, serde_json::Value)>;

/// What a Perfetto trace holds: process descriptors `(pid, name)`, thread descriptors
/// `(pid, tid, name)`, and the instants, resolved through their sequences.
#[derive(Debug, Default)]
struct PerfettoRead {
    processes: Procs,
    threads: Threads,
    instants: Vec<Shown>,
}

/// A sequence's incremental state, as a reader keeps it.
#[derive(Default)]
struct SeqState {
    track: Option<u64>,
    names: Map<u64, String>,
    categories: Map<u64, String>,
    fields: Map<u64, String>,
}

fn read_perfetto(bytes: &[u8]) -> Result<PerfettoRead, TestCaseError> {
    use proto::debug_annotation::{NameField as AName, Value};
    use proto::trace_packet::{Data, OptionalTrustedPacketSequenceId as SeqId};
    use proto::track_event::NameField;

    let trace = proto::Trace::decode(bytes).map_err(|e| TestCaseError::fail(format!("not a Trace: {e}")))?;
    let mut r = PerfettoRead::default();
    let mut process_by_uuid: Map<u64, (i64, String)> = Map::new();
    let mut thread_by_uuid: Map<u64, (i64, i64, String)> = Map::new();
    let mut seqs: Map<u32, SeqState> = Map::new();
    for p in trace.packet {
        let Some(SeqId::TrustedPacketSequenceId(seq_id)) = p.optional_trusted_packet_sequence_id else {
            return Err(TestCaseError::fail("a packet without a sequence"));
        };
        match p.data {
            Some(Data::TrackDescriptor(d)) => {
                prop_assert_eq!(seq_id, 1);
                let uuid = d.uuid.unwrap();
                if let Some(pd) = d.process {
                    let (pid, name) = (i64::from(pd.pid.unwrap()), pd.process_name.unwrap());
                    prop_assert_eq!(d.name.as_ref(), Some(&name));
                    prop_assert!(process_by_uuid.insert(uuid, (pid, name.clone())).is_none());
                    r.processes.push((pid, name));
                } else if let Some(td) = d.thread {
                    let (pid, tid, name) =
                        (i64::from(td.pid.unwrap()), i64::from(td.tid.unwrap()), td.thread_name.unwrap());
                    let parent = process_by_uuid.get(&d.parent_uuid.unwrap());
                    prop_assert_eq!(parent.map(|p| p.0), Some(pid), "a thread after its process, under it");
                    prop_assert!(thread_by_uuid.insert(uuid, (pid, tid, name.clone())).is_none());
                    r.threads.push((pid, tid, name));
                } else {
                    return Err(TestCaseError::fail("a descriptor of neither a process nor a thread"));
                }
            }
            Some(Data::TrackEvent(ev)) => {
                let flags = p.sequence_flags.unwrap_or(0);
                if flags & 1 != 0 {
                    seqs.insert(seq_id, SeqState::default());
                }
                prop_assert!(flags & 2 != 0, "events use the sequence's interned state");
                let Some(st) = seqs.get_mut(&seq_id) else {
                    return Err(TestCaseError::fail("a sequence used before it was cleared"));
                };
                if let Some(d) = p.trace_packet_defaults.and_then(|d| d.track_event_defaults) {
                    st.track = d.track_uuid;
                }
                if let Some(i) = p.interned_data {
                    st.names.extend(i.event_names.into_iter().map(|n| (n.iid.unwrap(), n.name.unwrap())));
                    st.categories.extend(i.event_categories.into_iter().map(|n| (n.iid.unwrap(), n.name.unwrap())));
                    st.fields.extend(i.debug_annotation_names.into_iter().map(|n| (n.iid.unwrap(), n.name.unwrap())));
                }
                prop_assert_eq!(ev.r#type, Some(proto::track_event::Type::Instant as i32));
                let name = match ev.name_field {
                    Some(NameField::NameIid(iid)) => st.names[&iid].clone(),
                    Some(NameField::Name(n)) => n,
                    None => String::new(),
                };
                prop_assert_eq!(name, "record");
                let cats: Vec<&String> = ev.category_iids.iter().map(|i| &st.categories[i]).collect();
                prop_assert_eq!(cats, vec!["ringtrace"]);
                let track = ev.track_uuid.or(st.track).unwrap();
                let Some((pid, tid, source)) = thread_by_uuid.get(&track).cloned() else {
                    return Err(TestCaseError::fail("an event on a track not described before it"));
                };
                let host = process_by_uuid.values().find(|p| p.0 == pid).unwrap().1.clone();
                let mut shown = Shown {
                    pid,
                    tid,
                    host,
                    source,
                    seq: u64::MAX,
                    time_ns: p.timestamp.unwrap(),
                    len: u64::MAX,
                    head: "?".into(),
                    text: None,
                };
                for a in ev.debug_annotations {
                    let key = match a.name_field.unwrap() {
                        AName::NameIid(iid) => st.fields[&iid].clone(),
                        AName::Name(n) => n,
                    };
                    match (key.as_str(), a.value.unwrap()) {
                        ("seq", Value::UintValue(v)) => shown.seq = v,
                        ("len", Value::UintValue(v)) => shown.len = v,
                        ("head", Value::StringValue(v)) => shown.head = v,
                        ("text", Value::StringValue(v)) => shown.text = Some(v),
                        (k, v) => return Err(TestCaseError::fail(format!("annotation {k}: {v:?}"))),
                    }
                }
                r.instants.push(shown);
            }
            other => return Err(TestCaseError::fail(format!("unexpected packet data {other:?}"))),
        }
    }
    Ok(r)
}

/// The processes and threads that should be described: those with entries, once each.
fn described(want: &[Shown]) -> (Procs, Threads) {
    let mut procs = BTreeMap::new();
    let mut threads = BTreeMap::new();
    for w in want {
        procs.insert(w.pid, w.host.clone());
        threads.insert((w.pid, w.tid), w.source.clone());
    }
    (procs.into_iter().collect(), threads.into_iter().map(|((p, t), n)| (p, t, n)).collect())
}

fn check_perfetto(fleet: &Fleet, entries: &[Entry<'_>]) -> Result<(), TestCaseError> {
    let want = expected(fleet, entries);
    let mut out = Vec::new();
    let x = perfetto(fleet, entries.iter().copied(), &mut out).unwrap();
    let mut r = read_perfetto(&out)?;
    let (procs, threads) = described(&want);
    prop_assert_eq!(
        x,
        Exported { records: want.len() as u64, events: 0, hosts: procs.len() as u32, sources: threads.len() as u32 }
    );
    r.processes.sort();
    r.threads.sort();
    prop_assert_eq!(r.processes, procs);
    prop_assert_eq!(r.threads, threads);
    prop_assert_eq!(r.instants, want);
    Ok(())
}

/// The Chrome output's events: metadata `(name, pid, tid, args)` and instants.
fn read_chrome(bytes: &[u8]) -> Result<(Meta, Vec<Shown>), TestCaseError> {
    let v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| TestCaseError::fail(format!("not JSON: {e}")))?;
    let events = v["traceEvents"].as_array().unwrap();
    let mut meta = Vec::new();
    let mut names: Map<i64, String> = Map::new();
    let mut thread_names: Map<i64, String> = Map::new();
    let mut instants = Vec::new();
    // `ts` as written: one event a line, so each instant's line has its exact text.
    let text = std::str::from_utf8(bytes).unwrap();
    let mut ts_texts = text.lines().filter(|l| l.starts_with(r#"{"ph":"i""#)).map(|l| {
        let at = l.find(r#""ts":"#).unwrap() + 5;
        l[at..at + l[at..].find(',').unwrap()].to_owned()
    });
    for e in events {
        let (pid, tid) = (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap());
        match e["ph"].as_str().unwrap() {
            "M" => {
                let name = e["name"].as_str().unwrap().to_owned();
                prop_assert!(e.get("ts").is_none());
                if name == "process_name" {
                    names.insert(pid, e["args"]["name"].as_str().unwrap().to_owned());
                }
                if name == "thread_name" {
                    thread_names.insert(tid, e["args"]["name"].as_str().unwrap().to_owned());
                }
                meta.push((name, pid, tid, e["args"].clone()));
            }
            "i" => {
                prop_assert_eq!(&e["s"], "t");
                prop_assert_eq!(&e["name"], "record");
                prop_assert_eq!(&e["cat"], "ringtrace");
                let a = &e["args"];
                let ts = ts_texts.next().unwrap();
                let (us, frac) = ts.split_once('.').unwrap();
                prop_assert_eq!(frac.len(), 3);
                let time_ns = us.parse::<u64>().unwrap() * 1000 + frac.parse::<u64>().unwrap();
                // The parsed number agrees with the text (to a double's precision).
                let f = e["ts"].as_f64().unwrap();
                prop_assert!((f * 1000.0 - time_ns as f64).abs() <= 1e-15 * f * 1000.0 + 1.0);
                prop_assert_eq!(a.as_object().unwrap().len(), if a.get("text").is_some() { 4 } else { 3 });
                instants.push(Shown {
                    pid,
                    tid,
                    host: names.get(&pid).cloned().unwrap_or_default(),
                    source: thread_names.get(&tid).cloned().unwrap_or_default(),
                    seq: a["seq"].as_u64().unwrap(),
                    time_ns,
                    len: a["len"].as_u64().unwrap(),
                    head: a["head"].as_str().unwrap().to_owned(),
                    text: a.get("text").map(|t| t.as_str().unwrap().to_owned()),
                });
            }
            ph => return Err(TestCaseError::fail(format!("unexpected ph {ph}"))),
        }
    }
    Ok((meta, instants))
}

fn check_chrome(fleet: &Fleet, entries: &[Entry<'_>]) -> Result<(), TestCaseError> {
    let want = expected(fleet, entries);
    let mut out = Vec::new();
    let x = chrome(fleet, entries.iter().copied(), &mut out).unwrap();
    let (meta, instants) = read_chrome(&out)?;
    let (procs, threads) = described(&want);
    prop_assert_eq!(
        x,
        Exported { records: want.len() as u64, events: 0, hosts: procs.len() as u32, sources: threads.len() as u32 }
    );
    let mut got_procs: Procs = (meta.iter().filter(|m| m.0 == "process_name"))
        .map(|m| (m.1, m.3["name"].as_str().unwrap().to_owned()))
        .collect();
    let mut got_threads: Threads = (meta.iter().filter(|m| m.0 == "thread_name"))
        .map(|m| (m.1, m.2, m.3["name"].as_str().unwrap().to_owned()))
        .collect();
    got_procs.sort();
    got_threads.sort();
    prop_assert_eq!(got_procs, procs);
    prop_assert_eq!(got_threads, threads);
    // Names are given before they are used, so each instant found its own.
    prop_assert_eq!(instants, want);
    Ok(())
}

/// A directory path under the temporary directory (not made), removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        TempDir(std::env::temp_dir().join(format!("ringtrace-export-{what}-{}-{n}", std::process::id())))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `babeltrace2 DIR`'s output, or `None` where babeltrace2 does not run (after
/// `have_babeltrace2`, which fails the test instead where `RINGTRACE_REQUIRE` lists it).
fn babeltrace(dir: &Path) -> Option<String> {
    if !ringtrace_fixtures::have_babeltrace2() {
        return None;
    }
    let out = Command::new("babeltrace2").arg(dir).output().unwrap();
    assert!(out.status.success(), "babeltrace2 {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8(out.stdout).unwrap())
}

/// A field `name = VALUE` of a babeltrace2 line (an integer).
fn field(line: &str, name: &str) -> Option<u64> {
    let at = line.find(&format!(" {name} = "))? + name.len() + 4;
    line[at..].split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

fn check_ctf(fleet: &Fleet, entries: &[Entry<'_>]) -> Result<(), TestCaseError> {
    let want = expected(fleet, entries);
    let tmp = TempDir::new("ctf");
    let dir = &tmp.0;
    let x = ctf(fleet, entries.iter().copied(), dir).unwrap();
    let (procs, threads) = described(&want);
    prop_assert_eq!(
        x,
        Exported { records: want.len() as u64, events: 0, hosts: procs.len() as u32, sources: threads.len() as u32 }
    );
    prop_assert!(dir.join("metadata").is_file());
    let mut files: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|f| f.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    let mut want_files: Vec<String> = threads.iter().map(|(p, t, _)| format!("stream-{p}-{t}")).collect();
    want_files.push("metadata".into());
    want_files.sort();
    prop_assert_eq!(files, want_files);
    if let Some(text) = babeltrace(dir) {
        let lines: Vec<&str> = text.lines().collect();
        prop_assert_eq!(lines.len(), want.len(), "one line per record:\n{}", text);
        // Each record once, by (tid, seq), with its own time and length.
        let mut got: Vec<(u64, u64, u64, u64)> = lines
            .iter()
            .map(|l| {
                (
                    field(l, "tid").unwrap(),
                    field(l, "seq").unwrap(),
                    field(l, "time_ns").unwrap(),
                    field(l, "len").unwrap(),
                )
            })
            .collect();
        let mut model: Vec<(u64, u64, u64, u64)> =
            want.iter().map(|w| (w.tid as u64, w.seq, w.time_ns, w.len)).collect();
        got.sort_unstable();
        model.sort_unstable();
        prop_assert_eq!(got, model);
        for l in &lines {
            prop_assert!(l.contains("ringtrace:record"), "{}", l);
        }
    }
    Ok(())
}

/// Host names, some needing escapes in JSON and TSDL.
const HOSTS: [&str; 5] = ["alpha", "b\"eta\\", "γ-host", "delta.example.com", "e\u{1}psilon"];
/// Source paths.
const SOURCES: [&str; 4] = ["/run/app.ring", "/var/lib/x y.ring", "/tmp/\"q\".ring", "/run/ü/é.ring"];

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        proptest::collection::vec(any::<u8>(), 0..48),
        "[ -~]{1,100}".prop_map(String::into_bytes),
        "\\PC{1,80}(\r?\n)?".prop_map(String::into_bytes),
        "[a-c\t\r\n\u{0}\u{7f}]{1,8}".prop_map(String::into_bytes),
        Just(vec![0xff, 0xfe, b'a']),
        Just("é".as_bytes()[..1].to_vec()),
    ]
}

/// A fleet drawn at random: 1 to 4 hosts of 1 to 3 sources, each with 0 to 14
/// records at times near `base` (in any order within a source: a source's times may
/// step back).
fn spec() -> impl Strategy<Value = Spec> {
    let source = proptest::collection::vec((0u64..5_000_000, payload()), 0..15);
    let host = (proptest::sample::subsequence(SOURCES.to_vec(), 1..=3), proptest::collection::vec(source, 3));
    let base = prop_oneof![Just(0u64), Just(1_700_000_000_123_456_789u64), Just(u64::MAX - 5_000_000)];
    (proptest::sample::subsequence(HOSTS.to_vec(), 1..=4), proptest::collection::vec(host, 4), base).prop_map(
        |(hosts, per_host, base)| {
            let mut spec = Spec::new();
            for (h, (sources, recs)) in hosts.iter().zip(per_host) {
                for (s, recs) in sources.iter().zip(recs) {
                    let recs = recs.into_iter().map(|(t, p)| (base + t, p)).collect();
                    spec.push(((*h).to_owned(), (*s).to_owned(), recs));
                }
            }
            spec
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Perfetto and Chrome: the whole timeline, or a window of it (some sources, even
    /// hosts, then have no entry and no track).
    #[test]
    fn perfetto_and_chrome_show_every_entry_on_its_track(spec in spec(), window in any::<(u64, u64)>()) {
        let fleet = fleet_of(&spec);
        let all: Vec<Entry<'_>> = fleet.timeline().collect();
        let (lo, hi) = (window.0.min(window.1), window.0.max(window.1));
        let (lo, hi) = (lo % 5_000_000, hi % 5_000_000);
        let some: Vec<Entry<'_>> = all.iter().copied().filter(|e| (lo..=hi).contains(&(e.time_ns % 5_000_000))).collect();
        for entries in [&all, &some] {
            check_perfetto(&fleet, entries)?;
            check_chrome(&fleet, entries)?;
        }
    }
}

proptest! {
    // Each case runs babeltrace2.
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn ctf_holds_every_entry_and_babeltrace2_reads_it(spec in spec()) {
        let fleet = fleet_of(&spec);
        let all: Vec<Entry<'_>> = fleet.timeline().collect();
        check_ctf(&fleet, &all)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Each source's sequence interns the event name, the category and the four
    /// annotation names once, each in the first packet that uses it; a packet that
    /// interns nothing carries no `InternedData`, and only a sequence's first sets its
    /// track. The sequences are 2, 3, ... in the order of the sources' first records.
    #[test]
    fn each_sequence_interns_its_names_once(spec in spec()) {
        use proto::debug_annotation::NameField::NameIid;
        use proto::trace_packet::{Data, OptionalTrustedPacketSequenceId as SeqId};

        let fleet = fleet_of(&spec);
        let mut out = Vec::new();
        perfetto(&fleet, fleet.timeline(), &mut out).unwrap();
        let trace = proto::Trace::decode(&out[..]).unwrap();
        let mut interned: Map<u32, Vec<String>> = Map::new();
        let mut order = Vec::new();
        for p in trace.packet {
            let Some(SeqId::TrustedPacketSequenceId(seq)) = p.optional_trusted_packet_sequence_id else {
                return Err(TestCaseError::fail("a packet without a sequence"));
            };
            let Some(Data::TrackEvent(ev)) = p.data else { continue };
            let first = !interned.contains_key(&seq);
            if first {
                order.push(seq);
            }
            prop_assert_eq!(p.sequence_flags, Some(if first { 3 } else { 2 }));
            prop_assert_eq!(p.trace_packet_defaults.is_some(), first);
            let names = interned.entry(seq).or_default();
            let new: Vec<String> = p.interned_data.iter().flat_map(|i| {
                let names = i.event_names.iter().map(|n| format!("name {}", n.name.clone().unwrap()));
                let cats = i.event_categories.iter().map(|n| format!("category {}", n.name.clone().unwrap()));
                let fields = i.debug_annotation_names.iter().map(|n| format!("field {}", n.name.clone().unwrap()));
                names.chain(cats).chain(fields).collect::<Vec<_>>()
            }).collect();
            prop_assert!(p.interned_data.as_ref().is_none_or(|i| *i != proto::InternedData::default()));
            for n in new {
                prop_assert!(!names.contains(&n), "{} interned twice on sequence {}", n, seq);
                names.push(n);
            }
            let by_iid = |a: &proto::DebugAnnotation| matches!(a.name_field, Some(NameIid(_)));
            prop_assert!(ev.debug_annotations.iter().all(by_iid), "every annotation name interned");
        }
        let want: Vec<u32> = (2..).take(order.len()).collect();
        prop_assert_eq!(order, want);
        for names in interned.values() {
            let mut names = names.clone();
            names.sort();
            let mut want = vec!["category ringtrace", "field head", "field len", "field seq", "name record"];
            if names.iter().any(|n| n == "field text") {
                want.insert(2, "field text");
                want.sort();
            }
            prop_assert_eq!(names, want);
        }
    }
}

fn small_fleet() -> Fleet {
    fleet_of(&vec![
        ("web-1".into(), "/run/a.ring".into(), vec![(1_700_000_000_000_001_000, b"GET /x\n".to_vec())]),
        ("db-1".into(), "/run/b.ring".into(), vec![(1_700_000_000_000_002_500, vec![0, 159, 146, 150])]),
    ])
}

#[test]
fn an_empty_window_is_a_valid_empty_trace() {
    let fleet = small_fleet();
    let none = std::iter::empty::<Entry<'_>>;
    let zero = Exported { records: 0, events: 0, hosts: 0, sources: 0 };

    let mut out = Vec::new();
    assert_eq!(perfetto(&fleet, none(), &mut out).unwrap(), zero);
    assert_eq!(proto::Trace::decode(&out[..]).unwrap().packet.len(), 0);

    let mut out = Vec::new();
    assert_eq!(chrome(&fleet, none(), &mut out).unwrap(), zero);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["traceEvents"].as_array().unwrap().len(), 0);

    // An empty fleet too.
    let empty = Timeline::new().finish();
    let mut out = Vec::new();
    assert_eq!(chrome(&empty, empty.timeline(), &mut out).unwrap(), zero);
    serde_json::from_slice::<serde_json::Value>(&out).unwrap();

    let tmp = TempDir::new("empty");
    let dir = &tmp.0;
    assert_eq!(ctf(&fleet, none(), dir).unwrap(), zero);
    let names: Vec<_> = std::fs::read_dir(dir).unwrap().map(|f| f.unwrap().file_name()).collect();
    assert_eq!(names, ["metadata"]);
    if let Some(text) = babeltrace(dir) {
        assert_eq!(text, "");
    }
}

#[test]
fn a_small_fleet_reads_as_expected() {
    let fleet = small_fleet();
    // Sorted by host: db-1 is pid 1, web-1 pid 2; their sources tids 3 and 4.
    let mut out = Vec::new();
    chrome(&fleet, fleet.timeline(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains(r#"{"ph":"M","name":"process_name","pid":2,"tid":4,"args":{"name":"web-1"}}"#), "{text}");
    assert!(text.contains(
        r#"{"ph":"i","s":"t","name":"record","cat":"ringtrace","ts":1700000000000001.000,"pid":2,"tid":4,"args":{"seq":0,"len":7,"head":"474554202f780a","text":"GET /x"}}"#
    ), "{text}");
    assert!(
        text.contains(r#""ts":1700000000000002.500,"pid":1,"tid":3,"args":{"seq":0,"len":4,"head":"009f9296"}}"#),
        "{text}"
    );
    let tmp = TempDir::new("small");
    let dir = &tmp.0;
    ctf(&fleet, fleet.timeline(), dir).unwrap();
    let meta = std::fs::read_to_string(dir.join("metadata")).unwrap();
    assert!(meta.contains("host_1 = \"db-1\";") && meta.contains("host_2 = \"web-1\";"), "{meta}");
    if let Some(text) = babeltrace(dir) {
        eprintln!("{text}");
        assert_eq!(text.lines().count(), 2);
        assert!(text.contains("GET /x") && text.contains("web-1") && text.contains("/run/b.ring"), "{text}");
    }
    // Written twice into one directory: refused, not mixed.
    assert_eq!(ctf(&fleet, fleet.timeline(), dir).unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
}

#[test]
fn text_is_shown_only_for_printable_utf8() {
    assert_eq!(text_of(b""), None);
    assert_eq!(text_of(b"\n"), None);
    assert_eq!(text_of(b"ok\r\n"), Some("ok"));
    assert_eq!(text_of(b"a\tb\n"), Some("a\tb"));
    assert_eq!(text_of(b"a\nb"), None);
    assert_eq!(text_of(b"a\0"), None);
    assert_eq!(text_of(b"\xff"), None);
    assert_eq!(text_of("é".repeat(100).as_bytes()), Some("é".repeat(64).as_str()));
    assert_eq!(Head::of(&[0xab; 40]).as_str(), "ab".repeat(16));
    assert_eq!(Head::of(b"").as_str(), "");
}

#[test]
fn huge_and_foreign_entries_export() {
    let fleet = small_fleet();
    // A 4 MiB payload, and an entry of a host and source the fleet does not have:
    // the next numbers after the fleet's (pids 1, 2, tids 3, 4).
    let big = vec![0xffu8; 4 << 20];
    let text = "x".repeat(5 << 20);
    let entries = [
        Entry { host: "db-1", source: "/run/b.ring", seq: 7, time_ns: 5, payload: &big },
        Entry { host: "other", source: "/s", seq: 0, time_ns: 6, payload: text.as_bytes() },
        Entry { host: "db-1", source: "/new", seq: 1, time_ns: 4, payload: b"" },
    ];
    let want = Exported { records: 3, events: 0, hosts: 2, sources: 3 };
    let mut out = Vec::new();
    assert_eq!(perfetto(&fleet, entries, &mut out).unwrap(), want);
    let r = read_perfetto(&out).unwrap();
    assert_eq!(r.processes, [(1, "db-1".to_owned()), (5, "other".to_owned())]);
    assert_eq!(r.threads, [(1, 3, "/run/b.ring".to_owned()), (5, 6, "/s".to_owned()), (1, 7, "/new".to_owned())]);
    assert_eq!(r.instants[1].text.as_deref(), Some(&text[..64]));
    assert!(out.len() < 1000);
    let mut out = Vec::new();
    assert_eq!(chrome(&fleet, entries, &mut out).unwrap(), want);
    assert!(out.len() < 2000);
    let tmp = TempDir::new("huge");
    let dir = &tmp.0;
    assert_eq!(ctf(&fleet, entries, dir).unwrap(), want);
    if let Some(text) = babeltrace(dir) {
        assert_eq!(text.lines().count(), 3);
    }
}

/// How fast the Perfetto export is: 1,000,000 records of 64 bytes from 4 hosts of 3
/// sources each, merged from the fleet and written to `io::sink()`. Run with
/// `cargo test --release -p ringtrace-ship --lib export::tests::throughput -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: run in release"]
fn throughput() {
    let per_source = 1_000_000 / 12 + 1;
    let mut t = Timeline::new();
    for h in 0..4u64 {
        for s in 0..3u64 {
            let (host, source) = (format!("host-{h}"), format!("/run/ring-{s}.ring"));
            let mut seq = 0;
            while seq < per_source {
                let mut w = BatchWriter::new(&host, &source, seq, TimeSource::Drained, 0).unwrap();
                for i in seq..(seq + 1000).min(per_source) {
                    let mut p = [b'x'; 64];
                    p[..8].copy_from_slice(&i.to_le_bytes());
                    w.push(1_700_000_000_000_000_000 + i * 997 + h * 13 + s * 7, &p).unwrap();
                }
                seq = w.next_seq();
                t.push(&w.finish()).unwrap();
            }
        }
    }
    let fleet = t.finish();
    let n = 1_000_000;
    for round in 0..3 {
        let start = std::time::Instant::now();
        let mut sink = std::io::sink();
        let x = perfetto(&fleet, fleet.timeline().take(n), &mut sink).unwrap();
        let secs = start.elapsed().as_secs_f64();
        let mut bytes = Vec::new();
        perfetto(&fleet, fleet.timeline().take(n), &mut bytes).unwrap();
        eprintln!(
            "round {round}: {} records in {:.3} s: {:.2} M records/s ({} bytes, {:.1} a record)",
            x.records,
            secs,
            x.records as f64 / secs / 1e6,
            bytes.len(),
            bytes.len() as f64 / x.records as f64
        );
        let start = std::time::Instant::now();
        let merged = fleet.timeline().take(n).count();
        eprintln!("  the merge alone: {merged} entries in {:.3} s", start.elapsed().as_secs_f64());
    }
}
