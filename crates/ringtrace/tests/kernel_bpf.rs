//! Reading real BPF ring buffer maps: a hand-assembled socket filter (ringtrace-fixtures)
//! writes numbered records with `bpf_ringbuf_output` or reserve/submit/discard, run
//! with `BPF_PROG_TEST_RUN`; the reader must see every record, in order, once, with its
//! bytes. Each test skips with a one-line reason where BPF is not available (no
//! CAP_BPF); as root they run.

use std::convert::Infallible;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringtrace::kernel::bpf::{BpfRingBuf, KernelError, RingSet, BPF_F_RB_OVERWRITE};
use ringtrace::ConsumeError;
use ringtrace_fixtures::{
    bpf_skip_reason, create_array_map, expected_payload, BpfFs, Method, ProgSpec, RingMap, SeqProgram,
    BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP,
};

macro_rules! need_bpf {
    () => {
        if let Some(why) = bpf_skip_reason() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

fn seq(rec: &[u8]) -> u64 {
    u64::from_ne_bytes(rec[..8].try_into().unwrap())
}

/// Checks each record against the program's payload: seqs strictly increase, skipping
/// only discarded seqs and (counted in `gaps`) seqs the kernel dropped for want of
/// space, which the program counts too.
struct Checker {
    next: u64,
    payload: u32,
    discard_every: u64,
    seen: u64,
    gaps: u64,
}

impl Checker {
    fn new(payload: u32, discard_every: u32) -> Checker {
        Checker { next: 0, payload, discard_every: discard_every as u64, seen: 0, gaps: 0 }
    }
    fn check(&mut self, rec: &[u8]) {
        while self.discard_every != 0 && self.next % self.discard_every == self.discard_every - 1 {
            self.next += 1;
        }
        let s = seq(rec);
        assert!(s >= self.next, "records in order, each once: {s} after {}", self.next);
        self.gaps += s - self.next;
        self.next = s;
        assert_eq!(rec, &expected_payload(self.next, self.payload)[..], "record {} bytes", self.next);
        self.next += 1;
        self.seen += 1;
    }
}

fn setup(size: u32, spec: ProgSpec) -> (BpfRingBuf, SeqProgram) {
    let map = RingMap::create(size).expect("create ring map");
    let prog = SeqProgram::load(map.as_fd(), spec).expect("load program");
    let ring = BpfRingBuf::from_fd(map.into()).expect("attach");
    (ring, prog)
}

#[test]
fn every_record_arrives_in_order_once_with_its_bytes() {
    need_bpf!();
    for (payload, method) in [(8, Method::Output), (64, Method::Output), (24, Method::ReserveSubmit)] {
        let (mut ring, prog) = setup(1 << 20, ProgSpec { payload, method, ..Default::default() });
        let mut c = Checker::new(payload, 0);
        for _ in 0..20 {
            prog.run(1000).unwrap();
            ring.consume(|rec| {
                c.check(rec);
                Ok::<(), Infallible>(())
            })
            .unwrap();
        }
        let counters = prog.counters().unwrap();
        assert_eq!((counters.attempts, counters.drops), (20_000, 0));
        assert_eq!((c.seen, c.gaps), (20_000, 0));
        assert_eq!(ring.stats().consumed, 20_000);
        assert_eq!(ring.available(), 0);
        assert!(!ring.ready());
    }
}

#[test]
fn discarded_records_are_skipped() {
    need_bpf!();
    let spec = ProgSpec { payload: 16, method: Method::ReserveSubmit, discard_every: 3, ..Default::default() };
    let (mut ring, prog) = setup(1 << 16, spec);
    let mut c = Checker::new(16, 3);
    for _ in 0..10 {
        prog.run(999).unwrap();
        ring.consume(|rec| {
            c.check(rec);
            Ok::<(), Infallible>(())
        })
        .unwrap();
    }
    let k = prog.counters().unwrap();
    assert_eq!(k.discards, 3330);
    assert_eq!(c.seen, 9990 - 3330);
    assert_eq!(ring.stats().discarded, 3330);
}

#[test]
fn a_full_map_drops_and_the_reader_accounts_for_every_record() {
    need_bpf!();
    let (mut ring, prog) = setup(4096, ProgSpec { payload: 64, ..Default::default() });
    prog.run(1000).unwrap();
    let k = prog.counters().unwrap();
    assert!(k.drops > 0, "a 4 KiB map holds 56 records of 72 bytes");
    let n = ring
        .consume(|rec| {
            assert_eq!(rec, &expected_payload(seq(rec), 64)[..]);
            Ok::<(), Infallible>(())
        })
        .unwrap();
    assert_eq!(n as u64 + k.drops, k.attempts, "committed = consumed + dropped");
}

#[test]
fn consume_n_and_a_failing_callback_leave_the_rest_for_the_next_call() {
    need_bpf!();
    let (mut ring, prog) = setup(1 << 16, ProgSpec::default());
    prog.run(100).unwrap();
    let mut got = Vec::new();
    assert_eq!(
        ring.consume_n(10, |r| {
            got.push(seq(r));
            Ok::<(), Infallible>(())
        })
        .unwrap(),
        10
    );
    let e = ring.consume(|r| {
        if seq(r) == 50 {
            Err("stop at 50")
        } else {
            got.push(seq(r));
            Ok(())
        }
    });
    assert!(matches!(e, Err(ConsumeError::Callback("stop at 50"))));
    ring.consume(|r| {
        got.push(seq(r));
        Ok::<(), Infallible>(())
    })
    .unwrap();
    let want: Vec<u64> = (0..100).filter(|&s| s != 50).collect();
    assert_eq!(got, want);
}

#[test]
fn a_second_reader_resumes_where_the_first_stopped() {
    need_bpf!();
    let map = RingMap::create(1 << 16).unwrap();
    let prog = SeqProgram::load(map.as_fd(), ProgSpec::default()).unwrap();
    let dup: OwnedFd = map.as_fd().try_clone_to_owned().unwrap();
    prog.run(10).unwrap();
    {
        let mut a = BpfRingBuf::from_fd(dup).unwrap();
        assert_eq!(a.consume_n(4, |_| Ok::<(), Infallible>(())).unwrap(), 4);
    }
    let mut b = BpfRingBuf::from_fd(map.into()).unwrap();
    let mut got = Vec::new();
    b.consume(|r| {
        got.push(seq(r));
        Ok::<(), Infallible>(())
    })
    .unwrap();
    assert_eq!(got, (4..10).collect::<Vec<_>>());
}

/// A producer thread runs the program in bursts while the reader consumes and, when it
/// has caught up, waits (edge-triggered epoll inside `wait`): millions of records, none
/// lost, and no lost wakeup. Every 16th burst the producer waits for the reader to
/// catch up and pauses, so the reader waits at least that often whatever the load; a
/// wait that runs out its timeout while a record is ready is a lost wakeup.
#[test]
fn edge_triggered_wakeups_over_millions_of_records_never_stall() {
    need_bpf!();
    let (mut ring, prog) = setup(1 << 18, ProgSpec::default());
    let total: u64 = if cfg!(debug_assertions) { 300_000 } else { 3_000_000 };
    let prog = Arc::new(prog);
    let consumed = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let producer = {
        let (prog, consumed, done) = (prog.clone(), consumed.clone(), done.clone());
        std::thread::spawn(move || {
            let mut run = 0u64;
            let mut k = 0u32;
            let mut pauses = 0u64;
            while run < total {
                let batch = [1u32, 7, 300, 2000, 50][k as usize % 5].min((total - run) as u32);
                prog.run(batch).unwrap();
                run += batch as u64;
                k += 1;
                if k % 16 == 0 {
                    // Let the reader catch up (it then waits), then give it time to.
                    let until = Instant::now() + Duration::from_secs(10);
                    loop {
                        let c = prog.counters().unwrap();
                        if consumed.load(Ordering::Acquire) + c.drops == c.attempts || Instant::now() > until {
                            break;
                        }
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    std::thread::sleep(Duration::from_micros(300));
                    pauses += 1;
                }
            }
            done.store(true, Ordering::Release);
            pauses
        })
    };
    let mut c = Checker::new(8, 0);
    let mut waits = 0u64;
    let timeout = Duration::from_secs(5);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let n = ring
            .consume(|rec| {
                c.check(rec);
                Ok::<(), Infallible>(())
            })
            .unwrap();
        consumed.store(c.seen, Ordering::Release);
        if n == 0 {
            if done.load(Ordering::Acquire) {
                let k = prog.counters().unwrap();
                if c.seen + k.drops == k.attempts {
                    break;
                }
            }
            waits += 1;
            let t = Instant::now();
            let woken = ring.wait(Some(timeout)).unwrap();
            // The producer never pauses for seconds: a wait that ran its full timeout
            // and then found a record is one the kernel's wakeup did not end.
            assert!(!(woken && t.elapsed() >= timeout), "lost wakeup: waited {timeout:?} with a record ready");
        }
        assert!(Instant::now() < deadline, "no progress: seen {} of {total}", c.seen);
    }
    let pauses = producer.join().unwrap();
    let k = prog.counters().unwrap();
    assert_eq!(k.attempts, total);
    assert_eq!(c.seen + k.drops, total, "committed = consumed + dropped");
    assert_eq!(
        c.gaps + (total - c.next),
        k.drops,
        "the seqs missing (between and after those seen) are the ones dropped"
    );
    eprintln!("{} records, {} dropped, {waits} waits, {pauses} pauses", c.seen, k.drops);
    assert!(waits >= pauses, "the reader waited at every pause ({waits} waits, {pauses} pauses)");
}

/// A reader that waits on the map's descriptor itself, edge-triggered, with `arm`.
#[test]
fn an_event_loop_waits_on_the_map_fd_edge_triggered() {
    use rustix::event::epoll;
    need_bpf!();
    let (mut ring, prog) = setup(1 << 16, ProgSpec::default());
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).unwrap();
    epoll::add(&ep, ring.as_fd(), epoll::EventData::new_u64(7), epoll::EventFlags::IN | epoll::EventFlags::ET).unwrap();
    let prog = Arc::new(prog);
    let p2 = prog.clone();
    let producer = std::thread::spawn(move || {
        for _ in 0..200 {
            p2.run(5).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
    });
    let mut c = Checker::new(8, 0);
    let mut events: Vec<epoll::Event> = Vec::with_capacity(4);
    while c.seen < 1000 {
        ring.consume(|r| {
            c.check(r);
            Ok::<(), Infallible>(())
        })
        .unwrap();
        if ring.arm() {
            let ts = rustix::time::Timespec { tv_sec: 10, tv_nsec: 0 };
            events.clear();
            let n = epoll::wait(&ep, rustix::buffer::spare_capacity(&mut events), Some(&ts)).unwrap();
            assert!(n > 0 || c.seen == 1000, "lost wakeup at record {}", c.seen);
        }
    }
    producer.join().unwrap();
}

/// The program's flags decide whether a reader waiting in `wait` is woken: flags 0
/// (the reader has caught up) and `BPF_RB_FORCE_WAKEUP` wake it at the commit;
/// `BPF_RB_NO_WAKEUP` leaves it asleep until its timeout, and the records are there.
#[test]
fn wakeup_flags_decide_whether_a_waiting_reader_is_woken() {
    need_bpf!();
    let timeout = Duration::from_secs(2);
    for (flags, woken) in [(0, true), (BPF_RB_NO_WAKEUP, false), (BPF_RB_FORCE_WAKEUP, true)] {
        let (mut ring, prog) = setup(1 << 16, ProgSpec { wakeup_flags: flags, ..Default::default() });
        assert!(!ring.wait(Some(Duration::from_millis(1))).unwrap(), "flags {flags}: nothing yet");
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                prog.run(3).unwrap();
            });
            let t = Instant::now();
            assert!(ring.wait(Some(timeout)).unwrap(), "flags {flags}: the records are there");
            let waited = t.elapsed();
            if woken {
                assert!(waited < timeout - Duration::from_millis(500), "flags {flags}: not woken ({waited:?})");
            } else {
                assert!(waited >= timeout, "flags {flags}: woken after {waited:?} although the program asked for none");
            }
        });
        assert_eq!(ring.consume(|_| Ok::<(), Infallible>(())).unwrap(), 3);
    }
}

