//! Names resolved: callsite numbers to metadata, field indexes to names, lanes to
//! threads, span ids to the spans they name (as far as the trace still holds them).

use std::collections::HashMap;

use tracing_core::Level;

use super::trace::Trace;
use crate::catalog::{Callsite, ThreadInfo};
use crate::wire::Value;
use crate::wire::{RawRecord, RawValue};

/// Span ancestry is followed at most this deep (a cycle in a damaged trace ends too).
const MAX_DEPTH: usize = 64;

/// A field: its name, its value, whether its text was cut at the value bound.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub name: String,
    pub value: Value,
    pub cut: bool,
}

/// A span an event was in.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanContext {
    /// The `tracing` span id.
    pub id: u64,
    /// Its name (`?` if its callsite is unknown).
    pub name: String,
    /// Its fields, if the trace still holds its `new span` record (a flight recorder
    /// may have overwritten it): `None` then.
    pub fields: Option<Vec<Field>>,
}

/// An event, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Event<'a> {
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub ts_ns: u64,
    pub lane: u32,
    pub thread: Option<&'a ThreadInfo>,
    /// Its callsite (`None` if the catalog lacks it).
    pub callsite: Option<&'a Callsite>,
    /// Every field, `message` included.
    pub fields: Vec<Field>,
    /// Values dropped at the record's size bound.
    pub dropped: u16,
    /// The spans it was in, outermost first; the outermost may be a span whose own
    /// parent the trace no longer names.
    pub spans: Vec<SpanContext>,
}

impl Event<'_> {
    /// Its level (`TRACE` if unknown).
    pub fn level(&self) -> Level {
        self.callsite.map_or(Level::TRACE, |c| c.level)
    }

    /// Its target (`?` if unknown).
    pub fn target(&self) -> &str {
        self.callsite.map_or("?", |c| &c.target)
    }

    /// The `message` field's text.
    pub fn message(&self) -> Option<&str> {
        self.fields.iter().find(|f| f.name == "message").map(|f| match &f.value {
            Value::Str(s) | Value::Debug(s) | Value::Error(s) => s.as_str(),
            _ => "",
        })
    }

    /// A field's value by name.
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|f| f.name == name).map(|f| &f.value)
    }
}

/// What a record is, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum EntryKind<'a> {
    Event(Event<'a>),
    NewSpan {
        span: u64,
        parent: u64,
        callsite: Option<&'a Callsite>,
        fields: Vec<Field>,
    },
    Record {
        span: u64,
        fields: Vec<Field>,
    },
    Enter {
        span: u64,
    },
    Exit {
        span: u64,
    },
    Close {
        span: u64,
    },
    FollowsFrom {
        span: u64,
        follows: u64,
    },
    /// Events this thread could not write before its next record.
    Lost {
        count: u64,
    },
}

/// One record, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry<'a> {
    pub ts_ns: u64,
    pub lane: u32,
    pub thread: Option<&'a ThreadInfo>,
    pub kind: EntryKind<'a>,
}

#[derive(Debug)]
struct SpanState {
    callsite: u32,
    parent: u64,
    fields: Vec<Field>,
}

fn fields(callsite: Option<&Callsite>, values: &[RawValue]) -> Vec<Field> {
    values
        .iter()
        .map(|v| Field {
            name: callsite
                .and_then(|c| c.fields.get(v.field as usize))
                .cloned()
                .unwrap_or_else(|| format!("field{}", v.field)),
            value: v.value.clone(),
            cut: v.cut,
        })
        .collect()
}

/// Every record of a trace, resolved as it is reached ([`Trace::entries`]): only the
/// spans still open are held, so going through a trace takes no memory beyond the
/// trace's own.
#[derive(Debug)]
pub struct Entries<'a> {
    trace: &'a Trace,
    next: usize,
    spans: HashMap<u64, SpanState>,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        let t = self.trace;
        let r = t.records.get(self.next)?;
        self.next += 1;
        let spans = &mut self.spans;
        let kind = match &r.raw {
            RawRecord::Event { callsite, span, span_callsite, values, dropped } => {
                let cs = t.callsite(*callsite);
                EntryKind::Event(Event {
                    ts_ns: r.ts,
                    lane: r.lane,
                    thread: t.thread(r.lane, r.ts),
                    callsite: cs,
                    fields: fields(cs, values),
                    dropped: *dropped,
                    spans: t.context(spans, *span, *span_callsite),
                })
            }
            RawRecord::NewSpan { callsite, span, parent, values, .. } => {
                let cs = t.callsite(*callsite);
                let f = fields(cs, values);
                spans.insert(*span, SpanState { callsite: *callsite, parent: *parent, fields: f.clone() });
                EntryKind::NewSpan { span: *span, parent: *parent, callsite: cs, fields: f }
            }
            RawRecord::Record { span, values, .. } => {
                let f = match spans.get_mut(span) {
                    Some(s) => {
                        let f = fields(t.callsite(s.callsite), values);
                        for new in &f {
                            match s.fields.iter_mut().find(|old| old.name == new.name) {
                                Some(old) => *old = new.clone(),
                                None => s.fields.push(new.clone()),
                            }
                        }
                        f
                    }
                    None => fields(None, values),
                };
                EntryKind::Record { span: *span, fields: f }
            }
            RawRecord::Enter { span } => EntryKind::Enter { span: *span },
            RawRecord::Exit { span } => EntryKind::Exit { span: *span },
            RawRecord::Close { span } => {
                // Span ids are reused once closed.
                spans.remove(span);
                EntryKind::Close { span: *span }
            }
            RawRecord::FollowsFrom { span, follows } => EntryKind::FollowsFrom { span: *span, follows: *follows },
            RawRecord::Lost { count } => EntryKind::Lost { count: *count },
        };
        Some(Entry { ts_ns: r.ts, lane: r.lane, thread: t.thread(r.lane, r.ts), kind })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.trace.records.len() - self.next;
        (n, Some(n))
    }
}

impl Trace {
    /// Every record, resolved, in timestamp order, as the iteration reaches it.
    pub fn entries(&self) -> Entries<'_> {
        Entries { trace: self, next: 0, spans: HashMap::new() }
    }

    /// The events alone, resolved, in timestamp order.
    pub fn events(&self) -> Vec<Event<'_>> {
        self.entries()
            .filter_map(|e| match e.kind {
                EntryKind::Event(ev) => Some(ev),
                _ => None,
            })
            .collect()
    }

    /// The spans an event in `span` (of callsite `span_cs`) was in, outermost first.
    fn context(&self, spans: &HashMap<u64, SpanState>, span: u64, span_cs: u32) -> Vec<SpanContext> {
        let mut chain = Vec::new();
        let (mut id, mut expect) = (span, Some(span_cs));
        while id != 0 && chain.len() < MAX_DEPTH {
            let known = spans.get(&id).filter(|s| expect.is_none_or(|cs| cs == 0 || cs == s.callsite));
            match known {
                Some(s) => {
                    chain.push(SpanContext {
                        id,
                        name: self.callsite(s.callsite).map_or("?".into(), |c| c.name.clone()),
                        fields: Some(s.fields.clone()),
                    });
                    id = s.parent;
                    expect = None;
                }
                None => {
                    // Its `new span` record is gone: the name from the event's record
                    // for the innermost span; its ancestry is unknown.
                    let name = expect.and_then(|cs| self.callsite(cs)).map_or("?".into(), |c| c.name.clone());
                    chain.push(SpanContext { id, name, fields: None });
                    break;
                }
            }
        }
        chain.reverse();
        chain
    }
}
