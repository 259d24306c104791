//! Why a spool directory or file is refused.

use std::io;
use std::path::PathBuf;

use super::layout::MAX_PENDING;
use crate::disk::Damage;

/// Why the spool could not be opened, written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpoolError {
    /// Reading or writing failed.
    #[error("spool: {doing} {}: {source}", path.display())]
    Io {
        /// What was being done.
        doing: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A file is damaged ([`SpoolRound::decode`](crate::spool::SpoolRound::decode) has no file to name).
    #[error("damaged spool file {}{damage}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    Damaged {
        /// The file.
        path: Option<PathBuf>,
        /// What is wrong.
        #[source]
        damage: Damage,
    },
    /// The directory is not safe to use, or another agent's.
    #[error("spool directory refused: {}{why}", path.display())]
    Unsafe {
        /// The directory (or the file that is another host's).
        path: PathBuf,
        /// Why.
        #[source]
        why: Refusal,
    },
    /// A round does not fit within the spool's limit.
    #[error("spool full: a round of {need} bytes does not fit ({used} of {max} bytes used)")]
    Full {
        /// The round's bytes.
        need: u64,
        /// Bytes the pending rounds take.
        used: u64,
        /// The limit.
        max: u64,
    },
}

/// Why a spool directory is refused (each message starts with what separates it from
/// the path it follows).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// A symbolic link or a file.
    #[error(": not a directory (a symbolic link or a file)")]
    NotADirectory,
    /// Another user's.
    #[error(": owned by uid {uid}, not this agent's ({me})")]
    Owner {
        /// Its owner.
        uid: u32,
        /// The agent's effective uid.
        me: u32,
    },
    /// Others may write it.
    #[error(": mode {mode:o}: writable by other users (make it 0700)")]
    Writable {
        /// Its permission bits.
        mode: u32,
    },
    /// Another agent holds its lock.
    #[error(": another agent holds this spool directory ({0})")]
    Locked(#[source] io::Error),
    /// The state names more pending rounds than a spool holds.
    #[error(": the state names rounds {head} to {tail} pending (at most {MAX_PENDING})")]
    Pending {
        /// The first.
        head: u64,
        /// One past the last.
        tail: u64,
    },
    /// The file holds another host's round.
    #[error(" holds a round of host {found:?}, not {host:?}: another agent's spool")]
    OtherHost {
        /// The host it names.
        found: String,
        /// The agent's.
        host: String,
    },
}
