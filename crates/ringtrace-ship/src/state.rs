//! The agent's state file: for each source, the ring file's identity, the ring's
//! consumer position after the last records Kafka acknowledged, and the next sequence
//! number to assign.
//!
//! The agent rewrites the file after every acknowledged round, so an agent killed at
//! any instruction and restarted finds the state of its last completed round: it
//! resends at most what Kafka had not acknowledged, with the same sequence numbers.
//! The file also keeps the agent's counters (records shipped, records too large to
//! ship, the ring's refusals, rounds failed, and when it was written), which a failed
//! round stores too, so that `ringtrace-ship stat` and `ringtrace stat` of the file say
//! what a host could not ship while Kafka was down.
//!
//! # Writing
//!
//! [`State::store`] never changes the file in place: it writes the whole state to a
//! temporary file in the same directory (`.{file name}.tmp.{pid}`, mode 0600, created
//! exclusively), flushes it to disk, renames it over the file and flushes the
//! directory. A reader, or an agent restarted after a crash or a power loss, sees the
//! old file or the new one, never a mix. A crash before the rename leaves a temporary
//! file behind; the next store of a process with the same pid replaces it, and no
//! reader ever looks at it.
//!
//! # Reading
//!
//! The file is untrusted input: [`State::load`] reads at most 1 GiB, and
//! [`State::decode`] checks the magic, the version, the checksum, every length against
//! the bytes present (so that no length field makes it allocate more than the file
//! holds), the UTF-8 of every string, the order of the names and that nothing follows
//! the last entry. It returns [`StateError::Damaged`], saying what is wrong, and never
//! panics.
//!
//! # Format
//!
//! Integers are little-endian.
//!
//! | Offset | Size | Field |
//! |---|---|---|
//! | 0 | 8 | magic, `b"RTSHIPST"` |
//! | 8 | 4 | version, u32, = 4 (versions 2 and 3, without the fields added since, are read too; version 1 had no counters and is refused) |
//! | 12 | 4 | `host_len`, u32, at most 255 |
//! | 16 | 4 | `count`, u32: the number of entries |
//! | 20 | 8 | `updated_ns`, u64: wall-clock ns since the Unix epoch of the store |
//! | 28 | 8 | `failed_rounds`, u64: rounds that failed, over the agent's life |
//! | 36 | 8 | `spool_head`, u64: the oldest round in the spool ([`crate::spool`]) |
//! | 44 | 8 | `spool_tail`, u64: the serial of the next round spooled (none pending if equal to the head) |
//! | 52 | `host_len` | host name, UTF-8 |
//! | | | `count` entries, each: |
//! | +0 | 4 | `name_len`, u32, at most 4096 |
//! | +4 | 8 | `dev`, u64: device number of the ring file |
//! | +12 | 8 | `ino`, u64: inode number of the ring file |
//! | +20 | 8 | `position`, u64: the ring's consumer position |
//! | +28 | 8 | `next_seq`, u64: the next sequence number to assign |
//! | +36 | 8 | `shipped`, u64: records delivered whole, acknowledged by Kafka (markers not included) |
//! | +44 | 8 | `too_large`, u64: records shipped as too-large markers |
//! | +52 | 8 | `ring_lost`, u64: records the ring refused (its `Stats::lost`) |
//! | +60 | 8 | `spooled`, u64: records in the spool, not yet acknowledged (markers included) |
//! | +68 | 8 | `spool_lost`, u64: records the spool lost (a file damaged or removed behind the agent's back) |
//! | +76 | 8 | `overwritten`, u64: records a flight recorder's producers overwrote before the agent read them |
//! | +84 | 8 | `consumed`, u64: a flight recorder's records read before `position` (its consumer's count there) |
//! | +92 | 8 | `skipped`, u64: a flight recorder's discarded reservations before `position` |
//! | +100 | `name_len` | source name, UTF-8 |
//! | end − 4 | 4 | CRC32C (Castagnoli), u32, of all the bytes before it |
//!
//! Version 3 lacks each entry's `overwritten`, `consumed` and `skipped` (its entries
//! are 76 bytes and a name). Version 2 lacks besides `spool_head`, `spool_tail` (its
//! header is 36 bytes) and each entry's `spooled` and `spool_lost` (its entries 60
//! bytes and a name). What a version lacks reads as 0.
//!
//! Entries are sorted by name (byte order), and no two have the same name.

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::disk::{self, len_u32, Cursor, Damage, LongName, Versions};

