//! The OTLP mapping both conversions share: a trace's ([`convert`](super::convert))
//! and a fleet's (`ringtrace_ship::fleet::export::otlp`), so that an event of a trace
//! and the JSON object an agent ships of it become the same log record.
//!
//! * **Attribute lists** ([`Attributes`]) hold each key once, as OTLP requires: a
//!   field keeps its name and its latest value (a later field of its name replaces
//!   the value, in its place); an attribute the mapping adds, after every field, is
//!   left out where a field has its key, and counted in the list's dropped count
//!   (`dropped_attributes_count`), with the values the recorder dropped.
//! * **Values**: integers of any width an `int` where they fit an i64, else their
//!   decimal text ([`int`], [`uint`]); finite doubles a `double`, NaN and the
//!   infinities the strings `NaN`, `Infinity` and `-Infinity` ([`double`]: the
//!   spelling of every JSON output of ringtrace,
//!   [`non_finite_text`], since OTLP/JSON writes a double as a JSON number, which
//!   holds none of them); booleans `bool`; text `string`; bytes `bytes`. A JSON value
//!   ([`json`]) by its JSON type: an integer as above, another number as a double,
//!   `null` an empty value, an array or an object its JSON text.
//! * **Severity** of a `tracing` level ([`severity`], [`level_named`] for its name):
//!   TRACE 1, DEBUG 5, INFO 9, WARN 13, ERROR 17; 0 (`SEVERITY_NUMBER_UNSPECIFIED`)
//!   and no text where the level is not known.
//! * **An event's log record** ([`event_record`]): severity from its level; the body
//!   its `message` field's value (of its type), else its callsite's name; its other
//!   fields, then `code.namespace` (its target), `thread.id`, `thread.name`,
//!   `span.name` and `ringtrace.span_id` (the innermost span of its context: its name,
//!   and its `tracing` id as a decimal string), `ringtrace.cut` (the names of the
//!   values cut at the recorder's bound, a string array), where known.
//! * **Events lost** ([`lost_record`]): severity WARN, the body
//!   `ringtrace: N events lost here (ring full)` (as `ringtrace decode` says it),
//!   `ringtrace.lost` = N, `thread.id` and `thread.name`.
//! * **A resource** ([`resource`]): `service.name`, `host.name`, `process.pid` and
//!   `process.executable.name` (the OpenTelemetry semantic conventions' names).

use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::resource::v1::Resource;
use ringtrace_tracing::decode::text::non_finite_text;
use ringtrace_tracing::Level;
use serde_json::Value as Json;

/// An attribute `key = value` (`None`: an empty value).
pub fn kv(key: &str, value: Option<V>) -> KeyValue {
    KeyValue { key: key.to_owned(), value: Some(AnyValue { value }), ..KeyValue::default() }
}

/// Sets a field's attribute in `attrs`: the value of the attribute of its key if
/// there is one, else a new attribute.
pub fn put(attrs: &mut Vec<KeyValue>, key: &str, value: Option<V>) {
    match attrs.iter_mut().find(|a| a.key == key) {
        Some(a) => a.value = Some(AnyValue { value }),
        None => attrs.push(kv(key, value)),
    }
}

/// An attribute list being made (see the [module docs](self)): fields first, then the
/// attributes the mapping adds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attributes {
    list: Vec<KeyValue>,
    dropped: u32,
}

impl Attributes {
    /// An empty list, with `dropped` values the recorder already left out.
    pub fn new(dropped: u64) -> Self {
        Attributes { list: Vec::new(), dropped: u32::try_from(dropped).unwrap_or(u32::MAX) }
    }

    /// A field: replaces the value of the attribute of its key, else is appended.
    pub fn field(&mut self, key: &str, value: Option<V>) {
        put(&mut self.list, key, value);
    }

    /// An attribute the mapping adds: left out, and counted as dropped, where the list
    /// has its key (a field's).
    pub fn add(&mut self, key: &str, value: V) {
        if self.list.iter().any(|a| a.key == key) {
            self.dropped = self.dropped.saturating_add(1);
        } else {
            self.list.push(kv(key, Some(value)));
        }
    }

    /// The attributes the mapping adds of `thread`: `thread.id` and `thread.name`,
    /// those known.
    pub fn thread(&mut self, thread: Thread<'_>) {
        if let Some(id) = thread.id {
            self.add("thread.id", V::IntValue(i64::from(id)));
        }
        if let Some(name) = thread.name {
            self.add("thread.name", string(name));
        }
    }