#[test]
fn several_maps_polled_together_consume_only_the_ready_ones() {
    need_bpf!();
    let mut set = RingSet::new().unwrap();
    let mut progs = Vec::new();
    for _ in 0..3 {
        let map = RingMap::create(1 << 16).unwrap();
        progs.push(SeqProgram::load(map.as_fd(), ProgSpec::default()).unwrap());
        set.add(BpfRingBuf::from_fd(map.into()).unwrap()).unwrap();
    }
    // Nothing yet: the first poll drains the (empty) new maps, the next one sleeps.
    assert_eq!(set.poll(Some(Duration::from_millis(1)), |_, _| Ok::<(), Infallible>(())).unwrap(), 0);
    assert_eq!(set.poll(Some(Duration::from_millis(1)), |_, _| Ok::<(), Infallible>(())).unwrap(), 0);
    progs[2].run(5).unwrap();
    progs[0].run(2).unwrap();
    let mut got = Vec::new();
    let mut n = 0;
    while n < 7 {
        n += set
            .poll(Some(Duration::from_secs(5)), |i, r| {
                got.push((i, seq(r)));
                Ok::<(), Infallible>(())
            })
            .unwrap();
    }
    got.sort();
    assert_eq!(got, [(0, 0), (0, 1), (2, 0), (2, 1), (2, 2), (2, 3), (2, 4)]);
    // Threads writing into all three, the set reading them all.
    let total = 100_000u64;
    let progs = Arc::new(progs);
    let producer = {
        let progs = progs.clone();
        std::thread::spawn(move || {
            for k in 0..(total / 100) {
                progs[(k % 3) as usize].run(100).unwrap();
            }
        })
    };
    let mut next = [2u64, 0, 5];
    let mut seen = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    let drops = |progs: &[SeqProgram]| progs.iter().map(|p| p.counters().unwrap().drops).sum::<u64>();
    while seen + drops(&progs) < total {
        // Records are pending whenever the loop runs: a poll that runs out its
        // timeout is a lost wakeup.
        let t = Instant::now();
        set.poll(Some(Duration::from_secs(5)), |i, r| {
            assert!(seq(r) >= next[i], "map {i} in order");
            next[i] = seq(r) + 1;
            seen += 1;
            Ok::<(), Infallible>(())
        })
        .unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "lost wakeup at {seen}");
        assert!(Instant::now() < deadline, "stalled at {seen}");
    }
    producer.join().unwrap();
    assert_eq!(seen + drops(&progs), total, "committed = consumed + dropped, over the three maps");
}

