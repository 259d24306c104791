//! A recorder directory on a full filesystem: making one that does not fit is an error
//! naming its rings file and leaves neither file behind; one made before the
//! filesystem filled records events through its whole rings, and a dump to the full
//! filesystem is an error. And a recorder's rings file takes the space of the threads
//! that write, not of every slot. Never a SIGBUS: the recorder runs in a child process (this
//! test binary run again, `CHILD` naming its part) whose exit status must be a code,
//! not a signal.
//!
//! Each test mounts a small private tmpfs (`ringtrace_fixtures::Tmpfs`), which needs
//! root: without it they skip (or fail, where `RINGTRACE_REQUIRE` lists `root`).

mod common;

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::dispatch;
use ringtrace_fixtures::{have_root, Tmpfs};
use ringtrace_tracing::decode::Trace;
use ringtrace_tracing::{Builder, CATALOG_FILE, RINGS_FILE};

/// The child's part. Not a test: ignored, and run by [`run`] with `--ignored`.
#[test]
#[ignore = "a child role: run by this binary's full-filesystem tests"]
fn child() {
    let Ok(what) = std::env::var("CHILD") else {
        panic!("not a test: run by this binary's full-filesystem tests with CHILD set")
    };
    let dir = std::path::PathBuf::from(std::env::var("CHILD_DIR").unwrap());
    match what.as_str() {
        "too-big" => too_big(&dir),
        "fill-after" => fill_after(&dir),
        other => panic!("unknown part {other}"),
    }
}

/// Runs `what` in a child on the tmpfs at `dir`, at most 120 s; checks it exited with
/// status 0 (a failed assertion is 101, a SIGBUS no code at all).
fn run(what: &str, dir: &Path) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--ignored", "--nocapture", "--test-threads=1"])
        .env("CHILD", what)
        .env("CHILD_DIR", dir)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the {what} child did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.signal(), None, "the {what} child was killed by signal {:?}", status.signal());
    assert_eq!(status.code(), Some(0), "the {what} child failed (its panic is above)");
}

fn too_big(fs: &Path) {
    let dir = fs.join("rec");
    // Sixteen slots: their control blocks alone (reserved at once; a slot's ring when
    // a thread takes it) do not fit.
    let err = Builder::flight_recorder().per_thread_bytes(64 << 10).max_threads(16).directory(&dir).build().err();
    let err = err.expect("a recorder of sixteen 64 KiB rings was made on a tmpfs of 64 KiB");
    let line = ringtrace::error::with_causes(&err);
    assert!(line.contains(&format!("for {}", dir.join(RINGS_FILE).display())), "{line}");
    assert!(line.contains("No space left on device"), "{line}");
    for name in [RINGS_FILE, CATALOG_FILE] {
        assert!(!dir.join(name).exists(), "the failed recorder left {name}: {line}");
    }
}

#[test]
fn a_recorder_directory_that_does_not_fit_is_an_error_and_leaves_no_file() {
    if !have_root("mount a small tmpfs") {
        return;
    }
    let fs = Tmpfs::mount(64 << 10).unwrap();
    run("too-big", fs.dir());
}

fn fill_after(fs: &Path) {
    let dir = fs.join("rec");
    let (layer, recorder) =
        Builder::flight_recorder().per_thread_bytes(16 << 10).max_threads(2).directory(&dir).build().unwrap();
    // The catalog takes its first entries before the filesystem fills; entries that
    // come after find no room and are lost, counted: an error, never a signal.
    let d = dispatch(layer);
    tracing::dispatcher::with_default(&d, || tracing::info!(seq = 0u64, "before"));
    Tmpfs::fill_dir(fs).unwrap();
    tracing::dispatcher::with_default(&d, || {
        // Several times round the 16 KiB ring: every page of it written again.
        for seq in 0..2000u64 {
            tracing::info!(seq, "before");
        }
    });
    // The rings from outside, as `ringtrace decode DIR` reads them.
    let trace = Trace::open(&dir).unwrap();
    let seen = trace.events().iter().filter(|e| e.message() == Some("before")).count();
    assert!(seen > 50, "only {seen} events in the rings");
    // A dump to the full filesystem: an error, no file left.
    let out = fs.join("dump.rtt");
    let err = recorder.dump(&out).expect_err("a dump was written to a full filesystem");
    let line = ringtrace::error::with_causes(&err);
    assert!(line.contains("No space left on device"), "{line}");
    assert!(!out.exists(), "the failed dump left {}", out.display());
}

#[test]
fn a_recorder_made_before_the_filesystem_filled_records_through_its_whole_rings() {
    if !have_root("mount a small tmpfs") {
        return;
    }
    let fs = Tmpfs::mount(256 << 10).unwrap();
    run("fill-after", fs.dir());
}

#[test]
fn a_default_recorder_directory_takes_the_space_of_the_threads_that_wrote() {
    let tmp = common::TempDir::new("slot-space");
    let dir = tmp.join("rec");
    let (layer, recorder) = Builder::flight_recorder().directory(&dir).build().unwrap();
    let rings = dir.join(RINGS_FILE);
    let meta = std::fs::metadata(&rings).unwrap();
    let size = meta.len();
    let blocks = || std::fs::metadata(&rings).unwrap().blocks() * 512;
    // The default: 256 slots of 1 MiB. Reserved at once: the header page and each
    // slot's head (its control block and first data page); a slot's whole ring when a
    // thread takes it.
    // The channel header's page: the slots start past it.
    let page = ringtrace::inspect::channel::ChannelFile::open(&rings).unwrap().header().first;
    let control = (ringtrace::format::control::CONTROL_SIZE as u64).next_multiple_of(page);
    let image = control + ringtrace_tracing::DEFAULT_PER_THREAD;
    let slots = u64::from(ringtrace_tracing::DEFAULT_MAX_THREADS);
    assert_eq!(size, page + slots * image);
    let heads = page + slots * (control + page);
    assert!((heads..heads + (1 << 20)).contains(&blocks()), "a new recorder's rings file holds {} bytes", blocks());
    let d = dispatch(layer);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let d = &d;
            s.spawn(move || {
                tracing::dispatcher::with_default(d, || {
                    for seq in 0..20_000u64 {
                        tracing::info!(t, seq, "filling");
                    }
                })
            });
        }
    });
    // Two threads' rings, give or take one more slot: not 256 MiB.
    let (least, most) = (heads + 2 * (image - control - page), heads + 3 * (image - control - page));
    let check = |when: &str| {
        let b = blocks();
        assert!(
            (least..=most).contains(&b),
            "{when}: the rings file holds {} KiB, not {} to {} KiB",
            b >> 10,
            least >> 10,
            most >> 10
        );
    };
    check("after two threads wrote");
    // Read from outside (as `ringtrace decode DIR`), attached again, dumped.
    let trace = Trace::open(&dir).unwrap();
    assert!(trace.events().iter().filter(|e| e.message() == Some("filling")).count() > 1000);
    check("after a decode");
    let again = ringtrace::Channel::<ringtrace::config::Overwrite, ringtrace::clock::BestClock>::open(&rings).unwrap();
    check("after another attach");
    assert!(again.snapshot().unwrap().len() > 1000);
    check("after a snapshot");
    recorder.dump(tmp.join("dump.rtt")).unwrap();
    check("after a dump");
}
