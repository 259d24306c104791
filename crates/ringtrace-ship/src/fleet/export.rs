//! A fleet's records as one trace file that other tools open: each host a process,
//! each of its sources a thread of it, each record an instant event, so that a
//! request is seen crossing hosts in one view; or as OpenTelemetry log records
//! ([OTLP](#otlp)).
//!
//! ```no_run
//! # fn run(fleet: &ringtrace_ship::fleet::Fleet) -> std::io::Result<()> {
//! use ringtrace_ship::fleet::export;
//!
//! // A minute of the fleet (the caller picks the window).
//! let (from, to) = (1_700_000_000_000_000_000, 1_700_000_060_000_000_000);
//! let window = fleet.timeline().filter(|e| (from..to).contains(&e.time_ns));
//! let mut out = std::io::BufWriter::new(std::fs::File::create("fleet.pftrace")?);
//! let done = export::perfetto(fleet, window, &mut out)?;
//! eprintln!("{} records of {} sources on {} hosts", done.records, done.sources, done.hosts);
//! # Ok(()) }
//! ```
//!
//! # The formats
//!
//! * [`perfetto()`]: Perfetto's protobuf trace (a `Trace` of `TracePacket`s carrying
//!   `TrackEvent`s), which Perfetto's UI (ui.perfetto.dev) and `trace_processor` open.
//!   The messages are the ones `ringtrace-tracing` generates from Perfetto's schema
//!   ([`ringtrace_export::perfetto::proto`], which also decodes the output), written
//!   by the trace export's own writer ([`ringtrace_export::perfetto::Writer`], over its
//!   [record model](ringtrace_export::record)).
//!   A `ProcessDescriptor` track per host and a `ThreadDescriptor` track per source,
//!   under its host's, all on packet sequence 1, each just before its first record;
//!   each source's events on a packet sequence of their own (2, 3, ... in the order of
//!   the sources' first records), whose first packet clears the sequence's
//!   incremental state and sets the source's track as the sequence's default
//!   (`TracePacketDefaults`). The event name, the category and the annotation names
//!   are interned (`InternedData`) once per sequence, in the first packet that uses
//!   each (`text`'s in the first with a text payload), so that every later packet of
//!   the sequence refers to them by number. The packets are written
//!   one after the other (each a `0x0A` tag, its length and its bytes), encoded by
//!   hand: the same bytes prost writes for them (the writer's tests check), without
//!   building the message.
//! * [`chrome()`]: Chrome's Trace Event Format, the JSON that `chrome://tracing`,
//!   Perfetto's UI and `trace_processor` open, written by the trace export's own writer
//!   ([`ringtrace_export::chrome::Writer`], over its [record model](ringtrace_export::record)):
//!   `{"displayTimeUnit":"ns","traceEvents":[...]}`, one event a
//!   line. `M` metadata events name each process (`process_name`) and thread
//!   (`thread_name`) and keep them in the fleet's order (`process_sort_index`,
//!   `thread_sort_index`); each record is an `i` event of thread scope (`"s":"t"`)
//!   with its annotations in `args`. Strings are escaped by `serde_json`.
//! * [`ctf()`]: CTF 1.8, the Common Trace Format that babeltrace2 and Trace Compass
//!   read, written by the trace export's own writer ([`ringtrace_export::ctf::Writer`],
//!   its tracks [named](ringtrace_export::ctf::Tracks::Named)): a directory (made mode
//!   0700) with `metadata` (TSDL text) and one binary stream file per source,
//!   `stream-PID-TID`, each created new (mode 0600), all of one stream class. CTF 1.8
//!   has one `env` per trace, not per stream, so each packet's context holds the
//!   stream's `pid` and `tid` and its `host` and `source` names
//!   (strings), which babeltrace2 prints beside every event; the `env` holds
//!   `tracer_name = "ringtrace-ship"` and `host_PID = "NAME"` for each host written.
//!   Each record is an event `ringtrace:record` with the fields `seq`, `len`,
//!   `time_ns` (`uint64_t`), `head` and `text` (strings; `text` is empty where the
//!   payload is not text; a backslash in a string is written `\\`, see
//!   [Limits](#limits)); it is class 2, after the `ringtrace:span_enter` and
//!   `ringtrace:span_exit` classes every CTF export of ringtrace's declares. Packets
//!   hold at most 1 MiB of events, every field byte-aligned, little-endian.
//! * [`otlp()`] and [`otlp_json()`]: OpenTelemetry's spans and log records (see
//!   [OTLP](#otlp)).
//!
//! # The mapping (the same in the three trace formats)
//!
//! * **Host → process.** The hosts are numbered 1, 2, 3, ... in the order of
//!   [`Fleet::sources`] (sorted by name): that is their pid, and the host's name is the
//!   process's name.
//! * **Source → thread** of its host's process, named by the source (a ring file's
//!   path). Tids number the sources after the hosts: with `H` hosts in the fleet, its
//!   sources are `H + 1`, `H + 2`, ... in the order of [`Fleet::sources`]. So no tid
//!   appears twice in a trace and none equals a pid, as on one Linux host: tools that
//!   assume so (one that takes the thread whose tid is its pid for the process's main
//!   thread, as `trace_processor` does) show each source as a thread of its own.
//! * A stream's export ([`TraceWriter`], a topic read back by
//!   [`stream_topic`](crate::fleet::stream_topic)) cannot know every host first: it
//!   numbers them as they first come, a host's pid then its source's tid from one count
//!   (1, 2, 3, ...), so still no tid appears twice nor equals a pid.
//! * The numbers come from the whole fleet, not from the entries given, so a host or a
//!   source has the same pid or tid in every window exported from the same fleet. Only
//!   the hosts and sources that have at least one entry are described (a window shows
//!   no empty track for an idle source); [`Exported::hosts`] and
//!   [`Exported::sources`] count those. An entry of a (host, source) the fleet does
//!   not have (one made by hand) is not refused: a new host takes the next pid and a
//!   new source the next tid, after all the fleet's numbers.
//! * **Record → instant event** (a plain source's: a ring file's, a channel's, a BPF
//!   map's; an events source's are drawn as [below](#an-events-sources-records)) named
//!   `record`, category (target) `ringtrace`, at the
//!   record's time, on its source's thread, with the annotations (`args`):
//!   * `seq`: the record's sequence number in its source (in the Chrome export a
//!     decimal string beyond 2^53 - 1, which JavaScript readers would round);
//!   * `len`: the payload's length in bytes;
//!   * `head`: its first 16 bytes in lowercase hex (empty for an empty payload);
//!   * `text`: only where the payload is text, its first 64 characters. A payload is
//!     text when, less one final `\n` or `\r\n`, it is not empty, all valid UTF-8, and
//!     holds no control character but tab. The whole payload is checked (its length
//!     is what the check costs), and `len` says how much the 64 characters leave out.
//!
//!   The events are written in the order of `entries`, each exactly once.
//!
//! # An events source's records
//!
//! A `ringtrace-tracing` recorder directory's records arrive as one JSON object each
//! (the agent decodes them on the host:
//! [`entry_json`](ringtrace_tracing::decode::text::entry_json)), and an events source's
//! are drawn as the trace export draws the recorder on its host
//! (`ringtrace_export::{perfetto, chrome, ctf}::write`), so that a recorder exported on
//! its host and the same recorder read back from Kafka show the same events, slices and
//! values on each thread (the tests compare the two, event by event):
//!
//! * **Recorder thread → thread** of its host's process, named as on the host (the
//!   recorder's name for it), one per (source, recorder tid); its tid is numbered as a
//!   source's is (the host's own tid is in the objects, not the trace), so that tids
//!   stay unique across hosts. An object without a `tid` goes on the thread of its name
//!   seen before in its source, else on the source's own track.
//! * **Event → instant** named by its `message` (another value's message gives an
//!   empty name), else its callsite's name, category its target, with its fields as
//!   the arguments, each of the type it was recorded with (the object's `kinds`: a
//!   64-bit integer beyond 2^53 − 1 or a non-finite double, which the JSON holds as
//!   text, is a number again; 128-bit integers and bytes stay text, as on the host;
//!   objects of agents older than `kinds` give JSON's types), then `level`; Chrome's
//!   `args` also `cut` and `dropped` where the object has them. In CTF, a class per
//!   target, callsite name, level and field names (and types), named `TARGET:NAME` with
//!   the level's LTTng `loglevel`; past 4096 of them, events share one class per shape,
//!   `ringtrace:event`.
//! * **Span → slice**: an `enter` (or `open`) object opens one, named and categorised
//!   by the span's `new` (or `open`) object, its fields (as recorded since, by `record`
//!   objects) its arguments (Chrome's with `span_id`); a span whose `new` object the
//!   export did not see (a flight recorder overwrote it, or it was before the window) is
//!   `?`. An `exit` (or `done`) closes the thread's innermost slice if it is that span's
//!   (CTF writes every exit's `ringtrace:span_exit`); slices still open at the end close
//!   at the latest span time seen, marked `unfinished` (not in CTF). `new`, `record`,
//!   `close` and `follows` objects draw nothing. At most 65,536 spans are remembered at
//!   once (from `new` to `close`) and 16,384 recorder threads over all sources; past
//!   them, spans show as `?` and objects go on their source's own track.
//! * **Lost → loss**: Perfetto's and Chrome's `ringtrace: events lost` instant with the
//!   count; in CTF, whose named tracks have no packet count of losses, an event
//!   `ringtrace:events_lost` with `count`.
//! * Any other payload of an events source (not JSON, not such an object, a record its
//!   host could not decode) is drawn as a plain source's record.
//!
//! Times are the records' (wall clock, below); the host's export has the recorder's
//! `CLOCK_MONOTONIC` (Perfetto, Chrome) or the same converted with the process's offset
//! (CTF), so the two differ by the host's clock offset, as the agent measured it batch
//! by batch. [`Exported::events`] counts the records drawn as events, slices and losses.
//!
//! # The clock
//!
//! The records' times are wall-clock nanoseconds since the Unix epoch, as each host's
//! agent stamped them (hosts' clocks are only as close as NTP or PTP keeps them), and
//! every format carries them unchanged:
//!
//! * Perfetto: each packet's `timestamp`, in ns. The file declares no clock (no
//!   `timestamp_clock_id`, no `ClockSnapshot`), so the times are in the trace's default
//!   clock, which Perfetto's schema calls `BOOTTIME`; no conversion is applied, as
//!   there is no other clock to convert from. The UI shows times from the start of the
//!   trace by default; with its timestamp format set to UTC it shows the wall-clock
//!   date and time, since without a `REALTIME` clock snapshot it takes trace time 0 for
//!   the Unix epoch.
//! * Chrome: `ts` in microseconds, written as decimal text with three fraction digits,
//!   exact to the nanosecond. Readers that parse numbers as doubles (JavaScript's
//!   `chrome://tracing`, `trace_processor`'s JSON importer) round today's times to a
//!   quarter of a microsecond (a double holds 53 bits).
//! * CTF: the `realtime` clock, 1 GHz, offset 0 and `absolute = true` (its origin is
//!   the Unix epoch), so babeltrace2 prints wall-clock times
//!   (`--clock-date` adds the date). A CTF stream cannot go back in time, and a
//!   source's times may (its records come in sequence order, and an agent's clock can
//!   be stepped back): an event stamped earlier than its stream's previous one is
//!   stamped at that previous time instead, and its `time_ns` field keeps its own.
//!   Likewise a time of `i64::MAX` ns or later (the year 2262), which babeltrace2
//!   cannot convert, is stamped `i64::MAX - 1`.
//!
//! # Limits
//!
//! * Perfetto and `trace_processor` keep times in signed 64-bit nanoseconds: times after
//!   2262 (above `i64::MAX`) do not load as written (the CTF export stamps them
//!   `i64::MAX - 1`, see above). pids and tids are 32-bit signed in Perfetto's schema
//!   (numbers above `i32::MAX` are written as `i32::MAX`).
//! * The Perfetto file's names are interned per sequence, so the output grows with the
//!   records only: about 76 bytes a record (64-byte binary payloads at today's
//!   times), plus the text shown.
//! * [`ctf()`] keeps one file open per source written, and each source's open packet
//!   (up to 1 MiB) in memory.
//! * Nothing in a payload can fail an export: empty, huge or non-UTF-8 payloads are
//!   shown by `len` and `head` alone. Host and source names are written as they are
//!   (JSON-escaped; in CTF strings a backslash is written `\\` and a NUL, which would
//!   end one, `\0`: `ringtrace_export::ctf::put_string`).
//!
//! # OTLP
//!
//! [`otlp()`] gives the records in OpenTelemetry's data model as the
//! `opentelemetry-proto` crate's messages: an `ExportTraceServiceRequest` of the spans
//! of events sources, and an `ExportLogsServiceRequest` of log records (every other
//! record). [`otlp_json()`] writes them as OTLP/JSON lines, the form of the
//! OpenTelemetry specification's OTLP File Exporter, which the Collector's
//! `otlpjsonfile` receiver reads: one request a line, each of at most 2048 spans or log
//! records and 1 MiB of protobuf, so no line grows with the export (the trace export's
//! writer, [`ringtrace_export::otlp::JsonLines`]). [`OtlpWriter`] writes a stream of
//! records the same way, each span as it closes.
//!
//! An events source's records become what a trace's export makes of the records they
//! were on the host ([`ringtrace_export::otlp`], whose mapping code the fleet's shares:
//! [`ringtrace_export::otlp::model`], [`ringtrace_export::otlp::ids`]): spans with
//! their span events, and log records of the events outside any span, with the same
//! names, times, severities, bodies, attributes of the same types, parents and links.
//! What differs: the fleet's log records carry `ringtrace.seq`; the ids hash no
//! process id (the objects carry none); the resource is the source's (below).
//!
//! * **Resource**: one for each (host, source) with records exported, with the
//!   attributes `service.name`, `host.name` (the host) and `ringtrace.source` (the
//!   source's name), in the order of [`Fleet::sources`] (a source the fleet does not
//!   have after them). `service.name` is the source's name, or the `program` member of
//!   its first record exported where that is an events source's object naming one
//!   (the objects `ringtrace_tracing::decode::text::entry_json` writes name none),
//!   which is then `process.executable.name` too, as in a trace's resource. No
//!   `process.pid`: the objects carry none. One instrumentation scope, `ringtrace-ship`
//!   and this crate's version (a trace's is `ringtrace-tracing`, the recorder's).
//! * **A log record for every entry** but an events source's span records and events
//!   in spans (below), in the order of `entries`: `time_unix_nano` and
//!   `observed_time_unix_nano` both the record's time (see [the clock](#the-clock)),
//!   and the attribute `ringtrace.seq`, its sequence number. A log record's trace and
//!   span ids are left empty, as a trace's export leaves them. Integers are OTLP
//!   `int`s where they fit an `i64`, else decimal strings. A span's and a span event's
//!   times are their records' too.
//! * **A plain source's record** (a ring file's, a channel's, a BPF map's): severity
//!   unspecified (0), the payload as the body (`bytes`), and `ringtrace.len`, its length.
//! * **An events source's record** (one whose batches say
//!   [`Content::Events`](crate::frame::Content::Events): a
//!   `ringtrace-tracing` recorder directory's records, decoded on the host, each one
//!   JSON object), by the member the object has:
//!   * `level`, an event: severity number and text from the level (`TRACE` 1, `DEBUG`
//!     5, `INFO` 9, `WARN` 13, `ERROR` 17); the body its `message` field, else its
//!     callsite's `name`; its other `fields` as attributes of their JSON types:
//!     integers `int` (above `i64::MAX` a decimal string), other numbers `double`,
//!     booleans `bool`, strings `string` (the object writes integers beyond 2^53 − 1
//!     as decimal strings, and NaN and the infinities as `"NaN"`, `"Infinity"` and
//!     `"-Infinity"`: they stay strings), `null` (which older agents wrote for a NaN)
//!     an empty value, arrays and objects their JSON text. Then `code.namespace` (its
//!     `target`), `thread.id` (`tid`), `thread.name` (`thread`), `span.name` and
//!     `ringtrace.span_id` (the innermost span of its context: its name, and its
//!     `tracing` id as a decimal string), `ringtrace.cut` (the names of values cut at
//!     the recorder's bounds, a string array), where the object has them.
//!     A field keeps its name and value: where one has the name of one of these
//!     attributes (or `ringtrace.seq`), that attribute is left out, and counted in
//!     `dropped_attributes_count` with the object's `dropped` (values the recorder
//!     did not keep). The agent's object holds 64-bit integers beyond ±(2^53 − 1),
//!     128-bit ones and byte strings as strings (decimal, hex): its `kinds` member (a
//!     letter per field) says which, and they are an `int` (or, beyond an `i64`, a
//!     decimal string) and `bytes` again, as in a trace's export
//!     ([`ringtrace_export::otlp::model::json_typed`]); an older agent's object,
//!     without `kinds`, keeps the strings.
//!     An event in a span (its object's `spans` name one, with an id) is not a log
//!     record but a **span event** of the innermost span, as on the host: named by
//!     its `message` (text; another value's is empty), else its callsite's `name`; its
//!     other fields as attributes, then `level`; `dropped_attributes_count` the
//!     recorder's dropped values too.
//!   * `span`, a span record (`new`, `record`, `enter`, `exit`, `close`, `follows`;
//!     `open`, a new span entered at once, and `done`, an exit and close at once): a
//!     part of an **OTLP span** of kind `INTERNAL`, from its `new` (or `open`) to its
//!     `close` (or `done`): its name the callsite's; its attributes its fields (a
//!     `record` replacing a value), `code.namespace`, `code.filepath`, `code.lineno`,
//!     `thread.id`, `thread.name`; its parent the span `parent` names (its trace
//!     that span's; a span without one roots a trace of its own); `follows` a link to
//!     the span of that id as it is then. A span goes out as it closes, so a stream
//!     holds only the spans open. Marked as on the host: a span whose `new` was not
//!     read starts at its first record (`ringtrace.start_unknown`; named `?` unless an
//!     event's context names it); a span not closed by the end of the records ends at
//!     its last record or its latest descendant's end (`ringtrace.end_unknown`).
//!     Bounded: 65,536 spans open (past it the oldest goes out, marked
//!     `ringtrace.end_unknown`), 262,144 span events held in them (past it an event in
//!     a span is the log record it would be outside one, with `span.name` and
//!     `ringtrace.span_id`: [`OtlpCounts::span_events_as_logs`]).
//!   * `lost`, events the recorder lost (its ring full): the trace export's record of
//!     them, severity `WARN`, the body `ringtrace: N events lost here (ring full)`,
//!     `ringtrace.lost` = N, `thread.name`.
//!   * `undecodable`, a record its host could not decode: severity unspecified, the body
//!     `ringtrace: not decoded on its host: WHY`, `ringtrace.undecodable` (WHY) and
//!     `ringtrace.len` (the record's length).
//!
//!   Any other payload (not JSON, not an object, none or more than one of those four
//!   members, a member of another type than the agent writes, an unknown level or span
//!   kind) is exported as a plain record's, with `ringtrace.undecodable` saying why,
//!   and counted ([`OtlpCounts::undecodable`]): never dropped, never a failure.
//! * **Gaps**: a record whose source lacks sequence numbers just before it, in the
//!   fleet (records overwritten before its agent read them, batches lost, records too
//!   large to ship, whose markers the fleet keeps: [`Fleet::too_large`]), is preceded
//!   by a log record at its time: severity `WARN`, the body
//!   `ringtrace: N records missing before this one` (and how many of them were too
//!   large), `ringtrace.lost` = N and, where any, `ringtrace.too_large` (the fleet's
//!   own words: numbers of any source never read, not a recorder's loss). The gaps are
//!   the fleet's, not the entries': a window of the timeline says the gaps before
//!   its records, and nothing of the records it leaves out.
//!
//! [`OtlpCounts`] says how many of each were made: `log_records` is
//! `records + gaps − spans − span_events`.

