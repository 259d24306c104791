//! Kernel BPF ring buffer maps as SOURCE: `bpf-pin:PATH` (pinned in a bpffs) or
//! `bpf-id:N` (a map id, as `bpftool map` lists them).
//!
//! `stat` and `snapshot` never move the map's consumer position: they copy what the
//! map holds. `tail` is a consumer: it reads the next records in order and hands their
//! space back to the kernel, as the map's own reader would.

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ringtrace::inspect::Record;
use ringtrace::kernel::bpf::BpfRingBuf;

use crate::format::{json_string, stdout_err, write_record, Failure, Format};

/// A kernel map named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSource {
    /// `bpf-pin:PATH`.
    Pin(PathBuf),
    /// `bpf-id:N`.
    Id(u32),
}

/// The kernel source `source` names, if it names one.
pub fn parse(source: &Path) -> Result<Option<KernelSource>, Failure> {
    let Some(s) = source.to_str() else { return Ok(None) };
    if let Some(p) = s.strip_prefix("bpf-pin:") {
        if p.is_empty() {
            return Err(Failure::Message("bpf-pin: needs a path, as in bpf-pin:/sys/fs/bpf/events".into()));
        }
        return Ok(Some(KernelSource::Pin(PathBuf::from(p))));
    }
    if let Some(n) = s.strip_prefix("bpf-id:") {
        return n.parse().map(|id| Some(KernelSource::Id(id))).map_err(|_| {
            Failure::Message(format!("bpf-id:{n}: a map id is a number from 0 to {}, as in bpf-id:42", u32::MAX))
        });
    }
    Ok(None)
}

fn open(src: &KernelSource) -> Result<BpfRingBuf, Failure> {
    match src {
        KernelSource::Pin(p) => BpfRingBuf::open_pinned(p),
        KernelSource::Id(id) => BpfRingBuf::open_id(*id),
    }
    .map_err(|e| Failure::Message(e.to_string()))
}

fn snap_err(e: impl std::fmt::Display) -> Failure {
    Failure::Message(format!("cannot copy the map's records: {e}"))
}

/// `ringtrace stat bpf-...`.
pub fn stat(src: &KernelSource, json: bool) -> Result<(), Failure> {
    let mut ring = open(src)?;
    let snap = ring.snapshot().map_err(snap_err)?;
    let mode = if ring.is_overwrite() { "overwrite" } else { "discard" };
    let mut t = String::new();
    if json {
        t.push_str("{\"kind\":\"bpf-ringbuf\",\"name\":");
        json_string(&mut t, ring.name());
        let _ = writeln!(
            t,
            ",\"id\":{},\"mode\":\"{mode}\",\"size\":{},\"consumer_pos\":{},\"producer_pos\":{},\"available\":{},\
             \"records\":{},\"unfinished\":{}}}",
            ring.map_id(),
            ring.capacity(),
            ring.position(),
            ring.producer_position(),
            ring.available(),
            snap.len(),
            snap.unfinished()
        );
    } else {
        let _ = writeln!(t, "BPF ring buffer map {:?} (id {})", ring.name(), ring.map_id());
        let _ = writeln!(t, "mode          {mode}");
        let _ = writeln!(t, "size          {} bytes", ring.capacity());
        let _ = writeln!(t, "consumer      {}", ring.position());
        let _ = writeln!(t, "producer      {}", ring.producer_position());
        let _ = writeln!(t, "available     {} bytes", ring.available());
        let _ = writeln!(t, "records       {} committed, {} being written", snap.len(), snap.unfinished());
    }
    crate::format::print(&t)
}

/// `ringtrace tail bpf-...`: consumes and prints the next `count` records, waiting for
/// them; with `follow`, every record from then on.
pub fn tail(src: &KernelSource, count: usize, follow: bool, format: Format) -> Result<(), Failure> {
    let mut ring = open(src)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut left = if follow { usize::MAX } else { count };
    while left > 0 {
        let n = ring
            .consume_at(left, |pos, payload| {
                write_record(&mut out, format, &Record { pos, pid: 0, payload }).map_err(stdout_err)
            })
            .map_err(|e| match e {
                ringtrace::ConsumeError::Callback(f) => f,
                e => Failure::Message(format!("reading the map: {e}")),
            })?;
        left -= n.min(left);
        out.flush().map_err(stdout_err)?;
        if left > 0 && n == 0 {
            ring.wait(Some(Duration::from_millis(500)))
                .map_err(|e| Failure::Message(format!("waiting for records: {e}")))?;
        }
    }
    Ok(())
}

/// `ringtrace snapshot bpf-...`: every record the map holds, without consuming.
pub fn snapshot(src: &KernelSource, reverse: bool, format: Format, output: Option<&Path>) -> Result<(), Failure> {
    let mut ring = open(src)?;
    let snap = ring.snapshot().map_err(snap_err)?;
    crate::snapshot::write_output(output, |w| {
        let mut w = BufWriter::new(w);
        let line = |w: &mut BufWriter<&mut dyn Write>, (pos, payload)| {
            write_record(w, format, &Record { pos, pid: 0, payload })
        };
        if reverse {
            snap.entries().rev().try_for_each(|e| line(&mut w, e))?;
        } else {
            snap.entries().try_for_each(|e| line(&mut w, e))?;
        }
        w.flush()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse() {
        assert_eq!(parse(Path::new("bpf-id:42")).unwrap(), Some(KernelSource::Id(42)));
        assert_eq!(parse(Path::new("bpf-pin:/sys/fs/bpf/x")).unwrap(), Some(KernelSource::Pin("/sys/fs/bpf/x".into())));
        assert_eq!(parse(Path::new("/dev/shm/app.ring")).unwrap(), None);
        assert!(parse(Path::new("bpf-id:x")).is_err());
        assert!(parse(Path::new("bpf-id:-1")).is_err());
        assert!(parse(Path::new("bpf-pin:")).is_err());
    }
}
