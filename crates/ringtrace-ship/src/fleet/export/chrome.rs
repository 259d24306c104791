//! The Chrome export: `{"traceEvents":[...]}`, one event a line, the metadata of a
//! process or thread just before its first record.

use std::io::{self, Write};

use ringtrace_tracing::decode::text::json_int;

use super::{spill, text_of, Entry, Exported, Fleet, Head, Tracks, Use, CATEGORY, FLUSH_AT, NAME};

/// Writes events, one a line, comma-separated, gathered in `buf`.
struct Events<'w, W: Write> {
    out: &'w mut W,
    buf: Vec<u8>,
    first: bool,
}

impl<W: Write> Events<'_, W> {
    /// Starts an event's line.
    fn start(&mut self) {
        self.buf.extend_from_slice(if self.first { b"\n" } else { b",\n" });
        self.first = false;
    }

    /// A metadata event: `name` with `args: {key: value}`.
    fn meta(&mut self, name: &str, pid: u32, tid: u32, key: &str, value: &serde_json::Value) -> io::Result<()> {
        self.start();
        write!(self.buf, r#"{{"ph":"M","name":"{name}","pid":{pid},"tid":{tid},"args":{{"{key}":{value}}}}}"#)
    }

    /// A record's instant.
    fn instant(&mut self, e: &Entry<'_>, pid: u32, tid: u32) -> io::Result<()> {
        self.start();
        let b = &mut self.buf;
        write!(
            b,
            r#"{{"ph":"i","s":"t","name":"{NAME}","cat":"{CATEGORY}","ts":{}.{:03},"pid":{pid},"tid":{tid},"args":{{"seq":{},"len":{},"head":""#,
            e.time_ns / 1000,
            e.time_ns % 1000,
            // A decimal string beyond 2^53 - 1, as `ringtrace decode` writes integers.
            json_int(i128::from(e.seq)),
            e.payload.len(),
        )?;
        b.extend_from_slice(Head::of(e.payload).as_bytes());
        b.push(b'"');
        if let Some(text) = text_of(e.payload) {
            b.extend_from_slice(br#","text":"#);
            serde_json::to_writer(&mut *b, text)?;
        }
        b.extend_from_slice(b"}}");
        spill(&mut self.buf, self.out)
    }
}

pub(super) fn write<'a, W: Write>(
    fleet: &'a Fleet,
    entries: impl IntoIterator<Item = Entry<'a>>,
    out: &mut W,
) -> io::Result<Exported> {
    let mut tracks = Tracks::new(fleet);
    let mut ev = Events { out, buf: Vec::with_capacity(FLUSH_AT + 4096), first: true };
    ev.buf.extend_from_slice(br#"{"traceEvents":["#);
    let mut records = 0u64;
    for e in entries {
        let i = tracks.find(&e);
        let (host, pid, source, tid) = tracks.ids(i);
        let u = tracks.first_use(i);
        // Metadata events have no `ts`; the process's are given on its first thread, so
        // that readers make no thread of them.
        if u == Use::NewHost {
            ev.meta("process_name", pid, tid, "name", &host.into())?;
            ev.meta("process_sort_index", pid, tid, "sort_index", &pid.into())?;
        }
        if u != Use::Again {
            ev.meta("thread_name", pid, tid, "name", &source.into())?;
            ev.meta("thread_sort_index", pid, tid, "sort_index", &tid.into())?;
        }
        ev.instant(&e, pid, tid)?;
        records += 1;
    }
    ev.buf.extend_from_slice(b"\n]}\n");
    ev.out.write_all(&ev.buf)?;
    ev.out.flush()?;
    Ok(tracks.exported(records))
}
