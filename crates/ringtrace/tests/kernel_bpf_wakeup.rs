//! Waiting on real BPF ring buffer maps: edge-triggered wakeups over millions of
//! records, an event loop on the map's descriptor, the programs' wakeup flags, and
//! several maps polled together. Each test skips with a one-line reason where BPF is not
//! available (no CAP_BPF), or fails where `RINGTRACE_REQUIRE` lists `bpf`; as root they run.

#[macro_use]
mod common;

use std::convert::Infallible;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::bpf::{seq, setup, Checker};
use ringtrace::kernel::bpf::{BpfRingBuf, RingSet};
use ringtrace_fixtures::{ProgSpec, RingMap, SeqProgram, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP};

/// A producer thread runs the program in bursts while the reader consumes and, when it
/// has caught up, waits (edge-triggered epoll inside `wait`): millions of records, none
/// lost, and no lost wakeup. Every 16th burst the producer waits for the reader to
/// catch up and fall asleep, so the reader is woken from a sleep at least that often
/// whatever the load; a wait that runs out its timeout while a record is ready is a
/// lost wakeup.
#[test]
fn edge_triggered_wakeups_over_millions_of_records_never_stall() {
    need_bpf!();
    let (mut ring, prog) = setup(1 << 18, ProgSpec::default());
    let total: u64 = if cfg!(debug_assertions) { 300_000 } else { 3_000_000 };
    let prog = Arc::new(prog);
    let consumed = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let reader = common::asleep::thread_id();
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
                    // Let the reader catch up (it then waits), and fall asleep.
                    let until = Instant::now() + Duration::from_secs(10);
                    loop {
                        let c = prog.counters().unwrap();
                        if consumed.load(Ordering::Acquire) + c.drops == c.attempts || Instant::now() > until {
                            break;
                        }
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    common::asleep::wait_until_asleep(reader, "the reader, caught up");
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
        // The last record seen: no commit is coming to end a wait.
        if c.seen == 1000 {
            break;
        }
        if ring.arm().unwrap() {
            let ts = rustix::time::Timespec { tv_sec: 10, tv_nsec: 0 };
            events.clear();
            let n = epoll::wait(&ep, rustix::buffer::spare_capacity(&mut events), Some(&ts)).unwrap();
            assert!(n > 0, "lost wakeup at record {}", c.seen);
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
    let reader = common::asleep::thread_id();
    for (flags, woken) in [(0, true), (BPF_RB_NO_WAKEUP, false), (BPF_RB_FORCE_WAKEUP, true)] {
        let (mut ring, prog) = setup(1 << 16, ProgSpec { wakeup_flags: flags, ..Default::default() });
        assert!(!ring.wait(Some(Duration::from_millis(1))).unwrap(), "flags {flags}: nothing yet");
        std::thread::scope(|s| {
            s.spawn(|| {
                common::asleep::wait_until_asleep(reader, "the reader");
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