    /// The attributes, and how many were dropped.
    pub fn into_parts(self) -> (Vec<KeyValue>, u32) {
        (self.list, self.dropped)
    }
}

/// Text as an OTLP value.
pub fn string(s: impl Into<String>) -> V {
    V::StringValue(s.into())
}

/// An integer as OTLP holds it: an `int` where it fits an i64, else its decimal text.
pub fn int(x: i128) -> V {
    i64::try_from(x).map_or_else(|_| string(x.to_string()), V::IntValue)
}

/// [`int`] of an unsigned integer of any width.
pub fn uint(x: u128) -> V {
    i64::try_from(x).map_or_else(|_| string(x.to_string()), V::IntValue)
}

/// A double: a `double` where finite, else `NaN`, `Infinity` or `-Infinity`
/// ([`non_finite_text`]).
pub fn double(x: f64) -> V {
    non_finite_text(x).map_or(V::DoubleValue(x), string)
}

/// A recorded value as an OTLP value of its type.
pub(super) fn value(v: &ringtrace_tracing::decode::Value) -> V {
    use ringtrace_tracing::decode::Value;
    match v {
        Value::U64(x) => uint(u128::from(*x)),
        Value::I64(x) => V::IntValue(*x),
        Value::F64(x) => double(*x),
        Value::Bool(x) => V::BoolValue(*x),
        Value::U128(x) => uint(*x),
        Value::I128(x) => int(*x),
        Value::Str(s) | Value::Debug(s) | Value::Error(s) => string(s.clone()),
        Value::Bytes(b) => V::BytesValue(b.clone()),
    }
}

/// A JSON value as an OTLP value (see the [module docs](self)); `None` for `null`.
pub fn json(v: &Json) -> Option<V> {
    Some(match v {
        Json::Null => return None,
        Json::Bool(b) => V::BoolValue(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => V::IntValue(i),
            (None, Some(u), _) => uint(u128::from(u)),
            (None, None, Some(f)) => double(f),
            // Only with serde_json's `arbitrary_precision`: its text.
            (None, None, None) => string(n.to_string()),
        },
        Json::String(s) => string(s.clone()),
        Json::Array(_) | Json::Object(_) => string(v.to_string()),
    })
}

/// A field's JSON value as an agent's object holds it, as the OTLP value of the type it
/// was recorded with, where `kind` names it (the letter
/// `ringtrace_tracing::decode::text::kinds` writes): the object holds 64-bit integers
/// beyond 2^53 − 1 and 128-bit ones as decimal text, bytes as hex, a double's NaN and
/// infinities as `"NaN"`, `"Infinity"` and `"-Infinity"`; each becomes the value a
/// trace's export makes of the value itself ([`int`], [`uint`], [`double`], `bytes`).
/// Without a kind, or where the text is not of its kind, the value is read by its JSON
/// type ([`json`]).
///
/// ```
/// use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
/// use ringtrace_export::otlp::model::json_typed;
///
/// let v = serde_json::json!("18446744073709551615");
/// assert_eq!(json_typed(&v, Some('u')), Some(V::StringValue("18446744073709551615".into())));
/// assert_eq!(json_typed(&serde_json::json!("9007199254740993"), Some('i')), Some(V::IntValue(9007199254740993)));
/// assert_eq!(json_typed(&serde_json::json!("00ff"), Some('x')), Some(V::BytesValue(vec![0, 255])));
/// assert_eq!(json_typed(&serde_json::json!("00ff"), Some('s')), Some(V::StringValue("00ff".into())));
/// ```
pub fn json_typed(v: &Json, kind: Option<char>) -> Option<V> {
    let s = match (v, kind) {
        (Json::String(s), _) => s,
        (Json::Number(n), Some('f')) => return n.as_f64().map(double),
        _ => return json(v),
    };
    let typed = match kind {
        Some('u') | Some('U') => s.parse::<u128>().ok().map(uint),
        Some('i') | Some('I') => s.parse::<i128>().ok().map(int),
        Some('x') => unhex(s).map(V::BytesValue),
        _ => None,
    };
    Some(typed.unwrap_or_else(|| string(s.clone())))
}

/// Bytes of their lowercase or uppercase hex text, if it is that.
fn unhex(s: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    (s.len() % 2 == 0).then_some(())?;
    s.as_bytes().chunks(2).map(|p| Some((digit(p[0])? << 4) | digit(p[1])?)).collect()
}

