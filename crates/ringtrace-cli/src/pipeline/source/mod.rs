//! The pipeline's sources: what a SOURCE argument names ([`Spec`]), opened as a
//! [`RecordSource`]. One module per kind of source; [`open`] is the one place that
//! tells them apart.
//!
//! * `bpf-pin:PATH` (a map pinned in a bpffs) or `bpf-id:N` (a map id, as `bpftool map`
//!   lists them): a kernel BPF ring buffer map ([`bpf`]).
//! * `kafka://BROKERS/TOPIC`: a fleet's records in Kafka ([`kafka`], the `kafka`
//!   feature), read by `decode`, `export`, `tail` and `stat`.
//! * Otherwise a path, told apart as [`ringtrace::source::Kind::of`] says (the one rule
//!   the `ringtrace-ship` agent follows too): a `ringtrace-tracing` recorder directory
//!   ([`traced`]: its rings and catalog files in it; any other directory is refused), a
//!   channel file ([`channel`]: a header page, then one single-producer ring per slot),
//!   a snapshot file ([`snapshot`]: `Snapshot::write_to`, its checksums checked on
//!   opening), a ring file ([`ring`]: its header checked) or, by magic bytes the
//!   library does not know, a `ringtrace-tracing` trace file ([`traced`]: a dump or a
//!   stream); anything else is "not a ringtrace file", with its length and first
//!   bytes.
//!
//! Every file is read with `pread`, never mapped: a damaged or truncated file is an
//! error message, not a signal.

mod bpf;
mod channel;
#[cfg(feature = "kafka")]
mod kafka;
mod ring;
mod snapshot;
mod spec;
mod stop;
mod traced;

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

use ringtrace::inspect::{RingKind, RingMode};
use ringtrace::source::Kind;

use super::output::Sink;
use super::record::{Pick, Record, Shape, Timeline};
use crate::failure::Failure;
use crate::fleet::{Topic, Window};
use crate::output::ReportFormat;
pub use spec::Spec;

/// A source, opened: what it holds read, followed, consumed, exported or reported on.
/// Each command asks for what it does and says what it reads where a kind of source
/// cannot do it (`None`).
pub trait RecordSource {
    /// What kind of source this is, for messages: `a ring file`, `a channel file`...
    fn kind(&self) -> &'static str;

    /// What its records are.
    fn shape(&self) -> Shape {
        Shape::Raw
    }

    /// Whether it is a trace, whose records `decode` prints (a trace file, a recorder
    /// directory, a fleet's records).
    fn is_trace(&self) -> bool {
        false
    }

    /// Whether reading it takes its records away (a BPF map: `tail` consumes it).
    fn reading_consumes(&self) -> bool {
        false
    }

    /// What it holds now, without consuming any; what was damaged or skipped is said on
    /// stderr.
    fn read(&mut self) -> Result<Box<dyn Held + '_>, Failure>;

    /// Whether it is read as a stream ([`stream`](Self::stream)) rather than whole
    /// ([`read`](Self::read)): a `kafka://` topic, which need not fit in memory.
    fn streams(&self) -> bool {
        false
    }

