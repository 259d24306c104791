//! What an OTLP export gives: the requests, and the counts of what it made.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

/// A fleet's records in OpenTelemetry's model (see the [module docs](crate::fleet::export#otlp)).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Otlp {
    /// The spans of events sources: a `ResourceSpans` for each (host, source) with spans.
    pub traces: ExportTraceServiceRequest,
    /// The log records: a `ResourceLogs` for each (host, source) with records.
    pub logs: ExportLogsServiceRequest,
    /// What they hold.
    pub counts: OtlpCounts,
}

/// What an OTLP export made. Every entry is one of `raw`, `events`, `spans`, `lost`,
/// `host_undecodable` and `undecodable`. A span record is part of a span, an event
/// in a span a span event (but those `span_events_as_logs`), and every other entry a
/// log record: `log_records` is `records + gaps − spans − span_events`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OtlpCounts {
    /// Entries exported.
    pub records: u64,
    /// Log records made: one for each entry but span records and events in spans, one
    /// for each gap.
    pub log_records: u64,
    /// Records of plain sources, their payloads as bytes.
    pub raw: u64,
    /// Tracing events (objects with a `level`), in spans or not.
    pub events: u64,
    /// Span records (objects with a `span`): parts of spans.
    pub spans: u64,
    /// OTLP spans made of them.
    pub otlp_spans: u64,
    /// Events in a span made span events.
    pub span_events: u64,
    /// Events in a span made log records instead, because the spans open held as
    /// many span events as they may (262,144).
    pub span_events_as_logs: u64,
    /// Spans whose `new` object was not read: marked `ringtrace.start_unknown`.
    pub start_unknown: u64,
    /// Spans whose close was not read (open at the end, or past the bound of spans
    /// open): marked `ringtrace.end_unknown`.
    pub end_unknown: u64,
    /// Counts of events the recorder lost (objects with `lost`).
    pub lost: u64,
    /// Records their host could not decode (objects with `undecodable`).
    pub host_undecodable: u64,
    /// Payloads of events sources that are not such an object: exported as bytes.
    pub undecodable: u64,
    /// Gaps: records preceded by sequence numbers their source lacks (a log record each).
    pub gaps: u64,
    /// Sequence numbers those gaps stand for.
    pub missing: u64,
    /// Of them, records too large to ship (markers in the fleet).
    pub too_large: u64,
    /// Hosts with at least one record exported.
    pub hosts: u32,
    /// Sources with at least one record exported (one resource each).
    pub sources: u32,
}
