//! [`Recorder`]: the handle beside the layer. Dumps a flight recorder (on demand or from
//! a panic hook), reports what was lost, finishes a stream.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::emitter::Emitter;
use crate::error::Error;
use crate::file::{self, chunk};
use crate::files::Partial;
use crate::shared::{Counters, Shared, Sink};
use crate::stream::Drain;

/// Records per records chunk: chunks stay well under the reader's limit.
const CHUNK_BYTES: usize = 1 << 20;

/// What a recorder wrote and lost: every event that did not reach a ring, or reached it
/// cut, is counted here by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Threads that wrote.
    pub threads: u64,
    /// Records committed into the rings (spans' records included).
    pub written: u64,
    /// Records a thread's ring refused (full, in a stream); each thread writes the count
    /// into its ring before its next record.
    pub lost: u64,
    /// Of `lost`, those whose count no ring holds: not written yet (a thread writes it
    /// before its next record), or never (the thread exited with its ring still full,
    /// or a stream finished first). A trace counts these in its stats.
    pub unreported: u64,
    /// Records of threads that found no free ring: the recorder directory full (every
    /// slot taken), or its filesystem without room to reserve the thread's ring (a
    /// thread does not try again).
    pub no_ring: u64,
    /// Records emitted while a thread was exiting (its state gone).
    pub teardown: u64,
    /// Records emitted while the thread's state was in use (never expected).
    pub busy: u64,
    /// Records written with a value cut or dropped at the size bounds.
    pub cut: u64,
    /// Flight recorder: records given up to make room for newer ones.
    pub overwritten: u64,
    /// Stream: records written into the trace file. After [`Recorder::finish`],
    /// `written - drained` counts records committed after the last pass (events
    /// emitted after `finish` began), which the file does not hold.
    pub drained: u64,
    /// Records threads hold back now, each to write as one record with the next on its
    /// thread: a span's `new span` until it is entered, its `exit` until it closes (see
    /// the crate's docs, "Spans"). A thread writes it at its next event or span record,
    /// or as it exits; a dump, or a stream's end, taken while it is held goes without
    /// it (a stream then counts it lost when the thread writes it). At most one a thread.
    pub held: u64,
}

/// The handle of a recorder: [`dump`](Self::dump) a flight recorder, read its
/// [`stats`](Self::stats), [`finish`](Self::finish) a stream. Dropping a stream's
/// recorder finishes it too.
pub struct Recorder {
    shared: Arc<Shared>,
    drain: Mutex<Option<Drain>>,
    directory: Option<PathBuf>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("directory", &self.directory).field("stats", &self.stats()).finish()
    }
}

/// What a dump wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Dumped {
    /// Records written.
    pub records: usize,
    /// Rings that could not be captured (their records are not in the dump).
    pub failed_rings: usize,
}

impl Recorder {
    pub(crate) fn new(shared: Arc<Shared>, drain: Option<Drain>, directory: Option<PathBuf>) -> Recorder {
        Recorder { shared, drain: Mutex::new(drain), directory }
    }

    /// The recorder directory, if the rings are in one.
    pub fn directory(&self) -> Option<&Path> {
        self.directory.as_deref()
    }

    /// An [`Emitter`]: records events and spans given as data (another language's
    /// instrumentation) into this recorder, beside the layer's.
    pub fn emitter(&self) -> Emitter {
        Emitter::new(self.shared.clone())
    }

    /// Retires the recorder for good: no thread records into it any more (an event
    /// through its layer or an [`Emitter`] is counted in `teardown`), and each thread's
    /// state for it (its ring producer, keeping the rings alive) is dropped at that
    /// thread's next record into any recorder, or when the thread exits. For a handle
    /// that will not be used again, such as the C API's `ringtrace_recorder_free`; a
    /// Rust program simply drops the recorder and its layer.
    pub fn retire(&self) {
        self.shared.retire();
        crate::local::release(&self.shared);
    }

    /// Whether this is a flight recorder (it has rings to dump), not a stream.
    pub fn is_flight(&self) -> bool {
        matches!(self.shared.sink, Sink::Flight(_))
    }

