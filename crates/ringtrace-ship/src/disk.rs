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

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if n > self.remaining() {
            return Err(format!("truncated: {what} needs {n} bytes at offset {}, {} left", self.pos, self.remaining()));
        }
        let taken = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(taken)
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, String> {
        let mut b = [0; 4];
        b.copy_from_slice(self.take(4, what)?);
        Ok(u32::from_le_bytes(b))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, String> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(b))
    }

    /// `n` bytes of UTF-8 text (`what` names it in the error).
    pub(crate) fn text(&mut self, n: usize, what: &str) -> Result<String, String> {
        String::from_utf8(self.take(n, what)?.to_vec()).map_err(|e| format!("{what} is not UTF-8 ({e})"))
    }
}

/// A length as stored; one over `u32::MAX` (which the writers refuse or never make)
/// saturates.
pub(crate) fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// The CRC32C stored in a file's last 4 bytes against the one of the bytes before:
/// the bytes before, or what differs.
pub(crate) fn checked(bytes: &[u8]) -> Result<&[u8], String> {
    let Some(at) = bytes.len().checked_sub(4) else { return Err(format!("truncated: {} bytes", bytes.len())) };
    let (body, crc) = bytes.split_at(at);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let computed = crc32c::crc32c(body);
    if stored != computed {
        return Err(format!("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"));
    }
    Ok(body)
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
