//! The `fastrace` rows of `otel`: the same unit of work (a span of 4 properties around an
//! event of 4 properties) through fastrace 0.7, which does not go through `tracing` (see
//! the parent module's documentation for what each row does and how its spans are
//! counted).

use std::borrow::Cow;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fastrace::collector::{Config, Reporter, SpanContext, SpanRecord};
use fastrace::local::LocalSpan;
use fastrace::{Event, Span};
use opentelemetry::InstrumentationScope;

use super::counted::{otlp_exporter, resource, Counts};

/// Units of work of the `local` row under one root span: a root holds its local spans in
/// its thread until its guard drops, at most 10,240 of them with their events
/// (fastrace 0.7.19's `DEFAULT_SPAN_QUEUE_SIZE`, of its `LocalSpanStack`; past that a
/// local span or event is not recorded), and a unit is two (the span and its event).
pub(super) const LOCAL_PER_ROOT: u64 = 1000;

/// The span and event properties of unit `i`. fastrace's properties are strings: the
/// unit's number is formatted (`to_string`, an allocation), the constants are
/// `&'static str`s, which it keeps without copying.
#[inline(always)]
fn props(i: u64, names: [&'static str; 4], rest: [&'static str; 3]) -> [(&'static str, Cow<'static, str>); 4] {
    [
        (names[0], Cow::Owned(i.to_string())),
        (names[1], Cow::Borrowed(rest[0])),
        (names[2], Cow::Borrowed(rest[1])),
        (names[3], Cow::Borrowed(rest[2])),
    ]
}

/// The event of unit `i`, in the thread's current local parent.
#[inline(always)]
fn event(i: u64) {
    LocalSpan::add_event(Event::new("event").with_properties(|| props(i, ["x", "y", "z", "w"], ["-1", "0.5", "msg"])));
}

/// `root` (and `otlp-http/batch`): a root span per unit, made the thread's local parent
/// while its event is added.
#[inline(always)]
pub(super) fn root_spans(r: Range<u64>) {
    for i in r {
        let root = Span::root("request", SpanContext::random())
            .with_properties(|| props(i, ["a", "b", "c", "d"], ["2.5", "true", "text"]));
        let _g = root.set_local_parent();
        event(i);
    }
}

/// `local`: a local span per unit, [`LOCAL_PER_ROOT`] of them under each root span
/// (named `writer`, not counted) made the thread's local parent.
#[inline(always)]
pub(super) fn local_spans(r: Range<u64>) {
    let mut start = r.start;
    while start < r.end {
        let end = r.end.min(start + LOCAL_PER_ROOT);
        let root = Span::root("writer", SpanContext::random());
        // Dropped before `root`: the local spans are handed over, then the root.
        let _g = root.set_local_parent();
        for i in start..end {
            let _s = LocalSpan::enter_with_local_parent("request")
                .with_properties(|| props(i, ["a", "b", "c", "d"], ["2.5", "true", "text"]));
            event(i);
        }
        start = end;
    }
}

/// The `request` spans (and their events) a reporter was given.
#[derive(Debug, Default)]
pub(super) struct Reported {
    pub(super) spans: AtomicU64,
    pub(super) events: AtomicU64,
}

/// The reporter of the `root` and `local` rows: counts the `request` spans fastrace's
/// collector thread hands it, and their events, and keeps nothing.
struct Counting(Arc<Reported>);

impl Reporter for Counting {
    fn report(&mut self, spans: Vec<SpanRecord>) {
        let (mut n, mut events) = (0, 0);
        for s in spans.iter().filter(|s| s.name == "request") {
            n += 1;
            events += s.events.len() as u64;
        }
        self.0.spans.fetch_add(n, Relaxed);
        self.0.events.fetch_add(events, Relaxed);
    }
}

