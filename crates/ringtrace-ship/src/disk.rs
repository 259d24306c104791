//! What the agent's two kinds of file (the state file and the spool's rounds) share:
//! little-endian fields read from untrusted bytes, every read checked against the
//! bytes left, and a new file written whole and flushed to disk before it is renamed
//! into place.

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
    /// What the format's own checks refuse: a bad magic or version, a length past its
    /// limit, names out of order, bytes after the end (said in full).
    #[error("{0}")]
    Format(String),
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
