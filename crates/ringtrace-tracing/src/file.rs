//! The trace file: what a dump, a stream and a recorder directory's catalog are
//! written in. A header, then chunks, each checked by a CRC32C:
//!
//! ```text
//! header   "RTTRACE\0" (8)  version u32 (2; 1 is read too)  reserved u32 (0)
//! chunk    kind u8  0 0 0  len u32  crc u32  payload[len]
//!          crc: CRC32C of the chunk's first 8 bytes, then of the payload
//! ```
//!
//! Kinds: 1 process (who wrote the trace, and its clock anchor), 2 callsite, 3 thread
//! (see [`crate::catalog`]), 4 records (`lane u32  ts u64  len u32  bytes[len]`,
//! repeated; `ts` in `CLOCK_MONOTONIC` nanoseconds), 5 stats (`name` text, `value
//! u64`, repeated), 6 end (empty: the writer finished; a file cut at a chunk boundary
//! lacks it). Text is `len u16` then UTF-8. Integers are little-endian.
//!
//! A chunk that fails its checksum is skipped, and reading goes on at the next chunk,
//! where its head's length leads, if that chunk is sound (its checksum confirms the
//! length; or the damaged chunk ends exactly at the file's end). Where it leads to no
//! sound chunk (a length that cannot be trusted gives no way further), reading stops:
//! the rest of the file is damaged. A file that ends inside a chunk is cut short. Both
//! are reported, with where they start ([`Damage`]).
//!
//! Every byte format of the project, with this one, is laid out in one page:
//! `docs/formats.md` in the repository.

use std::io::{self, Write};

use crate::wire::{self, Cursor, WireError};

/// The file's first 8 bytes.
pub const MAGIC: [u8; 8] = *b"RTTRACE\0";
/// The format version this crate writes. It reads this one and version 1.
pub const VERSION: u32 = 2;
/// The format before `open` and `done` records (each a span's two records in one): its
/// files hold none, and are read as they are.
pub const VERSION_1: u32 = 1;
/// Bytes of the file header.
pub const HEADER_LEN: usize = 16;
/// Bytes before a chunk's payload.
pub const CHUNK_HEAD: usize = 12;
/// The largest chunk a reader accepts.
pub const MAX_CHUNK: u32 = 64 << 20;

/// The channel file of a recorder directory.
pub const RINGS_FILE: &str = "rings.chan";
/// The catalog file of a recorder directory (a trace file of process, callsite and
/// thread chunks).
pub const CATALOG_FILE: &str = "catalog.rtt";

/// Chunk kinds.
pub mod chunk {
    pub const PROCESS: u8 = 1;
    pub const CALLSITE: u8 = 2;
    pub const THREAD: u8 = 3;
    pub const RECORDS: u8 = 4;
    pub const STATS: u8 = 5;
    pub const END: u8 = 6;
}

/// The file header's bytes.
pub fn header() -> [u8; HEADER_LEN] {
    let mut h = [0; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// One chunk's bytes, head and payload.
pub fn encode_chunk(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(CHUNK_HEAD + payload.len());
    out.extend_from_slice(&[kind, 0, 0, 0]);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out), payload);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Writes chunks to `w`.
pub fn write_chunk(w: &mut impl Write, kind: u8, payload: &[u8]) -> io::Result<()> {
    w.write_all(&encode_chunk(kind, payload))
}

/// Appends text (cut to 65,535 bytes on a character boundary).
pub fn put_text(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(u16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u16).to_le_bytes());
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// Reads text written by [`put_text`].
pub(crate) fn text(c: &mut Cursor<'_>, what: &'static str) -> Result<String, WireError> {
    let n = c.u16(what)? as usize;
    String::from_utf8(c.bytes(n, what)?.to_vec()).map_err(|_| WireError::Utf8)
}

/// Appends one record to a records chunk's payload.
pub fn put_record(out: &mut Vec<u8>, lane: u32, ts: u64, bytes: &[u8]) {
    out.extend_from_slice(&lane.to_le_bytes());
    out.extend_from_slice(&ts.to_le_bytes());
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Bytes of a trace file that could not be read: a damaged chunk, or where the file is
/// cut short.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Damage {
    /// Byte offset (in the file) of the chunk that could not be read.
    pub offset: u64,
    /// Bytes from there not read: the chunk's, or, where reading stopped there
    /// ([`stopped`](Damage::stopped)), all to the end of the file.
    pub bytes: u64,
    /// What its head says it is: `records chunk`, `callsite chunk`, ... (`chunk` for a
    /// kind this version does not know).
    pub what: &'static str,
    /// Why it could not be read.
    pub reason: String,
    /// Whether reading stopped there: no sound chunk follows where its length leads.
    pub stopped: bool,
    /// A damaged records chunk skipped alone: the records and the events it held, where
    /// its framing parses to its end and every record it frames decodes
    /// (`frame_count`); `None` where they cannot be counted.
    pub records: Option<u64>,
    pub events: Option<u64>,
}

/// What of a trace file's chunks could not be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Losses {
    /// Damaged chunks, in file order; the last may run to the end of the file
    /// ([`Damage::stopped`]).
    pub damaged: Vec<Damage>,
    /// Where the file ends inside a chunk (or its head): the file is cut short.
    pub cut: Option<Damage>,
}

