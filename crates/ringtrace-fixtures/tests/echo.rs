//! `UserRingMap` and `EchoProgram` against the running kernel: samples written by hand
//! into a user ring buffer map come back, byte for byte, from the ring buffer map the
//! program echoes them into. Each test skips (printing why) where BPF ring buffer maps
//! cannot be created, and fails instead where `RINGTRACE_REQUIRE` lists `bpf`.

#[path = "support/mapped.rs"]
mod mapped;

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use mapped::{Mapped, BUSY, DISCARD, HDR};
use ringtrace_fixtures::{
    have_bpf, skip, BpfFs, EchoCounters, EchoProgram, Feature, RingMap, UserRingMap, ECHO_MAX_SAMPLE,
};

const MIB: u32 = 1 << 20;

macro_rules! skip_without_bpf {
    () => {
        if !have_bpf() || !have_user_ringbuf() {
            return;
        }
    };
}

/// Whether user ring buffer maps can be created (Linux 6.1 on); if not, skips (or fails,
/// per `RINGTRACE_REQUIRE`) the calling test.
#[track_caller]
fn have_user_ringbuf() -> bool {
    let page = rustix::param::page_size() as u32;
    match UserRingMap::create(page) {
        Ok(_) => true,
        Err(e) => {
            let why = format!("bpf(BPF_MAP_CREATE) of a user ring buffer map failed: {e} (kernel older than 6.1?)");
            skip(Feature::Bpf, why);
            false
        }
    }
}

/// How [`UserRing::push`] leaves a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Commit {
    /// BUSY cleared: the sample is for the consumer.
    Submit,
    /// BUSY cleared, DISCARD set: the consumer skips it.
    Discard,
    /// BUSY left set: reserved, still being written.
    Busy,
}

/// A test-only user-space producer of a `BPF_MAP_TYPE_USER_RINGBUF` map, written by hand
/// as libbpf's `user_ring_buffer__reserve`/`__submit` do: the kernel's `struct
/// bpf_ringbuf` layout (`kernel/bpf/ringbuf.c`), the consumer page mapped read-only at
/// offset 0, the producer page and the twice-mapped data read-write from offset `page`.
struct UserRing {
    consumer: *mut u8,
    producer: *mut u8,
    page: usize,
    size: usize,
}

impl UserRing {
    fn new(map: BorrowedFd<'_>, size: u32) -> io::Result<UserRing> {
        let page = rustix::param::page_size();
        let size = size as usize;
        let fd = map.as_raw_fd();
        // SAFETY: a fresh shared read-only mapping of the map's first page; no Rust
        // object aliases it.
        let consumer = unsafe { libc::mmap(std::ptr::null_mut(), page, libc::PROT_READ, libc::MAP_SHARED, fd, 0) };
        if consumer == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: as above, read-write, from offset `page`: the producer page and the data
        // area twice (the kernel maps `page + 2 * size` bytes there).
        let producer =
            unsafe { libc::mmap(std::ptr::null_mut(), page + 2 * size, rw, libc::MAP_SHARED, fd, page as i64) };
        if producer == libc::MAP_FAILED {
            let err = io::Error::last_os_error();
            // SAFETY: `consumer` is the mapping made above, unused from here on.
            unsafe { libc::munmap(consumer, page) };
            return Err(err);
        }
        Ok(UserRing { consumer: consumer.cast(), producer: producer.cast(), page, size })
    }

    fn consumer_pos(&self) -> u64 {
        // SAFETY: the consumer page is mapped for the life of `self`, page-aligned, and
        // only ever accessed atomically; the kernel stores it with release.
        unsafe { &*self.consumer.cast::<AtomicU64>() }.load(Ordering::Acquire)
    }

    fn producer_pos(&self) -> &AtomicU64 {
        // SAFETY: as for `consumer_pos`, the producer page.
        unsafe { &*self.producer.cast::<AtomicU64>() }
    }

    /// The header's length word of the sample at `pos`.
    fn header(&self, pos: u64) -> &AtomicU32 {
        let off = self.page + (pos as usize & (self.size - 1));
        // SAFETY: `off` is 8-aligned (positions are) and within the first data copy; the
        // kernel only reads it, atomically (`smp_load_acquire`).
        unsafe { &*self.producer.add(off).cast::<AtomicU32>() }
    }

