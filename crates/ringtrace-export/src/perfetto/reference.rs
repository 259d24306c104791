//! The reference the hand encoder is tested against: the same packet built as prost's
//! `TracePacket` and encoded by prost.

use prost::Message;

use super::encode::{Encode, Head, Str, Table, Val};
use super::proto::debug_annotation::{NameField as AnnotationName, Value};
use super::proto::trace_packet::{Data, OptionalTrustedPacketSequenceId as SeqId};
use super::proto::track_event::NameField;
use super::proto::{
    DebugAnnotation, DebugAnnotationName, EventCategory, EventName, InternedData, InternedString, TracePacket,
    TracePacketDefaults, TrackEvent, TrackEventDefaults,
};

/// Builds each packet as prost's message.
#[derive(Debug, Default)]
pub(super) struct Reference {
    event: TrackEvent,
    interned: InternedData,
}

impl Encode for Reference {
    fn start(&mut self) {
        *self = Reference::default();
    }

    fn interned(&mut self, table: Table, iid: u64, text: &str) {
        let (iid, name) = (Some(iid), Some(text.to_owned()));
        let i = &mut self.interned;
        match table {
            Table::Categories => i.event_categories.push(EventCategory { iid, name }),
            Table::Names => i.event_names.push(EventName { iid, name }),
            Table::Fields => i.debug_annotation_names.push(DebugAnnotationName { iid, name }),
            Table::Strings => {
                i.debug_annotation_string_values.push(InternedString { iid, str: Some(text.as_bytes().to_vec()) });
            }
        }
    }

    fn category(&mut self, c: Str<'_>) {
        match c {
            Str::Iid(iid) => self.event.category_iids.push(iid),
            Str::Text(t) => self.event.categories.push(t.to_owned()),
        }
    }

    fn annotation(&mut self, name: Str<'_>, value: Val<'_>) {
        let name_field = Some(match name {
            Str::Iid(iid) => AnnotationName::NameIid(iid),
            Str::Text(t) => AnnotationName::Name(t.to_owned()),
        });
        let value = Some(match value {
            Val::Bool(b) => Value::BoolValue(b),
            Val::Uint(v) => Value::UintValue(v),
            Val::Int(v) => Value::IntValue(v),
            Val::Double(d) => Value::DoubleValue(d),
            Val::Str(s) => Value::StringValue(s.to_owned()),
            Val::StrIid(iid) => Value::StringValueIid(iid),
        });
        self.event.debug_annotations.push(DebugAnnotation { name_field, value });
    }

    fn finish(&mut self, out: &mut Vec<u8>, h: &Head<'_>) {
        let mut event = std::mem::take(&mut self.event);
        event.r#type = Some(h.kind as i32);
        event.name_field = h.name.map(|n| match n {
            Str::Iid(iid) => NameField::NameIid(iid),
            Str::Text(t) => NameField::Name(t.to_owned()),
        });
        let interned = std::mem::take(&mut self.interned);
        let p = TracePacket {
            timestamp: Some(h.ts),
            optional_trusted_packet_sequence_id: Some(SeqId::TrustedPacketSequenceId(h.sequence)),
            interned_data: (interned != InternedData::default()).then_some(interned),
            sequence_flags: Some(h.flags),
            trace_packet_defaults: h.track.map(|t| TracePacketDefaults {
                track_event_defaults: Some(TrackEventDefaults { track_uuid: Some(t) }),
            }),
            data: Some(Data::TrackEvent(event)),
            ..Default::default()
        };
        out.push(0x0A);
        p.encode_length_delimited(out).expect("a Vec grows");
    }
}
