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

use std::path::Path;
use std::time::{Duration, Instant};

use ringtrace::kernel::bpf::BpfRingBuf;
use ringtrace::Stats;

use super::super::error::ShipError;
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

/// The map named by `spec` (`bpf-pin:PATH` or `bpf-id:N`), if it names one: its
/// identity for the state file (`dev`, `ino`: the pin's, or 0 and the id) too.
pub(super) fn open(spec: &str) -> Option<Result<(Bpf, u64, u64), String>> {
    let opened = if let Some(path) = spec.strip_prefix("bpf-pin:") {
        identity(Path::new(path))
            .and_then(|(dev, ino)| BpfRingBuf::open_pinned(path).map(|rb| (rb, dev, ino)).map_err(|e| e.to_string()))
    } else if let Some(id) = spec.strip_prefix("bpf-id:") {
        id.parse::<u32>()
            .map_err(|_| format!("{id:?} is not a map id"))
            .and_then(|id| BpfRingBuf::open_id(id).map(|rb| (rb, 0, u64::from(id))).map_err(|e| e.to_string()))
    } else {
        return None;
    };
    Some(opened.and_then(|(mut rb, dev, ino)| {
        if rb.is_overwrite() {
            return Err("an overwrite-mode BPF map (BPF_F_RB_OVERWRITE): its records cannot be held".into());
        }
        rb.hold(true);
        Ok((Bpf { rb, next_seq: 0, pending: None }, dev, ino))
    }))
}

fn identity(path: &Path) -> Result<(u64, u64), String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((meta.dev(), meta.ino()))
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
                return Err(ShipError::Source(format!(
                    "{}: records acknowledged before the restart not readable at position {} by the deadline",
                    self.rb.name(),
                    self.rb.position()
                )));
            }
            match self.rb.consume_n(1, |_: &[u8]| ()) {
                Ok(0) => std::thread::sleep(Duration::from_millis(1)),
                Ok(n) => stepped += n as u64,
                Err(e) => return Err(ShipError::Source(format!("{}: {e}", self.rb.name()))),
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
