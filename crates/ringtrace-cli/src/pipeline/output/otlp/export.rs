//! A source read whole ([`Timeline`]) delivered to an OTLP endpoint: converted to
//! OpenTelemetry's model, split into bounded batches, each encoded once, delivered, and
//! what was and was not acknowledged said on stderr.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use ringtrace_export::otlp::{self as convert, Limits};

use super::{deliver, Delivery, Endpoint, Report, Signal, Signals, Tally};
use crate::failure::Failure;
use crate::output::{eprint_line, warn};
use crate::pipeline::record::Timeline;

/// Delivers `timeline`'s `signals` to `endpoint`; fails (exit 1) unless every span and
/// log record of them was acknowledged.
pub fn run(
    timeline: &Timeline,
    endpoint: &Endpoint,
    opts: &Delivery,
    names: &convert::Options,
    signals: Signals,
) -> Result<(), Failure> {
    let (traces, logs) = match timeline {
        Timeline::Trace(trace) => {
            let c = convert::convert(trace, names);
            if c.start_unknown + c.end_unknown > 0 {
                eprint_line(format_args!(
                    "{} spans without their start and {} without their end in the trace: sent with what it \
                     holds of them, marked ringtrace.start_unknown and ringtrace.end_unknown",
                    c.start_unknown, c.end_unknown
                ));
            }
            crate::pipeline::output::export::otlp_warnings(c.clock_unknown, c.unread_chunks);
            (c.traces, c.logs)
        }
        // A fleet's records are log records and an events source's spans, a resource
        // per host and source: read, converted and delivered as a stream.
        #[cfg(feature = "kafka")]
        Timeline::Fleet(read) => return fleet(read, endpoint, opts, signals),
    };
    let (traces, logs) = match signals {
        Signals::All => (traces, logs),
        Signals::Traces => (traces, ExportLogsServiceRequest::default()),
        Signals::Logs => (ExportTraceServiceRequest::default(), logs),
    };
    let batches = ringtrace_export::delivery::batches(traces, logs, Limits::default());
    let report = deliver(endpoint, opts, batches, &|| false).map_err(Failure::msg)?;
    say(endpoint, &report)
}

/// Delivers a topic's records as log records and spans while it is read: a thread
/// reads and converts, requests of at most 2048 log records and spans at a time, split
/// into batches handed to the delivery over a channel of two, so memory stays bounded
/// whatever the topic's length. A read that fails fails the delivery, whatever was delivered.
#[cfg(feature = "kafka")]
fn fleet(read: &crate::fleet::Read, endpoint: &Endpoint, opts: &Delivery, signals: Signals) -> Result<(), Failure> {
    use ringtrace_export::delivery::batches;
    use ringtrace_ship::fleet::export::OtlpWriter;
    let (tx, rx) = std::sync::mpsc::sync_channel(2);
    let (report, read_back) = std::thread::scope(|s| {
        let reader = s.spawn(move || {
            let mut w = OtlpWriter::requests(|traces, logs| {
                let (traces, logs) = match signals {
                    Signals::All => (traces, logs),
                    Signals::Traces => (traces, ExportLogsServiceRequest::default()),
                    Signals::Logs => (ExportTraceServiceRequest::default(), logs),
                };
                for b in batches(traces, logs, Limits::default()) {
                    // The delivery gave up and hung up: no use reading on.
                    tx.send(b).map_err(|_| std::io::Error::other("the delivery stopped"))?;
                }
                Ok(())
            });
            let stats = read.stream(|i| w.put(&i))?;
            Ok::<_, std::io::Error>((stats, w.finish()?))
        });
        let report = deliver(endpoint, opts, rx.iter(), &|| false);
        drop(rx);
        (report, reader.join())
    });
    let report = report.map_err(Failure::msg)?;
    let Ok(read_back) = read_back else { return Err(Failure::msg("the topic's reader panicked")) };
    match read_back {
        Ok((stats, counts)) => {
            if counts.undecodable > 0 {
                warn(&format!(
                    "{} records not decodable: sent as bytes, marked ringtrace.undecodable",
                    counts.undecodable
                ));
            }
            if counts.start_unknown + counts.end_unknown > 0 {
                eprint_line(format_args!(
                    "{} spans without their start and {} without their end in the topic: sent with what it holds \
                     of them, marked ringtrace.start_unknown and ringtrace.end_unknown",
                    counts.start_unknown, counts.end_unknown
                ));
            }
            read.summary(stats);
        }
        // Stopped because the delivery did: the report says why.
        Err(_) if !report.complete() => {}
        Err(e) => return Err(Failure::from_io(e).unwrap_or_else(|e| Failure::msg(e.to_string()))),
    }
    say(endpoint, &report)
}

/// Says on stderr what was delivered, and fails unless everything was.
fn say(endpoint: &Endpoint, r: &Report) -> Result<(), Failure> {
    let line = |s: Signal, t: &Tally| {
        format!("{} of {} {} in {} batches ({} retries)", t.delivered, t.items, s.items(), t.batches, t.retries)
    };
    let mut parts: Vec<String> = [(Signal::Traces, &r.spans), (Signal::Logs, &r.logs)]
        .iter()
        .filter(|(_, t)| t.items > 0)
        .map(|(s, t)| line(*s, t))
        .collect();
    if parts.is_empty() {
        parts.push("nothing: no spans and no log records to send".into());
    }
    eprint_line(format_args!("{endpoint}: delivered {}", parts.join("; ")));
    for (s, t) in [(Signal::Traces, &r.spans), (Signal::Logs, &r.logs)] {
        let said = t.messages.join("; ");
        if t.rejected > 0 {
            warn(&format!("{endpoint} rejected {} {} (partial success): {said}", t.rejected, s.items()));
        } else if t.failed == 0 && !said.is_empty() {
            // A full success with a message (a warning, as the specification allows).
            warn(&format!("{endpoint} said of the {}: {said}", s.items()));
        }
        if t.failed > 0 {
            let why = match (&r.stopped, t.refused) {
                (Some(why), 0) => why.clone(),
                (Some(why), _) => format!("{said}; {why}"),
                (None, _) => said,
            };
            warn(&format!("{} {} not delivered: {why}", t.failed, s.items()));
        }
    }
    if r.complete() {
        return Ok(());
    }
    let lost = r.spans.items - r.spans.delivered + r.logs.items - r.logs.delivered;
    Err(Failure::msg(match &r.stopped {
        Some(why) => format!("{endpoint}: gave up: {why}; {lost} spans and log records not delivered"),
        None => format!("{endpoint}: {lost} spans and log records not delivered (see the warnings above)"),
    }))
}
