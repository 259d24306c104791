//! What records an `otel` row's spans: each row's subscriber and pipeline, set up,
//! settled after the warmup, counted and shut down (see the parent module's
//! documentation).

use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

use super::counted::{self, otlp_exporter, Counts};
use super::{fastrace_peer, Work, BENCH};

/// The do-nothing layer: the floor.
struct Noop;
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Noop {}

/// What records the spans: behind the dispatcher, or fastrace's reporter.
pub(super) enum Back {
    Nothing,
    Ring { recorder: ringtrace_tracing::Recorder, file: Option<PathBuf> },
    Otel { provider: SdkTracerProvider, counts: Arc<Counts> },
    Fastrace(fastrace_peer::Pipeline),
}

/// A subscriber under test (for fastrace's rows, which do not go through `tracing`, a
/// dispatcher that does nothing, `Dispatch::none()`, never installed).
pub(super) struct Under {
    pub(super) dispatch: Dispatch,
    pub(super) back: Back,
    pub(super) work: Work,
}

/// A path in the temporary directory for this process's row, nothing there yet.
fn temp(name: &str) -> PathBuf {
    crate::layers::temp(&format!("otel-{name}"))
}

impl Under {
    pub(super) fn new(imp: &str, variant: &str, endpoint: &str) -> Result<Under, String> {
        let reg = tracing_subscriber::registry;
        let traced = |dispatch: Dispatch, back: Back| Under { dispatch, back, work: Work::Tracing };
        match (imp, variant) {
            ("ringtrace-tracing", "flight") => {
                let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder()
                    .per_thread_bytes(1 << 20)
                    .build()
                    .map_err(|e| e.to_string())?;
                Ok(traced(Dispatch::new(reg().with(layer)), Back::Ring { recorder, file: None }))
            }
            ("noop-layer", _) => Ok(traced(Dispatch::new(reg().with(Noop)), Back::Nothing)),
            ("ringtrace-tracing", _) => {
                let p = temp("stream.rtt");
                let (layer, recorder) = ringtrace_tracing::Builder::stream(&p)
                    .per_thread_bytes(1 << 20)
                    .build()
                    .map_err(|e| e.to_string())?;
                Ok(traced(Dispatch::new(reg().with(layer)), Back::Ring { recorder, file: Some(p) }))
            }
            ("fastrace", _) => Ok(Under {
                dispatch: Dispatch::none(),
                back: Back::Fastrace(fastrace_peer::Pipeline::new(variant, endpoint)?),
                work: if variant == "local" { Work::FastraceLocal } else { Work::FastraceRoot },
            }),
            _ => {
                let (exporter, counts) = otlp_exporter(endpoint)?;
                let provider = SdkTracerProvider::builder()
                    .with_resource(counted::resource())
                    .with_batch_exporter(exporter)
                    .build();
                let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("ringtrace-bench"));
                Ok(traced(Dispatch::new(reg().with(layer)), Back::Otel { provider, counts }))
            }
        }
    }

    /// Before the window: the OpenTelemetry pipeline exports what the warmup queued;
    /// fastrace's collector hands it to the reporter.
    pub(super) fn settle(&self) {
        match &self.back {
            Back::Otel { provider, .. } => {
                if let Err(e) = provider.force_flush() {
                    eprintln!("ringtrace-bench: {BENCH}: force_flush after the warmup: {e}");
                }
            }
            Back::Fastrace(p) => p.flush(),
            Back::Nothing | Back::Ring { .. } => {}
        }
    }

    /// The count the row's drops are taken from: records lost so far (ringtrace), spans
    /// exported so far (OpenTelemetry), spans reported or exported so far (fastrace).
    pub(super) fn count(&self) -> u64 {
        match &self.back {
            Back::Nothing => 0,
            Back::Ring { recorder, .. } => recorder.stats().lost,
            Back::Otel { counts, .. } => counts.exported.load(Relaxed),
            Back::Fastrace(p) => p.count(),
        }
    }

    /// Shuts the pipeline down (flushing what it holds) and returns [`Self::count`] after
    /// it, with the events of the spans reported (fastrace's counting reporter only).
    pub(super) fn finish(self) -> (u64, Option<u64>) {
        let Under { dispatch, back, .. } = self;
        drop(dispatch);
        match back {
            Back::Nothing => (0, None),
            Back::Ring { recorder, file } => {
                let lost = match recorder.finish() {
                    Ok(stats) => stats.lost,
                    Err(e) => {
                        eprintln!("ringtrace-bench: {BENCH}: finishing the stream: {e}");
                        0
                    }
                };
                if let Some(p) = file {
                    let _ = std::fs::remove_file(p);
                }
                (lost, None)
            }
            Back::Otel { provider, counts } => {
                if let Err(e) = provider.shutdown() {
                    eprintln!("ringtrace-bench: {BENCH}: shutting the tracer provider down: {e}");
                }
                counts.report_failed();
                (counts.exported.load(Relaxed), None)
            }
            Back::Fastrace(p) => (p.finish(), p.events()),
        }
    }
}
