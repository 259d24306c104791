//! `ringtrace tail`: the newest records, and with `--follow` new ones as they are
//! committed.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use ringtrace::inspect::{Records, RingFile, RingMode, Source};

use crate::format::{eprint_line, stdout_err, write_record, Failure, Format};

/// How often `--follow` reads the positions again.
pub const POLL: Duration = Duration::from_millis(50);
/// How long `--follow` waits at a record still being written before it steps over it
/// (its producer may have died), measured from the first poll that found it unfinished.
const PATIENCE: Duration = Duration::from_secs(1);

pub fn run(path: &Path, count: usize, follow: bool, format: Format) -> Result<(), Failure> {
    if let Some(k) = crate::kernel::parse(path)? {
        return crate::kernel::tail(&k, count, follow, format);
    }
    if crate::channel::is_channel(path)? {
        return crate::channel::tail(path, count, follow, format);
    }
    if crate::snapfile::is_snapshot_file(path) {
        return crate::snapfile::tail(path, count, follow, format);
    }
    let ring = crate::channel::open_ring(path)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    if !follow {
        let records = ring.records()?;
        warn_corrupt(&records, "");
        let skip = records.len().saturating_sub(count);
        for r in records.iter().skip(skip) {
            write_record(&mut out, format, &r).map_err(stdout_err)?;
        }
        return out.flush().map_err(stdout_err);
    }
    // Follow: in order, waiting at unfinished records (for at most `PATIENCE` polls).
    let records = ring.records_from(0, true)?;
    let skip = records.len().saturating_sub(count);
    for r in records.iter().skip(skip) {
        write_record(&mut out, format, &r).map_err(stdout_err)?;
    }
    out.flush().map_err(stdout_err)?;
    let mut follower = Follower::new(&ring, &records, String::new());
    loop {
        std::thread::sleep(POLL);
        let records = follower.poll(&ring)?;
        for r in records.iter() {
            write_record(&mut out, format, &r).map_err(stdout_err)?;
        }
        out.flush().map_err(stdout_err)?;
    }
}

/// What `--follow` knows between polls (of one ring).
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
    pub fn new<S: Source>(ring: &RingFile<S>, first: &Records, label: String) -> Follower {
        let overwrite = ring.header().mode == RingMode::Overwrite;
        let known = first.retired_before().map(|r| r + first.len() as u64);
        Follower { label, from: first.resume_at(), known, stuck_since: None, overwrite }
    }

    /// Reads the records committed since the last poll, reporting on stderr those that
    /// were overwritten or consumed before they could be read.
    pub fn poll<S: Source>(&mut self, ring: &RingFile<S>) -> Result<Records, Failure> {
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

/// A corrupt record header is reported, not fatal: the records before it are good.
/// `label` goes before the message (`slot 3: ` for a channel's ring).
pub fn warn_corrupt(records: &Records, label: &str) {
    if let Some(c) = records.corrupt() {
        eprint_line(format_args!(
            "ringtrace: warning: {label}corrupt record header {:#018x} at position {}: the records after it are not shown",
            c.header, c.pos
        ));
    }
}
