//! The one error type. An error that wraps another returns it from `source()` and
//! leaves it out of its message (a reporter that prints the chain names it once).

use std::path::{Path, PathBuf};

/// `e`'s message followed by its causes' (ringtrace's one definition).
pub(crate) use ringtrace::error::with_causes;

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
    #[error("reading the rings")]
    Consume(#[from] ringtrace::ConsumeError),
    /// A file could not be made, written or read.
    #[error("{what} {}", path.display())]
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

#[cfg(test)]
mod tests {
    use super::*;

    const CAUSE: &str = "the cause of the test";

    /// `e`'s cause is its `source()`, not part of its message, and named once with it.
    fn cause_once(e: &Error) {
        let msg = e.to_string();
        let source = std::error::Error::source(e).unwrap_or_else(|| panic!("no source: {msg}"));
        assert!(!msg.contains(&source.to_string()), "the message repeats its source: {msg}");
        let full = with_causes(e);
        assert_eq!(full.matches(CAUSE).count(), 1, "{full}");
    }

    #[test]
    fn a_cause_is_a_source_and_not_in_the_message() {
        let io = || std::io::Error::other(CAUSE);
        cause_once(&Error::io("writing", Path::new("/tmp/trace.rtt"), io()));
        cause_once(&Error::Consume(ringtrace::ConsumeError::Io(io())));
        cause_once(&Error::Ring(ringtrace::Error::File { what: "creating", path: "/dev/shm/r".into(), source: io() }));
        assert_eq!(
            with_causes(&Error::io("writing", Path::new("/tmp/trace.rtt"), io())),
            format!("writing /tmp/trace.rtt: {CAUSE}")
        );
    }
}
