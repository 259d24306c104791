//! One ring file drained by the agent: its consumer, its sequence numbers, and the
//! recovery of an earlier agent's acknowledged but unreleased records. A channel file
//! is one such source per slot, `PATH#SLOT` ([`channel`]).

mod bpf;
mod channel;
pub(super) mod error;
mod flight;
mod round;
mod traced;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ringtrace::config::{Mpsc, ProducerKind, Spsc};
use ringtrace::inspect::{RingFile, RingKind, RingMode};
use ringtrace::source::{Kind, Spec};
use ringtrace::{Access, Consumer, MpscRing, SpscRing, Stats};
use ringtrace_tracing::{CATALOG_FILE, RINGS_FILE};

use flight::Flight;
use round::{Reader, Times};

use crate::state::{SourceCounts, SourceState};

use super::error::ShipError;
use error::opening;
pub use error::{SourceError, SourceErrorKind};
use round::Batcher;
pub(super) use round::{Filled, Limits, Recovered};

/// A discard-mode ring file's consumer, of either producer kind, or a channel file's
/// slot's; or a source that keeps its own place (a flight recorder, a BPF map).
enum Ring {
    Mpsc(MpscRing, Consumer<Mpsc>),
    Spsc(SpscRing, Consumer<Spsc>),
    Slot(channel::Slot),
    Own(Box<dyn Reader>),
}

/// Applies `$body` to the discard consumer (`$c`) whichever the kind, or `$own` to
/// the source that keeps its own place (`$r`).
macro_rules! with_consumer {
    ($ring:expr, $c:ident => $body:expr, $r:ident => $own:expr) => {
        match $ring {
            Ring::Mpsc(_, $c) => $body,
            Ring::Spsc(_, $c) => $body,
            Ring::Slot(channel::Slot { consumer: $c, .. }) => $body,
            Ring::Own($r) => $own,
        }
    };
}

/// A ring file the agent drains.
pub(super) struct Source {
    /// The name records carry: the path as given.
    pub name: String,
    path: PathBuf,
    ring: Ring,
    dev: u64,
    ino: u64,
    /// The sequence number of the next record read.
    pub next_seq: u64,
    /// The sequence number and position after the records of the round in flight.
    pending: Option<(u64, u64)>,
    /// A channel slot's latest record time shipped, and its value before the round in
    /// flight (restored if the round fails).
    last_ns: u64,
    last_ns_before: u64,
}

impl Source {
    /// Attaches to the ring file at `path` as its consumer.
    pub fn open(path: &Path) -> Result<Source, ShipError> {
        let file = RingFile::open(path).map_err(opening(path.display()))?;
        let header = file.header();
        if header.mode == RingMode::Overwrite {
            let flight = Flight::open(path, header.kind).map_err(|e| SourceError::new(path.display(), e))?;
            return Source::new(path, path.display().to_string(), Ring::Own(Box::new(flight)));
        }
        let ring = match header.kind {
            RingKind::Mpsc => {
                let r = MpscRing::open_with(path, Access::Consumer).map_err(opening(path.display()))?;
                let c = r.consumer().map_err(opening(path.display()))?;
                Ring::Mpsc(r, c)
            }
            RingKind::Spsc => {
                let r = SpscRing::open_with(path, Access::Consumer).map_err(opening(path.display()))?;
                let c = r.consumer().map_err(opening(path.display()))?;
                Ring::Spsc(r, c)
            }
        };
        Source::new(path, path.display().to_string(), ring)
    }

    fn new(path: &Path, name: String, ring: Ring) -> Result<Source, ShipError> {
        let meta = std::fs::metadata(path).map_err(|e| SourceError::new(path.display(), e))?;
        Ok(Self::with_identity(path, name, ring, (meta.dev(), meta.ino())))
    }

    fn with_identity(path: &Path, name: String, ring: Ring, (dev, ino): (u64, u64)) -> Source {
        Source {
            name,
            path: path.to_path_buf(),
            ring,
            dev,
            ino,
            next_seq: 0,
            pending: None,
            last_ns: 0,
            last_ns_before: 0,
        }
    }

