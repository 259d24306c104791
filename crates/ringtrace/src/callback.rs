//! What every reader hands its caller: the result a consume callback returns
//! ([`Outcome`]), and the records an `iter` call copied out ([`Batch`]).

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

    pub(crate) fn iter(&self) -> Batch<'_> {
        Batch { buf: self, front: 0, back: self.ends.len() }
    }
}

/// The records an `iter` call of a copying reader took, oldest first (double-ended:
/// `.rev()` walks newest first). They are consumed: the reader goes on after them.
pub struct Batch<'a> {
    buf: &'a BatchBuf,
    front: usize,
    back: usize,
}

impl fmt::Debug for Batch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch").field("records", &(self.back - self.front)).finish()
    }
}

impl<'a> Batch<'a> {
    fn at(&self, i: usize) -> &'a [u8] {
        let start = if i == 0 { 0 } else { self.buf.ends[i - 1] };
        &self.buf.bytes[start..self.buf.ends[i]]
    }
}

impl<'a> Iterator for Batch<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        (self.front < self.back).then(|| {
            self.front += 1;
            self.at(self.front - 1)
        })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.back - self.front, Some(self.back - self.front))
    }
}

impl DoubleEndedIterator for Batch<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        (self.front < self.back).then(|| {
            self.back -= 1;
            self.at(self.back)
        })
    }
}

impl ExactSizeIterator for Batch<'_> {}