#[test]
fn attach_by_pinned_path_and_by_id() {
    need_bpf!();
    let fs = match BpfFs::mount() {
        Ok(fs) => fs,
        Err(e) => {
            eprintln!("skipped: cannot mount a bpffs: {e}");
            return;
        }
    };
    let map = RingMap::create(1 << 14).unwrap();
    let prog = SeqProgram::load(map.as_fd(), ProgSpec::default()).unwrap();
    map.pin(&fs.path("rb")).unwrap();
    let id = map.id().unwrap();
    prog.run(5).unwrap();
    let mut by_path = BpfRingBuf::open_pinned(fs.path("rb")).unwrap();
    assert_eq!(by_path.map_id(), id);
    assert_eq!(by_path.capacity(), 1 << 14);
    assert_eq!(by_path.consume_n(2, |_| Ok::<(), Infallible>(())).unwrap(), 2);
    drop(by_path);
    let mut by_id = BpfRingBuf::open_id(id).unwrap();
    let mut got = Vec::new();
    by_id
        .consume(|r| {
            got.push(seq(r));
            Ok::<(), Infallible>(())
        })
        .unwrap();
    assert_eq!(got, [2, 3, 4]);
}

#[test]
fn bad_input_gives_errors_that_say_which() {
    need_bpf!();
    // Not a ring buffer map.
    let array = create_array_map(8, 4).unwrap();
    let e = BpfRingBuf::from_fd(array).unwrap_err();
    assert!(matches!(e, KernelError::NotRingBuf { map_type: 2, .. }), "{e}");
    assert!(e.to_string().contains("of type array (2), not a ring buffer"), "{e}");
    // Not a BPF map at all.
    let file: OwnedFd = std::fs::File::open("/proc/self/stat").unwrap().into();
    let e = BpfRingBuf::from_fd(file).unwrap_err();
    assert!(matches!(e, KernelError::NotAMap { .. }), "{e}");
    // No map with this id.
    let e = BpfRingBuf::open_id(u32::MAX - 7).unwrap_err();
    assert!(matches!(e, KernelError::NoSuchMap { .. }), "{e}");
    assert!(e.to_string().contains("no BPF map has id"), "{e}");
    // Nothing pinned there.
    let e = BpfRingBuf::open_pinned("/nonexistent/rb").unwrap_err();
    assert!(matches!(e, KernelError::NotPinned { .. }), "{e}");
}

