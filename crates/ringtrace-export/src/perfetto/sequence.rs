//! A thread's packet sequence: its interning, and the reused packet its track events
//! are made in.

use foldhash::HashMap;

use super::proto::debug_annotation::{NameField as AnnotationName, Value as AnnotationValue};
use super::proto::trace_packet::{Data, OptionalTrustedPacketSequenceId as SeqId};
use super::proto::track_event::{NameField, Type};
use super::proto::{
    DebugAnnotation, DebugAnnotationName, EventCategory, EventName, InternedData, InternedString, TracePacket,
    TracePacketDefaults, TrackEvent, TrackEventDefaults,
};
use ringtrace_tracing::decode::view::{self, ValueIn};
use ringtrace_tracing::decode::{Field, Value};

const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// Strings each intern table of a sequence holds at most: past it, a string is written
/// in full in each packet that uses it (events named by formatted messages would
/// otherwise make the tables grow with the trace).
const MAX_INTERNED: usize = 4096;

/// A name to intern: one that lives as long as the trace (`'t`: a callsite's names and
/// target, the exporter's own), found again by its address without hashing its text;
/// or one that passes (a message, a span's name as the slices keep it), found by its
/// text.
pub(super) enum Name<'t, 'v> {
    Kept(&'t str),
    Passing(&'v str),
    /// Made for the packet (`field{N}`, for a field its callsite does not name).
    Made(String),
}

/// An intern table of a sequence.
struct Table<'t> {
    by_text: HashMap<String, u64>,
    /// Kept names by address and length: their addresses are not reused while `'t`
    /// lasts, so one address is one text.
    by_addr: HashMap<(usize, usize), u64>,
    /// The last passing name and its iid: a message repeats from event to event.
    last: Option<(String, u64)>,
    _kept: std::marker::PhantomData<&'t str>,
}

impl<'t> Table<'t> {
    fn new() -> Self {
        Table { by_text: HashMap::default(), by_addr: HashMap::default(), last: None, _kept: std::marker::PhantomData }
    }

    /// Interns a name: its iid and whether it is new (to be sent in this packet);
    /// `None` once the table is full.
    fn intern(&mut self, name: &Name<'t, '_>) -> Option<(u64, bool)> {
        let s = match *name {
            Name::Kept(s) => {
                if let Some(&iid) = self.by_addr.get(&(s.as_ptr() as usize, s.len())) {
                    return Some((iid, false));
                }
                s
            }
            Name::Passing(s) => {
                if let Some((text, iid)) = &self.last {
                    if text == s {
                        return Some((*iid, false));
                    }
                }
                s
            }
            Name::Made(ref s) => s,
        };
        let found = match self.by_text.get(s) {
            Some(&iid) => (iid, false),
            None if self.by_text.len() >= MAX_INTERNED => return None,
            None => {
                // iids start at 1: 0 means "none".
                let iid = self.by_text.len() as u64 + 1;
                self.by_text.insert(s.to_owned(), iid);
                (iid, true)
            }
        };
        match name {
            Name::Kept(s) => {
                if self.by_addr.len() < MAX_INTERNED {
                    self.by_addr.insert((s.as_ptr() as usize, s.len()), found.0);
                }
            }
            Name::Passing(s) => {
                let last = self.last.get_or_insert_with(|| (String::new(), 0));
                last.0.clear();
                last.0.push_str(s);
                last.1 = found.0;
            }
            Name::Made(_) => {}
        }
        Some(found)
    }
}

impl Name<'_, '_> {
    fn text(&self) -> &str {
        match self {
            Name::Kept(s) | Name::Passing(s) => s,
            Name::Made(s) => s,
        }
    }
}

/// A thread's packet sequence: its number, its track, and what it has interned.
pub(super) struct Sequence<'t> {
    id: u32,
    track: u64,
    cleared: bool,
    names: Table<'t>,
    categories: Table<'t>,
    fields: Table<'t>,
    /// String values that repeat from event to event (the level).
    strings: Table<'t>,
}