/// OTLP's severity number and text of a level (0, unspecified, and no text if it is
/// not known).
pub fn severity(level: Option<Level>) -> (i32, &'static str) {
    match level {
        Some(Level::TRACE) => (1, "TRACE"),
        Some(Level::DEBUG) => (5, "DEBUG"),
        Some(Level::INFO) => (9, "INFO"),
        Some(Level::WARN) => (13, "WARN"),
        Some(Level::ERROR) => (17, "ERROR"),
        _ => (0, ""),
    }
}

/// The level of its name as `tracing` writes it (`TRACE` ... `ERROR`), else `None`.
pub fn level_named(name: &str) -> Option<Level> {
    [Level::TRACE, Level::DEBUG, Level::INFO, Level::WARN, Level::ERROR].into_iter().find(|l| l.as_str() == name)
}

/// A log record at `time_ns` (its time and observed time) of `level`'s severity.
pub fn log_record(time_ns: u64, level: Option<Level>, body: Option<V>, attributes: Attributes) -> LogRecord {
    let (number, text) = severity(level);
    let (attributes, dropped) = attributes.into_parts();
    LogRecord {
        time_unix_nano: time_ns,
        observed_time_unix_nano: time_ns,
        severity_number: number,
        severity_text: text.to_owned(),
        body: body.map(|v| AnyValue { value: Some(v) }),
        attributes,
        dropped_attributes_count: dropped,
        ..LogRecord::default()
    }
}

/// Adds an attribute the mapping makes to a record made: left out, and counted as
/// dropped, where the record has its key ([`Attributes::add`]).
pub fn add(record: &mut LogRecord, key: &str, value: V) {
    let mut a = Attributes { list: std::mem::take(&mut record.attributes), dropped: record.dropped_attributes_count };
    a.add(key, value);
    (record.attributes, record.dropped_attributes_count) = a.into_parts();
}

/// Adds an attribute the mapping makes to a span, unless one of its key is there (a
/// field's). A span's attributes change with its `record`s: it counts none dropped.
pub fn span_attr(attrs: &mut Vec<KeyValue>, key: &str, v: V) {
    if !attrs.iter().any(|a| a.key == key) {
        attrs.push(kv(key, Some(v)));
    }
}

/// Adds `key = true` to `attrs` (a span's), unless one has the key (a field's): how
/// an export marks what it could not know (`ringtrace.start_unknown`,
/// `ringtrace.end_unknown`).
pub fn mark(attrs: &mut Vec<KeyValue>, key: &str) {
    if !attrs.iter().any(|a| a.key == key) {
        attrs.push(kv(key, Some(V::BoolValue(true))));
    }
}

/// The thread a record was written on, as far as it is known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Thread<'a> {
    /// `thread.id`.
    pub id: Option<u32>,
    /// `thread.name`.
    pub name: Option<&'a str>,
}

/// An event, but its fields: what a trace's event holds and the JSON object an agent
/// writes of one says ([`event_record`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Event<'a> {
    /// Its time, Unix nanoseconds.
    pub time_ns: u64,
    /// Its level (`None`: not known).
    pub level: Option<Level>,
    /// Its callsite's name: the body where it has no `message` field.
    pub name: Option<&'a str>,
    /// Its callsite's target (`code.namespace`).
    pub target: Option<&'a str>,
    pub thread: Thread<'a>,
    /// The innermost span of its context: its name (`span.name`) and `tracing` id
    /// (`ringtrace.span_id`).
    pub span_name: Option<&'a str>,
    pub span_id: Option<u64>,
    /// The names of its values cut at the recorder's bound (`ringtrace.cut`).
    pub cut: Vec<&'a str>,
    /// Values the recorder dropped.
    pub dropped: u64,
}

