//! The `tracing_subscriber::Layer`: every span and event becomes a record in the
//! calling thread's ring. A span made and entered at once on a thread (nothing else
//! recorded between) is one `open` record, one exited and closed at once a `done`
//! record: a synchronous span is two records and two clock readings, not four (the
//! thread's held record, module `local`).
//!
//! Nesting: a field's `Debug` or `Display` may itself emit an event (and under a
//! global default dispatcher `tracing` does not stop it). The thread's state is never
//! held while user code runs: the scratch buffer is taken out, the values formatted
//! into it, then the state is taken again to write. A nested event is recorded like
//! any other, before the event whose value emitted it.

use std::sync::Arc;

use tracing_core::span::{Attributes, Id, Record};
use tracing_core::subscriber::{Interest, Subscriber};
use tracing_core::{Event, Metadata};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::local::{self, Local};
use crate::shared::{Counters, Shared};
use crate::wire::{kind, Encoder};

/// The layer: records spans and events into per-thread rings. Made by
/// [`Builder::build`](crate::Builder::build) with its [`Recorder`](crate::Recorder).
#[derive(Clone)]
pub struct RingLayer {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for RingLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingLayer").field("id", &self.shared.id).finish()
    }
}

/// A record's kind and fixed head (up to 20 bytes: callsite, span, parent).
struct Head {
    kind: u8,
    bytes: [u8; 20],
    len: usize,
}

impl Head {
    // Each at fixed offsets, inlined: the compiler keeps the head in registers (bytes
    // put at a running offset, then read back whole, stall on the store forwarding).

    /// An event's: callsite, span, the span's callsite.
    #[inline(always)]
    fn event(callsite: u32, span: u64, span_callsite: u32) -> Head {
        let mut bytes = [0; 20];
        bytes[..4].copy_from_slice(&callsite.to_le_bytes());
        bytes[4..12].copy_from_slice(&span.to_le_bytes());
        bytes[12..16].copy_from_slice(&span_callsite.to_le_bytes());
        Head { kind: kind::EVENT, bytes, len: 16 }
    }

    /// A new span's: callsite, span, parent.
    #[inline(always)]
    fn new_span(callsite: u32, span: u64, parent: u64) -> Head {
        let mut bytes = [0; 20];
        bytes[..4].copy_from_slice(&callsite.to_le_bytes());
        bytes[4..12].copy_from_slice(&span.to_le_bytes());
        bytes[12..].copy_from_slice(&parent.to_le_bytes());
        Head { kind: kind::NEW_SPAN, bytes, len: 20 }
    }

    /// A span's `record`: the span.
    #[inline(always)]
    fn record(span: u64) -> Head {
        let mut bytes = [0; 20];
        bytes[..8].copy_from_slice(&span.to_le_bytes());
        Head { kind: kind::RECORD, bytes, len: 8 }
    }
}

impl RingLayer {
    /// Encodes a record with values: the head under the thread's state, the values with
    /// the state released (they may run user code), the write under the state again.
    #[inline]
    fn with_values(&self, head: impl FnOnce(&mut Local) -> Head, values: impl FnOnce(&mut Encoder<'_>)) {
        self.encode_then(head, values, |l, buf| l.write(buf));
    }

    /// [`with_values`](Self::with_values), the encoded record handed to `then` (under the
    /// thread's state) instead of written.
    #[inline]
    fn encode_then(
        &self,
        head: impl FnOnce(&mut Local) -> Head,
        values: impl FnOnce(&mut Encoder<'_>),
        then: impl FnOnce(&mut Local, &mut Vec<u8>),
    ) {
        let Some((head, mut buf)) = local::with(&self.shared, |l| (head(l), std::mem::take(&mut l.scratch))) else {
            return;
        };
        let limits = self.shared.limits;
        let mut enc = Encoder::new(&mut buf, head.kind, &head.bytes, head.len, limits.max_record, limits.max_value);
        values(&mut enc);
        if enc.finish() {
            Counters::bump(&self.shared.counters.cut, 1);
        }
        local::with(&self.shared, |l| {
            then(l, &mut buf);
            l.scratch = buf;
        });
    }

    fn simple(&self, k: u8, a: u64, b: Option<u64>) {
        local::with(&self.shared, |l| l.write_simple(k, a, b));
    }
}

/// A span's callsite number, from the registry's metadata.
fn span_callsite<S>(l: &mut Local, id: &Id, ctx: &Context<'_, S>) -> u32
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    ctx.metadata(id).map_or(0, |m| l.callsite(m))
}

impl<S> Layer<S> for RingLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        self.shared.callsite_id(meta);
        Interest::always()
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        let callsite = std::cell::Cell::new(0);
        self.encode_then(
            |l| {
                callsite.set(l.callsite(attrs.metadata()));
                let parent = if attrs.is_contextual() { l.current().0 } else { attrs.parent().map_or(0, Id::into_u64) };
                Head::new_span(callsite.get(), id.into_u64(), parent)
            },
            |enc| attrs.record(enc),
            // Held: written as an `open` record if the span is entered next.
            |l, buf| l.hold_new(id.into_u64(), callsite.get(), buf),
        );
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        self.with_values(|_| Head::record(id.into_u64()), |enc| values.record(enc));
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, _ctx: Context<'_, S>) {
        self.simple(kind::FOLLOWS, id.into_u64(), Some(follows.into_u64()));
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        self.with_values(
            |l| {
                let callsite = l.callsite(event.metadata());
                let (span, span_cs) = if event.is_contextual() {
                    l.current()
                } else {
                    match event.parent() {
                        Some(id) => (id.into_u64(), span_callsite(l, id, &ctx)),
                        None => (0, 0),
                    }
                };
                Head::event(callsite, span, span_cs)
            },
            |enc| event.record(enc),
        );
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        local::with(&self.shared, |l| {
            let span = id.into_u64();
            let cs = match l.open(span) {
                Some(cs) => cs,
                None => {
                    let cs = span_callsite(l, id, &ctx);
                    l.write_simple(kind::ENTER, span, None);
                    cs
                }
            };
            l.stack.push((span, cs));
        });
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        local::with(&self.shared, |l| {
            let id = id.into_u64();
            // Spans exit in reverse order of entering, almost always; else the
            // innermost entry of this span goes.
            if let Some(i) = l.stack.iter().rposition(|&(s, _)| s == id) {
                l.stack.remove(i);
            }
            // Held: written as a `done` record if the span closes next.
            l.hold_exit(id);
        });
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        local::with(&self.shared, |l| {
            let span = id.into_u64();
            if !l.done(span) {
                l.write_simple(kind::CLOSE, span, None);
            }
        });
    }
}