    /// The counters now.
    pub fn stats(&self) -> Stats {
        let c = &self.shared.counters;
        let ch = match &self.shared.sink {
            Sink::Flight(ch) => ch.stats(),
            Sink::Stream(ch) => ch.stats(),
        };
        Stats {
            threads: self.shared.thread_count(),
            written: ch.written,
            lost: Counters::get(&c.lost),
            unreported: Counters::get(&c.unreported),
            no_ring: Counters::get(&c.no_ring),
            teardown: Counters::get(&c.teardown),
            busy: Counters::get(&c.busy),
            cut: Counters::get(&c.cut),
            overwritten: ch.overwritten,
            drained: Counters::get(&c.drained),
            held: self.shared.held(),
        }
    }

    /// Writes the flight recorder's newest events, every thread's, to a new trace file
    /// at `path`, while threads go on recording. `ringtrace decode PATH` prints it.
    ///
    /// The file is written beside `path` as `PATH.partial.PID.N` (PID this process's
    /// id, N a counter's next value; a name that exists is skipped, up to 100), created
    /// new with `O_CREAT | O_EXCL | O_NOFOLLOW` and mode 0600, then synced and renamed
    /// over `path`. So the dump is the caller's and private to it, and no file or
    /// symlink another user planted at either name is written through or truncated (a
    /// symlink at `path` is replaced, not followed).
    ///
    /// A record the calling thread holds back ([`Stats::held`]) is written first; other
    /// threads' are not in the dump.
    pub fn dump(&self, path: impl AsRef<Path>) -> Result<Dumped, Error> {
        crate::local::flush(&self.shared);
        dump_path(&self.shared, path.as_ref(), Duration::from_secs(1))
    }

    /// Writes a dump as [`dump`](Self::dump) does, to a new file: `path`, or the first
    /// of `path.1`, `path.2`, ... `path.999` that names nothing (as a panic hook's dumps
    /// are named, so that one dump never replaces another; when all are taken, an
    /// error). Returns the file's path.
    pub fn dump_new(&self, path: impl AsRef<Path>) -> Result<(PathBuf, Dumped), Error> {
        crate::local::flush(&self.shared);
        dump_numbered(&self.shared, path.as_ref(), Duration::from_secs(1))
    }

    /// Writes the dump to `w` (see [`dump`](Self::dump)).
    pub fn dump_to(&self, w: &mut impl Write) -> Result<Dumped, Error> {
        crate::local::flush(&self.shared);
        dump(&self.shared, w, Duration::from_secs(1)).map_err(|e| e.into_error(Path::new("the writer")))
    }

    /// On a panic, before the panic unwinds or aborts the process: dumps the flight
    /// recorder to `path` (a new file each time: `path` with `.N` added if the name is
    /// taken, by a file or a symlink, up to `.999`, past which no dump is written;
    /// written as [`dump`](Self::dump) writes, mode 0600), says so on stderr, then runs the hook that was installed before. A dump
    /// from a panic hook waits at most 100 ms for the catalog, whose lock the panicking
    /// thread may hold.
    pub fn install_panic_hook(&self, path: impl Into<PathBuf>) -> Result<(), Error> {
        if !matches!(self.shared.sink, Sink::Flight(_)) {
            return Err(Error::NotFlight);
        }
        let (shared, path) = (self.shared.clone(), path.into());
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // The panicking thread's held record, into its ring first.
            crate::local::flush(&shared);
            match dump_numbered(&shared, &path, Duration::from_millis(100)) {
                Ok((target, d)) => eprintln!(
                    "ringtrace-tracing: flight recorder dumped to {} ({} records)",
                    target.display(),
                    d.records
                ),
                Err(e) => eprintln!(
                    "ringtrace-tracing: the flight recorder could not be dumped: {}",
                    crate::error::with_causes(&e)
                ),
            }
            previous(info);
        }));
        Ok(())
    }

    /// Stream: drains what the rings still hold, writes the final counts and closes the
    /// trace file. Flight recorder: nothing to do. Returns the counters.
    pub fn finish(self) -> Result<Stats, Error> {
        self.stop()?;
        Ok(self.stats())
    }

    fn stop(&self) -> Result<(), Error> {
        crate::local::release(&self.shared);
        let drain = self.drain.lock().unwrap_or_else(|e| e.into_inner()).take();
        match drain {
            Some(d) => d.finish(&self.shared),
            None => Ok(()),
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("ringtrace-tracing: finishing the stream failed: {}", crate::error::with_causes(&e));
        }
    }
}