/// The log record of event `e` whose fields are `fields` (name and value, in order;
/// see the [module docs](self)): the last `message` field is the body.
pub fn event_record<'f>(e: &Event<'_>, fields: impl IntoIterator<Item = (&'f str, Option<V>)>) -> LogRecord {
    let mut attrs = Attributes::new(e.dropped);
    let mut message = None;
    for (key, value) in fields {
        if key == "message" {
            message = Some(value);
        } else {
            attrs.field(key, value);
        }
    }
    if let Some(t) = e.target {
        attrs.add("code.namespace", string(t));
    }
    attrs.thread(e.thread);
    if let Some(n) = e.span_name {
        attrs.add("span.name", string(n));
    }
    if let Some(id) = e.span_id {
        attrs.add("ringtrace.span_id", string(id.to_string()));
    }
    if !e.cut.is_empty() {
        let values = e.cut.iter().map(|c| AnyValue { value: Some(string(*c)) }).collect();
        attrs.add("ringtrace.cut", V::ArrayValue(ArrayValue { values }));
    }
    let body = match &message {
        Some(m) => m.clone(),
        None => e.name.map(string),
    };
    let mut r = log_record(e.time_ns, e.level, body, attrs);
    if let Some(None) = message {
        // A `null` message: an empty body, as an empty attribute value.
        r.body = Some(AnyValue { value: None });
    }
    r
}

/// The log record that says `count` events were lost on `thread` at `time_ns` (see the
/// [module docs](self)).
pub fn lost_record(time_ns: u64, count: u64, thread: Thread<'_>) -> LogRecord {
    let mut attrs = Attributes::new(0);
    attrs.add("ringtrace.lost", uint(u128::from(count)));
    attrs.thread(thread);
    let body = string(format!("ringtrace: {count} events lost here (ring full)"));
    log_record(time_ns, Some(Level::WARN), Some(body), attrs)
}

/// A resource of the names given (`service.name`, `host.name`, `process.pid`,
/// `process.executable.name`), those known.
pub fn resource(service: &str, host: Option<&str>, pid: Option<u32>, executable: Option<&str>) -> Resource {
    let mut a = vec![kv("service.name", Some(string(service)))];
    if let Some(h) = host {
        a.push(kv("host.name", Some(string(h))));
    }
    if let Some(p) = pid {
        a.push(kv("process.pid", Some(V::IntValue(i64::from(p)))));
    }
    if let Some(name) = executable {
        a.push(kv("process.executable.name", Some(string(name))));
    }
    Resource { attributes: a, ..Resource::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_ints_where_they_fit_an_i64() {
        assert_eq!(int(i128::from(i64::MIN)), V::IntValue(i64::MIN));
        assert_eq!(int(i128::from(i64::MIN) - 1), string("-9223372036854775809"));
        assert_eq!(uint(u128::from(u64::MAX)), string(u64::MAX.to_string()));
        assert_eq!(uint(u128::MAX), string(u128::MAX.to_string()));
        let n = |t: &str| json(&serde_json::from_str(t).unwrap());
        assert_eq!(n("9223372036854775807"), Some(V::IntValue(i64::MAX)));
        assert_eq!(n("9223372036854775808"), Some(string("9223372036854775808")));
        assert_eq!(n("1.0"), Some(V::DoubleValue(1.0)));
        assert_eq!(n("\"NaN\""), Some(string("NaN")));
        assert_eq!(n("null"), None);
        assert_eq!(n("[1,{\"a\":2}]"), Some(string("[1,{\"a\":2}]")));
        assert_eq!(double(f64::NEG_INFINITY), string("-Infinity"));
    }

    #[test]
    fn a_field_keeps_its_key_and_an_added_attribute_is_dropped() {
        let mut a = Attributes::new(2);
        a.field("thread.id", Some(string("mine")));
        a.field("n", Some(V::IntValue(1)));
        a.field("n", Some(V::IntValue(2)));
        a.add("thread.id", V::IntValue(7));
        a.add("code.namespace", string("app"));
        let (list, dropped) = a.into_parts();
        let got: Vec<(&str, Option<&V>)> =
            list.iter().map(|k| (k.key.as_str(), k.value.as_ref().and_then(|v| v.value.as_ref()))).collect();
        let want = [("thread.id", string("mine")), ("n", V::IntValue(2)), ("code.namespace", string("app"))];
        assert_eq!(got, want.iter().map(|(k, v)| (*k, Some(v))).collect::<Vec<_>>());
        assert_eq!(dropped, 3);
    }

    #[test]
    fn levels_by_name_and_severities() {
        for (name, n) in [("TRACE", 1), ("DEBUG", 5), ("INFO", 9), ("WARN", 13), ("ERROR", 17)] {
            assert_eq!(severity(level_named(name)), (n, name));
        }
        assert_eq!(level_named("info"), None, "the names as tracing writes them only");
        assert_eq!(severity(level_named("LOUD")), (0, ""));
    }
}
