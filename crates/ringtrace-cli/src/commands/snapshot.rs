//! `ringtrace snapshot`: every record a source holds, oldest (or newest) first, to
//! stdout or a file. Nothing is consumed. A `ringtrace-tracing` recorder directory:
//! its events decoded, or with `--output`, a trace file of its rings as they are now
//! (the process goes on running).

use std::io::{BufWriter, Write};
use std::path::Path;

use ringtrace::inspect::Record;

use crate::failure::Failure;
use crate::merge::{merge, read_all, rings};
use crate::output::write_output;
use crate::records::{warn_corrupt, write_record, write_records, Format};
use crate::source::Source;
use crate::traced::{self, Traced};

pub fn run(source: Source, reverse: bool, format: Format, output: Option<&Path>) -> Result<(), Failure> {
    match source {
        // A recorder directory's snapshot into a file is a trace file (a dump that
        // `ringtrace decode` reads); to stdout, its events decoded.
        Source::Traced(Traced::Dir(dir)) if output.is_some() => {
            if reverse {
                return Err(Failure::msg("--reverse prints events; a snapshot into a file is a trace file"));
            }
            traced::snapshot_to(&dir, output.expect("checked"))
        }
        Source::Traced(t) => traced::print(&t.read()?, traced::line_format(format)?, None, reverse, output),
        Source::Ring(ring) => {
            let records = ring.records()?;
            warn_corrupt(&records, "");
            write_output(output, |w| write_records(w, format, records.iter(), reverse))
        }
        Source::Snapshot(snap) => write_output(output, |w| write_records(w, format, snap.records(), reverse)),
        Source::Channel(ch) => {
            // Every slot's records merged by timestamp (slot by slot without one).
            let rings = rings(&ch);
            let slots = read_all(&rings);
            let merged = merge(ch.header(), &slots);
            write_output(output, |w| {
                let mut w = BufWriter::new(w);
                if reverse {
                    merged.iter().rev().try_for_each(|e| e.write(&mut w, format))?;
                } else {
                    merged.iter().try_for_each(|e| e.write(&mut w, format))?;
                }
                w.flush()
            })
        }
        Source::Bpf(ring) => {
            // A copy of what the map holds: its consumer position does not move.
            let snap = ring.snapshot().map_err(|e| Failure::msg(format!("cannot copy the map's records: {e}")))?;
            write_output(output, |w| {
                let mut w = BufWriter::new(w);
                let line = |w: &mut BufWriter<&mut dyn Write>, (pos, payload)| {
                    write_record(w, format, &Record { pos, pid: 0, payload })
                };
                if reverse {
                    snap.entries().rev().try_for_each(|e| line(&mut w, e))?;
                } else {
                    snap.entries().try_for_each(|e| line(&mut w, e))?;
                }
                w.flush()
            })
        }
    }
}
