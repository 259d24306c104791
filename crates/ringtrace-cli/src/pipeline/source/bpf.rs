//! A kernel BPF ring buffer map (`bpf-pin:PATH`, `bpf-id:N`): a copy of what it holds
//! (`snapshot`), or consumed by its one reader (`tail`, `consume`): the map's reader
//! lock ([`BpfRingBuf`]) refuses a second reader, this command's or an agent's.

use std::path::Path;

use ringtrace::kernel::bpf::BpfRingBuf;
use ringtrace::Snapshot;

use super::stop::Stop;
use super::{Consume, Follow, Held, RecordSource, Spec};
use crate::failure::{chain, Failure};
use crate::output::ReportFormat;
use crate::pipeline::output::Sink;
use crate::pipeline::record::{Raw, Record};

/// A BPF ring buffer map, opened.
pub struct Bpf(BpfRingBuf);

/// Opens the map `spec` names (`bpf-pin:` or `bpf-id:`).
pub fn open(spec: &Spec) -> Result<Bpf, Failure> {
    let Some(map) = spec.map().as_ref().and_then(ringtrace::source::Spec::open_bpf) else {
        return Err(Failure::msg(format!("not a BPF map: {spec:?}")));
    };
    map.map(Bpf).map_err(|e| Failure::msg(chain(&e)))
}

impl RecordSource for Bpf {
    fn kind(&self) -> &'static str {
        "a BPF ring buffer map"
    }

    fn reading_consumes(&self) -> bool {
        true
    }

    /// A copy of what the map holds: its consumer position does not move.
    fn read(&mut self) -> Result<Box<dyn Held + '_>, Failure> {
        let snap = self.0.snapshot().map_err(|e| Failure::msg(format!("cannot copy the map's records: {e}")))?;
        Ok(Box::new(Copied(snap)))
    }

    fn follow(&mut self) -> Result<Box<dyn Follow + '_>, Failure> {
        Err(Failure::msg("a BPF map is followed by consuming it"))
    }

    /// Consumes and writes records until the count is reached, the timeout passed
    /// without one, or a signal asked to stop (then [`Failure::Interrupted`]).
    fn consume(&mut self, _path: &Path, opts: &Consume, out: &mut dyn Sink) -> Option<Result<(), Failure>> {
        // The reader lock first, so that a refused reader prints nothing.
        let locked = self.0.lock_reader().map_err(|e| Failure::msg(chain(&e)));
        Some(locked.and_then(|()| drain(&mut self.0, opts, out)))
    }

    fn stat(&mut self, _path: &Path, format: ReportFormat) -> Result<(), Failure> {
        crate::report::kernel::stat(&mut self.0, format == ReportFormat::Json)
    }
}

/// The map's records, copied.
struct Copied(Snapshot);

fn record((pos, payload): (u64, &[u8])) -> Record<'_> {
    Record::Raw(Raw { payload, at: Some((pos, 0)), origin: None })
}

impl Held for Copied {
    fn records(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        Box::new(self.0.entries().map(record))
    }

    fn records_rev(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        Box::new(self.0.entries().rev().map(record))
    }
}

/// The map's reader's loop. Line by line, straight through: a consume call hands the
/// space of what it read back to the kernel when it returns, so each record is written
/// before the next is read (a write error loses only the record being written, and
/// says so).
fn drain(map: &mut BpfRingBuf, opts: &Consume, out: &mut dyn Sink) -> Result<(), Failure> {
    crate::cleanup::stop_gracefully();
    let mut stop = Stop::new(opts);
    while let Some(nap) = stop.check()? {
        let n = map
            .consume_at(stop.max(), |pos, payload| out.write(&record((pos, payload))).and_then(|()| out.flush()))
            .map_err(|e| match e {
                ringtrace::ConsumeError::Callback(e) => crate::output::lost_one(e),
                e => Failure::msg(format!("reading the map: {}", chain(&e))),
            })?;
        stop.printed(n as u64);
        if n == 0 {
            map.wait(Some(nap)).map_err(|e| Failure::msg(format!("waiting for records: {e}")))?;
        }
    }
    Ok(())
}
