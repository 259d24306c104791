//! `export DIR --to ENDPOINT --follow` (and `ship --to ENDPOINT DIR...`): live
//! recorders delivered as their spans close. Every round reads each source whole (a
//! recorder directory is read as `decode` reads it, without stopping its writers),
//! converts it, and delivers what the endpoint has not settled yet:
//!
//! * a span once it has closed (OTLP spans are immutable: one sent before its end
//!   could not be completed), a log record once it is read;
//! * a span is known across rounds by its `tracing` id and its close time (its close
//!   record's, the same in every read that holds it), a log record by its time, body
//!   and thread. What the endpoint settled (acknowledged, or refused for good) is
//!   remembered while the source still holds it, so memory is bounded by what the
//!   recorders hold (a stream's trace file grows: it is read whole every round);
//! * a batch not acknowledged (the endpoint down past `--retry-for`) is sent again in
//!   the next round, with what else is new;
//! * a signal the endpoint does not take (Jaeger and log records) is not sent again;
//! * on SIGINT or SIGTERM (or at `--duration`), a last round sends the spans still
//!   open too, ended at their last record and marked `ringtrace.end_unknown`.
//!
//! A span whose start the recorder overwrote gets its id from what the recorder holds
//! when it closes (`ringtrace.start_unknown`); children delivered before may name the id
//! it had then. What a flight recorder overwrote before a round read it is lost: each
//! ring's byte positions tell it (`Trace::held_rings`), and the summary says how many
//! bytes, and fails the command.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use ringtrace_tracing::export::otlp::{self as convert, Limits};

use super::export::batch;
use super::{deliver, Delivery, Endpoint, Report, Signal, Signals};
use crate::failure::Failure;
use crate::output::{eprint_line, warn};
use crate::pipeline::record::Timeline;

/// How a follower runs.
#[derive(Clone, Debug)]
pub struct Follow {
    /// The recorder directories or trace files followed.
    pub sources: Vec<PathBuf>,
    /// The pause between rounds.
    pub interval: Duration,
    /// Stop after this long (a last round first).
    pub duration: Option<Duration>,
}

/// What a log record is known by across rounds: its time, body and thread id.
type LogKey = (u64, String, i64);

/// What a span is known by across rounds: its `tracing` id and end (its close time).
type SpanKey = (u64, u64);