    /// Hands `put` the `pick` of its records as it reads them (a source that
    /// [`streams`](Self::streams)); a failure of the read comes out as an `io::Error`
    /// carrying it ([`Failure::into_io`]). What was skipped is said on stderr.
    fn stream(&mut self, _pick: Pick, _put: &mut dyn FnMut(&Record<'_>) -> io::Result<()>) -> io::Result<()> {
        Err(Failure::msg(format!("{} is not read as a stream", self.kind())).into_io())
    }

    /// Follows it as it is written (`tail --follow`), or says why it cannot be.
    fn follow(&mut self) -> Result<Box<dyn Follow + '_>, Failure>;

    /// Consumes it into `out`, each record's space handed back once `out` took it; `None`
    /// for a source that has no consumer.
    fn consume(&mut self, _path: &Path, _opts: &Consume, _out: &mut dyn Sink) -> Option<Result<(), Failure>> {
        None
    }

    /// Read whole for the trace exporters; `None` for a source they do not read.
    fn timeline(&mut self) -> Option<Result<Timeline, Failure>> {
        None
    }

    /// A copy of it written to `file` in its own format (`snapshot -o` of a recorder
    /// directory: a trace file); `None` where a copy is its records written out.
    fn copy_to(&mut self, _file: &Path, _reverse: bool) -> Option<Result<(), Failure>> {
        None
    }

    /// The ring file to attach to as a producer or a consumer, reopened read-write from
    /// `path` (the very file that was opened): its kind, mode and descriptor.
    fn attach(&mut self, _path: &Path) -> Option<Result<(RingKind, RingMode, OwnedFd), Failure>> {
        None
    }

    /// `stat`: what it is and holds (`path`: the argument as given).
    fn stat(&mut self, path: &Path, format: ReportFormat) -> Result<(), Failure>;
}

/// What a source holds, read.
pub trait Held {
    /// Its records, oldest first.
    fn records(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_>;

    /// Its records newest first, markers left out (see [`Record::is_marker`]).
    fn records_rev(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        let all: Vec<_> = self.records().filter(|r| !r.is_marker()).collect();
        Box::new(all.into_iter().rev())
    }

    /// Says on stderr what the reading skipped, once its records are written.
    fn finish(&self) {}
}

/// A source being followed.
pub trait Follow {
    /// The records it held when the follow began, oldest first.
    fn first(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_>;

    /// Waits a while, then writes what was committed since into `out`; how many.
    fn poll(&mut self, out: &mut dyn Sink) -> Result<usize, Failure>;

    /// Writes into `out` what the follow still holds as it ends (a topic put in time
    /// order); how many.
    fn drain(&mut self, _out: &mut dyn Sink) -> Result<usize, Failure> {
        Ok(0)
    }

    /// Says on stderr what the follow skipped, once it ends.
    fn finish(&self) {}
}

/// What a consumer was asked to do.
#[derive(Debug)]
pub struct Consume {
    /// Stop after this many records.
    pub count: Option<u64>,
    /// Go on when every producer has gone.
    pub follow: bool,
    /// Stop after this long without a record.
    pub timeout: Option<Duration>,
    /// Whose ring files to attach to.
    pub owners: ringtrace::Owners,
}

/// Parses and opens a SOURCE argument; every error names it. A `kafka://` topic is
/// refused: [`open_topic`] opens one for the commands that read it.
pub fn open(arg: &Path) -> Result<Box<dyn RecordSource>, Failure> {
    open_spec(Spec::parse(arg.as_os_str())?).map_err(|e| e.about(arg))
}

/// Opens a SOURCE argument as a trace, for `decode` and `export`: as [`open`] does, but
/// a channel file is read as a trace. A recorder directory's rings file
/// (`DIR/rings.chan` with `DIR/catalog.rtt` beside it) is the directory, read with its
/// catalog; any other channel file holds raw records, each an event on its slot's track
/// (`ringtrace_tracing::decode::raw`).
pub fn open_trace(arg: &Path) -> Result<Box<dyn RecordSource>, Failure> {
    let opened = || -> Result<Box<dyn RecordSource>, Failure> {
        let spec = Spec::parse(arg.as_os_str())?;
        let Spec::File(path) = &spec else { return open_spec(spec) };
        if kind_of(path)? != Kind::Channel {
            return open_spec(spec);
        }
        match recorder_of(path) {
            Some(dir) => Ok(Box::new(traced::open_dir(dir))),
            None => Ok(Box::new(traced::open_channel(path.clone()))),
        }
    };
    opened().map_err(|e| e.about(arg))
}

/// The recorder directory whose rings file `path` is: its parent, when `path` is named
/// [`RINGS_FILE`](ringtrace_tracing::RINGS_FILE) and that parent is a recorder
/// directory ([`Kind::RecorderDir`]).
pub fn recorder_of(path: &Path) -> Option<std::path::PathBuf> {
    if path.file_name()? != ringtrace_tracing::RINGS_FILE {
        return None;
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    matches!(Kind::of(&dir), Ok(Kind::RecorderDir)).then_some(dir)
}

/// The registry: a source of each kind, by what its argument names.
fn open_spec(spec: Spec) -> Result<Box<dyn RecordSource>, Failure> {
    Ok(match spec {
        Spec::BpfPin(_) | Spec::BpfId(_) => Box::new(bpf::open(&spec)?),
        Spec::Kafka(_) => return Err(Failure::msg("a kafka:// topic is read by decode, export, tail and stat")),
        // `Kind::of` refuses what is neither a directory nor a regular file (a FIFO
        // would block the magic reads).
        Spec::File(path) => match kind_of(&path)? {
            Kind::RecorderDir => Box::new(traced::open_dir(path)),
            Kind::Directory => return Err(traced::not_a_recorder(&path)),
            Kind::Channel => Box::new(channel::open(path)?),
            Kind::Snapshot => Box::new(snapshot::open(&path)?),
            // A ring file, or a channel file of another format version (said so).
            Kind::Ring => Box::new(ring::open(path)?),
            Kind::Unknown(head) if head.bytes == ringtrace_tracing::TRACE_MAGIC => Box::new(traced::open_file(path)),
            Kind::Unknown(head) if head.bytes == crate::fleet::STATE_MAGIC => {
                return Err(Failure::msg("a ringtrace-ship agent state file: stat reads it"))
            }
            Kind::Unknown(head) => return Err(spec::not_ours(&head)),
            _ => return Err(Failure::msg("a kind of file this ringtrace does not read")),
        },
    })
}

/// What the file or directory at `path` is ([`Kind::of`]).
pub fn kind_of(path: &Path) -> Result<Kind, Failure> {
    Kind::of(path).map_err(|e| Failure::msg(crate::failure::chain(&e)))
}

/// A `kafka://` topic's records in `window`, as a source.
pub fn open_topic(topic: Topic, window: Window) -> Result<Box<dyn RecordSource>, Failure> {
    #[cfg(feature = "kafka")]
    {
        Ok(Box::new(kafka::Kafka::new(topic, window)))
    }
    #[cfg(not(feature = "kafka"))]
    {
        let _ = window;
        Err(Failure::msg(format!(
            "kafka://{}/{}: this ringtrace was built without Kafka. {} (ringtrace-ship read reads the topic)",
            topic.brokers,
            topic.topic,
            crate::fleet::KAFKA_FEATURE
        )))
    }
}
