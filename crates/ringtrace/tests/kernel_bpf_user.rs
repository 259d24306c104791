//! Writing into real BPF user ring buffer maps: a hand-assembled socket filter
//! (ringtrace-fixtures' `EchoProgram`) drains the map with `bpf_user_ringbuf_drain`,
//! run with `BPF_PROG_TEST_RUN`, and echoes every sample unchanged into a ring buffer
//! map that `BpfRingBuf` reads. Samples carry their producer, a sequence number and a
//! checksum: every one must come back once, whole, in its producer's order. Bad input:
//! lengths the kernel would fail on, maps of other types, a second producer, a
//! producer without privileges, a producer that dies mid-sample. Each test
//! skips with a one-line reason where BPF (or the map type, Linux 6.1) is not
//! available, or fails where `RINGTRACE_REQUIRE` lists `bpf`.

#[macro_use]
mod common;

use std::convert::Infallible;
use std::os::fd::{AsFd, OwnedFd};
use std::process::Command;
use std::time::{Duration, Instant};

use ringtrace::kernel::bpf::{BpfRingBuf, KernelError, UserReserveError, UserRingBuf};
use ringtrace_fixtures::{create_array_map, have_root, skip, BpfFs, EchoProgram, Feature, RingMap, UserRingMap};

/// A user ring buffer map of `size` bytes, or `None` (skipped) where there is none.
fn user_map(size: u32) -> Option<UserRingMap> {
    match UserRingMap::create(size) {
        Ok(m) => Some(m),
        Err(e) => {
            skip(Feature::Bpf, format!("user ring buffer maps unavailable (Linux 6.1 or later): {e}"));
            None
        }
    }
}

/// A user ring of `size` bytes, drained by the echo program into a ring buffer map of
/// `out` bytes, read by `BpfRingBuf`; and the user ring's id.
fn echo(size: u32, out: u32) -> Option<(UserRingBuf, BpfRingBuf, EchoProgram, u32)> {
    let map = user_map(size)?;
    let out = RingMap::create(out).unwrap();
    let prog = EchoProgram::load(map.as_fd(), out.as_fd()).unwrap();
    let id = map.id().unwrap();
    let ring = UserRingBuf::from_fd(OwnedFd::from(map)).unwrap();
    Some((ring, BpfRingBuf::from_fd(OwnedFd::from(out)).unwrap(), prog, id))
}

/// The payload of producer `who`'s sample `seq`: 16 to 255 bytes, its producer,
/// sequence number and a checksum of the rest in the first 16.
fn sample(who: u32, seq: u64) -> Vec<u8> {
    let len = 16 + ((seq * 7 + u64::from(who) * 13) % 240) as usize;
    let mut p = vec![0u8; len];
    for (i, b) in p[16..].iter_mut().enumerate() {
        *b = (seq as usize).wrapping_mul(31).wrapping_add(i * 7 + who as usize) as u8;
    }
    let sum = p[16..].iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    p[..4].copy_from_slice(&who.to_le_bytes());
    p[4..12].copy_from_slice(&seq.to_le_bytes());
    p[12..16].copy_from_slice(&sum.to_le_bytes());
    p
}

/// A sample read back: (producer, sequence number), after checking it is whole.
fn check(rec: &[u8]) -> (u32, u64) {
    let who = u32::from_le_bytes(rec[..4].try_into().unwrap());
    let seq = u64::from_le_bytes(rec[4..12].try_into().unwrap());
    assert_eq!(rec, sample(who, seq).as_slice(), "sample {who}/{seq} damaged");
    (who, seq)
}

/// Drains with the program and reads the echoes until `want` arrived or `deadline`,
/// each producer's in order; returns how many arrived.
fn drain_until(prog: &EchoProgram, out: &mut BpfRingBuf, next: &mut [u64], want: u64, deadline: Instant) -> u64 {
    let mut got = 0;
    while got < want && Instant::now() < deadline {
        let n = prog.run().unwrap();
        assert!(n >= 0, "the drain failed: {n}");
        out.consume(|rec: &[u8]| {
            let (who, seq) = check(rec);
            // A gap with output failures counted is the echo's loss (its ring buffer
            // map full), not the producer's.
            assert_eq!(seq, next[who as usize], "producer {who}: out of order or twice; {:?}", prog.counters());
            next[who as usize] += 1;
            got += 1;
            Ok::<(), Infallible>(())
        })
        .unwrap();
        if n == 0 {
            std::thread::yield_now();
        }
    }
    got
}

