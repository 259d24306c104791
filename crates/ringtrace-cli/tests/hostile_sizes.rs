//! A hostile file's declared sizes do not decide the reader's memory: a sparse ring
//! file declaring a ring of 4 GiB over a few pages of data is read with a few pages of
//! memory, not 4 GiB.

use std::path::Path;
use std::time::Duration;

use ringtrace::inspect::image::{set_u64, ImageBuilder, CAPACITY_AT, PRODUCER_POS_AT};
use ringtrace::inspect::RingMode;

mod common;

use common::temp;

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
    let (peak, out) = common::run_sampled(args, Duration::from_secs(120));
    (peak, out.code, out.stdout)
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