#[test]
fn missing_privileges_are_a_permission_error() {
    need_bpf!();
    let fs = match BpfFs::mount() {
        Ok(fs) => fs,
        Err(e) => {
            eprintln!("skipped: cannot mount a bpffs: {e}");
            return;
        }
    };
    let map = RingMap::create(4096).unwrap();
    map.pin(&fs.path("rb")).unwrap();
    let id = map.id().unwrap();
    // A child without CAP_SYS_ADMIN/CAP_BPF: run as nobody.
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "unprivileged_child", "--nocapture", "--include-ignored"])
        .env("RINGTRACE_UNPRIV_ID", id.to_string())
        .env("RINGTRACE_UNPRIV_PIN", fs.path("rb"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("UNPRIV-OK"), "{text}");
}

/// Runs in the child of `missing_privileges_are_a_permission_error`: drops to uid
/// 65534 and checks the errors.
#[test]
#[ignore = "run by missing_privileges_are_a_permission_error"]
fn unprivileged_child() {
    let (Ok(id), Ok(pin)) = (std::env::var("RINGTRACE_UNPRIV_ID"), std::env::var("RINGTRACE_UNPRIV_PIN")) else {
        return;
    };
    // Credentials are per thread on Linux: this test's thread becomes nobody, and
    // leaving uid 0 clears its capabilities.
    use rustix::process::{Gid, Uid};
    let (g, u) = (Gid::from_raw(65534), Uid::from_raw(65534));
    rustix::thread::set_thread_res_gid(g, g, g).unwrap();
    rustix::thread::set_thread_res_uid(u, u, u).unwrap();
    let e = BpfRingBuf::open_id(id.parse().unwrap()).unwrap_err();
    assert!(matches!(e, KernelError::Permission { .. }), "{e}");
    assert!(e.to_string().contains("CAP_SYS_ADMIN"), "{e}");
    let e = BpfRingBuf::open_pinned(&pin).unwrap_err();
    assert!(matches!(e, KernelError::Permission { .. } | KernelError::NotPinned { .. }), "{e}");
    println!("UNPRIV-OK");
}

