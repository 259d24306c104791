//! `ringtrace write`: appends records to a ring file as one more producer, one record
//! per input line (or per input with `--whole`). Records the ring refuses are counted
//! and reported, never dropped silently; the report (written, refused and why) is said
//! on stderr however the command ends: the input's end, a refusal, an input that
//! cannot be read, or a signal (SIGINT, SIGTERM, SIGHUP: exit 128 + the signal).
//!
//! `--wait[=TIMEOUT]` bounds one record's wait for room. A record that waited all of
//! TIMEOUT in vain makes the records after it try once without waiting (each written if
//! it fits, refused at once if not), until one fits again; then they wait again. A
//! consumer that went away is waited for as a slow one is: another may attach.
//!
//! Every commit happens under the lock of the counts ([`Tally`]), and the report on a
//! signal is made under it too (the signal thread keeps it while the process exits):
//! the report counts exactly the records the ring received.
//!
//! `bpf-pin:PATH` and `bpf-id:N` name a BPF user ring buffer map instead, which a BPF
//! program drains: [`map`], with the same inputs, counts and `--wait`.

pub mod map;

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ringtrace::config::{Discard, Mode, Mpsc, Overwrite, ProducerKind, Spsc};
use ringtrace::format::record::footprint;
use ringtrace::inspect::{RingKind, RingMode};
use ringtrace::{Access, Producer, Reservation, ReserveError, RingBuf};

use crate::cleanup;
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

/// What the records are written into, for the report's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A ring file of this mode.
    Ring(RingMode),
    /// A BPF user ring buffer map.
    Map,
}

impl Target {
    fn noun(self) -> &'static str {
        match self {
            Target::Ring(_) => "ring",
            Target::Map => "map",
        }
    }
}

/// What happened to the records.
#[derive(Debug, Default, Clone)]
struct Counts {
    written: u64,
    bytes: u64,
    /// Refused for want of room: ring full (discard; without --wait, or while an earlier
    /// record's wait had run out), or paused or blocked by a record still being written
    /// (overwrite); a map full (its BPF program had not drained enough).
    no_room: u64,
    too_large: u64,
    /// Refused because the time to wait ran out (`--wait=TIMEOUT`).
    timed_out: u64,
    /// Refused because the consumer went away while `--wait` waited for room.
    no_consumer: u64,
    /// Empty records refused by a map (a BPF program is never handed an empty sample).
    empty: u64,
}

impl Counts {
    fn refused(&self) -> u64 {
        self.no_room + self.too_large + self.timed_out + self.no_consumer + self.empty
    }

    /// `PATH: wrote N record(s) (B bytes); refused M (why)`.
    fn report(&self, path: &Path, target: Target) -> String {
        let mut report = format!("{}: wrote {} record(s) ({} bytes)", path.display(), self.written, self.bytes);
        if self.refused() > 0 {
            report += &format!("; refused {}", self.refused());
            let mut why = Vec::new();
            if self.no_room > 0 {
                let room = match target {
                    Target::Ring(RingMode::Discard) => "the ring was full",
                    Target::Ring(RingMode::Overwrite) => "no room could be made",
                    Target::Map => "the map was full (its BPF program had not drained it)",
                };
                why.push(format!("{} because {room}", self.no_room));
            }
            if self.too_large > 0 {
                why.push(format!("{} too large for the {}", self.too_large, target.noun()));
            }
            if self.empty > 0 {
                why.push(format!("{} empty (a BPF program takes samples of at least 1 byte)", self.empty));
            }
            if self.timed_out > 0 {
                why.push(format!("{} after waiting for room as long as --wait allowed", self.timed_out));
            }
            if self.no_consumer > 0 {
                why.push(format!("{} because the consumer went away while they waited", self.no_consumer));
            }
            report += &format!(" ({})", why.join(", "));
        }
        report
    }
}

/// The counts, and whether the command has said them: shared with the signal thread.
#[derive(Debug, Default)]
struct Tally {
    counts: Counts,
    reported: bool,
}

type Shared = Arc<Mutex<Tally>>;

