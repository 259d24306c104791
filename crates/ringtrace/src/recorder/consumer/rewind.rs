//! [`OverwriteConsumer::mark`] and [`OverwriteConsumer::rewind`] (see [`ReadMark`]).

use crate::config::ProducerKind;
use crate::error::Error;

use super::OverwriteConsumer;
use crate::recorder::mark::ReadMark;

/// Records start at multiples of 8: every record's footprint is one (the crate's
/// `format::record::footprint`).
const BOUNDARY: u64 = 8;

impl<K: ProducerKind> OverwriteConsumer<K> {
    /// Where the consumer is now, to [`rewind`](Self::rewind) to later.
    pub fn mark(&self) -> ReadMark {
        ReadMark {
            position: self.pos,
            consumed: self.consumed,
            skipped: self.skipped,
            overwritten_unread: self.overwritten_unread,
        }
    }

    /// Reads again from `mark`, taken earlier on this ring by this consumer or one
    /// before it (in this process or another): the records after it that producers have
    /// not overwritten since are delivered again, with the numbers they had; those
    /// overwritten are counted in [`overwritten_unread`](Self::overwritten_unread) as
    /// the next read finds them gone.
    ///
    /// [`Error::InvalidMark`] for a mark past the consumer's position or counts, or not
    /// on a record boundary; the consumer is left as it was. A mark taken on another
    /// ring at a position this one has is read as any position is: each record is
    /// checked, and what does not parse is [`ConsumeError::Corrupt`], never a read out
    /// of bounds.
    ///
    /// [`ConsumeError::Corrupt`]: crate::ConsumeError::Corrupt
    ///
    /// ```
    /// use ringtrace::{FlightRecorder, Wakeup};
    ///
    /// let ring = FlightRecorder::new(4096)?;
    /// let mut p = ring.producer()?;
    /// let mut c = ring.consumer()?;
    /// p.output(b"sent", Wakeup::Default)?;
    /// c.consume(|_| ())?;
    /// let safe = c.mark();
    /// p.output(b"lost in transit", Wakeup::Default)?;
    /// c.consume(|_| ())?;
    /// c.rewind(safe)?;
    /// let mut again = Vec::new();
    /// c.consume_numbered(usize::MAX, |n, rec| again.push((n, rec.to_vec())))?;
    /// assert_eq!(again, [(1, b"lost in transit".to_vec())]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rewind(&mut self, mark: ReadMark) -> Result<(), Error> {
        let now = self.mark();
        let invalid = |reason: String| Err(Error::InvalidMark { reason });
        if mark.position > now.position {
            return invalid(format!("position {} is past the consumer's, {}", mark.position, now.position));
        }
        if mark.position % BOUNDARY != 0 {
            return invalid(format!("position {} is not a record boundary", mark.position));
        }
        if mark.consumed > now.consumed
            || mark.skipped > now.skipped
            || mark.overwritten_unread > now.overwritten_unread
        {
            return invalid(format!("its counts {mark:?} are past the consumer's, {now:?}"));
        }
        self.disarm();
        self.pos = mark.position;
        self.consumed = mark.consumed;
        self.skipped = mark.skipped;
        self.overwritten_unread = mark.overwritten_unread;
        self.passed = mark.next_number();
        self.publish();
        Ok(())
    }
}
