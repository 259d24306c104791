//! `ringtrace consume`: the consumer of a ring file or a BPF map. A record's space is
//! handed back only once its line is written to stdout: an interrupted consume loses
//! nothing (a killed one may leave the last lines it printed in the ring, for the next
//! consumer to print again).
//!
//! * A discard ring is read in place (`iter`), a pass of lines printed and flushed, then
//!   handed back (`release`); if stdout fails, the pass is put back (`unread`) for the
//!   next consumer.
//! * An overwrite ring's and a BPF map's records are handed back when the consume call
//!   that read them returns, so each line is written straight to stdout before the next
//!   record is read. A write error loses the one record being written, and says so.

use std::io::{self, BufWriter, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use ringtrace::config::{Discard, Mpsc, Overwrite, ProducerKind, Spsc};
use ringtrace::inspect::{RingKind, RingMode};
use ringtrace::{Access, Error, RingBuf};

use crate::cleanup;
use crate::failure::Failure;
use crate::output::{stdout_err, warn};
use crate::records::{escape_text, hex, Format};
use crate::source::Source;

/// What `consume` was asked to do.
#[derive(Debug)]
pub struct Options {
    /// Stop after this many records.
    pub count: Option<u64>,
    /// Go on when every producer has gone.
    pub follow: bool,
    /// Stop after this long without a record.
    pub timeout: Option<Duration>,
    pub format: Format,
    /// Whose ring files to attach to.
    pub owners: ringtrace::Owners,
}

/// The longest sleep between looks for a stop signal.
const NAP: Duration = Duration::from_millis(100);

pub fn run(path: &Path, source: Source, opts: &Options) -> Result<(), Failure> {
    let file = match source {
        Source::Ring(file) => file,
        Source::Bpf(map) => {
            let mut reader = crate::bpf::take(map)?;
            crate::bpf::drain(&mut reader, opts.count, opts.timeout, opts.format)?;
            return Ok(());
        }
        other => {
            return Err(Failure::msg(format!(
                "{} is {}: consume drains ring files and BPF maps (tail and snapshot read the others)",
                path.display(),
                other.kind()
            )))
        }
    };
    let (kind, mode) = (file.header().kind, file.header().mode);
    let fd = crate::source::reopen(path, file.source())?;
    drop(file);
    cleanup::stop_gracefully();
    match (kind, mode) {
        (RingKind::Mpsc, RingMode::Discard) => discard::<Mpsc>(fd, opts),
        (RingKind::Spsc, RingMode::Discard) => discard::<Spsc>(fd, opts),
        (RingKind::Mpsc, RingMode::Overwrite) => overwrite::<Mpsc>(fd, opts),
        (RingKind::Spsc, RingMode::Overwrite) => overwrite::<Spsc>(fd, opts),
    }
}

fn attach_err(e: Error) -> Failure {
    match e {
        Error::ConsumerAttached { pid } => Failure::msg(format!(
            "the ring already has a consumer (pid {pid}): a ring has one consumer at a time (tail and snapshot read without consuming)"
        )),
        e => Failure::msg(format!("cannot attach as the consumer: {}", crate::failure::chain(&e))),
    }
}

/// When the loop stops: a count reached, an idle timeout, a signal.
struct Stop<'a> {
    opts: &'a Options,
    left: u64,
    last: Instant,
}

impl<'a> Stop<'a> {
    fn new(opts: &'a Options) -> Self {
        Stop { opts, left: opts.count.unwrap_or(u64::MAX), last: Instant::now() }
    }

    /// Counts `n` records printed.
    fn printed(&mut self, n: u64) {
        self.left -= n.min(self.left);
        if n > 0 {
            self.last = Instant::now();
        }
    }

    /// The most to read in one pass.
    fn max(&self) -> usize {
        usize::try_from(self.left).unwrap_or(usize::MAX)
    }

    /// `Ok(None)` to stop now, else how long to sleep at most before looking again;
    /// a signal's request to stop is an error.
    fn check(&self) -> Result<Option<Duration>, Failure> {
        if let Some(signal) = cleanup::stop_requested() {
            return Err(Failure::Interrupted(signal));
        }
        if self.left == 0 {
            return Ok(None);
        }
        let waited = self.last.elapsed();
        match self.opts.timeout {
            Some(t) if waited >= t => Ok(None),
            Some(t) => Ok(Some((t - waited).min(NAP))),
            None => Ok(Some(NAP)),
        }
    }
}