    /// The sources of the files at `paths`, in order: a ring file's, or one for each
    /// slot of a channel file (named `PATH#SLOT`, every slot's consumer attached), or a
    /// BPF map's (`bpf-pin:PATH`, `bpf-id:N`: see [`bpf`]), as the library's grammar
    /// ([`ringtrace::source`]) tells them apart. A `ringtrace-tracing` recorder
    /// directory ([`Kind::RecorderDir`]: its rings and catalog files in it) stands for
    /// its rings, `DIR#SLOT`, their records decoded on the host (see [`traced`]).
    /// Another directory stands for the ring and channel files in it (not below it), by
    /// name; its other files are skipped with a line on stderr each. Files added to it
    /// later are not read.
    pub fn expand(paths: &[PathBuf]) -> Result<Vec<Source>, ShipError> {
        let mut sources = Vec::with_capacity(paths.len());
        for path in paths {
            let spec = Spec::parse(path).map_err(|e| SourceError::new(path.display(), e))?;
            if let Some(opened) = spec.open_bpf() {
                let name = path.display().to_string();
                let (map, dev, ino) = bpf::open(&spec, opened).map_err(|e| SourceError::new(&name, e))?;
                sources.push(Source::with_identity(path, name, Ring::Own(Box::new(map)), (dev, ino)));
                continue;
            }
            match Kind::of(path) {
                Ok(Kind::RecorderDir) => {
                    Self::expand_recorder(path, &mut sources)?;
                    continue;
                }
                Ok(Kind::Directory) => {}
                kind => {
                    Self::expand_file(path, kind.ok(), &mut sources)?;
                    continue;
                }
            }
            for file in dir_files(path)? {
                let before = sources.len();
                if let Err(e) = Self::expand_file(&file, Kind::of(&file).ok(), &mut sources) {
                    sources.truncate(before);
                    tracing::warn!("skipping {}: {e}", file.display());
                }
            }
        }
        Ok(sources)
    }

    /// The sources of the file at `path`, of kind `kind` (`None`: it could not be told,
    /// and opening it as a ring file says why).
    fn expand_file(path: &Path, kind: Option<Kind>, sources: &mut Vec<Source>) -> Result<(), ShipError> {
        if kind != Some(Kind::Channel) {
            sources.push(Source::open(path)?);
            return Ok(());
        }
        if channel::mode(path)? == RingMode::Overwrite {
            return Self::expand_overwrite_channel(path, sources);
        }
        for slot in channel::open(path)? {
            let name = format!("{}#{}", path.display(), slot.slot);
            sources.push(Source::new(path, name, Ring::Slot(slot))?);
        }
        Ok(())
    }

    /// The slots of the overwrite-mode channel file at `path`, each followed as a
    /// flight recorder and named `PATH#SLOT`.
    fn expand_overwrite_channel(path: &Path, sources: &mut Vec<Source>) -> Result<(), ShipError> {
        let slots = channel::open_overwrite(path)?;
        for slot in 0..slots.rings().len() as u32 {
            let flight =
                Flight::slot(&slots, slot, None).map_err(|e| SourceError::new(path.display(), e.slot(slot)))?;
            sources.push(Source::new(path, format!("{}#{slot}", path.display()), Ring::Own(Box::new(flight)))?);
        }
        Ok(())
    }

    /// A recorder directory's sources: its rings, their records decoded with its
    /// catalog (see [`traced`]).
    fn expand_recorder(dir: &Path, sources: &mut Vec<Source>) -> Result<(), ShipError> {
        let rings = dir.join(RINGS_FILE);
        if channel::mode(&rings)? != RingMode::Overwrite {
            return Err(SourceError::new(rings.display(), SourceErrorKind::NotRecorderRings).into());
        }
        let slots = channel::open_overwrite(&rings)?;
        let catalog_path = dir.join(CATALOG_FILE);
        let catalog = traced::Catalog::open(&catalog_path).map_err(|e| SourceError::new(catalog_path.display(), e))?;
        for slot in 0..slots.rings().len() as u32 {
            let decoder = traced::Decoder::new(&catalog, slot);
            let flight = Flight::slot(&slots, slot, Some(decoder))
                .map_err(|e| SourceError::new(rings.display(), e.slot(slot)))?;
            sources.push(Source::new(&rings, format!("{}#{slot}", dir.display()), Ring::Own(Box::new(flight)))?);
        }
        Ok(())
    }

