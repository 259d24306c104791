//! Live recorders followed (`ringtrace export DIR --to ENDPOINT --follow`, `ship --to
//! ENDPOINT DIR...`): their spans delivered as they close. Every round reads each
//! source whole (a recorder directory is read as `ringtrace decode` reads it, without
//! stopping its writers), converts it, and delivers what the endpoint has not settled
//! yet:
//!
//! * a span once it has closed (OTLP spans are immutable: one sent before its end
//!   could not be completed), a log record once it is read;
//! * a span is known across rounds by its `tracing` id and its close time (its close
//!   record's, the same in every read that holds it), a log record by its time, body
//!   and thread. What the endpoint settled (acknowledged, or refused for good) is
//!   remembered while the source still holds it, so memory is bounded by what the
//!   recorders hold (a stream's trace file grows: it is read whole every round);
//! * a batch not acknowledged (the endpoint down past [`Delivery::retry_for`]) is sent
//!   again in the next round, with what else is new;
//! * a signal the endpoint does not take (Jaeger and log records) is not sent again;
//! * once `stop` says so (a signal), or at [`Follow::duration`], a last round sends the
//!   spans still open too, ended at their last record and marked
//!   `ringtrace.end_unknown`.
//!
//! A span whose start the recorder overwrote gets its id from what the recorder holds
//! when it closes (`ringtrace.start_unknown`); children delivered before may name the id
//! it had then. What a flight recorder overwrote before a round read it is lost: each
//! ring's byte positions tell it (`Trace::held_rings`), and [`Followed::overwritten`]
//! counts the bytes.
//!
//! [`follow`] says what happens as it goes through [`Note`]s and returns what it did
//! ([`Followed`]): what to print is the caller's.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use ringtrace_tracing::decode::Trace;

use super::batch::batch;
use super::deliver::deliver;
use super::model::{Delivery, Endpoint, Report, Signal};
use crate::otlp::{self as convert, Limits};

/// What is sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Signals {
    /// Spans and log records.
    #[default]
    All,
    /// Spans only.
    Traces,
    /// Log records only.
    Logs,
}

/// How a follower runs.
#[derive(Clone, Debug)]
pub struct Follow {
    /// The recorder directories or trace files followed.
    pub sources: Vec<PathBuf>,
    /// The pause between rounds.
    pub interval: Duration,
    /// Stop after this long (a last round first).
    pub duration: Option<Duration>,
    /// What is sent (the follower turns to spans alone where the endpoint takes no
    /// log records).
    pub signals: Signals,
}

/// What a follower says as it goes.
#[derive(Debug)]
#[non_exhaustive]
pub enum Note<'a> {
    /// A source read before could not be read this round (it is tried again).
    Unreadable {
        /// The source.
        path: &'a Path,
        /// Why, as the reader said.
        error: &'a str,
    },
    /// The endpoint refused every log record: spans only from now on.
    NoLogs,
    /// A batch was given up this round; what was not delivered is sent again.
    GaveUp {
        /// The source.
        path: &'a Path,
        /// Why (the delivery's [`Report::stopped`]).
        why: &'a str,
    },
}

/// What a follower did.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Followed {
    /// All rounds' deliveries added up (`items`, `failed` and `stopped` aside).
    pub total: Report,
    /// Rounds run.
    pub rounds: u64,
    /// How long it ran.
    pub took: Duration,
    /// Bytes of records the recorders overwrote before a round read them.
    pub overwritten: u64,
    /// Spans and log records the last round left undelivered, and why (a source
    /// unreadable or a batch given up), if it did.
    pub unsettled: (u64, Option<String>),
}

impl Followed {
    /// The line that says what was delivered: `ENDPOINT: delivered N spans and M log
    /// records in B batches (R retries) over K rounds, S s`.
    pub fn summary(&self, endpoint: &Endpoint) -> String {
        let t = &self.total;
        format!(
            "{endpoint}: delivered {} spans and {} log records in {} batches ({} retries) over {} rounds, {:.1} s",
            t.spans.delivered,
            t.logs.delivered,
            t.spans.batches + t.logs.batches,
            t.spans.retries + t.logs.retries,
            self.rounds,
            self.took.as_secs_f64()
        )
    }

    /// What went wrong, in one line naming `endpoint` (the items refused or rejected,
    /// the bytes overwritten unread, what the last round left undelivered, and the
    /// endpoint's messages); `None` where everything was delivered.
    pub fn failure(&self, endpoint: &Endpoint) -> Option<String> {
        let t = &self.total;
        let mut bad = Vec::new();
        for (s, x) in [(Signal::Traces, &t.spans), (Signal::Logs, &t.logs)] {
            if x.rejected > 0 {
                bad.push(format!("{} {} rejected (partial success)", x.rejected, s.items()));
            }
            if x.refused > 0 {
                bad.push(format!("{} {} refused", x.refused, s.items()));
            }
        }
        if self.overwritten > 0 {
            bad.push(format!(
                "{} bytes of records overwritten by the recorder before a round read them (a shorter \
                 --interval, or bigger rings, keeps them)",
                self.overwritten
            ));
        }
        if let (n, Some(why)) = &self.unsettled {
            bad.push(format!("{n} spans and log records not delivered in the last round: {why}"));
        }
        if bad.is_empty() {
            return None;
        }
        let messages: Vec<&str> = t.spans.messages.iter().chain(&t.logs.messages).map(String::as_str).collect();
        let said =
            if messages.is_empty() { String::new() } else { format!(" (the endpoint: {})", messages.join("; ")) };
        Some(format!("{endpoint}: {}{said}", bad.join(", ")))
    }
}

