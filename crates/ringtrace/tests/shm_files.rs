//! Ring files shared between processes that are truncated, foreign, corrupt,
//! world-writable or another user's, and creators racing for one path.
//!
//! Children are this test binary run again with `RINGTRACE_CHILD` set (`common/shm.rs`).
#![cfg(not(loom))]

mod common;

use std::os::unix::process::ExitStatusExt;

use common::shm::*;
use ringtrace::{Access, Error, FlightRecorder, MpscRing, Owners, Wakeup};

/// The child side: not a test (see `common::child_role`).
#[test]
#[ignore = "a child role: run by this binary's multi-process tests (common::spawn_child)"]
fn child() {
    common::shm::child();
}

#[test]
fn a_truncated_ring_file_kills_processes_that_map_it_with_sigbus() {
    let path = temp_path("truncate");
    let ring = FlightRecorder::builder(64 * 1024).create(&path).unwrap();
    ring.producer().unwrap().output(b"x", Wakeup::Default).unwrap();
    let mut child = spawn("map-and-touch", &[path.to_str().unwrap()]);
    wait_for_line(&mut child, "MAPPED");
    // Documented behaviour of named files (which cannot be sealed): whoever maps one
    // that another process truncates dies of SIGBUS at its next access.
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(4096).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc_sigbus()), "{status:?}");
    // Attaching to the truncated file is an error, not a signal.
    let err = FlightRecorder::open(&path).unwrap_err();
    assert!(err.to_string().contains("the header alone needs"), "{err}");
    std::mem::forget(ring); // its mapping now faults; never touch it again
    std::fs::remove_file(&path).unwrap();
}

fn libc_sigbus() -> i32 {
    7 // SIGBUS on x86-64 and aarch64 Linux
}

#[test]
fn bad_ring_files_are_clear_errors() {
    let path = temp_path("bad");
    type Mutation = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Mutation, &str)> = vec![
        ("magic", Box::new(|b: &mut Vec<u8>| b[0] ^= 0xff), "not a ringtrace ring file"),
        ("zero magic", Box::new(|b: &mut Vec<u8>| b[..8].fill(0)), "not initialized yet"),
        ("version", Box::new(|b: &mut Vec<u8>| b[8] = 99), "layout version 99"),
        (
            "capacity",
            Box::new(|b: &mut Vec<u8>| b[24..32].copy_from_slice(&12345u64.to_ne_bytes())),
            "capacity is 12345",
        ),
        ("truncated", Box::new(|b: &mut Vec<u8>| b.truncate(10_000)), "truncated"),
        ("tiny", Box::new(|b: &mut Vec<u8>| b.truncate(100)), "header alone"),
        ("positions", Box::new(|b: &mut Vec<u8>| b[128..136].copy_from_slice(&3u64.to_ne_bytes())), "inconsistent"),
    ];
    // A valid image to mutate.
    let good = {
        let ring = MpscRing::builder(4096).create(&path).unwrap();
        ring.producer().unwrap().output(b"x", Wakeup::Default).unwrap();
        drop(ring);
        std::fs::read(&path).unwrap()
    };
    for (name, mutate, want) in cases {
        let mut bytes = good.clone();
        mutate(&mut bytes);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let err = MpscRing::open(&path).unwrap_err();
        assert!(err.to_string().contains(want), "{name}: {err}");
    }
    // The right file, the wrong type.
    std::fs::write(&path, &good).unwrap();
    let err = FlightRecorder::open(&path).unwrap_err();
    assert!(err.to_string().contains("mpsc discard ring, not the mpsc overwrite"), "{err}");
    // World-writable.
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let err = MpscRing::open(&path).unwrap_err();
    assert!(err.to_string().contains("writable by every user"), "{err}");
    // Random bytes, a directory, a FIFO (must not block), a missing file.
    std::fs::remove_file(&path).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let random: Vec<u8> = (0..20_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&path, random).unwrap();
    assert!(MpscRing::open(&path).unwrap_err().to_string().contains("not a ringtrace ring file"));
    std::fs::remove_file(&path).unwrap();
    assert!(MpscRing::open(std::env::temp_dir()).unwrap_err().to_string().contains("opening ring file"));
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        0,
    )
    .unwrap();
    assert!(MpscRing::open(&path).unwrap_err().to_string().contains("not a regular file"));
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(MpscRing::open(&path), Err(Error::File { .. })));
}

