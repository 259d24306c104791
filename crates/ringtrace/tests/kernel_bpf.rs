//! Reading real BPF ring buffer maps: a hand-assembled socket filter (ringtrace-fixtures)
//! writes numbered records with `bpf_ringbuf_output` or reserve/submit/discard, run
//! with `BPF_PROG_TEST_RUN`; the reader must see every record, in order, once, with its
//! bytes. Each test skips with a one-line reason where BPF is not available (no
//! CAP_BPF), or fails where `RINGTRACE_REQUIRE` lists `bpf`; as root they run.
//! Waiting and wakeups: `kernel_bpf_wakeup.rs`.

#[macro_use]
mod common;

use std::convert::Infallible;
use std::os::fd::{AsFd, OwnedFd};

use common::bpf::{seq, setup, Checker};
use ringtrace::kernel::bpf::{BpfRingBuf, KernelError, BPF_F_RB_OVERWRITE};
use ringtrace::ConsumeError;
use ringtrace_fixtures::{
    create_array_map, expected_payload, have_root, skip, BpfFs, Feature, Method, ProgSpec, RingMap, SeqProgram,
};

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

/// One reader per map, within a process too: a second handle of the map is refused its
/// reader lock (and so every consuming call) while the first holds it, naming this
/// process; it may still copy what the map holds. Dropping the first releases it.
#[test]
fn a_second_reader_of_one_map_is_refused_until_the_first_is_dropped() {
    need_bpf!();
    let map = RingMap::create(1 << 16).unwrap();
    let prog = SeqProgram::load(map.as_fd(), ProgSpec::default()).unwrap();
    let id = map.id().unwrap();
    prog.run(3).unwrap();
    let mut first = BpfRingBuf::open_id(id).unwrap();
    first.lock_reader().unwrap();
    let mut second = BpfRingBuf::open_id(id).unwrap();
    let busy = |e: &KernelError| {
        let KernelError::MapBusy { id: busy_id, holder } = e else { panic!("not MapBusy: {e}") };
        assert_eq!(*busy_id, id);
        let me = (std::process::id(), rustix::process::getuid().as_raw());
        if std::fs::read_link("/proc/self/ns/pid").is_ok_and(|ns| ns.as_os_str() == "pid:[4026531836]") {
            assert_eq!(*holder, Some(me), "{e}");
            let said = format!("map {id} already has a reader (pid {}, uid {}): ", me.0, me.1);
            assert!(e.to_string().starts_with(&said), "{e:?} does not say {said:?}");
        }
    };
    busy(&second.lock_reader().unwrap_err());
    match second.consume(|_| Ok::<(), Infallible>(())) {
        Err(ConsumeError::Kernel(e)) => busy(&e),
        other => panic!("a second reader consumed: {other:?}"),
    }
    assert_eq!(second.snapshot().unwrap().len(), 3, "a copy takes no lock");
    assert_eq!(first.consume_n(1, |_| Ok::<(), Infallible>(())).unwrap(), 1);
    drop(first);
    let mut got = Vec::new();
    second
        .consume(|r| {
            got.push(seq(r));
            Ok::<(), Infallible>(())
        })
        .unwrap();
    assert_eq!(got, [1, 2], "released when the first was dropped");
    // And it holds the lock now: a third is refused.
    busy(&BpfRingBuf::open_id(id).unwrap().lock_reader().unwrap_err());
}

/// A handle dropped while another thread spawns a child: the child holds a copy of the
/// lock's socket from its fork to its exec, still naming this process. The next handle
/// waits for that copy to go rather than being refused by its own process.
#[test]
fn a_lock_copied_into_a_child_between_fork_and_exec_is_waited_for() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::os::unix::process::CommandExt;
    need_bpf!();
    let map = RingMap::create(1 << 16).unwrap();
    let id = map.id().unwrap();
    let mut first = BpfRingBuf::open_id(id).unwrap();
    first.lock_reader().unwrap();
    // The child says it was forked, then sleeps before its exec.
    let (mut forked, in_child) = UnixStream::pair().unwrap();
    let spawner = std::thread::spawn(move || {
        let mut cmd = std::process::Command::new("true");
        // SAFETY: between fork and exec the closure only writes one byte to a socket
        // and sleeps (write(2) and nanosleep(2), async-signal-safe; no allocation).
        unsafe {
            cmd.pre_exec(move || {
                (&in_child).write_all(b"f")?;
                std::thread::sleep(std::time::Duration::from_millis(300));
                Ok(())
            });
        }
        cmd.status()
    });
    forked.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    let mut byte = [0u8];
    forked.read_exact(&mut byte).expect("the child forked");
    drop(first);
    let mut second = BpfRingBuf::open_id(id).unwrap();
    second.lock_reader().expect("the child's copy of the dropped lock is waited for");
    assert!(spawner.join().unwrap().unwrap().success());
}