    /// Writes `data` as the next sample, left as `commit` says; returns its position, or
    /// `None` where the ring lacks the room (`round_up(len + 8, 8)` bytes past the
    /// consumer position, less than the size).
    fn push(&self, data: &[u8], commit: Commit) -> Option<u64> {
        let len = data.len() as u32;
        let total = (u64::from(len) + HDR).next_multiple_of(8);
        let pos = self.producer_pos().load(Ordering::Relaxed);
        if pos + total - self.consumer_pos() > self.size as u64 {
            return None;
        }
        // The header, BUSY, then the producer position (release: the kernel sees the BUSY
        // header before the position that covers it), then the data, then BUSY cleared
        // (acq-rel swap, as libbpf's `user_ring_buffer__submit`).
        self.header(pos).store(len | BUSY, Ordering::Relaxed);
        let off = self.page + (pos as usize & (self.size - 1));
        // SAFETY: the pad word after the length word, 4 bytes within the first copy.
        unsafe { self.producer.add(off + 4).cast::<u32>().write_volatile(0) };
        self.producer_pos().store(pos + total, Ordering::Release);
        // SAFETY: `off + 8 + len` stays within the two data copies (len < size); the
        // kernel does not read a BUSY sample's data.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.producer.add(off + HDR as usize), data.len()) };
        match commit {
            Commit::Submit => self.header(pos).swap(len, Ordering::AcqRel),
            Commit::Discard => self.header(pos).swap(len | DISCARD, Ordering::AcqRel),
            Commit::Busy => 0,
        };
        Some(pos)
    }
}

impl Drop for UserRing {
    fn drop(&mut self) {
        // SAFETY: the two mappings made in `new`; no reference into them outlives `self`.
        unsafe {
            libc::munmap(self.consumer.cast(), self.page);
            libc::munmap(self.producer.cast(), self.page + 2 * self.size);
        }
    }
}

/// `len` bytes distinct from sample to sample: byte `i` of sample `n` is `n * 31 + i`.
fn sample(n: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (n * 31 + i) as u8).collect()
}

/// A user ring, an output ring, the program, and both rings mapped.
struct Setup {
    user: UserRing,
    out: Mapped,
    prog: EchoProgram,
    _maps: (UserRingMap, RingMap),
}

fn setup(user_size: u32, out_size: u32) -> Setup {
    let user_map = UserRingMap::create(user_size).unwrap();
    let out_map = RingMap::create(out_size).unwrap();
    let prog = EchoProgram::load(user_map.as_fd(), out_map.as_fd()).unwrap();
    let user = UserRing::new(user_map.as_fd(), user_size).unwrap();
    let out = Mapped::new(out_map.as_fd(), out_size).unwrap();
    Setup { user, out, prog, _maps: (user_map, out_map) }
}

/// The output ring's records (all without DISCARD), consumed.
fn echoed(out: &Mapped) -> Vec<Vec<u8>> {
    let mut records = Vec::new();
    out.drain(|hdr, data| {
        assert_eq!(hdr & DISCARD, 0);
        records.push(data.to_vec());
    });
    records
}

#[test]
fn echoes_samples_unchanged() {
    skip_without_bpf!();
    let s = setup(64 * 1024, 64 * 1024);
    let max = ECHO_MAX_SAMPLE as usize;
    let lens = [1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 63, 64, 100, 255, 256, 257, 511, 1000, 1023, 1024, 2049, max - 1, max];
    let samples: Vec<Vec<u8>> = lens.iter().enumerate().map(|(n, &len)| sample(n, len)).collect();
    for data in &samples {
        s.user.push(data, Commit::Submit).unwrap();
    }
    assert_eq!(s.prog.run().unwrap(), lens.len() as i64);
    assert_eq!(s.user.consumer_pos(), s.user.producer_pos().load(Ordering::Relaxed));
    assert_eq!(echoed(&s.out), samples);
    assert_eq!(s.prog.counters().unwrap(), EchoCounters { echoed: lens.len() as u64, ..Default::default() });
    // An empty ring: the drain returns 0.
    assert_eq!(s.prog.run().unwrap(), 0);
    // Again, past the end of the ring and around (64 KiB of ~4 KiB samples a time).
    for round in 0..8 {
        let batch: Vec<Vec<u8>> = (0..10).map(|n| sample(round * 10 + n, 1000 + 300 * n)).collect();
        for data in &batch {
            s.user.push(data, Commit::Submit).unwrap();
        }
        assert_eq!(s.prog.run().unwrap(), 10);
        assert_eq!(echoed(&s.out), batch);
    }
}

