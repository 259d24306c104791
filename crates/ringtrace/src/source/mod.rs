//! What a SOURCE argument names: the one grammar of the `ringtrace` command and the
//! `ringtrace-ship` agent, so that both take the same arguments for the same things.
//!
//! * `bpf-pin:PATH`: a BPF ring buffer map pinned in a bpffs ([`Spec::BpfPin`]).
//! * `bpf-id:N`: a BPF ring buffer map by id, as `bpftool map` lists them
//!   ([`Spec::BpfId`]).
//! * Anything else is a path ([`Spec::Path`]), told apart by [`Kind::of`]:
//!   - a directory holding a recorder's rings file and catalog file, both regular files
//!     ([`RECORDER_RINGS`], [`RECORDER_CATALOG`]: `ringtrace-tracing`'s recorder
//!     directory) is [`Kind::RecorderDir`]; any other directory is
//!     [`Kind::Directory`], never taken for a recorder directory;
//!   - a regular file by its first 8 bytes: a channel file ([`Kind::Channel`]), a
//!     snapshot file ([`Kind::Snapshot`]) or a ring file ([`Kind::Ring`], also for a
//!     channel file of another format version, which opening it explains); any other
//!     first bytes are [`Kind::Unknown`], with those bytes, for a caller that knows
//!     formats of its own (a `ringtrace-tracing` trace file) to test.
//!
//! Schemes of the callers' own (`kafka://`) are theirs to test before parsing: this
//! library knows no Kafka, and takes such an argument for a path.
//!
//! A map named by a [`Spec`] is opened with [`Spec::open_bpf`]. Consuming it takes the
//! map's reader lock (see [`BpfRingBuf`]): the command and the agent refuse each other.
//!
//! Whatever was opened is read through one interface, [`Reader`]: every reader of the
//! crate, synchronously (the records available now, one taken as an owned item, whether
//! its writers are gone); `ringtrace::tokio::Source` (feature `tokio`) is its async
//! form.
//!
//! ```
//! use ringtrace::source::{Kind, Spec};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! assert_eq!(Spec::parse("bpf-id:42")?, Spec::BpfId(42));
//! assert!(Spec::parse("bpf-id:x").is_err());
//!
//! let dir = std::env::temp_dir().join(format!("ringtrace-source-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let path = dir.join("app.ring");
//! let ring = ringtrace::MpscRing::builder(1 << 16).create(&path)?;
//! let Spec::Path(named) = Spec::parse(&path)? else { unreachable!() };
//! assert_eq!(Kind::of(&named)?, Kind::Ring);
//! assert_eq!(Kind::of(&dir)?, Kind::Directory, "no rings and catalog: not a recorder's");
//! std::fs::write(dir.join("notes.txt"), "hello")?;
//! let Kind::Unknown(head) = Kind::of(&dir.join("notes.txt"))? else { unreachable!() };
//! assert_eq!(head.to_string(), "it is 5 bytes and starts with 68 65 6c 6c 6f (\"hello\")");
//! # drop(ring);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(()) }
//! ```

mod items;
mod reader;

pub use items::{ChannelItem, PerfItem};
pub use reader::Reader;

use std::ffi::OsStr;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::error::KernelError;
use crate::kernel::bpf::BpfRingBuf;

/// The rings file of a `ringtrace-tracing` recorder directory (its `RINGS_FILE`).
pub const RECORDER_RINGS: &str = "rings.chan";
/// The catalog file of a `ringtrace-tracing` recorder directory (its `CATALOG_FILE`).
pub const RECORDER_CATALOG: &str = "catalog.rtt";

/// What a SOURCE argument names, before it is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// `bpf-pin:PATH`: a map pinned in a bpffs.
    BpfPin(PathBuf),
    /// `bpf-id:N`: a map by id.
    BpfId(u32),
    /// A file or a directory: see [`Kind::of`].
    Path(PathBuf),
}

impl Spec {
    /// Parses a SOURCE argument. Only `bpf-pin:` with nothing after it and a `bpf-id:`
    /// that is not a `u32` are errors; everything else is a path (an argument that is
    /// not UTF-8 too).
    pub fn parse(arg: impl AsRef<OsStr>) -> Result<Spec, SourceError> {
        let arg = arg.as_ref();
        let Some(s) = arg.to_str() else { return Ok(Spec::Path(arg.into())) };
        if let Some(p) = s.strip_prefix("bpf-pin:") {
            if p.is_empty() {
                return Err(SourceError::EmptyPin);
            }
            return Ok(Spec::BpfPin(PathBuf::from(p)));
        }
        if let Some(n) = s.strip_prefix("bpf-id:") {
            return n.parse().map(Spec::BpfId).map_err(|_| SourceError::BadMapId(n.to_string()));
        }
        Ok(Spec::Path(arg.into()))
    }

