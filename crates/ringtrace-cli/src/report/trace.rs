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
    let mut out = crate::output::stdout()?;
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
        out.write_all(to_text(path, trace, events, threads).as_bytes()).map_err(stdout_err)
    }
}

/// What each of the recorder's counters (a trace's stats chunk, `Stats` of
/// `ringtrace_tracing::Recorder`) counts.
const COUNTERS: [(&str, &str); 9] = [
    ("lost", "records a thread's ring refused (full: a stream)"),
    ("unreported", "of them, those whose count no ring holds"),
    ("no_ring", "records of threads that found no free ring"),
    ("teardown", "records emitted while a thread was exiting"),
    ("busy", "records emitted while a thread's state was in use"),
    ("cut", "records with a value cut at the size bounds"),
    ("overwritten", "records overwritten to make room (flight recorder)"),
    ("failed_rings", "rings that could not be copied into the dump"),
    ("catalog_missing", "1 if the catalog could not be copied (names unknown)"),
];

/// `stat` of a trace as text: each count once, under a label of its own. The events
/// lost in all (`Trace::lost`) are not the recorder's `lost` counter (records a ring
/// refused): they are the lost-event records the rings hold, plus the counters that say
/// of events lost without one.
fn to_text(path: &Path, trace: &Trace, events: usize, threads: usize) -> String {
    let mut s = format!("{}: a ringtrace-tracing trace\n", path.display());
    if let Some(proc_) = &trace.process {
        s += &format!("  process      {} (pid {})\n", proc_.program, proc_.pid);
    }
    s += &format!("  records      {} ({events} events)\n  threads      {threads}\n", trace.len());
    s += &format!(
        "  events lost  {} in all (the lost-event records in the rings, and the recorder's unreported, no_ring, \
         teardown and busy)\n",
        trace.lost()
    );
    if !trace.stats.is_empty() {
        s += "  the recorder's counters when the trace was written:\n";
        let width = trace.stats.iter().map(|(n, v)| n.len() + v.to_string().len()).max().unwrap_or(0) + 1;
        for (name, v) in &trace.stats {
            let what = COUNTERS.iter().find(|(n, _)| n == name).map_or("", |(_, w)| w);
            let pad = width - name.len();
            s += format!("    {name}{v:>pad$}  {what}").trim_end();
            s.push('\n');
        }
    }
    s
}
