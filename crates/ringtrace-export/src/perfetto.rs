//! Perfetto's trace format: a protobuf `Trace` of `TracePacket`s carrying
//! `TrackEvent`s, which Perfetto's UI (ui.perfetto.dev) and `trace_processor` open.
//! The message types are generated at build time from `proto/perfetto_trace.proto`
//! (the part of Perfetto's published schema the export writes) by prost; [`proto`]
//! has them, for programs that read the output back.
//!
//! A trace's records and a fleet's (`ringtrace-ship`'s) are written by one [`Writer`],
//! over the [record model](crate::record).
//!
//! * A process track (`ProcessDescriptor`: pid, program name) and a thread track per
//!   thread under it (`ThreadDescriptor`: pid, tid, thread name), described on packet
//!   sequence 1 before the thread's first record.
//! * Each thread's packets form a sequence of their own (`trusted_packet_sequence_id`
//!   2, 3, ... in the order of the threads' first track events; for a trace written
//!   in halves, see [`write_with_progress`]), whose first packet
//!   clears the sequence's incremental state and sets the thread's track as the
//!   sequence's default (`TracePacketDefaults`); event names, categories (targets),
//!   field names and the level are interned per sequence (`InternedData`), as
//!   Perfetto's track event documentation describes.
//! * Spans: `TYPE_SLICE_BEGIN` when a thread enters one (its fields as debug
//!   annotations), `TYPE_SLICE_END` when it exits, nested per thread as for Chrome
//!   ([`super::chrome`]).
//! * Events: `TYPE_INSTANT`, named by their message (else their callsite's name), every
//!   field a debug annotation (unsigned, signed, double, bool; text for strings,
//!   `Debug` values, errors and 128-bit integers), and the level as `level` (an interned
//!   string value: `InternedData.debug_annotation_string_values`).
//! * Lost events: an instant named `ringtrace: events lost` with a `count` annotation.
//! * Timestamps: the records' `CLOCK_MONOTONIC` nanoseconds, exact, written in the
//!   trace's default clock (no clock conversion is applied).
//!
//! The file is written packet by packet (`Trace.packet` is field 1, so each packet is a
//! `0x0A` tag, its length and its bytes), each track event encoded by hand (the bytes
//! prost writes for the same message) into a buffer written out in 64 KiB pieces.

mod encode;
mod intern;
#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
mod trace;
mod writer;

use std::io::{self, Write};

use crate::Exported;
use ringtrace_tracing::decode::Trace;
pub use writer::{process_uuid, thread_uuid, Writer};

/// The Perfetto message types the export writes (generated from
/// `proto/perfetto_trace.proto`).
#[allow(missing_docs, missing_debug_implementations, clippy::all, clippy::pedantic)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/perfetto.protos.rs"));
}

/// Writes `trace` as a Perfetto protobuf trace to `out`.
pub fn write(trace: &Trace, out: &mut impl Write) -> io::Result<Exported> {
    write_with_progress(trace, out, &mut |_, _| {})
}

/// [`write()`], telling `progress` records done and records in all as it goes (see
/// [`PROGRESS_EVERY`](super::PROGRESS_EVERY)).
///
/// A trace file of more than 65,536 records is written by two threads where the
/// machine has two CPUs: the records before a time in the middle and those after, each
/// half by a [`Writer::part`] of its own, on sequences of its own (the packets are the
/// same, but for their sequence numbers, in another order).
pub fn write_with_progress(
    trace: &Trace,
    out: &mut impl Write,
    progress: &mut dyn FnMut(u64, u64),
) -> io::Result<Exported> {
    trace::write(trace, out, progress)
}
