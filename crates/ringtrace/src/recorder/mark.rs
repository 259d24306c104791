//! [`ReadMark`]: where an [`OverwriteConsumer`] is, to read again from there.
//!
//! A reader that passes records on (to a network, a file) and may have to send them
//! again (the far end did not take them, or the reader restarted) marks where it was
//! when it last knew its records safe ([`OverwriteConsumer::mark`]), and rewinds to that
//! mark ([`OverwriteConsumer::rewind`]). Records producers overwrote meanwhile are gone:
//! they are counted as overwritten, and the numbers of
//! [`OverwriteConsumer::consume_numbered`] skip them, so that what is read again carries
//! the numbers it had.
//!
//! [`OverwriteConsumer`]: super::OverwriteConsumer
//! [`OverwriteConsumer::mark`]: super::OverwriteConsumer::mark
//! [`OverwriteConsumer::rewind`]: super::OverwriteConsumer::rewind
//! [`OverwriteConsumer::consume_numbered`]: super::OverwriteConsumer::consume_numbered

/// Where an [`OverwriteConsumer`] was: its read position and its counts there
/// ([`OverwriteConsumer::mark`]). Plain numbers, so that it can be stored (a reader
/// keeps it in a file across restarts) and given to [`OverwriteConsumer::rewind`].
///
/// [`OverwriteConsumer`]: super::OverwriteConsumer
/// [`OverwriteConsumer::mark`]: super::OverwriteConsumer::mark
/// [`OverwriteConsumer::rewind`]: super::OverwriteConsumer::rewind
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadMark {
    /// The read position (bytes since the ring was created, a record boundary).
    pub position: u64,
    /// Records delivered before it.
    pub consumed: u64,
    /// Discarded reservations stepped over before it.
    pub skipped: u64,
    /// Records overwritten before the consumer could read them, before it.
    pub overwritten_unread: u64,
}

impl ReadMark {
    /// The number of the first record at or after the mark (as
    /// [`consume_numbered`](super::OverwriteConsumer::consume_numbered) gives it): the
    /// committed records before it, read or overwritten.
    pub fn next_number(&self) -> u64 {
        self.consumed.saturating_add(self.overwritten_unread)
    }
}
