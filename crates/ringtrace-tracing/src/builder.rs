//! [`Builder`]: the recorder's mode, sizes and place, then the layer and its handle.

use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ringtrace::channel::Channel;
use ringtrace::clock::BestClock;
use ringtrace::config::{Discard, Overwrite};
use ringtrace::format::channel::MAX_SLOTS;
use rustix::fs::{self, AtFlags, Mode, OFlags};

use crate::catalog::Catalog;
use crate::error::Error;
use crate::file::{self, chunk, Process, CATALOG_FILE, RINGS_FILE};
use crate::files;
use crate::layer::RingLayer;
use crate::recorder::Recorder;
use crate::shared::{Limits, Shared, Sink};
use crate::stream::Drain;
use crate::wire::{MAX_VALUE_LIMIT, MIN_RECORD_LIMIT};

/// Each thread's ring: 1 MiB unless set.
pub const DEFAULT_PER_THREAD: u64 = 1 << 20;
/// A record's bound: 4 KiB unless set.
pub const DEFAULT_MAX_RECORD: usize = 4096;
/// A text value's bound: 1 KiB unless set.
pub const DEFAULT_MAX_VALUE: usize = 1024;
/// Threads a recorder directory holds rings for: 256 unless set.
pub const DEFAULT_MAX_THREADS: u32 = 256;

#[derive(Clone, Debug)]
enum Kind {
    Flight { directory: Option<PathBuf> },
    Stream { path: PathBuf },
}

/// Configures a recorder: a flight recorder (the newest events of each thread, in
/// memory or in a directory another process can read) or a stream (every event, drained
/// into a trace file by a background thread).
///
/// ```
/// use tracing_subscriber::layer::SubscriberExt;
///
/// let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).build()?;
/// let subscriber = tracing_subscriber::registry().with(layer);
/// tracing::subscriber::with_default(subscriber, || {
///     tracing::info!(answer = 42, "hello");
/// });
/// let path = std::env::temp_dir().join(format!("doc-{}.rtt", std::process::id()));
/// recorder.dump(&path)?;
/// let trace = ringtrace_tracing::decode::Trace::open(&path)?;
/// assert_eq!(trace.events()[0].message(), Some("hello"));
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    kind: Kind,
    per_thread: u64,
    max_threads: u32,
    /// `None`: the default, or less if a ring cannot hold it.
    max_record: Option<usize>,
    max_value: usize,
    replace: bool,
}

impl Builder {
    fn new(kind: Kind) -> Builder {
        Builder {
            kind,
            per_thread: DEFAULT_PER_THREAD,
            max_threads: DEFAULT_MAX_THREADS,
            max_record: None,
            max_value: DEFAULT_MAX_VALUE,
            replace: false,
        }
    }

    /// A flight recorder: each thread's ring keeps its newest events, overwriting the
    /// oldest; [`Recorder::dump`] writes them out.
    pub fn flight_recorder() -> Builder {
        Builder::new(Kind::Flight { directory: None })
    }

    /// A stream: a background thread drains every thread's ring into the trace file at
    /// `path`, made new with mode 0600 (`O_CREAT | O_EXCL | O_NOFOLLOW`: `build` fails
    /// if a file or a symlink has the name; none is replaced or written through). An
    /// event that finds its thread's ring full is lost, counted, and the count written
    /// into the trace.
    pub fn stream(path: impl AsRef<Path>) -> Builder {
        Builder::new(Kind::Stream { path: path.as_ref().into() })
    }

    /// Each thread's ring, in bytes: a power of two from 4 KiB (default 1 MiB). A flight
    /// recorder keeps about this much of each thread's newest events.
    pub fn per_thread_bytes(mut self, bytes: u64) -> Self {
        self.per_thread = bytes;
        self
    }

    /// Flight recorder: keep the rings in files in `dir`, so that `ringtrace snapshot
    /// DIR` and `ringtrace decode DIR` read them from outside the process, live or after
    /// it died. The directory holds [`RINGS_FILE`] and [`CATALOG_FILE`], both mode 0600;
    /// if they exist already, `build` fails unless
    /// [`replace_existing`](Self::replace_existing) is set.
    ///
    /// `dir` is made mode 0700 if missing. An existing `dir` must be the recorder's
    /// own: `build` refuses ([`Error::UnsafeDirectory`]) a directory owned by another
    /// user than the process's effective user, or writable by its group or by others
    /// (mode & 0o022), since another user could replace the recorder's files in it.
    /// Reading a recorder directory (`ringtrace decode DIR`,
    /// [`Trace::open`](crate::decode::Trace::open)) asks none of this.
    pub fn directory(mut self, dir: impl AsRef<Path>) -> Self {
        if let Kind::Flight { directory } = &mut self.kind {
            *directory = Some(dir.as_ref().into());
        }
        self
    }

