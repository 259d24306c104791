//! A channel file: every slot's ring read, its records merged by timestamp (see
//! [`mod@merge`]), or followed slot by slot; exported as a trace of raw records.

mod merge;

use std::fs::File;
use std::path::{Path, PathBuf};

use ringtrace::inspect::channel::{ChannelFile, ChannelHeader};
use ringtrace::inspect::{FormatError, Records};

use super::ring::follow::{Follower, POLL};
use super::{Follow, Held, RecordSource};
use crate::failure::{chain, Failure};
use crate::output::{stdout_err, ReportFormat};
use crate::pipeline::output::Sink;
use crate::pipeline::record::{Record, Timeline};
use merge::{label, merge, read_all, rings, warn_slot, SlotRing};

/// A channel file, opened.
pub struct Channel {
    path: PathBuf,
    file: ChannelFile<File>,
}

/// Opens a channel file, its header checked (the library's messages say "ring
/// header" where a channel's header is meant).
pub fn open(path: PathBuf) -> Result<Channel, Failure> {
    let file = ChannelFile::open(&path).map_err(|e| {
        Failure::msg(match e {
            FormatError::BadField { field, value, expected } => {
                format!("invalid channel header: {field} is {value}, expected {expected}")
            }
            FormatError::TooSmall { len, need } => {
                format!("channel file is {len} bytes, the header alone needs {need}")
            }
            FormatError::Truncated { len, need, .. } => {
                format!("channel file is {len} bytes but its header says {need} (truncated?)")
            }
            e => chain(&e),
        })
    })?;
    Ok(Channel { path, file })
}

impl RecordSource for Channel {
    fn kind(&self) -> &'static str {
        "a channel file"
    }

    /// Every slot's records merged by timestamp (slot by slot without one).
    fn read(&mut self) -> Result<Box<dyn Held + '_>, Failure> {
        let slots = read_all(&rings(&self.file));
        Ok(Box::new(Merged { header: *self.file.header(), slots }))
    }

    /// Each slot's ring followed as a ring file is; each poll's records merged.
    fn follow(&mut self) -> Result<Box<dyn Follow + '_>, Failure> {
        let rings = rings(&self.file);
        let mut first = Merged { header: *self.file.header(), slots: Vec::with_capacity(rings.len()) };
        let mut followed = Vec::with_capacity(rings.len());
        for (i, ring) in rings {
            match ring.records_from(0, true) {
                Ok(records) => {
                    followed.push((i, Follower::new(&ring, &records, label(i)), ring));
                    first.slots.push((i, records));
                }
                Err(e) => warn_slot(i, &chain(&e)),
            }
        }
        Ok(Box::new(Followed { first, followed }))
    }

    /// Raw records: each an event on its slot's track (`ringtrace_tracing::decode::raw`).
    fn timeline(&mut self) -> Option<Result<Timeline, Failure>> {
        Some(super::traced::read(&self.path).map(|t| Timeline::Trace(Box::new(t))))
    }

    fn stat(&mut self, path: &Path, format: ReportFormat) -> Result<(), Failure> {
        crate::report::channel::stat(path, &self.file, format == ReportFormat::Json)
    }
}

/// Slots' records, merged when they are written.
struct Merged {
    header: ChannelHeader,
    slots: Vec<(u32, Records)>,
}

impl Held for Merged {
    fn records(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        Box::new(merge(&self.header, &self.slots).into_iter().map(|e| e.record()))
    }

    fn records_rev(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        Box::new(merge(&self.header, &self.slots).into_iter().rev().map(|e| e.record()))
    }
}

/// A channel being followed: its slots' rings, each with its follower.
struct Followed<'a> {
    first: Merged,
    followed: Vec<(u32, Follower, SlotRing<'a>)>,
}

impl Follow for Followed<'_> {
    fn first(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        self.first.records()
    }

    /// Sorts the records each pass finds: exact within a pass; a record committed after
    /// a newer one of another slot was written is written when it shows up.
    fn poll(&mut self, out: &mut dyn Sink) -> Result<usize, Failure> {
        std::thread::sleep(POLL);
        let mut pass = Merged { header: self.first.header, slots: Vec::with_capacity(self.followed.len()) };
        // A slot that cannot be read any more is warned about once and left.
        self.followed.retain_mut(|(i, follower, ring)| match follower.poll(ring) {
            Ok(records) => {
                pass.slots.push((*i, records));
                true
            }
            Err(Failure::Message(e)) => {
                warn_slot(*i, &e);
                false
            }
            Err(Failure::BrokenPipe | Failure::Interrupted(_)) => false,
        });
        let mut n = 0;
        for r in pass.records() {
            out.write(&r).map_err(stdout_err)?;
            n += 1;
        }
        Ok(n)
    }
}