fn discard<K: ProducerKind>(fd: OwnedFd, opts: &Options) -> Result<(), Failure> {
    let ring = RingBuf::<K, Discard>::from_fd_owned_by(fd, Access::Full, opts.owners)
        .map_err(|e| Failure::msg(format!("cannot open the ring: {}", crate::failure::chain(&e))))?;
    let mut c = ring.consumer().map_err(attach_err)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut stop = Stop::new(opts);
    loop {
        let nap = match stop.check() {
            Ok(Some(nap)) => nap,
            Ok(None) => break,
            Err(e) => {
                out.flush().map_err(stdout_err)?;
                return Err(e);
            }
        };
        // Seen before the pass: what the producers committed before they left is read
        // in it (the look acquires their detaching).
        let gone = c.is_disconnected();
        let (max, mut n, mut failed) = (stop.max(), 0usize, None);
        for rec in c.iter() {
            if let Err(e) = write_payload(&mut out, opts.format, rec) {
                failed = Some(e);
                break;
            }
            n += 1;
            if n == max {
                break;
            }
        }
        // The lines first, then the space: a record is handed back once it is printed.
        // If stdout fails, the records of this pass stay in the ring for the next
        // consumer (one may print some of them again, never skip one).
        if let Some(e) = failed.or_else(|| out.flush().err()) {
            c.unread();
            // Dropped without the flush a `BufWriter` tries: what is left is unread.
            let _ = out.into_parts();
            return Err(stdout_err(e));
        }
        c.release();
        stop.printed(n as u64);
        if n > 0 {
            continue;
        }
        if c.ready() {
            // Something at the position the iterator does not step over: a corrupt
            // header (reported here) or a record committed just now (printed).
            // Written through (the buffer is empty): the record is consumed once printed.
            let k =
                c.consume_n(1, |rec: &[u8]| write_payload(out.get_mut(), opts.format, rec)).map_err(|e| match e {
                    ringtrace::ConsumeError::Callback(e) => crate::output::lost_one(e),
                    e => Failure::msg(format!("reading the ring: {}", crate::failure::chain(&e))),
                })?;
            stop.printed(k as u64);
            continue;
        }
        if gone {
            if !opts.follow {
                break;
            }
            // Nobody to wake us: look again after a nap.
            std::thread::sleep(nap);
            continue;
        }
        c.wait(Some(nap)).map_err(|e| Failure::msg(format!("waiting for records: {e}")))?;
    }
    out.flush().map_err(stdout_err)
}

fn overwrite<K: ProducerKind>(fd: OwnedFd, opts: &Options) -> Result<(), Failure> {
    let ring = RingBuf::<K, Overwrite>::from_fd_owned_by(fd, Access::Full, opts.owners)
        .map_err(|e| Failure::msg(format!("cannot open the ring: {}", crate::failure::chain(&e))))?;
    let mut c = ring.consumer().map_err(attach_err)?;
    // Line by line, straight to stdout: a consume call hands back what it read when it
    // returns, so each record is written before the next is read.
    let mut out = io::stdout().lock();
    let mut stop = Stop::new(opts);
    let result = loop {
        let nap = match stop.check() {
            Ok(Some(nap)) => nap,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        let gone = c.is_disconnected();
        let n = match c.consume_n(stop.max(), |rec: &[u8]| write_payload(&mut out, opts.format, rec)) {
            Ok(n) => n,
            Err(ringtrace::ConsumeError::Callback(e)) => break Err(crate::output::lost_one(e)),
            Err(e) => break Err(Failure::msg(format!("reading the ring: {}", crate::failure::chain(&e)))),
        };
        stop.printed(n as u64);
        if n > 0 {
            continue;
        }
        if gone {
            if !opts.follow {
                break Ok(());
            }
            std::thread::sleep(nap);
            continue;
        }
        if let Err(e) = c.wait(Some(nap)) {
            break Err(Failure::msg(format!("waiting for records: {e}")));
        }
    };
    let missed = c.overwritten_unread();
    if missed > 0 {
        warn(&format!("{missed} records were overwritten by the producers before they could be read"));
    }
    result
}

/// One consumed record as a line: text and hex as `tail` prints them; JSON as
/// `{"len":N,"data":"..."}` (or `"hex"` for a payload that is not UTF-8).
fn write_payload(w: &mut impl Write, format: Format, payload: &[u8]) -> io::Result<()> {
    let mut line = String::with_capacity(payload.len() + 32);
    match format {
        Format::Text => escape_text(&mut line, payload),
        Format::Hex => hex(&mut line, payload),
        Format::Json => {
            let body = match std::str::from_utf8(payload) {
                Ok(s) => serde_json::json!({ "len": payload.len(), "data": s }),
                Err(_) => {
                    let mut h = String::with_capacity(payload.len() * 2);
                    hex(&mut h, payload);
                    serde_json::json!({ "len": payload.len(), "hex": h })
                }
            };
            line = body.to_string();
        }
    }
    line.push('\n');
    w.write_all(line.as_bytes())
}
