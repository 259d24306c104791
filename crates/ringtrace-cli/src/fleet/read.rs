//! The `kafka` feature's half of [`super`]: the topic read with `ringtrace-ship`'s
//! fleet reader, and each job's output.

use std::collections::VecDeque;
use std::io::{self, BufWriter, Write};
use std::time::{Duration, Instant};

use ringtrace_ship::fleet::{self, export, Entry, Fleet, FleetStats, Follow, FollowError};
use ringtrace_tracing::decode::text::rfc3339;
use serde::Serialize;

use super::{Job, Topic, Window};
use crate::failure::Failure;
use crate::output::{print, print_json, stdout_err, warn, write_output, ExportFormat, ReportFormat};
use crate::records::{decimal, escape_text, hex, Format};

/// How long reading a topic to its end may take before the command gives up.
const READ_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a follow waits for a batch before it looks at its `--timeout`.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

pub fn run(topic: &Topic, window: Window, job: Job) -> Result<(), Failure> {
    match job {
        Job::Decode { format } => {
            let fleet = read(topic, window)?;
            write_output(None, |w| {
                let mut w = BufWriter::new(w);
                fleet.timeline().filter(|e| window.holds(e.time_ns)).try_for_each(|e| line(&mut w, format, &e))?;
                w.flush()
            })?;
            summary(topic, fleet.stats());
            Ok(())
        }
        Job::Export { format, output } => export_fleet(topic, window, format, output.as_deref()),
        Job::Tail { count, follow: false, format, .. } => {
            let fleet = read(topic, window)?;
            let mut last = VecDeque::with_capacity(count.min(1 << 16));
            for e in fleet.timeline().filter(|e| window.holds(e.time_ns)) {
                if last.len() == count {
                    last.pop_front();
                }
                if count > 0 {
                    last.push_back(e);
                }
            }
            write_output(None, |w| {
                let mut w = BufWriter::new(w);
                last.iter().try_for_each(|e| line(&mut w, format, e))?;
                w.flush()
            })?;
            summary(topic, fleet.stats());
            Ok(())
        }
        Job::Tail { follow: true, format, timeout, .. } => follow(topic, window, format, timeout),
        Job::Stat { format } => stat(topic, window, format),
    }
}

/// The topic read to its end (from `window.since` on), copies dropped.
fn read(topic: &Topic, window: Window) -> Result<Fleet, Failure> {
    fleet::read_topic_since(&topic.brokers, &topic.topic, window.since, READ_TIMEOUT, |w| warn(&w))
        .map_err(|e| Failure::msg(e.to_string()))
}

/// Says on stderr what the reader dropped and skipped, if anything.
fn summary(topic: &Topic, s: FleetStats) {
    if s.duplicates + s.missing + s.damaged + s.too_large > 0 {
        warn(&format!(
            "kafka://{}/{}: {} copies dropped, {} records missing, {} damaged messages skipped, {} records too large \
             to ship",
            topic.brokers, topic.topic, s.duplicates, s.missing, s.damaged, s.too_large
        ));
    }
}

/// A fleet record as a JSON object (field order as printed).
#[derive(Serialize)]
struct JsonEntry<'a> {
    time: String,
    /// Wall-clock ns since the epoch, as a decimal string (see `records`).
    #[serde(serialize_with = "decimal")]
    ts_ns: u64,
    host: &'a str,
    source: &'a str,
    /// A count of the source's records: a number.
    seq: u64,
    len: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hex: Option<String>,
}

