//! The trace file: what a dump, a stream and a recorder directory's catalog are
//! written in. A header, then chunks, each checked by a CRC32C:
//!
//! ```text
//! header   "RTTRACE\0" (8)  version u32 (1)  reserved u32 (0)
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
//! A reader stops at the first chunk that is cut short or fails its checksum (a chunk
//! whose length cannot be trusted gives no way to the next) and reports where.

use std::io::{self, Write};

use crate::wire::{Cursor, WireError};

/// The file's first 8 bytes.
pub const MAGIC: [u8; 8] = *b"RTTRACE\0";
/// The format version this crate writes and reads.
pub const VERSION: u32 = 1;
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

/// Where reading a trace file stopped early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Byte offset of the chunk that could not be read.
    pub offset: u64,
    /// Bytes from there to the end of the file, not read.
    pub bytes: u64,
    /// Why.
    pub reason: String,
}

/// Why a file is not a trace file at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotATrace {
    #[error("{0} bytes: shorter than a trace file's {HEADER_LEN}-byte header")]
    Short(usize),
    #[error("not a ringtrace trace file (its first bytes are not \"RTTRACE\\0\")")]
    Magic,
    #[error("trace file format version {0}; this build reads version {VERSION}")]
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
    if b.len() < HEADER_LEN {
        return Err(NotATrace::Short(b.len()));
    }
    if b[..8] != MAGIC {
        return Err(NotATrace::Magic);
    }
    let version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
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
fn chunk_head(head: &[u8]) -> Result<(u8, u32, u32), String> {
    let len = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes"));
    let crc = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
    if len > MAX_CHUNK {
        return Err(format!("a chunk of {len} bytes, over the {MAX_CHUNK}-byte limit"));
    }
    Ok((head[0], len, crc))
}

/// Whether a chunk's head and payload match its checksum.
pub fn chunk_sound(head: &[u8], payload: &[u8], crc: u32) -> bool {
    crc32c::crc32c_append(crc32c::crc32c(&head[..8]), payload) == crc
}

/// The chunks of a trace file's bytes, in order, and where reading stopped early.
pub fn chunks(b: &[u8]) -> Result<(Vec<Chunk<'_>>, Option<Damage>), NotATrace> {
    check_header(b)?;
    let mut out = Vec::new();
    let mut at = HEADER_LEN;
    // Each chunk advances `at` by at least its head: the loop is bounded by the length.
    while at < b.len() {
        let damage = |reason: String| Damage { offset: at as u64, bytes: (b.len() - at) as u64, reason };
        let Some(head) = b.get(at..at + CHUNK_HEAD) else {
            return Ok((out, Some(damage("the file ends inside a chunk's head".into()))));
        };
        let (kind, len, crc) = match chunk_head(head) {
            Ok(h) => h,
            Err(reason) => return Ok((out, Some(damage(reason)))),
        };
        let start = at + CHUNK_HEAD;
        let Some(payload) = b.get(start..start + len as usize) else {
            return Ok((out, Some(damage(format!("the file ends inside a chunk of {len} bytes")))));
        };
        if !chunk_sound(head, payload, crc) {
            return Ok((out, Some(damage("a chunk fails its checksum".into()))));
        }
        out.push((kind, payload));
        at = start + len as usize;
    }
    Ok((out, None))
}

/// Where a chunk of a trace file lies, as its head says (its payload not read yet).
pub struct ChunkAt {
    /// Where its head starts.
    pub head: u64,
    pub kind: u8,
    /// Its payload's length.
    pub len: u32,
    pub crc: u32,
}

/// The chunks of a trace file of `len` bytes, found by their heads alone (each read
/// with a positioned read, the header's checked already), and where they stop making
/// sense: a head cut short, a length over the limit or past the file's end. The
/// payloads' checksums are the caller's to check ([`chunk_sound`]).
pub fn chunk_heads(f: &std::fs::File, len: u64) -> io::Result<(Vec<ChunkAt>, Option<Damage>)> {
    use std::os::unix::fs::FileExt;
    let mut out = Vec::new();
    let mut at = HEADER_LEN as u64;
    let mut head = [0u8; CHUNK_HEAD];
    // Each chunk advances `at` by at least its head: the loop is bounded by the length.
    while at < len {
        let damage = |reason: String| Some(Damage { offset: at, bytes: len - at, reason });
        if len - at < CHUNK_HEAD as u64 {
            return Ok((out, damage("the file ends inside a chunk's head".into())));
        }
        f.read_exact_at(&mut head, at)?;
        let (kind, n, crc) = match chunk_head(&head) {
            Ok(h) => h,
            Err(reason) => return Ok((out, damage(reason))),
        };
        if len - at - (CHUNK_HEAD as u64) < u64::from(n) {
            return Ok((out, damage(format!("the file ends inside a chunk of {n} bytes"))));
        }
        out.push(ChunkAt { head: at, kind, len: n, crc });
        at += CHUNK_HEAD as u64 + u64::from(n);
    }
    Ok((out, None))
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
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut f = header().to_vec();
        write_chunk(&mut f, chunk::PROCESS, &Process::now().encode()).unwrap();
        let mut recs = Vec::new();
        put_record(&mut recs, 3, 42, b"abc");
        write_chunk(&mut f, chunk::RECORDS, &recs).unwrap();
        f
    }

    #[test]
    fn chunks_read_back() {
        let f = sample();
        let (cs, damage) = chunks(&f).unwrap();
        assert_eq!(damage, None);
        assert_eq!(cs.len(), 2);
        assert_eq!(records(cs[1].1).unwrap(), vec![(3, 42, &b"abc"[..])]);
    }

    #[test]
    fn every_cut_and_every_flipped_bit_is_an_error_or_a_reported_damage() {
        let f = sample();
        for n in 0..f.len() {
            match chunks(&f[..n]) {
                Err(_) => assert!(n < HEADER_LEN),
                Ok((cs, damage)) => assert!(n == HEADER_LEN || damage.is_some() || cs.len() == 1, "cut at {n}"),
            }
        }
        for bit in 0..f.len() * 8 {
            let mut g = f.clone();
            g[bit / 8] ^= 1 << (bit % 8);
            match chunks(&g) {
                Err(_) => assert!(bit < HEADER_LEN * 8),
                Ok((_, damage)) => assert!(damage.is_some(), "bit {bit} went unnoticed"),
            }
        }
    }
}
