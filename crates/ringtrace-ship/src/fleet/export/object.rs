//! An events source's record as the agent ships it: one JSON object
//! ([`entry_json`](ringtrace_tracing::decode::text::entry_json)'s), read by serde. A
//! member of another type than the agent writes, or one given twice, fails the read,
//! and the record is exported as bytes instead. serde_json refuses objects nested
//! deeper than 128 levels, so no payload can exhaust the stack.

use ringtrace_export::record::Typed;
use serde::Deserialize;
use serde_json::{Map, Value as Json};

/// An events source's record as the agent ships it (`entry_json`'s object); the
/// members not listed (`time`, `ts_ns`) are not read.
#[derive(Deserialize)]
pub(super) struct Object {
    pub(super) level: Option<String>,
    pub(super) lost: Option<u64>,
    pub(super) span: Option<String>,
    pub(super) undecodable: Option<String>,
    pub(super) thread: Option<String>,
    pub(super) tid: Option<u32>,
    pub(super) target: Option<String>,
    pub(super) name: Option<String>,
    pub(super) spans: Option<Vec<Context>>,
    pub(super) fields: Option<Map<String, Json>>,
    pub(super) cut: Option<Vec<String>>,
    pub(super) dropped: Option<u64>,
    pub(super) id: Option<Id>,
    pub(super) parent: Option<Id>,
    pub(super) follows: Option<Id>,
    pub(super) len: Option<u64>,
    pub(super) program: Option<String>,
    /// A new span's callsite's file and line.
    pub(super) file: Option<String>,
    pub(super) line: Option<u32>,
    /// One letter per field naming its value's type (`ringtrace_tracing::decode::text::kinds`):
    /// absent from older agents' objects.
    pub(super) kinds: Option<String>,
}

/// A span of an event's context.
#[derive(Deserialize)]
pub(super) struct Context {
    pub(super) name: Option<String>,
    pub(super) id: Option<Id>,
}

/// A span id: a decimal string as the agent writes it, or a number.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Id {
    Text(String),
    Number(u64),
}

impl Id {
    pub(super) fn get(&self) -> Result<u64, Undecodable> {
        match self {
            Id::Text(s) => s.parse().map_err(|_| Undecodable::SpanId(s.clone())),
            Id::Number(n) => Ok(*n),
        }
    }
}

/// Why an events source's payload is not read (the record carries it, as bytes).
#[derive(Debug, thiserror::Error)]
pub(super) enum Undecodable {
    #[error("not a JSON object")]
    NotObject,
    #[error("not an object the agent writes: {0}")]
    NotOurs(#[source] serde_json::Error),
    #[error("unknown level {0:?}")]
    Level(String),
    #[error("span id {0:?} is not a decimal u64")]
    SpanId(String),
    #[error("unknown span record {0:?}")]
    SpanRecord(String),
    #[error("a span record without its id")]
    NoSpanId,
    #[error("not one of an event, a span record, a lost count, an undecodable record")]
    Unknown,
}

impl Object {
    /// `payload` read as an object the agent writes.
    pub(super) fn read(payload: &[u8]) -> Result<Object, Undecodable> {
        // serde reads a struct from an array too: only an object is one.
        if payload.trim_ascii_start().first() != Some(&b'{') {
            return Err(Undecodable::NotObject);
        }
        serde_json::from_slice(payload).map_err(Undecodable::NotOurs)
    }

    /// Its fields, each with the value it was recorded with (see [`typed`]).
    pub(super) fn each_field(&self, mut f: impl FnMut(&str, Typed<'_>)) {
        each_field(self.fields.as_ref(), self.kinds.as_deref(), &mut f);
    }
}

/// `fields` handed to `f`, each with the value it was recorded with (see [`typed`]).
pub(super) fn each_field(fields: Option<&Map<String, Json>>, kinds: Option<&str>, f: &mut impl FnMut(&str, Typed<'_>)) {
    let mut kinds = kinds.unwrap_or("").chars();
    for (name, v) in fields.into_iter().flatten() {
        typed(v, kinds.next(), &mut |t| f(name, t));
    }
}

/// A field's JSON value as the value it was recorded with, where `kind` names its type
/// (`ringtrace_tracing::decode::text::kinds`): the agent writes a 64-bit integer
/// beyond 2^53 - 1 as a decimal string and a double's NaN and infinities as `"NaN"`,
/// `"Infinity"` and `"-Infinity"`, which its kind tells from text; a 128-bit integer
/// and bytes (decimal, hex) stay text, as a trace's exports show them. Without a kind
/// (an older agent's object) a JSON number is an unsigned, else a signed integer, else
/// a double; `null`, arrays and objects are their JSON text.
pub(super) fn typed(v: &Json, kind: Option<char>, f: &mut impl FnMut(Typed<'_>)) {
    let t = match (kind, v) {
        (_, Json::Bool(b)) => Typed::Bool(*b),
        (Some('u'), Json::String(s)) => s.parse().map_or(Typed::Str(s), Typed::Uint),
        (Some('i'), Json::String(s)) => s.parse().map_or(Typed::Str(s), Typed::Int),
        (Some('f'), Json::String(s)) => match s.as_str() {
            "NaN" => Typed::Double(f64::NAN),
            "Infinity" => Typed::Double(f64::INFINITY),
            "-Infinity" => Typed::Double(f64::NEG_INFINITY),
            _ => Typed::Str(s),
        },
        (_, Json::String(s)) => Typed::Str(s),
        (Some('i'), Json::Number(n)) => n.as_i64().map_or_else(|| number(n), Typed::Int),
        (Some('f'), Json::Number(n)) => Typed::Double(n.as_f64().unwrap_or(f64::NAN)),
        (_, Json::Number(n)) => number(n),
        (_, other) => return f(Typed::Str(&other.to_string())),
    };
    f(t)
}

/// A JSON number as an unsigned integer, else a signed one, else a double.
fn number(n: &serde_json::Number) -> Typed<'static> {
    match (n.as_u64(), n.as_i64()) {
        (Some(u), _) => Typed::Uint(u),
        (None, Some(i)) => Typed::Int(i),
        (None, None) => Typed::Double(n.as_f64().unwrap_or(f64::NAN)),
    }
}
