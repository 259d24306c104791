//! The OTLP exporter of the `otel` rows that export (`tracing-opentelemetry` and
//! `fastrace`, both `otlp-http/batch`), and the wrapper around it that counts what it
//! exported (see the parent module's documentation).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;

use super::BENCH;

/// Spans an exporter's `export` reported exported, and those of exports that failed.
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) exported: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Counts {
    /// Says on stderr how many spans were in failed exports, if any.
    pub(super) fn report_failed(&self) {
        let failed = self.failed.load(Relaxed);
        if failed > 0 {
            let first = self.first_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
            eprintln!(
                "ringtrace-bench: {BENCH}: {failed} spans in failed exports (first error: {})",
                first.unwrap_or_default()
            );
        }
    }
}

/// The OTLP exporter, counting what it exports: the processor (or fastrace's reporter)
/// sees it as the exporter itself (every call is passed on as is).
#[derive(Debug)]
pub(super) struct Counted<E> {
    inner: E,
    counts: Arc<Counts>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => self.counts.exported.fetch_add(n, Relaxed),
            Err(e) => {
                self.counts.first_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(|| e.to_string());
                self.counts.failed.fetch_add(n, Relaxed)
            }
        };
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn shutdown(&self) -> OTelSdkResult {
        self.inner.shutdown()
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// `opentelemetry_otlp::SpanExporter::builder().with_http()` (OTLP over HTTP, binary
/// protobuf) posting to `endpoint`, wrapped to count what it exports.
pub(super) fn otlp_exporter(
    endpoint: &str,
) -> Result<(Counted<opentelemetry_otlp::SpanExporter>, Arc<Counts>), String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| format!("the OTLP exporter for {endpoint}: {e}"))?;
    let counts = Arc::new(Counts::default());
    Ok((Counted { inner: exporter, counts: counts.clone() }, counts))
}

/// The resource every exporting row names its spans' service with.
pub(super) fn resource() -> Resource {
    Resource::builder().with_service_name("ringtrace-bench").build()
}