/// Why a file is not a trace file at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotATrace {
    #[error("empty file: not a trace (0 bytes)")]
    Empty,
    #[error("{0} bytes: shorter than a trace file's {HEADER_LEN}-byte header")]
    Short(usize),
    #[error("not a ringtrace trace file (its first bytes are not \"RTTRACE\\0\")")]
    Magic,
    #[error("trace file format version {0}; this build reads versions {VERSION_1} and {VERSION}")]
    Version(u32),
    #[error("trace file flags {0:#x}: none are defined")]
    Flags(u32),
}

/// A chunk: its kind and payload.
pub type Chunk<'a> = (u8, &'a [u8]);

/// A record of a records chunk: lane, timestamp, bytes.
pub type FileRecord<'a> = (u32, u64, &'a [u8]);

/// Checks a trace file's header (its first [`HEADER_LEN`] bytes, or fewer if the file is
/// shorter).
pub fn check_header(b: &[u8]) -> Result<(), NotATrace> {
    if b.is_empty() {
        return Err(NotATrace::Empty);
    }
    if b.len() < HEADER_LEN {
        return Err(NotATrace::Short(b.len()));
    }
    if b[..8] != MAGIC {
        return Err(NotATrace::Magic);
    }
    let version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
    if version != VERSION && version != VERSION_1 {
        return Err(NotATrace::Version(version));
    }
    let flags = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
    if flags != 0 {
        return Err(NotATrace::Flags(flags));
    }
    Ok(())
}

/// A chunk's head: its kind, its payload's length and its checksum; or why its length
/// cannot be trusted.
fn chunk_head(head: &[u8; CHUNK_HEAD]) -> Result<(u8, u32, u32), String> {
    let [kind, _, _, _, l0, l1, l2, l3, c0, c1, c2, c3] = *head;
    let len = u32::from_le_bytes([l0, l1, l2, l3]);
    if len > MAX_CHUNK {
        return Err(format!("its head gives a length of {len} bytes, over the {MAX_CHUNK}-byte limit"));
    }
    Ok((kind, len, u32::from_le_bytes([c0, c1, c2, c3])))
}

/// Whether a chunk's head and payload match its checksum.
pub fn chunk_sound(head: &[u8], payload: &[u8], crc: u32) -> bool {
    head.len() >= 8 && crc32c::crc32c_append(crc32c::crc32c(&head[..8]), payload) == crc
}

/// What a chunk of kind `kind` is called in messages.
pub fn kind_name(kind: u8) -> &'static str {
    match kind {
        chunk::PROCESS => "process chunk",
        chunk::CALLSITE => "callsite chunk",
        chunk::THREAD => "thread chunk",
        chunk::RECORDS => "records chunk",
        chunk::STATS => "stats chunk",
        chunk::END => "end chunk",
        _ => "chunk",
    }
}

/// Where a chunk of a trace file lies, as its head says (its payload not read yet).
#[derive(Clone, Debug)]
pub struct ChunkAt {
    /// Where its head starts.
    pub head: u64,
    pub kind: u8,
    /// Its payload's length.
    pub len: u32,
    pub crc: u32,
}

/// Where a walk of chunk heads stopped before the file's end: what lies there, and
/// whether the file ends inside it (it is cut short; else its head is damaged).
#[derive(Debug)]
pub struct Stop {
    pub damage: Damage,
    pub cut: bool,
}

