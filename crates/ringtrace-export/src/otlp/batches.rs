//! Requests split into batches of bounded size: a collector refuses a request past
//! its bound (the OpenTelemetry Collector's OTLP gRPC receiver, a gRPC-Go server,
//! takes messages of up to gRPC-Go's default of 4 MiB unless its
//! `max_recv_msg_size_mib` says otherwise).
//!
//! A request's protobuf encoding is the sum of its fields': each resource's message
//! (its field key, its length as a varint, its bytes), and in each the resource and
//! its scopes' messages, and in each scope its items' ([`Size`] adds them up).

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::logs::v1::ScopeLogs;
use opentelemetry_proto::tonic::trace::v1::ScopeSpans;
use prost::Message;

/// Bounds of one OTLP request (a batch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Spans or log records in a request, at most.
    pub max_items: usize,
    /// Bytes of a request's protobuf encoding (`prost::Message::encoded_len`), at most,
    /// unless one item alone passes it.
    pub max_bytes: usize,
}

impl Default for Limits {
    /// 2048 items and 1 MiB (`1 << 20`): a quarter of the OpenTelemetry Collector's
    /// default gRPC receive bound of 4 MiB.
    fn default() -> Self {
        Limits { max_items: 2048, max_bytes: 1 << 20 }
    }
}

/// Bytes of a length-delimited field of tag 1 to 15 (a key of one byte) holding `len`
/// bytes.
fn field(len: usize) -> usize {
    1 + prost::encoding::encoded_len_varint(len as u64) + len
}

/// The encoded size of a batch being built: the resources closed, and the last
/// resource's bytes without its open scope (its fields, its closed scopes) and its
/// open scope's (its fields, its items).
#[derive(Clone, Copy, Debug, Default)]
struct Size {
    closed: usize,
    open: Option<(usize, Option<usize>)>,
}

impl Size {
    fn total(&self) -> usize {
        self.closed + self.open.map_or(0, |(resource, scope)| field(resource + scope.map_or(0, field)))
    }

    /// A resource of `fixed` bytes (its fields but its scopes) opens.
    fn open_resource(&mut self, fixed: usize) {
        self.closed = self.total();
        self.open = Some((fixed, None));
    }

    /// A scope of `fixed` bytes (its fields but its items) opens in the open resource.
    fn open_scope(&mut self, fixed: usize) {
        if let Some((resource, scope)) = &mut self.open {
            *resource += scope.map_or(0, field);
            *scope = Some(fixed);
        }
    }

    /// An item of `len` bytes goes into the open scope.
    fn push(&mut self, len: usize) {
        if let Some((_, Some(scope))) = &mut self.open {
            *scope += field(len);
        }
    }
}

/// A request as resources (each without its scopes), their scopes (each without its
/// items), and the items.
type Shape<R, S, I> = Vec<(R, Vec<(S, Vec<I>)>)>;

/// `req` split into requests of at most `limits.max_items` items and at most
/// `limits.max_bytes` encoded bytes, each item under its own resource and scope, in
/// order; an item that alone passes `max_bytes` goes alone; scopes and resources
/// without items are left out.
fn split<R: Message + Clone, S: Message + Clone, I: Message>(
    req: Shape<R, S, I>,
    limits: Limits,
) -> Vec<Shape<R, S, I>> {
    let mut batches = Vec::new();
    let (mut batch, mut size, mut items): (Shape<R, S, I>, Size, usize) = (Vec::new(), Size::default(), 0);
    for (resource, scopes) in req {
        let resource_len = resource.encoded_len();
        // Whether the batch's last resource (scope) is this one.
        let mut in_resource = false;
        for (scope, list) in scopes {
            let scope_len = scope.encoded_len();
            let mut in_scope = false;
            for item in list {
                let with = |size: Size, in_resource: bool, in_scope: bool| {
                    let mut s = size;
                    if !in_resource {
                        s.open_resource(resource_len);
                    }
                    if !in_scope {
                        s.open_scope(scope_len);
                    }
                    s.push(item.encoded_len());
                    s
                };
                let mut next = with(size, in_resource, in_scope);
                if items > 0 && (items >= limits.max_items || next.total() > limits.max_bytes) {
                    batches.push(std::mem::take(&mut batch));
                    (size, items, in_resource, in_scope) = (Size::default(), 0, false, false);
                    next = with(size, false, false);
                }
                if !in_resource {
                    batch.push((resource.clone(), Vec::new()));
                    in_resource = true;
                }
                if let Some((_, s)) = batch.last_mut() {
                    if !in_scope {
                        s.push((scope.clone(), Vec::new()));
                        in_scope = true;
                    }
                    if let Some((_, l)) = s.last_mut() {
                        l.push(item);
                    }
                }
                size = next;
                items += 1;
            }
        }
    }
    if items > 0 {
        batches.push(batch);
    }
    batches
}

/// `req` split into requests of at most `limits.max_items` spans and at most
/// `limits.max_bytes` encoded bytes (`prost::Message::encoded_len`) each, every one
/// keeping its spans' resource and scope (each span under its own, where a request
/// holds several), in order; a span that alone passes `max_bytes` goes alone in a
/// request. An empty request (no span) gives no batch.
pub fn trace_batches(req: ExportTraceServiceRequest, limits: Limits) -> Vec<ExportTraceServiceRequest> {
    let shape = req
        .resource_spans
        .into_iter()
        .map(|mut r| {
            let scopes = std::mem::take(&mut r.scope_spans)
                .into_iter()
                .map(|mut s| {
                    let spans = std::mem::take(&mut s.spans);
                    (s, spans)
                })
                .collect();
            (r, scopes)
        })
        .collect();
    split(shape, limits)
        .into_iter()
        .map(|batch| ExportTraceServiceRequest {
            resource_spans: batch
                .into_iter()
                .map(|(mut r, scopes)| {
                    r.scope_spans = scopes.into_iter().map(|(s, spans)| ScopeSpans { spans, ..s }).collect();
                    r
                })
                .collect(),
        })
        .collect()
}

/// [`trace_batches`] for log records.
pub fn log_batches(req: ExportLogsServiceRequest, limits: Limits) -> Vec<ExportLogsServiceRequest> {
    let shape = req
        .resource_logs
        .into_iter()
        .map(|mut r| {
            let scopes = std::mem::take(&mut r.scope_logs)
                .into_iter()
                .map(|mut s| {
                    let records = std::mem::take(&mut s.log_records);
                    (s, records)
                })
                .collect();
            (r, scopes)
        })
        .collect();
    split(shape, limits)
        .into_iter()
        .map(|batch| ExportLogsServiceRequest {
            resource_logs: batch
                .into_iter()
                .map(|(mut r, scopes)| {
                    r.scope_logs = scopes.into_iter().map(|(s, log_records)| ScopeLogs { log_records, ..s }).collect();
                    r
                })
                .collect(),
        })
        .collect()
}
