//! `ringtrace tail`: the newest records, and with `--follow` new ones as they are
//! committed (every 50 ms).
//!
//! Channel files: the newest across all slots, merged; `--follow` sorts the records
//! each pass finds (exact within a pass; a record committed after a newer one of
//! another slot was printed is printed when it shows up). BPF maps: a consumer, which
//! hands the space of the records it prints back to the kernel.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

use ringtrace::inspect::channel::ChannelFile;
use ringtrace::inspect::RingFile;
use ringtrace::Snapshot;

use crate::failure::{chain, Failure};
use crate::follow::{Follower, POLL};
use crate::merge::{label, merge, read_all, rings, warn_slot};
use crate::output::{stdout_err, write_output};
use crate::records::{warn_corrupt, write_record, write_records, Format};
use crate::source::Source;

pub fn run(
    source: Source,
    count: usize,
    follow: bool,
    format: Format,
    timeout: Option<Duration>,
) -> Result<(), Failure> {
    let idle = Idle { timeout, last: Instant::now() };
    match source {
        Source::Ring(ring) => ring_tail(&ring, count, follow, format, idle),
        Source::Channel(ch) => channel_tail(&ch, count, follow, format, idle),
        Source::Snapshot(snap) => snapshot_tail(&snap, count, follow, format),
        Source::Bpf(map) => {
            let mut reader = crate::bpf::take(map)?;
            let limit = if follow { None } else { Some(count as u64) };
            crate::bpf::drain(&mut reader, limit, timeout, format).map(drop)
        }
        Source::Traced(t) => {
            if follow {
                return Err(Failure::msg("--follow reads rings; a trace is read whole (decode prints it all)"));
            }
            crate::traced::print(&t.read()?, crate::traced::line_format(format)?, Some(count), false, None)
        }
    }
}

/// `--timeout` of a follow: when the last new record was printed.
struct Idle {
    timeout: Option<Duration>,
    last: Instant,
}

impl Idle {
    /// Notes `n` new records; true when the follow should stop.
    fn over(&mut self, n: usize) -> bool {
        if n > 0 {
            self.last = Instant::now();
        }
        self.timeout.is_some_and(|t| self.last.elapsed() >= t)
    }
}

fn ring_tail(ring: &RingFile<File>, count: usize, follow: bool, format: Format, mut idle: Idle) -> Result<(), Failure> {
    let mut out = BufWriter::new(std::io::stdout().lock());
    // Following reads in order, waiting at unfinished records.
    let records = if follow { ring.records_from(0, true)? } else { ring.records()? };
    if !follow {
        warn_corrupt(&records, "");
    }
    let skip = records.len().saturating_sub(count);
    for r in records.iter().skip(skip) {
        write_record(&mut out, format, &r).map_err(stdout_err)?;
    }
    out.flush().map_err(stdout_err)?;
    if !follow {
        return Ok(());
    }
    let mut follower = Follower::new(ring, &records, String::new());
    loop {
        std::thread::sleep(POLL);
        let records = follower.poll(ring)?;
        for r in records.iter() {
            write_record(&mut out, format, &r).map_err(stdout_err)?;
        }
        out.flush().map_err(stdout_err)?;
        if idle.over(records.len()) {
            return Ok(());
        }
    }
}

fn channel_tail(
    ch: &ChannelFile<File>,
    count: usize,
    follow: bool,
    format: Format,
    mut idle: Idle,
) -> Result<(), Failure> {
    let h = *ch.header();
    let rings = rings(ch);
    let mut out = BufWriter::new(std::io::stdout().lock());
    // Each slot's ring followed as a ring file is.
    let mut first = Vec::with_capacity(rings.len());
    let mut followed = Vec::with_capacity(rings.len());
    if follow {
        for (i, ring) in &rings {
            match ring.records_from(0, true) {
                Ok(records) => {
                    followed.push((*i, ring, Follower::new(ring, &records, label(*i))));
                    first.push((*i, records));
                }
                Err(e) => warn_slot(*i, &chain(&e)),
            }
        }
    } else {
        first = read_all(&rings);
    }
    let merged = merge(&h, &first);
    let skip = merged.len().saturating_sub(count);
    for e in &merged[skip..] {
        e.write(&mut out, format).map_err(stdout_err)?;
    }
    out.flush().map_err(stdout_err)?;
    if !follow {
        return Ok(());
    }
    loop {
        std::thread::sleep(POLL);
        let mut pass = Vec::with_capacity(followed.len());
        // A slot that cannot be read any more is warned about once and left.
        followed.retain_mut(|(i, ring, follower)| match follower.poll(ring) {
            Ok(records) => {
                pass.push((*i, records));
                true
            }
            Err(Failure::Message(e)) => {
                warn_slot(*i, &e);
                false
            }
            Err(Failure::BrokenPipe | Failure::Interrupted(_)) => false,
        });
        let merged = merge(&h, &pass);
        for e in &merged {
            e.write(&mut out, format).map_err(stdout_err)?;
        }
        out.flush().map_err(stdout_err)?;
        if idle.over(merged.len()) {
            return Ok(());
        }
    }
}

fn snapshot_tail(snap: &Snapshot, count: usize, follow: bool, format: Format) -> Result<(), Failure> {
    if follow {
        return Err(Failure::msg("a snapshot file does not change: --follow reads ring and channel files"));
    }
    let skip = snap.len().saturating_sub(count);
    write_output(None, |w| write_records(w, format, snap.records().skip(skip), false))
}
