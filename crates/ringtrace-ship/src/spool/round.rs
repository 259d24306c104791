//! A spooled round's file: its bytes, and their checked parsing.

use super::error::SpoolError;
use super::layout::{CRC, HEADER, MAGIC, MAX_HOST, MAX_MESSAGE, MAX_NAME, PART, VERSION};
use crate::disk::{self, len_u32, Cursor, Damage, LongName, Versions};

/// One source's share of a spooled round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpoolPart {
    /// The source's name (the key's second half).
    pub source: String,
    /// Records the messages hold, markers included.
    pub records: u64,
    /// The batches, as sent.
    pub messages: Vec<Vec<u8>>,
}

/// A round kept in the spool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpoolRound {
    /// The host the round's records come from.
    pub host: String,
    /// The round's place in the spool (its file's name).
    pub serial: u64,
    /// The round's sources with records, in the order they were read.
    pub parts: Vec<SpoolPart>,
}

impl SpoolRound {
    /// The bytes of the file (see the [module documentation](crate::spool)).
    pub fn encode(&self) -> Vec<u8> {
        let len: usize = self
            .parts
            .iter()
            .map(|p| PART + p.source.len() + p.messages.iter().map(|m| 4 + m.len()).sum::<usize>())
            .sum();
        let mut out = Vec::with_capacity(HEADER + self.host.len() + len + CRC);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&len_u32(self.host.len()).to_le_bytes());
        out.extend_from_slice(&self.serial.to_le_bytes());
        out.extend_from_slice(&len_u32(self.parts.len()).to_le_bytes());
        out.extend_from_slice(self.host.as_bytes());
        for p in &self.parts {
            out.extend_from_slice(&len_u32(p.source.len()).to_le_bytes());
            out.extend_from_slice(&p.records.to_le_bytes());
            out.extend_from_slice(&len_u32(p.messages.len()).to_le_bytes());
            out.extend_from_slice(p.source.as_bytes());
            for m in &p.messages {
                out.extend_from_slice(&len_u32(m.len()).to_le_bytes());
                out.extend_from_slice(m);
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Parses a file's bytes, refusing ([`SpoolError::Damaged`], saying what is wrong)
    /// a bad magic, version or checksum, a length past the end or over its limit, a
    /// name that is not UTF-8, and bytes after the last part. Never panics, and
    /// allocates no more than the bytes given hold.
    pub fn decode(bytes: &[u8]) -> Result<SpoolRound, SpoolError> {
        Self::parse(bytes).map_err(|damage| SpoolError::Damaged { path: None, damage })
    }

    fn parse(bytes: &[u8]) -> Result<SpoolRound, Damage> {
        if bytes.len() < HEADER + CRC {
            return Err(Damage::TooShort { len: bytes.len(), min: HEADER + CRC, empty: "an empty round" });
        }
        let mut r = Cursor::new(&bytes[..bytes.len() - CRC]);
        let magic = r.take(MAGIC.len(), "the magic")?;
        if magic != MAGIC {
            return Err(Damage::Magic { found: magic.to_vec(), kind: "spool" });
        }
        let version = r.u32("the version")?;
        if version != VERSION {
            return Err(Damage::Version { found: version, reads: Versions { first: VERSION, last: VERSION } });
        }
        disk::checked(bytes)?;
        let host_len = r.u32("the host length")? as usize;
        let serial = r.u64("the serial")?;
        let count = r.u32("the part count")? as usize;
        if host_len > MAX_HOST {
            return Err(Damage::NameTooLong { what: LongName::Host, len: host_len, max: MAX_HOST });
        }
        let host = r.text(host_len, "the host name")?;
        if count > r.remaining() / PART {
            return Err(Damage::Announced { count, what: "parts", remaining: r.remaining() });
        }
        let mut parts = Vec::with_capacity(count);
        for i in 0..count {
            let name_len = r.u32("a name length")? as usize;
            let records = r.u64("a record count")?;
            let n = r.u32("a message count")? as usize;
            if name_len > MAX_NAME {
                return Err(Damage::NameTooLong { what: LongName::PartAt(i), len: name_len, max: MAX_NAME });
            }
            let source = r.text(name_len, &format!("the name of part #{i}"))?;
            if n > r.remaining() / 4 {
                return Err(Damage::Messages { part: i, count: n, remaining: r.remaining() });
            }
            let mut messages = Vec::with_capacity(n);
            for j in 0..n {
                let len = r.u32("a message length")? as usize;
                if len > MAX_MESSAGE {
                    return Err(Damage::MessageTooBig { part: i, message: j, len, max: MAX_MESSAGE });
                }
                messages.push(r.take(len, "a message")?.to_vec());
            }
            parts.push(SpoolPart { source, records, messages });
        }
        if r.remaining() != 0 {
            return Err(Damage::Trailing { bytes: r.remaining(), after: "the last part" });
        }
        Ok(SpoolRound { host, serial, parts })
    }

    /// Records the round holds, by source.
    pub fn counts(&self) -> Vec<(String, u64)> {
        self.parts.iter().map(|p| (p.source.clone(), p.records)).collect()
    }
}
