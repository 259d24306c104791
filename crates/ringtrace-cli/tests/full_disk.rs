//! The ring-file commands on a full filesystem: `create`, `write`, `consume` and
//! `demo PATH` on a small tmpfs that is (or becomes) full end with exit status 1 and one
//! clear line naming the file, never with a signal (SIGBUS from a page the filesystem
//! cannot back), and a failed `create` leaves no file behind.
//!
//! Each test mounts a small private tmpfs (`ringtrace_fixtures::Tmpfs`), which needs
//! root: without it they skip (or fail, where `RINGTRACE_REQUIRE` lists `root`).

mod common;

use std::path::{Path, PathBuf};

use common::{run, temp, Output};
use ringtrace_fixtures::{have_root, Tmpfs};

/// The names in `dir` that are not the filler files, sorted.
fn ring_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("filler-"))
        .collect();
    v.sort();
    v
}

/// Asserts `ringtrace ARGS` failed as a full filesystem should make it fail: exit
/// status 1 (`common::run` fails the test on death by a signal), one error line naming
/// `path` and saying the space is missing.
fn fails_for_space(o: &Output, args: &[&str], path: &Path) {
    assert_eq!(o.code, 1, "{args:?}: stdout {:?}, stderr {:?}", o.stdout, o.stderr);
    let line = o.stderr.trim_end();
    assert_eq!(line.lines().count(), 1, "{args:?}: {line}");
    assert!(line.starts_with("ringtrace: error: "), "{args:?}: {line}");
    assert!(line.contains(&path.display().to_string()), "{args:?}: the error does not name {}: {line}", path.display());
    assert!(line.contains("No space left on device"), "{args:?}: {line}");
}

#[test]
fn create_of_a_ring_bigger_than_the_filesystem_fails_cleanly() {
    if !have_root("mount a small tmpfs") {
        return;
    }
    let fs = Tmpfs::mount(64 << 10).unwrap();
    let path = fs.path("big.ring");
    let args = ["create", path.to_str().unwrap(), "--capacity", "1m"];
    let o = run(&args);
    fails_for_space(&o, &args, &path);
    // The whole file: the 1 MiB data area and the control block's pages.
    let asked: u64 = o
        .stderr
        .split_once("reserving ")
        .and_then(|(_, rest)| rest.split_once(" bytes"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("the error does not say how much: {}", o.stderr));
    assert!(((1 << 20) + 4096..=(1 << 20) + (64 << 10)).contains(&asked), "{}", o.stderr);
    assert_eq!(ring_names(fs.dir()), Vec::<String>::new(), "a failed create left a file");
}

#[test]
fn create_and_demo_on_a_full_filesystem_fail_cleanly() {
    if !have_root("mount a small tmpfs") {
        return;
    }
    let fs = Tmpfs::mount(64 << 10).unwrap();
    fs.fill().unwrap();
    for producers in ["mpsc", "spsc"] {
        for mode in ["discard", "overwrite"] {
            let path = fs.path("small.ring");
            let args = ["create", path.to_str().unwrap(), "--capacity", "4k", "--producers", producers, "--mode", mode];
            fails_for_space(&run(&args), &args, &path);
            assert_eq!(ring_names(fs.dir()), Vec::<String>::new(), "{args:?} left a file");
        }
    }
    let path = fs.path("demo.ring");
    let args = ["demo", path.to_str().unwrap(), "--seconds", "1", "--processes", "1", "--capacity", "4k"];
    fails_for_space(&run(&args), &args, &path);
    assert_eq!(ring_names(fs.dir()), Vec::<String>::new(), "demo left a file");
}

/// A file of `n` numbered lines, for `write`.
fn lines(n: u32) -> PathBuf {
    let input = temp("lines.txt");
    let text: String = (0..n).map(|i| format!("line {i:06} of the input, long enough to take room\n")).collect();
    std::fs::write(&input, text).unwrap();
    input
}

#[test]
fn a_ring_made_before_the_filesystem_filled_takes_and_gives_every_record() {
    if !have_root("mount a small tmpfs") {
        return;
    }
    let fs = Tmpfs::mount(128 << 10).unwrap();
    let path = fs.path("fits.ring");
    let p = path.to_str().unwrap();
    let o = run(&["create", p, "--capacity", "64k"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    fs.fill().unwrap();
    let input = lines(800); // about 48 KiB of records: most of the ring, every page
    for round in 0..3 {
        let o = run(&["write", p, input.to_str().unwrap()]);
        assert_eq!(o.code, 0, "write, round {round}: {}", o.stderr);
        let o = run(&["consume", p, "-n", "800", "--timeout", "10s"]);
        assert_eq!(o.code, 0, "consume, round {round}: {}", o.stderr);
        assert_eq!(o.stdout.lines().count(), 800, "round {round}");
        assert!(o.stdout.lines().last().unwrap().contains("line 000799"), "round {round}");
    }
}

/// A ring file as sparse as it can be, made by hand on `fs`: the first page of a real
/// ring file (its control block), then holes up to the file's length.
fn sparse_ring(fs: &Tmpfs, capacity: &str) -> PathBuf {
    let real = temp("source.ring");
    let o = run(&["create", real.to_str().unwrap(), "--capacity", capacity]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let bytes = std::fs::read(&real).unwrap();
    let path = fs.path("sparse.ring");
    let page = 4096; // the control block's page: the data area starts at the next one
    let mut file = std::fs::File::create_new(&path).unwrap();
    std::io::Write::write_all(&mut file, &bytes[..page]).unwrap();
    file.set_len(bytes.len() as u64).unwrap();
    path
}

#[test]
fn write_and_consume_of_a_sparse_ring_on_a_full_filesystem_fail_cleanly() {
    if !have_root("mount a small tmpfs") {
        return;
    }
    let fs = Tmpfs::mount(64 << 10).unwrap();
    let path = sparse_ring(&fs, "1m");
    fs.fill().unwrap();
    let p = path.to_str().unwrap();
    let input = lines(20_000);
    let args = ["write", p, input.to_str().unwrap(), "--drop"];
    fails_for_space(&run(&args), &args, &path);
    let args = ["consume", p, "--timeout", "1s"];
    let o = run(&args);
    fails_for_space(&o, &args, &path);
    assert!(o.stdout.is_empty(), "consume printed records it could not hand back: {}", o.stdout);
    // The readers that do not map the file still read it.
    let o = run(&["stat", p]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}
