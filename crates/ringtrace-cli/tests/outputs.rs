//! A tool never destroys its input: an output that is the source is refused (through
//! symbolic and hard links), outputs are written under a temporary name and renamed
//! into place (a failed command leaves the old file whole and no temporary file),
//! `--force` replaces regular files only, devices and FIFOs are written in place, and
//! an interrupted demo leaves nothing behind.

use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringtrace::{MpscRing, Wakeup};
use tracing_subscriber::layer::SubscriberExt;

mod common;

use common::{run, temp, Guard, BIN, DEADLINE};

/// A ring file of 64 KiB with `n` records, and a producer kept attached (mapped in this
/// process: a truncated file would kill this test with SIGBUS on its next write).
fn ring_with(n: usize) -> (String, MpscRing) {
    let path = temp("r.ring");
    let ring = MpscRing::builder(64 << 10).create(&path).unwrap();
    let mut p = ring.producer().unwrap();
    for i in 0..n {
        p.output(format!("record {i} of the only copy").as_bytes(), Wakeup::Default).unwrap();
    }
    (path.to_str().unwrap().to_owned(), ring)
}

/// A trace file of three events (a recorder directory's snapshot).
fn trace_file() -> String {
    let dir = temp("rec");
    let (layer, _recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).directory(&dir).build().unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || {
        for n in 0..3u64 {
            tracing::info!(n, "evidence");
        }
    });
    let file = temp("t.rtt");
    let o = run(&["snapshot", dir.to_str().unwrap(), "-o", file.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    file.to_str().unwrap().to_owned()
}

fn refused(args: &[&str], what: &str) {
    let o = run(args);
    assert_eq!(o.code, 1, "{args:?} was not refused: {}", o.stderr);
    assert!(o.stderr.contains(what), "{args:?}: {}", o.stderr);
}

/// No `.NAME.ringtrace-*` file left in `dir`.
fn no_temporary_files(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".ringtrace-"))
        .collect();
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
}

#[test]
fn an_output_that_is_the_source_is_refused_and_the_source_stays_whole() {
    let (ring, handle) = ring_with(3);
    let before = std::fs::read(&ring).unwrap();
    refused(&["snapshot", &ring, "-o", &ring], "is the source");
    // Through a symbolic link and a hard link.
    let dir = Path::new(&ring).parent().unwrap();
    let link = dir.join("link.ring");
    let hard = dir.join("hard.ring");
    std::os::unix::fs::symlink(&ring, &link).unwrap();
    std::fs::hard_link(&ring, &hard).unwrap();
    refused(&["snapshot", link.to_str().unwrap(), "-o", hard.to_str().unwrap()], "is the source");
    refused(&["snapshot", &ring, "-o", link.to_str().unwrap()], "is the source");
    assert_eq!(std::fs::read(&ring).unwrap(), before, "the ring file changed");
    // The attached producer still writes (a truncated file would be SIGBUS here).
    handle.producer().unwrap().output(b"after", Wakeup::Default).unwrap();
    let o = run(&["snapshot", &ring]);
    assert_eq!(o.stdout.lines().count(), 4, "{}", o.stdout);

    let trace = trace_file();
    let before = std::fs::read(&trace).unwrap();
    refused(&["snapshot", &trace, "-o", &trace], "is the source");
    refused(&["export", &trace, "--format", "chrome", "-o", &trace], "is the source");
    refused(&["export", &trace, "--format", "perfetto", "-o", &trace], "is the source");
    assert_eq!(std::fs::read(&trace).unwrap(), before, "the trace file changed");
    assert_eq!(run(&["decode", &trace]).stdout.lines().count(), 3);
    no_temporary_files(dir);
}