#[test]
fn creators_racing_for_one_path_one_wins() {
    let path = temp_path("race");
    let winners: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8).map(|_| s.spawn(|| MpscRing::builder(4096).create(&path))).collect();
        hs.into_iter()
            .map(|h| match h.join().unwrap() {
                Ok(_) => 1,
                Err(Error::File { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists => 0,
                Err(e) => panic!("unexpected error {e}"),
            })
            .sum()
    });
    assert_eq!(winners, 1);
    assert!(MpscRing::open(&path).is_ok(), "the winner's file is whole");
    std::fs::remove_file(&path).unwrap();
    // Never through a symlink: the target is left alone.
    let target = temp_path("target");
    std::fs::write(&target, b"precious").unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    assert!(MpscRing::builder(4096).create(&path).is_err());
    assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&target).unwrap();
    // Created with mode 0600.
    MpscRing::builder(4096).create(&path).unwrap();
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_ring_file_of_another_user_is_attached_only_when_asked() {
    use std::os::unix::fs::PermissionsExt;
    let path = temp_path("owner");
    drop(MpscRing::builder(64 * 1024).create(&path).unwrap());
    let open_any = || {
        let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        MpscRing::from_fd_owned_by(f.into(), Access::Full, Owners::Any)
    };
    // Group-writable: another user could truncate it under the mapping.
    std::fs::set_permissions(&path, PermissionsExt::from_mode(0o660)).unwrap();
    let err = MpscRing::open(&path).unwrap_err();
    assert!(err.to_string().contains("writable by its group"), "{err}");
    open_any().expect("Owners::Any takes a group-shared ring");
    // Every user may write it: refused whatever the caller asks.
    std::fs::set_permissions(&path, PermissionsExt::from_mode(0o666)).unwrap();
    assert!(open_any().unwrap_err().to_string().contains("writable by every user"));
    std::fs::set_permissions(&path, PermissionsExt::from_mode(0o600)).unwrap();
    MpscRing::open(&path).expect("this user's private ring");
    if !ringtrace_fixtures::have_root("the other-owner half: give a file away (chown)") {
        return;
    }
    // Another user's file (nobody's): its owner could truncate it under root's mapping.
    std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
    let err = MpscRing::open(&path).unwrap_err();
    assert!(err.to_string().contains("belongs to another user (uid 65534"), "{err}");
    let mut p = open_any().expect("Owners::Any takes another user's ring").producer().unwrap();
    p.output(b"shared on purpose", Wakeup::Default).unwrap();
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn no_descriptor_of_a_ring_reaches_an_executed_program() {
    // What an executed program gets before any ring exists (the test may inherit some,
    // such as cargo's jobserver pipe).
    let listed = || {
        let out = std::process::Command::new("ls").args(["-1", "/proc/self/fd"]).output().unwrap();
        let fds: std::collections::BTreeSet<u32> =
            String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.parse().ok()).collect();
        fds
    };
    let before = listed();
    // Every kind of descriptor the library opens: a ring file's mapping, a memfd, a
    // consumer's socket doorbell (named by `arm`), an eventfd, a waiting producer's.
    let path = temp_path("cloexec");
    let file_ring = MpscRing::builder(64 * 1024).create(&path).unwrap();
    let mut c = file_ring.consumer().unwrap();
    c.arm().unwrap();
    let mut p = file_ring.producer().unwrap();
    p.output(b"x", Wakeup::Default).unwrap();
    let shared = FlightRecorder::builder(64 * 1024).build_shared().unwrap();
    let _sp = shared.producer().unwrap();
    let local = MpscRing::new(4096).unwrap();
    let mut lc = local.consumer().unwrap();
    lc.arm().unwrap();
    let after = listed();
    assert_eq!(after, before, "descriptors of the rings passed to an executed program");
    assert!(after.contains(&0) && after.len() >= 3, "{after:?}");
    std::fs::remove_file(&path).unwrap();
}
