//! Traces of `ringtrace-tracing`: a trace file (a dump or a stream) or a recorder
//! directory, decoded into events. What `decode`, `snapshot`, `tail` and `stat` share.

use std::collections::VecDeque;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use ringtrace_tracing::decode::text::{self, Format as LineFormat};
use ringtrace_tracing::decode::{EntryKind, Trace};

use crate::failure::{chain, Failure};
use crate::output::{stdout_err, warn, write_output};
use crate::records::Format;

/// A trace source, before it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Traced {
    /// A recorder directory (its rings read live, or after its process died).
    Dir(PathBuf),
    /// A trace file.
    File(PathBuf),
}

impl Traced {
    /// Reads and checks it; what was skipped is said on stderr.
    pub fn read(&self) -> Result<Trace, Failure> {
        let trace = match self {
            Traced::Dir(p) | Traced::File(p) => Trace::open(p).map_err(|e| Failure::msg(chain(&e)))?,
        };
        let summary = text::summary(&trace);
        if !summary.is_empty() {
            warn(&summary);
        }
        Ok(trace)
    }
}

/// The line format of a record format: text or JSON (hex has no meaning for events).
pub fn line_format(format: Format) -> Result<LineFormat, Failure> {
    match format {
        Format::Text => Ok(LineFormat::Text),
        Format::Json => Ok(LineFormat::Json),
        Format::Hex => Err(Failure::msg("a trace's events print as text or json, not hex")),
    }
}

/// Prints the events of `trace` (the newest `last`, if given; newest first if
/// `reverse`), one a line, to `output` or stdout.
pub fn print(
    trace: &Trace,
    format: LineFormat,
    last: Option<usize>,
    reverse: bool,
    output: Option<&Path>,
) -> Result<(), Failure> {
    if last.is_none() && !reverse {
        return write_output(output, |w| {
            let mut w = BufWriter::new(w);
            text::write(trace, format, &mut w)?;
            w.flush()
        });
    }
    // The newest `last` are kept as the trace goes by; newest first needs them all.
    let mut kept = VecDeque::new();
    for entry in trace.entries() {
        if let EntryKind::Event(e) = entry.kind {
            if last.is_some_and(|n| kept.len() == n) {
                kept.pop_front();
            }
            if last != Some(0) {
                kept.push_back(e);
            }
        }
    }
    write_output(output, |w| {
        let mut w = BufWriter::new(w);
        if reverse {
            kept.iter().rev().try_for_each(|e| writeln!(w, "{}", text::event_line(trace, e, format)))?;
        } else {
            kept.iter().try_for_each(|e| writeln!(w, "{}", text::event_line(trace, e, format)))?;
        }
        w.flush()
    })
}

/// Writes a recorder directory's snapshot as a trace file at `file`.
pub fn snapshot_to(dir: &Path, file: &Path) -> Result<(), Failure> {
    let err = |e: std::io::Error| Failure::msg(format!("cannot write {}: {e}", file.display()));
    let mut out = crate::destination::Output::create(file).map_err(err)?;
    let mut w = BufWriter::new(out.file());
    let s = ringtrace_tracing::snapshot(dir, &mut w).map_err(|e| Failure::msg(chain(&e)))?;
    w.flush().map_err(err)?;
    drop(w);
    out.commit().map_err(err)?;
    if s.unfinished > 0 {
        warn(&format!("{} records being written were stepped over", s.unfinished));
    }
    for (slot, why) in &s.unreadable {
        warn(&format!("ring {slot} is not in the snapshot: {why}"));
    }
    let _ = writeln!(std::io::stderr(), "{} records written to {}", s.records, file.display());
    Ok(())
}

/// `stat` of a trace: what it holds and lost.
pub fn stat(path: &Path, trace: &Trace, json: bool) -> Result<(), Failure> {
    let events = trace.entries().filter(|e| matches!(e.kind, EntryKind::Event(_))).count();
    let threads = trace.threads().len();
    let mut out = std::io::stdout().lock();
    let p = &trace.problems;
    if json {
        let mut o = serde_json::json!({
            "path": path.display().to_string(),
            "kind": "trace",
            "records": trace.len(),
            "events": events,
            "threads": threads,
            "lost": trace.lost(),
            "incomplete": p.incomplete,
            "bad_records": p.bad_records,
            "unfinished": p.unfinished,
        });
        if let Some(proc_) = &trace.process {
            o["pid"] = proc_.pid.into();
            o["program"] = proc_.program.clone().into();
        }
        for (name, v) in &trace.stats {
            o["stats"][name] = (*v).into();
        }
        writeln!(out, "{o}").map_err(stdout_err)
    } else {
        let mut s = format!("{}: a ringtrace-tracing trace\n", path.display());
        if let Some(proc_) = &trace.process {
            s += &format!("  process   {} (pid {})\n", proc_.program, proc_.pid);
        }
        s += &format!(
            "  records   {} ({events} events)\n  threads   {threads}\n  lost      {}\n",
            trace.len(),
            trace.lost()
        );
        for (name, v) in &trace.stats {
            s += &format!("  {name:<9} {v}\n");
        }
        out.write_all(s.as_bytes()).map_err(stdout_err)
    }
}
