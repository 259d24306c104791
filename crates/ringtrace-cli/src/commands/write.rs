//! `ringtrace write`: appends records to a ring file as one more producer, one record
//! per input line (or per input with `--whole`). Records the ring refuses are counted
//! and reported, never dropped silently.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ringtrace::config::{Discard, Mpsc, Overwrite, ProducerKind, Spsc};
use ringtrace::inspect::{RingKind, RingMode};
use ringtrace::{Access, ReserveError, RingBuf, Wakeup};

use crate::cli::Wait;
use crate::failure::{chain, Failure};
use crate::output::eprint_line;
use crate::pipeline::source::RecordSource;

/// What `write` was asked to do.
#[derive(Debug)]
pub struct Options {
    /// Inputs (`-` or none: stdin).
    pub inputs: Vec<PathBuf>,
    /// Each input is one record, not one per line.
    pub whole: bool,
    /// Refused records are reported but are not an error.
    pub drop: bool,
    /// Wait for room (`--wait`).
    pub wait: Option<Wait>,
    /// Whose ring files to attach to.
    pub owners: ringtrace::Owners,
}

/// What happened to the records.
#[derive(Debug, Default)]
struct Counts {
    written: u64,
    bytes: u64,
    /// Refused for want of room: ring full (discard), or paused or blocked by a record
    /// still being written (overwrite).
    no_room: u64,
    too_large: u64,
    /// Refused because the time to wait ran out (`--wait=TIMEOUT`).
    timed_out: u64,
    /// Refused because the consumer went away while `--wait` waited for room.
    no_consumer: u64,
}

pub fn run(path: &Path, source: &mut dyn RecordSource, opts: &Options) -> Result<(), Failure> {
    let Some(ring) = source.attach(path) else {
        return Err(Failure::msg(format!("{} is {}: write appends to ring files", path.display(), source.kind())));
    };
    // The file decides the ring's kind and mode, and so the type to open it with.
    let (kind, mode, fd) = ring?;
    let counts = match (kind, mode) {
        (RingKind::Mpsc, RingMode::Discard) => write_discard::<Mpsc>(fd, opts)?,
        (RingKind::Mpsc, RingMode::Overwrite) => write_overwrite::<Mpsc>(fd, opts)?,
        (RingKind::Spsc, RingMode::Discard) => write_discard::<Spsc>(fd, opts)?,
        (RingKind::Spsc, RingMode::Overwrite) => write_overwrite::<Spsc>(fd, opts)?,
    };
    let refused = counts.no_room + counts.too_large + counts.timed_out + counts.no_consumer;
    let mut report = format!("{}: wrote {} record(s) ({} bytes)", path.display(), counts.written, counts.bytes);
    if refused > 0 {
        report += &format!("; refused {refused}");
        let mut why = Vec::new();
        if counts.no_room > 0 {
            let room = if mode == RingMode::Discard { "the ring was full" } else { "no room could be made" };
            why.push(format!("{} because {room}", counts.no_room));
        }
        if counts.too_large > 0 {
            why.push(format!("{} too large for the ring", counts.too_large));
        }
        if counts.timed_out > 0 {
            why.push(format!("{} after waiting for room as long as --wait allowed", counts.timed_out));
        }
        if counts.no_consumer > 0 {
            why.push(format!("{} because the consumer went away while they waited", counts.no_consumer));
        }
        report += &format!(" ({})", why.join(", "));
    }
    if refused > 0 && !opts.drop {
        // One error line that carries the whole report.
        return Err(Failure::msg(format!("{report}: the refused records are not in the ring (--drop accepts that)")));
    }
    eprint_line(format_args!("{report}"));
    Ok(())
}

fn err(what: &'static str) -> impl FnOnce(ringtrace::Error) -> Failure {
    move |e| Failure::msg(format!("{what}: {}", chain(&e)))
}

