//! The writer's packets: encoded by hand, the same bytes as prost's encoding of the
//! message built with its types ([`Reference`]); and read back, the records given.

use std::collections::HashMap as Map;

use proptest::prelude::*;
use prost::Message;

use super::encode::Hand;
use super::proto;
use super::reference::Reference;
use super::writer::{process_uuid, thread_uuid, Core};
use crate::record::{Annotations, Plain, Record, Typed};
use crate::LOST_NAME;

/// Names that live as long as the program: found again by address.
const KEPT: [&str; 6] = ["record", "ringtrace", "level", "seq", "", "a.b::c"];

/// A value as drawn.
#[derive(Clone, Debug)]
enum V {
    Uint(u64),
    Int(i64),
    Double(f64),
    Bool(bool),
    Str(String),
    Interned(String),
}

/// A name as drawn: one of [`KEPT`], or made.
#[derive(Clone, Debug)]
enum N {
    Kept(usize),
    Made(String),
}

impl N {
    fn get(&self) -> &str {
        match self {
            N::Kept(i) => KEPT[*i],
            N::Made(s) => s,
        }
    }
}

#[derive(Clone, Debug)]
struct Args(Vec<(N, V)>);

impl Annotations for Args {
    fn annotate<F: FnMut(&str, Typed<'_>)>(&self, f: &mut F) {
        for (n, v) in &self.0 {
            f(
                n.get(),
                match v {
                    V::Uint(x) => Typed::Uint(*x),
                    V::Int(x) => Typed::Int(*x),
                    V::Double(x) => Typed::Double(*x),
                    V::Bool(x) => Typed::Bool(*x),
                    V::Str(s) => Typed::Str(s),
                    V::Interned(s) => Typed::Interned(s),
                },
            );
        }
    }
}

/// A record as drawn: `kind` 0 instant, 1 slice begun, 2 slice ended, 3 events lost,
/// 4 thread described, 5 process described.
#[derive(Clone, Debug)]
struct Op {
    kind: u8,
    ts: u64,
    pid: u32,
    tid: u64,
    name: N,
    category: N,
    args: Args,
}

impl Op {
    fn put<E: super::encode::Encode>(&self, core: &mut Core<E>, out: &mut Vec<u8>) {
        let (ts_ns, pid, tid, name, category) = (self.ts, self.pid, self.tid, self.name.get(), self.category.get());
        let args = &self.args;
        let r = match self.kind {
            0 => Record::Instant { ts_ns, pid, tid, name, category, args },
            1 => Record::Begin { ts_ns, pid, tid, span: 1, name, category, args },
            2 => Plain::End { ts_ns, pid, tid, span: None, unfinished: false }.with(args),
            3 => Plain::Lost { ts_ns, pid, tid, count: ts_ns }.with(args),
            4 => Plain::Thread { pid, tid, name, sort_index: None, category: None }.with(args),
            _ => Plain::Process { pid, tid, name, sort_index: None, category: None }.with(args),
        };
        core.put(&r, out).unwrap();
    }
}

trait With<'a> {
    fn with<A>(self, a: A) -> Record<'a, A>;
}

/// A record without arguments, as one of another type (the arguments unused).
impl<'a> With<'a> for Plain<'a> {
    fn with<A>(self, _: A) -> Record<'a, A> {
        match self {
            Record::End { ts_ns, pid, tid, span, unfinished } => Record::End { ts_ns, pid, tid, span, unfinished },
            Record::Lost { ts_ns, pid, tid, count } => Record::Lost { ts_ns, pid, tid, count },
            Record::Thread { pid, tid, name, sort_index, category } => {
                Record::Thread { pid, tid, name, sort_index, category }
            }
            Record::Process { pid, tid, name, sort_index, category } => {
                Record::Process { pid, tid, name, sort_index, category }
            }
            _ => unreachable!("only records without arguments"),
        }
    }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z]{1,3}",
        "\\PC{0,12}",
        (0usize..300).prop_map(|n| "x".repeat(n)),
        Just("é".repeat(200)),
    ]
}

fn name() -> impl Strategy<Value = N> {
    prop_oneof![(0..KEPT.len()).prop_map(N::Kept), text().prop_map(N::Made)]
}