/// One record a line: `TIME HOST SOURCE SEQ PAYLOAD` (text or hex), or a JSON object.
fn line(w: &mut impl Write, format: Format, e: &Entry<'_>) -> io::Result<()> {
    let mut s = String::with_capacity(e.payload.len() + e.source.len() + 64);
    match format {
        Format::Text | Format::Hex => {
            s.push_str(&rfc3339(e.time_ns));
            for part in [e.host, e.source] {
                s.push(' ');
                escape_text(&mut s, part.as_bytes());
            }
            s.push(' ');
            s.push_str(&e.seq.to_string());
            s.push(' ');
            if format == Format::Text {
                escape_text(&mut s, e.payload);
            } else {
                hex(&mut s, e.payload);
            }
        }
        Format::Json => {
            let data = std::str::from_utf8(e.payload).ok();
            let j = JsonEntry {
                time: rfc3339(e.time_ns),
                ts_ns: e.time_ns,
                host: e.host,
                source: e.source,
                seq: e.seq,
                len: e.payload.len(),
                data,
                hex: data.is_none().then(|| {
                    let mut h = String::with_capacity(2 * e.payload.len());
                    hex(&mut h, e.payload);
                    h
                }),
            };
            s = serde_json::to_string(&j).map_err(io::Error::other)?;
        }
    }
    s.push('\n');
    w.write_all(s.as_bytes())
}

fn export_fleet(
    topic: &Topic,
    window: Window,
    format: ExportFormat,
    output: Option<&std::path::Path>,
) -> Result<(), Failure> {
    let fleet = read(topic, window)?;
    let entries = || fleet.timeline().filter(|e| window.holds(e.time_ns));
    let x = match format {
        ExportFormat::Ctf => {
            let Some(dir) = output else {
                return Err(Failure::msg("a CTF trace is a directory: name it with -o DIR"));
            };
            crate::destination::write_dir(dir, |tmp| export::ctf(&fleet, entries(), tmp))?
        }
        ExportFormat::Chrome | ExportFormat::Perfetto => {
            let done = std::cell::Cell::new(None);
            write_output(output, |w| {
                let mut w = BufWriter::new(w);
                let x = if format == ExportFormat::Chrome {
                    export::chrome(&fleet, entries(), &mut w)?
                } else {
                    export::perfetto(&fleet, entries(), &mut w)?
                };
                w.flush()?;
                done.set(Some(x));
                Ok(())
            })?;
            match done.take() {
                Some(x) => x,
                None => return Ok(()),
            }
        }
    };
    if let Some(path) = output {
        crate::output::eprint_line(format_args!(
            "{} records of {} hosts ({} sources) written to {}",
            x.records,
            x.hosts,
            x.sources,
            path.display()
        ));
    }
    summary(topic, fleet.stats());
    Ok(())
}

/// `tail -f`: every new record as its batch arrives, until `timeout` passes without one.
fn follow(topic: &Topic, window: Window, format: Format, timeout: Option<Duration>) -> Result<(), Failure> {
    let mut f = Follow::start(&topic.brokers, &topic.topic, window.since, READ_TIMEOUT)
        .map_err(|e| Failure::msg(e.to_string()))?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut last = Instant::now();
    loop {
        let each = |e: Entry<'_>| if window.holds(e.time_ns) { line(&mut out, format, &e) } else { Ok(()) };
        let n = f.poll(FOLLOW_POLL, each, |w| warn(&w)).map_err(|e| match e {
            FollowError::Kafka(e) => Failure::msg(e.to_string()),
            FollowError::Output(e) => stdout_err(e),
        })?;
        out.flush().map_err(stdout_err)?;
        if n > 0 {
            last = Instant::now();
        } else if timeout.is_some_and(|t| last.elapsed() >= t) {
            break;
        }
    }
    summary(topic, f.stats());
    Ok(())
}

/// One source in `stat --format json`.
#[derive(Serialize)]
struct JsonSource<'a> {
    host: &'a str,
    source: &'a str,
    records: u64,
    first_seq: u64,
    last_seq: u64,
}

/// `stat --format json` of a topic.
#[derive(Serialize)]
struct JsonStat<'a> {
    brokers: &'a str,
    topic: &'a str,
    hosts: usize,
    batches: u64,
    records: u64,
    duplicates: u64,
    missing: u64,
    damaged: u64,
    too_large: u64,
    #[serde(serialize_with = "decimal_opt")]
    first_ns: Option<u64>,
    #[serde(serialize_with = "decimal_opt")]
    last_ns: Option<u64>,
    sources: Vec<JsonSource<'a>>,
}

fn decimal_opt<S: serde::Serializer>(x: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(x) => s.collect_str(x),
        None => s.serialize_none(),
    }
}

