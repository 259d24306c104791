//! The agent's spool: a bounded directory of rounds that Kafka did not take in time,
//! kept on disk until it does, so that a broker outage longer than the rings can hold
//! does not make them refuse records.
//!
//! A round the agent could not deliver (or a round read while older ones wait here) is
//! written as one file, [`SpoolRound`], named by its serial number
//! (`{serial:020}.spool`); the rounds are sent again oldest first, each message
//! exactly as it was built (same batches, same sequence numbers), so a copy that Kafka
//! took after all is dropped by readers as any other. Which serials are pending lives
//! in the agent's state file ([`crate::state::State::spool_head`] and
//! [`spool_tail`](crate::state::State::spool_tail)), stored in an order that makes
//! every crash safe:
//!
//! 1. the round's file is written whole to a temporary file, flushed, renamed into
//!    place, and the directory flushed;
//! 2. the state is stored with the tail past it (and the sources' positions past the
//!    round's records), and only then do the rings get the records' space back;
//! 3. once Kafka acknowledged spooled rounds, the state is stored with the head past
//!    them, and only then are their files removed.
//!
//! An agent restarted after a crash between 1 and 2 finds a file at or past the tail:
//! its records are still in the rings (the state was not advanced), so the file is
//! removed. Between 2 and 3 (or during 3), files below the head were delivered: they
//! are removed. What the state counts as spooled but no intact file holds is counted
//! lost ([`crate::state::SourceCounts::spool_lost`]), never silent.
//!
//! # The directory
//!
//! Created with mode 0700 if missing. An existing one must be a directory (not a
//! symbolic link) owned by the agent's user and writable by nobody else: a spool is
//! records waiting to leave the host, and another local user must not add, change or
//! remove them. One agent at a time: the agent holds an exclusive `flock` on
//! `DIR/.lock` while it runs. Files that are not the spool's own names are left alone.
//!
//! # Format of a file
//!
//! Integers are little-endian; a file is untrusted input when read back (see
//! [`SpoolRound::decode`]).
//!
//! | Offset | Size | Field |
//! |---|---|---|
//! | 0 | 8 | magic, `b"RTSPOOL\x01"` |
//! | 8 | 4 | version, u32, = 1 |
//! | 12 | 4 | `host_len`, u32, at most 255 |
//! | 16 | 8 | `serial`, u64 (equal to the one in the file's name) |
//! | 24 | 4 | `parts`, u32: the number of sources in the round |
//! | 28 | `host_len` | host name, UTF-8 |
//! | | | `parts` parts, each: |
//! | +0 | 4 | `name_len`, u32, at most 4096 |
//! | +4 | 8 | `records`, u64: records the part's messages hold (markers included) |
//! | +12 | 4 | `messages`, u32 |
//! | +16 | `name_len` | source name, UTF-8 |
//! | | | `messages` messages, each a u32 length (at most 999,000,000) and the bytes of one batch ([`crate::frame`]) |
//! | end − 4 | 4 | CRC32C (Castagnoli), u32, of all the bytes before it |

use std::collections::VecDeque;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};

use crate::disk::{self, Damage};

#[cfg(test)]
mod tests;

mod error;
mod layout;
mod round;

pub use error::{Refusal, SpoolError};
pub use layout::MAGIC;
use layout::{MAX_PENDING, SUFFIX};

pub use round::{SpoolPart, SpoolRound};

/// A spooled round waiting in the directory: its serial, its file's length, and how
/// many records of which source it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The round's serial.
    pub serial: u64,
    /// The file's length in bytes.
    pub bytes: u64,
    /// Records by source.
    pub counts: Vec<(String, u64)>,
}

/// What [`Spool::open`] found in the directory.
#[derive(Debug, Default)]
pub struct Opened {
    /// Files past the state's tail (a crash before the state was stored: their
    /// records are still in the rings) and below its head (delivered), removed.
    pub removed: u64,
    /// Files in the pending range found damaged (renamed `*.damaged` and left for
    /// inspection) or missing, as messages for the log.
    pub damaged: Vec<String>,
}

/// The spool directory of a running agent (see the [module documentation](self)).
pub struct Spool {
    dir: PathBuf,
    host: String,
    /// The most bytes the pending files may take.
    max_bytes: u64,
    /// The pending rounds, oldest first; `tail` is the serial the next one gets.
    pending: VecDeque<Pending>,
    tail: u64,
    bytes: u64,
    /// Holds the directory's lock while the spool is open.
    _lock: File,
}

