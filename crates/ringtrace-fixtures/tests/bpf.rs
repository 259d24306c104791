//! The fixtures against the running kernel. Each test skips (printing why) where BPF ring
//! buffer maps cannot be created, and fails instead where `RINGTRACE_REQUIRE` lists `bpf`.

#[path = "support/mapped.rs"]
mod mapped;

use std::io;
use std::os::fd::AsFd;

use mapped::{Mapped, DISCARD};

use ringtrace_fixtures::{
    create_array_map, expected_payload, have_bpf, skip, BpfFs, Counters, Feature, Method, ProgSpec, RingMap,
    SeqProgram, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP,
};

const MIB: u32 = 1 << 20;

macro_rules! skip_without_bpf {
    () => {
        if !have_bpf() {
            return;
        }
    };
}

fn spec(method: Method, payload: u32) -> ProgSpec {
    ProgSpec { payload, method, ..Default::default() }
}

/// Checks that the records drained are `seq` from `*next` on, with the expected payloads,
/// discarded exactly where `discarded(seq)`.
fn check_records(ring: &Mapped, payload: u32, next: &mut u64, discarded: impl Fn(u64) -> bool) -> usize {
    ring.drain(|hdr, data| {
        let seq = *next;
        assert_eq!(hdr & !DISCARD, payload, "length of record {seq}");
        assert_eq!(hdr & DISCARD != 0, discarded(seq), "DISCARD bit of record {seq}");
        assert_eq!(data, expected_payload(seq, payload), "payload of record {seq}");
        *next += 1;
    })
}

