//! A process that exports (root, in the tests that need it) and an unprivileged local
//! user who attacks it (simulated: root plants the user's symlinks and gives them to uid
//! 65534 with `lchown`). The attacker can write the directory a CTF export goes to; the
//! export must not write through what the attacker planted, and what it writes must
//! stay its own and private (files 0600, a directory it makes 0700).
//!
//! Parts that need root (giving files to another user) are skipped, with a line on
//! stderr, when the tests run as another user; where `RINGTRACE_REQUIRE` lists `root`
//! they fail instead (`ringtrace_fixtures::have_root`).

mod common;

use std::os::unix::fs::{lchown, symlink, MetadataExt};
use std::path::{Path, PathBuf};

use common::{dispatch, TempDir};
use ringtrace_fixtures::have_root;
use ringtrace_tracing::decode::Trace;
use ringtrace_tracing::{Builder, Recorder};

/// The attacker: `nobody` on most systems.
const ATTACKER: u32 = 65534;
const CANARY: &str = "the canary: a file of root's that no export may touch\n";

/// The canary still holds what it held.
fn assert_untouched(canary: &Path, what: &str) {
    assert!(std::fs::read(canary).unwrap() == CANARY.as_bytes(), "{what}");
}

fn me() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The mode bits of `p` itself (a symlink's own, not its target's).
fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// Gives `p` (not what it links to) to the attacker, if this process may (else the
/// calling test goes on without that part, after [`have_root`] said so, or fails).
fn give_to_attacker(p: &Path) {
    if have_root("give a file to another user (lchown)") {
        lchown(p, Some(ATTACKER), Some(ATTACKER)).unwrap();
    }
}

/// A root-owned file the attacker wants overwritten.
fn canary(dir: &Path) -> PathBuf {
    let c = dir.join("canary");
    std::fs::write(&c, CANARY).unwrap();
    c
}

/// The attacker's symlink at `at` to `to`.
fn plant_symlink(to: &Path, at: &Path) {
    symlink(to, at).unwrap();
    give_to_attacker(at);
}

/// An in-memory flight recorder that recorded a few events.
fn recorded() -> Recorder {
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(64 << 10).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || {
        for n in 0..3u64 {
            tracing::info!(n, secret = "root's data", "recorded");
        }
    });
    recorder
}

#[test]
fn a_ctf_export_replaces_planted_symlinks_and_writes_private_files() {
    let dir = TempDir::new("attack-ctf");
    give_to_attacker(&dir.0);
    let recorder = recorded();
    recorder.dump(dir.join("dump.rtt")).unwrap();
    let trace = Trace::open(dir.join("dump.rtt")).unwrap();
    let canary = canary(&dir.0);
    let out = dir.join("ctf");
    std::fs::create_dir(&out).unwrap();
    give_to_attacker(&out);
    let mut planted = vec![out.join("metadata")];
    planted.extend(trace.threads().iter().map(|t| out.join(format!("stream-{}", t.tid))));
    assert!(planted.len() >= 2, "the trace names its thread");
    for p in &planted {
        plant_symlink(&canary, p);
    }
    ringtrace_export::ctf::write(&trace, &out).unwrap();
    assert_untouched(&canary, "the export wrote through a symlink");
    for p in &planted {
        let m = std::fs::symlink_metadata(p).unwrap();
        assert!(m.file_type().is_file(), "{}", p.display());
        assert_eq!((m.uid(), m.mode() & 0o7777), (me(), 0o600), "{}", p.display());
    }
    let fresh = dir.join("ctf-new");
    ringtrace_export::ctf::write(&trace, &fresh).unwrap();
    assert_eq!(mode(&fresh), 0o700);
    for e in std::fs::read_dir(&fresh).unwrap() {
        assert_eq!(mode(&e.unwrap().path()), 0o600);
    }
}
