//! With a umask of 000 (set here, for this test binary's process: it holds this one
//! test), a CTF export is still private: its directory 0700, its files 0600.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::{dispatch, TempDir};
use ringtrace_tracing::decode::Trace;
use ringtrace_tracing::Builder;

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

#[test]
fn a_ctf_export_stays_private_under_umask_000() {
    rustix::process::umask(rustix::fs::Mode::empty());
    let dir = TempDir::new("umask-ctf");
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(64 << 10).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || tracing::info!("one"));
    recorder.dump(dir.join("dump.rtt")).unwrap();

    let ctf = dir.join("ctf");
    ringtrace_export::ctf::write(&Trace::open(dir.join("dump.rtt")).unwrap(), &ctf).unwrap();
    assert_eq!(mode(&ctf), 0o700, "the CTF directory");
    let files: Vec<_> = std::fs::read_dir(&ctf).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(files.len() >= 2, "{files:?}");
    for f in files {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
}
