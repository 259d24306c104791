//! When a consumer stops: a count reached, a time without a record, a signal.

use std::time::{Duration, Instant};

use super::Consume;
use crate::cleanup;
use crate::failure::Failure;

/// The longest sleep between looks for a stop signal.
const NAP: Duration = Duration::from_millis(100);

/// A consumer's count and idle time.
#[derive(Debug)]
pub struct Stop {
    timeout: Option<Duration>,
    left: u64,
    last: Instant,
}

impl Stop {
    pub fn new(opts: &Consume) -> Self {
        Stop { timeout: opts.timeout, left: opts.count.unwrap_or(u64::MAX), last: Instant::now() }
    }

    /// Counts `n` records written.
    pub fn printed(&mut self, n: u64) {
        self.left -= n.min(self.left);
        if n > 0 {
            self.last = Instant::now();
        }
    }

    /// The most to read in one pass.
    pub fn max(&self) -> usize {
        usize::try_from(self.left).unwrap_or(usize::MAX)
    }

    /// `Ok(None)` to stop now, else how long to sleep at most before looking again;
    /// a signal's request to stop is an error.
    pub fn check(&self) -> Result<Option<Duration>, Failure> {
        if let Some(signal) = cleanup::stop_requested() {
            return Err(Failure::Interrupted(signal));
        }
        if self.left == 0 {
            return Ok(None);
        }
        let waited = self.last.elapsed();
        match self.timeout {
            Some(t) if waited >= t => Ok(None),
            Some(t) => Ok(Some((t - waited).min(NAP))),
            None => Ok(Some(NAP)),
        }
    }
}
