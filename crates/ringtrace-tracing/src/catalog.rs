//! The catalog: what records refer to by number. A callsite's metadata is written once,
//! when `tracing` registers it, and events carry its number; a thread's name and id are
//! written once, when the thread's first record takes a ring (a *lane*), and records
//! carry only the lane. Kept in memory for dumps and, for a recorder in a directory,
//! appended to the directory's catalog file as it grows, so that a tool reading the
//! directory from outside, or after the process died, can name everything.
//!
//! ```text
//! callsite  id u32  flags u8 (1 span, 2 module, 4 file, 8 line)  level u8 (0 TRACE .. 4 ERROR)
//!           line u32  name  target  module  file  fields u8  field names
//! thread    lane u32  tid u32  number u64  since_ns u64  name
//! ```
//!
//! A lane can be taken by several threads one after another (a recorder directory's
//! slots are reused once their thread exits): a record belongs to the thread that took
//! its lane last at or before the record's time (`since_ns`, in the records' time base).
//!
//! Every byte format of the project, with this one, is laid out in one page:
//! `docs/formats.md` in the repository.

use std::borrow::Cow;
use std::fs::File;
use std::io::Write;
use std::sync::{Mutex, MutexGuard};

use tracing_core::{Level, Metadata};

use crate::file::{self, chunk, put_text, text};
use crate::wire::{Cursor, WireError};

/// A callsite's metadata, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Callsite {
    /// The number records refer to it by.
    pub id: u32,
    /// A span's callsite (else an event's).
    pub is_span: bool,
    pub level: Level,
    pub name: String,
    pub target: String,
    pub module_path: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The names of its fields, in order (values refer to them by index).
    pub fields: Vec<String>,
}

/// The name of field `index` of `callsite`: its own, or `field{index}` where the trace
/// lacks the callsite or the callsite has no such field.
pub fn field_name(callsite: Option<&Callsite>, index: u8) -> Cow<'_, str> {
    match callsite.and_then(|c| c.fields.get(index as usize)) {
        Some(name) => Cow::Borrowed(name),
        None => Cow::Owned(format!("field{index}")),
    }
}

const SPAN: u8 = 1;
const MODULE: u8 = 2;
const FILE: u8 = 4;
const LINE: u8 = 8;

fn level_code(l: &Level) -> u8 {
    match *l {
        Level::TRACE => 0,
        Level::DEBUG => 1,
        Level::INFO => 2,
        Level::WARN => 3,
        _ => 4,
    }
}

impl Callsite {
    /// The catalog entry of `meta`.
    pub fn encode(id: u32, meta: &Metadata<'_>) -> Vec<u8> {
        let fields: Vec<&str> = meta.fields().iter().map(|f| f.name()).collect();
        Callsite::encode_parts(
            id,
            &Parts {
                is_span: meta.is_span(),
                level: *meta.level(),
                name: meta.name(),
                target: meta.target(),
                module_path: meta.module_path(),
                file: meta.file(),
                line: meta.line(),
                fields: &fields,
            },
        )
    }

    /// The catalog entry of a callsite given by its parts (at most 255 fields are kept;
    /// each text at most 65,535 bytes).
    pub(crate) fn encode_parts(id: u32, p: &Parts<'_>) -> Vec<u8> {
        let mut b = Vec::with_capacity(64);
        let flags = if p.is_span { SPAN } else { 0 }
            | if p.module_path.is_some() { MODULE } else { 0 }
            | if p.file.is_some() { FILE } else { 0 }
            | if p.line.is_some() { LINE } else { 0 };
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&[flags, level_code(&p.level)]);
        b.extend_from_slice(&p.line.unwrap_or(0).to_le_bytes());
        put_text(&mut b, p.name);
        put_text(&mut b, p.target);
        put_text(&mut b, p.module_path.unwrap_or(""));
        put_text(&mut b, p.file.unwrap_or(""));
        let fields = &p.fields[..p.fields.len().min(u8::MAX as usize)];
        b.push(fields.len() as u8);
        for f in fields {
            put_text(&mut b, f);
        }
        b
    }

    pub fn decode(b: &[u8]) -> Result<Callsite, WireError> {
        let mut c = Cursor::new(b);
        let id = c.u32("callsite id")?;
        let flags = c.u8("callsite flags")?;
        let level = match c.u8("level")? {
            0 => Level::TRACE,
            1 => Level::DEBUG,
            2 => Level::INFO,
            3 => Level::WARN,
            4 => Level::ERROR,
            other => return Err(WireError::Kind(other)),
        };
        let line = c.u32("line")?;
        let name = text(&mut c, "name")?;
        let target = text(&mut c, "target")?;
        let module = text(&mut c, "module")?;
        let file = text(&mut c, "file")?;
        let n = c.u8("field count")?;
        let fields = (0..n).map(|_| text(&mut c, "field name")).collect::<Result<_, _>>()?;
        if !c.is_empty() {
            return Err(WireError::Trailing);
        }
        Ok(Callsite {
            id,
            is_span: flags & SPAN != 0,
            level,
            name,
            target,
            module_path: (flags & MODULE != 0).then_some(module),
            file: (flags & FILE != 0).then_some(file),
            line: (flags & LINE != 0).then_some(line),
            fields,
        })
    }
}

