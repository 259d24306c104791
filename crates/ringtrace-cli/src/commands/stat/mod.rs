//! `ringtrace stat`: what a source is and holds, as text or one JSON object. Each kind
//! of source has its own module; none moves a consumer position.

mod channel;
mod kernel;
mod ring;
mod snapfile;

use std::path::Path;

use crate::failure::Failure;
use crate::output::ReportFormat;
use crate::source::Source;

/// Shows `source`, opened from `path` (the argument as given, named in the output).
pub fn run(path: &Path, source: Source, format: ReportFormat) -> Result<(), Failure> {
    let json = format == ReportFormat::Json;
    match source {
        Source::Ring(ring) => ring::stat(path, &ring, json),
        Source::Channel(ch) => channel::stat(path, &ch, json),
        Source::Snapshot(snap) => snapfile::stat(path, &snap, json),
        Source::Bpf(mut map) => kernel::stat(&mut map, json),
        Source::Traced(t) => crate::traced::stat(path, &t.read()?, json),
    }
}

/// The fields of a struct's `{:?}` text, in order, with their values' text: the names
/// of `inspect::State`'s fields, for the tests that the stat tables name each as it does.
#[cfg(test)]
fn debug_fields(debug: &str) -> Vec<(String, String)> {
    let body = &debug[debug.find('{').expect("a struct") + 1..debug.rfind('}').expect("a struct")];
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in body.char_indices().chain(std::iter::once((body.len(), ','))) {
        match c {
            '[' | '{' | '(' => depth += 1,
            ']' | '}' | ')' => depth -= 1,
            ',' if depth == 0 => {
                let part = body[start..i].trim();
                start = i + 1;
                if let Some((name, value)) = part.split_once(": ") {
                    out.push((name.to_owned(), value.to_owned()));
                }
            }
            _ => {}
        }
    }
    out
}