#[test]
fn empty_and_too_long_samples() {
    skip_without_bpf!();
    let s = setup(64 * 1024, 64 * 1024);
    let too_long = sample(1, ECHO_MAX_SAMPLE as usize + 1);
    let huge = sample(2, 40_000);
    for data in [&[][..], &too_long, &huge, &sample(3, 5)] {
        s.user.push(data, Commit::Submit).unwrap();
    }
    // Every sample is drained (and counted in the return value); the long ones dropped.
    assert_eq!(s.prog.run().unwrap(), 4);
    assert_eq!(echoed(&s.out), vec![vec![], sample(3, 5)]);
    assert_eq!(s.prog.counters().unwrap(), EchoCounters { echoed: 2, bad_length: 2, ..Default::default() });
}

#[test]
fn discarded_samples_are_skipped() {
    skip_without_bpf!();
    let s = setup(64 * 1024, 64 * 1024);
    for (n, commit) in [Commit::Submit, Commit::Discard, Commit::Submit, Commit::Discard].into_iter().enumerate() {
        s.user.push(&sample(n, 10 + n), commit).unwrap();
    }
    // The kernel skips DISCARD samples without a callback and leaves them out of the count.
    assert_eq!(s.prog.run().unwrap(), 2);
    assert_eq!(s.user.consumer_pos(), s.user.producer_pos().load(Ordering::Relaxed));
    assert_eq!(echoed(&s.out), vec![sample(0, 10), sample(2, 12)]);
}

#[test]
fn busy_sample_stops_the_drain() {
    skip_without_bpf!();
    let s = setup(64 * 1024, 64 * 1024);
    s.user.push(&sample(0, 20), Commit::Submit).unwrap();
    s.user.push(&sample(1, 21), Commit::Submit).unwrap();
    let busy = s.user.push(&sample(2, 22), Commit::Busy).unwrap();
    s.user.push(&sample(3, 23), Commit::Submit).unwrap();
    // The drain stops at the BUSY sample: the two before it, the consumer position at it.
    assert_eq!(s.prog.run().unwrap(), 2);
    assert_eq!(s.user.consumer_pos(), busy);
    assert_eq!(echoed(&s.out), vec![sample(0, 20), sample(1, 21)]);
    assert_eq!(s.prog.run().unwrap(), 0);
    assert_eq!(s.user.consumer_pos(), busy);
    // Committed, it and the one after it go.
    s.user.header(busy).swap(22, Ordering::AcqRel);
    assert_eq!(s.prog.run().unwrap(), 2);
    assert_eq!(echoed(&s.out), vec![sample(2, 22), sample(3, 23)]);
}

#[test]
fn full_output_ring_drops() {
    skip_without_bpf!();
    let s = setup(64 * 1024, 4096);
    for n in 0..10 {
        s.user.push(&sample(n, 1000), Commit::Submit).unwrap();
    }
    // 1008 bytes a record; the kernel keeps producer - consumer <= size - 1: 4 fit.
    assert_eq!(s.prog.run().unwrap(), 10);
    assert_eq!(echoed(&s.out), (0..4).map(|n| sample(n, 1000)).collect::<Vec<_>>());
    assert_eq!(s.prog.counters().unwrap(), EchoCounters { echoed: 4, output_failed: 6, ..Default::default() });
}

