//! Requests made into batches: each encoded once, with the count of its items.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use super::model::{Batch, Signal};
use crate::otlp::{log_batches, trace_batches, Limits};

/// Items in a request: its spans or log records.
pub trait Items {
    /// How many.
    fn items(&self) -> u64;
}

impl Items for ExportTraceServiceRequest {
    fn items(&self) -> u64 {
        self.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len() as u64).sum()
    }
}

impl Items for ExportLogsServiceRequest {
    fn items(&self) -> u64 {
        self.resource_logs.iter().flat_map(|r| &r.scope_logs).map(|s| s.log_records.len() as u64).sum()
    }
}

/// `request` encoded once, as a batch of `signal`.
pub fn batch(signal: Signal, request: &(impl Message + Items)) -> Batch {
    Batch { signal, body: request.encode_to_vec().into(), items: request.items() }
}

/// `traces` and `logs` split into requests within `limits`, each encoded as the
/// delivery reaches it: the spans' batches first, then the log records'.
pub fn batches(
    traces: ExportTraceServiceRequest,
    logs: ExportLogsServiceRequest,
    limits: Limits,
) -> impl Iterator<Item = Batch> {
    trace_batches(traces, limits)
        .into_iter()
        .map(|r| batch(Signal::Traces, &r))
        .chain(log_batches(logs, limits).into_iter().map(|r| batch(Signal::Logs, &r)))
}
