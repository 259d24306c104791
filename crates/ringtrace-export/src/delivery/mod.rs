//! OTLP delivery (feature `otlp-delivery`): a trace's spans and log records sent to an
//! OpenTelemetry Collector, Jaeger or a vendor's endpoint, OTLP/gRPC
//! (`otlp://HOST:PORT`) or OTLP/HTTP with protobuf bodies (`otlp+http://HOST:PORT`), as
//! the OTLP specification's exporters do (opentelemetry.io/docs/specs/otlp):
//!
//! * **Batches** bounded in items and encoded bytes ([`crate::otlp::Limits`]), each
//!   encoded once ([`batches`]), sent one after the other, spans first.
//! * **Retries** of a batch the endpoint could not take now: gRPC `CANCELLED`,
//!   `DEADLINE_EXCEEDED`, `ABORTED`, `OUT_OF_RANGE`, `UNAVAILABLE`, `DATA_LOSS`, and
//!   `RESOURCE_EXHAUSTED` where its status carries a `RetryInfo`; HTTP 429, 502, 503 and
//!   504; a connection refused or reset; no answer within [`Delivery::timeout`]. The
//!   pause doubles from 100 ms to 5 s, or is what the endpoint asks for (`RetryInfo`,
//!   `Retry-After` in seconds), and the batch is given up at [`Delivery::retry_for`]
//!   after its first try. A batch given up stops the delivery: the batches after it are
//!   not tried (the endpoint is down), and are counted as not delivered.
//! * **Refusals** (any other code) are not retried; a signal the endpoint does not take
//!   at all (gRPC `UNIMPLEMENTED`, HTTP 404 or 405: Jaeger takes no logs) is not sent
//!   again after its first refusal.
//! * **Partial success** (`ExportTracePartialSuccess`, `ExportLogsPartialSuccess`): the
//!   items the endpoint says it rejected are counted, with its message; the batch is not
//!   sent again, as the specification says.
//! * A `grpc-status-details-bin` that is not base64 is taken out of an answer before
//!   tonic reads it (tonic 0.14 panics on one): its status, code and message, stays.
//!
//! Nothing is counted as delivered before the endpoint acknowledged it; the [`Report`]
//! counts, per signal, what was delivered, rejected, refused and not tried, and keeps
//! the endpoint's messages: what to print is the caller's. Plain text only: TLS is not
//! built in (send to a collector on the host or its network).
//!
//! ```no_run
//! use std::time::Duration;
//! use ringtrace_export::delivery::{batches, deliver, Delivery, Endpoint};
//! use ringtrace_export::otlp::{convert, Limits, Options};
//!
//! let trace = ringtrace_tracing::decode::Trace::open("dump.rtt")?;
//! let c = convert(&trace, &Options::default());
//! let endpoint = Endpoint::parse("otlp://127.0.0.1:4317")?;
//! let opts = Delivery { timeout: Duration::from_secs(10), retry_for: Duration::from_secs(30), headers: vec![] };
//! let report = deliver(&endpoint, &opts, batches(c.traces, c.logs, Limits::default()), &|| false)?;
//! println!("{} of {} spans delivered", report.spans.delivered, report.spans.items);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod batch;
mod deliver;
pub mod follow;
mod grpc;
mod http;
mod model;
mod rpc;
mod sane;

pub use batch::{batch, batches, Items};
pub use deliver::deliver;
pub use follow::{follow, follow_recorders, Follow, FollowError, Followed, Note, Signals};
pub use model::{Batch, Delivery, Endpoint, EndpointError, EndpointProblem, Protocol, Report, Signal, Tally};
