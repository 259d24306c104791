//! What the agent's two kinds of file (the state file and the spool's rounds) share:
//! little-endian fields read from untrusted bytes, every read checked against the
//! bytes left, and a new file written whole and flushed to disk before it is renamed
//! into place.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A cursor over bytes (a file's, before its checksum); every read checks the bytes
/// left and says what it wanted where when they run out.
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Damage> {
        if n > self.remaining() {
            return Err(Damage::Truncated { what: what.into(), needs: n, at: self.pos, left: self.remaining() });
        }
        let taken = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(taken)
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, Damage> {
        let mut b = [0; 4];
        b.copy_from_slice(self.take(4, what)?);
        Ok(u32::from_le_bytes(b))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, Damage> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(b))
    }

    /// `n` bytes of UTF-8 text (`what` names it in the error).
    pub(crate) fn text(&mut self, n: usize, what: &str) -> Result<String, Damage> {
        String::from_utf8(self.take(n, what)?.to_vec()).map_err(|source| Damage::NotUtf8 { what: what.into(), source })
    }
}

/// A length as stored; one over `u32::MAX` (which the writers refuse or never make)
/// saturates.
pub(crate) fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// The CRC32C stored in a file's last 4 bytes against the one of the bytes before:
/// the bytes before, or what differs.
pub(crate) fn checked(bytes: &[u8]) -> Result<&[u8], Damage> {
    let Some(at) = bytes.len().checked_sub(4) else { return Err(Damage::Short(bytes.len())) };
    let (body, crc) = bytes.split_at(at);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let computed = crc32c::crc32c(body);
    if stored != computed {
        return Err(Damage::Checksum { stored, computed });
    }
    Ok(body)
}