#[test]
fn one_drain_takes_at_most_128_ki_samples() {
    skip_without_bpf!();
    // BPF_MAX_USER_RINGBUF_SAMPLES: 16 bytes a 1-byte sample, 3 past the cap.
    const CAP: usize = 128 * 1024;
    let s = setup(4 * MIB, 4 * MIB);
    for n in 0..CAP + 3 {
        s.user.push(&[n as u8], Commit::Submit).unwrap();
    }
    assert_eq!(s.prog.run().unwrap(), CAP as i64);
    assert_eq!(s.prog.run().unwrap(), 3);
    let records = echoed(&s.out);
    assert_eq!(records.len(), CAP + 3);
    assert!(records.iter().enumerate().all(|(n, r)| r == &[n as u8]));
    // Discarded samples count towards the cap (8 bytes each, empty): a drain of CAP of
    // them returns 0, and the samples after them wait for the next drain.
    for _ in 0..CAP {
        s.user.push(&[], Commit::Discard).unwrap();
    }
    for n in 0..3 {
        s.user.push(&[n], Commit::Submit).unwrap();
    }
    assert_eq!(s.prog.run().unwrap(), 0);
    assert_eq!(s.prog.run().unwrap(), 3);
    assert_eq!(echoed(&s.out), vec![vec![0], vec![1], vec![2]]);
}

#[test]
fn a_bad_producer_position_fails_the_drain() {
    skip_without_bpf!();
    let s = setup(64 * 1024, 64 * 1024);
    s.user.push(&sample(0, 8), Commit::Submit).unwrap();
    let pos = s.user.producer_pos().load(Ordering::Relaxed);
    // Not a multiple of 8: -EINVAL, nothing consumed.
    s.user.producer_pos().store(pos + 4, Ordering::Release);
    assert_eq!(s.prog.run().unwrap(), -i64::from(libc::EINVAL));
    assert_eq!(s.user.consumer_pos(), 0);
    s.user.producer_pos().store(pos, Ordering::Release);
    assert_eq!(s.prog.run().unwrap(), 1);
    // A header whose length runs past the producer position: -EINVAL too, after the
    // sample before it was echoed and consumed in the same drain.
    s.user.push(&sample(1, 8), Commit::Submit).unwrap();
    let bad = s.user.push(&sample(2, 8), Commit::Submit).unwrap();
    s.user.header(bad).store(64, Ordering::Release);
    assert_eq!(s.prog.run().unwrap(), -i64::from(libc::EINVAL));
    assert_eq!(s.user.consumer_pos(), bad);
    assert_eq!(echoed(&s.out), vec![sample(0, 8), sample(1, 8)]);
    assert_eq!(s.prog.counters().unwrap(), EchoCounters { echoed: 2, ..Default::default() });
}

#[test]
fn user_ring_map_mappings_and_ids() {
    skip_without_bpf!();
    let a = UserRingMap::create(MIB).unwrap();
    let b = UserRingMap::create(MIB).unwrap();
    let (ia, ib) = (a.id().unwrap(), b.id().unwrap());
    assert!(ia > 0 && ib > 0 && ia != ib, "{ia} {ib}");
    // The kernel's checks on max_entries, as for a ring buffer map.
    assert_eq!(UserRingMap::create(4096 * 3).unwrap_err().raw_os_error(), Some(libc::EINVAL));
    assert_eq!(UserRingMap::create(1024).unwrap_err().raw_os_error(), Some(libc::EINVAL));
    // The consumer page is the kernel's: a writable mapping of it is refused.
    let page = rustix::param::page_size();
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: a new mapping (refused, or unmapped at once); nothing aliases it.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), page, rw, libc::MAP_SHARED, a.as_fd().as_raw_fd(), 0) };
    if p != libc::MAP_FAILED {
        // SAFETY: the mapping just made.
        unsafe { libc::munmap(p, page) };
        panic!("a writable mapping of a user ring buffer's consumer page was accepted");
    }
    assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EPERM));
    // A user ring buffer is not an output ring, nor a ring buffer a user ring.
    let ring = RingMap::create(MIB).unwrap();
    for (user, out) in [(ring.as_fd(), ring.as_fd()), (a.as_fd(), b.as_fd())] {
        let msg = EchoProgram::load(user, out).unwrap_err().to_string();
        assert!(msg.contains("verifier log:"), "{msg}");
    }
    let fs = match BpfFs::mount() {
        Ok(fs) => fs,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return skip(Feature::Bpf, format!("cannot mount a bpffs: {e}"));
        }
        Err(e) => panic!("{e}"),
    };
    let path = fs.path("user_ring");
    a.pin(&path).unwrap();
    assert!(path.exists());
    let fd: std::os::fd::OwnedFd = b.into();
    assert!(fd.as_raw_fd() >= 0);
}
