//! Channel files of raw records (written with `ringtrace::Channel`, not by the tracing
//! layer) read as a trace, so that every exporter draws them: each record an `INFO`
//! event of the callsite `ringtrace: record` (target `ringtrace`) on its writer's
//! track (its slot), with two fields: `len`, the payload's length, and `head`, its
//! first 16 bytes in hex. Timestamps are the records' own (`CLOCK_MONOTONIC`
//! nanoseconds; a channel without a clock has none, so its records are placed at 0,
//! slot by slot, in order).

use std::fmt::Write as _;
use std::path::Path;

use ringtrace::inspect::channel::ChannelFile;
use tracing_core::Level;

use super::load::{Parts, Problems};
use super::records::Rec;
use crate::catalog::{Callsite, ThreadInfo};
use crate::error::{with_causes, Error};
use crate::file::Process;
use crate::wire::{RawRecord, RawValue, Value};

/// The callsite number raw records are given.
pub const RAW_CALLSITE: u32 = u32::MAX;
/// Bytes of each payload shown in `head`.
pub const HEAD_BYTES: usize = 16;

/// Reads the channel file at `path` as a trace of raw records.
pub(crate) fn channel(path: &Path) -> Result<(Parts, Problems), Error> {
    let not = |e: &dyn std::fmt::Display| Error::NotATrace { path: path.into(), reason: e.to_string() };
    let ch = ChannelFile::open(path).map_err(|e| not(&with_causes(&e)))?;
    let header = *ch.header();
    let mut parts = Parts::default();
    let mut problems = Problems { incomplete: false, ..Problems::default() };
    parts.ended = true;
    parts.process = Some(Process { pid: header.creator_pid, realtime_ns: 0, monotonic_ns: 0, program: String::new() });
    parts.callsites.insert(
        RAW_CALLSITE,
        Callsite {
            id: RAW_CALLSITE,
            is_span: false,
            level: Level::INFO,
            name: "ringtrace: record".into(),
            target: "ringtrace".into(),
            module_path: None,
            file: None,
            line: None,
            fields: vec!["len".into(), "head".into()],
        },
    );
    for slot in 0..header.slots {
        let records = match ch.ring(slot).and_then(|r| r.records()) {
            Ok(r) => r,
            Err(e) => {
                problems.unreadable_rings.push((slot, with_causes(&e)));
                continue;
            }
        };
        problems.unfinished += records.unfinished_count();
        if records.is_empty() {
            continue;
        }
        parts.threads.push(ThreadInfo {
            lane: slot,
            tid: slot,
            number: u64::from(slot) + 1,
            since_ns: 0,
            name: format!("slot {slot}"),
        });
        for rec in records.iter() {
            let (ts, body) = match rec.payload.split_first_chunk::<8>() {
                Some((stamp, body)) if header.stamped() => (header.to_ns(u64::from_ne_bytes(*stamp)), body),
                _ => (0, rec.payload),
            };
            let mut head = String::with_capacity(2 * HEAD_BYTES);
            for b in body.iter().take(HEAD_BYTES) {
                let _ = write!(head, "{b:02x}");
            }
            let values = vec![
                RawValue { field: 0, value: Value::U64(body.len() as u64), cut: false },
                RawValue { field: 1, value: Value::Str(head), cut: body.len() > HEAD_BYTES },
            ];
            let raw = RawRecord::Event { callsite: RAW_CALLSITE, span: 0, span_callsite: 0, values, dropped: 0 };
            parts.records.push(Rec { ts, lane: slot, raw });
        }
    }
    Ok((parts, problems))
}
