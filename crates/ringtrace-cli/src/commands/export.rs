//! `ringtrace export`: a trace (a `ringtrace-tracing` trace file or recorder directory,
//! a channel file of raw records, a fleet's records in Kafka) in a format other tools
//! read, or delivered to an OpenTelemetry (OTLP) endpoint.

use std::path::Path;
#[cfg(feature = "otlp")]
use std::time::Duration;

use ringtrace_export::otlp::Options;

use crate::cli::OtlpArgs;
use crate::failure::Failure;
use crate::output::ExportFormat;
use crate::pipeline::output::export;
use crate::pipeline::record::Timeline;
use crate::pipeline::source::RecordSource;

/// Writes `source` in `format` to `output`, or delivers it as `otlp.to` says.
pub fn run(
    source: &mut dyn RecordSource,
    format: Option<ExportFormat>,
    output: Option<&Path>,
    otlp: &OtlpArgs,
) -> Result<(), Failure> {
    #[cfg(feature = "otlp")]
    if otlp.to.is_none()
        && (otlp.signals.is_some()
            || otlp.timeout.is_some()
            || otlp.retry_for.is_some()
            || !otlp.header.is_empty()
            || otlp.follow
            || otlp.interval.is_some())
    {
        return Err(Failure::msg("--signals, --timeout, --retry-for, --header and --follow go with --to"));
    }
    let names = Options { service: otlp.service.clone(), host: otlp.host_name.clone() };
    let Some(timeline) = source.timeline() else {
        return Err(Failure::msg(format!(
            "export reads ringtrace-tracing traces (a trace file or a recorder directory) and channel files, not {}",
            source.kind()
        )));
    };
    let timeline = timeline?;
    match format {
        Some(format) => export::write(&timeline, format, output, &names),
        None => deliver(&timeline, otlp, &names),
    }
}

#[cfg(feature = "otlp")]
fn delivery(otlp: &OtlpArgs) -> crate::pipeline::output::otlp::Delivery {
    crate::pipeline::output::otlp::Delivery {
        timeout: otlp.timeout.unwrap_or(Duration::from_secs(10)),
        retry_for: otlp.retry_for.unwrap_or(Duration::from_secs(60)),
        headers: otlp.header.clone(),
    }
}

#[cfg(feature = "otlp")]
fn deliver(timeline: &Timeline, otlp: &OtlpArgs, names: &Options) -> Result<(), Failure> {
    use crate::pipeline::output::otlp;
    let Some(to) = &otlp.to else { return Err(Failure::msg("export needs --format or --to")) };
    otlp::export::run(timeline, to, &delivery(otlp), names, otlp.signals.unwrap_or(otlp::Signals::All))
}

/// `export SOURCE --to ENDPOINT --follow`: the sources followed (each read whole every
/// round) until a signal or `duration`.
#[cfg(feature = "otlp")]
pub fn follow(sources: Vec<std::path::PathBuf>, duration: Option<Duration>, otlp: &OtlpArgs) -> Result<(), Failure> {
    use crate::pipeline::output::otlp::{self, follow};
    let Some(to) = &otlp.to else { return Err(Failure::msg("--follow needs --to")) };
    let names = Options { service: otlp.service.clone(), host: otlp.host_name.clone() };
    let f = follow::Follow { sources, interval: otlp.interval.unwrap_or(Duration::from_secs(1)), duration };
    let mut read = |p: &Path| -> Result<Timeline, Failure> {
        let mut s = crate::pipeline::source::open_trace(p)?;
        match s.timeline() {
            Some(t) => t,
            None => Err(Failure::msg(format!(
                "--follow reads ringtrace-tracing recorder directories and trace files, not {}",
                s.kind()
            ))),
        }
        .map_err(|e| e.about(p))
    };
    follow::run(&f, &mut read, to, &delivery(otlp), &names, otlp.signals.unwrap_or(otlp::Signals::All))
}

#[cfg(not(feature = "otlp"))]
fn deliver(_: &Timeline, _: &OtlpArgs, _: &Options) -> Result<(), Failure> {
    Err(Failure::msg("--to needs the command built with its otlp feature (on by default)"))
}
