//! A process that records (root, in the tests that need it) and an unprivileged local
//! user who attacks it (simulated: root plants the user's files and symlinks and gives
//! them to uid 65534 with `lchown`). The attacker can write the directory a dump goes
//! to, or the one the recorder uses; the recorder must not write through what the
//! attacker planted, and what it writes must stay its own and private (mode 0600).
//!
//! Parts that need root (giving files to another user) are skipped, with a line on
//! stderr, when the tests run as another user; where `RINGTRACE_REQUIRE` lists `root`
//! they fail instead (`ringtrace_fixtures::have_root`).

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

use common::{dispatch, TempDir};
use ringtrace_fixtures::{attacker_dir, euid, give_to_attacker, have_root, mode, plant_symlink, Canary, ATTACKER};
use ringtrace_tracing::decode::Trace;
use ringtrace_tracing::{Builder, Recorder, CATALOG_FILE, RINGS_FILE};

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

/// `dump` is a trace file that root owns, mode 0600, holding the recorded events.
fn assert_private_dump(dump: &Path) {
    let m = std::fs::symlink_metadata(dump).unwrap();
    assert!(m.file_type().is_file(), "{} is not a regular file", dump.display());
    assert_eq!(m.uid(), euid(), "{} is not the recorder's", dump.display());
    assert_eq!(m.mode() & 0o7777, 0o600, "{}", dump.display());
    assert_eq!(Trace::open(dump).unwrap().events().len(), 3);
}

#[test]
fn a_symlink_planted_at_every_temporary_name_of_a_dump_is_never_written_through() {
    let dir = attacker_dir("attack-every-name");
    let canary = Canary::plant(&dir.0);
    // A symlink to a name that does not exist: a plain create would make it (root's
    // file, wherever the attacker points).
    let dangling = dir.join("made-through-a-symlink");
    let target = dir.join("dump.rtt");
    // Every name a dump of this process could take: the fixed name older versions
    // used, and `PATH.partial.PID.N` for more counter values than this binary's dumps use.
    plant_symlink(canary.path(), &dir.join("dump.rtt.partial"));
    for n in 0..2000u32 {
        let to = if n % 2 == 0 { canary.path() } else { &dangling };
        plant_symlink(to, &dir.join(&format!("dump.rtt.partial.{}.{n}", std::process::id())));
    }
    let got = recorded().dump(&target);
    canary.assert_untouched("the dump wrote through a symlink");
    assert!(std::fs::symlink_metadata(&dangling).is_err(), "the dump created a file through a symlink");
    // With no free name there is no dump, and no file at the target either.
    let e = got.unwrap_err();
    let cause = std::error::Error::source(&e).map(ToString::to_string).unwrap_or_default();
    assert!(cause.contains("temporary names"), "{e}: {cause}");
    assert!(std::fs::symlink_metadata(&target).is_err());
}

#[test]
fn a_symlink_at_the_old_partial_name_leaves_its_target_alone() {
    let dir = attacker_dir("attack-partial-link");
    let canary = Canary::plant(&dir.0);
    plant_symlink(canary.path(), &dir.join("dump.rtt.partial"));
    recorded().dump(dir.join("dump.rtt")).unwrap();
    canary.assert_untouched("the dump wrote through dump.rtt.partial");
    assert_private_dump(&dir.join("dump.rtt"));
    // The attacker's symlink is still there, still a symlink: it was stepped over.
    assert!(std::fs::symlink_metadata(dir.join("dump.rtt.partial")).unwrap().file_type().is_symlink());
}

#[test]
fn a_symlink_at_the_dump_name_is_replaced_not_followed() {
    let dir = attacker_dir("attack-target-link");
    let canary = Canary::plant(&dir.0);
    plant_symlink(canary.path(), &dir.join("dump.rtt"));
    recorded().dump(dir.join("dump.rtt")).unwrap();
    canary.assert_untouched("a symlink was followed");
    assert_private_dump(&dir.join("dump.rtt"));
}

#[test]
fn a_dump_over_files_the_attacker_planted_is_roots_and_private() {
    // Not root: the planted files stay this user's (give_to_attacker says so), and the
    // modes are still checked.
    let dir = attacker_dir("attack-planted-files");
    let (target, partial) = (dir.join("dump.rtt"), dir.join("dump.rtt.partial"));
    for (p, m) in [(&target, 0o644), (&partial, 0o666)] {
        std::fs::write(p, "the attacker's\n").unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        give_to_attacker(p);
    }
    recorded().dump(&target).unwrap();
    assert_private_dump(&target);
    // The attacker's file at the old temporary name was neither written nor truncated.
    assert_eq!(std::fs::read_to_string(&partial).unwrap(), "the attacker's\n");
}

#[test]
fn a_stream_file_is_never_made_through_a_symlink() {
    let dir = attacker_dir("attack-stream-link");
    let canary = Canary::plant(&dir.0);
    let dangling = dir.join("made-through-a-symlink");
    plant_symlink(canary.path(), &dir.join("a.rtt"));
    plant_symlink(&dangling, &dir.join("b.rtt"));
    for name in ["a.rtt", "b.rtt"] {
        let e = Builder::stream(dir.join(name)).per_thread_bytes(64 << 10).build().unwrap_err();
        assert!(e.to_string().contains("creating the stream file"), "{e}");
    }
    canary.assert_untouched("a symlink was followed");
    assert!(std::fs::symlink_metadata(&dangling).is_err());
}