#[test]
fn an_output_inside_a_source_directory_is_refused() {
    let dir = temp("rec");
    let (layer, _recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).directory(&dir).build().unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || tracing::info!("one"));
    let rings = dir.join(ringtrace_tracing::RINGS_FILE);
    let before = std::fs::read(&rings).unwrap();
    let d = dir.to_str().unwrap();
    refused(&["snapshot", d, "-o", rings.to_str().unwrap()], "inside the source directory");
    refused(&["snapshot", d, "-o", dir.join("new.rtt").to_str().unwrap()], "inside the source directory");
    refused(&["export", d, "--format", "ctf", "-o", d], "is the source");
    assert_eq!(std::fs::read(&rings).unwrap(), before);
}

#[test]
fn a_failed_write_leaves_the_old_file_whole_and_no_temporary_file() {
    let (ring, _handle) = ring_with(200);
    let dir = temp("out");
    let dir = dir.parent().unwrap();
    let old = dir.join("old.txt");
    std::fs::write(&old, "the previous output, kept\n").unwrap();
    // A 1 KiB file size limit: the snapshot (8 KiB of lines) fails with EFBIG half way.
    let status = Command::new("bash")
        .args(["-c", "ulimit -f 1; trap '' XFSZ; exec \"$0\" snapshot \"$1\" -o \"$2\""])
        .args([BIN, &ring, old.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(1), "{}", String::from_utf8_lossy(&status.stderr));
    assert!(String::from_utf8_lossy(&status.stderr).contains("cannot write"));
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "the previous output, kept\n");
    no_temporary_files(dir);
    // Without the limit it is replaced whole, mode 0600.
    let o = run(&["snapshot", &ring, "-o", old.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(std::fs::read_to_string(&old).unwrap().lines().count(), 200);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&old).unwrap().permissions().mode() & 0o777, 0o600);
    no_temporary_files(dir);
}

/// A character device node of the tests' own, the null device (1:3), so that a
/// command that wrongly replaced it could not touch the machine's /dev/null; `None`
/// where this user may not make device nodes (only root may: the device cases are
/// left out after `have_root` said so, or fail where `RINGTRACE_REQUIRE` lists `root`).
fn private_null() -> Option<std::path::PathBuf> {
    if !ringtrace_fixtures::have_root("make a device node (mknod): the device cases use FIFOs only") {
        return None;
    }
    let node = temp("null");
    let made = Command::new("mknod").arg(&node).args(["c", "1", "3"]).output().unwrap();
    assert!(made.status.success(), "mknod {} c 1 3 as root: {}", node.display(), String::from_utf8_lossy(&made.stderr));
    Some(node)
}