mod json;
#[cfg(test)]
mod tests;

/// The first 8 bytes of a state file.
pub const MAGIC: [u8; 8] = *b"RTSHIPST";
const VERSION: u32 = 4;
/// The longest host name, in bytes.
const MAX_HOST: usize = 255;
/// The longest source name, in bytes.
const MAX_NAME: usize = 4096;
/// The largest file [`State::load`] reads.
const MAX_FILE: u64 = 1 << 30;
/// [`MAX_FILE`], as errors name it.
const LIMIT: &str = "the 1 GiB limit";
/// The versions this program reads.
const READS: Versions = Versions { first: 2, last: VERSION };
/// Magic, version, `host_len`, `count`, `updated_ns`, `failed_rounds`, `spool_head`
/// and `spool_tail`.
const HEADER: usize = 52;
/// An entry without its name.
const ENTRY: usize = 100;
/// The same in version 3, and in version 2.
const ENTRY_V3: usize = 76;
const HEADER_V2: usize = 36;
const ENTRY_V2: usize = 60;
const CRC: usize = 4;

/// One source's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceState {
    /// The source's name (at most 4096 bytes).
    pub source: String,
    /// The device number of the ring file.
    pub dev: u64,
    /// The inode number of the ring file.
    pub ino: u64,
    /// The ring's consumer position after the last records Kafka acknowledged.
    pub position: u64,
    /// The sequence number of the source's next record.
    pub next_seq: u64,
    /// A flight recorder's: the records its consumer had read before `position` (0
    /// for a discard ring). With `position`, `skipped` and
    /// [`SourceCounts::overwritten`], the consumer's read mark there.
    pub consumed: u64,
    /// A flight recorder's: the discarded reservations its consumer stepped over
    /// before `position` (0 for a discard ring).
    pub skipped: u64,
    /// What was shipped and what could not be.
    pub counts: SourceCounts,
}

/// One source's counters, over the agent's life (across restarts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceCounts {
    /// Records delivered whole, acknowledged by Kafka, as in the agent's `shipped`: a
    /// reader's `records` (too-large markers are counted in `too_large` only).
    pub shipped: u64,
    /// Records too large for a message, shipped as markers (not in `shipped`).
    pub too_large: u64,
    /// Records the ring refused while it was full (its `Stats::lost` when last stored).
    pub ring_lost: u64,
    /// Records in the spool ([`crate::spool`]), not yet acknowledged (markers included).
    pub spooled: u64,
    /// Records the spool lost: its file found damaged or missing when the agent
    /// started or sent it again.
    pub spool_lost: u64,
    /// A flight recorder's records its producers overwrote before the agent read them
    /// (before `position`): never shipped, and the gaps in the source's sequence.
    pub overwritten: u64,
}

/// The agent's state: its host name and one entry per source.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// The host name (at most 255 bytes).
    pub host: String,
    /// The entries, sorted by [`SourceState::source`], with no two of the same name
    /// ([`State::set`] keeps them so; [`State::store`] refuses a state that is not).
    pub sources: Vec<SourceState>,
    /// When the state was last stored: wall-clock ns since the Unix epoch.
    pub updated_ns: u64,
    /// Rounds that failed (Kafka did not acknowledge them), over the agent's life.
    pub failed_rounds: u64,
    /// The serial of the oldest round in the spool ([`crate::spool`]).
    pub spool_head: u64,
    /// The serial the next spooled round gets: rounds `spool_head..spool_tail` wait
    /// in the spool.
    pub spool_tail: u64,
}