    /// Removes a recorder directory's files left by an earlier run before making new ones.
    pub fn replace_existing(mut self, replace: bool) -> Self {
        self.replace = replace;
        self
    }

    /// Recorder directory: threads that can hold a ring at once, 1 to 4096 (default
    /// 256; `build` refuses another value with [`Error::Config`], whatever the
    /// recorder); the file takes this many rings. A thread that finds every ring taken
    /// by a live thread records nothing, and its events are counted
    /// ([`Stats::no_ring`](crate::Stats::no_ring)). A thread's ring is free again when
    /// it exits.
    pub fn max_threads(mut self, n: u32) -> Self {
        self.max_threads = n;
        self
    }

    /// A record's largest size in bytes (default 4 KiB, or what a smaller ring can
    /// hold; at least 64, at most what a ring can hold): values past it are dropped, and the record says how many.
    pub fn max_record_bytes(mut self, bytes: usize) -> Self {
        self.max_record = Some(bytes);
        self
    }

    /// A text value's largest size in bytes (`&str`, `Debug`, `Display` and error
    /// values; default 1 KiB, at most 65,535): longer text is cut on a character
    /// boundary and marked cut.
    pub fn max_value_bytes(mut self, bytes: usize) -> Self {
        self.max_value = bytes;
        self
    }

    /// Makes the rings (and files) and returns the layer to install and the handle
    /// that dumps, reports and finishes.
    ///
    /// Every setting is checked first ([`Error::Config`], or [`Error::Ring`] for a
    /// ring size that is not one): a build refused for a setting makes no file or
    /// directory. A build that fails later (a file that cannot be made or written)
    /// removes what it made: the stream's file; a recorder directory's files, and the
    /// directory and its parents where it made them (those left empty).
    pub fn build(self) -> Result<(RingLayer, Recorder), Error> {
        let clock = BestClock::new();
        let (sink, limits) = self.checked(clock)?;
        let process = Process::now();
        let (sink, catalog, drain_to) = match &self.kind {
            Kind::Flight { directory: None } => (sink, Catalog::default(), None),
            Kind::Flight { directory: Some(dir) } => {
                let missing = missing_dirs(dir);
                match self.make_directory(dir, clock, &process) {
                    Ok((ch, catalog)) => (Sink::Flight(ch), catalog, None),
                    Err(e) => {
                        remove_empty(&missing);
                        return Err(e);
                    }
                }
            }
            Kind::Stream { path } => {
                let out = files::create_new(path).map_err(|e| Error::io("creating the stream file", path, e))?;
                (sink, Catalog::default(), Some((out, path.clone())))
            }
        };
        let shared = Arc::new(Shared::new(sink, catalog, limits, process));
        let drain = match drain_to {
            Some((out, path)) => match Drain::start(shared.clone(), out, path.clone()) {
                Ok(drain) => Some(drain),
                Err(e) => {
                    // Made new by this build (O_EXCL) a moment ago, and empty.
                    let _ = std::fs::remove_file(&path);
                    return Err(e);
                }
            },
            None => None,
        };
        Ok((RingLayer { shared: shared.clone() }, Recorder::new(shared, drain, self.dir_path().map(Into::into))))
    }

    /// Checks every setting before anything is made, and makes the in-memory channel
    /// (a flight recorder's in a directory is made with its files, later: this one then
    /// only checks the ring size, through the code that makes the rings).
    fn checked(&self, clock: BestClock) -> Result<(Sink, Limits), Error> {
        if self.max_threads == 0 || self.max_threads > MAX_SLOTS {
            return Err(Error::Config(format!("max_threads {} is not 1 to {MAX_SLOTS}", self.max_threads)));
        }
        if let Some(n) = self.max_record.filter(|&n| n < MIN_RECORD_LIMIT) {
            return Err(Error::Config(format!("max_record_bytes {n} is under {MIN_RECORD_LIMIT}")));
        }
        if self.max_value == 0 || self.max_value > MAX_VALUE_LIMIT {
            return Err(Error::Config(format!("max_value_bytes {} is not 1 to {MAX_VALUE_LIMIT}", self.max_value)));
        }
        let sink = match self.kind {
            Kind::Flight { .. } => {
                Sink::Flight(Channel::<Overwrite, BestClock>::builder(self.per_thread).build(clock)?)
            }
            Kind::Stream { .. } => Sink::Stream(Channel::<Discard, BestClock>::builder(self.per_thread).build(clock)?),
        };
        let max_record = self.max_record.unwrap_or(DEFAULT_MAX_RECORD.min(sink.max_record_len()));
        if max_record > sink.max_record_len() {
            return Err(Error::Config(format!(
                "max_record_bytes {max_record} is over the {}-byte record a {}-byte ring holds",
                sink.max_record_len(),
                self.per_thread
            )));
        }
        Ok((sink, Limits { max_record, max_value: self.max_value }))
    }