/// A callsite's metadata, borrowed: what [`Callsite::encode_parts`] writes.
pub(crate) struct Parts<'a> {
    pub is_span: bool,
    pub level: Level,
    pub name: &'a str,
    pub target: &'a str,
    pub module_path: Option<&'a str>,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub fields: &'a [&'a str],
}

/// A thread that took a lane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadInfo {
    /// The ring (the channel's producer number) it writes into.
    pub lane: u32,
    /// Its kernel thread id.
    pub tid: u32,
    /// Its number in the recorder, from 1, in the order threads first wrote.
    pub number: u64,
    /// When it took the lane (`CLOCK_MONOTONIC` nanoseconds, the records' time base).
    pub since_ns: u64,
    /// Its name (`std::thread::Builder::name`), or empty.
    pub name: String,
}

impl ThreadInfo {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(32 + self.name.len());
        b.extend_from_slice(&self.lane.to_le_bytes());
        b.extend_from_slice(&self.tid.to_le_bytes());
        b.extend_from_slice(&self.number.to_le_bytes());
        b.extend_from_slice(&self.since_ns.to_le_bytes());
        put_text(&mut b, &self.name);
        b
    }

    pub fn decode(b: &[u8]) -> Result<ThreadInfo, WireError> {
        let mut c = Cursor::new(b);
        let t = ThreadInfo {
            lane: c.u32("lane")?,
            tid: c.u32("tid")?,
            number: c.u64("thread number")?,
            since_ns: c.u64("since")?,
            name: text(&mut c, "thread name")?,
        };
        if !c.is_empty() {
            return Err(WireError::Trailing);
        }
        Ok(t)
    }

    /// How a decoded line names the thread: its name, else `thread-N`.
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            format!("thread-{}", self.number)
        } else {
            self.name.clone()
        }
    }
}

/// The catalog's entries (chunk kind and payload, in the order they were added) and,
/// for a recorder in a directory, the file they are appended to.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
pub(crate) struct Entries {
    pub chunks: Vec<(u8, Vec<u8>)>,
    file: Option<File>,
    /// Appending to the file failed this many times (the entry is still in memory).
    pub file_errors: u64,
}

impl Catalog {
    /// A catalog also appended to `file` (opened for appending, header written).
    pub fn with_file(file: File) -> Catalog {
        Catalog { inner: Mutex::new(Entries { file: Some(file), ..Entries::default() }) }
    }

    /// The entries. Never poisoned for readers: a panic while holding the lock leaves
    /// whole entries only (one push, one write).
    pub fn lock(&self) -> MutexGuard<'_, Entries> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The entries, if the lock is free within `patience` (a panic hook must not wait
    /// forever on a lock its own thread may hold).
    pub fn try_lock_for(&self, patience: std::time::Duration) -> Option<MutexGuard<'_, Entries>> {
        let deadline = std::time::Instant::now() + patience;
        loop {
            match self.inner.try_lock() {
                Ok(g) => return Some(g),
                Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_micros(100))
                }
                Err(std::sync::TryLockError::WouldBlock) => return None,
            }
        }
    }

    /// Adds an entry; in a directory, appends it to the catalog file with one write.
    pub fn add(&self, kind: u8, payload: Vec<u8>) {
        let mut e = self.lock();
        if let Some(f) = &mut e.file {
            if f.write_all(&file::encode_chunk(kind, &payload)).is_err() {
                e.file_errors += 1;
            }
        }
        e.chunks.push((kind, payload));
    }

    /// Adds a thread entry.
    pub fn add_thread(&self, t: &ThreadInfo) {
        self.add(chunk::THREAD, t.encode());
    }
}
