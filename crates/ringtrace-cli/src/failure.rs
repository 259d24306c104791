//! The error every command returns: a one-line message, or a broken pipe (the reader
//! of stdout went away, which is not an error to report).

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
        Failure::Message(e.to_string())
    }
}