    fn dir_path(&self) -> Option<&Path> {
        match &self.kind {
            Kind::Flight { directory: Some(d) } => Some(d),
            _ => None,
        }
    }

    fn make_directory(
        &self,
        dir: &Path,
        clock: BestClock,
        process: &Process,
    ) -> Result<(Channel<Overwrite, BestClock>, Catalog), Error> {
        let dir_fd = recorder_directory(dir)?;
        // The files are looked up, removed and made through the directory opened and
        // checked, not through its path again, which another user might change meanwhile.
        let (rings, catalog) = (dir.join(RINGS_FILE), dir.join(CATALOG_FILE));
        for (name, p) in [(RINGS_FILE, &rings), (CATALOG_FILE, &catalog)] {
            match fs::statat(&dir_fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(Error::io("looking for an earlier run's file", p, e.into())),
                Ok(_) if !self.replace => return Err(Error::Exists(p.clone())),
                Ok(_) => fs::unlinkat(&dir_fd, name, AtFlags::empty())
                    .map_err(|e| Error::io("removing an earlier run's file", p, e.into()))?,
            }
        }
        // The catalog first: a reader that finds the rings finds what names them.
        let flags =
            OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut f = File::from(
            fs::openat(&dir_fd, CATALOG_FILE, flags, Mode::from_raw_mode(files::FILE_MODE))
                .map_err(|e| Error::io("creating the catalog", &catalog, e.into()))?,
        );
        let rings_made = (|| {
            let mut head = file::header().to_vec();
            head.extend_from_slice(&file::encode_chunk(chunk::PROCESS, &process.encode()));
            f.write_all(&head).map_err(|e| Error::io("writing the catalog", &catalog, e))?;
            // The rings file is made by its path (new, mode 0600, never through a
            // symlink): it must have landed in the directory checked, where no other user
            // can make it. Nothing fails after it.
            let ch = Channel::<Overwrite, BestClock>::builder(self.per_thread)
                .max_producers(self.max_threads)
                .create(&rings, clock)?;
            if fs::statat(&dir_fd, RINGS_FILE, AtFlags::SYMLINK_NOFOLLOW).is_err() {
                return Err(Error::UnsafeDirectory {
                    path: dir.into(),
                    reason: "its path led to another directory while the recorder was being made".into(),
                });
            }
            Ok(ch)
        })();
        match rings_made {
            Ok(ch) => Ok((ch, Catalog::with_file(f))),
            Err(e) => {
                // The catalog this build made, through the directory checked.
                let _ = fs::unlinkat(&dir_fd, CATALOG_FILE, AtFlags::empty());
                Err(e)
            }
        }
    }
}

/// Opens a recorder directory to write in, made mode 0700 if missing; refuses one another
/// user could change the files of: owned by another user than this process's effective
/// one, or writable by its group or by others.
fn recorder_directory(dir: &Path) -> Result<OwnedFd, Error> {
    files::make_dir(dir).map_err(|e| Error::io("making the recorder directory", dir, e))?;
    // O_PATH: the descriptor names the directory for fstat and the *at calls, and
    // needs no read permission on it.
    let fd = fs::open(dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| Error::io("opening the recorder directory", dir, e.into()))?;
    let st = fs::fstat(&fd).map_err(|e| Error::io("reading the recorder directory", dir, e.into()))?;
    let me = rustix::process::geteuid().as_raw();
    let reason = if st.st_uid != me {
        format!("it is owned by uid {}, and this process runs as uid {me}", st.st_uid)
    } else if st.st_mode & 0o022 != 0 {
        format!("it is writable by its group or by others (mode {:04o})", st.st_mode & 0o7777)
    } else {
        return Ok(fd);
    };
    Err(Error::UnsafeDirectory { path: dir.into(), reason })
}

/// The directories of `dir`'s path that do not exist, `dir` first: those that making the
/// recorder directory makes.
fn missing_dirs(dir: &Path) -> Vec<PathBuf> {
    dir.ancestors()
        .filter(|d| !d.as_os_str().is_empty())
        .take_while(|d| std::fs::symlink_metadata(d).is_err())
        .map(Path::to_path_buf)
        .collect()
}

/// Removes the directories a failed build made, innermost first, where they are
/// empty (`remove_dir` removes no other), up to the first it cannot remove.
fn remove_empty(made: &[PathBuf]) {
    for d in made {
        if std::fs::remove_dir(d).is_err() {
            break;
        }
    }
}