/// fastrace's reporter is the process's: one pipeline at a time (the unit tests share a
/// process; a row's own process has one).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Where a pipeline's spans are counted.
#[derive(Clone)]
enum Sink {
    Counting(Arc<Reported>),
    Otlp(Arc<Counts>),
}

/// A pipeline's count of `request` spans reported (`Counting`) or exported (OTLP), which
/// a writer thread can hold.
#[derive(Clone)]
pub(super) struct Counter(Sink);

impl Counter {
    pub(super) fn get(&self) -> u64 {
        match &self.0 {
            Sink::Counting(r) => r.spans.load(Relaxed),
            Sink::Otlp(c) => c.exported.load(Relaxed),
        }
    }
}

/// How long a writer waits after its window for its spans to be reported.
const CATCH_UP: Duration = Duration::from_secs(30);

/// After a writer's window, outside its CPU figure: waits until `counter` reaches
/// `expected` (every writer's spans reported), or [`CATCH_UP`] has passed.
///
/// fastrace never drops a span while its thread lives: a thread's queue of 10,240
/// commands (fastrace 0.7.19's `CHANNEL_SIZE`, of its global collector) that is full spills
/// into an unbounded list, moved into the queue at the thread's next send, but at the
/// thread's exit what does not fit is lost (the `Drop` of its `spsc::Sender`). A
/// program's threads live on and keep sending; the bench's writers end with the window.
/// So each writer sends what waits in its list by making a root span (`catch-up`) that it
/// cancels (`Span::cancel`: its collector reports nothing of it), and has the collector
/// run (`fastrace::flush`), until the count is reached. Whether it was.
pub(super) fn catch_up(counter: &Counter, expected: u64) -> bool {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        if counter.get() >= expected {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        let span = Span::root("catch-up", SpanContext::random());
        span.cancel();
        drop(span);
        fastrace::flush();
    }
}

/// fastrace's reporter, installed with `fastrace::set_reporter`.
pub(super) struct Pipeline {
    sink: Sink,
    _one: MutexGuard<'static, ()>,
}

impl Pipeline {
    /// `otlp-http/batch`: `fastrace_opentelemetry::OpenTelemetryReporter` around the
    /// counted OTLP exporter posting to `endpoint`; any other variant: [`Counting`].
    pub(super) fn new(variant: &str, endpoint: &str) -> Result<Pipeline, String> {
        let one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let sink = if variant == "otlp-http/batch" {
            let (exporter, counts) = otlp_exporter(endpoint)?;
            let reporter = fastrace_opentelemetry::OpenTelemetryReporter::new(
                exporter,
                Cow::Owned(resource()),
                InstrumentationScope::builder("ringtrace-bench").build(),
            );
            fastrace::set_reporter(reporter, Config::default());
            Sink::Otlp(counts)
        } else {
            let reported = Arc::new(Reported::default());
            fastrace::set_reporter(Counting(reported.clone()), Config::default());
            Sink::Counting(reported)
        };
        Ok(Pipeline { sink, _one: one })
    }

    /// Hands what the writers have queued so far to the reporter (`fastrace::flush`,
    /// which runs the collector once on a thread of its own and waits for it).
    pub(super) fn flush(&self) {
        fastrace::flush();
    }

    /// `request` spans reported (`Counting`) or exported (OTLP) so far.
    pub(super) fn count(&self) -> u64 {
        self.counter().get()
    }

    pub(super) fn counter(&self) -> Counter {
        Counter(self.sink.clone())
    }

    /// Events of the `request` spans reported (`Counting`; the OTLP row: `None`).
    pub(super) fn events(&self) -> Option<u64> {
        match &self.sink {
            Sink::Counting(r) => Some(r.events.load(Relaxed)),
            Sink::Otlp(_) => None,
        }
    }

    /// Flushes what is left and returns [`Self::count`] after it.
    pub(super) fn finish(&self) -> u64 {
        self.flush();
        if let Sink::Otlp(c) = &self.sink {
            c.report_failed();
        }
        self.count()
    }
}