fn lock(tally: &Shared) -> MutexGuard<'_, Tally> {
    // A panic while holding it leaves counts that are still whole.
    tally.lock().unwrap_or_else(|p| p.into_inner())
}

/// A signal's name, for the report.
fn signal_name(signal: u8) -> String {
    match i32::from(signal) {
        signal_hook::consts::SIGINT => "SIGINT".into(),
        signal_hook::consts::SIGTERM => "SIGTERM".into(),
        signal_hook::consts::SIGHUP => "SIGHUP".into(),
        s => format!("signal {s}"),
    }
}

pub fn run(path: &Path, source: &mut dyn RecordSource, opts: &Options) -> Result<(), Failure> {
    let Some(ring) = source.attach(path) else {
        return Err(Failure::msg(format!("{} is {}: write appends to ring files", path.display(), source.kind())));
    };
    // The file decides the ring's kind and mode, and so the type to open it with.
    let (kind, mode, fd) = ring?;
    let target = Target::Ring(mode);
    let tally = report_on_signal(path, target);
    let fed = match (kind, mode) {
        (RingKind::Mpsc, RingMode::Discard) => write_discard::<Mpsc>(fd, opts, &tally),
        (RingKind::Mpsc, RingMode::Overwrite) => write_overwrite::<Mpsc>(fd, opts, &tally),
        (RingKind::Spsc, RingMode::Discard) => write_discard::<Spsc>(fd, opts, &tally),
        (RingKind::Spsc, RingMode::Overwrite) => write_overwrite::<Spsc>(fd, opts, &tally),
    };
    finish(&tally, path, target, fed, opts)
}

/// New counts, said on stderr if a signal stops the command.
fn report_on_signal(path: &Path, target: Target) -> Shared {
    let tally = Shared::default();
    let (shared, path) = (tally.clone(), path.to_path_buf());
    cleanup::report_on_signal(move |signal| {
        let t = lock(&shared);
        if !t.reported {
            let report = t.counts.report(&path, target);
            eprint_line(format_args!(
                "{report}; stopped by {}: the rest of the input is not written",
                signal_name(signal)
            ));
        }
        // Kept while the process exits: no record is committed after the report.
        std::mem::forget(t);
    });
    tally
}

/// Says the report (once: a signal from now on adds nothing), as an error where
/// writing stopped early or records were refused without --drop.
fn finish(tally: &Shared, path: &Path, target: Target, fed: Result<(), Fed>, opts: &Options) -> Result<(), Failure> {
    let mut t = lock(tally);
    t.reported = true;
    let report = t.counts.report(path, target);
    let refused = t.counts.refused();
    match fed {
        // Attaching failed: nothing was read or written.
        Err(Fed::Attach(e)) => Err(e),
        Err(Fed::Input(e)) => Err(Failure::msg(format!("{report}; then stopped: {e}"))),
        Ok(()) if refused > 0 && !opts.drop => {
            // One error line that carries the whole report.
            Err(Failure::msg(format!(
                "{report}: the refused records are not in the {} (--drop accepts that)",
                target.noun()
            )))
        }
        Ok(()) => {
            eprint_line(format_args!("{report}"));
            Ok(())
        }
    }
}

/// Why writing stopped before the inputs' end.
enum Fed {
    /// The ring could not be opened or attached to.
    Attach(Failure),
    /// An input could not be read (the records before it are written).
    Input(String),
}

fn err(what: &'static str) -> impl FnOnce(ringtrace::Error) -> Fed {
    move |e| Fed::Attach(Failure::msg(format!("{what}: {}", chain(&e))))
}

/// How long the next record may wait for room: `--wait`'s rule.
#[derive(Debug)]
struct Patience {
    wait: Option<Wait>,
    /// A record waited all of `--wait=TIMEOUT` in vain, and none has fitted since.
    gave_up: bool,
}

impl Patience {
    fn new(wait: Option<Wait>) -> Self {
        Patience { wait, gave_up: false }
    }

