//! Unit tests of ring images at an offset inside a larger file ([`Builder::init_at`],
//! [`RingBuf::open_at`], [`image_len`]): several rings in one file, each used as a ring
//! file of its own would be, none leaking into another.

use std::convert::Infallible;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

use rustix::fs::{fcntl_add_seals, ftruncate, memfd_create, MemfdFlags, SealFlags};

use super::*;
use crate::attach::image_len;
use crate::config::{Discard, Mpsc, Overwrite, Spsc};
use crate::format::control::MAX_CAPACITY;
use crate::Wakeup;

fn page() -> u64 {
    rustix::param::page_size() as u64
}

/// A memfd of `len` zero bytes, sealed as `build_shared` seals its memfds.
fn memfd(len: u64) -> OwnedFd {
    let fd = memfd_create("ringtrace-offset-test", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    ftruncate(&fd, len).unwrap();
    fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL).unwrap();
    fd
}

/// The same file through a new open file description (as another process would get it).
fn reopen(fd: &OwnedFd) -> OwnedFd {
    open_path(&format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

fn open_path(path: &str) -> OwnedFd {
    file::open_path(Path::new(path)).unwrap()
}

/// A header page, then rings of 4096, 8192 and 4096 bytes, then a spare page; returns
/// the file's length and the three offsets.
fn layout() -> (u64, [u64; 3]) {
    let a = page();
    let b = a + image_len(4096);
    let c = b + image_len(8192);
    (c + image_len(4096) + page(), [a, b, c])
}

/// Record `seq` of ring `ring`: its tag, its number, and filler of varying length.
fn record(ring: u8, seq: u32) -> Vec<u8> {
    let mut r = vec![ring];
    r.extend_from_slice(&seq.to_le_bytes());
    r.resize(5 + (seq % 37) as usize, ring);
    r
}

/// Checks that `got` holds exactly the records `0..n` of `ring`, in order.
fn check_all(ring: u8, got: &[Vec<u8>], n: u32) {
    assert_eq!(got.len(), n as usize, "ring {ring}: every record exactly once");
    for (seq, rec) in (0..n).zip(got) {
        assert_eq!(rec, &record(ring, seq), "ring {ring}, record {seq}");
    }
}

/// A consume callback that keeps copies of the records.
fn collect(out: &mut Vec<Vec<u8>>) -> impl FnMut(&[u8]) -> Result<(), Infallible> + '_ {
    |r| {
        out.push(r.to_vec());
        Ok(())
    }
}

fn invalid(e: Error) -> String {
    match e {
        Error::InvalidRing { reason } => reason,
        other => panic!("expected InvalidRing, got {other:?}"),
    }
}

#[test]
fn image_len_is_whole_pages() {
    for cap in [4096, 8192, 1 << 20, MAX_CAPACITY] {
        assert_eq!(image_len(cap), file::data_offset() + cap);
        assert_eq!(image_len(cap) % page(), 0);
    }
    assert_eq!(image_len(1), file::data_offset() + page());
    assert!(image_len(u64::MAX) >= u64::MAX - page()); // saturates, no panic
}

#[test]
fn three_rings_in_one_memfd() {
    let (len, [a, b, c]) = layout();
    let fd = memfd(len);
    let spsc = RingBuf::<Spsc, Discard>::builder(4096).init_at(fd.as_fd(), a).unwrap();
    let over = RingBuf::<Spsc, Overwrite>::builder(8192).init_at(fd.as_fd(), b).unwrap();
    let mpsc = RingBuf::<Mpsc, Discard>::builder(4096).init_at(fd.as_fd(), c).unwrap();
    // The creator's descriptor may go: each mapping holds its own.
    let other = reopen(&fd);
    drop(fd);
    assert!(spsc.is_shared() && over.is_shared() && mpsc.is_shared());
    assert_eq!((spsc.capacity(), over.capacity(), mpsc.capacity()), (4096, 8192, 4096));

    let (mut pa, mut pb, mut pc) = (spsc.producer().unwrap(), over.producer().unwrap(), mpsc.producer().unwrap());
    let mut pc2 = pc.clone();
    // Consumers attached through the other descriptor, as another process would.
    let ca = RingBuf::<Spsc, Discard>::open_at(other.as_fd(), a, Access::Consumer, Owners::Mine).unwrap();
    let cb = RingBuf::<Spsc, Overwrite>::open_at(other.as_fd(), b, Access::Consumer, Owners::Mine).unwrap();
    let cc = RingBuf::<Mpsc, Discard>::open_at(other.as_fd(), c, Access::Consumer, Owners::Mine).unwrap();
    let (mut ka, mut kb, mut kc) = (ca.consumer().unwrap(), cb.consumer().unwrap(), cc.consumer().unwrap());
    assert!(matches!(ca.producer(), Err(Error::ReadOnly { .. })), "Access::Consumer refuses producers");

    let (mut got_a, mut got_b, mut got_c) = (Vec::new(), Vec::new(), Vec::new());
    let n = 3000u32;
    for seq in 0..n {
        pa.output(&record(1, seq), Wakeup::Default).unwrap();
        pb.output(&record(2, seq), Wakeup::Default).unwrap();
        let p = if seq % 2 == 0 { &mut pc } else { &mut pc2 };
        p.output(&record(3, seq), Wakeup::Default).unwrap();
        if seq % 16 == 15 || seq == n - 1 {
            ka.consume(collect(&mut got_a)).unwrap();
            kb.consume(collect(&mut got_b)).unwrap();
            kc.consume(collect(&mut got_c)).unwrap();
        }
    }
    check_all(1, &got_a, n);
    check_all(2, &got_b, n);
    check_all(3, &got_c, n);
    assert_eq!(kb.overwritten_unread(), 0);
    for (stats, consumed) in [(spsc.stats(), ca.stats().consumed), (mpsc.stats(), cc.stats().consumed)] {
        assert_eq!((stats.committed, stats.lost, consumed), (u64::from(n), 0, u64::from(n)));
    }
    let s = over.stats();
    assert_eq!((s.committed, s.lost, s.overwritten_unread), (u64::from(n), 0, 0));

    // The newest records of the overwrite ring, read without mapping (inspect at the
    // offset), are its own.
    let path = format!("/proc/self/fd/{}", other.as_raw_fd());
    let file = crate::inspect::RingFile::open_at(&path, b).unwrap();
    let records = file.records().unwrap();
    assert!(!records.is_empty());
    assert!(records.iter().all(|r| r.payload.first() == Some(&2)));
    assert_eq!(records.iter().next_back().unwrap().payload, record(2, n - 1));
}

#[test]
fn rings_in_a_named_file_reopened_by_path() {
    let (len, offs) = layout();
    let path = std::env::temp_dir().join(format!("ringtrace-offset-{}.rings", std::process::id()));
    let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path).unwrap();
    file.set_len(len).unwrap();
    let rings: Vec<RingBuf<Mpsc, Discard>> =
        offs.iter().map(|&o| RingBuf::builder(4096).init_at(file.as_fd(), o).unwrap()).collect();
    for (i, ring) in rings.iter().enumerate() {
        ring.producer().unwrap().output(&[i as u8; 10], Wakeup::Default).unwrap();
    }
    let fresh = open_path(path.to_str().unwrap());
    let opened: Vec<_> =
        offs.iter().map(|&o| RingBuf::<Mpsc, Discard>::open_at(fresh.as_fd(), o, Access::Full, Owners::Mine)).collect();
    // Unlinked, the file is one only seals could protect: attaching is refused.
    std::fs::remove_file(&path).unwrap();
    let unlinked = RingBuf::<Mpsc, Discard>::open_at(fresh.as_fd(), offs[0], Access::Full, Owners::Mine).unwrap_err();
    assert!(invalid(unlinked).contains("not sealed"));
    for (i, ring) in opened.into_iter().enumerate() {
        let got: Vec<Vec<u8>> = ring.unwrap().consumer().unwrap().iter().map(<[u8]>::to_vec).collect();
        assert_eq!(got, [vec![i as u8; 10]], "ring {i}");
    }
}