mod chrome;
mod ctf;
mod events;
mod object;
mod otlp;
mod payload;
mod perfetto;
mod tracks;
mod writer;

use std::io::{self, Write};
use std::path::Path;

pub use otlp::{Otlp, OtlpCounts, OtlpWriter};
pub use tracks::Exported;
pub use writer::TraceWriter;

use super::{Entry, Fleet};

/// Writes `entries` of `fleet` as a Perfetto protobuf trace to `out`, and flushes it
/// (see the [module docs](self) for what the file holds).
///
/// Output is gathered into 64 KiB writes, and no allocation is made per record: the
/// packets are encoded into one reused buffer.
///
/// # Errors
///
/// The errors of `out`: what was written before one is a valid but shorter trace.
pub fn perfetto<'a, W: Write>(
    fleet: &'a Fleet,
    entries: impl IntoIterator<Item = Entry<'a>>,
    out: &mut W,
) -> io::Result<Exported> {
    let mut w = TraceWriter::perfetto(out).numbered_by(fleet);
    entries.into_iter().try_for_each(|e| w.put_entry(&e))?;
    w.finish()
}

/// Writes `entries` of `fleet` as Chrome trace JSON to `out`, and flushes it (see the
/// [module docs](self)).
///
/// # Errors
///
/// The errors of `out`.
pub fn chrome<'a, W: Write>(
    fleet: &'a Fleet,
    entries: impl IntoIterator<Item = Entry<'a>>,
    out: &mut W,
) -> io::Result<Exported> {
    let mut w = TraceWriter::chrome(out).numbered_by(fleet);
    entries.into_iter().try_for_each(|e| w.put_entry(&e))?;
    w.finish()
}

