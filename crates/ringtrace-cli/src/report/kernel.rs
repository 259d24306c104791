//! `ringtrace stat` of a kernel BPF ring buffer map: size, mode, positions and records
//! held, from a copy (the map's consumer position does not move).

use std::fmt::Write as _;

use ringtrace::kernel::bpf::BpfRingBuf;
use serde::Serialize;

use crate::failure::Failure;
use crate::output::{print, print_json};

/// `stat --format json` of a BPF ring buffer map: sizes, positions and counts, all
/// numbers (see `records`' docs).
#[derive(Serialize)]
struct Json<'a> {
    kind: &'static str,
    name: &'a str,
    id: u32,
    mode: &'static str,
    size: u64,
    consumer_pos: u64,
    producer_pos: u64,
    available: u64,
    records: usize,
    unfinished: u64,
}

pub fn stat(ring: &mut BpfRingBuf, json: bool) -> Result<(), Failure> {
    let snap = ring.snapshot().map_err(|e| Failure::msg(format!("cannot copy the map's records: {e}")))?;
    let mode = if ring.is_overwrite() { "overwrite" } else { "discard" };
    if json {
        return print_json(&Json {
            kind: "bpf-ringbuf",
            name: ring.name(),
            id: ring.map_id(),
            mode,
            size: ring.capacity(),
            consumer_pos: ring.position(),
            producer_pos: ring.producer_position(),
            available: ring.available(),
            records: snap.len(),
            unfinished: snap.unfinished(),
        });
    }
    let mut t = String::new();
    let _ = writeln!(t, "BPF ring buffer map {:?} (id {})", ring.name(), ring.map_id());
    let _ = writeln!(t, "mode          {mode}");
    let _ = writeln!(t, "size          {} bytes", ring.capacity());
    let _ = writeln!(t, "consumer      {}", ring.position());
    let _ = writeln!(t, "producer      {}", ring.producer_position());
    let _ = writeln!(t, "available     {} bytes", ring.available());
    let _ = writeln!(t, "records       {} committed, {} being written", snap.len(), snap.unfinished());
    print(&t)
}
