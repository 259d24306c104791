//! Outputs named in roundabout ways: a link into a source directory is refused, a
//! descriptor (`/dev/stdout`, `/dev/fd/N`) is written where it stands, another user's
//! link in a sticky directory is not followed, and man pages are readable by all.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

use ringtrace::{MpscRing, Wakeup};
use tracing_subscriber::layer::SubscriberExt;

mod common;

use common::{run, temp};

/// A ring file of 64 KiB with three records (the handle keeps it alive).
fn ring3() -> (String, MpscRing) {
    let path = temp("r.ring");
    let ring = MpscRing::builder(64 << 10).create(&path).unwrap();
    let mut p = ring.producer().unwrap();
    for i in 0..3 {
        p.output(format!("record {i}").as_bytes(), Wakeup::Default).unwrap();
    }
    (path.to_str().unwrap().to_owned(), ring)
}

fn refused(args: &[&str], what: &str) {
    let o = run(args);
    assert_eq!(o.code, 1, "{args:?} was not refused: {}", o.stderr);
    assert!(o.stderr.contains(what), "{args:?}: {}", o.stderr);
}

#[test]
fn a_link_to_a_file_inside_a_source_directory_is_refused() {
    let dir = temp("rec");
    let (layer, _recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).directory(&dir).build().unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || tracing::info!("one"));
    let rings = dir.join(ringtrace_tracing::RINGS_FILE);
    let before = std::fs::read(&rings).unwrap();
    // The link lives outside the directory; the file it names is inside.
    let link = temp("out.rtt");
    std::os::unix::fs::symlink(&rings, &link).unwrap();
    let (d, l) = (dir.to_str().unwrap(), link.to_str().unwrap());
    refused(&["snapshot", d, "-o", l], "inside the source directory");
    refused(&["export", d, "--format", "chrome", "-o", l], "inside the source directory");
    assert_eq!(std::fs::read(&rings).unwrap(), before, "the live rings file was replaced");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
}

#[test]
fn a_descriptor_output_is_written_where_it_stands() {
    let (ring, _handle) = ring3();
    for name in ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"] {
        let out = temp("appended.txt");
        std::fs::write(&out, "kept\n").unwrap();
        let inode = std::fs::metadata(&out).unwrap().ino();
        // `>>`: the shell opens the file to append; the command must add to it.
        let o = Command::new("bash")
            .args(["-c", "exec \"$0\" snapshot \"$1\" -o \"$2\" >> \"$3\""])
            .args([common::BIN, &ring, name, out.to_str().unwrap()])
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(o.status.success(), "{name}: {}", String::from_utf8_lossy(&o.stderr));
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(text, "kept\nrecord 0\nrecord 1\nrecord 2\n", "{name}: the file was replaced, not appended to");
        assert_eq!(std::fs::metadata(&out).unwrap().ino(), inode, "{name}: the file was renamed over");
    }
}

#[test]
fn another_users_link_in_a_sticky_directory_is_not_followed() {
    if !ringtrace_fixtures::have_root("give a link to another user (lchown)") {
        return;
    }
    let (ring, _handle) = ring3();
    // A shared sticky directory as /tmp is, and root's file elsewhere.
    let shared = temp("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let canary = temp("root-owned.conf");
    std::fs::write(&canary, "root's file\n").unwrap();
    // Another user (nobody, 65534) plants a link at the name root will write.
    let planted = shared.join("report.txt");
    std::os::unix::fs::symlink(&canary, &planted).unwrap();
    std::os::unix::fs::lchown(&planted, Some(65534), Some(65534)).unwrap();
    refused(&["snapshot", &ring, "-o", planted.to_str().unwrap()], "symbolic link of another user");
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "root's file\n");
    // Root's own link there is followed, as the kernel would.
    let own = shared.join("mine.txt");
    let target = temp("target.txt");
    std::os::unix::fs::symlink(&target, &own).unwrap();
    let o = run(&["snapshot", &ring, "-o", own.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(std::fs::read_to_string(&target).unwrap().lines().count(), 3);
    // Outside a sticky directory, links are followed whoever owns them.
    let plain = temp("plain-link");
    std::os::unix::fs::symlink(&target, &plain).unwrap();
    std::os::unix::fs::lchown(&plain, Some(65534), Some(65534)).unwrap();
    let o = run(&["snapshot", &ring, "-o", plain.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[test]
fn trace_outputs_are_private_and_man_pages_follow_the_umask() {
    let (ring, _handle) = ring3();
    let out = temp("snap.txt");
    let dir = temp("man");
    let o = Command::new("bash")
        .args(["-c", "umask 022; \"$0\" snapshot \"$1\" -o \"$2\" && exec \"$0\" man --dir \"$3\""])
        .args([common::BIN, &ring, out.to_str().unwrap(), dir.to_str().unwrap()])
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out), 0o600, "a copy of trace data");
    let pages: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(pages.len() > 5, "{pages:?}");
    for page in pages {
        assert_eq!(mode(&page), 0o644, "{}", page.display());
    }
}

#[test]
fn a_ring_file_is_private_whatever_the_umask() {
    let ring = temp("open.ring");
    let o = Command::new("bash")
        .args(["-c", "umask 000; exec \"$0\" create \"$1\" --capacity 64k"])
        .args([common::BIN, ring.to_str().unwrap()])
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::metadata(&ring).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn an_output_in_a_missing_directory_says_the_directory_is_missing() {
    let (ring, _handle) = ring3();
    let missing = temp("gone").join("sub");
    let out = missing.join("x");
    let (o, m) = (out.to_str().unwrap(), missing.display().to_string());
    let said = format!("the directory {m} does not exist");
    // A trace to export: a recorder directory.
    let dir = temp("rec");
    let (layer, _recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).directory(&dir).build().unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || tracing::info!("one"));
    let d = dir.to_str().unwrap();
    for args in [
        &["snapshot", &ring, "-o", o][..],
        &["export", d, "--format", "chrome", "-o", o],
        &["export", d, "--format", "ctf", "-o", o],
        &["create", o, "--capacity", "4k"],
        &["demo", o, "--seconds", "1"],
    ] {
        refused(args, &said);
        let e = run(args).stderr;
        assert!(!e.contains("symbolic link") && !e.contains(".ringtrace-"), "{args:?}: {e}");
    }
    // A path through a file: that file is not a directory.
    let file = temp("plain");
    std::fs::write(&file, "x").unwrap();
    let through = file.join("x");
    refused(&["snapshot", &ring, "-o", through.to_str().unwrap()], &format!("{} is not a directory", file.display()));
    // Only a link that names a place in a missing directory is said to be one.
    let link = temp("link");
    std::os::unix::fs::symlink(&out, &link).unwrap();
    refused(&["snapshot", &ring, "-o", link.to_str().unwrap()], "symbolic link");
    assert!(!missing.exists(), "a directory was made");
}
