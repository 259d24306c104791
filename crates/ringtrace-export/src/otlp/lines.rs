//! OTLP/JSON lines: the one writer of a trace's export and a fleet's.

use std::io::{self, Write};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use super::{log_batches, trace_batches, Limits};

/// Writes OTLP/JSON lines, the form of the OpenTelemetry specification's OTLP File
/// Exporter, which `otelcol`'s `otlpjsonfile` receiver reads: each line one request
/// (an `ExportTraceServiceRequest` or an `ExportLogsServiceRequest`) of at most
/// [`Limits::default`] (2048 spans or log records, 1 MiB of protobuf), so that no line
/// grows with the export; a request given is split into as many ([`trace_batches`],
/// [`log_batches`]), none for an empty one. Each line goes to the output in one write.
///
/// ```
/// use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
/// use ringtrace_export::otlp::JsonLines;
///
/// let mut out = Vec::new();
/// let mut lines = JsonLines::new(&mut out);
/// lines.logs(ExportLogsServiceRequest::default())?;
/// assert_eq!(lines.lines(), 0);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct JsonLines<W: Write> {
    out: W,
    buf: Vec<u8>,
    lines: u64,
}

impl<W: Write> JsonLines<W> {
    /// Lines to be written to `out`.
    pub fn new(out: W) -> Self {
        JsonLines { out, buf: Vec::new(), lines: 0 }
    }

    /// Writes `req`'s spans, a line per batch.
    ///
    /// # Errors
    ///
    /// The output's: what was written before is whole lines.
    pub fn traces(&mut self, req: ExportTraceServiceRequest) -> io::Result<()> {
        for batch in trace_batches(req, Limits::default()) {
            self.line(|b| serde_json::to_writer(b, &batch))?;
        }
        Ok(())
    }

    /// Writes `req`'s log records, a line per batch.
    ///
    /// # Errors
    ///
    /// The output's: what was written before is whole lines.
    pub fn logs(&mut self, req: ExportLogsServiceRequest) -> io::Result<()> {
        for batch in log_batches(req, Limits::default()) {
            self.line(|b| serde_json::to_writer(b, &batch))?;
        }
        Ok(())
    }

    /// Lines written so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Flushes the output.
    ///
    /// # Errors
    ///
    /// The output's.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn line(&mut self, write: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>) -> io::Result<()> {
        self.buf.clear();
        write(&mut self.buf)?;
        self.buf.push(b'\n');
        self.out.write_all(&self.buf)?;
        self.lines += 1;
        Ok(())
    }
}