/// The child's part of [`a_panic_dump_steps_over_a_planted_symlink`]: records, installs
/// the panic hook, panics. Not a test: ignored, and run by that test with `--ignored`.
#[test]
#[ignore = "a child role: run by a_panic_dump_steps_over_a_planted_symlink"]
fn panic_child() {
    let Ok(dir) = std::env::var("ATTACK_CHILD_DIR") else {
        panic!("not a test: run by a_panic_dump_steps_over_a_planted_symlink with ATTACK_CHILD_DIR set")
    };
    let recorder = recorded();
    recorder.install_panic_hook(Path::new(&dir).join("panic.rtt")).unwrap();
    println!("ready");
    panic!("the child fails on purpose");
}

#[test]
fn a_panic_dump_steps_over_a_planted_symlink() {
    let dir = attacker_dir("attack-panic");
    let canary = Canary::plant(&dir.0);
    plant_symlink(canary.path(), &dir.join("panic.rtt.partial"));
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "panic_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env("ATTACK_CHILD_DIR", &dir.0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(BufReader::new(&child.stdout[..]).lines().map_while(Result::ok).any(|l| l.contains("ready")), "{stderr}");
    assert!(stderr.contains("flight recorder dumped to"), "{stderr}");
    canary.assert_untouched("the panic dump wrote through a symlink");
    assert_private_dump(&dir.join("panic.rtt"));
}

/// Building a flight recorder into `dir`.
fn record_into(dir: &Path) -> Result<Recorder, ringtrace_tracing::Error> {
    Builder::flight_recorder().per_thread_bytes(64 << 10).directory(dir).build().map(|(_, r)| r)
}

#[test]
fn a_new_recorder_directory_is_mode_0700() {
    let dir = TempDir::new("recdir-new");
    let rec = dir.join("a/b/rec");
    let _r = record_into(&rec).unwrap();
    assert_eq!(mode(&rec), 0o700);
}

#[test]
fn a_recorder_directory_others_can_write_is_refused() {
    let dir = TempDir::new("recdir-mode");
    for m in [0o777, 0o775, 0o757, 0o1777, 0o720] {
        let rec = dir.join(&format!("rec-{m:o}"));
        std::fs::create_dir(&rec).unwrap();
        std::fs::set_permissions(&rec, std::fs::Permissions::from_mode(m)).unwrap();
        let e = record_into(&rec).unwrap_err().to_string();
        assert!(e.contains("writable by its group or by others"), "{m:o}: {e}");
        assert!(e.contains(&rec.display().to_string()), "{e}");
        assert!(std::fs::read_dir(&rec).unwrap().next().is_none(), "{m:o}: files were made in it");
    }
    // The recorder's own directory that only it writes is fine, whatever else.
    for m in [0o700, 0o755, 0o750, 0o711] {
        let rec = dir.join(&format!("ok-{m:o}"));
        std::fs::create_dir(&rec).unwrap();
        std::fs::set_permissions(&rec, std::fs::Permissions::from_mode(m)).unwrap();
        record_into(&rec).unwrap();
        assert_eq!(mode(&rec), m, "an existing directory keeps its mode");
    }
}

#[test]
fn a_recorder_directory_of_another_user_is_refused() {
    if !have_root("give a directory to another user (chown)") {
        return;
    }
    let dir = TempDir::new("recdir-owner");
    let rec = dir.join("rec");
    std::fs::create_dir(&rec).unwrap();
    std::fs::set_permissions(&rec, std::fs::Permissions::from_mode(0o700)).unwrap();
    give_to_attacker(&rec);
    let e = record_into(&rec).unwrap_err().to_string();
    assert!(e.contains(&format!("owned by uid {ATTACKER}")), "{e}");
    assert!(e.contains(&rec.display().to_string()), "{e}");
    assert!(std::fs::read_dir(&rec).unwrap().next().is_none(), "files were made in it");
    // A symlink of root's to the attacker's directory leads there: refused too.
    let link = dir.join("link");
    symlink(&rec, &link).unwrap();
    let e = record_into(&link).unwrap_err().to_string();
    assert!(e.contains(&format!("owned by uid {ATTACKER}")), "{e}");
}

#[test]
fn a_recorder_directory_of_another_user_can_still_be_read() {
    let dir = TempDir::new("recdir-read");
    let rec = dir.join("rec");
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(64 << 10).directory(&rec).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || tracing::info!("one"));
    std::fs::set_permissions(&rec, std::fs::Permissions::from_mode(0o777)).unwrap();
    for p in [rec.clone(), rec.join(RINGS_FILE), rec.join(CATALOG_FILE)] {
        give_to_attacker(&p);
    }
    assert_eq!(Trace::open(&rec).unwrap().events().len(), 1);
    let mut out = Vec::new();
    assert_eq!(ringtrace_tracing::snapshot(&rec, &mut out).unwrap().records, 1);
    drop(recorder);
}