#[test]
fn devices_and_fifos_are_written_in_place() {
    let (ring, _handle) = ring_with(3);
    let trace = trace_file();
    if let Some(null) = private_null() {
        let null = null.to_str().unwrap();
        let o = run(&["snapshot", &ring, "-o", null]);
        assert_eq!((o.code, o.stderr.as_str()), (0, ""));
        let o = run(&["export", &trace, "--format", "chrome", "-o", null]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(std::fs::symlink_metadata(null).unwrap().file_type().is_char_device(), "{null} was replaced");
    }
    // A FIFO: its reader gets the lines.
    let fifo = temp("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let reader = std::thread::spawn({
        let fifo = fifo.clone();
        move || std::fs::read_to_string(fifo).unwrap()
    });
    let o = run(&["snapshot", &ring, "-o", fifo.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(reader.join().unwrap().lines().count(), 3);
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn create_force_replaces_regular_files_only() {
    if let Some(null) = private_null() {
        let null = null.to_str().unwrap();
        refused(&["create", null, "--capacity", "64k", "--force"], "a character device");
        assert!(std::fs::symlink_metadata(null).unwrap().file_type().is_char_device(), "{null} was replaced");
    }
    let fifo = temp("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    refused(&["create", fifo.to_str().unwrap(), "--capacity", "64k", "--force"], "a FIFO");
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    let target = temp("target");
    std::fs::write(&target, "not a ring").unwrap();
    let link = target.with_file_name("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    refused(&["create", link.to_str().unwrap(), "--capacity", "64k", "--force"], "a symbolic link");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "not a ring");
    refused(&["create", target.to_str().unwrap(), "--capacity", "64k"], "exists");
    let o = run(&["create", target.to_str().unwrap(), "--capacity", "64k", "--force"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(run(&["stat", target.to_str().unwrap()]).code, 0);
    no_temporary_files(target.parent().unwrap());
}

#[test]
fn a_ctf_export_replaces_a_ctf_trace_only() {
    let trace = trace_file();
    let out = temp("trace.ctf");
    let o = run(&["export", &trace, "--format", "ctf", "-o", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o700, "trace data is private");
    // A stale stream file of an earlier export is not left beside the new one.
    std::fs::write(out.join("stream-999999"), b"stale").unwrap();
    let o = run(&["export", &trace, "--format", "ctf", "-o", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!out.join("stream-999999").exists());
    assert!(out.join("metadata").exists());
    // A directory that is not a CTF trace is never replaced.
    let home = temp("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("thesis.tex"), b"years of work").unwrap();
    refused(&["export", &trace, "--format", "ctf", "-o", home.to_str().unwrap()], "is not a CTF trace");
    assert_eq!(std::fs::read(home.join("thesis.tex")).unwrap(), b"years of work");
    no_temporary_files(out.parent().unwrap());
}

#[test]
fn write_whole_refuses_an_input_larger_than_a_record_at_once() {
    let (ring, _handle) = ring_with(0);
    let start = Instant::now();
    refused(&["write", &ring, "--whole", "/dev/zero"], "larger than the ring's largest record");
    assert!(start.elapsed() < DEADLINE);
}

#[test]
fn numbers_out_of_range_are_usage_errors() {
    for args in [
        &["demo", "--seconds", "18446744073709551615"][..],
        &["demo", "--seconds", "18446744073709552"],
        &["demo", "--seconds", "0"],
        &["demo", "--processes", "0"],
        &["tail", "x", "--timeout", "0s"],
        &["tail", "x", "--timeout", "18446744073709551615"],
        &["write", "x", "--wait=-1s"],
        &["create", "x", "--capacity", "3k"],
    ] {
        let o = run(args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
    }
}

/// The `ringtrace __demo-producer` processes writing into `path`.
fn producers_of(path: &Path) -> Vec<u32> {
    let needle = path.to_str().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c).contains(needle) && String::from_utf8_lossy(&c).contains("__demo-producer")
            })
        })
        .collect()
}

#[test]
fn an_interrupted_demo_removes_its_ring_and_stops_its_producers() {
    for signal in ["INT", "TERM"] {
        let child = Command::new(BIN)
            .args(["demo", "--seconds", "60"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = Guard(child);
        let dir =
            if Path::new("/dev/shm").is_dir() { std::path::PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        // `ringtrace-demo-PID-RANDOM.ring`: a name nobody can guess, found by its pid.
        let prefix = format!("ringtrace-demo-{}-", child.0.id());
        let find = || {
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| {
                p.file_name().unwrap().to_str().is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".ring"))
            })
        };
        let start = Instant::now();
        let ring = loop {
            if let Some(ring) = find() {
                break ring;
            }
            assert!(start.elapsed() < DEADLINE, "the demo made no ring {prefix}*.ring in {}", dir.display());
            std::thread::sleep(Duration::from_millis(20));
        };
        while !(ring.exists() && producers_of(&ring).len() == 2) {
            assert!(start.elapsed() < DEADLINE, "the demo did not start its producers");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(Command::new("kill")
            .args([&format!("-{signal}"), &child.0.id().to_string()])
            .status()
            .unwrap()
            .success());
        let status = child.wait(DEADLINE, "demo");
        assert!(status.signal().is_some() || status.code().is_some_and(|c| c > 128), "{status:?}");
        assert!(!ring.exists(), "SIG{signal}: the demo left {} behind", ring.display());
        let start = Instant::now();
        while !producers_of(&ring).is_empty() {
            assert!(start.elapsed() < DEADLINE, "SIG{signal}: the demo's producers go on running");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
