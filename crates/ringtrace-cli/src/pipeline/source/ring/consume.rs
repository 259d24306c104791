//! A ring file's consumer (`consume`; a BPF map's is in [`super::super::bpf`]). A record's space is
//! handed back only once its line is written to stdout: an interrupted consume loses
//! nothing (a killed one may leave the last lines it printed in the ring, for the next
//! consumer to print again).
//!
//! * A discard ring is read in place (`iter`), a pass of lines printed and flushed, then
//!   handed back (`release`); if stdout fails, the pass is put back (`unread`) for the
//!   next consumer.
//! * An overwrite ring's records are handed back when the consume call
//!   that read them returns, so each line is written straight to stdout before the next
//!   record is read. A write error loses the one record being written, and says so.

use std::os::fd::OwnedFd;

use ringtrace::config::{Discard, Mpsc, Overwrite, ProducerKind, Spsc};
use ringtrace::inspect::{RingKind, RingMode};
use ringtrace::{Access, Error, RingBuf};

use super::super::stop::Stop;
use super::super::Consume;
use crate::cleanup;
use crate::failure::Failure;
use crate::output::{stdout_err, warn};
use crate::pipeline::output::Sink;
use crate::pipeline::record::{Raw, Record};

/// Consumes the ring at `fd` (of `kind` and `mode`) into `out`.
pub fn run(kind: RingKind, mode: RingMode, fd: OwnedFd, opts: &Consume, out: &mut dyn Sink) -> Result<(), Failure> {
    cleanup::stop_gracefully();
    match (kind, mode) {
        (RingKind::Mpsc, RingMode::Discard) => discard::<Mpsc>(fd, opts, out),
        (RingKind::Spsc, RingMode::Discard) => discard::<Spsc>(fd, opts, out),
        (RingKind::Mpsc, RingMode::Overwrite) => overwrite::<Mpsc>(fd, opts, out),
        (RingKind::Spsc, RingMode::Overwrite) => overwrite::<Spsc>(fd, opts, out),
    }
}

/// A consumed record: its payload alone.
fn payload(payload: &[u8]) -> Record<'_> {
    Record::Raw(Raw { payload, at: None, origin: None })
}

fn attach_err(e: Error) -> Failure {
    match e {
        Error::ConsumerAttached { pid } => Failure::msg(format!(
            "the ring already has a consumer (pid {pid}): a ring has one consumer at a time (tail and snapshot read without consuming)"
        )),
        e => Failure::msg(format!("cannot attach as the consumer: {}", crate::failure::chain(&e))),
    }
}

fn discard<K: ProducerKind>(fd: OwnedFd, opts: &Consume, out: &mut dyn Sink) -> Result<(), Failure> {
    let ring = RingBuf::<K, Discard>::from_fd_owned_by(fd, Access::Full, opts.owners)
        .map_err(|e| Failure::msg(format!("cannot open the ring: {}", crate::failure::chain(&e))))?;
    let mut c = ring.consumer().map_err(attach_err)?;
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
            if let Err(e) = out.write(&payload(rec)) {
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
            // What is left is unread: not written.
            out.forget();
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
                c.consume_n(1, |rec: &[u8]| out.write(&payload(rec)).and_then(|()| out.flush())).map_err(
                    |e| match e {
                        ringtrace::ConsumeError::Callback(e) => crate::output::lost_one(e),
                        e => Failure::msg(format!("reading the ring: {}", crate::failure::chain(&e))),
                    },
                )?;
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

fn overwrite<K: ProducerKind>(fd: OwnedFd, opts: &Consume, out: &mut dyn Sink) -> Result<(), Failure> {
    let ring = RingBuf::<K, Overwrite>::from_fd_owned_by(fd, Access::Full, opts.owners)
        .map_err(|e| Failure::msg(format!("cannot open the ring: {}", crate::failure::chain(&e))))?;
    let mut c = ring.consumer().map_err(attach_err)?;
    // Line by line, straight to stdout: a consume call hands back what it read when it
    // returns, so each record is written before the next is read.
    let mut stop = Stop::new(opts);
    let result = loop {
        let nap = match stop.check() {
            Ok(Some(nap)) => nap,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        let gone = c.is_disconnected();
        let n = match c.consume_n(stop.max(), |rec: &[u8]| out.write(&payload(rec)).and_then(|()| out.flush())) {
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