impl fmt::Debug for Spool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spool")
            .field("dir", &self.dir)
            .field("pending", &self.pending.len())
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl Spool {
    /// Opens (creating it if missing) the spool directory `dir` of `host`, whose state
    /// says the rounds `head..tail` are pending; at most `max_bytes` of files. Takes
    /// the directory's lock, removes what the state says is delivered or was never
    /// committed (see the [module documentation](self)), and reads every pending file
    /// whole, checking it. Refuses a directory that is not safe (see there), another
    /// agent's (locked), or holding another host's rounds.
    pub fn open(dir: &Path, host: &str, max_bytes: u64, head: u64, tail: u64) -> Result<(Spool, Opened), SpoolError> {
        let io_err = |doing, path: &Path, source| SpoolError::Io { doing, path: path.to_path_buf(), source };
        match fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err("creating the spool directory", dir, e)),
        }
        let meta = fs::symlink_metadata(dir).map_err(|e| io_err("reading", dir, e))?;
        let me = rustix::process::geteuid().as_raw();
        let unsafe_dir = |why| SpoolError::Unsafe { path: dir.to_path_buf(), why };
        if !meta.file_type().is_dir() {
            return Err(unsafe_dir(Refusal::NotADirectory));
        }
        if meta.uid() != me {
            return Err(unsafe_dir(Refusal::Owner { uid: meta.uid(), me }));
        }
        if meta.permissions().mode() & 0o022 != 0 {
            return Err(unsafe_dir(Refusal::Writable { mode: meta.permissions().mode() & 0o7777 }));
        }
        let lock_path = dir.join(".lock");
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&lock_path)
            .map_err(|e| io_err("opening the lock", &lock_path, e))?;
        if let Err(e) = flock(&lock, FlockOperation::NonBlockingLockExclusive) {
            return Err(unsafe_dir(Refusal::Locked(e.into())));
        }
        let mut spool = Spool {
            dir: dir.to_path_buf(),
            host: host.to_string(),
            max_bytes,
            pending: VecDeque::new(),
            tail,
            bytes: 0,
            _lock: lock,
        };
        if head > tail || tail - head > MAX_PENDING {
            return Err(unsafe_dir(Refusal::Pending { head, tail }));
        }
        let mut opened = Opened::default();
        let mut serials = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| io_err("listing", dir, e))? {
            let entry = entry.map_err(|e| io_err("listing", dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(serial) = parse_name(name) {
                serials.push(serial);
            } else if name.starts_with(".tmp.") {
                // A round being written when an agent stopped: never in the state.
                let _ = fs::remove_file(entry.path());
            }
        }
        serials.sort_unstable();
        for serial in serials {
            let path = spool.path(serial);
            if serial >= head && serial < tail {
                continue;
            }
            // Never committed (its records are still in the rings) or delivered; but
            // only a round of this host: another's is not ours to remove.
            let round = spool.read_file(&path)?;
            if round.host != host {
                return Err(SpoolError::Unsafe {
                    path,
                    why: Refusal::OtherHost { found: round.host, host: host.to_string() },
                });
            }
            fs::remove_file(&path).map_err(|e| io_err("removing", &path, e))?;
            opened.removed += 1;
        }
        for serial in head..tail {
            let path = spool.path(serial);
            match spool.read_file(&path) {
                Ok(round) if round.host == host && round.serial == serial => {
                    let bytes = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                    spool.bytes += bytes;
                    spool.pending.push_back(Pending { serial, bytes, counts: round.counts() });
                }
                Ok(round) => {
                    opened.damaged.push(format!(
                        "{}: round {} of host {:?} where round {serial} of {host:?} was expected",
                        path.display(),
                        round.serial,
                        round.host
                    ));
                    spool.set_aside(&path);
                }
                Err(SpoolError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                    opened.damaged.push(format!("{}: missing", path.display()));
                }
                Err(e) => {
                    opened.damaged.push(e.to_string());
                    spool.set_aside(&path);
                }
            }
        }
        sync_dir(dir)?;
        Ok((spool, opened))
    }

    /// The pending rounds, oldest first.
    pub fn pending(&self) -> &VecDeque<Pending> {
        &self.pending
    }

    /// The serial the next round gets (the state's tail).
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// The serial of the oldest pending round (the state's head): the tail if none.
    pub fn head(&self) -> u64 {
        self.pending.front().map_or(self.tail, |p| p.serial)
    }

    /// Bytes the pending files take.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether a round of `bytes` fits within the spool's limit.
    pub fn has_room(&self, bytes: usize) -> bool {
        self.bytes.saturating_add(bytes as u64) <= self.max_bytes
    }

    /// Writes `parts` as the next round: to a temporary file, flushed, renamed into
    /// place, the directory flushed. Returns the round's serial; the state's tail goes
    /// past it once stored. Refuses ([`SpoolError::Full`]) a round that does not fit.
    pub fn write(&mut self, parts: Vec<SpoolPart>) -> Result<u64, SpoolError> {
        let round = SpoolRound { host: self.host.clone(), serial: self.tail, parts };
        let bytes = round.encode();
        if !self.has_room(bytes.len()) {
            return Err(SpoolError::Full { need: bytes.len() as u64, used: self.bytes, max: self.max_bytes });
        }
        let path = self.path(round.serial);
        let tmp = self.dir.join(format!(".tmp.{}", round.serial));
        let written = disk::write_new(&tmp, &bytes).and_then(|()| fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(SpoolError::Io { doing: "writing", path, source: e });
        }
        sync_dir(&self.dir)?;
        self.bytes += bytes.len() as u64;
        self.pending.push_back(Pending { serial: round.serial, bytes: bytes.len() as u64, counts: round.counts() });
        self.tail += 1;
        Ok(round.serial)
    }

    /// Reads the pending round `serial` back, checked.
    pub fn read(&self, serial: u64) -> Result<SpoolRound, SpoolError> {
        let round = self.read_file(&self.path(serial))?;
        if round.serial != serial || round.host != self.host {
            return Err(SpoolError::Damaged {
                path: Some(self.path(serial)),
                damage: Damage::Misplaced {
                    serial: round.serial,
                    host: round.host,
                    expected: serial,
                    expected_host: self.host.clone(),
                },
            });
        }
        Ok(round)
    }

    /// Forgets the oldest pending round (delivered, or found damaged) once the state
    /// stored a head past it, and removes its file (a damaged one is set aside).
    /// Returns what it held.
    pub fn pop(&mut self, damaged: bool) -> Option<Pending> {
        let p = self.pending.pop_front()?;
        self.bytes -= p.bytes;
        let path = self.path(p.serial);
        if damaged {
            self.set_aside(&path);
        } else {
            // A file not removed (an error) is removed by the next agent's open, as one
            // below the head.
            let _ = fs::remove_file(&path);
        }
        Some(p)
    }

    fn path(&self, serial: u64) -> PathBuf {
        self.dir.join(format!("{serial:020}{SUFFIX}"))
    }

    fn set_aside(&self, path: &Path) {
        let mut aside = path.as_os_str().to_owned();
        aside.push(".damaged");
        let _ = fs::rename(path, aside);
    }

    fn read_file(&self, path: &Path) -> Result<SpoolRound, SpoolError> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)
            .map_err(|source| SpoolError::Io { doing: "opening", path: path.to_path_buf(), source })?;
        let damaged = |damage| SpoolError::Damaged { path: Some(path.to_path_buf()), damage };
        let reading = |source| SpoolError::Io { doing: "reading", path: path.to_path_buf(), source };
        let meta = file.metadata().map_err(reading)?;
        if !meta.is_file() {
            return Err(damaged(Damage::NotRegular));
        }
        let limit = self.max_bytes.max(1 << 20);
        if meta.len() > limit {
            return Err(damaged(Damage::TooBig { len: meta.len(), limit: "the spool's limit" }));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(limit + 1).read_to_end(&mut bytes).map_err(reading)?;
        SpoolRound::decode(&bytes).map_err(|e| match e {
            SpoolError::Damaged { path: None, damage } => damaged(damage),
            e => e,
        })
    }
}

/// `{serial:020}.spool` → serial.
fn parse_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SUFFIX)?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok())?
}

fn sync_dir(dir: &Path) -> Result<(), SpoolError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|source| SpoolError::Io {
        doing: "syncing the spool directory",
        path: dir.to_path_buf(),
        source,
    })
}