/// Writes `entries` of `fleet` as a CTF 1.8 trace into the directory `dir` (see the
/// [module docs](self)): `dir` is made if missing (with its parents), then a
/// `stream-PID-TID` file per source written and `metadata`, last.
///
/// Each file is created new: an export into a directory that already holds one of
/// these names fails (give each export a new directory; other files in it would be
/// read as part of the trace).
///
/// # Errors
///
/// Making the directory, creating or writing a file.
pub fn ctf<'a>(fleet: &'a Fleet, entries: impl IntoIterator<Item = Entry<'a>>, dir: &Path) -> io::Result<Exported> {
    let mut w = TraceWriter::ctf(dir)?.numbered_by(fleet);
    entries.into_iter().try_for_each(|e| w.put_entry(&e))?;
    w.finish()
}

/// `entries` of `fleet` as OpenTelemetry spans and log records (see the
/// [module docs](self#otlp)).
///
/// Nothing in a payload fails it: what is not read as an event is exported as bytes
/// and counted.
pub fn otlp<'a>(fleet: &'a Fleet, entries: impl IntoIterator<Item = Entry<'a>>) -> Otlp {
    otlp::convert(fleet, entries)
}

/// Writes `entries` of `fleet` to `out` as OTLP/JSON lines, each an
/// `ExportTraceServiceRequest` of at most 2048 spans or an `ExportLogsServiceRequest` of
/// at most 2048 log records, and 1 MiB of protobuf, and flushes it (see the
/// [module docs](self#otlp)). Nothing is written for no entries.
///
/// # Errors
///
/// The errors of `out`: what was written before one is whole lines.
pub fn otlp_json<'a, W: Write>(
    fleet: &'a Fleet,
    entries: impl IntoIterator<Item = Entry<'a>>,
    out: &mut W,
) -> io::Result<OtlpCounts> {
    otlp::write_json(fleet, entries, out)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod values_tests;
