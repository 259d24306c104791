//! A `ringtrace-tracing` recorder directory's records, decoded on the host.
//!
//! A recorder directory holds a channel file of per-thread rings and a catalog (the
//! process, and the callsites and threads its records name by number). A record alone
//! means nothing elsewhere: so the agent decodes each with the catalog as it is when
//! the record is read (the recorder appends a callsite's or thread's entry before it
//! writes a record that names it), and ships it as one JSON object
//! ([`Content::Events`](crate::frame::Content::Events); the object of
//! [`entry_json`](ringtrace_tracing::decode::text::entry_json)). Any Kafka consumer
//! reads a fleet's events then, with nothing of the host that wrote them.
//!
//! Each record is decoded within its round: an event's span context names the spans
//! whose `new span` records the round holds, and only the span's id and name
//! otherwise. Every record is shipped, span records included (one object each), so
//! the sequence numbers stay the ring's. A record that does not decode (damaged, or
//! too short for its stamp) is shipped as `{"undecodable": WHY, "len": N}`. An event's
//! object carries its span context's fields: one whose object alone passes the largest
//! message is shipped as a too-large marker, counted, as any record too large is.
//!
//! The catalog is opened once, with the rings, and read through that descriptor as it
//! grows: a recorder started again in the same directory (new files) leaves the agent
//! decoding the old rings with the old catalog, as it must. One catalog serves every
//! ring of the directory, read again only when its length changed, and parsed only
//! then. It is untrusted input like the rings: past [`MAX_CATALOG`] bytes it is not
//! read further (the names it had are kept; said once on stderr), a chunk cut at its
//! end (a write in progress) is not an error, and the decoder checks every chunk.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ringtrace_tracing::decode::Trace;
use ringtrace_tracing::TRACE_MAGIC;

use super::error::SourceErrorKind;

/// The largest catalog file read.
pub const MAX_CATALOG: u64 = 256 << 20;

/// Bytes of the trace file header before the catalog's chunks.
const HEADER: u64 = 16;

/// A recorder directory's catalog, shared by the decoders of its rings.
pub(in crate::agent) struct Catalog {
    file: File,
    path: PathBuf,
    /// The file's bytes past its header, as far as read.
    bytes: Vec<u8>,
    /// The callsites, threads and process those bytes name.
    trace: Trace,
    /// Said on stderr already: the catalog is over the bound, or unreadable.
    warned: bool,
}

impl Catalog {
    /// Opens the catalog at `path` (not through a symlink) and checks its header.
    pub fn open(path: &Path) -> Result<Arc<Mutex<Catalog>>, SourceErrorKind> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)?;
        let mut head = [0u8; HEADER as usize];
        file.read_exact_at(&mut head, 0).map_err(SourceErrorKind::CatalogHeader)?;
        if head[..8] != TRACE_MAGIC {
            return Err(SourceErrorKind::NotCatalog);
        }
        let trace = Trace::from_catalog(&[], path).map_err(SourceErrorKind::open)?;
        let c = Catalog { file, path: path.to_path_buf(), bytes: Vec::new(), trace, warned: false };
        Ok(Arc::new(Mutex::new(c)))
    }

    /// Reads what was appended since the last look, and parses the catalog again if
    /// anything was.
    fn refresh(&mut self) {
        let read = HEADER + self.bytes.len() as u64;
        let len = self.file.metadata().map_or(read, |m| m.len());
        if len <= read {
            return;
        }
        if len > MAX_CATALOG {
            self.warn(format_args!("{len} bytes, over the {MAX_CATALOG} read"));
            return;
        }
        let mut more = vec![0u8; (len - read) as usize];
        if let Err(e) = self.file.read_exact_at(&mut more, read) {
            self.warn(format_args!("reading at byte {read}: {e}"));
            return;
        }
        self.bytes.extend_from_slice(&more);
        match Trace::from_catalog(&self.bytes, &self.path) {
            Ok(t) => self.trace = t,
            Err(e) => self.warn(format_args!("{e}")),
        }
    }

    fn warn(&mut self, why: std::fmt::Arguments<'_>) {
        if !self.warned {
            self.warned = true;
            tracing::warn!("{}: {why}: later names are not read", self.path.display());
        }
    }
}

/// Decodes one ring of a recorder directory.
pub(in crate::agent) struct Decoder {
    catalog: Arc<Mutex<Catalog>>,
    /// The ring's slot: its records' lane.
    slot: u32,
}

impl Decoder {
    /// A decoder for slot `slot`'s records with the directory's catalog.
    pub fn new(catalog: &Arc<Mutex<Catalog>>, slot: u32) -> Decoder {
        Decoder { catalog: catalog.clone(), slot }
    }

    /// One JSON object for each of `records` (`CLOCK_MONOTONIC` stamp, if the record
    /// had one, and its bytes past the stamp), in their order.
    pub fn decode(&mut self, records: &[(Option<u64>, &[u8])]) -> Vec<String> {
        if records.is_empty() {
            return Vec::new();
        }
        let mut catalog = self.catalog.lock().unwrap_or_else(|e| e.into_inner());
        catalog.refresh();
        let stamped: Vec<(u32, u64, &[u8])> =
            records.iter().filter_map(|&(ts, rec)| ts.map(|ts| (self.slot, ts, rec))).collect();
        let mut decoded = catalog.trace.decode_json(&stamped).into_iter();
        let undecodable = |why: &str, len: usize| serde_json::json!({"undecodable": why, "len": len}).to_string();
        records
            .iter()
            .map(|&(ts, rec)| match ts.map(|_| decoded.next()) {
                Some(Some(Ok(line))) => line,
                Some(Some(Err(why))) => undecodable(&why, rec.len()),
                Some(None) | None => undecodable("shorter than its stamp", rec.len()),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
