//! With a umask of 000 (set here, for this test binary's process: it holds this one
//! test), a CTF export is still private: its directory 0700, its files 0600.

mod common;

use common::{dumped_trace, TempDir};
use ringtrace_fixtures::mode;

#[test]
fn a_ctf_export_stays_private_under_umask_000() {
    rustix::process::umask(rustix::fs::Mode::empty());
    let dir = TempDir::new("umask-ctf");
    let trace = dumped_trace(&dir.join("dump.rtt"));
    let ctf = dir.join("ctf");
    ringtrace_export::ctf::write(&trace, &ctf).unwrap();
    assert_eq!(mode(&ctf), 0o700, "the CTF directory");
    let files: Vec<_> = std::fs::read_dir(&ctf).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(files.len() >= 2, "{files:?}");
    for f in files {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
}
