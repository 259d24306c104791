//! What a command reads: the one place that works out what a SOURCE argument names and
//! opens it.
//!
//! * `bpf-pin:PATH` (a map pinned in a bpffs) or `bpf-id:N` (a map id, as `bpftool map`
//!   lists them): a kernel BPF ring buffer map.
//! * `kafka://BROKERS/TOPIC`: a fleet's records in Kafka, which `decode`, `export`,
//!   `tail` and `stat` read through [`crate::fleet`] rather than [`Source`].
//! * A directory: a `ringtrace-tracing` recorder directory (its rings and catalog).
//! * Otherwise a path, told apart by its first bytes: a `ringtrace-tracing` trace file
//!   (a dump or a stream), a channel file (a header page, then one single-producer ring
//!   per slot), a snapshot file (`Snapshot::write_to`, its checksums checked on
//!   opening) or a ring file (its header checked); anything else is "not a ringtrace
//!   file", with its length and first bytes.
//!
//! Every file is read with `pread`, never mapped: a damaged or truncated file is an
//! error message, not a signal.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use ringtrace::format::channel::CHANNEL_MAGIC;
use ringtrace::inspect::channel::{is_channel_file, ChannelFile};
use ringtrace::inspect::{FormatError, RingFile};
use ringtrace::kernel::bpf::BpfRingBuf;
use ringtrace::Snapshot;

use crate::failure::{chain, Failure};
use crate::traced::Traced;
use ringtrace_tracing::TRACE_MAGIC;

/// A source, opened.
pub enum Source {
    /// A ring file.
    Ring(RingFile<File>),
    /// A channel file.
    Channel(ChannelFile<File>),
    /// A snapshot file, read whole and its checksums checked.
    Snapshot(Snapshot),
    /// A kernel BPF ring buffer map (`bpf-pin:PATH` or `bpf-id:N`).
    Bpf(BpfRingBuf),
    /// A `ringtrace-tracing` trace: a trace file or a recorder directory (read by the
    /// command that needs it).
    Traced(Traced),
}

/// What a SOURCE argument names, before it is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// A file: ring, channel or snapshot file (told by its first bytes).
    File(PathBuf),
    /// `bpf-pin:PATH`.
    BpfPin(PathBuf),
    /// `bpf-id:N`.
    BpfId(u32),
    /// `kafka://BROKERS/TOPIC`: a fleet's records (see [`crate::fleet`]).
    Kafka(crate::fleet::Topic),
}

impl Spec {
    /// Parses a SOURCE argument.
    pub fn parse(arg: &OsStr) -> Result<Spec, Failure> {
        let Some(s) = arg.to_str() else { return Ok(Spec::File(arg.into())) };
        if let Some(rest) = s.strip_prefix(crate::fleet::SCHEME) {
            return crate::fleet::Topic::parse(rest).map(Spec::Kafka);
        }
        if let Some(p) = s.strip_prefix("bpf-pin:") {
            if p.is_empty() {
                return Err(Failure::msg("bpf-pin: needs a path, as in bpf-pin:/sys/fs/bpf/events"));
            }
            return Ok(Spec::BpfPin(PathBuf::from(p)));
        }
        if let Some(n) = s.strip_prefix("bpf-id:") {
            return n.parse().map(Spec::BpfId).map_err(|_| {
                Failure::msg(format!("bpf-id:{n}: a map id is a number from 0 to {}, as in bpf-id:42", u32::MAX))
            });
        }
        Ok(Spec::File(arg.into()))
    }
}

impl Source {
    /// Parses and opens a SOURCE argument; every error names it.
    pub fn open(arg: &Path) -> Result<Source, Failure> {
        Self::open_spec(Spec::parse(arg.as_os_str())?).map_err(|e| e.about(arg))
    }

    fn open_spec(spec: Spec) -> Result<Source, Failure> {
        match spec {
            Spec::BpfPin(p) => BpfRingBuf::open_pinned(p).map(Source::Bpf).map_err(|e| Failure::msg(chain(&e))),
            Spec::BpfId(id) => BpfRingBuf::open_id(id).map(Source::Bpf).map_err(|e| Failure::msg(chain(&e))),
            Spec::Kafka(_) => Err(Failure::msg("a kafka:// topic is read by decode, export, tail and stat")),
            Spec::File(path) => {
                if path.is_dir() {
                    return if path.join(ringtrace_tracing::RINGS_FILE).exists() {
                        Ok(Source::Traced(Traced::Dir(path)))
                    } else {
                        Err(Failure::msg(format!(
                            "{} is a directory, not a regular file, nor a recorder directory (it has no {})",
                            path.display(),
                            ringtrace_tracing::RINGS_FILE
                        )))
                    };
                }
                // `is_channel_file` refuses what is not a regular file (a FIFO would block
                // the magic reads below).
                if is_channel_file(&path)? {
                    return open_channel(&path).map(Source::Channel);
                }
                let (head, len) = first_bytes(&path)?;
                if head == TRACE_MAGIC {
                    Ok(Source::Traced(Traced::File(path)))
                } else if head == crate::fleet::STATE_MAGIC {
                    Err(Failure::msg("a ringtrace-ship agent state file: stat reads it"))
                } else if head.starts_with(b"RTSNAP") {
                    read_snapshot(&path).map(Source::Snapshot)
                } else if head == ringtrace::format::control::MAGIC.to_le_bytes() || head.starts_with(b"RTCHAN") {
                    // A ring file, or a channel file of another format version (said so).
                    open_ring(&path).map(Source::Ring)
                } else {
                    Err(not_ours(&head, len))
                }
            }
        }
    }