    /// `None`: try once, without waiting; `Some(None)`: wait for ever; `Some(Some(t))`:
    /// at most `t`.
    fn allowance(&self) -> Option<Option<Duration>> {
        match self.wait? {
            Wait::Forever => Some(None),
            Wait::For(_) if self.gave_up => None,
            Wait::For(t) => Some(Some(t)),
        }
    }

    /// What the record's try came to: a timeout makes the next records try once; a
    /// record that fits makes them wait again.
    fn settled(&mut self, outcome: &Result<(), ReserveError>) {
        match outcome {
            Ok(()) => self.gave_up = false,
            Err(ReserveError::Timeout { .. }) => self.gave_up = true,
            Err(_) => {}
        }
    }
}

/// The nap between looks for a consumer to come back to a full ring.
const CONSUMER_NAP: Duration = Duration::from_millis(10);

/// Commits `reserved` filled with `record` by `fill`, or counts why there was no room,
/// under the tally's lock.
fn settle<R>(
    tally: &Shared,
    record: &[u8],
    reserved: Result<R, ReserveError>,
    fill: impl FnOnce(R, &[u8]),
) -> Result<(), ReserveError> {
    let mut t = lock(tally);
    let c = &mut t.counts;
    match reserved {
        Ok(r) => {
            fill(r, record);
            c.written += 1;
            c.bytes += record.len() as u64;
            Ok(())
        }
        Err(e) => {
            match e {
                ReserveError::TooLarge { .. } => c.too_large += 1,
                ReserveError::Timeout { .. } => c.timed_out += 1,
                ReserveError::Disconnected { .. } => c.no_consumer += 1,
                _ => c.no_room += 1,
            }
            Err(e)
        }
    }
}

/// A ring attached to, and its producer.
type Attached<K, M> = (RingBuf<K, M>, Producer<K, M>);

fn attach<K: ProducerKind, M: Mode>(fd: OwnedFd, opts: &Options) -> Result<Attached<K, M>, Fed> {
    let ring = RingBuf::<K, M>::from_fd_owned_by(fd, Access::Full, opts.owners).map_err(err("cannot open the ring"))?;
    let producer = ring.producer().map_err(err("cannot attach as a producer"))?;
    Ok((ring, producer))
}

// `Producer::reserve` is a method of each mode's producer, not of a trait: one function
// per mode, generic over the producer kind.
fn write_discard<K: ProducerKind>(fd: OwnedFd, opts: &Options, tally: &Shared) -> Result<(), Fed> {
    let (ring, mut producer) = attach::<K, Discard>(fd, opts)?;
    let mut patience = Patience::new(opts.wait);
    feed(opts, ring.max_record_len(), "ring's largest record", |record| {
        let outcome = put_discard(&ring, &mut producer, record, patience.allowance(), tally);
        patience.settled(&outcome);
    })
}

/// Writes `record` into a discard ring, waiting as `allowance` says (see
/// [`Patience::allowance`]), and counts it. A consumer that went away may come back:
/// while it is gone and the record does not fit, this waits for one to attach (the
/// library's wait would give up at once), then for room.
fn put_discard<K: ProducerKind>(
    ring: &RingBuf<K, Discard>,
    p: &mut Producer<K, Discard>,
    record: &[u8],
    allowance: Option<Option<Duration>>,
    tally: &Shared,
) -> Result<(), ReserveError> {
    let len = record.len();
    let fill = |mut r: Reservation<'_, K, Discard>, record: &[u8]| {
        r.copy_from_slice(record);
        r.commit();
    };
    let Some(wait) = allowance.filter(|_| len <= ring.max_record_len()) else {
        return settle(tally, record, p.reserve(len), fill);
    };
    let deadline = wait.and_then(|t| Instant::now().checked_add(t));
    let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let fits = || {
        let s = ring.stats();
        s.available + footprint(len as u32) <= ring.capacity()
    };
    while p.is_disconnected() && !fits() {
        let l = left();
        if l.is_some_and(|l| l.is_zero()) {
            // One last try: the ring counts it lost if there is still no room.
            let r = p.reserve(len).map_err(|e| match e {
                ReserveError::Full { len } => ReserveError::Timeout { len },
                e => e,
            });
            return settle(tally, record, r, fill);
        }
        std::thread::sleep(l.map_or(CONSUMER_NAP, |l| l.min(CONSUMER_NAP)));
    }
    settle(tally, record, p.reserve_wait(len, left()), fill)
}