#[test]
fn bad_offsets_are_invalid_ring_errors() {
    let (len, [a, b, c]) = layout();
    let fd = memfd(len);
    let _ring = RingBuf::<Spsc, Discard>::builder(4096).init_at(fd.as_fd(), a).unwrap();
    let _over = RingBuf::<Mpsc, Overwrite>::builder(8192).init_at(fd.as_fd(), b).unwrap();
    let new = |o| RingBuf::<Mpsc, Discard>::builder(4096).init_at(fd.as_fd(), o);
    let open = |o| RingBuf::<Spsc, Discard>::open_at(fd.as_fd(), o, Access::Full, Owners::Mine);

    // Not page-aligned.
    for o in [c + 8, c + 4095, 1] {
        assert!(invalid(new(o).unwrap_err()).contains("not a multiple of the page size"));
        assert!(invalid(open(o).unwrap_err()).contains("not a multiple of the page size"));
    }
    // Past the end, or an image that does not fit before it.
    let far = len.next_multiple_of(page()) + 16 * page();
    let top = !(page() - 1); // the last page-aligned offset
    for o in [len, far, top] {
        assert!(invalid(open(o).unwrap_err()).contains("past the end of the file"), "{o}");
        assert!(invalid(new(o).unwrap_err()).contains("past the end of the file"), "{o}");
    }
    let last = len - page();
    assert!(invalid(new(last).unwrap_err()).contains("does not fit in the file"));
    assert!(invalid(open(last).unwrap_err()).contains("the header alone needs"));
    let big = RingBuf::<Mpsc, Discard>::builder(1 << 20).init_at(fd.as_fd(), c).unwrap_err();
    assert!(invalid(big).contains("does not fit in the file"));
    // Nothing at the offset (the header page), or a ring of another kind or mode.
    assert!(invalid(open(0).unwrap_err()).contains("not initialized"));
    let kind = RingBuf::<Mpsc, Discard>::open_at(fd.as_fd(), a, Access::Full, Owners::Mine).unwrap_err();
    assert!(invalid(kind).contains(&format!("holds at offset {a} an spsc discard ring, not the mpsc discard")));
    assert!(invalid(open(b).unwrap_err()).contains("an mpsc overwrite ring"));
    // A ring is never initialized over another (or over anything but zeroes).
    assert!(invalid(new(a).unwrap_err()).contains("not zero-filled"));
    // Invalid settings are refused before the file is looked at.
    let cap = RingBuf::<Mpsc, Discard>::builder(1000).init_at(fd.as_fd(), c).unwrap_err();
    assert!(matches!(cap, Error::InvalidCapacity { .. }));
    // The offset ring is intact after all that.
    assert!(open(a).is_ok());
}

#[test]
fn whole_file_checks_apply_at_any_offset() {
    let (len, [a, ..]) = layout();
    // A memfd its sender could shrink under the mapping.
    let fd = memfd_create("unsealed", MemfdFlags::CLOEXEC).unwrap();
    ftruncate(&fd, len).unwrap();
    let ring = RingBuf::<Mpsc, Discard>::builder(4096).init_at(fd.as_fd(), a).unwrap();
    let err = RingBuf::<Mpsc, Discard>::open_at(fd.as_fd(), a, Access::Full, Owners::Mine).unwrap_err();
    assert!(invalid(err).contains("not sealed against shrinking"));
    drop(ring);
    // Not a regular file.
    let r = std::fs::File::open("/dev/null").unwrap();
    assert!(invalid(RingBuf::<Mpsc, Discard>::open_at(r.as_fd(), a, Access::Full, Owners::Mine).unwrap_err())
        .contains("not a regular file"));
    assert!(invalid(RingBuf::<Mpsc, Discard>::builder(4096).init_at(r.as_fd(), a).unwrap_err())
        .contains("not a regular file"));
}