    /// What kind of source this is, for messages: `a ring file`, `a channel file`...
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Ring(_) => "a ring file",
            Source::Channel(_) => "a channel file",
            Source::Snapshot(_) => "a snapshot file",
            Source::Bpf(_) => "a BPF ring buffer map",
            Source::Traced(Traced::Dir(_)) => "a recorder directory",
            Source::Traced(Traced::File(_)) => "a trace file",
        }
    }
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind())
    }
}

/// The first 8 bytes of `path` (zeroes past its end) and its length.
pub fn first_bytes(path: &Path) -> Result<([u8; 8], u64), Failure> {
    let err = |e: std::io::Error| Failure::msg(format!("cannot read {}: {e}", path.display()));
    let file = File::open(path).map_err(err)?;
    let len = file.metadata().map_err(err)?.len();
    let mut head = [0u8; 8];
    let mut got = 0;
    let mut reader = file.take(8);
    while got < 8 {
        match reader.read(&mut head[got..]).map_err(err)? {
            0 => break,
            n => got += n,
        }
    }
    Ok((head, len))
}

/// What a file none of whose magics match is said to be.
fn not_ours(head: &[u8; 8], len: u64) -> Failure {
    const WHAT: &str = "not a ringtrace file (ring, channel, snapshot or trace)";
    if len == 0 {
        return Failure::msg(format!("{WHAT}: the file is empty"));
    }
    let shown = &head[..len.min(8) as usize];
    let hex: Vec<String> = shown.iter().map(|b| format!("{b:02x}")).collect();
    let text: String = shown.iter().map(|&b| if b.is_ascii_graphic() { b as char } else { '.' }).collect();
    Failure::msg(format!("{WHAT}: it is {len} bytes and starts with {} ({text:?})", hex.join(" ")))
}

fn read_snapshot(path: &Path) -> Result<Snapshot, Failure> {
    let file = File::open(path).map_err(|e| Failure::msg(format!("cannot open {}: {e}", path.display())))?;
    Snapshot::read_from(BufReader::new(file)).map_err(|e| Failure::msg(format!("{}: {}", path.display(), chain(&e))))
}

/// Opens a ring file; a file whose magic is a channel magic of another version is
/// reported as such rather than as "not a ring file".
fn open_ring(path: &Path) -> Result<RingFile<File>, Failure> {
    RingFile::open(path).map_err(|e| match e {
        FormatError::BadMagic { found } if found.to_le_bytes()[..7] == CHANNEL_MAGIC.to_le_bytes()[..7] => {
            Failure::msg(format!(
                "channel file format {} is not supported (magic is {found:#018x}; this ringtrace reads format {})",
                found.to_le_bytes()[7],
                CHANNEL_MAGIC.to_le_bytes()[7]
            ))
        }
        e => e.into(),
    })
}

/// Opens a channel file, its header checked (the library's messages say "ring
/// header" where a channel's header is meant).
fn open_channel(path: &Path) -> Result<ChannelFile<File>, Failure> {
    ChannelFile::open(path).map_err(|e| {
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
    })
}

/// The ring file at `path` opened read-write to attach to: the very file that was
/// inspected as `inspected` (a name pointed at another file since is refused).
pub fn reopen(path: &Path, inspected: &File) -> Result<std::os::fd::OwnedFd, Failure> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Spec, Failure> {
        Spec::parse(OsStr::new(s))
    }

    #[test]
    fn sources_parse() {
        assert_eq!(parse("bpf-id:42").unwrap(), Spec::BpfId(42));
        assert_eq!(parse("bpf-pin:/sys/fs/bpf/x").unwrap(), Spec::BpfPin("/sys/fs/bpf/x".into()));
        assert_eq!(parse("/dev/shm/app.ring").unwrap(), Spec::File("/dev/shm/app.ring".into()));
        assert!(parse("bpf-id:x").is_err());
        assert!(parse("bpf-id:-1").is_err());
        assert!(parse("bpf-pin:").is_err());
    }
}