/// The chunks of a trace file of `len` bytes from its header on, found by their heads
/// alone (`read_head` reads the head at an offset), and where they stop making sense: a
/// head cut short, a length over the limit or past the file's end.
fn walk<E>(
    len: u64,
    mut read_head: impl FnMut(u64, &mut [u8; CHUNK_HEAD]) -> Result<(), E>,
) -> Result<(Vec<ChunkAt>, Option<Stop>), E> {
    let mut out = Vec::new();
    let mut at = HEADER_LEN as u64;
    let mut head = [0u8; CHUNK_HEAD];
    // Each chunk advances `at` by at least its head: the loop is bounded by the length.
    while at < len {
        let stop = |what, reason, cut| {
            let damage =
                Damage { offset: at, bytes: len - at, what, reason, stopped: true, records: None, events: None };
            Some(Stop { damage, cut })
        };
        if len - at < CHUNK_HEAD as u64 {
            return Ok((out, stop("chunk", "the file ends inside its head".into(), true)));
        }
        read_head(at, &mut head)?;
        let (kind, n, crc) = match chunk_head(&head) {
            Ok(h) => h,
            Err(reason) => return Ok((out, stop(kind_name(head[0]), reason, false))),
        };
        if len - at - (CHUNK_HEAD as u64) < u64::from(n) {
            let reason = format!("its head gives {n} bytes, past the file's end");
            return Ok((out, stop(kind_name(kind), reason, true)));
        }
        out.push(ChunkAt { head: at, kind, len: n, crc });
        at += CHUNK_HEAD as u64 + u64::from(n);
    }
    Ok((out, None))
}

/// [`walk`] of a trace file, its header checked already, read with positioned reads.
pub fn chunk_heads(f: &std::fs::File, len: u64) -> io::Result<(Vec<ChunkAt>, Option<Stop>)> {
    use std::os::unix::fs::FileExt;
    walk(len, |at, head| f.read_exact_at(head, at))
}

/// Which chunks of a trace file are read, and what could not be, from their heads (and
/// where the heads stopped) and which chunks are `sound` (match their checksums).
/// `count(i)` gives the records and events of the damaged records chunk `i`, where they
/// can be counted ([`frame_count`]).
///
/// A run of chunks failing their checksums is skipped, chunk by chunk, where a sound
/// chunk follows it or it ends exactly at the file's end: the lengths its heads give
/// are then confirmed. Else reading stops at the run's first chunk, the rest of the
/// file damaged.
pub fn resolve(
    heads: &[ChunkAt],
    stop: Option<Stop>,
    len: u64,
    sound: &[bool],
    mut count: impl FnMut(usize) -> Option<(u64, u64)>,
) -> (Vec<bool>, Losses) {
    let mut read = vec![false; heads.len()];
    let mut losses = Losses::default();
    let mut i = 0;
    while i < heads.len() {
        if sound.get(i).copied().unwrap_or(false) {
            read[i] = true;
            i += 1;
            continue;
        }
        let end = (i..heads.len()).find(|&j| sound.get(j).copied().unwrap_or(false)).unwrap_or(heads.len());
        if end == heads.len() && stop.is_some() {
            let c = &heads[i];
            losses.damaged.push(Damage {
                offset: c.head,
                bytes: len - c.head,
                what: kind_name(c.kind),
                reason: "it fails its checksum, and no sound chunk follows where its length leads".into(),
                stopped: true,
                records: None,
                events: None,
            });
            return (read, losses);
        }
        for (j, c) in heads.iter().enumerate().take(end).skip(i) {
            let counted = if c.kind == chunk::RECORDS { count(j) } else { None };
            losses.damaged.push(Damage {
                offset: c.head,
                bytes: CHUNK_HEAD as u64 + u64::from(c.len),
                what: kind_name(c.kind),
                reason: "it fails its checksum".into(),
                stopped: false,
                records: counted.map(|c| c.0),
                events: counted.map(|c| c.1),
            });
        }
        i = end;
    }
    match stop {
        Some(s) if s.cut => losses.cut = Some(s.damage),
        Some(s) => losses.damaged.push(s.damage),
        None => {}
    }
    (read, losses)
}