    /// Takes up where the state file's entry for this source (if any) left off (a
    /// flight recorder: see [`flight`]).
    ///
    /// The agent stores a round's end (position and next sequence) before it hands the
    /// round's records back to the ring, so after a crash the ring's consumer position
    /// is at or before the stored one. Records between the two were acknowledged by
    /// Kafka: they are stepped over. A ring at a position past the stored one had its
    /// records consumed by another reader; numbering goes on from the stored sequence,
    /// which never repeats a number.
    pub fn recover(&mut self, saved: Option<&SourceState>, deadline: Instant) -> Result<Recovered, ShipError> {
        let same = saved.is_some_and(|s| s.dev == self.dev && s.ino == self.ino);
        if let Ring::Own(r) = &mut self.ring {
            let found = r.recover(saved, same, deadline)?;
            self.next_seq = r.next_seq();
            return Ok(found);
        }
        let Some(saved) = saved else { return Ok(Recovered::default()) };
        self.next_seq = saved.next_seq;
        if !same {
            return Ok(Recovered { acknowledged: 0, new_ring: true });
        }
        let Some(capacity) = self.capacity() else { return Ok(Recovered::default()) };
        let mut stepped = 0;
        with_consumer!(&mut self.ring, c => {
            let gap = saved.position.saturating_sub(c.position());
            // More than a ring apart: not this ring's unreleased records.
            if gap > capacity || gap > c.available() {
                return Ok(Recovered { acknowledged: 0, new_ring: true });
            }
            // Bounded: each step reads one record (at least 8 bytes) of at most a ring.
            while c.position() < saved.position {
                if Instant::now() >= deadline {
                    let kind = SourceErrorKind::Unrecovered(c.position());
                    return Err(SourceError::new(self.path.display(), kind).into());
                }
                match c.consume_n(1, |_: &[u8]| ()) {
                    Ok(0) => std::thread::sleep(Duration::from_millis(1)),
                    Ok(n) => stepped += n as u64,
                    Err(e) => {
                        let kind = SourceErrorKind::Read(Box::new(e));
                        return Err(SourceError::new(self.path.display(), kind).into());
                    }
                }
            }
            c.release();
        }, _f => {});
        Ok(Recovered { acknowledged: stepped, new_ring: false })
    }

    /// A discard consumer's ring's capacity (`None` for a source that keeps its own
    /// place).
    fn capacity(&self) -> Option<u64> {
        match &self.ring {
            Ring::Mpsc(r, _) => Some(r.capacity()),
            Ring::Spsc(r, _) => Some(r.capacity()),
            Ring::Slot(s) => Some(s.ring.capacity()),
            Ring::Own(_) => None,
        }
    }

    /// The ring's counters (records its producers could not write, and the rest).
    pub fn stats(&self) -> Stats {
        match &self.ring {
            Ring::Mpsc(r, _) => r.stats(),
            Ring::Spsc(r, _) => r.stats(),
            Ring::Slot(s) => s.ring.stats(),
            Ring::Own(r) => r.stats(),
        }
    }

    /// Whether every producer of the ring is gone. A channel's slot: whether its
    /// producer is gone, or it never had one while another slot did (see
    /// [`channel::Slots::finished`]).
    pub fn is_disconnected(&self) -> bool {
        match &self.ring {
            Ring::Slot(s) => s.slots.finished(s.slot, s.consumer.is_disconnected()),
            ring => with_consumer!(ring, c => c.is_disconnected(), f => f.is_disconnected()),
        }
    }

    /// Whether a record is ready to read.
    pub fn ready(&self) -> bool {
        with_consumer!(&self.ring, c => c.ready(), f => f.ready())
    }

