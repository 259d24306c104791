//! The pipeline run: what a source holds, or what it is followed or consumed into,
//! written by an output.

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use super::output::{Format, Lines, Sink};
use super::record::Record;
use super::source::{Consume, RecordSource};
use crate::failure::Failure;
use crate::output::{stdout, stdout_err, stdout_for_consumed, write_output};

pub use super::record::Pick;

/// Writes the records `source` holds (the `pick` of them) in `format` to `output`, or
/// stdout: as it reads them, for a source read as a stream (a `kafka://` topic).
pub fn read(source: &mut dyn RecordSource, pick: Pick, format: Format, output: Option<&Path>) -> Result<(), Failure> {
    let shape = source.shape();
    if source.streams() {
        let lines = format.lines();
        lines.accepts(shape)?;
        return write_output(output, |w| {
            let mut out = Lines::new(w, lines);
            source.stream(pick, &mut |r| out.write(r))?;
            out.flush()
        });
    }
    let held = source.read()?;
    let lines = format.lines();
    lines.accepts(shape)?;
    write_output(output, |w| {
        let mut out = Lines::new(w, lines);
        match pick {
            Pick::All => held.records().try_for_each(|r| out.write(&r))?,
            Pick::Reversed => held.records_rev().try_for_each(|r| out.write(&r))?,
            Pick::Last(n) => last(held.records(), n).iter().try_for_each(|r| out.write(r))?,
        }
        out.flush()
    })?;
    held.finish();
    Ok(())
}

/// The newest `n` records (markers left out), oldest first.
fn last<'a>(records: impl Iterator<Item = Record<'a>>, n: usize) -> VecDeque<Record<'a>> {
    let mut kept = VecDeque::with_capacity(n.min(1 << 16));
    for r in records.filter(|r| !r.is_marker()) {
        if kept.len() == n {
            kept.pop_front();
        }
        if n > 0 {
            kept.push_back(r);
        }
    }
    kept
}

/// Writes the newest `count` records `source` holds, then every record committed
/// since, to stdout in `format`, until `timeout` passes without a new one.
pub fn follow(
    source: &mut dyn RecordSource,
    count: usize,
    format: Format,
    timeout: Option<Duration>,
) -> Result<(), Failure> {
    let mut out = Lines::new(stdout()?, format.lines());
    let mut f = source.follow()?;
    last(f.first(), count).iter().try_for_each(|r| out.write(r)).map_err(stdout_err)?;
    out.flush().map_err(stdout_err)?;
    let mut seen = Instant::now();
    loop {
        let n = f.poll(&mut out)?;
        out.flush().map_err(stdout_err)?;
        if n > 0 {
            seen = Instant::now();
        }
        if timeout.is_some_and(|t| seen.elapsed() >= t) {
            break;
        }
    }
    f.drain(&mut out)?;
    out.flush().map_err(stdout_err)?;
    f.finish();
    Ok(())
}

/// Consumes `source` (opened from `path`) to stdout in `format`; `None` for a source
/// without a consumer. A stdout that cannot be written (closed, or open only for
/// reading: [`stdout_for_consumed`]) is refused before the first record is taken:
/// every record stays.
pub fn consume(
    source: &mut dyn RecordSource,
    path: &Path,
    opts: &Consume,
    format: Format,
) -> Option<Result<(), Failure>> {
    let out = match stdout_for_consumed() {
        Ok(out) => out,
        Err(Failure::Message(m)) => return Some(Err(Failure::msg(format!("{m}: no record was consumed")))),
        Err(e) => return Some(Err(e)),
    };
    source.consume(path, opts, &mut Lines::new(out, format.lines()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::record::Raw;

    fn raws(payloads: &[&'static [u8]]) -> Vec<Record<'static>> {
        payloads.iter().map(|&payload| Record::Raw(Raw { payload, at: None, origin: None })).collect()
    }

    fn payloads(kept: &VecDeque<Record<'_>>) -> Vec<Vec<u8>> {
        kept.iter()
            .map(|r| match r {
                Record::Raw(raw) => raw.payload.to_vec(),
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn the_newest_n_oldest_first() {
        assert_eq!(payloads(&last(raws(&[b"a", b"b", b"c"]).into_iter(), 2)), [b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(payloads(&last(raws(&[b"a"]).into_iter(), 5)), [b"a".to_vec()]);
        assert!(last(raws(&[b"a"]).into_iter(), 0).is_empty());
    }
}