/// The records and the events a damaged records chunk's payload held, as far as can be
/// told: if its framing parses to its end exactly and every record it frames is one
/// (else `None`). A damaged byte that leaves both so is a byte of a value, or of a
/// record's lane or time: the count is the one written.
pub fn frame_count(payload: &[u8]) -> Option<(u64, u64)> {
    let rs = records(payload).ok()?;
    if !rs.iter().all(|r| wire::check(r.2).is_ok()) {
        return None;
    }
    let events = rs.iter().filter(|r| r.2.first() == Some(&wire::kind::EVENT)).count();
    Some((rs.len() as u64, events as u64))
}

/// The chunks of a trace file's bytes that can be read, in order, and what could not
/// be (see [`resolve`]).
pub fn chunks(b: &[u8]) -> Result<(Vec<Chunk<'_>>, Losses), NotATrace> {
    check_header(b)?;
    let len = b.len() as u64;
    // Every head the walk reads lies inside `b`.
    let Ok((heads, stop)) = walk::<std::convert::Infallible>(len, |at, head| {
        head.copy_from_slice(&b[at as usize..][..CHUNK_HEAD]);
        Ok(())
    });
    let head = |c: &ChunkAt| &b[c.head as usize..][..CHUNK_HEAD];
    let payload = |c: &ChunkAt| &b[c.head as usize + CHUNK_HEAD..][..c.len as usize];
    let sound: Vec<bool> = heads.iter().map(|c| chunk_sound(head(c), payload(c), c.crc)).collect();
    let (read, losses) = resolve(&heads, stop, len, &sound, |i| frame_count(payload(&heads[i])));
    let out = heads.iter().zip(read).filter(|(_, r)| *r).map(|(c, _)| (c.kind, payload(c))).collect();
    Ok((out, losses))
}

/// Decodes a records chunk's payload: `(lane, ts, bytes)` each.
pub fn records(payload: &[u8]) -> Result<Vec<FileRecord<'_>>, WireError> {
    let mut c = Cursor::new(payload);
    let mut out = Vec::new();
    while !c.is_empty() {
        let lane = c.u32("record lane")?;
        let ts = c.u64("record timestamp")?;
        let n = c.u32("record length")? as usize;
        out.push((lane, ts, c.bytes(n, "record")?));
    }
    Ok(out)
}

/// Who wrote a trace, and the anchor that turns its timestamps into wall-clock time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    /// `CLOCK_REALTIME` and `CLOCK_MONOTONIC` nanoseconds read together.
    pub realtime_ns: u64,
    pub monotonic_ns: u64,
    /// The program's name.
    pub program: String,
}

impl Process {
    /// This process, now.
    pub fn now() -> Process {
        let monotonic_ns = ringtrace::clock::monotonic_ns();
        let realtime_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64);
        let program = std::env::args().next().unwrap_or_default();
        let program = program.rsplit('/').next().unwrap_or("").to_owned();
        Process { pid: std::process::id(), realtime_ns, monotonic_ns, program }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(32 + self.program.len());
        b.extend_from_slice(&self.pid.to_le_bytes());
        b.extend_from_slice(&self.realtime_ns.to_le_bytes());
        b.extend_from_slice(&self.monotonic_ns.to_le_bytes());
        put_text(&mut b, &self.program);
        b
    }

    pub fn decode(b: &[u8]) -> Result<Process, WireError> {
        let mut c = Cursor::new(b);
        let p = Process {
            pid: c.u32("pid")?,
            realtime_ns: c.u64("realtime")?,
            monotonic_ns: c.u64("monotonic")?,
            program: text(&mut c, "program")?,
        };
        Ok(p)
    }

    /// Wall-clock nanoseconds since the epoch of a `CLOCK_MONOTONIC` time.
    pub fn wall_ns(&self, monotonic_ns: u64) -> u64 {
        self.realtime_ns.saturating_add_signed(monotonic_ns.wrapping_sub(self.monotonic_ns) as i64)
    }
}

/// A stats chunk's payload.
pub fn encode_stats(stats: &[(&str, u64)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (name, v) in stats {
        put_text(&mut b, name);
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// Decodes a stats chunk's payload.
pub fn decode_stats(b: &[u8]) -> Result<Vec<(String, u64)>, WireError> {
    let mut c = Cursor::new(b);
    let mut out = Vec::new();
    while !c.is_empty() {
        let name = text(&mut c, "stat name")?;
        out.push((name, c.u64("stat value")?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