impl State {
    /// The entry of `source`, if any.
    pub fn get(&self, source: &str) -> Option<&SourceState> {
        let i = self.sources.binary_search_by(|s| s.source.as_str().cmp(source)).ok()?;
        self.sources.get(i)
    }

    /// Inserts or replaces the entry of `s.source`, keeping the order.
    pub fn set(&mut self, s: SourceState) {
        match self.sources.binary_search_by(|e| e.source.cmp(&s.source)) {
            Ok(i) => self.sources[i] = s,
            Err(i) => self.sources.insert(i, s),
        }
    }

    /// Reads `path`: `Ok(None)` if it does not exist, [`StateError::Damaged`] if it
    /// exists but is damaged (see [`State::decode`]), is not a regular file or is larger
    /// than 1 GiB, [`StateError::Io`] if it cannot be read. Both errors name the path.
    pub fn load(path: &Path) -> Result<Option<State>, StateError> {
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("opening", path, e)),
        };
        let meta = file.metadata().map_err(|e| io_error("reading the metadata of", path, e))?;
        if !meta.is_file() {
            return Err(damaged(path, Damage::NotRegular));
        }
        if meta.len() > MAX_FILE {
            return Err(damaged(path, Damage::TooBig { len: meta.len(), limit: LIMIT }));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.take(MAX_FILE + 1).read_to_end(&mut bytes).map_err(|e| io_error("reading", path, e))?;
        if bytes.len() as u64 > MAX_FILE {
            return Err(damaged(path, Damage::Grew { limit: LIMIT }));
        }
        match State::decode(&bytes) {
            Ok(state) => Ok(Some(state)),
            Err(StateError::Damaged { path: None, damage }) => Err(damaged(path, damage)),
            Err(e) => Err(e),
        }
    }

    /// Writes the state to `path` atomically: encodes it, writes it to a temporary file
    /// in the same directory (`.{file name}.tmp.{pid}`, mode 0600, created exclusively
    /// after removing a stale one of the same name), flushes that to disk, renames it
    /// over `path` and flushes the directory. On error the temporary file is removed
    /// and `path` is left as it was, unless only the last flush failed (the new state is
    /// then in place but may not survive a power loss).
    ///
    /// Refuses ([`StateError::Invalid`]) a state whose host or a name is too long or
    /// whose entries are not sorted by unique names: it would not load back.
    pub fn store(&self, path: &Path) -> Result<(), StateError> {
        let invalid = |why| StateError::Invalid { path: path.to_path_buf(), why };
        self.check().map_err(invalid)?;
        let name = path.file_name().ok_or_else(|| invalid(Damage::NotFileName))?;
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let mut tmp_name = OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".tmp.{}", std::process::id()));
        let tmp = dir.join(tmp_name);

        let written = disk::write_new(&tmp, &self.encode()).map_err(|e| io_error("writing", &tmp, e)).and_then(|()| {
            fs::rename(&tmp, path).map_err(|e| io_error(format!("renaming {} to", tmp.display()), path, e))
        });
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_error("syncing the directory", dir, e))
    }

    /// The bytes of the file (see the [module documentation](self) for the format).
    ///
    /// Does not check the limits: [`State::store`] refuses a state with a host or name
    /// too long or entries out of order, and [`State::decode`] refuses the bytes of one.
    pub fn encode(&self) -> Vec<u8> {
        let names: usize = self.sources.iter().map(|s| ENTRY + s.source.len()).sum();
        let mut out = Vec::with_capacity(HEADER + self.host.len() + names + CRC);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&len_u32(self.host.len()).to_le_bytes());
        out.extend_from_slice(&len_u32(self.sources.len()).to_le_bytes());
        out.extend_from_slice(&self.updated_ns.to_le_bytes());
        out.extend_from_slice(&self.failed_rounds.to_le_bytes());
        out.extend_from_slice(&self.spool_head.to_le_bytes());
        out.extend_from_slice(&self.spool_tail.to_le_bytes());
        out.extend_from_slice(self.host.as_bytes());
        for s in &self.sources {
            out.extend_from_slice(&len_u32(s.source.len()).to_le_bytes());
            let c = s.counts;
            let fields = [s.dev, s.ino, s.position, s.next_seq, c.shipped, c.too_large, c.ring_lost, c.spooled];
            for n in fields.into_iter().chain([c.spool_lost, c.overwritten, s.consumed, s.skipped]) {
                out.extend_from_slice(&n.to_le_bytes());
            }
            out.extend_from_slice(s.source.as_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Parses the bytes of a file, refusing ([`StateError::Damaged`]) a bad magic,
    /// version or checksum, a length past the end or over its limit, a string that is
    /// not UTF-8, names out of order or repeated, and bytes after the last entry.
    pub fn decode(bytes: &[u8]) -> Result<State, StateError> {
        Self::parse(bytes).map_err(|damage| StateError::Damaged { path: None, damage })
    }

    fn parse(bytes: &[u8]) -> Result<State, Damage> {
        if bytes.len() < HEADER_V2 + CRC {
            return Err(Damage::TooShort { len: bytes.len(), min: HEADER_V2 + CRC, empty: "an empty state" });
        }
        let mut r = Cursor::new(&bytes[..bytes.len() - CRC]);
        let magic = r.take(MAGIC.len(), "the magic")?;
        if magic != MAGIC {
            return Err(Damage::Magic { found: magic.to_vec(), kind: "state" });
        }
        let version = r.u32("the version")?;
        if version == 1 {
            return Err(Damage::Retired { found: version, reads: READS });
        }
        if !(2..=VERSION).contains(&version) {
            return Err(Damage::Version { found: version, reads: READS });
        }
        let v3 = version >= 3;
        disk::checked(bytes)?;

        let host_len = r.u32("the host length")? as usize;
        let count = r.u32("the source count")? as usize;
        let (updated_ns, failed_rounds) = (r.u64("the update time")?, r.u64("the failed rounds")?);
        let (spool_head, spool_tail) =
            if v3 { (r.u64("the spool's head")?, r.u64("the spool's tail")?) } else { (0, 0) };
        if spool_head > spool_tail {
            return Err(Damage::SpoolOrder { head: spool_head, tail: spool_tail });
        }
        if host_len > MAX_HOST {
            return Err(Damage::NameTooLong { what: LongName::Host, len: host_len, max: MAX_HOST });
        }
        let host = r.text(host_len, "the host name")?;
        let entry = match version {
            2 => ENTRY_V2,
            3 => ENTRY_V3,
            _ => ENTRY,
        };
        if count > r.remaining() / entry {
            return Err(Damage::Announced { count, what: "sources", remaining: r.remaining() });
        }
        let mut sources: Vec<SourceState> = Vec::with_capacity(count);
        for i in 0..count {
            let name_len = r.u32("a name length")? as usize;
            if name_len > MAX_NAME {
                return Err(Damage::NameTooLong { what: LongName::SourceAt(i), len: name_len, max: MAX_NAME });
            }
            let (dev, ino) = (r.u64("a device number")?, r.u64("an inode number")?);
            let (position, next_seq) = (r.u64("a position")?, r.u64("a sequence number")?);
            let mut counts = SourceCounts {
                shipped: r.u64("a shipped count")?,
                too_large: r.u64("a too-large count")?,
                ring_lost: r.u64("a ring-lost count")?,
                ..SourceCounts::default()
            };
            if v3 {
                counts.spooled = r.u64("a spooled count")?;
                counts.spool_lost = r.u64("a spool-lost count")?;
            }
            let (mut consumed, mut skipped) = (0, 0);
            if version >= 4 {
                counts.overwritten = r.u64("an overwritten count")?;
                consumed = r.u64("a consumed count")?;
                skipped = r.u64("a skipped count")?;
            }
            let source = r.text(name_len, &format!("the name of source #{i}"))?;
            if let Some(prev) = sources.last() {
                if prev.source >= source {
                    return Err(Damage::Unsorted { index: Some(i), name: source, after: prev.source.clone() });
                }
            }
            sources.push(SourceState { source, dev, ino, position, next_seq, consumed, skipped, counts });
        }
        if r.remaining() != 0 {
            return Err(Damage::Trailing { bytes: r.remaining(), after: "the last entry" });
        }
        Ok(State { host, sources, updated_ns, failed_rounds, spool_head, spool_tail })
    }

    /// What would make the encoded state fail to decode.
    fn check(&self) -> Result<(), Damage> {
        if self.host.len() > MAX_HOST {
            return Err(Damage::NameTooLong { what: LongName::Host, len: self.host.len(), max: MAX_HOST });
        }
        if u32::try_from(self.sources.len()).is_err() {
            return Err(Damage::TooMany { count: self.sources.len() });
        }
        if let Some(s) = self.sources.iter().find(|s| s.source.len() > MAX_NAME) {
            return Err(Damage::NameTooLong { what: LongName::Source, len: s.source.len(), max: MAX_NAME });
        }
        if self.spool_head > self.spool_tail {
            return Err(Damage::SpoolOrder { head: self.spool_head, tail: self.spool_tail });
        }
        if let Some(w) = self.sources.windows(2).find(|w| w[0].source >= w[1].source) {
            return Err(Damage::Unsorted { index: None, name: w[1].source.clone(), after: w[0].source.clone() });
        }
        Ok(())
    }
}

/// Nanoseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
fn utc(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let (era, doe) = (z.div_euclid(146_097), z.rem_euclid(146_097));
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let (d, m) = (doy - (153 * mp + 2) / 5 + 1, if mp < 10 { mp + 3 } else { mp - 9 });
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

/// The state for people: the host, when it was stored, the failed rounds, then a line
/// a source with its counters (names escaped as Rust's `{:?}` does).
impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let updated = if self.updated_ns == 0 { "never".to_string() } else { utc(self.updated_ns) };
        write!(f, "host {:?}: stored {updated}, {} failed rounds", self.host, self.failed_rounds)?;
        if self.spool_tail > self.spool_head {
            write!(f, ", {} round(s) in the spool", self.spool_tail - self.spool_head)?;
        }
        writeln!(f)?;
        for s in &self.sources {
            let c = s.counts;
            write!(
                f,
                "  {:?}: {} shipped, {} too large to ship, {} refused by the ring",
                s.source, c.shipped, c.too_large, c.ring_lost
            )?;
            if c.overwritten > 0 {
                write!(f, ", {} overwritten before it was read", c.overwritten)?;
            }
            if c.spooled > 0 || c.spool_lost > 0 {
                write!(f, ", {} in the spool, {} lost from the spool", c.spooled, c.spool_lost)?;
            }
            writeln!(f, "; next sequence {}, position {}", s.next_seq, s.position)?;
        }
        Ok(())
    }
}

/// Why a state file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// Reading or writing failed.
    #[error("state file: {doing} {}: {source}", path.display())]
    Io {
        /// What was being done (`opening`, `writing`, `renaming TMP to`, ...).
        doing: String,
        /// The file (or directory).
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The file exists but is damaged ([`State::load`] names it; [`State::decode`] has
    /// no file to name).
    #[error("damaged state file: {}{damage}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    Damaged {
        /// The file.
        path: Option<PathBuf>,
        /// What is wrong.
        #[source]
        damage: Damage,
    },
    /// [`State::store`] was given a state that would not load back (a host or name too
    /// long, entries out of order or repeated).
    #[error("cannot store an invalid state to {}: {why}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What would not load back.
        #[source]
        why: Damage,
    },
}

/// An I/O error that says what was done to which file.
fn io_error(doing: impl Into<String>, path: &Path, source: io::Error) -> StateError {
    StateError::Io { doing: doing.into(), path: path.to_path_buf(), source }
}

fn damaged(path: &Path, damage: Damage) -> StateError {
    StateError::Damaged { path: Some(path.to_path_buf()), damage }
}
