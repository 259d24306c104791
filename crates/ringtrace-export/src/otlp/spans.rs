//! The spans' last touches once the trace is read: their times as their subtrees
//! bound them, their ids, parents, trace ids and links.

use std::collections::HashSet;

use super::ids::{span_id, trace_id};
use super::model::mark;

use opentelemetry_proto::tonic::trace::v1::{span, Span};

/// A span being assembled.
pub(super) struct Building {
    /// The ringtrace (`tracing`) span id.
    pub id: u64,
    pub span: Span,
    /// The parent span (an index of the spans in the order first seen, always lower
    /// than this span's).
    pub parent: Option<usize>,
    pub start_known: bool,
    pub closed: bool,
    pub last_ns: u64,
}

/// Gives the assembled spans (in the order first seen, every parent before its
/// children) their times, ids, parents, trace ids and links.
pub(super) fn finish(mut spans: Vec<Building>, links: &[(usize, usize)], origin: u64) -> (Vec<Span>, Finished) {
    let mut out = Finished::default();
    let parent = |spans: &[Building], i: usize| spans[i].parent.filter(|&p| p < i);
    // The earliest start and latest end in each span's subtree: children come after
    // their parent, so a pass from the last span up has each child's final before its
    // parent takes it. A span whose start (end) the trace does not hold takes its
    // subtree's; one whose record it holds keeps it.
    let mut first: Vec<u64> = spans.iter().map(|b| b.span.start_time_unix_nano).collect();
    let mut last: Vec<u64> =
        spans.iter().map(|b| if b.closed { b.span.end_time_unix_nano } else { b.last_ns }).collect();
    for i in (0..spans.len()).rev() {
        if let Some(p) = parent(&spans, i) {
            first[p] = first[p].min(first[i]);
            last[p] = last[p].max(last[i]);
        }
    }
    for (i, b) in spans.iter_mut().enumerate() {
        if !b.start_known {
            b.span.start_time_unix_nano = first[i];
        }
        if !b.closed {
            b.span.end_time_unix_nano = last[i];
        }
    }
    let mut used = HashSet::with_capacity(spans.len());
    let ids: Vec<u64> =
        spans.iter().map(|b| span_id(origin, b.id, b.span.start_time_unix_nano, |h| !used.insert(h))).collect();
    // Each span's root: its parent's (a lower index, so already known), or itself.
    let mut root = Vec::with_capacity(spans.len());
    for i in 0..spans.len() {
        let r = parent(&spans, i).map_or(i, |p| root[p]);
        root.push(r);
    }
    let traces: Vec<Vec<u8>> = root.iter().map(|&r| trace_id(origin, ids[r])).collect();
    let mut linked: Vec<Vec<span::Link>> = vec![Vec::new(); spans.len()];
    for &(from, to) in links {
        if let (Some(l), Some(t)) = (linked.get_mut(from), traces.get(to)) {
            l.push(span::Link {
                trace_id: t.clone(),
                span_id: ids[to].to_be_bytes().to_vec(),
                ..span::Link::default()
            });
        }
    }
    let mut result = Vec::with_capacity(spans.len());
    for (i, (mut b, links)) in spans.into_iter().zip(linked).enumerate() {
        b.span.span_id = ids[i].to_be_bytes().to_vec();
        b.span.trace_id = traces[i].clone();
        b.span.parent_span_id = b.parent.filter(|&p| p < i).map(|p| ids[p].to_be_bytes().to_vec()).unwrap_or_default();
        b.span.links = links;
        if !b.start_known {
            out.start_unknown += 1;
            mark(&mut b.span.attributes, "ringtrace.start_unknown");
        }
        if !b.closed {
            out.end_unknown += 1;
            mark(&mut b.span.attributes, "ringtrace.end_unknown");
        }
        out.sources.push(SpanSource { id: b.id, closed: b.closed });
        result.push(b.span);
    }
    (result, out)
}

/// What a converted span was in the trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpanSource {
    /// Its `tracing` span id (reused once the span closed).
    pub id: u64,
    /// Whether the trace holds its close: its end time is then its close record's, the
    /// same in every read that holds it.
    pub closed: bool,
}

/// What [`finish`] counted.
#[derive(Default)]
pub(super) struct Finished {
    pub start_unknown: u64,
    pub end_unknown: u64,
    pub sources: Vec<SpanSource>,
}