#[test]
fn loads_every_variant() {
    skip_without_bpf!();
    let ring = RingMap::create(MIB).unwrap();
    for method in [Method::Output, Method::ReserveSubmit] {
        for payload in [8, 64, 128] {
            for wakeup_flags in [0, BPF_RB_NO_WAKEUP, BPF_RB_FORCE_WAKEUP] {
                let s = ProgSpec { wakeup_flags, ..spec(method, payload) };
                SeqProgram::load(ring.as_fd(), s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
            }
        }
    }
    for discard_every in [1, 3, u32::MAX] {
        SeqProgram::load(ring.as_fd(), ProgSpec { discard_every, ..spec(Method::ReserveSubmit, 64) }).unwrap();
    }
}

#[test]
fn invalid_specs_are_refused() {
    skip_without_bpf!();
    let ring = RingMap::create(MIB).unwrap();
    for s in [
        spec(Method::Output, 0),
        spec(Method::Output, 12),
        spec(Method::ReserveSubmit, 136),
        ProgSpec { discard_every: 2, ..spec(Method::Output, 8) },
    ] {
        let err = SeqProgram::load(ring.as_fd(), s).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{s:?}");
    }
}

#[test]
fn verifier_rejection_carries_the_log() {
    skip_without_bpf!();
    // An ARRAY map where the ring buffer helpers want a ring buffer map.
    let array = create_array_map(8, 1).unwrap();
    let err = SeqProgram::load(array.as_fd(), ProgSpec::default()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("verifier log:") && msg.contains("bpf_ringbuf_output"), "{msg}");
}

#[test]
fn counts_attempts_without_drops() {
    skip_without_bpf!();
    for method in [Method::Output, Method::ReserveSubmit] {
        for payload in [8, 64] {
            let ring = RingMap::create(MIB).unwrap();
            let prog = SeqProgram::load(ring.as_fd(), spec(method, payload)).unwrap();
            assert_eq!(prog.counters().unwrap(), Counters::default());
            prog.run(1000).unwrap();
            assert_eq!(prog.counters().unwrap(), Counters { attempts: 1000, drops: 0, discards: 0 });
        }
    }
}

#[test]
fn small_ring_drops() {
    skip_without_bpf!();
    for method in [Method::Output, Method::ReserveSubmit] {
        let ring = RingMap::create(4096).unwrap();
        let prog = SeqProgram::load(ring.as_fd(), spec(method, 64)).unwrap();
        prog.run(10_000).unwrap();
        let c = prog.counters().unwrap();
        assert_eq!(c.attempts, 10_000);
        assert!(c.drops > 0, "{method:?}: {c:?}");
        // The records that made it are the first ones: the ring never drained.
        let mapped = Mapped::new(ring.as_fd(), 4096).unwrap();
        let mut next = 0;
        let n = check_records(&mapped, 64, &mut next, |_| false);
        assert_eq!(n as u64, c.attempts - c.drops, "{method:?}");
        // 72 bytes a record; the kernel keeps producer - consumer <= size - 1.
        assert_eq!(n, 4095 / 72, "{method:?}");
    }
}

#[test]
fn discards_every_third() {
    skip_without_bpf!();
    let ring = RingMap::create(MIB).unwrap();
    let prog =
        SeqProgram::load(ring.as_fd(), ProgSpec { discard_every: 3, ..spec(Method::ReserveSubmit, 64) }).unwrap();
    prog.run(1000).unwrap();
    let c = prog.counters().unwrap();
    assert_eq!(c, Counters { attempts: 1000, drops: 0, discards: 1000 / 3 });
    let mapped = Mapped::new(ring.as_fd(), MIB).unwrap();
    let mut next = 0;
    assert_eq!(check_records(&mapped, 64, &mut next, |seq| seq % 3 == 2), 1000);
}

#[test]
fn reads_back_records() {
    skip_without_bpf!();
    for (method, payload) in
        [(Method::Output, 8), (Method::Output, 128), (Method::ReserveSubmit, 8), (Method::ReserveSubmit, 120)]
    {
        let ring = RingMap::create(MIB).unwrap();
        let prog = SeqProgram::load(ring.as_fd(), spec(method, payload)).unwrap();
        let mapped = Mapped::new(ring.as_fd(), MIB).unwrap();
        let mut next = 0;
        for _ in 0..3 {
            prog.run(500).unwrap();
            assert_eq!(check_records(&mapped, payload, &mut next, |_| false), 500);
        }
        assert_eq!(next, 1500);
    }
}

#[test]
fn reads_back_across_the_wrap() {
    skip_without_bpf!();
    // 4 KiB of 72-byte records, drained every 40 records: 2000 records wrap ~35 times.
    let ring = RingMap::create(4096).unwrap();
    let prog =
        SeqProgram::load(ring.as_fd(), ProgSpec { discard_every: 7, ..spec(Method::ReserveSubmit, 64) }).unwrap();
    let mapped = Mapped::new(ring.as_fd(), 4096).unwrap();
    let mut next = 0;
    for _ in 0..50 {
        prog.run(40).unwrap();
        assert_eq!(check_records(&mapped, 64, &mut next, |seq| seq % 7 == 6), 40);
    }
    assert_eq!(prog.counters().unwrap(), Counters { attempts: 2000, drops: 0, discards: 2000 / 7 });
}

#[test]
fn array_map_and_ring_map_ids() {
    skip_without_bpf!();
    create_array_map(8, 4).unwrap();
    let a = RingMap::create(MIB).unwrap();
    let b = RingMap::create(MIB).unwrap();
    let (ia, ib) = (a.id().unwrap(), b.id().unwrap());
    assert!(ia > 0 && ib > 0 && ia != ib, "{ia} {ib}");
    // The kernel's checks on max_entries.
    assert_eq!(RingMap::create(4096 * 3).unwrap_err().raw_os_error(), Some(libc::EINVAL));
    assert_eq!(RingMap::create(1024).unwrap_err().raw_os_error(), Some(libc::EINVAL));
}

#[test]
fn bpffs_pin_and_unmount() {
    skip_without_bpf!();
    let fs = match BpfFs::mount() {
        Ok(fs) => fs,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return skip(Feature::Bpf, format!("cannot mount a bpffs: {e}"));
        }
        Err(e) => panic!("{e}"),
    };
    let dir = fs.dir().to_path_buf();
    let mounted = || {
        let dir = dir.to_str().unwrap();
        std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines().any(|l| l.split(' ').nth(4) == Some(dir))
    };
    assert!(mounted());
    let ring = RingMap::create(MIB).unwrap();
    let path = fs.path("ring");
    ring.pin(&path).unwrap();
    assert!(path.exists());
    // Pinning twice at one path fails.
    assert_eq!(ring.pin(&path).unwrap_err().raw_os_error(), Some(libc::EEXIST));
    drop(fs);
    assert!(!mounted());
    assert!(!dir.exists());
}
