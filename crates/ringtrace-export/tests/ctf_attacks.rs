//! A process that exports (root, in the tests that need it) and an unprivileged local
//! user who attacks it (simulated: root plants the user's symlinks and gives them to uid
//! 65534 with `lchown`). The attacker can write the directory a CTF export goes to; the
//! export must not write through what the attacker planted, and what it writes must
//! stay its own and private (files 0600; a directory it makes is 0700, as
//! tests/ctf_umask.rs checks).
//!
//! Parts that need root (giving files to another user) are skipped, with a line on
//! stderr, when the tests run as another user; where `RINGTRACE_REQUIRE` lists `root`
//! they fail instead (`ringtrace_fixtures::have_root`).

mod common;

use std::os::unix::fs::MetadataExt;

use common::dumped_trace;
use ringtrace_fixtures::{attacker_dir, euid, give_to_attacker, plant_symlink, Canary};

#[test]
fn a_ctf_export_replaces_planted_symlinks_and_writes_private_files() {
    let dir = attacker_dir("attack-ctf");
    let trace = dumped_trace(&dir.join("dump.rtt"));
    let canary = Canary::plant(&dir.0);
    let out = dir.join("ctf");
    std::fs::create_dir(&out).unwrap();
    give_to_attacker(&out);
    let mut planted = vec![out.join("metadata")];
    planted.extend(trace.threads().iter().map(|t| out.join(format!("stream-{}", t.tid))));
    assert!(planted.len() >= 2, "the trace names its thread");
    for p in &planted {
        plant_symlink(canary.path(), p);
    }
    ringtrace_export::ctf::write(&trace, &out).unwrap();
    canary.assert_untouched("the export wrote through a symlink");
    for p in &planted {
        let m = std::fs::symlink_metadata(p).unwrap();
        assert!(m.file_type().is_file(), "{}", p.display());
        assert_eq!((m.uid(), m.mode() & 0o7777), (euid(), 0o600), "{}", p.display());
    }
}
