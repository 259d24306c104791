//! With a umask of 000 (set here, for this test binary's process: it holds this one
//! test), what the crate writes is still private: trace files 0600, directories 0700
//! (ringtrace-export's tests/ctf_umask.rs checks the CTF export's).

mod common;

use common::{dispatch, TempDir};
use ringtrace_fixtures::mode;
use ringtrace_tracing::{Builder, CATALOG_FILE, RINGS_FILE};

#[test]
fn outputs_stay_private_under_umask_000() {
    rustix::process::umask(rustix::fs::Mode::empty());
    let dir = TempDir::new("umask");
    let rec = dir.join("rec");
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(64 << 10).directory(&rec).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || tracing::info!("one"));
    assert_eq!(mode(&rec), 0o700, "the recorder directory");
    assert_eq!(mode(&rec.join(CATALOG_FILE)), 0o600, "the catalog");
    assert_eq!(mode(&rec.join(RINGS_FILE)), 0o600, "the rings");

    recorder.dump(dir.join("dump.rtt")).unwrap();
    assert_eq!(mode(&dir.join("dump.rtt")), 0o600, "the dump");

    let (layer, stream) = Builder::stream(dir.join("stream.rtt")).per_thread_bytes(64 << 10).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || tracing::info!("one"));
    stream.finish().unwrap();
    assert_eq!(mode(&dir.join("stream.rtt")), 0o600, "the stream file");
}