#[test]
fn samples_of_several_threads_come_back_once_in_order_through_a_bpf_program() {
    need_bpf!();
    // 64 KiB: filled and drained thousands of times over. The echoes' map holds what
    // one drain can take: a drain goes on while the producers refill the ring (one
    // preempted on a busy machine long enough for them to look again and find room),
    // up to 128 Ki samples (`BPF_MAX_USER_RINGBUF_SAMPLES`) of at most 264 bytes.
    let Some((ring, mut out, prog, _)) = echo(1 << 16, 64 << 20) else { return };
    const THREADS: u32 = 4;
    const EACH: u64 = 500_000;
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut next = vec![0u64; THREADS as usize];
    let got = std::thread::scope(|s| {
        for who in 0..THREADS {
            let ring = &ring;
            s.spawn(move || {
                for seq in 0..EACH {
                    let p = sample(who, seq);
                    let mut r = ring.reserve_blocking(p.len(), Duration::from_secs(60)).unwrap();
                    r.copy_from_slice(&p);
                    r.commit();
                }
            });
        }
        drain_until(&prog, &mut out, &mut next, u64::from(THREADS) * EACH, deadline)
    });
    assert_eq!(got, u64::from(THREADS) * EACH);
    assert_eq!(next, vec![EACH; THREADS as usize]);
    let k = prog.counters().unwrap();
    assert_eq!((k.echoed, k.bad_length, k.read_failed, k.output_failed), (got, 0, 0, 0));
    let st = ring.stats();
    assert_eq!((st.committed, st.discarded, st.refused, st.recovered), (got, 0, 0, 0));
    assert_eq!(ring.pending(), 0);
}