#[test]
fn attach_by_pinned_path_and_by_id() {
    need_bpf!();
    let fs = match BpfFs::mount() {
        Ok(fs) => fs,
        Err(e) => return skip(Feature::Bpf, format!("cannot mount a bpffs: {e}")),
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
    if !have_root("run a child as nobody (setresuid)") {
        return;
    }
    let fs = match BpfFs::mount() {
        Ok(fs) => fs,
        Err(e) => return skip(Feature::Bpf, format!("cannot mount a bpffs: {e}")),
    };
    let map = RingMap::create(4096).unwrap();
    map.pin(&fs.path("rb")).unwrap();
    let id = map.id().unwrap();
    // A child without CAP_SYS_ADMIN/CAP_BPF: run as nobody.
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "unprivileged_child", "--nocapture", "--ignored"])
        .env("RINGTRACE_UNPRIV_ID", id.to_string())
        .env("RINGTRACE_UNPRIV_PIN", fs.path("rb"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("UNPRIV-OK"), "{text}");
}

/// Runs in the child of `missing_privileges_are_a_permission_error`: drops to uid
/// 65534 and checks the errors. Not a test: without the parent's variables it panics.
#[test]
#[ignore = "a child role: run by missing_privileges_are_a_permission_error"]
fn unprivileged_child() {
    let (Ok(id), Ok(pin)) = (std::env::var("RINGTRACE_UNPRIV_ID"), std::env::var("RINGTRACE_UNPRIV_PIN")) else {
        panic!("not a test: run by missing_privileges_are_a_permission_error with RINGTRACE_UNPRIV_ID and _PIN set");
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
        // The flag came with Linux 6.19 (kernel/bpf/ringbuf.c, RINGBUF_CREATE_FLAG_MASK):
        // an older kernel refuses it as an unknown map flag, with EINVAL, and only an
        // older one may refuse it.
        Err(e) => {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
            let mut v = release.trim().split(|c: char| !c.is_ascii_digit()).map(|n| n.parse::<u32>().unwrap_or(0));
            let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
            assert!((major, minor) < (6, 19), "Linux {} refused BPF_F_RB_OVERWRITE: {e}", release.trim());
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "an older kernel refuses the unknown flag: {e}");
            eprintln!("Linux {}: BPF_F_RB_OVERWRITE refused as expected before 6.19: {e}", release.trim());
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

/// Holding: records read stay the reader's until released. `unread` delivers them
/// again, a handle dropped while holding leaves them for the next, the kernel cannot
/// reuse their space (it drops instead), and once released it can.
#[test]
fn held_records_are_read_again_until_released() {
    need_bpf!();
    let (mut ring, prog) = setup(1 << 16, ProgSpec { payload: 64, ..Default::default() });
    let read = |ring: &mut BpfRingBuf| {
        let mut seqs = Vec::new();
        ring.consume(|rec| {
            assert_eq!(rec, &expected_payload(seq(rec), 64)[..]);
            seqs.push(seq(rec));
        })
        .unwrap();
        seqs
    };
    ring.hold(true);
    prog.run(300).unwrap();
    assert_eq!(read(&mut ring), (0..300).collect::<Vec<_>>());
    assert!(read(&mut ring).is_empty());
    ring.unread();
    assert_eq!(read(&mut ring), (0..300).collect::<Vec<_>>(), "unread delivers them again");
    // A handle dropped while holding: the next one reads them again.
    let id = ring.map_id();
    drop(ring);
    let mut ring = BpfRingBuf::open_id(id).unwrap();
    ring.hold(true);
    assert_eq!(read(&mut ring), (0..300).collect::<Vec<_>>(), "a dropped holder handed nothing back");
    // 72-byte records in 64 KiB: 910 fit; 300 are held, so of 800 more some are dropped.
    prog.run(800).unwrap();
    let k = prog.counters().unwrap();
    assert!(k.drops > 0, "the held space is not reused");
    let more = read(&mut ring);
    assert_eq!(more.len() as u64 + k.drops, 800);
    ring.release();
    prog.run(800).unwrap();
    assert_eq!(prog.counters().unwrap().drops, k.drops, "released, the space is reused");
    assert_eq!(read(&mut ring).len(), 800);
}
