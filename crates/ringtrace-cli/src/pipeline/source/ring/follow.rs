//! Following one ring as producers write it (`tail --follow`): each poll reads what
//! was committed since the last, waits a while at a record still being written, and
//! reports on stderr what was overwritten or consumed before it could be printed.

use std::time::{Duration, Instant};

use ringtrace::inspect::{Records, RingFile, RingMode, Source as ByteSource};

use crate::failure::Failure;
use crate::output::{eprint_line, warn_corrupt};

/// How often `--follow` reads the positions again.
pub const POLL: Duration = Duration::from_millis(50);
/// How long `--follow` waits at a record still being written before it steps over it
/// (its producer may have died), measured from the first poll that found it unfinished.
const PATIENCE: Duration = Duration::from_secs(1);

/// What `--follow` knows between polls (of one ring).
#[derive(Debug)]
pub struct Follower {
    /// Put before the messages on stderr (`slot 3: ` for a channel's ring).
    label: String,
    /// The next record boundary to read.
    from: u64,
    /// Overwrite mode: committed records known before `from` (overwritten, or seen).
    known: Option<u64>,
    /// Since when the record at `from` has been found unfinished.
    stuck_since: Option<Instant>,
    overwrite: bool,
}

impl Follower {
    /// Follows `ring` from after `first`, the records already printed.
    pub fn new<S: ByteSource>(ring: &RingFile<S>, first: &Records, label: String) -> Follower {
        let overwrite = ring.header().mode == RingMode::Overwrite;
        let known = first.retired_before().map(|r| r + first.len() as u64);
        Follower { label, from: first.resume_at(), known, stuck_since: None, overwrite }
    }

    /// Reads the records committed since the last poll, reporting on stderr those that
    /// were overwritten or consumed before they could be read.
    pub fn poll<S: ByteSource>(&mut self, ring: &RingFile<S>) -> Result<Records, Failure> {
        let mut records = ring.records_from(self.from, true)?;
        if records.resume_at() == self.from && records.resume_at() < records.window().1 {
            // Stuck at an unfinished record.
            let waited = self.stuck_since.get_or_insert_with(Instant::now).elapsed();
            if waited >= PATIENCE {
                records = ring.records_from(self.from, false)?;
                eprint_line(format_args!(
                    "ringtrace: {}stepped over {} record(s) still unfinished after {} ms, from position {}",
                    self.label,
                    records.unfinished_count(),
                    waited.as_millis(),
                    self.from
                ));
            }
        }
        if records.resume_at() != self.from {
            self.stuck_since = None;
        }
        warn_corrupt(&records, &self.label);
        if records.missed_bytes() > 0 {
            match (self.overwrite, records.retired_before(), self.known) {
                (true, Some(retired), Some(known)) => {
                    let lost = retired.saturating_sub(known);
                    eprint_line(format_args!(
                        "ringtrace: {}{lost} record(s) were overwritten before they could be printed",
                        self.label
                    ));
                }
                _ => eprint_line(format_args!(
                    "ringtrace: {}{} bytes of records were consumed or overwritten before they could be printed",
                    self.label,
                    records.missed_bytes()
                )),
            }
            self.known = records.retired_before().map(|r| r + records.len() as u64);
        } else if let Some(k) = &mut self.known {
            *k += records.len() as u64;
        }
        self.from = records.resume_at();
        Ok(records)
    }
}
