//! Event classes: the kinds of an event's arguments, and the classes made of them.

use std::fmt::Write as _;
use std::io;

use foldhash::HashMap;

use super::text::{ident, put_string, quoted};

/// An argument's CTF type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `uint64_t`.
    U64,
    /// `int64_t`.
    I64,
    /// `double`.
    F64,
    /// `uint8_t`, 0 or 1.
    Bool,
    /// A string ([`put_string`]).
    Text,
}

impl Kind {
    fn tsdl(self) -> &'static str {
        match self {
            Kind::U64 => "uint64_t",
            Kind::I64 => "int64_t",
            Kind::F64 => "double",
            Kind::Bool => "uint8_t",
            Kind::Text => "string",
        }
    }

    fn from_bits(b: u64) -> Kind {
        [Kind::U64, Kind::I64, Kind::F64, Kind::Bool, Kind::Text][b as usize]
    }
}

/// An event's argument kinds in order: packed 3 bits a kind with their count where
/// they fit (no allocation per event), listed where they do not.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// Up to 21 kinds.
    Packed(usize, u64),
    /// More.
    Listed(Vec<Kind>),
}

impl Shape {
    /// The shape of the kinds `kinds` gives.
    pub fn of(kinds: impl Iterator<Item = Kind>) -> Shape {
        let mut kinds = kinds.peekable();
        let (mut n, mut bits) = (0, 0u64);
        while n < 21 {
            let Some(k) = kinds.next() else { return Shape::Packed(n, bits) };
            bits = (bits << 3) | k as u64;
            n += 1;
        }
        if kinds.peek().is_none() {
            return Shape::Packed(n, bits);
        }
        let mut listed: Vec<Kind> = (0..n).rev().map(|i| Kind::from_bits((bits >> (3 * i)) & 7)).collect();
        listed.extend(kinds);
        Shape::Listed(listed)
    }
}

/// An event class, described once: its name, its log level (syslog's numbers, as
/// LTTng gives them) where it has one, and its fields' names and kinds.
#[derive(Debug)]
pub struct Class {
    /// Its name.
    pub name: String,
    /// Its log level.
    pub loglevel: Option<u8>,
    /// Its fields (names are made TSDL identifiers, distinct).
    pub fields: Vec<(String, Kind)>,
}

/// The classes made so far: `(number, shape)` to id, and their TSDL.
#[derive(Debug, Default)]
pub(super) struct Classes {
    ids: HashMap<(u64, Shape), u32>,
    pub(super) tsdl: String,
}

/// An event's arguments being written by
/// [`CtfArgs::write_ctf`]: its field values, then its
/// class.
#[derive(Debug)]
pub struct Event<'a> {
    pub(super) buf: &'a mut Vec<u8>,
    pub(super) classes: &'a mut Classes,
    pub(super) class: Option<u32>,
}

impl Event<'_> {
    /// Appends a `uint64_t`.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends an `int64_t`.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a `double`.
    pub fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a bool as `uint8_t`.
    pub fn bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }

    /// Appends a string ([`put_string`]).
    pub fn text(&mut self, s: &str) {
        put_string(self.buf, s);
    }

    /// Sets the event's class: the one of `number` and `shape`, described by `describe`
    /// the first time.
    pub fn class(&mut self, number: u64, shape: Shape, describe: impl FnOnce() -> Class) {
        let key = (number, shape);
        if let Some(&id) = self.classes.ids.get(&key) {
            self.class = Some(id);
            return;
        }
        let id = 2 + self.classes.ids.len() as u32;
        let c = describe();
        let t = &mut self.classes.tsdl;
        let _ = write!(t, "event {{\n    name = {};\n    id = {id};\n    stream_id = 0;\n", quoted(&c.name));
        if let Some(l) = c.loglevel {
            let _ = writeln!(t, "    loglevel = {l};");
        }
        t.push_str("    fields := struct {\n");
        let mut seen = HashMap::default();
        for (field, kind) in &c.fields {
            let mut name = ident(field);
            // Names that sanitize alike stay distinct.
            let n = seen.entry(name.clone()).or_insert(0);
            *n += 1;
            if *n > 1 {
                let _ = write!(name, "_{n}");
            }
            let _ = writeln!(t, "        {} {name};", kind.tsdl());
        }
        t.push_str("    };\n};\n\n");
        self.classes.ids.insert(key, id);
        self.class = Some(id);
    }
}

/// Arguments with a CTF form: written as a CTF event's fields, typed, naming the
/// event's class ([`Event::class`]). The [`Writer`](super::Writer) writes an instant's
/// arguments through this.
pub trait CtfArgs {
    /// Writes the fields into `ev` and names its class.
    fn write_ctf(&self, ev: &mut Event<'_>) -> io::Result<()>;
}

/// No arguments: records that carry none (a process, a thread, a slice's end) are
/// written without them; an instant with none has no CTF form.
impl CtfArgs for () {
    fn write_ctf(&self, _ev: &mut Event<'_>) -> io::Result<()> {
        Err(io::Error::other("an instant without arguments has no CTF form"))
    }
}

impl<A: CtfArgs + ?Sized> CtfArgs for &A {
    fn write_ctf(&self, ev: &mut Event<'_>) -> io::Result<()> {
        (**self).write_ctf(ev)
    }
}