fn value() -> impl Strategy<Value = V> {
    prop_oneof![
        any::<u64>().prop_map(V::Uint),
        prop_oneof![any::<i64>(), Just(-1i64), Just(i64::MIN)].prop_map(V::Int),
        prop_oneof![any::<f64>(), Just(f64::NAN), Just(f64::NEG_INFINITY), Just(-0.0)].prop_map(V::Double),
        any::<bool>().prop_map(V::Bool),
        text().prop_map(V::Str),
        prop_oneof![Just("INFO".to_owned()), Just("WARN".to_owned()), text()].prop_map(V::Interned),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let tid = prop_oneof![0u64..6, Just(u64::from(u32::MAX) + 3), Just(u64::MAX)];
    let args = proptest::collection::vec((name(), value()), 0..6).prop_map(Args);
    (0u8..6, any::<u64>(), prop_oneof![1u32..3, Just(u32::MAX)], tid, name(), name(), args).prop_map(
        |(kind, ts, pid, tid, name, category, args)| Op { kind: kind % 6, ts, pid, tid, name, category, args },
    )
}

/// `n` records on one thread, each with new names, categories, annotation names and
/// interned values: past 4096 the tables are full.
fn filling(n: usize) -> Vec<Op> {
    (0..n)
        .map(|i| Op {
            kind: 0,
            ts: i as u64,
            pid: 1,
            tid: 1,
            name: N::Made(format!("name {i}")),
            category: N::Made(format!("cat {}", i / 2)),
            args: Args(vec![(N::Made(format!("f{i}")), V::Interned(format!("s{i}"))), (N::Kept(3), V::Uint(7))]),
        })
        .collect()
}

/// The packets of `ops`, encoded by hand and by prost.
fn both(ops: &[Op], part: u32, parts: u32) -> (Vec<u8>, Vec<u8>) {
    let (mut hand, mut reference) =
        (Core::new(part, parts, Hand::default()), Core::new(part, parts, Reference::default()));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for op in ops {
        op.put(&mut hand, &mut a);
        op.put(&mut reference, &mut b);
    }
    (a, b)
}

/// The packet's sequence (0 for none).
fn seq_id(p: &proto::TracePacket) -> u32 {
    use proto::trace_packet::OptionalTrustedPacketSequenceId as SeqId;
    match p.optional_trusted_packet_sequence_id {
        Some(SeqId::TrustedPacketSequenceId(id)) => id,
        None => 0,
    }
}

/// A track event read back: (ts, track, type, name, categories, annotations).
type Read = (u64, u64, i32, Option<String>, Vec<String>, Vec<(String, String)>);

/// Reads `bytes` as a reader does, each sequence's interned state resolved; the
/// sequence of each track event too.
fn read(bytes: &[u8]) -> Result<Vec<(u32, Read)>, TestCaseError> {
    use proto::debug_annotation::{NameField as AName, Value};
    use proto::trace_packet::Data;
    use proto::track_event::NameField;

    #[derive(Default)]
    struct Seq {
        track: u64,
        tables: [Map<u64, String>; 4],
    }
    let trace = proto::Trace::decode(bytes).map_err(|e| TestCaseError::fail(format!("not a Trace: {e}")))?;
    let mut seqs: Map<u32, Seq> = Map::new();
    let mut events = Vec::new();
    for p in trace.packet {
        let id = seq_id(&p);
        let Some(Data::TrackEvent(ev)) = p.data else { continue };
        let flags = p.sequence_flags.unwrap_or(0);
        prop_assert!(flags & 2 != 0);
        prop_assert_eq!(flags & 1 != 0, !seqs.contains_key(&id), "the first packet of a sequence clears it");
        let st = seqs.entry(id).or_default();
        if let Some(d) = p.trace_packet_defaults {
            prop_assert!(flags & 1 != 0, "defaults set by the first packet only");
            st.track = d.track_event_defaults.unwrap().track_uuid.unwrap();
        }
        if let Some(i) = p.interned_data {
            let lists = [
                i.event_categories.into_iter().map(|n| (n.iid, n.name)).collect::<Vec<_>>(),
                i.event_names.into_iter().map(|n| (n.iid, n.name)).collect(),
                i.debug_annotation_names.into_iter().map(|n| (n.iid, n.name)).collect(),
                i.debug_annotation_string_values
                    .into_iter()
                    .map(|n| (n.iid, n.str.map(|s| String::from_utf8(s).unwrap())))
                    .collect(),
            ];
            for (table, list) in st.tables.iter_mut().zip(lists) {
                for (iid, name) in list {
                    prop_assert!(table.insert(iid.unwrap(), name.unwrap()).is_none(), "an iid sent twice");
                }
            }
        }
        let name = match ev.name_field {
            Some(NameField::NameIid(iid)) => Some(st.tables[1][&iid].clone()),
            Some(NameField::Name(n)) => Some(n),
            None => None,
        };
        let mut cats: Vec<String> = ev.category_iids.iter().map(|i| st.tables[0][i].clone()).collect();
        cats.extend(ev.categories);
        let mut args = Vec::new();
        for a in ev.debug_annotations {
            let key = match a.name_field.unwrap() {
                AName::NameIid(iid) => st.tables[2][&iid].clone(),
                AName::Name(n) => n,
            };
            let v = match a.value.unwrap() {
                Value::UintValue(x) => format!("u{x}"),
                Value::IntValue(x) => format!("i{x}"),
                Value::DoubleValue(x) => format!("d{:x}", x.to_bits()),
                Value::BoolValue(x) => format!("b{x}"),
                Value::StringValue(s) => format!("s{s}"),
                Value::StringValueIid(iid) => format!("s{}", st.tables[3][&iid]),
            };
            args.push((key, v));
        }
        events.push((id, (p.timestamp.unwrap(), st.track, ev.r#type.unwrap(), name, cats, args)));
    }
    Ok(events)
}

/// What `ops` should read back as.
fn model(ops: &[Op]) -> Vec<Read> {
    let show = |v: &V| match v {
        V::Uint(x) => format!("u{x}"),
        V::Int(x) => format!("i{x}"),
        V::Double(x) => format!("d{:x}", x.to_bits()),
        V::Bool(x) => format!("b{x}"),
        V::Str(s) | V::Interned(s) => format!("s{s}"),
    };
    let mut out = Vec::new();
    for op in ops {
        let track = thread_uuid(op.pid, op.tid);
        let args = || op.args.0.iter().map(|(n, v)| (n.get().to_owned(), show(v))).collect();
        let (name, cat) = (op.name.get().to_owned(), op.category.get().to_owned());
        out.push(match op.kind {
            0 => (op.ts, track, 3, Some(name), vec![cat], args()),
            1 => (op.ts, track, 1, Some(name), vec![cat], args()),
            2 => (op.ts, track, 2, None, vec![], vec![]),
            3 => (
                op.ts,
                track,
                3,
                Some(LOST_NAME.into()),
                vec!["ringtrace".into()],
                vec![("count".into(), format!("u{}", op.ts))],
            ),
            _ => continue,
        });
    }
    out
}

fn check(ops: &[Op], part: u32, parts: u32) -> Result<(), TestCaseError> {
    let (hand, reference) = both(ops, part, parts);
    if hand != reference {
        let (a, b) = (proto::Trace::decode(&hand[..]), proto::Trace::decode(&reference[..]));
        return Err(TestCaseError::fail(format!("hand:\n{a:?}\nprost:\n{b:?}")));
    }
    let events = read(&hand)?;
    // Sequences: the threads' in the order of their first events, part `part`'s.
    let mut firsts: Vec<u32> = Vec::new();
    for (id, _) in &events {
        if !firsts.contains(id) {
            firsts.push(*id);
        }
    }
    let want: Vec<u32> = (0..firsts.len() as u32).map(|n| 2 + n * parts + part).collect();
    prop_assert_eq!(firsts, want);
    let got: Vec<Read> = events.into_iter().map(|e| e.1).collect();
    let want = model(ops);
    prop_assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        prop_assert_eq!(g, w, "track event {}", i);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Every packet encoded by hand is prost's encoding of the same message, and reads
    /// back as the records given: their tracks, names, categories and annotations of
    /// every type, through each sequence's interning (full tables included).
    #[test]
    fn hand_encoded_packets_are_prosts_and_read_back_as_given(
        ops in proptest::collection::vec(op(), 0..40),
        fill in prop_oneof![3 => Just(0usize), 1 => Just(4200usize)],
        part in 0u32..3,
    ) {
        let mut all = filling(fill);
        all.extend(ops);
        check(&all, part, 3)?;
    }
}

#[test]
fn descriptors_name_processes_and_threads_under_them() {
    let ops = [
        Op { kind: 5, ts: 0, pid: 7, tid: 9, name: N::Made("web".into()), category: N::Kept(4), args: Args(vec![]) },
        Op { kind: 4, ts: 0, pid: 7, tid: 9, name: N::Made("w".into()), category: N::Kept(4), args: Args(vec![]) },
        // A thread not described before its first event: described then, unnamed.
        Op { kind: 0, ts: 5, pid: 7, tid: 10, name: N::Kept(0), category: N::Kept(1), args: Args(vec![]) },
    ];
    let (hand, _) = both(&ops, 0, 1);
    let trace = proto::Trace::decode(&hand[..]).unwrap();
    let descs: Vec<_> = trace
        .packet
        .iter()
        .filter_map(|p| match &p.data {
            Some(proto::trace_packet::Data::TrackDescriptor(d)) => Some((seq_id(p), d.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(descs.len(), 3);
    assert!(descs.iter().all(|d| d.0 == 1));
    assert_eq!(descs[0].1.uuid, Some(process_uuid(7)));
    assert_eq!(descs[0].1.process.as_ref().unwrap().process_name.as_deref(), Some("web"));
    assert_eq!(descs[1].1.uuid, Some(thread_uuid(7, 9)));
    assert_eq!(descs[1].1.parent_uuid, Some(process_uuid(7)));
    assert_eq!(descs[1].1.thread.as_ref().unwrap().thread_name.as_deref(), Some("w"));
    assert_eq!(descs[2].1.uuid, Some(thread_uuid(7, 10)));
    assert_eq!(descs[2].1.thread.as_ref().unwrap().thread_name, None);
    assert_eq!(descs[2].1.thread.as_ref().unwrap().tid, Some(10));
}