/// What is wrong in the bytes of a state or spool file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Damage {
    /// A field runs past the end.
    #[error("truncated: {what} needs {needs} bytes at offset {at}, {left} left")]
    Truncated {
        /// The field.
        what: String,
        /// Its bytes.
        needs: usize,
        /// Where it starts.
        at: usize,
        /// The bytes left there.
        left: usize,
    },
    /// Too short for even a checksum.
    #[error("truncated: {0} bytes")]
    Short(usize),
    /// The stored checksum is not the bytes'.
    #[error("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum {
        /// The stored CRC32C.
        stored: u32,
        /// The bytes'.
        computed: u32,
    },
    /// A name is not UTF-8.
    #[error("{what} is not UTF-8 ({source})")]
    NotUtf8 {
        /// The name.
        what: String,
        /// Where it is not.
        #[source]
        source: std::string::FromUtf8Error,
    },
    /// Not a regular file (a directory, a device, ...).
    #[error("not a regular file")]
    NotRegular,
    /// A path with no file name to write to.
    #[error("not a file name")]
    NotFileName,
    /// Larger than its kind of file may be.
    #[error("{len} bytes, more than {limit}")]
    TooBig {
        /// Its length.
        len: u64,
        /// The limit, named (`the 1 GiB limit`).
        limit: &'static str,
    },
    /// Grew past its limit while it was read.
    #[error("grew past {limit} while read")]
    Grew {
        /// The limit, named.
        limit: &'static str,
    },
    /// Shorter than an empty file of its kind.
    #[error("truncated: {len} bytes, fewer than the {min} of {empty}")]
    TooShort {
        /// Its length.
        len: usize,
        /// An empty file's.
        min: usize,
        /// The empty file (`an empty state`).
        empty: &'static str,
    },
    /// Not the magic of its kind of file.
    #[error("bad magic \"{}\", not a ringtrace-ship {kind} file", .found.escape_ascii())]
    Magic {
        /// The bytes found instead.
        found: Vec<u8>,
        /// The kind (`state`, `spool`).
        kind: &'static str,
    },
    /// A version this program does not read.
    #[error("unsupported version {found} (this agent reads {reads})")]
    Version {
        /// The file's.
        found: u32,
        /// Those this program reads.
        reads: Versions,
    },
    /// A version earlier programs wrote that this one no longer reads.
    #[error(
        "version {found}, written by an earlier ringtrace-ship (this one reads {reads}): move it aside to start \
         the sources over from their rings' positions"
    )]
    Retired {
        /// The file's.
        found: u32,
        /// Those this program reads.
        reads: Versions,
    },
    /// The spool's head past its tail.
    #[error("the spool's head {head} is past its tail {tail}")]
    SpoolOrder {
        /// The oldest pending round.
        head: u64,
        /// One past the newest.
        tail: u64,
    },
    /// A name longer than its limit.
    #[error("{what} of {len} bytes, more than {max}")]
    NameTooLong {
        /// Whose name.
        what: LongName,
        /// Its length.
        len: usize,
        /// Its limit.
        max: usize,
    },
    /// More sources than a file holds.
    #[error("{count} sources, more than a state file holds")]
    TooMany {
        /// The sources.
        count: usize,
    },
    /// A count that the bytes left cannot hold.
    #[error("{count} {what} announced, but only {remaining} bytes follow")]
    Announced {
        /// The count.
        count: usize,
        /// What it counts (`sources`, `parts`).
        what: &'static str,
        /// The bytes left.
        remaining: usize,
    },
    /// A part's message count that the bytes left cannot hold.
    #[error("part #{part}: {count} messages announced, but only {remaining} bytes follow")]
    Messages {
        /// The part's index.
        part: usize,
        /// The count.
        count: usize,
        /// The bytes left.
        remaining: usize,
    },
    /// A message longer than its limit.
    #[error("part #{part}, message #{message}: {len} bytes, more than {max}")]
    MessageTooBig {
        /// The part's index.
        part: usize,
        /// The message's, in its part.
        message: usize,
        /// Its length.
        len: usize,
        /// Its limit.
        max: usize,
    },
    /// A source's name not after the one before it.
    #[error("source {}{name:?} after {after:?}: unsorted or repeated", At(*.index))]
    Unsorted {
        /// The entry's index, in a file (none in a state being stored).
        index: Option<usize>,
        /// Its name.
        name: String,
        /// The name before it.
        after: String,
    },
    /// Bytes after the end.
    #[error("{bytes} bytes after {after}")]
    Trailing {
        /// How many.
        bytes: usize,
        /// The end (`the last entry`).
        after: &'static str,
    },
    /// A spool file holding another round than its name says.
    #[error("round {serial} of host {host:?} where round {expected} of {expected_host:?} was expected")]
    Misplaced {
        /// The round's serial.
        serial: u64,
        /// Its host.
        host: String,
        /// The serial its file's name says.
        expected: u64,
        /// The spool's host.
        expected_host: String,
    },
}

/// The versions of a file a program reads, from `first` to `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    /// The oldest.
    pub first: u32,
    /// The newest.
    pub last: u32,
}

impl fmt::Display for Versions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "version {}", self.last)
        } else {
            write!(f, "versions {} to {}", self.first, self.last)
        }
    }
}

/// Whose name is too long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LongName {
    /// The host's.
    Host,
    /// A source's, in a state being stored.
    Source,
    /// The source's at this index in a state file.
    SourceAt(usize),
    /// The part's at this index in a spool file.
    PartAt(usize),
}

impl fmt::Display for LongName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LongName::Host => f.write_str("host name"),
            LongName::Source => f.write_str("source name"),
            LongName::SourceAt(i) => write!(f, "source #{i}: name"),
            LongName::PartAt(i) => write!(f, "part #{i}: name"),
        }
    }
}

/// An entry's index as its message's prefix: `#3: `, or nothing.
struct At(Option<usize>);

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(i) => write!(f, "#{i}: "),
            None => Ok(()),
        }
    }
}

/// Creates `tmp` exclusively with mode 0600 (removing a stale one of the same name
/// first), writes `bytes` and flushes them to disk.
pub(crate) fn write_new(tmp: &Path, bytes: &[u8]) -> io::Result<()> {
    let create = || OpenOptions::new().write(true).create_new(true).mode(0o600).open(tmp);
    let mut file = match create() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(tmp)?;
            create()
        }
        created => created,
    }?;
    file.write_all(bytes)?;
    file.sync_all()
}
