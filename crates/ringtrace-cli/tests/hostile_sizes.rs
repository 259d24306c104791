//! A hostile file's declared sizes do not decide the reader's memory: a sparse ring
//! file declaring a ring of 4 GiB over a few pages of data is read with a few pages of
//! memory, not 4 GiB.

use std::path::Path;
use std::time::{Duration, Instant};

use ringtrace::inspect::image::{set_u64, ImageBuilder, CAPACITY_AT, PRODUCER_POS_AT};
use ringtrace::inspect::RingMode;

mod common;

use common::{spawn, temp};

/// The peak resident memory (`VmHWM`) of process `pid`, in KiB, while it lives.
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// A ring file of 8 KiB of header and one page of records that declares a data area of
/// `capacity` bytes and a producer position near its end: a sparse file of a few pages.
fn sparse_ring(path: &Path, capacity: u64) {
    let mut img = ImageBuilder::new(4096, RingMode::Discard).record(b"the only record").build();
    set_u64(&mut img, CAPACITY_AT, capacity);
    set_u64(&mut img, PRODUCER_POS_AT, capacity - 4096);
    std::fs::write(path, &img).unwrap();
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(8192 + capacity).unwrap();
}

/// Runs `ringtrace ARGS`, sampling its peak memory until it exits; returns the peak
/// (KiB), its exit code and its stdout.
fn run_sampled(args: &[&str]) -> (u64, i32, String) {
    let (mut child, out, _err) = spawn(args);
    let pid = child.0.id();
    let (mut peak, start) = (0, Instant::now());
    let status = loop {
        if let Some(kib) = peak_kib(pid) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "{args:?} did not finish");
        std::thread::sleep(Duration::from_millis(1));
    };
    (peak, status.code().unwrap_or(-1), std::fs::read_to_string(out).unwrap())
}

#[test]
fn a_sparse_ring_declaring_4_gib_is_read_with_little_memory() {
    let path = temp("sparse.ring");
    sparse_ring(&path, 1 << 32);
    let p = path.to_str().unwrap();
    for cmd in ["snapshot", "tail"] {
        let (peak, code, out) = run_sampled(&[cmd, p]);
        assert!(out.contains("the only record"), "{cmd}: exit {code}, {out}");
        assert!(peak < 256 << 10, "{cmd} of a sparse file declaring 4 GiB took {} MiB", peak >> 10);
    }
}
