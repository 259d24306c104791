//! Writing to stdout, stderr or an output file; a broken pipe on stdout ends a command
//! quietly. JSON reports are printed from serde types.
//!
//! Every JSON output of the command (record lines, `stat --format json`) writes 64-bit
//! integers as the protobuf JSON mapping does where a reader could round them: a JSON
//! number above 2^53 - 1 is rounded by every reader that holds numbers as doubles
//! (JavaScript; `jq` in arithmetic). Identifiers and absolute times (`ts`,
//! `created_ns`, a TSC calibration), which routinely pass 2^53 (`CLOCK_REALTIME`
//! nanoseconds always, `CLOCK_MONOTONIC` ones after 104 days of uptime), are decimal
//! strings ([`decimal`]). Counts, lengths and byte positions (`pos`, `len`, `committed`,
//! ...) stay numbers: they reach 2^53 only after 9 * 10^15 records or bytes have passed
//! through a ring (104 days at 1 GB/s).

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use crate::destination::Output;
use crate::failure::Failure;

/// Writes one line to stderr; a failure to write it is ignored (`eprintln!` would
/// panic).
pub fn eprint_line(args: std::fmt::Arguments<'_>) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}

/// A warning on stderr: `ringtrace: warning: ...` on one line.
pub fn warn(message: &str) {
    let message = message.replace(['\n', '\r'], " ");
    eprint_line(format_args!("ringtrace: warning: {message}"));
}

/// A corrupt record header is reported, not fatal: the records before it are good.
/// `label` goes before the message (`slot 3: ` for a channel's ring).
pub fn warn_corrupt(records: &ringtrace::inspect::Records, label: &str) {
    if let Some(c) = records.corrupt() {
        warn(&format!(
            "{label}corrupt record header {:#018x} at position {}: the records after it are not shown",
            c.header, c.pos
        ));
    }
}

/// Stdout, on which every write error is an error: a handle on descriptor 1.
/// `io::stdout()` takes EBADF (a descriptor 1 open only for reading: `1<FILE`) for a
/// sink that accepts everything (`handle_ebadf` in the standard library's
/// `io/stdio.rs`), so a command writing through it would go on as if it had printed.
/// A stdout that cannot be written is refused here (the commands that read a source
/// and print its records ask for it before they read).
pub fn stdout() -> Result<File, Failure> {
    use rustix::fs::OFlags;
    use std::os::fd::AsFd;
    let out = io::stdout();
    let fd = out.as_fd();
    let access = rustix::fs::fcntl_getfl(fd).map(|flags| flags & OFlags::ACCMODE);
    if !access.is_ok_and(|a| a == OFlags::WRONLY || a == OFlags::RDWR) {
        return Err(Failure::msg("cannot write to stdout: it is not open for writing (1<FILE)"));
    }
    fd.try_clone_to_owned().map(File::from).map_err(stdout_err)
}

/// [`stdout`] for records that are consumed (their space handed back once written):
/// refused as well when it is `/dev/null` opened for reading and writing, which is what
/// a closed stdout (`>&-`) has become by the time the command runs: the Rust runtime
/// opens `/dev/null` read-write in place of a closed descriptor 0, 1 or 2 before
/// `main` (`sanitize_standard_fds` in the standard library's `sys/pal/unix`), and every
/// record written there would be lost. `> /dev/null` (opened for writing only) throws
/// the records away on purpose, and is taken.
pub fn stdout_for_consumed() -> Result<File, Failure> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let out = stdout()?;
    let is_null = |m: std::fs::Metadata| {
        m.file_type().is_char_device() && std::fs::metadata("/dev/null").is_ok_and(|n| n.rdev() == m.rdev())
    };
    let read_write =
        rustix::fs::fcntl_getfl(&out).is_ok_and(|f| f & rustix::fs::OFlags::ACCMODE == rustix::fs::OFlags::RDWR);
    if read_write && out.metadata().is_ok_and(is_null) {
        return Err(Failure::msg(
            "stdout is closed (>&-), or /dev/null opened for reading and writing, which is what the runtime \
             makes of a closed stdout: the records would be lost (> /dev/null throws them away on purpose)",
        ));
    }
    Ok(out)
}

/// Writes `text` to stdout ([`stdout`]).
pub fn print(text: &str) -> Result<(), Failure> {
    stdout()?.write_all(text.as_bytes()).map_err(stdout_err)
}

/// Prints `value` as one line of compact JSON.
pub fn print_json(value: &impl Serialize) -> Result<(), Failure> {
    let mut line = serde_json::to_string(value).map_err(|e| Failure::msg(format!("cannot write JSON: {e}")))?;
    line.push('\n');
    print(&line)
}

/// Maps a write error on stdout: a broken pipe ends the command quietly.
pub fn stdout_err(e: io::Error) -> Failure {
    let e = match Failure::from_io(e) {
        Ok(read) => return read,
        Err(e) => e,
    };
    if e.kind() == io::ErrorKind::BrokenPipe {
        Failure::BrokenPipe
    } else {
        Failure::msg(format!("cannot write the output: {e}"))
    }
}

/// A write error on stdout inside a consume call, which counts the record it was
/// writing as consumed (libbpf's rule for a callback that fails): the message says so.
pub fn lost_one(e: io::Error) -> Failure {
    match stdout_err(e) {
        Failure::Message(m) => Failure::msg(format!("{m} (the record being written is consumed and lost)")),
        f => f,
    }
}

/// Runs `write` on stdout, or on `output`: a regular file is written under a temporary
/// name and renamed into place once whole (see [`crate::destination`]); a device or
/// FIFO is written in place.
pub fn write_output(
    output: Option<&Path>,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), Failure> {
    match output {
        None => {
            let mut out = io::BufWriter::new(stdout()?);
            write(&mut out).and_then(|()| out.flush()).map_err(stdout_err)
        }
        Some(file) => {
            let err = |e: io::Error| {
                Failure::from_io(e).unwrap_or_else(|e| Failure::msg(format!("cannot write {}: {e}", file.display())))
            };
            let mut out = Output::create(file).map_err(err)?;
            write(out.file()).map_err(err)?;
            out.commit().map_err(err)
        }
    }
}

/// Serializes an identifier or an absolute time as a decimal string (see the module's
/// docs).
pub fn decimal<S: serde::Serializer>(x: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(x)
}

/// [`decimal`] of each.
pub fn decimals<S: serde::Serializer>(xs: &[u64], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(xs.iter().map(u64::to_string))
}

/// How a report (`stat`) is printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// Aligned lines for people, sizes in KiB/MiB.
    #[default]
    Text,
    /// One JSON object on one line, numbers exact.
    Json,
}

/// The formats `export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Chrome's Trace Event Format (JSON): chrome://tracing, ui.perfetto.dev.
    Chrome,
    /// Perfetto's protobuf trace of TrackEvent packets: ui.perfetto.dev, trace_processor.
    Perfetto,
    /// CTF 1.8, a directory (metadata and a stream file per thread): babeltrace2,
    /// Trace Compass. Needs -o DIR.
    Ctf,
    /// OpenTelemetry's OTLP/JSON, as the OTLP File Exporter writes it: a line of spans
    /// (span events inside), a line of log records (events outside any span).
    OtlpJson,
}
