//! BPF ring buffer maps as sources: `bpf-pin:PATH` (a map pinned in a BPF file system)
//! or `bpf-id:N` (a map by id), as the `ringtrace` command names them.
//!
//! The agent reads the map as its one user-space consumer, holding what it read
//! ([`BpfRingBuf::hold`]): the map's `consumer_pos` moves past a round's records only
//! once Kafka acknowledged them and the state stored their end, so the kernel cannot
//! rewrite them before (while Kafka is away the map fills and the BPF program's
//! reservations fail: the program counts those, the kernel does not). A failed round is
//! read again ([`BpfRingBuf::unread`]); an agent restarted after a crash steps over the
//! records between `consumer_pos` and the stored position, which Kafka acknowledged, as
//! for a ring file. A map has no producer handles: for `--until-disconnected` it counts
//! as disconnected, so the agent stops once it has drained it. Overwrite-mode maps
//! (`BPF_F_RB_OVERWRITE`) are refused: their records cannot be held.
//!
//! The agent takes the map's reader lock as it opens it, and holds it while it runs:
//! another reader of the map (`ringtrace consume`, `tail`, another agent) is refused
//! while the agent holds records for Kafka, and the agent is refused while another
//! reader holds the map (the error names its pid and uid).

use std::time::{Duration, Instant};

use ringtrace::error::KernelError;
use ringtrace::kernel::bpf::BpfRingBuf;
use ringtrace::source::Spec;
use ringtrace::Stats;

use super::super::error::ShipError;
use super::error::{SourceError, SourceErrorKind};
use super::round::{read_outcome, Batcher, Filled, Limits, Reader, Recovered, Times};
use crate::frame::TimeSource;
use crate::state::SourceState;

/// A BPF ring buffer map the agent drains.
pub(super) struct Bpf {
    rb: BpfRingBuf,
    next_seq: u64,
    /// The sequence number after the round in flight.
    pending: Option<u64>,
}

/// The map `spec` names (`bpf-pin:PATH` or `bpf-id:N`), `opened` by
/// [`Spec::open_bpf`], its reader lock taken: with its identity for the state file
/// (`dev`, `ino`: the pin's, or 0 and the id).
pub(super) fn open(spec: &Spec, opened: Result<BpfRingBuf, KernelError>) -> Result<(Bpf, u64, u64), SourceErrorKind> {
    let mut rb = opened?;
    let (dev, ino) = match spec {
        Spec::BpfPin(path) => {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(path)?;
            (meta.dev(), meta.ino())
        }
        _ => (0, u64::from(rb.map_id())),
    };
    if rb.is_overwrite() {
        return Err(SourceErrorKind::OverwriteMap);
    }
    rb.lock_reader()?;
    rb.hold(true);
    Ok((Bpf { rb, next_seq: 0, pending: None }, dev, ino))
}

impl Reader for Bpf {
    fn recover(&mut self, saved: Option<&SourceState>, same: bool, deadline: Instant) -> Result<Recovered, ShipError> {
        let Some(saved) = saved else { return Ok(Recovered::default()) };
        self.next_seq = saved.next_seq;
        let gap = saved.position.saturating_sub(self.rb.position());
        if !same || gap > self.rb.capacity() || gap > self.rb.available() {
            return Ok(Recovered { acknowledged: 0, new_ring: true });
        }
        let mut stepped = 0;
        // Bounded: each step reads one record (at least 8 bytes) of at most a map.
        while self.rb.position() < saved.position {
            if Instant::now() >= deadline {
                let kind = SourceErrorKind::Unrecovered(self.rb.position());
                return Err(SourceError::new(self.rb.name(), kind).into());
            }
            match self.rb.consume_n(1, |_: &[u8]| ()) {
                Ok(0) => std::thread::sleep(Duration::from_millis(1)),
                Ok(n) => stepped += n as u64,
                Err(e) => return Err(SourceError::new(self.rb.name(), SourceErrorKind::Read(Box::new(e))).into()),
            }
        }
        self.rb.release();
        Ok(Recovered { acknowledged: stepped, new_ring: false })
    }

    fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn fill(
        &mut self,
        host: &str,
        name: &str,
        time_ns: u64,
        limits: Limits,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(Filled, u64, u64), ShipError> {
        let mut batches = Batcher::new(host, name, self.next_seq, (TimeSource::Drained, 0), limits, out)?;
        // A round that read its bytes stops at a record, which counts as read.
        let mut times = Times::Drained(time_ns);
        let read = self.rb.consume(|rec| batches.take(batches.next_seq(), rec, &mut times));
        let next = batches.next_seq();
        let filled = batches.finish();
        read_outcome(read, name, false)?;
        if filled.records > 0 {
            self.pending = Some(next);
        } else {
            // Only discarded reservations, if anything: nothing to ship, so their space
            // goes back now (the kernel wakes a waiter only at the released position).
            self.rb.release();
        }
        Ok((filled, next, self.rb.position()))
    }

    fn pending_counts(&self) -> (u64, u64, u64) {
        (0, 0, 0)
    }

    fn acknowledged(&mut self) {
        if let Some(next) = self.pending.take() {
            self.next_seq = next;
            self.rb.release();
        }
    }

    fn failed(&mut self) {
        if self.pending.take().is_some() {
            self.rb.unread();
        }
    }

    /// A map's refusals are its program's to count: none here.
    fn stats(&self) -> Stats {
        Stats::default()
    }

    fn ready(&self) -> bool {
        self.rb.ready()
    }

    fn is_disconnected(&self) -> bool {
        true
    }

    fn wait(&mut self, timeout: Duration) -> std::io::Result<bool> {
        self.rb.wait(Some(timeout))
    }
}