// `Producer::output` is a method of each mode's producer, not of a trait: one function
// per mode, generic over the producer kind.
fn write_discard<K: ProducerKind>(fd: OwnedFd, opts: &Options) -> Result<Counts, Failure> {
    let ring =
        RingBuf::<K, Discard>::from_fd_owned_by(fd, Access::Full, opts.owners).map_err(err("cannot open the ring"))?;
    let max = ring.max_record_len();
    let mut producer = ring.producer().map_err(err("cannot attach as a producer"))?;
    match opts.wait {
        None => feed(opts, max, |record| producer.output(record, Wakeup::Default)),
        Some(wait) => {
            let timeout = match wait {
                Wait::Forever => None,
                Wait::For(t) => Some(t),
            };
            feed(opts, max, |record| producer.output_wait(record, Wakeup::Default, timeout))
        }
    }
}

fn write_overwrite<K: ProducerKind>(fd: OwnedFd, opts: &Options) -> Result<Counts, Failure> {
    let ring = RingBuf::<K, Overwrite>::from_fd_owned_by(fd, Access::Full, opts.owners)
        .map_err(err("cannot open the ring"))?;
    let max = ring.max_record_len();
    let mut producer = ring.producer().map_err(err("cannot attach as a producer"))?;
    feed(opts, max, |record| {
        let Some(wait) = opts.wait else { return producer.output(record, Wakeup::Default) };
        // An overwrite ring never waits for its consumer; what it refuses (a pause, a
        // record still being written where room is made) passes: try again until the
        // deadline, napping between tries.
        let deadline = match wait {
            Wait::Forever => None,
            Wait::For(t) => Instant::now().checked_add(t),
        };
        let mut nap = Duration::from_micros(50);
        loop {
            match producer.output(record, Wakeup::Default) {
                Err(ReserveError::Pending { .. } | ReserveError::Paused { .. }) => {}
                done => return done,
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(ReserveError::Timeout { len: record.len() });
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(10));
        }
    })
}

/// Reads the inputs and hands each record to `output`, counting what it did.
/// `max` is the ring's largest record: a `--whole` input larger than that is refused
/// before it is read whole.
fn feed(
    opts: &Options,
    max: usize,
    mut output: impl FnMut(&[u8]) -> Result<(), ReserveError>,
) -> Result<Counts, Failure> {
    let mut counts = Counts::default();
    let mut put = |record: &[u8]| match output(record) {
        Ok(()) => {
            counts.written += 1;
            counts.bytes += record.len() as u64;
        }
        Err(ReserveError::TooLarge { .. }) => counts.too_large += 1,
        Err(ReserveError::Timeout { .. }) => counts.timed_out += 1,
        Err(ReserveError::Disconnected { .. }) => counts.no_consumer += 1,
        Err(_) => counts.no_room += 1,
    };
    let stdin = [PathBuf::from("-")];
    let inputs = if opts.inputs.is_empty() { &stdin[..] } else { &opts.inputs[..] };
    for input in inputs {
        let err = |e: io::Error| Failure::msg(format!("cannot read {}: {e}", name(input)));
        let mut reader: Box<dyn BufRead> = if input.as_os_str() == "-" {
            Box::new(io::stdin().lock())
        } else {
            Box::new(BufReader::new(File::open(input).map_err(err)?))
        };
        if opts.whole {
            // At most one byte past the largest record: an endless input (/dev/zero)
            // is refused at once, not read into memory.
            let mut all = Vec::new();
            reader.by_ref().take(max as u64 + 1).read_to_end(&mut all).map_err(err)?;
            if all.len() > max {
                return Err(Failure::msg(format!(
                    "{} is larger than the ring's largest record ({max} bytes): --whole writes an input as one record",
                    name(input)
                )));
            }
            put(&all);
            continue;
        }
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).map_err(err)? > 0 {
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            put(&line);
            line.clear();
        }
    }
    Ok(counts)
}

fn name(input: &Path) -> String {
    if input.as_os_str() == "-" {
        "stdin".into()
    } else {
        input.display().to_string()
    }
}
