//! Batches: requests split within bounds, the spans and log records kept in order
//! under their resources and scopes.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use proptest::prelude::*;
use prost::Message;
use ringtrace_export::otlp::{log_batches, trace_batches, Limits};

/// Resources (the length of an attribute), each with scopes (the length of a
/// name), each with items (the length of a name); empty ones too.
type Shape = Vec<(usize, Vec<(usize, Vec<usize>)>)>;

fn shape() -> impl Strategy<Value = Shape> {
    let item = prop_oneof![8 => 0usize..300, 1 => 300usize..6000];
    let scope = (0usize..200, prop::collection::vec(item, 0..12));
    prop::collection::vec((0usize..400, prop::collection::vec(scope, 0..4)), 0..5)
}

fn resource(r: usize, len: usize) -> Resource {
    let value = Some(AnyValue { value: Some(any_value::Value::StringValue(format!("{r}{}", "r".repeat(len)))) });
    Resource { attributes: vec![KeyValue { key: "r".into(), value, ..KeyValue::default() }], ..Resource::default() }
}

fn scope(r: usize, s: usize, len: usize) -> InstrumentationScope {
    InstrumentationScope { name: format!("{r}.{s}{}", "s".repeat(len)), ..InstrumentationScope::default() }
}

fn traces(shape: &Shape) -> ExportTraceServiceRequest {
    let mut n = 0u64;
    let resource_spans = shape
        .iter()
        .enumerate()
        .map(|(r, (rlen, scopes))| ResourceSpans {
            resource: Some(resource(r, *rlen)),
            scope_spans: scopes
                .iter()
                .enumerate()
                .map(|(s, (slen, items))| ScopeSpans {
                    scope: Some(scope(r, s, *slen)),
                    spans: items
                        .iter()
                        .map(|&len| {
                            n += 1;
                            Span { span_id: n.to_be_bytes().to_vec(), name: "x".repeat(len), ..Span::default() }
                        })
                        .collect(),
                    ..ScopeSpans::default()
                })
                .collect(),
            ..ResourceSpans::default()
        })
        .collect();
    ExportTraceServiceRequest { resource_spans }
}

fn logs(shape: &Shape) -> ExportLogsServiceRequest {
    let mut n = 0u64;
    let resource_logs = shape
        .iter()
        .enumerate()
        .map(|(r, (rlen, scopes))| ResourceLogs {
            resource: Some(resource(r, *rlen)),
            scope_logs: scopes
                .iter()
                .enumerate()
                .map(|(s, (slen, items))| ScopeLogs {
                    scope: Some(scope(r, s, *slen)),
                    log_records: items
                        .iter()
                        .map(|&len| {
                            n += 1;
                            LogRecord { time_unix_nano: n, severity_text: "x".repeat(len), ..LogRecord::default() }
                        })
                        .collect(),
                    ..ScopeLogs::default()
                })
                .collect(),
            ..ResourceLogs::default()
        })
        .collect();
    ExportLogsServiceRequest { resource_logs }
}

/// Every span with its resource and scope, in order.
fn flat_spans(reqs: &[ExportTraceServiceRequest]) -> Vec<(Resource, InstrumentationScope, Span)> {
    let mut out = Vec::new();
    for req in reqs {
        for r in &req.resource_spans {
            for s in &r.scope_spans {
                for x in &s.spans {
                    out.push((r.resource.clone().unwrap(), s.scope.clone().unwrap(), x.clone()));
                }
            }
        }
    }
    out
}

fn flat_logs(reqs: &[ExportLogsServiceRequest]) -> Vec<(Resource, InstrumentationScope, LogRecord)> {
    let mut out = Vec::new();
    for req in reqs {
        for r in &req.resource_logs {
            for s in &r.scope_logs {
                for x in &s.log_records {
                    out.push((r.resource.clone().unwrap(), s.scope.clone().unwrap(), x.clone()));
                }
            }
        }
    }
    out
}

/// `batch` with `next` (a span and its resource and scope) added at its end.
fn with_span(batch: &ExportTraceServiceRequest, next: &(Resource, InstrumentationScope, Span)) -> usize {
    let mut b = batch.clone();
    let (res, sc, span) = next.clone();
    match b.resource_spans.last_mut() {
        Some(r) if r.resource.as_ref() == Some(&res) => match r.scope_spans.last_mut() {
            Some(s) if s.scope.as_ref() == Some(&sc) => s.spans.push(span),
            _ => r.scope_spans.push(ScopeSpans { scope: Some(sc), spans: vec![span], ..ScopeSpans::default() }),
        },
        _ => b.resource_spans.push(ResourceSpans {
            resource: Some(res),
            scope_spans: vec![ScopeSpans { scope: Some(sc), spans: vec![span], ..ScopeSpans::default() }],
            ..ResourceSpans::default()
        }),
    }
    b.encoded_len()
}

proptest! {
    /// The batches give back the spans in order under their resource and scope;
    /// each is within the bounds unless it holds one span; none holds an empty
    /// scope or resource; and each but the last is full: its next span would not
    /// fit (so the byte count is the encoded length, not a guess above it).
    #[test]
    fn trace_batches_keep_order_and_bounds(
        shape in shape(),
        max_items in 0usize..12,
        max_bytes in 0usize..8000,
    ) {
        let req = traces(&shape);
        let limits = Limits { max_items, max_bytes };
        let batches = trace_batches(req.clone(), limits);
        let all = flat_spans(std::slice::from_ref(&req));
        prop_assert_eq!(flat_spans(&batches), all.clone());
        prop_assert_eq!(batches.is_empty(), all.is_empty());
        let mut at = 0;
        for (i, b) in batches.iter().enumerate() {
            let n = flat_spans(std::slice::from_ref(b)).len();
            prop_assert!(n >= 1);
            prop_assert!(b.resource_spans.iter().all(|r| !r.scope_spans.is_empty()
                && r.scope_spans.iter().all(|s| !s.spans.is_empty())));
            prop_assert!(n == 1 || (n <= max_items && b.encoded_len() <= max_bytes),
                "{} spans, {} bytes", n, b.encoded_len());
            at += n;
            if i + 1 < batches.len() {
                prop_assert!(n >= max_items || with_span(b, &all[at]) > max_bytes, "batch {} not full", i);
            }
        }
    }

    /// The same for log records.
    #[test]
    fn log_batches_keep_order_and_bounds(
        shape in shape(),
        max_items in 0usize..12,
        max_bytes in 0usize..8000,
    ) {
        let req = logs(&shape);
        let batches = log_batches(req.clone(), Limits { max_items, max_bytes });
        let all = flat_logs(std::slice::from_ref(&req));
        prop_assert_eq!(flat_logs(&batches), all.clone());
        prop_assert_eq!(batches.is_empty(), all.is_empty());
        for b in &batches {
            let n = flat_logs(std::slice::from_ref(b)).len();
            prop_assert!(n >= 1);
            prop_assert!(n == 1 || (n <= max_items && b.encoded_len() <= max_bytes),
                "{} records, {} bytes", n, b.encoded_len());
        }
    }
}

#[test]
fn default_limits() {
    assert_eq!(Limits::default(), Limits { max_items: 2048, max_bytes: 1 << 20 });
    assert!(trace_batches(ExportTraceServiceRequest::default(), Limits::default()).is_empty());
    let empty = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans { resource: Some(resource(0, 0)), ..ResourceSpans::default() }],
    };
    assert!(trace_batches(empty, Limits::default()).is_empty());
}