    /// Reads about `limits.round` bytes of records into batches (see [`Limits`]),
    /// each stamped with `time_ns` (a stamped channel's records: with their stamp's
    /// wall-clock time, see [`channel`]). The records stay the ring's until
    /// [`acknowledged`](Self::acknowledged) or [`failed`](Self::failed).
    pub fn fill(
        &mut self,
        host: &str,
        time_ns: u64,
        limits: Limits,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<Filled, ShipError> {
        debug_assert!(self.pending.is_none(), "a round is in flight");
        let name = &self.name;
        let mut seq = self.next_seq;
        self.last_ns_before = self.last_ns;
        let (filled, position) = match &mut self.ring {
            Ring::Slot(s) => {
                let stamps =
                    channel::Stamps { slots: &*s.slots, drained_ns: time_ns, last_ns: &mut self.last_ns, offset: 0 };
                let c = &mut s.consumer;
                (fill_from(c, host, name, &mut seq, Times::Channel(stamps), limits, out)?, c.position())
            }
            Ring::Own(r) => {
                let (filled, next, position) = r.fill(host, name, time_ns, limits, out)?;
                seq = next;
                (filled, position)
            }
            Ring::Mpsc(_, c) => {
                (fill_from(c, host, name, &mut seq, Times::Drained(time_ns), limits, out)?, c.position())
            }
            Ring::Spsc(_, c) => {
                (fill_from(c, host, name, &mut seq, Times::Drained(time_ns), limits, out)?, c.position())
            }
        };
        if filled.records > 0 {
            self.pending = Some((seq, position));
        }
        Ok(filled)
    }

    /// The entry the state file gets once the round in flight is acknowledged.
    /// A flight recorder's carries its consumer's counts at the position (the
    /// records overwritten before it in `counts.overwritten`, the only count set).
    pub fn pending_state(&self) -> Option<SourceState> {
        let (next_seq, position) = self.pending?;
        let (consumed, skipped, overwritten) = match &self.ring {
            Ring::Own(r) => r.pending_counts(),
            _ => (0, 0, 0),
        };
        Some(SourceState {
            source: self.name.clone(),
            dev: self.dev,
            ino: self.ino,
            position,
            next_seq,
            consumed,
            skipped,
            counts: SourceCounts { overwritten, ..SourceCounts::default() },
        })
    }

    /// The round in flight was acknowledged and stored: its records go back to the ring.
    pub fn acknowledged(&mut self) {
        if let Some((seq, _)) = self.pending.take() {
            self.next_seq = seq;
            with_consumer!(&mut self.ring, c => c.release(), f => f.acknowledged());
        }
    }

    /// The round in flight failed: its records stay in the ring, to be sent again with
    /// the same sequence numbers.
    pub fn failed(&mut self) {
        if self.pending.take().is_some() {
            self.last_ns = self.last_ns_before;
            with_consumer!(&mut self.ring, c => c.unread(), f => f.failed());
        }
    }

    /// Sleeps until a record is ready or `timeout` passes (nothing must be in flight).
    pub fn wait(&mut self, timeout: Duration) -> Result<(), ShipError> {
        debug_assert!(self.pending.is_none());
        with_consumer!(&mut self.ring, c => c.wait(Some(timeout)), f => f.wait(timeout))
            .map(drop)
            .map_err(|e| SourceError::new(self.path.display(), SourceErrorKind::Read(Box::new(e))).into())
    }
}

/// The most files a source directory may hold: a directory is read whole at start.
const MAX_DIR_FILES: usize = 4096;

/// The regular files directly in `dir`, sorted by name (at most [`MAX_DIR_FILES`]).
fn dir_files(dir: &Path) -> Result<Vec<PathBuf>, ShipError> {
    let err = |kind: SourceErrorKind| ShipError::from(SourceError::new(dir.display(), kind));
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| err(e.into()))? {
        let entry = entry.map_err(|e| err(e.into()))?;
        // Not followed: a link in the directory is not taken for a ring.
        if entry.file_type().map_err(|e| err(e.into()))?.is_file() {
            if files.len() == MAX_DIR_FILES {
                return Err(err(SourceErrorKind::TooManyFiles(MAX_DIR_FILES)));
            }
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

impl Drop for Source {
    /// Records read and not acknowledged stay in the ring for the next agent: a
    /// consumer dropped after an iteration would otherwise hand their space back (as a
    /// reader that passed them on should), and an agent stopping on an error mid-round
    /// would lose them.
    fn drop(&mut self) {
        // A flight recorder's consumer goes back to its last acknowledged mark as it
        // drops (`flight::Followed`'s `Drop`).
        with_consumer!(&mut self.ring, c => c.unread(), _f => {});
    }
}

/// The loop of [`Source::fill`] for one producer kind.
fn fill_from<K: ProducerKind>(
    c: &mut Consumer<K>,
    host: &str,
    name: &str,
    seq: &mut u64,
    mut times: Times<'_>,
    limits: Limits,
    out: &mut Vec<Vec<u8>>,
) -> Result<Filled, ShipError> {
    let mut batches = Batcher::new(host, name, *seq, times.batch(), limits, out)?;
    for whole in c.iter() {
        match batches.take(batches.next_seq(), whole, &mut times) {
            Ok(()) => {}
            Err(round::Stop::Full) => break,
            Err(round::Stop::Failed(e)) => return Err(e),
        }
    }
    *seq = batches.next_seq();
    Ok(batches.finish())
}

#[cfg(test)]
mod tests;