/// `path`, `path.1`, `path.2`, ... `path.999`: the names a dump that replaces nothing
/// tries, in order.
fn numbered(path: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    (0..1000).map(move |i| {
        if i == 0 {
            return path.to_path_buf();
        }
        let mut s = path.as_os_str().to_owned();
        s.push(format!(".{i}"));
        s.into()
    })
}

/// A dump's failure before it knows its path.
pub(crate) enum DumpError {
    Io(std::io::Error),
    Other(Error),
}

impl DumpError {
    fn into_error(self, path: &Path) -> Error {
        match self {
            DumpError::Io(e) => Error::io("writing the dump", path, e),
            DumpError::Other(e) => e,
        }
    }
}

impl From<std::io::Error> for DumpError {
    fn from(e: std::io::Error) -> Self {
        DumpError::Io(e)
    }
}

fn dump_path(shared: &Shared, path: &Path, patience: Duration) -> Result<Dumped, Error> {
    let (tmp, d) = write_partial(shared, path, patience)?;
    tmp.commit().map_err(|e| Error::io("renaming the dump into place", path, e))?;
    Ok(d)
}

/// A dump to the first of `path`, `path.1`, ... `path.999` that names nothing, renamed
/// there without replacing anything (a name taken meanwhile is skipped).
fn dump_numbered(shared: &Shared, path: &Path, patience: Duration) -> Result<(PathBuf, Dumped), Error> {
    let (tmp, d) = write_partial(shared, path, patience)?;
    let target = tmp
        .commit_new(numbered(path))
        .map_err(|e| Error::io("renaming the dump into place (up to .999, replacing nothing) at", path, e))?;
    Ok((target, d))
}

/// The dump written and synced beside `path`, not renamed yet.
fn write_partial(shared: &Shared, path: &Path, patience: Duration) -> Result<(Partial, Dumped), Error> {
    let tmp = Partial::create(path).map_err(|e| Error::io("creating the dump beside", path, e))?;
    let mut w = BufWriter::new(tmp);
    let d = dump(shared, &mut w, patience).map_err(|e| e.into_error(w.get_ref().path()))?;
    let tmp = w.into_inner().map_err(|e| {
        let (e, w) = e.into_parts();
        Error::io("writing the dump", w.get_ref().path(), e)
    })?;
    tmp.file().sync_all().map_err(|e| Error::io("writing the dump", tmp.path(), e))?;
    Ok((tmp, d))
}

fn dump(shared: &Shared, w: &mut impl Write, patience: Duration) -> Result<Dumped, DumpError> {
    let Sink::Flight(ch) = &shared.sink else { return Err(DumpError::Other(Error::NotFlight)) };
    let snap = ch.snapshot().map_err(|e| DumpError::Other(e.into()))?;
    w.write_all(&file::header())?;
    file::write_chunk(w, chunk::PROCESS, &shared.process.encode())?;
    // The catalog after the snapshot: every record in it was written after its
    // callsite's and thread's entries were added.
    let catalog_missing = match shared.catalog.try_lock_for(patience) {
        Some(entries) => {
            for (kind, payload) in &entries.chunks {
                file::write_chunk(w, *kind, payload)?;
            }
            0
        }
        None => 1,
    };
    let mut buf = Vec::with_capacity(CHUNK_BYTES + 4096);
    for rec in snap.iter() {
        file::put_record(&mut buf, rec.producer, rec.timestamp, rec.data);
        if buf.len() >= CHUNK_BYTES {
            file::write_chunk(w, chunk::RECORDS, &buf)?;
            buf.clear();
        }
    }
    if !buf.is_empty() {
        file::write_chunk(w, chunk::RECORDS, &buf)?;
    }
    let mut stats = shared.counters.named().to_vec();
    stats.extend([
        ("overwritten", snap.overwritten()),
        ("failed_rings", snap.failed().len() as u64),
        ("catalog_missing", catalog_missing),
        // Span records other threads hold back: not in the dump.
        ("held", shared.held()),
    ]);
    file::write_chunk(w, chunk::STATS, &file::encode_stats(&stats))?;
    file::write_chunk(w, chunk::END, &[])?;
    w.flush()?;
    Ok(Dumped { records: snap.len(), failed_rings: snap.failed().len() })
}