    /// Opens the map a `bpf-pin:` or `bpf-id:` names; `None` for a path. The map's
    /// reader lock is not taken yet: its first consuming call (or
    /// [`BpfRingBuf::lock_reader`]) takes it, and a copy takes none.
    pub fn open_bpf(&self) -> Option<Result<BpfRingBuf, KernelError>> {
        match self {
            Spec::BpfPin(path) => Some(BpfRingBuf::open_pinned(path)),
            Spec::BpfId(id) => Some(BpfRingBuf::open_id(*id)),
            Spec::Path(_) => None,
        }
    }
}

/// What a path holds, by the rules of the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A ring file (or a channel file of a format version this library does not read,
    /// which opening it as a ring file explains).
    Ring,
    /// A channel file.
    Channel,
    /// A snapshot file (`Snapshot::write_to`).
    Snapshot,
    /// A `ringtrace-tracing` recorder directory: [`RECORDER_RINGS`] and
    /// [`RECORDER_CATALOG`] are regular files in it.
    RecorderDir,
    /// Any other directory.
    Directory,
    /// A regular file whose first bytes are no magic of this library's.
    Unknown(Head),
}

/// The first bytes of a file, and its length: what [`Kind::Unknown`] found. Its
/// `Display` says what it is: `it is 5 bytes and starts with 68 65 6c 6c 6f ("hello")`,
/// or `the file is empty`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The first 8 bytes (zeroes past the end of a shorter file).
    pub bytes: [u8; 8],
    /// The file's length.
    pub len: u64,
}

impl std::fmt::Display for Head {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.len == 0 {
            return f.write_str("the file is empty");
        }
        let shown = &self.bytes[..self.len.min(8) as usize];
        let hex: Vec<String> = shown.iter().map(|b| format!("{b:02x}")).collect();
        let text: String = shown.iter().map(|&b| if b.is_ascii_graphic() { b as char } else { '.' }).collect();
        write!(f, "it is {} bytes and starts with {} ({text:?})", self.len, hex.join(" "))
    }
}

impl Kind {
    /// What the file or directory at `path` is. Symbolic links are followed. Errors if
    /// it cannot be read, or is neither a directory nor a regular file (a FIFO would
    /// block the read of its first bytes; the error says what it is).
    pub fn of(path: &Path) -> Result<Kind, SourceError> {
        let io = |what| move |source| SourceError::Io { what, path: path.to_path_buf(), source };
        let meta = std::fs::metadata(path).map_err(io("open"))?;
        if meta.is_dir() {
            let regular = |name| path.join(name).metadata().is_ok_and(|m| m.is_file());
            return Ok(if regular(RECORDER_RINGS) && regular(RECORDER_CATALOG) {
                Kind::RecorderDir
            } else {
                Kind::Directory
            });
        }
        // Refuses what is not a regular file, saying what it is.
        if crate::inspect::channel::is_channel_file(path)? {
            return Ok(Kind::Channel);
        }
        let head = first_bytes(path).map_err(io("read"))?;
        Ok(if head.bytes.starts_with(b"RTSNAP") {
            Kind::Snapshot
        } else if head.bytes == crate::format::control::MAGIC.to_le_bytes() || head.bytes.starts_with(b"RTCHAN") {
            Kind::Ring
        } else {
            Kind::Unknown(head)
        })
    }
}

/// The first 8 bytes of `path` and its length.
fn first_bytes(path: &Path) -> io::Result<Head> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut bytes = [0u8; 8];
    let mut got = 0;
    let mut reader = file.take(8);
    // Bounded: each step reads at least one of the 8 bytes, or ends.
    while got < 8 {
        match reader.read(&mut bytes[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Head { bytes, len })
}

/// Why a SOURCE argument cannot be parsed, or its path told apart.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// `bpf-pin:` with no path.
    #[error("bpf-pin: needs a path, as in bpf-pin:/sys/fs/bpf/events")]
    EmptyPin,
    /// `bpf-id:` with something else than a map id.
    #[error("bpf-id:{0}: a map id is a number from 0 to 4294967295, as in bpf-id:42")]
    BadMapId(String),
    /// The path cannot be opened or read.
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        /// What failed: `open`, `read`.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The path is not a regular file nor a directory, or its first bytes cannot be
    /// read (the message names it).
    #[error(transparent)]
    Format(#[from] crate::error::FormatError),
}

#[cfg(test)]
mod tests;