/// A debug annotation's value, borrowed.
#[derive(Clone)]
pub(super) enum Arg<'v> {
    Value(&'v Value),
    In(ValueIn<'v>),
    /// A string the trace keeps (a level's name): interned.
    Kept(&'static str),
    Uint(u64),
}

/// Sets a string value, reusing the string already there.
fn set_str(slot: &mut Option<AnnotationValue>, s: &str) {
    match slot {
        Some(AnnotationValue::StringValue(old)) => {
            old.clear();
            old.push_str(s);
        }
        _ => *slot = Some(AnnotationValue::StringValue(s.to_owned())),
    }
}

fn set_value(slot: &mut Option<AnnotationValue>, a: Arg<'_>) {
    *slot = Some(match a {
        Arg::Uint(x) | Arg::Value(&Value::U64(x)) => AnnotationValue::UintValue(x),
        Arg::Value(Value::I64(x)) => AnnotationValue::IntValue(*x),
        Arg::Value(Value::F64(x)) => AnnotationValue::DoubleValue(*x),
        Arg::Value(Value::Bool(x)) => AnnotationValue::BoolValue(*x),
        Arg::Value(Value::U128(x)) => return set_str(slot, &x.to_string()),
        Arg::Value(Value::I128(x)) => return set_str(slot, &x.to_string()),
        Arg::Value(Value::Str(s) | Value::Debug(s) | Value::Error(s)) => return set_str(slot, s),
        Arg::Value(Value::Bytes(b)) => return set_str(slot, &view::hex(b)),
        Arg::Kept(s) | Arg::In(ValueIn::Str(s) | ValueIn::Debug(s) | ValueIn::Error(s)) => return set_str(slot, s),
        Arg::In(ValueIn::Number(v)) => return set_value(slot, Arg::Value(&v)),
    });
}

/// The annotations of `fields`: a name borrowed from the trace's callsites is kept.
pub(super) fn args<'t, 'v>(fields: &'v [Field<'t>]) -> impl Iterator<Item = (Name<'t, 'v>, Arg<'v>)> {
    fields.iter().map(|f| {
        let name = match &f.name {
            std::borrow::Cow::Borrowed(s) => Name::Kept(s),
            std::borrow::Cow::Owned(s) => Name::Passing(s.as_str()),
        };
        (name, Arg::Value(&f.value))
    })
}

impl<'t> Sequence<'t> {
    /// Sequence `id`, whose events go on track `track`.
    pub(super) fn new(id: u32, track: u64) -> Self {
        Sequence {
            id,
            track,
            cleared: false,
            names: Table::new(),
            categories: Table::new(),
            fields: Table::new(),
            strings: Table::new(),
        }
    }

    /// Makes `p` (reused from packet to packet, so that its vectors and strings keep
    /// their room) a track event's packet on this sequence at `ts`, with what it interns.
    ///
    /// `name` is asked for after `fields` are gone through, so that an event named by
    /// one of its fields (its message) has its values read once.
    pub(super) fn packet<'v>(
        &mut self,
        p: &mut TracePacket,
        ts: u64,
        kind: Type,
        category: Option<Name<'t, '_>>,
        fields: impl IntoIterator<Item = (Name<'t, 'v>, Arg<'v>)>,
        name: impl FnOnce() -> Option<Name<'t, 'v>>,
    ) {
        let mut interned = InternedData::default();
        if !matches!(p.data, Some(Data::TrackEvent(_))) {
            p.data = Some(Data::TrackEvent(TrackEvent::default()));
        }
        let Some(Data::TrackEvent(event)) = &mut p.data else { unreachable!("set above") };
        event.r#type = Some(kind as i32);
        // The sequence's default track (set below with its incremental state).
        event.track_uuid = None;
        event.category_iids.clear();
        event.categories.clear();
        if let Some(cat) = category {
            match self.categories.intern(&cat) {
                Some((iid, new)) => {
                    if new {
                        let name = Some(cat.text().to_owned());
                        interned.event_categories.push(EventCategory { iid: Some(iid), name });
                    }
                    event.category_iids.push(iid);
                }
                None => event.categories.push(cat.text().to_owned()),
            }
        }
        let mut n = 0;
        for (field, value) in fields {
            if event.debug_annotations.len() == n {
                event.debug_annotations.push(DebugAnnotation::default());
            }
            let a = &mut event.debug_annotations[n];
            a.name_field = Some(match self.fields.intern(&field) {
                Some((iid, new)) => {
                    if new {
                        let name = DebugAnnotationName { iid: Some(iid), name: Some(field.text().to_owned()) };
                        interned.debug_annotation_names.push(name);
                    }
                    AnnotationName::NameIid(iid)
                }
                None => AnnotationName::Name(field.text().to_owned()),
            });
            match value {
                Arg::Kept(s) => match self.strings.intern(&Name::Kept(s)) {
                    Some((iid, new)) => {
                        if new {
                            let s = InternedString { iid: Some(iid), str: Some(s.as_bytes().to_vec()) };
                            interned.debug_annotation_string_values.push(s);
                        }
                        a.value = Some(AnnotationValue::StringValueIid(iid));
                    }
                    None => set_value(&mut a.value, value),
                },
                value => set_value(&mut a.value, value),
            }
            n += 1;
        }
        event.debug_annotations.truncate(n);
        event.name_field = name().map(|name| match self.names.intern(&name) {
            Some((iid, new)) => {
                if new {
                    interned.event_names.push(EventName { iid: Some(iid), name: Some(name.text().to_owned()) });
                }
                NameField::NameIid(iid)
            }
            None => NameField::Name(name.text().to_owned()),
        });
        let flags = if self.cleared {
            p.trace_packet_defaults = None;
            SEQ_NEEDS_INCREMENTAL_STATE
        } else {
            self.cleared = true;
            // Every track event of the sequence goes on its thread's track: said once,
            // as Perfetto's SDK does, rather than in each packet.
            p.trace_packet_defaults = Some(TracePacketDefaults {
                track_event_defaults: Some(TrackEventDefaults { track_uuid: Some(self.track) }),
            });
            SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE
        };
        let has_interned = !(interned.event_names.is_empty()
            && interned.event_categories.is_empty()
            && interned.debug_annotation_names.is_empty()
            && interned.debug_annotation_string_values.is_empty());
        p.timestamp = Some(ts);
        p.optional_trusted_packet_sequence_id = Some(SeqId::TrustedPacketSequenceId(self.id));
        p.interned_data = has_interned.then_some(interned);
        p.sequence_flags = Some(flags);
    }
}
