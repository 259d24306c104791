//! `stat` of a `ringtrace-tracing` trace (a trace file or a recorder directory): what
//! it holds and lost.

use std::io::Write;
use std::path::Path;

use ringtrace_tracing::decode::{EntryKind, Trace};

use crate::failure::Failure;
use crate::output::stdout_err;

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
