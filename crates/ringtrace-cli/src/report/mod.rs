//! What `stat` prints of each kind of source: its header, positions, counters and
//! processes, as text for people or one JSON object. Each source of the pipeline calls
//! its kind's report.

#[cfg(feature = "kafka")]
pub mod agent;
pub mod channel;
#[cfg(feature = "kafka")]
pub mod fleet;
pub mod kernel;
pub mod ring;
pub mod snapfile;
pub mod trace;

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