fn thread_of(attrs: &[KeyValue]) -> i64 {
    attrs
        .iter()
        .find(|a| a.key == "thread.id")
        .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
            any_value::Value::IntValue(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(-1)
}

fn log_key(l: &LogRecord) -> LogKey {
    let body = match l.body.as_ref().and_then(|b| b.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        _ => String::new(),
    };
    (l.time_unix_nano, body, thread_of(&l.attributes))
}

/// What a follower remembers of one source.
#[derive(Default)]
struct Seen {
    spans: HashSet<SpanKey>,
    logs: HashSet<LogKey>,
    /// Each ring's end position as last read, by (slot, creation time).
    rings: HashMap<(u32, u64), u64>,
    /// Whether a round read it yet.
    read: bool,
}

/// What a round gave.
struct Round {
    report: Report,
    /// Bytes of records the recorder overwrote since the previous round before they were read.
    overwritten: u64,
}

/// Follows `f.sources` (each read by `read`) until a signal or `f.duration`, delivering
/// to `endpoint`. Fails at once where a source cannot be read the first time; at the end
/// where anything was refused, rejected, overwritten unread, or left undelivered.
pub fn run(
    f: &Follow,
    read: &mut dyn FnMut(&Path) -> Result<Timeline, Failure>,
    endpoint: &Endpoint,
    opts: &Delivery,
    names: &convert::Options,
    signals: Signals,
) -> Result<(), Failure> {
    crate::cleanup::stop_gracefully();
    let stopping = || crate::cleanup::stop_requested().is_some();
    let start = Instant::now();
    let mut seen: Vec<Seen> = f.sources.iter().map(|_| Seen::default()).collect();
    let mut total = Report::default();
    let (mut rounds, mut overwritten, mut signals) = (0u64, 0u64, signals);
    loop {
        let last = stopping() || f.duration.is_some_and(|d| start.elapsed() >= d);
        let mut unsettled = (0u64, None::<String>);
        for (path, seen) in f.sources.iter().zip(&mut seen) {
            let timeline = match read(path) {
                Ok(t) => t,
                Err(e) if !seen.read => return Err(e),
                Err(e) => {
                    warn(&e.to_string());
                    unsettled.1 = Some(format!("{}: {e}", path.display()));
                    continue;
                }
            };
            seen.read = true;
            // The last round is not cut short by the signal that asked for it.
            let cancel = || !last && stopping();
            let r = round(&timeline, seen, endpoint, opts, names, signals, last, &cancel)?;
            overwritten += r.overwritten;
            let r = r.report;
            for (s, t) in [(Signal::Traces, &r.spans), (Signal::Logs, &r.logs)] {
                let all = total.tally(s);
                all.delivered += t.delivered;
                all.rejected += t.rejected;
                all.refused += t.refused;
                all.batches += t.batches;
                all.retries += t.retries;
                for m in &t.messages {
                    all.note(m.clone());
                }
            }
            if r.logs.refused > 0 && r.logs.delivered == 0 && signals == Signals::All {
                warn(&format!("{endpoint} takes no log records: spans only from now on (--signals traces)"));
                signals = Signals::Traces;
            }
            if let Some(why) = r.stopped {
                unsettled.0 += r.spans.failed + r.logs.failed - r.spans.refused - r.logs.refused;
                warn(&format!("{}: {endpoint}: {why}; what was not delivered is sent again", path.display()));
                unsettled.1 = Some(why);
            }
        }
        rounds += 1;
        if last {
            summary(endpoint, &total, rounds, start.elapsed(), overwritten, unsettled)?;
            // Stopped by a signal after finishing cleanly: the shell sees it (130, 143).
            return crate::cleanup::stop_requested().map_or(Ok(()), |s| Err(Failure::Interrupted(s)));
        }
        let pause_until = Instant::now() + f.interval;
        while Instant::now() < pause_until && !stopping() {
            std::thread::sleep(Duration::from_millis(50).min(f.interval));
        }
    }
}

/// Says what a follower delivered; fails where the endpoint refused or rejected items,
/// records were overwritten before a round read them, or the last round left some
/// undelivered (`unsettled`: how many, and why).
fn summary(
    endpoint: &Endpoint,
    t: &Report,
    rounds: u64,
    took: Duration,
    overwritten: u64,
    unsettled: (u64, Option<String>),
) -> Result<(), Failure> {
    eprint_line(format_args!(
        "{endpoint}: delivered {} spans and {} log records in {} batches ({} retries) over {rounds} rounds, {:.1} s",
        t.spans.delivered,
        t.logs.delivered,
        t.spans.batches + t.logs.batches,
        t.spans.retries + t.logs.retries,
        took.as_secs_f64()
    ));
    let mut bad = Vec::new();
    for (s, x) in [(Signal::Traces, &t.spans), (Signal::Logs, &t.logs)] {
        if x.rejected > 0 {
            bad.push(format!("{} {} rejected (partial success)", x.rejected, s.items()));
        }
        if x.refused > 0 {
            bad.push(format!("{} {} refused", x.refused, s.items()));
        }
    }
    if overwritten > 0 {
        bad.push(format!(
            "{overwritten} bytes of records overwritten by the recorder before a round read them (a shorter \
             --interval, or bigger rings, keeps them)"
        ));
    }
    if let (n, Some(why)) = unsettled {
        bad.push(format!("{n} spans and log records not delivered in the last round: {why}"));
    }
    let messages: Vec<String> = t.spans.messages.iter().chain(&t.logs.messages).cloned().collect();
    if bad.is_empty() {
        return Ok(());
    }
    let said = if messages.is_empty() { String::new() } else { format!(" (the endpoint: {})", messages.join("; ")) };
    Err(Failure::msg(format!("{endpoint}: {}{said}", bad.join(", "))))
}

/// One round of one source: what is new of it delivered, and remembered where settled.
#[allow(clippy::too_many_arguments)]
fn round(
    timeline: &Timeline,
    seen: &mut Seen,
    endpoint: &Endpoint,
    opts: &Delivery,
    names: &convert::Options,
    signals: Signals,
    last: bool,
    cancel: &dyn Fn() -> bool,
) -> Result<Round, Failure> {
    // One arm without the kafka feature, two with it.
    #[allow(clippy::infallible_destructuring_match)]
    let trace = match timeline {
        Timeline::Trace(trace) => trace,
        #[cfg(feature = "kafka")]
        Timeline::Fleet(_) => {
            return Err(Failure::msg("--follow reads recorder directories and trace files, not a Kafka topic"))
        }
    };
    // Bytes each ring overwrote since the previous round before they were read.
    let mut overwritten = 0u64;
    let mut rings = HashMap::new();
    for h in trace.held_rings() {
        let key = (h.slot, h.created_ns);
        match seen.rings.get(&key) {
            Some(&end) => overwritten += h.start.saturating_sub(end),
            // A ring new since a round read the source: its records from position 0.
            None if seen.rings_read() => overwritten += h.start,
            None => {}
        }
        rings.insert(key, h.end);
    }
    seen.rings = rings;
    let mut c = convert::convert(trace, names);
    // Forget what the source no longer holds; keep back what is settled or not ready.
    let mut held_spans = HashSet::new();
    let mut held_logs = HashSet::new();
    let mut sources = c.sources.iter();
    let mut keys: Vec<SpanKey> = Vec::new();
    for rs in &mut c.traces.resource_spans {
        for ss in &mut rs.scope_spans {
            ss.spans.retain(|s| {
                let Some(src) = sources.next() else { return false };
                let key = (src.id, if src.closed { s.end_time_unix_nano } else { 0 });
                let new = !seen.spans.contains(&key) && (last || src.closed);
                held_spans.insert(key);
                let keep = new && signals != Signals::Logs;
                if keep {
                    keys.push(key);
                }
                keep
            });
        }
    }
    for rl in &mut c.logs.resource_logs {
        for sl in &mut rl.scope_logs {
            sl.log_records.retain(|l| {
                let k = log_key(l);
                let new = !seen.logs.contains(&k);
                held_logs.insert(k);
                new && signals != Signals::Traces
            });
        }
    }
    seen.spans.retain(|k| held_spans.contains(k));
    seen.logs.retain(|k| held_logs.contains(k));
    let limits = Limits::default();
    let traces = convert::trace_batches(c.traces, limits);
    let logs = convert::log_batches(c.logs, limits);
    if traces.is_empty() && logs.is_empty() {
        return Ok(Round { report: Report::default(), overwritten });
    }
    let batches = traces.iter().map(|r| batch(Signal::Traces, r)).chain(logs.iter().map(|r| batch(Signal::Logs, r)));
    let report = deliver(endpoint, opts, batches, cancel).map_err(Failure::msg)?;
    // The span keys of each trace batch, in order (the batches keep the spans' order).
    let mut key_at = keys.into_iter();
    let mut span_keys: Vec<Vec<SpanKey>> = Vec::new();
    for r in &traces {
        let n = r.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
        span_keys.push(key_at.by_ref().take(n).collect());
    }
    for &i in &report.settled {
        match (span_keys.get(i), i.checked_sub(traces.len()).and_then(|l| logs.get(l))) {
            (Some(k), _) => seen.spans.extend(k.iter().copied()),
            (None, Some(r)) => seen
                .logs
                .extend(r.resource_logs.iter().flat_map(|r| &r.scope_logs).flat_map(|s| &s.log_records).map(log_key)),
            (None, None) => {}
        }
    }
    Ok(Round { report, overwritten })
}

impl Seen {
    /// Whether a round read the source's rings before this one.
    fn rings_read(&self) -> bool {
        !self.rings.is_empty()
    }
}
