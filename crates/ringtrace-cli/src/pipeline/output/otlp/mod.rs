//! `export --to otlp://HOST:PORT` (OTLP/gRPC) and `--to otlp+http://HOST:PORT[/PREFIX]`
//! (OTLP/HTTP, protobuf bodies): a source's spans and log records delivered to an
//! OpenTelemetry Collector, Jaeger or a vendor's endpoint by `ringtrace_export::delivery`,
//! as the OTLP specification's exporters do (opentelemetry.io/docs/specs/otlp); this
//! module says what was delivered on stderr, and follows live recorders:
//!
//! * **Batches** bounded in items and encoded bytes (`ringtrace_export::otlp::Limits`),
//!   sent one after the other, spans first.
//! * **Retries** of a batch the endpoint could not take now: gRPC `CANCELLED`,
//!   `DEADLINE_EXCEEDED`, `ABORTED`, `OUT_OF_RANGE`, `UNAVAILABLE`, `DATA_LOSS`, and
//!   `RESOURCE_EXHAUSTED` where its status carries a `RetryInfo`; HTTP 429, 502, 503 and
//!   504; a connection refused or reset; no answer within `Delivery::timeout`. The
//!   pause doubles from 100 ms to 5 s, or is what the endpoint asks for (`RetryInfo`,
//!   `Retry-After` in seconds), and the batch is given up at `Delivery::retry_for`
//!   after its first try. A batch given up stops the delivery: the batches after it are
//!   not tried (the endpoint is down), and are counted as not delivered.
//! * **Refusals** (any other code) are not retried; a signal the endpoint does not take
//!   at all (gRPC `UNIMPLEMENTED`, HTTP 404 or 405: Jaeger takes no logs) is not sent
//!   again after its first refusal.
//! * **Partial success** (`ExportTracePartialSuccess`, `ExportLogsPartialSuccess`): the
//!   items the endpoint says it rejected are counted, with its message; the batch is not
//!   sent again, as the specification says.
//!
//! Nothing is counted as delivered before the endpoint acknowledged it. Plain text only:
//! TLS is not built in (send to a collector on the host or its network).

pub mod export;
pub mod follow;

pub use ringtrace_export::delivery::{deliver, Delivery, Endpoint, Report, Signal, Tally};

/// What `export --to` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Signals {
    /// Spans and log records.
    All,
    /// Spans only.
    Traces,
    /// Log records only.
    Logs,
}
