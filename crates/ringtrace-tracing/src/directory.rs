//! A recorder directory read from outside: its catalog file and every ring of its
//! channel file as they are now, through `ringtrace::inspect` (positioned reads of
//! untrusted bytes, no mapping). A live process goes on writing meanwhile.

use std::io::Write;
use std::path::{Path, PathBuf};

use ringtrace::inspect::channel::ChannelFile;

use crate::error::{with_causes, Error};
use crate::file::{self, chunk};
use crate::file::{CATALOG_FILE, RINGS_FILE};

/// A recorder directory's contents.
pub(crate) struct Contents {
    /// The catalog file's bytes.
    pub catalog: Vec<u8>,
    /// `(slot, timestamp ns, record bytes)`, merged by timestamp (ties in slot order).
    pub records: Vec<(u32, u64, Vec<u8>)>,
    /// Ring records shorter than their timestamp.
    pub unstamped: u64,
    /// Records being written when read, stepped over.
    pub unfinished: u64,
    /// Rings that could not be read: `(slot, why)`.
    pub unreadable: Vec<(u32, String)>,
}

pub(crate) fn not_a_trace(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::NotATrace { path: path.into(), reason: reason.to_string() }
}

/// A recorder directory's catalog file and channel file, if it has both.
pub(crate) fn paths(dir: &Path) -> Result<(PathBuf, PathBuf), Error> {
    let catalog_path = dir.join(CATALOG_FILE);
    let rings_path = dir.join(RINGS_FILE);
    if !rings_path.exists() || !catalog_path.exists() {
        return Err(not_a_trace(dir, format!("not a recorder directory: it needs {RINGS_FILE} and {CATALOG_FILE}")));
    }
    Ok((catalog_path, rings_path))
}

/// Reads a recorder directory, holding its records (for [`snapshot`]; decoding reads
/// them in place: `decode::ring_scan`).
pub(crate) fn read(dir: &Path) -> Result<Contents, Error> {
    let (catalog_path, rings_path) = paths(dir)?;
    // The rings first, then the catalog: every record read was committed after its
    // callsite's and thread's entries were appended.
    let channel = ChannelFile::open(&rings_path).map_err(|e| not_a_trace(&rings_path, with_causes(&e)))?;
    let header = *channel.header();
    let mut c =
        Contents { catalog: Vec::new(), records: Vec::new(), unstamped: 0, unfinished: 0, unreadable: Vec::new() };
    for slot in 0..header.slots {
        let records = match channel.ring(slot).and_then(|r| r.records()) {
            Ok(r) => r,
            Err(e) => {
                c.unreadable.push((slot, with_causes(&e)));
                continue;
            }
        };
        c.unfinished += records.unfinished_count();
        if let Some(bad) = records.corrupt() {
            c.unreadable.push((slot, format!("a corrupt header at position {} (read up to it)", bad.pos)));
        }
        for rec in records.iter() {
            match rec.payload.split_first_chunk::<8>() {
                Some((stamp, body)) => c.records.push((slot, header.to_ns(u64::from_ne_bytes(*stamp)), body.to_vec())),
                None => c.unstamped += 1,
            }
        }
    }
    c.records.sort_by_key(|r| r.1);
    c.catalog = std::fs::read(&catalog_path).map_err(|e| Error::io("reading", &catalog_path, e))?;
    Ok(c)
}

/// What [`snapshot`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Snapshotted {
    /// Records written.
    pub records: usize,
    /// Records being written when read, stepped over.
    pub unfinished: u64,
    /// Rings that could not be read, and why.
    pub unreadable: Vec<(u32, String)>,
}

/// Dumps a recorder directory, live or left by a process that died, into a trace file
/// written to `out`: what `ringtrace snapshot DIR --output FILE` does. The process is
/// not stopped or signalled.
pub fn snapshot(dir: impl AsRef<Path>, out: &mut impl Write) -> Result<Snapshotted, Error> {
    let dir = dir.as_ref();
    let c = read(dir)?;
    let (chunks, _) = file::chunks(&c.catalog).map_err(|e| not_a_trace(&dir.join(CATALOG_FILE), e))?;
    let io = |e| Error::io("writing the snapshot of", dir, e);
    out.write_all(&file::header()).map_err(io)?;
    // The catalog's whole chunks; a last chunk being appended is left out.
    for (kind, payload) in chunks {
        file::write_chunk(out, kind, payload).map_err(io)?;
    }
    let mut buf = Vec::new();
    for (slot, ts, bytes) in &c.records {
        file::put_record(&mut buf, *slot, *ts, bytes);
        if buf.len() >= 1 << 20 {
            file::write_chunk(out, chunk::RECORDS, &buf).map_err(io)?;
            buf.clear();
        }
    }
    if !buf.is_empty() {
        file::write_chunk(out, chunk::RECORDS, &buf).map_err(io)?;
    }
    let stats = [("unfinished", c.unfinished), ("unreadable_rings", c.unreadable.len() as u64)];
    file::write_chunk(out, chunk::STATS, &file::encode_stats(&stats)).map_err(io)?;
    file::write_chunk(out, chunk::END, &[]).map_err(io)?;
    Ok(Snapshotted { records: c.records.len(), unfinished: c.unfinished, unreadable: c.unreadable })
}
