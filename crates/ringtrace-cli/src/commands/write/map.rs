//! `ringtrace write bpf-pin:PATH` / `bpf-id:N`: writes records into a BPF user ring
//! buffer map (`BPF_MAP_TYPE_USER_RINGBUF`) as its producer, for a BPF program that
//! drains it with `bpf_user_ringbuf_drain`: the inputs, counts, report and `--wait` of
//! [`super`], one sample per record.
//!
//! One process produces into a map at a time ([`UserRingBuf`] holds the map's producer
//! lock): a second `write` into it, or a program of ringtrace's producing into it, is
//! refused. A BPF ring buffer map (`BPF_MAP_TYPE_RINGBUF`) is the other direction, the
//! kernel its producer: refused, with what reads it.

use std::path::Path;
use std::time::Duration;

use ringtrace::error::KernelError;
use ringtrace::kernel::bpf::{UserReserveError, UserRingBuf};
use ringtrace::source::Spec;
use ringtrace::ReserveError;

use super::{feed, finish, lock, report_on_signal, Options, Patience, Shared, Target};
use crate::failure::{chain, Failure};

/// `BPF_MAP_TYPE_RINGBUF`, the kernel's ring buffer map.
const MAP_TYPE_RINGBUF: u32 = 27;

/// How long one wait of `--wait` (for ever) lasts before it waits again: the wait is
/// made of bounded ones.
const WAIT_SLICE: Duration = Duration::from_secs(1);

/// Writes the inputs into the user ring buffer map `map` names (`path`: the argument as
/// given, for the report).
pub fn run(path: &Path, map: &Spec, opts: &Options) -> Result<(), Failure> {
    let ring = open(map)?;
    let tally = report_on_signal(path, Target::Map);
    let mut patience = Patience::new(opts.wait);
    let fed = feed(opts, ring.max_sample(), "map's largest sample", |record| {
        let outcome = put(&ring, record, patience.allowance(), &tally);
        patience.settled(&outcome);
    });
    finish(&tally, path, Target::Map, fed, opts)
}

/// Attaches to the map as its producer.
fn open(map: &Spec) -> Result<UserRingBuf, Failure> {
    let opened = match map {
        Spec::BpfPin(p) => UserRingBuf::open_pinned(p),
        Spec::BpfId(id) => UserRingBuf::open_id(*id),
        Spec::Path(p) => return Err(Failure::msg(format!("{}: not a BPF map", p.display()))),
    };
    opened.map_err(|e| match e {
        KernelError::NotUserRingBuf { name, id, map_type: MAP_TYPE_RINGBUF, .. } => Failure::msg(format!(
            "BPF map {name:?} (id {id}) is a ring buffer map (BPF_MAP_TYPE_RINGBUF): the kernel writes \
             those, and tail or consume reads them; write writes into user ring buffer maps \
             (BPF_MAP_TYPE_USER_RINGBUF), which a BPF program drains"
        )),
        e => Failure::msg(chain(&e)),
    })
}

/// Writes `record` as one sample, waiting as `allowance` says
/// ([`Patience::allowance`]), and counts it under the tally's lock. The outcome, in the
/// ring files' terms, for [`Patience::settled`].
fn put(
    ring: &UserRingBuf,
    record: &[u8],
    allowance: Option<Option<Duration>>,
    tally: &Shared,
) -> Result<(), ReserveError> {
    let len = record.len();
    let reserved = match allowance {
        None => ring.reserve(len),
        Some(Some(t)) => ring.reserve_blocking(len, t),
        // For ever: bounded waits one after another, until there is room (a signal
        // stops the command meanwhile).
        Some(None) => loop {
            match ring.reserve_blocking(len, WAIT_SLICE) {
                Err(UserReserveError::Timeout { .. }) => {}
                r => break r,
            }
        },
    };
    let mut t = lock(tally);
    let c = &mut t.counts;
    match reserved {
        Ok(mut sample) => {
            sample.copy_from_slice(record);
            sample.commit();
            c.written += 1;
            c.bytes += len as u64;
            Ok(())
        }
        Err(UserReserveError::Timeout { .. }) => {
            c.timed_out += 1;
            Err(ReserveError::Timeout { len })
        }
        Err(UserReserveError::TooLarge { max, .. }) => {
            c.too_large += 1;
            Err(ReserveError::TooLarge { len, max })
        }
        Err(UserReserveError::Empty) => {
            c.empty += 1;
            Err(ReserveError::TooLarge { len, max: ring.max_sample() })
        }
        // Full, or the wait for the kernel's wakeup failed: no room was found.
        Err(_) => {
            c.no_room += 1;
            Err(ReserveError::Full { len })
        }
    }
}