fn stat(topic: &Topic, window: Window, format: ReportFormat) -> Result<(), Failure> {
    let fleet = read(topic, window)?;
    let mut sources = Vec::new();
    let (mut first, mut last) = (None::<u64>, None::<u64>);
    for (host, source) in fleet.sources() {
        let mut s = JsonSource { host, source, records: 0, first_seq: 0, last_seq: 0 };
        for e in fleet.source(host, source).filter(|e| window.holds(e.time_ns)) {
            if s.records == 0 {
                s.first_seq = e.seq;
            }
            s.records += 1;
            s.last_seq = e.seq;
            first = Some(first.map_or(e.time_ns, |f| f.min(e.time_ns)));
            last = Some(last.map_or(e.time_ns, |l| l.max(e.time_ns)));
        }
        if s.records > 0 || window.is_all() {
            sources.push(s);
        }
    }
    let st = fleet.stats();
    let mut hosts: Vec<&str> = sources.iter().map(|s| s.host).collect();
    hosts.dedup();
    let j = JsonStat {
        brokers: &topic.brokers,
        topic: &topic.topic,
        hosts: hosts.len(),
        batches: st.batches,
        records: sources.iter().map(|s| s.records).sum(),
        duplicates: st.duplicates,
        missing: st.missing,
        damaged: st.damaged,
        too_large: st.too_large,
        first_ns: first,
        last_ns: last,
        sources,
    };
    if format == ReportFormat::Json {
        return print_json(&j);
    }
    let time = |t: Option<u64>| t.map_or_else(|| "-".to_string(), rfc3339);
    let mut s = format!(
        "kafka://{}/{}: a fleet's records in Kafka\n  hosts            {}\n  sources          {}\n  records          {}\n  \
         batches          {}\n  copies dropped   {}\n  missing          {}\n  damaged          {}\n  too large        {}\n  \
         first            {}\n  last             {}\n",
        j.brokers,
        j.topic,
        j.hosts,
        j.sources.len(),
        j.records,
        j.batches,
        j.duplicates,
        j.missing,
        j.damaged,
        j.too_large,
        time(j.first_ns),
        time(j.last_ns)
    );
    for src in &j.sources {
        let mut name = String::new();
        escape_text(&mut name, src.source.as_bytes());
        s.push_str(&format!(
            "  {} {name}: {} records, sequence {} to {}\n",
            src.host, src.records, src.first_seq, src.last_seq
        ));
    }
    print(&s)
}

/// One source of an agent's state, in `stat --format json`.
#[derive(Serialize)]
struct JsonAgentSource<'a> {
    source: &'a str,
    shipped: u64,
    too_large: u64,
    ring_lost: u64,
    next_seq: u64,
    position: u64,
}

/// An agent's state file in `stat --format json`.
#[derive(Serialize)]
struct JsonAgentState<'a> {
    host: &'a str,
    /// When it was last stored: wall-clock ns, a decimal string (0: never).
    #[serde(serialize_with = "decimal")]
    updated_ns: u64,
    failed_rounds: u64,
    sources: Vec<JsonAgentSource<'a>>,
}

/// `stat` of an agent's state file.
pub fn agent_state(path: &std::path::Path, format: ReportFormat) -> Result<(), Failure> {
    let state = match ringtrace_ship::state::State::load(path) {
        Ok(Some(s)) => s,
        Ok(None) => return Err(Failure::msg(format!("{}: no such file", path.display()))),
        Err(e) => return Err(Failure::msg(e.to_string())),
    };
    if format == ReportFormat::Text {
        return print(&format!("{}: a ringtrace-ship agent's state\n{state}", path.display()));
    }
    let sources = (state.sources.iter())
        .map(|s| JsonAgentSource {
            source: &s.source,
            shipped: s.counts.shipped,
            too_large: s.counts.too_large,
            ring_lost: s.counts.ring_lost,
            next_seq: s.next_seq,
            position: s.position,
        })
        .collect();
    print_json(&JsonAgentState {
        host: &state.host,
        updated_ns: state.updated_ns,
        failed_rounds: state.failed_rounds,
        sources,
    })
}
