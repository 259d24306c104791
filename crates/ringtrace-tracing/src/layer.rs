//! The `tracing_subscriber::Layer`: every span and event becomes one record in the
//! calling thread's ring.
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
    fn new(kind: u8, callsite: Option<u32>, a: u64, b: Option<u64>, c: Option<u32>) -> Head {
        let mut h = Head { kind, bytes: [0; 20], len: 0 };
        let mut put = |x: &[u8]| {
            h.bytes[h.len..h.len + x.len()].copy_from_slice(x);
            h.len += x.len();
        };
        if let Some(cs) = callsite {
            put(&cs.to_le_bytes());
        }
        put(&a.to_le_bytes());
        if let Some(b) = b {
            put(&b.to_le_bytes());
        }
        if let Some(c) = c {
            put(&c.to_le_bytes());
        }
        h
    }
}

impl RingLayer {
    /// Encodes a record with values: the head under the thread's state, the values with
    /// the state released (they may run user code), the write under the state again.
    #[inline]
    fn with_values(&self, head: impl FnOnce(&mut Local) -> Head, values: impl FnOnce(&mut Encoder<'_>)) {
        let Some((head, mut buf)) = local::with(&self.shared, |l| (head(l), std::mem::take(&mut l.scratch))) else {
            return;
        };
        let limits = self.shared.limits;
        let mut enc = Encoder::new(&mut buf, head.kind, &head.bytes[..head.len], limits.max_record, limits.max_value);
        values(&mut enc);
        if enc.finish() {
            Counters::bump(&self.shared.counters.cut, 1);
        }
        local::with(&self.shared, |l| {
            l.write(&buf);
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
        self.with_values(
            |l| {
                let callsite = l.callsite(attrs.metadata());
                let parent = if attrs.is_contextual() { l.current().0 } else { attrs.parent().map_or(0, Id::into_u64) };
                Head::new(kind::NEW_SPAN, Some(callsite), id.into_u64(), Some(parent), None)
            },
            |enc| attrs.record(enc),
        );
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        self.with_values(|_| Head::new(kind::RECORD, None, id.into_u64(), None, None), |enc| values.record(enc));
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
                Head::new(kind::EVENT, Some(callsite), span, None, Some(span_cs))
            },
            |enc| event.record(enc),
        );
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        local::with(&self.shared, |l| {
            let cs = span_callsite(l, id, &ctx);
            l.stack.push((id.into_u64(), cs));
            l.write_simple(kind::ENTER, id.into_u64(), None);
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
            l.write_simple(kind::EXIT, id, None);
        });
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        self.simple(kind::CLOSE, id.into_u64(), None);
    }
}
