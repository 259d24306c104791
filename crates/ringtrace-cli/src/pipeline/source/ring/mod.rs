//! A ring file: its records read in place, followed as producers write them, or
//! consumed as the ring's one consumer.

mod consume;
pub mod follow;

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use ringtrace::format::channel::CHANNEL_MAGIC;
use ringtrace::inspect::{FormatError, Records, RingFile, RingKind, RingMode};

use super::{Consume, Follow, Held, RecordSource};
use crate::failure::Failure;
use crate::output::{stdout_err, warn_corrupt, ReportFormat};
use crate::pipeline::output::Sink;
use crate::pipeline::record::{Raw, Record};
use follow::{Follower, POLL};

/// A ring file, opened (until a consumer or producer attaches to it).
pub struct Ring {
    path: PathBuf,
    file: Option<RingFile<File>>,
}

/// Opens a ring file; a file whose magic is a channel magic of another version is
/// reported as such rather than as "not a ring file".
pub fn open(path: PathBuf) -> Result<Ring, Failure> {
    let file = RingFile::open(&path).map_err(|e| match e {
        FormatError::BadMagic { found } if found.to_le_bytes()[..7] == CHANNEL_MAGIC.to_le_bytes()[..7] => {
            Failure::msg(format!(
                "channel file format {} is not supported (magic is {found:#018x}; this ringtrace reads format {})",
                found.to_le_bytes()[7],
                CHANNEL_MAGIC.to_le_bytes()[7]
            ))
        }
        e => e.into(),
    })?;
    Ok(Ring { path, file: Some(file) })
}

impl Ring {
    fn file(&self) -> Result<&RingFile<File>, Failure> {
        self.file.as_ref().ok_or_else(|| Failure::msg(format!("{} is attached to", self.path.display())))
    }
}

impl RecordSource for Ring {
    fn kind(&self) -> &'static str {
        "a ring file"
    }

    fn read(&mut self) -> Result<Box<dyn Held + '_>, Failure> {
        let records = self.file()?.records()?;
        warn_corrupt(&records, "");
        Ok(Box::new(RingRecords(records)))
    }

    fn follow(&mut self) -> Result<Box<dyn Follow + '_>, Failure> {
        let ring = self.file()?;
        // Following reads in order, waiting at unfinished records.
        let first = ring.records_from(0, true)?;
        let follower = Follower::new(ring, &first, String::new());
        Ok(Box::new(Followed { ring, first, follower }))
    }

    fn consume(&mut self, path: &Path, opts: &Consume, out: &mut dyn Sink) -> Option<Result<(), Failure>> {
        Some(self.attach(path)?.and_then(|(kind, mode, fd)| consume::run(kind, mode, fd, opts, out)))
    }

    fn attach(&mut self, path: &Path) -> Option<Result<(RingKind, RingMode, OwnedFd), Failure>> {
        let file = self.file.take()?;
        let (kind, mode) = (file.header().kind, file.header().mode);
        Some(reopen(path, file.source()).map(|fd| (kind, mode, fd)))
    }

    fn stat(&mut self, path: &Path, format: ReportFormat) -> Result<(), Failure> {
        crate::report::ring::stat(path, self.file()?, format == ReportFormat::Json)
    }
}

/// A ring's records, read.
struct RingRecords(Records);

/// A ring's records, oldest first.
fn each(records: &Records) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
    Box::new(records.iter().map(|r| Record::Raw(Raw::of(&r))))
}

impl Held for RingRecords {
    fn records(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        each(&self.0)
    }

    fn records_rev(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        Box::new(self.0.iter().rev().map(|r| Record::Raw(Raw::of(&r))))
    }
}

/// A ring being followed.
struct Followed<'a> {
    ring: &'a RingFile<File>,
    first: Records,
    follower: Follower,
}

impl Follow for Followed<'_> {
    fn first(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        each(&self.first)
    }

    fn poll(&mut self, out: &mut dyn Sink) -> Result<usize, Failure> {
        std::thread::sleep(POLL);
        let records = self.follower.poll(self.ring)?;
        for r in records.iter() {
            out.write(&Record::Raw(Raw::of(&r))).map_err(stdout_err)?;
        }
        Ok(records.len())
    }
}

/// The ring file at `path` opened read-write to attach to: the very file that was
/// inspected as `inspected` (a name pointed at another file since is refused).
fn reopen(path: &Path, inspected: &File) -> Result<OwnedFd, Failure> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let err = |e: std::io::Error| Failure::msg(format!("cannot open the ring: {e}"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(err)?;
    let (a, b) = (inspected.metadata().map_err(err)?, file.metadata().map_err(err)?);
    if (a.dev(), a.ino()) != (b.dev(), b.ino()) {
        return Err(Failure::msg(format!("{} was replaced by another file while it was opened", path.display())));
    }
    Ok(file.into())
}
