//! The CTF 1.8 export: a stream file per source, its packets' context naming the
//! source and its host, and `metadata` written last.

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::Path;

use ringtrace_tracing::export::ctf::{put_string, METADATA_HEAD};

use super::{text_of, Entry, Exported, Fleet, Head, Tracks, Use, CATEGORY, NAME};

/// A packet is ended once its events reach this many bytes.
const PACKET_EVENTS: usize = 1 << 20;
/// CTF's packet magic.
const MAGIC: u32 = 0xC1FC_1FC1;
/// The fixed bytes of a packet's header and context: magic, stream id; timestamp
/// begin and end, content size, packet size; pid, tid (the names follow).
const FIXED: usize = 4 + 4 + 8 * 4 + 4 + 4;
/// The latest event time written: babeltrace2 keeps times as signed 64-bit ns from
/// the clock's origin, and refuses `i64::MAX` itself.
const LATEST: u64 = i64::MAX as u64 - 1;
/// The one event class's id.
const RECORD: u32 = 0;

/// `s` as a TSDL string literal.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One source's stream file and its open packet.
struct Stream {
    out: BufWriter<File>,
    /// The end of every packet's context: pid, tid, host, source.
    tail: Vec<u8>,
    events: Vec<u8>,
    /// The first and last event times of the open packet.
    begin: u64,
    end: u64,
    /// The last time written to the stream: no event is stamped before it.
    last: Option<u64>,
}

impl Stream {
    /// Writes the open packet, if it holds events.
    fn flush(&mut self) -> io::Result<()> {
        if self.events.is_empty() {
            return Ok(());
        }
        let bits = ((FIXED - 8 + self.tail.len() + self.events.len()) as u64).saturating_mul(8);
        let mut h = [0u8; FIXED - 8];
        let fields = [self.begin, self.end, bits, bits];
        h[..4].copy_from_slice(&MAGIC.to_le_bytes());
        // The stream class id (bytes 4..8) is 0.
        for (slot, v) in h[8..].chunks_exact_mut(8).zip(fields) {
            slot.copy_from_slice(&v.to_le_bytes());
        }
        self.out.write_all(&h)?;
        self.out.write_all(&self.tail)?;
        self.out.write_all(&self.events)?;
        self.events.clear();
        Ok(())
    }

    /// Appends `e`'s event.
    fn event(&mut self, e: &Entry<'_>) -> io::Result<()> {
        // A stream cannot go back in time: an earlier record is stamped at the last
        // time, and keeps its own in `time_ns`; nor can babeltrace2 take times past
        // `i64::MAX` ns.
        let ts = self.last.map_or(e.time_ns, |last| last.max(e.time_ns)).min(LATEST);
        self.last = Some(ts);
        if self.events.is_empty() {
            self.begin = ts;
        }
        self.end = ts;
        let b = &mut self.events;
        b.extend_from_slice(&RECORD.to_le_bytes());
        b.extend_from_slice(&ts.to_le_bytes());
        b.extend_from_slice(&e.seq.to_le_bytes());
        b.extend_from_slice(&(e.payload.len() as u64).to_le_bytes());
        b.extend_from_slice(&e.time_ns.to_le_bytes());
        b.extend_from_slice(Head::of(e.payload).as_bytes());
        b.push(0);
        // Escaped as every CTF string ringtrace writes: text has no NUL, but may have
        // backslashes.
        put_string(b, text_of(e.payload).unwrap_or(""));
        if self.events.len() >= PACKET_EVENTS {
            self.flush()?;
        }
        Ok(())
    }
}

fn create(path: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

pub(super) fn write<'a>(
    fleet: &'a Fleet,
    entries: impl IntoIterator<Item = Entry<'a>>,
    dir: &Path,
) -> io::Result<Exported> {
    fs::create_dir_all(dir)?;
    let mut tracks = Tracks::new(fleet);
    let mut streams: Vec<Option<Stream>> = Vec::new();
    // The hosts written, for the env: pid and name.
    let mut hosts = Vec::new();
    let mut records = 0u64;
    for e in entries {
        let i = tracks.find(&e);
        if streams.len() <= i {
            streams.resize_with(i + 1, || None);
        }
        let u = tracks.first_use(i);
        let slot = &mut streams[i];
        if slot.is_none() {
            let (host, pid, source, tid) = tracks.ids(i);
            if u == Use::NewHost {
                hosts.push((pid, host));
            }
            let out = BufWriter::with_capacity(1 << 16, create(&dir.join(format!("stream-{pid}-{tid}")))?);
            let mut tail = Vec::with_capacity(8 + host.len() + source.len() + 2);
            tail.extend_from_slice(&pid.to_le_bytes());
            tail.extend_from_slice(&tid.to_le_bytes());
            put_string(&mut tail, host);
            put_string(&mut tail, source);
            *slot = Some(Stream { out, tail, events: Vec::new(), begin: 0, end: 0, last: None });
        }
        if let Some(s) = slot {
            s.event(&e)?;
        }
        records += 1;
    }
    for s in streams.iter_mut().flatten() {
        s.flush()?;
        s.out.flush()?;
    }
    let mut meta = create(&dir.join("metadata"))?;
    meta.write_all(metadata(&hosts).as_bytes())?;
    meta.flush()?;
    Ok(tracks.exported(records))
}

fn metadata(hosts: &[(u32, &str)]) -> String {
    let mut m = String::from(METADATA_HEAD);
    m.push_str(
        "typealias integer { size = 32; align = 8; signed = false; } := uint32_t;\n\
         typealias integer { size = 64; align = 8; signed = false; } := uint64_t;\n\n\
         trace {\n    major = 1;\n    minor = 8;\n    byte_order = le;\n    \
         packet.header := struct { uint32_t magic; uint32_t stream_id; };\n};\n\n",
    );
    m.push_str("env {\n    tracer_name = \"ringtrace-ship\";\n");
    for (pid, host) in hosts {
        let _ = writeln!(m, "    host_{pid} = {};", quoted(host));
    }
    m.push_str("};\n\n");
    m.push_str(
        "clock {\n    name = realtime;\n    description = \"wall clock: ns since the Unix epoch\";\n    \
         freq = 1000000000;\n    offset_s = 0;\n    offset = 0;\n    absolute = true;\n};\n\n\
         typealias integer { size = 64; align = 8; signed = false; map = clock.realtime.value; } := clk64_t;\n\n\
         stream {\n    id = 0;\n    packet.context := struct {\n        clk64_t timestamp_begin;\n        \
         clk64_t timestamp_end;\n        uint64_t content_size;\n        uint64_t packet_size;\n        \
         uint32_t pid;\n        uint32_t tid;\n        string host;\n        string source;\n    };\n    \
         event.header := struct { uint32_t id; clk64_t timestamp; };\n};\n\n",
    );
    let _ = write!(
        m,
        "event {{\n    name = \"{CATEGORY}:{NAME}\";\n    id = {RECORD};\n    stream_id = 0;\n    \
         fields := struct {{\n        uint64_t seq;\n        uint64_t len;\n        uint64_t time_ns;\n        \
         string head;\n        string text;\n    }};\n}};\n"
    );
    m
}
