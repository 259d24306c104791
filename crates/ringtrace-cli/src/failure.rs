//! The error every command returns: a one-line message, or a broken pipe (the reader
//! of stdout went away, which is not an error to report). A library error becomes its
//! message with its causes ([`chain`]).

use std::path::Path;

use ringtrace::inspect::FormatError;

/// Why a command stopped.
#[derive(Debug)]
pub enum Failure {
    /// Report this one-line message and exit 1.
    Message(String),
    /// The reader of stdout went away (`| head`): exit quietly.
    BrokenPipe,
    /// Stopped by this signal (SIGINT, SIGTERM) after finishing cleanly: exit 128 + it,
    /// as the shell reports a command killed by it.
    Interrupted(u8),
}

impl Failure {
    /// A message failure.
    pub fn msg(m: impl Into<String>) -> Failure {
        Failure::Message(m.into())
    }

    /// Names `source` (the path or kernel source a command was given) in the message,
    /// unless it already does: every error says what it is about.
    pub fn about(self, source: &Path) -> Failure {
        match self {
            Failure::Message(m) => {
                let name = source.display().to_string();
                if m.contains(&name) {
                    Failure::Message(m)
                } else {
                    Failure::Message(format!("{name}: {m}"))
                }
            }
            other => other,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Message(m) => f.write_str(m),
            Failure::BrokenPipe => f.write_str("the reader of stdout went away"),
            Failure::Interrupted(s) => write!(f, "interrupted by signal {s}"),
        }
    }
}

impl From<FormatError> for Failure {
    fn from(e: FormatError) -> Self {
        Failure::Message(chain(&e))
    }
}

/// A failure of what is read, carried out of an output's writing (whose errors are
/// `io::Error`s) as it is: [`Failure::into_io`], then [`Failure::from_io`] where the
/// output's own errors are worded.
#[derive(Debug)]
struct ReadFailed(Failure);

impl std::fmt::Display for ReadFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ReadFailed {}

impl Failure {
    /// This failure, carried through an output's `io::Error` (see [`Failure::from_io`]).
    pub fn into_io(self) -> std::io::Error {
        std::io::Error::other(ReadFailed(self))
    }

    /// The failure an `io::Error` carries ([`Failure::into_io`]), or the error itself,
    /// the output's own.
    pub fn from_io(e: std::io::Error) -> Result<Failure, std::io::Error> {
        e.downcast::<ReadFailed>().map(|r| r.0)
    }
}

/// An error's message followed by its causes' (`source()`), joined with `: `: the one
/// line a command prints. The library's errors leave their cause (the kernel's error, an
/// I/O error) out of their own message and return it from `source()`; a cause whose
/// text the message already holds is not repeated.
pub use ringtrace::error::with_causes as chain;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_names_the_cause_once() {
        let cause = || std::io::Error::from_raw_os_error(2);
        let text = cause().to_string();
        let e = ringtrace::Error::File { what: "opening", path: "/dev/shm/x.ring".into(), source: cause() };
        assert_eq!(chain(&e), format!("opening /dev/shm/x.ring: {text}"));
        let Failure::Message(m) = Failure::from(FormatError::Io { what: "reading x".into(), source: cause() }) else {
            panic!("a message")
        };
        assert_eq!(m, format!("reading x: {text}"));
        let e = ringtrace::error::KernelError::NotPinned { path: "/sys/fs/bpf/x".into(), source: cause() };
        assert_eq!(chain(&e).matches(&text).count(), 1);
    }
}
