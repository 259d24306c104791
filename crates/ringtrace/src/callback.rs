//! What every reader hands its caller: the result a consume callback returns
//! ([`Outcome`]), and the iterator over records copied out of a ring ([`Iter`]).

#![cfg(not(loom))]

use std::convert::Infallible;
use std::fmt;

/// What a consume or poll callback returns: `()` for a callback that cannot fail (no
/// type annotation needed), or `Result<(), E>`, whose error stops the call and comes
/// back as [`ConsumeError::Callback`](crate::ConsumeError::Callback).
///
/// ```
/// let ring = ringtrace::MpscRing::new(4096)?;
/// let mut p = ring.producer()?;
/// p.output(b"one", ringtrace::Wakeup::Default)?;
/// p.output(b"two", ringtrace::Wakeup::Default)?;
/// let mut c = ring.consumer()?;
///
/// let mut seen = Vec::new();
/// c.consume_n(1, |rec| seen.push(rec.to_vec()))?;               // cannot fail
/// let stop = c.consume(|rec| if rec == b"two" { Err("stop") } else { Ok(()) });
/// assert!(matches!(stop, Err(ringtrace::ConsumeError::Callback("stop"))));
/// assert_eq!(seen, [b"one".to_vec()]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Outcome {
    /// The callback's error type (`Infallible` for `()`).
    type Error;
    /// `Ok(())` to go on, `Err(e)` to stop.
    fn into_result(self) -> Result<(), Self::Error>;
}

impl Outcome for () {
    type Error = Infallible;
    #[inline(always)]
    fn into_result(self) -> Result<(), Infallible> {
        Ok(())
    }
}

impl<E> Outcome for Result<(), E> {
    type Error = E;
    #[inline(always)]
    fn into_result(self) -> Result<(), E> {
        self
    }
}

/// Records copied out of a ring, in order, reused from call to call.
#[derive(Debug, Default)]
pub(crate) struct BatchBuf {
    bytes: Vec<u8>,
    /// The end of each record in `bytes`.
    ends: Vec<usize>,
}

impl BatchBuf {
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    pub(crate) fn push(&mut self, rec: &[u8]) {
        self.bytes.extend_from_slice(rec);
        self.ends.push(self.bytes.len());
    }

    pub(crate) fn iter(&self) -> Iter<'_> {
        Iter::new(self)
    }
}

impl Held for BatchBuf {
    fn count(&self) -> usize {
        self.ends.len()
    }
    fn record(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

/// Records held in order and read by index: what an [`Iter`] walks.
pub(crate) trait Held {
    fn count(&self) -> usize;
    /// Record `i` (`i < count()`).
    fn record(&self, i: usize) -> &[u8];
}

/// An iterator over records copied out of a ring: those an `iter` call of a copying
/// reader took (consumed: the reader goes on after them), or those a
/// [`Snapshot`](crate::Snapshot) holds. Oldest first; double-ended (`.rev()` walks
/// newest first) and exact-size.
pub struct Iter<'a> {
    held: &'a dyn Held,
    front: usize,
    back: usize,
}

impl fmt::Debug for Iter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Iter").field("records", &(self.back - self.front)).finish()
    }
}

impl<'a> Iter<'a> {
    pub(crate) fn new(held: &'a dyn Held) -> Self {
        Iter { held, front: 0, back: held.count() }
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        (self.front < self.back).then(|| {
            self.front += 1;
            self.held.record(self.front - 1)
        })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.back - self.front, Some(self.back - self.front))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        (self.front < self.back).then(|| {
            self.back -= 1;
            self.held.record(self.back)
        })
    }
}

impl ExactSizeIterator for Iter<'_> {}
