//! The one error type.

use std::path::{Path, PathBuf};

/// Why making a recorder, dumping it, or decoding a trace failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A builder setting out of range.
    #[error("{0}")]
    Config(String),
    /// Making the rings failed.
    #[error(transparent)]
    Ring(#[from] ringtrace::Error),
    /// A recorder directory's file exists from an earlier run
    /// ([`Builder::replace_existing`](crate::Builder::replace_existing) removes it).
    #[error("{} exists: remove it, choose another directory, or set replace_existing", .0.display())]
    Exists(PathBuf),
    /// A recorder directory another user could change the files of: owned by another
    /// user than the process's effective user, or writable by its group or by others
    /// ([`Builder::directory`](crate::Builder::directory)).
    #[error(
        "refusing the recorder directory {}: {reason}; another user could replace the recorder's files in it \
         (use a directory of this user's that only it can write, such as mode 0700)",
        path.display()
    )]
    UnsafeDirectory { path: PathBuf, reason: String },
    /// Reading the rings failed (a ring found corrupt).
    #[error("reading the rings: {0}")]
    Consume(#[from] ringtrace::ConsumeError),
    /// A file could not be made, written or read.
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The recorder is a stream: it has nothing to dump (its trace file is the record).
    #[error("a stream recorder has no rings to dump: its trace file holds the events")]
    NotFlight,
    /// A file or directory that is not a trace this crate can read.
    #[error("{}: {reason}", path.display())]
    NotATrace { path: PathBuf, reason: String },
}

impl Error {
    pub(crate) fn io(what: &'static str, path: &Path, source: std::io::Error) -> Error {
        Error::Io { what, path: path.into(), source }
    }
}