/// Why a follower stopped before its end.
#[derive(Debug)]
pub enum FollowError<E> {
    /// A source could not be read the first time.
    Read(PathBuf, E),
    /// No client could be set up for the endpoint.
    Client(String),
}

impl<E: std::fmt::Display> std::fmt::Display for FollowError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FollowError::Read(p, e) => write!(f, "{}: {e}", p.display()),
            FollowError::Client(e) => f.write_str(e),
        }
    }
}

impl<E: std::fmt::Debug + std::fmt::Display> std::error::Error for FollowError<E> {}

/// [`follow`] of `ringtrace-tracing` recorder directories and trace files, each opened
/// with [`Trace::open`] every round: what `ringtrace ship --to otlp://HOST:PORT
/// RECORDER...` runs, for an agent to call.
pub fn follow_recorders(
    f: &Follow,
    endpoint: &Endpoint,
    opts: &Delivery,
    names: &convert::Options,
    stop: &dyn Fn() -> bool,
    note: &mut dyn FnMut(Note<'_>),
) -> Result<Followed, FollowError<ringtrace_tracing::Error>> {
    follow(f, &mut |p: &Path| Trace::open(p), endpoint, opts, names, stop, note)
}

/// Follows `f.sources` (each read by `read`, every round) until `stop` says so or
/// `f.duration` has passed, delivering to `endpoint`; a last round then sends the spans
/// still open. Fails at once where a source cannot be read the first time; later
/// failures to read are [`Note::Unreadable`] and the source is tried again.
pub fn follow<E: std::fmt::Display>(
    f: &Follow,
    read: &mut dyn FnMut(&Path) -> Result<Trace, E>,
    endpoint: &Endpoint,
    opts: &Delivery,
    names: &convert::Options,
    stop: &dyn Fn() -> bool,
    note: &mut dyn FnMut(Note<'_>),
) -> Result<Followed, FollowError<E>> {
    let start = Instant::now();
    let mut seen: Vec<Seen> = f.sources.iter().map(|_| Seen::default()).collect();
    let mut done = Followed::default();
    let mut signals = f.signals;
    loop {
        let last = stop() || f.duration.is_some_and(|d| start.elapsed() >= d);
        let mut unsettled = (0u64, None::<String>);
        for (path, seen) in f.sources.iter().zip(&mut seen) {
            let trace = match read(path) {
                Ok(t) => t,
                Err(e) if !seen.read => return Err(FollowError::Read(path.clone(), e)),
                Err(e) => {
                    let error = e.to_string();
                    note(Note::Unreadable { path, error: &error });
                    unsettled.1 = Some(format!("{}: {error}", path.display()));
                    continue;
                }
            };
            seen.read = true;
            // The last round is not cut short by the stop that asked for it.
            let cancel = || !last && stop();
            let r = round(&trace, seen, endpoint, opts, names, signals, last, &cancel).map_err(FollowError::Client)?;
            done.overwritten += r.overwritten;
            let r = r.report;
            for (s, t) in [(Signal::Traces, &r.spans), (Signal::Logs, &r.logs)] {
                let all = done.total.tally(s);
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
                note(Note::NoLogs);
                signals = Signals::Traces;
            }
            if let Some(why) = r.stopped {
                unsettled.0 += r.spans.failed + r.logs.failed - r.spans.refused - r.logs.refused;
                note(Note::GaveUp { path, why: &why });
                unsettled.1 = Some(why);
            }
        }
        done.rounds += 1;
        if last {
            done.took = start.elapsed();
            done.unsettled = unsettled;
            return Ok(done);
        }
        let pause_until = Instant::now() + f.interval;
        while Instant::now() < pause_until && !stop() {
            std::thread::sleep(Duration::from_millis(50).min(f.interval));
        }
    }
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

/// One round of one source: what is new of it delivered, and remembered where settled.
#[allow(clippy::too_many_arguments)]
fn round(
    trace: &Trace,
    seen: &mut Seen,
    endpoint: &Endpoint,
    opts: &Delivery,
    names: &convert::Options,
    signals: Signals,
    last: bool,
    cancel: &dyn Fn() -> bool,
) -> Result<Round, String> {
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
    let report = deliver(endpoint, opts, batches, cancel)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_fails_on_what_it_could_not_deliver_and_says_the_endpoint_s_words() {
        let endpoint = Endpoint::parse("otlp://collector").unwrap();
        let mut done = Followed { rounds: 3, took: Duration::from_millis(1500), ..Followed::default() };
        done.total.spans.delivered = 5;
        done.total.spans.batches = 2;
        assert_eq!(
            done.summary(&endpoint),
            "otlp://collector:4317: delivered 5 spans and 0 log records in 2 batches (0 retries) over 3 rounds, 1.5 s"
        );
        assert_eq!(done.failure(&endpoint), None);
        done.total.logs.refused = 4;
        done.total.logs.note("logs not supported".into());
        done.overwritten = 10;
        done.unsettled = (2, Some("down".into()));
        let why = done.failure(&endpoint).unwrap();
        assert!(
            why.starts_with("otlp://collector:4317: 4 log records refused, 10 bytes of records overwritten"),
            "{why}"
        );
        assert!(why.contains("2 spans and log records not delivered in the last round: down"), "{why}");
        assert!(why.ends_with("(the endpoint: logs not supported)"), "{why}");
    }
}