#[test]
fn overwrite_maps_skip_on_kernels_without_them() {
    need_bpf!();
    match RingMap::create_with_flags(1 << 14, BPF_F_RB_OVERWRITE) {
        Err(e) => {
            eprintln!("skipped: BPF_F_RB_OVERWRITE needs Linux 6.19 or later; this kernel refused it: {e}");
        }
        Ok(map) => {
            let prog = SeqProgram::load(map.as_fd(), ProgSpec { payload: 64, ..Default::default() }).unwrap();
            let mut ring = BpfRingBuf::from_fd(map.into()).unwrap();
            assert!(ring.is_overwrite());
            prog.run(10_000).unwrap();
            assert_eq!(prog.counters().unwrap().drops, 0, "an overwrite map never refuses");
            // 72-byte records in 16 KiB: the kernel keeps at most size - 1 bytes.
            let held = (16384 - 1) / 72;
            let snap = ring.snapshot().unwrap();
            assert!((held - 1..=held).contains(&snap.len()), "holds {} records, not about {held}", snap.len());
            let newest: Vec<u64> = snap.iter().rev().map(seq).collect();
            assert_eq!(newest[0], 9_999);
            assert!(newest.windows(2).all(|w| w[0] == w[1] + 1));
            assert!(snap.iter().all(|r| r == &expected_payload(seq(r), 64)[..]));
            let mut got = Vec::new();
            ring.consume(|r| {
                got.push(seq(r));
                Ok::<(), Infallible>(())
            })
            .unwrap();
            assert_eq!(
                got,
                newest.iter().rev().copied().collect::<Vec<_>>(),
                "consume delivers what the snapshot held"
            );
            assert_eq!(
                ring.stats().overwritten_bytes + 72 * got.len() as u64,
                72 * 10_000,
                "every byte delivered or counted as overwritten"
            );
        }
    }
}

#[test]
fn snapshot_reads_without_consuming_both_ways() {
    need_bpf!();
    let (mut ring, prog) = setup(1 << 16, ProgSpec { payload: 16, ..Default::default() });
    prog.run(100).unwrap();
    let snap = ring.snapshot().unwrap();
    assert_eq!(snap.len(), 100);
    assert!(snap.iter().map(seq).eq(0..100));
    assert!(snap.iter().rev().map(seq).eq((0..100).rev()));
    assert_eq!(ring.snapshot().unwrap().len(), 100, "read again");
    assert_eq!(ring.consume(|_| Ok::<(), Infallible>(())).unwrap(), 100);
}
