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
//! too short for its stamp) is shipped as `{"undecodable": WHY, "len": N}`.
//!
//! The catalog file is read again when its length changes; it is untrusted input like
//! the rings: a file over [`MAX_CATALOG`] bytes or with a bad header is not used (its
//! records' names then show as unknown), and the decoder checks every chunk.

use std::collections::{HashMap, VecDeque};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ringtrace_tracing::decode::text::entry_json;
use ringtrace_tracing::decode::Trace;
use ringtrace_tracing::TRACE_MAGIC;

/// The largest catalog file read.
pub const MAX_CATALOG: u64 = 256 << 20;

/// Bytes of the trace file header before the catalog's chunks.
const HEADER: usize = 16;

/// Decodes one ring of a recorder directory.
pub(in crate::agent) struct Decoder {
    catalog_path: PathBuf,
    /// The catalog's chunks (the file past its header) as last read.
    catalog: Vec<u8>,
    /// The file's length when it was read.
    read_len: Option<u64>,
    /// The ring's slot: its records' lane.
    slot: u32,
    /// Why the catalog is not used, said once.
    warned: bool,
}

impl Decoder {
    /// A decoder for slot `slot`'s records with the catalog at `catalog_path`.
    pub fn new(catalog_path: &Path, slot: u32) -> Decoder {
        Decoder { catalog_path: catalog_path.to_path_buf(), catalog: Vec::new(), read_len: None, slot, warned: false }
    }

    /// Reads the catalog again if its length changed.
    fn refresh(&mut self) {
        let len = std::fs::symlink_metadata(&self.catalog_path).map(|m| m.len()).ok();
        if len.is_some() && len == self.read_len {
            return;
        }
        match self.read() {
            Ok(bytes) => {
                self.catalog = bytes;
                self.read_len = len;
            }
            Err(why) if !self.warned => {
                self.warned = true;
                eprintln!(
                    "ringtrace-ship: {}: {why}: events are shipped without their names",
                    self.catalog_path.display()
                );
            }
            Err(_) => {}
        }
    }

    fn read(&self) -> Result<Vec<u8>, String> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&self.catalog_path)
            .map_err(|e| e.to_string())?;
        let len = f.metadata().map_err(|e| e.to_string())?.len();
        if len > MAX_CATALOG {
            return Err(format!("{len} bytes, over the {MAX_CATALOG} read"));
        }
        let mut bytes = Vec::with_capacity(len as usize);
        std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_CATALOG), &mut bytes).map_err(|e| e.to_string())?;
        if bytes.get(..8) != Some(&TRACE_MAGIC[..]) || bytes.len() < HEADER {
            return Err("not a catalog (no trace file header)".into());
        }
        bytes.drain(..HEADER);
        Ok(bytes)
    }

    /// One JSON object for each of `records` (`CLOCK_MONOTONIC` stamp, if the record
    /// had one, and its bytes past the stamp), in their order.
    pub fn decode(&mut self, records: &[(Option<u64>, &[u8])]) -> Vec<String> {
        self.refresh();
        let mut out: Vec<Option<String>> = vec![None; records.len()];
        // Where each (stamp) goes back to: records of one ring, nearly always in stamp
        // order already; the decoder's sort by time is stable.
        let mut at: HashMap<u64, VecDeque<usize>> = HashMap::new();
        let stamped = records.iter().enumerate().filter_map(|(i, (ts, rec))| ts.map(|ts| (i, ts, *rec)));
        for (i, ts, _) in stamped.clone() {
            at.entry(ts).or_default().push_back(i);
        }
        let mut order: Vec<(usize, u64, &[u8])> = stamped.collect();
        order.sort_by_key(|r| (r.1, r.0));
        let lane = self.slot;
        match Trace::from_parts(&self.catalog, order.iter().map(|&(_, ts, rec)| (lane, ts, rec)), &self.catalog_path) {
            Ok(trace) => {
                for entry in trace.entries() {
                    if let Some(i) = at.get_mut(&entry.ts_ns).and_then(VecDeque::pop_front) {
                        out[i] = Some(entry_json(&trace, &entry));
                    }
                }
            }
            Err(e) => eprintln!("ringtrace-ship: {}: decoding: {e}", self.catalog_path.display()),
        }
        let undecodable = |why: &str, len: usize| serde_json::json!({"undecodable": why, "len": len}).to_string();
        (out.into_iter().zip(records))
            .map(|(line, (ts, rec))| match (line, ts) {
                (Some(l), _) => l,
                (None, None) => undecodable("shorter than its stamp", rec.len()),
                (None, Some(_)) => undecodable("damaged record", rec.len()),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