#[test]
fn a_full_map_refuses_and_a_blocking_reserve_wakes_when_the_program_drains() {
    need_bpf!();
    let page = rustix::param::page_size() as u32;
    let Some((ring, mut out, prog, _)) = echo(page, 1 << 20) else { return };
    let mut written = 0u64;
    loop {
        match ring.reserve(64) {
            Ok(mut s) => {
                s.fill(written as u8);
                s.commit();
                written += 1;
            }
            Err(UserReserveError::Full { len: 64 }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    // 72-byte footprints.
    assert_eq!(written, u64::from(page) / 72);
    assert_eq!(ring.stats().full, 1);
    let t = Instant::now();
    assert!(matches!(
        ring.reserve_blocking(64, Duration::from_millis(100)),
        Err(UserReserveError::Timeout { len: 64 })
    ));
    assert!(t.elapsed() >= Duration::from_millis(100));
    // The program drains 200 ms from now; the blocking reserve returns then, woken (or
    // at its next look), long before its timeout.
    let t = Instant::now();
    let got = std::thread::scope(|s| {
        let drained = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            prog.run().unwrap()
        });
        let r = ring.reserve_blocking(64, Duration::from_secs(30)).unwrap();
        let waited = t.elapsed();
        r.discard();
        (drained.join().unwrap(), waited)
    });
    assert_eq!(got.0, written as i64);
    assert!(got.1 >= Duration::from_millis(150) && got.1 < Duration::from_secs(20), "{:?}", got.1);
    // The discarded sample is stepped over: the next drain takes nothing.
    assert_eq!(prog.run().unwrap(), 0);
    let mut echoed = 0;
    out.consume(|_: &[u8]| echoed += 1).unwrap();
    assert_eq!(echoed, written);
    assert_eq!((ring.stats().discarded, ring.pending()), (1, 0));
}

#[test]
fn lengths_the_kernel_would_fail_on_are_refused_before_anything_is_written() {
    need_bpf!();
    let Some((ring, _out, prog, _)) = echo(1 << 16, 1 << 20) else { return };
    assert_eq!(ring.max_sample(), (1 << 16) - 8);
    assert!(matches!(ring.reserve(0), Err(UserReserveError::Empty)));
    let too = ring.max_sample() + 1;
    assert!(matches!(ring.reserve(too), Err(UserReserveError::TooLarge { len, max }) if len == too && max == too - 1));
    assert_eq!(ring.stats().refused, 2);
    // The longest sample the map takes, the whole map, drains (the echo program counts
    // it too long to echo, but the drain takes it and goes on).
    ring.write(&vec![7u8; ring.max_sample()]).unwrap();
    assert!(matches!(ring.write(b"after"), Err(UserReserveError::Full { len: 5 })));
    assert_eq!(prog.run().unwrap(), 1);
    ring.write(b"after").unwrap();
    assert_eq!(prog.run().unwrap(), 1);
    assert_eq!(ring.pending(), 0);
    assert_eq!(prog.counters().unwrap().bad_length, 1);
}

#[test]
fn maps_of_the_wrong_type_and_a_second_producer_are_refused() {
    need_bpf!();
    let Some(map) = user_map(1 << 16) else { return };
    let id = map.id().unwrap();
    let dup = map.as_fd().try_clone_to_owned().unwrap();
    let ring = UserRingBuf::from_fd(OwnedFd::from(map)).unwrap();
    // A second producer, here or in another process, would write at the same position.
    let e = UserRingBuf::open_id(id).unwrap_err();
    assert!(
        matches!(e, KernelError::ProducerBusy { id: i, holder: Some((pid, _)) } if i == id && pid == std::process::id()),
        "{e}"
    );
    assert!(e.to_string().contains("already has a producer"), "{e}");
    // The reader refuses it, naming the producer's type.
    let e = BpfRingBuf::from_fd(dup).unwrap_err();
    assert!(e.to_string().contains("UserRingBuf"), "{e}");
    drop(ring);
    let rb = RingMap::create(1 << 16).unwrap();
    let e = UserRingBuf::from_fd(OwnedFd::from(rb)).unwrap_err();
    assert!(matches!(e, KernelError::NotUserRingBuf { map_type: 27, .. }), "{e}");
    assert!(e.to_string().contains("BpfRingBuf"), "{e}");
    let e = UserRingBuf::from_fd(create_array_map(8, 1).unwrap()).unwrap_err();
    assert!(matches!(e, KernelError::NotUserRingBuf { map_type: 2, .. }), "{e}");
    assert!(matches!(UserRingBuf::open_id(u32::MAX), Err(KernelError::NoSuchMap { .. })));
}

#[test]
fn samples_handed_out_raw_are_committed_by_address_once() {
    need_bpf!();
    let Some((ring, mut out, prog, _)) = echo(1 << 16, 1 << 20) else { return };
    let p = sample(0, 0);
    let mut s = ring.reserve(p.len()).unwrap();
    s.copy_from_slice(&p);
    let raw = s.into_raw();
    let other = ring.reserve(8).unwrap().into_raw();
    let mut bogus = [0u8; 8];
    assert!(ring.commit_raw(bogus.as_mut_ptr()).is_err());
    // An address inside the first sample, not its start.
    assert!(ring.commit_raw(raw.wrapping_add(8)).is_err());
    ring.commit_raw(raw).unwrap();
    assert!(ring.commit_raw(raw).is_err(), "committed twice");
    ring.discard_raw(other).unwrap();
    assert_eq!(prog.run().unwrap(), 1);
    let mut seen = Vec::new();
    out.consume(|rec: &[u8]| seen.push(check(rec))).unwrap();
    assert_eq!(seen, [(0, 0)]);
    // A sample left raw when the handle goes is discarded: the next producer's samples
    // drain.
    let id = {
        let raw = ring.reserve(8).unwrap().into_raw();
        let _ = raw;
        ring.id()
    };
    drop(ring);
    let ring = UserRingBuf::open_id(id).unwrap();
    assert_eq!(ring.stats().recovered, 0, "discarded on drop, nothing left BUSY");
    ring.write(&sample(0, 1)).unwrap();
    assert_eq!(prog.run().unwrap(), 1);
}

/// The child's part of [`a_dead_producers_sample_is_discarded_when_the_next_attaches`]:
/// writes three samples into the map `USER_RING_ID`, reserves a fourth and exits
/// without committing it, as a producer killed mid-sample would.
#[test]
#[ignore = "a child role: run by a_dead_producers_sample_is_discarded_when_the_next_attaches"]
fn child_dies_mid_sample() {
    let Ok(id) = std::env::var("USER_RING_ID") else { panic!("not a test: a child role") };
    let ring = UserRingBuf::open_id(id.parse().unwrap()).unwrap();
    for seq in 0..3 {
        ring.write(&sample(1, seq)).unwrap();
    }
    let mut s = ring.reserve(64).unwrap();
    s.fill(0xee);
    // No commit, no destructor: the process ends with the sample BUSY.
    std::process::exit(0);
}

#[test]
fn a_dead_producers_sample_is_discarded_when_the_next_attaches() {
    need_bpf!();
    let Some(map) = user_map(1 << 16) else { return };
    let out = RingMap::create(1 << 20).unwrap();
    let prog = EchoProgram::load(map.as_fd(), out.as_fd()).unwrap();
    let mut out = BpfRingBuf::from_fd(OwnedFd::from(out)).unwrap();
    let id = map.id().unwrap();
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_dies_mid_sample", "--nocapture"])
        .env("USER_RING_ID", id.to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let mut next = vec![0u64; 2];
    let deadline = Instant::now() + Duration::from_secs(30);
    assert_eq!(drain_until(&prog, &mut out, &mut next, 3, deadline), 3);
    // The kernel stops at the BUSY sample, drain after drain: the ring is stuck.
    assert_eq!(prog.run().unwrap(), 0);
    assert_eq!(prog.run().unwrap(), 0);
    // The next producer finds it (it is the map's only producer now) and discards it.
    let ring = UserRingBuf::open_id(id).unwrap();
    assert_eq!(ring.stats().recovered, 1);
    for seq in 3..5 {
        ring.write(&sample(1, seq)).unwrap();
    }
    assert_eq!(drain_until(&prog, &mut out, &mut next, 2, deadline), 2);
    assert_eq!(next, [0, 5]);
    assert_eq!(ring.pending(), 0);
    drop(map);
}

/// The async form: on a full map, `reserve` awaits the program's drain without
/// blocking the runtime's thread: a timer task on the same thread ticks meanwhile, and
/// the program drains only once it has seen it tick.
#[cfg(feature = "tokio")]
#[test]
fn an_async_reserve_awaits_the_drain_without_blocking_its_thread() {
    use ringtrace::tokio::AsyncUserRingBuf;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    need_bpf!();
    let page = rustix::param::page_size() as u32;
    let Some((ring, _out, prog, _)) = echo(page, 1 << 20) else { return };
    while ring.write(&[1; 64]).is_ok() {}
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let ticks = Arc::new(AtomicU32::new(0));
    let (saw_ticks, drained) = rt.block_on(async {
        let ring = AsyncUserRingBuf::new(ring).unwrap();
        let ticker = {
            let ticks = ticks.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    ticks.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let drainer = {
            let ticks = ticks.clone();
            std::thread::spawn(move || {
                // The reserve is waiting by now, or about to: ticks come only from the
                // runtime's thread, which a blocked reserve would hold.
                let deadline = Instant::now() + Duration::from_secs(30);
                while ticks.load(Ordering::Relaxed) < 10 && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                (ticks.load(Ordering::Relaxed) >= 10, prog.run().unwrap())
            })
        };
        let s = tokio::time::timeout(Duration::from_secs(60), ring.reserve(64)).await.unwrap().unwrap();
        s.commit();
        ticker.abort();
        drainer.join().unwrap()
    });
    assert!(saw_ticks, "the runtime's thread did not run while the reserve waited");
    assert!(drained > 0);
}

#[test]
fn a_producer_without_privileges_is_refused_with_a_permission_error() {
    need_bpf!();
    if !have_root("run a child as nobody (setresuid)") {
        return;
    }
    let fs = match BpfFs::mount() {
        Ok(fs) => fs,
        Err(e) => return skip(Feature::Bpf, format!("cannot mount a bpffs: {e}")),
    };
    let Some(map) = user_map(1 << 16) else { return };
    map.pin(&fs.path("user")).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "unprivileged_producer", "--nocapture", "--ignored"])
        .env("USER_RING_ID", map.id().unwrap().to_string())
        .env("USER_RING_PIN", fs.path("user"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains("UNPRIV-OK"), "{text}");
}

/// The child of [`a_producer_without_privileges_is_refused_with_a_permission_error`]:
/// drops to uid 65534 (which clears its capabilities) and checks the errors.
#[test]
#[ignore = "a child role: run by a_producer_without_privileges_is_refused_with_a_permission_error"]
fn unprivileged_producer() {
    let (Ok(id), Ok(pin)) = (std::env::var("USER_RING_ID"), std::env::var("USER_RING_PIN")) else {
        panic!("not a test: a child role")
    };
    use rustix::process::{Gid, Uid};
    let (g, u) = (Gid::from_raw(65534), Uid::from_raw(65534));
    rustix::thread::set_thread_res_gid(g, g, g).unwrap();
    rustix::thread::set_thread_res_uid(u, u, u).unwrap();
    let e = UserRingBuf::open_id(id.parse().unwrap()).unwrap_err();
    assert!(matches!(e, KernelError::Permission { .. }), "{e}");
    assert!(e.to_string().contains("CAP_SYS_ADMIN"), "{e}");
    let e = UserRingBuf::open_pinned(&pin).unwrap_err();
    assert!(matches!(e, KernelError::Permission { .. } | KernelError::NotPinned { .. }), "{e}");
    println!("UNPRIV-OK");
}
