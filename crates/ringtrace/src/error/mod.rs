//! Error types. Every misuse the type system cannot rule out is one of these, with a
//! message that says what was wrong and what is allowed; nothing panics on input.
//!
//! Five types, each an enum to match on, each message one line:
//!
//! * [`Error`]: setting up, attaching, pausing, clocks, files and system calls of the
//!   user-space rings and channels;
//! * [`ReserveError`]: a producer's refusals;
//! * [`ConsumeError`]: reading records and taking snapshots;
//! * [`FormatError`]: bytes of a file or of shared memory that are not a valid ringtrace
//!   format (ring and channel files, snapshot files), and the I/O of reading them;
//! * [`KernelError`]: attaching to and reading the Linux kernel's rings (BPF ring buffer
//!   maps, perf events).
//!
//! An error that wraps another (an `io::Error` from the kernel, say) returns it from
//! [`source()`](std::error::Error::source) and leaves it out of its own message, as the
//! [`std::error::Error`] docs recommend: a reporter that prints the chain of causes
//! names each once. A one-line message with its causes is the messages of the chain
//! joined with `: `.

mod consume;
mod format;
mod kernel;
mod reserve;
mod setup;

#[cfg(test)]
mod tests;

pub use consume::ConsumeError;
pub use format::FormatError;
pub use kernel::{CorruptReason, KernelError};
pub use reserve::ReserveError;
pub use setup::Error;

/// `e`'s message followed by its causes' (`source()`), joined with `: `; a cause whose
/// text the message already holds is not repeated. ringtrace's errors leave their
/// cause out of their own message and return it from `source()`: this is the one line
/// to print where a reporter that walks the chain is not at hand.
///
/// ```
/// let e = ringtrace::MpscRing::open("/nonexistent/ring").unwrap_err();
/// let line = ringtrace::error::with_causes(&e);
/// assert!(line.starts_with(&e.to_string()) && line.contains("No such file"), "{line}");
/// ```
pub fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut message = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = c.source();
    }
    message
}

/// `bytes` as a person reads a file's size: whole MiB or KiB where it is one (`1 MiB`,
/// `1028 KiB`), else bytes.
pub(crate) fn size_text(bytes: u64) -> String {
    match bytes {
        0 => "0 bytes".into(),
        b if b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}