fn write_overwrite<K: ProducerKind>(fd: OwnedFd, opts: &Options, tally: &Shared) -> Result<(), Fed> {
    let (ring, mut producer) = attach::<K, Overwrite>(fd, opts)?;
    let mut patience = Patience::new(opts.wait);
    feed(opts, ring.max_record_len(), "ring's largest record", |record| {
        let outcome = put_overwrite(&mut producer, record, patience.allowance(), tally);
        patience.settled(&outcome);
    })
}

/// Writes `record` into an overwrite ring, and counts it. An overwrite ring never waits
/// for its consumer; what it refuses (a pause, a record still being written where room
/// is made) passes: with an allowance, try again until it runs out, napping between
/// tries.
fn put_overwrite<K: ProducerKind>(
    p: &mut Producer<K, Overwrite>,
    record: &[u8],
    allowance: Option<Option<Duration>>,
    tally: &Shared,
) -> Result<(), ReserveError> {
    let len = record.len();
    let fill = |mut r: Reservation<'_, K, Overwrite>, record: &[u8]| {
        r.copy_from_slice(record);
        r.commit();
    };
    let Some(wait) = allowance else { return settle(tally, record, p.reserve(len), fill) };
    let deadline = wait.and_then(|t| Instant::now().checked_add(t));
    let mut nap = Duration::from_micros(50);
    loop {
        match p.reserve(len) {
            Err(ReserveError::Pending { .. } | ReserveError::Paused { .. }) => {}
            r => return settle(tally, record, r, fill),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return settle(tally, record, Err::<Reservation<'_, K, Overwrite>, _>(ReserveError::Timeout { len }), fill);
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(10));
    }
}

/// Reads the inputs and hands each record to `put`. `max` is the largest record (`what`:
/// "ring's largest record"): a `--whole` input larger than that is refused before it is
/// read whole.
fn feed(opts: &Options, max: usize, what: &str, mut put: impl FnMut(&[u8])) -> Result<(), Fed> {
    let stdin = [PathBuf::from("-")];
    let inputs = if opts.inputs.is_empty() { &stdin[..] } else { &opts.inputs[..] };
    for input in inputs {
        let err = |e: io::Error| Fed::Input(format!("cannot read {}: {e}", name(input)));
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
                return Err(Fed::Input(format!(
                    "{} is larger than the {what} ({max} bytes): --whole writes an input as one record",
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
    Ok(())
}

fn name(input: &Path) -> String {
    if input.as_os_str() == "-" {
        "stdin".into()
    } else {
        input.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_that_waited_in_vain_makes_the_next_ones_try_once_until_one_fits() {
        let t = Duration::from_millis(200);
        let mut p = Patience::new(Some(Wait::For(t)));
        assert_eq!(p.allowance(), Some(Some(t)));
        p.settled(&Err(ReserveError::Timeout { len: 1 }));
        assert_eq!(p.allowance(), None, "after a timeout: no wait");
        p.settled(&Err(ReserveError::Full { len: 1 }));
        assert_eq!(p.allowance(), None, "still full: still no wait");
        p.settled(&Ok(()));
        assert_eq!(p.allowance(), Some(Some(t)), "room again: waits again");
        // A consumer that left does not stop the waiting: another may attach.
        p.settled(&Err(ReserveError::Disconnected { len: 1 }));
        assert_eq!(p.allowance(), Some(Some(t)));
        // For ever: every record waits; without --wait none does.
        let mut p = Patience::new(Some(Wait::Forever));
        p.settled(&Err(ReserveError::Timeout { len: 1 }));
        assert_eq!(p.allowance(), Some(None));
        assert_eq!(Patience::new(None).allowance(), None);
    }
}
