//! Runs the `ringtrace` binary on real kernel BPF ring buffer maps (`bpf-pin:PATH`,
//! `bpf-id:N`), written by a BPF program run with `BPF_PROG_TEST_RUN`
//! (`ringtrace-fixtures`). Every test skips, with a one-line reason, where BPF maps
//! cannot be created or a bpffs cannot be mounted; it fails instead where
//! `RINGTRACE_REQUIRE` lists `bpf`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ringtrace::kernel::bpf::UserRingBuf;
use ringtrace_fixtures::{
    create_array_map, expected_payload, have_bpf, have_root, skip, BpfFs, Feature, ProgSpec, RingMap, SeqProgram,
};

mod common;

use common::{code, fails, run, spawn, temp, Guard, Output, BIN, DEADLINE};

/// Data bytes of the maps under test.
const SIZE: u32 = 1 << 16;

/// A private bpffs, or `None` (with the reason printed) if the test must skip; the test
/// fails instead where `RINGTRACE_REQUIRE` lists `bpf` ([`ringtrace_fixtures::skip`]).
fn setup() -> Option<BpfFs> {
    if !have_bpf() {
        return None;
    }
    BpfFs::mount().map_err(|e| skip(Feature::Bpf, format!("cannot mount a bpffs: {e}"))).ok()
}

/// A ring buffer map of `SIZE` bytes and a program writing `payload`-byte records to it.
fn ring(payload: u32) -> (RingMap, SeqProgram) {
    let map = RingMap::create(SIZE).unwrap();
    let prog = SeqProgram::load(map.as_fd(), ProgSpec { payload, ..Default::default() }).unwrap();
    (map, prog)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `--format hex` lines of the records with these sequence numbers.
fn hex_lines(seqs: impl IntoIterator<Item = u64>, payload: u32) -> String {
    seqs.into_iter().map(|s| hex(&expected_payload(s, payload)) + "\n").collect()
}

/// Runs the binary, asserts exit 0 and an empty stderr, returns stdout.
fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""), "{args:?}");
    o.stdout
}

/// `stat --format json` of a discard-mode map with no name, as it must print it.
fn stat_json(id: u32, consumer: u64, producer: u64, records: usize) -> String {
    format!(
        "{{\"kind\":\"bpf-ringbuf\",\"name\":\"\",\"id\":{id},\"mode\":\"discard\",\"size\":{SIZE},\
         \"consumer_pos\":{consumer},\"producer_pos\":{producer},\"available\":{},\"records\":{records},\
         \"unfinished\":0}}\n",
        producer - consumer
    )
}

#[test]
fn tail_consumes_in_order() {
    let Some(fs) = setup() else { return };
    let (map, prog) = ring(8);
    let pin = fs.path("events");
    map.pin(&pin).unwrap();
    let src = format!("bpf-pin:{}", pin.display());
    prog.run(8).unwrap();

    let first = ok(&["tail", &src, "--count", "5", "--format", "hex"]);
    assert_eq!(first, hex_lines(0..5, 8));
    #[cfg(target_endian = "little")]
    assert_eq!(first.lines().nth(1), Some("0100000000000000"));
    // Consumed: the next tail starts at seq 5.
    assert_eq!(ok(&["tail", &src, "--count", "3", "--format", "hex"]), hex_lines(5..8, 8));
    // 8 records of 8 header + 8 payload bytes, all consumed.
    assert_eq!(ok(&["stat", &src, "--format", "json"]), stat_json(map.id().unwrap(), 128, 128, 0));
}

#[test]
fn tail_waits_for_records() {
    let Some(_fs) = setup() else { return };
    let (map, prog) = ring(8);
    let src = format!("bpf-id:{}", map.id().unwrap());
    let args = ["tail", &src, "--count", "3", "--format", "json"];
    let (mut child, out, err) = spawn(&args);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "tail exited before any record: {:?}",
        std::fs::read_to_string(&err)
    );
    let start = Instant::now();
    prog.run(3).unwrap();
    let status = child.wait(Duration::from_secs(5), "tail bpf-id --count 3");
    assert_eq!(code(status, "tail"), 0, "{:?}", std::fs::read_to_string(&err));
    eprintln!("tail_waits_for_records: exited {:?} after the records", start.elapsed());
    // Seqs 0..3 as 8 native-endian bytes: valid UTF-8, every byte a control character.
    let expected: String = (0..3u64)
        .map(|s| {
            let data: String = expected_payload(s, 8).iter().map(|b| format!("\\u{b:04x}")).collect();
            format!("{{\"pos\":{},\"pid\":0,\"len\":8,\"data\":\"{data}\"}}\n", s * 16)
        })
        .collect();
    assert_eq!(std::fs::read_to_string(out).unwrap(), expected);
    assert_eq!(std::fs::read_to_string(err).unwrap(), "");
}

#[test]
fn tail_follow_prints_records_as_they_come() {
    let Some(_fs) = setup() else { return };
    let (map, prog) = ring(16);
    prog.run(2).unwrap();
    let src = format!("bpf-id:{}", map.id().unwrap());
    let child = Command::new(BIN)
        .args(["tail", &src, "--follow", "--format", "hex"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Guard(child);
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let next = || rx.recv_timeout(Duration::from_secs(5)).expect("tail --follow printed no line within 5 s");
    for seq in 0..2 {
        assert_eq!(next() + "\n", hex_lines([seq], 16));
    }
    for round in 0..3u64 {
        std::thread::sleep(Duration::from_millis(100));
        prog.run(3).unwrap();
        for seq in 2 + round * 3..5 + round * 3 {
            assert_eq!(next() + "\n", hex_lines([seq], 16));
        }
    }
    assert!(child.0.try_wait().unwrap().is_none(), "tail --follow exited");
}

#[test]
fn snapshot_lists_without_consuming() {
    let Some(fs) = setup() else { return };
    let (map, prog) = ring(16);
    let pin = fs.path("snap");
    map.pin(&pin).unwrap();
    let src = format!("bpf-pin:{}", pin.display());
    let id = map.id().unwrap();
    prog.run(6).unwrap();
    // Consume seqs 0 and 1: the snapshot starts at the read position.
    assert_eq!(ok(&["tail", &src, "--count", "2", "--format", "hex"]), hex_lines(0..2, 16));

    // Records of 8 header + 16 payload bytes.
    let stat = stat_json(id, 2 * 24, 6 * 24, 4);
    assert_eq!(ok(&["stat", &src, "--format", "json"]), stat);
    for _ in 0..2 {
        assert_eq!(ok(&["snapshot", &src, "--format", "hex"]), hex_lines(2..6, 16));
        assert_eq!(ok(&["snapshot", &src, "--reverse", "--format", "hex"]), hex_lines((2..6).rev(), 16));
        assert_eq!(ok(&["stat", &src, "--format", "json"]), stat);
    }
    let file = temp("snapshot.hex");
    assert_eq!(ok(&["snapshot", &src, "-r", "--format", "hex", "-o", file.to_str().unwrap()]), "");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), hex_lines((2..6).rev(), 16));
    assert_eq!(ok(&["stat", &src, "--format", "json"]), stat);
    // Still there for a consumer.
    assert_eq!(ok(&["tail", &src, "--count", "4", "--format", "hex"]), hex_lines(2..6, 16));
    assert_eq!(ok(&["snapshot", &src]), "");
    assert_eq!(ok(&["stat", &src, "--format", "json"]), stat_json(id, 6 * 24, 6 * 24, 0));
}

#[test]
fn stat_shows_the_map() {
    let Some(fs) = setup() else { return };
    let (map, prog) = ring(8);
    let pin = fs.path("stat");
    map.pin(&pin).unwrap();
    let src = format!("bpf-pin:{}", pin.display());
    let id = map.id().unwrap();
    let text = |consumer: u64, producer: u64, records: usize| {
        format!(
            "BPF ring buffer map \"\" (id {id})\nmode          discard\nsize          {SIZE} bytes\n\
             consumer      {consumer}\nproducer      {producer}\navailable     {} bytes\n\
             records       {records} committed, 0 being written\n",
            producer - consumer
        )
    };
    assert_eq!(ok(&["stat", &src]), text(0, 0, 0));
    assert_eq!(ok(&["stat", &src, "--format", "json"]), stat_json(id, 0, 0, 0));
    prog.run(3).unwrap();
    let t = ok(&["stat", &src]);
    assert_eq!(t, text(0, 48, 3));
    assert!(t.contains(&format!("(id {id})")) && t.contains("discard") && t.contains(&format!("{SIZE} bytes")), "{t}");
    let j = ok(&["stat", &src, "--format", "json"]);
    assert!(j.starts_with("{\"kind\":\"bpf-ringbuf\"") && j.contains(&format!("\"size\":{SIZE}")), "{j}");
    assert_eq!(j, stat_json(id, 0, 48, 3));
    // The same map by id.
    assert_eq!(ok(&["stat", &format!("bpf-id:{id}"), "--format", "json"]), j);
}

#[test]
fn bad_sources_fail_with_one_line() {
    let Some(fs) = setup() else { return };
    fails("bpf-id:4294967295", "no BPF map has id 4294967295");
    fails("bpf-pin:/nonexistent/x", "nothing is pinned at /nonexistent/x");
    let array = create_array_map(8, 4).unwrap();
    let pin = fs.path("array");
    ringtrace_fixtures::pin_fd(array.as_fd(), &pin).unwrap();
    fails(&format!("bpf-pin:{}", pin.display()), "not a ring buffer");
    fails("bpf-id:abc", "bpf-id:abc: a map id is a number");
    fails("bpf-id:-1", "a map id is a number");
    fails("bpf-pin:", "bpf-pin: needs a path");
}

#[test]
fn a_second_reader_of_a_map_is_refused() {
    let Some(_fs) = setup() else { return };
    let (map, prog) = ring(8);
    let src = format!("bpf-id:{}", map.id().unwrap());
    let (mut first, out, err) = spawn(&["tail", "-f", &src, "--format", "hex"]);
    // The first reader holds the map once it has printed a record.
    prog.run(1).unwrap();
    wait_for_output(&out, &hex_lines([0], 8), &err);
    for cmd in ["tail", "consume"] {
        let o = run(&[cmd, "-n", "1", &src]);
        assert_eq!(o.code, 1, "{cmd}: {}", o.stderr);
        assert!(o.stderr.contains(&format!("already has a reader (pid {}, uid 0)", first.0.id())), "{}", o.stderr);
    }
    // Every record goes to the one reader.
    prog.run(9).unwrap();
    wait_for_output(&out, &hex_lines(0..10, 8), &err);
    // SIGINT, not SIGKILL: a reader that stops gracefully hands back the space of
    // every record it printed (a killed one may keep the last one's, printed again by
    // the next reader).
    assert_eq!(interrupt(&mut first, "tail -f"), 130);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), hex_lines(0..10, 8));
    // Its lock went with it: the next reader is let in.
    prog.run(2).unwrap();
    assert_eq!(ok(&["consume", "-n", "2", "--format", "hex", &src]), hex_lines(10..12, 8));
}

/// Waits (at most 10 s) until the file at `out` holds `expected`.
fn wait_for_output(out: &Path, expected: &str, err: &Path) {
    let start = Instant::now();
    loop {
        let got = std::fs::read_to_string(out).unwrap();
        if got == expected {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "stdout {got:?}, not {expected:?}; stderr {:?}",
            std::fs::read_to_string(err)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Stops a running reader with SIGINT and returns its exit code.
fn interrupt(child: &mut Guard, what: &str) -> i32 {
    let pid = rustix::process::Pid::from_child(&child.0);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    code(child.wait(DEADLINE, what), what)
}

/// The uid and gid of the other user of [`Nobody`].
const NOBODY: u32 = 65534;

/// Runs `ringtrace` as uid and gid 65534, with no groups and `CAP_SYS_ADMIN`, which
/// opening a BPF map by id needs (`setpriv`; ambient, so kept across its exec): another
/// user than the test's root, who may read the same maps.
struct Nobody {
    /// A copy of the binary in a directory of mode 0755: the build's own may lie
    /// under a directory that uid 65534 cannot search.
    dir: PathBuf,
}

impl Nobody {
    /// `ringtrace` ready to run as another user, or `None` where the test is not root
    /// (after [`have_root`], which fails the test instead where `RINGTRACE_REQUIRE`
    /// lists `root`). As root, anything else that keeps it from running fails the test.
    fn new(map_src: &str) -> Option<Nobody> {
        if !have_root("run a reader as another user") {
            return None;
        }
        match Command::new("setpriv").arg("--version").output() {
            Ok(o) if o.status.success() => {}
            _ => panic!("no setpriv (util-linux) to run a reader as another user"),
        }
        let dir = std::env::temp_dir().join(format!("ringtrace-kernel-test-{}", std::process::id()));
        let nobody = Nobody { dir };
        std::fs::DirBuilder::new().mode(0o755).create(&nobody.dir).unwrap();
        std::fs::copy(BIN, nobody.bin()).unwrap_or_else(|e| panic!("copying {BIN}: {e}"));
        std::fs::set_permissions(nobody.bin(), std::fs::Permissions::from_mode(0o755)).unwrap();
        // The map opens (stat takes no reader lock).
        let o = nobody.run(&["stat", map_src]);
        assert_eq!(o.code, 0, "`ringtrace stat {map_src}` as uid {NOBODY}: {}", o.stderr.trim());
        Some(nobody)
    }

    fn bin(&self) -> PathBuf {
        self.dir.join("ringtrace")
    }

    /// Starts the binary as uid 65534, stdout and stderr going to files.
    fn spawn(&self, args: &[&str]) -> (Guard, PathBuf, PathBuf) {
        let out = temp("stdout");
        let err = temp("stderr");
        let ids = NOBODY.to_string();
        let caps = "+sys_admin";
        let child = Command::new("setpriv")
            .args([&format!("--reuid={ids}"), &format!("--regid={ids}"), "--clear-groups"])
            .args([&format!("--inh-caps={caps}"), &format!("--ambient-caps={caps}")])
            .arg(self.bin())
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        (Guard(child), out, err)
    }

    /// Runs the binary as uid 65534 to completion (at most `DEADLINE`).
    fn run(&self, args: &[&str]) -> Output {
        let (mut child, out, err) = self.spawn(args);
        let what = args.join(" ");
        let code = code(child.wait(DEADLINE, &what), &what);
        Output { code, stdout: std::fs::read_to_string(out).unwrap(), stderr: std::fs::read_to_string(err).unwrap() }
    }
}

impl Drop for Nobody {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_reader_of_another_user_is_refused() {
    let Some(_fs) = setup() else { return };
    let (map, prog) = ring(8);
    let src = format!("bpf-id:{}", map.id().unwrap());
    let Some(nobody) = Nobody::new(&src) else { return };
    // A map id is the same for every user, and so is its reader lock. Refused readers
    // give up within 2 s if they are let in (and then take no record).
    let refused = |o: Output, holder: &Guard, uid: u32, what: &str| {
        assert_eq!((o.code, o.stdout.as_str()), (1, ""), "{what}: {}", o.stderr);
        let who = format!("map {} already has a reader (pid {}, uid {uid})", map.id().unwrap(), holder.0.id());
        assert!(o.stderr.contains(&who), "{what}: {:?} does not say {who:?}", o.stderr);
    };

    // Root reads; uid 65534 is refused.
    let (mut first, out, err) = spawn(&["tail", "-f", &src, "--format", "hex"]);
    prog.run(1).unwrap();
    wait_for_output(&out, &hex_lines([0], 8), &err);
    for cmd in ["tail", "consume"] {
        let o = nobody.run(&[cmd, "-n", "1", "--timeout", "2s", "--format", "hex", &src]);
        refused(o, &first, 0, &format!("{cmd} as uid {NOBODY}"));
    }
    prog.run(2).unwrap();
    wait_for_output(&out, &hex_lines(0..3, 8), &err);
    assert_eq!(interrupt(&mut first, "tail -f"), 130);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), hex_lines(0..3, 8));

    // Uid 65534 reads; root is refused.
    let (mut other, out, err) = nobody.spawn(&["tail", "-f", &src, "--format", "hex"]);
    prog.run(1).unwrap();
    wait_for_output(&out, &hex_lines([3], 8), &err);
    for cmd in ["tail", "consume"] {
        let o = run(&[cmd, "-n", "1", "--timeout", "2s", "--format", "hex", &src]);
        refused(o, &other, NOBODY, &format!("{cmd} as root"));
    }
    assert_eq!(interrupt(&mut other, "tail -f as uid 65534"), 130);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), hex_lines([3], 8));

    // No reader holds the map now: the next one is let in.
    prog.run(1).unwrap();
    assert_eq!(ok(&["consume", "-n", "1", "--format", "hex", &src]), hex_lines([4], 8));
}

#[test]
fn tail_of_an_empty_map_gives_up_at_its_timeout() {
    let Some(_fs) = setup() else { return };
    let (map, _prog) = ring(8);
    let src = format!("bpf-id:{}", map.id().unwrap());
    for cmd in ["tail", "consume"] {
        let start = Instant::now();
        assert_eq!(ok(&[cmd, "-n", "1", "--timeout", "300ms", &src]), "");
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(10), "{cmd}: {took:?}");
    }
}

#[test]
fn a_reader_whose_output_fails_loses_only_the_record_being_written() {
    let Some(fs) = setup() else { return };
    let (map, prog) = ring(8);
    let pin = fs.path("events");
    map.pin(&pin).unwrap();
    let src = format!("bpf-pin:{}", pin.display());
    prog.run(8).unwrap();
    // stdout on the full device: the first line fails with ENOSPC.
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let o = std::process::Command::new(BIN)
        .args(["consume", &src, "--format", "hex", "--timeout", "300ms"])
        .stdout(full)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("the record being written is consumed and lost"), "{err}");
    // The kernel got back the first record's space only: the other seven are there.
    assert_eq!(ok(&["tail", &src, "--format", "hex", "--timeout", "1s"]), hex_lines(1..8, 8));
}

/// A BPF user ring buffer map (`BPF_MAP_TYPE_USER_RINGBUF`, 31) of `size` data bytes,
/// made with `bpf(BPF_MAP_CREATE)`; its id; and its producer page and data mapped
/// read-only, to see what `write` put there.
struct UserMap {
    fd: OwnedFd,
    id: u32,
    view: *const u8,
    page: usize,
    size: usize,
}

impl UserMap {
    fn create(size: u32) -> UserMap {
        // `union bpf_attr` for BPF_MAP_CREATE: map_type, key_size, value_size,
        // max_entries, then zeros (no flags, no name).
        let mut attr = [0u32; 32];
        (attr[0], attr[3]) = (31, size);
        // SAFETY: BPF_MAP_CREATE (0) reads `size_of_val(&attr)` bytes of a valid attr.
        let fd = unsafe { libc::syscall(libc::SYS_bpf, 0, attr.as_ptr(), std::mem::size_of_val(&attr)) };
        assert!(fd >= 0, "creating a user ring buffer map: {}", std::io::Error::last_os_error());
        // SAFETY: a new descriptor, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        // The map's id, from a producer handle dropped at once (and its lock with it).
        let id = UserRingBuf::from_fd(fd.try_clone().unwrap()).unwrap().id();
        // SAFETY: `sysconf` has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = page + size as usize;
        // SAFETY: a new read-only shared mapping of the map's pages from the producer
        // page on (the kernel refuses only writable mappings of the consumer page).
        let view = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                page as libc::off_t,
            )
        };
        assert_ne!(view, libc::MAP_FAILED, "mapping the map: {}", std::io::Error::last_os_error());
        UserMap { fd, id, view: view.cast(), page, size: size as usize }
    }

    /// The producer position: where the next sample's header goes.
    fn producer_pos(&self) -> u64 {
        // SAFETY: the producer position is the mapping's first 8 bytes, 8-aligned, which
        // the command writes atomically.
        unsafe { (*(self.view as *const AtomicU64)).load(Ordering::Acquire) }
    }

    /// The sample whose header is at `pos`: its header's length word and its payload.
    fn sample(&self, pos: u64) -> (u32, Vec<u8>) {
        let at = pos as usize % self.size;
        // SAFETY: the header is inside the mapped data, 8-aligned; no writer runs.
        let header = unsafe { (*(self.view.add(self.page + at) as *const AtomicU32)).load(Ordering::Acquire) };
        let len = (header & ((1 << 30) - 1)) as usize;
        assert!(at + 8 + len <= self.size, "a sample past the data's end");
        // SAFETY: the payload is inside the mapped data (checked above).
        let payload = unsafe { std::slice::from_raw_parts(self.view.add(self.page + at + 8), len) };
        (header, payload.to_vec())
    }
}

impl Drop for UserMap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `create`, not used after this.
        unsafe { libc::munmap(self.view as *mut libc::c_void, self.page + self.size) };
    }
}

/// Runs the binary with `input` on its stdin.
fn run_with_input(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
    drop(stdin);
    let mut child = Guard(child);
    let what = args.join(" ");
    let code = code(child.wait(DEADLINE, &what), &what);
    let read = |r: &mut dyn Read| {
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        s
    };
    let stdout = read(child.0.stdout.as_mut().unwrap());
    let stderr = read(child.0.stderr.as_mut().unwrap());
    Output { code, stdout, stderr }
}

#[test]
fn write_produces_into_a_user_ring_buffer_map() {
    let Some(fs) = setup() else { return };
    let map = UserMap::create(SIZE);
    let pin = fs.path("config");
    ringtrace_fixtures::pin_fd(map.fd.as_fd(), &pin).unwrap();
    let src = format!("bpf-pin:{}", pin.display());
    let o = run_with_input(&["write", &src], b"a\nbb\n");
    assert_eq!((o.code, o.stdout.as_str()), (0, ""), "{}", o.stderr);
    assert_eq!(o.stderr, format!("{src}: wrote 2 record(s) (3 bytes)\n"));
    // Two samples, each an 8-byte header and its payload padded to 8 bytes, committed.
    assert_eq!(map.producer_pos(), 32);
    assert_eq!(map.sample(0), (1, b"a".to_vec()));
    assert_eq!(map.sample(16), (2, b"bb".to_vec()));

    // By id, from a file: an empty line is refused (a sample has at least a byte), so
    // is a line longer than the map takes; --drop makes that no error.
    let id = format!("bpf-id:{}", map.id);
    let input = temp("lines");
    let long = "x".repeat(SIZE as usize);
    std::fs::write(&input, format!("ccc\n\n{long}\nd\n")).unwrap();
    let o = run(&["write", &id, input.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(
        o.stderr,
        format!(
            "ringtrace: error: {id}: wrote 2 record(s) (4 bytes); refused 2 (1 too large for the map, 1 empty (a BPF \
             program takes samples of at least 1 byte)): the refused records are not in the map (--drop accepts that)\n"
        )
    );
    assert_eq!(map.producer_pos(), 64);
    assert_eq!(map.sample(32), (3, b"ccc".to_vec()));
    assert_eq!(map.sample(48), (1, b"d".to_vec()));
    let o = run(&["write", &id, "--drop", input.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("wrote 2 record(s) (4 bytes); refused 2"), "{}", o.stderr);
    // --whole: an input larger than the largest sample is refused before it is read.
    let o = run(&["write", &id, "--whole", input.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("is larger than the map's largest sample ({} bytes)", SIZE - 8)),
        "{}",
        o.stderr
    );
    assert_eq!(map.producer_pos(), 96);
}

#[test]
fn write_waits_for_room_in_a_full_user_ring_buffer_map_as_long_as_wait_says() {
    let Some(_fs) = setup() else { return };
    // SAFETY: `sysconf` has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u32;
    let map = UserMap::create(page);
    let id = format!("bpf-id:{}", map.id);
    // Samples of 8 + 120 bytes: the map takes page / 128 of them; no program drains it.
    let fits = page as usize / 128;
    let line = "y".repeat(120) + "\n";
    let input = temp("full");
    std::fs::write(&input, line.repeat(fits + 3)).unwrap();
    let start = Instant::now();
    let o = run(&["write", &id, "--wait=300ms", input.to_str().unwrap()]);
    let took = start.elapsed();
    assert_eq!(o.code, 1, "{}", o.stderr);
    // The first record that did not fit waited 300 ms; the next two tried once.
    assert!(
        o.stderr.contains(&format!(
            "wrote {fits} record(s) ({} bytes); refused 3 (2 because the map was full (its BPF program had not \
             drained it), 1 after waiting for room as long as --wait allowed)",
            fits * 120
        )),
        "{}",
        o.stderr
    );
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(10), "{took:?}");
    assert_eq!(map.producer_pos(), page as u64);

    // --wait without a limit waits until stopped; meanwhile it is the map's one
    // producer: a second write is refused, naming it.
    let (mut first, _out, err) = spawn(&["write", &id, "--wait", input.to_str().unwrap()]);
    // Once it holds the map's producer lock (its abstract socket is bound): a second
    // write started before that would take the lock itself and refuse the first.
    let lock = format!("@ringtrace-bpf-user-map-{}", map.id);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string("/proc/net/unix").unwrap().lines().any(|l| l.ends_with(&lock)) {
        assert!(Instant::now() < deadline, "write --wait never took the map's producer lock");
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = run(&["write", &id, "--drop", input.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains(&format!("already has a producer (pid {}, uid 0)", first.0.id())), "{}", o.stderr);
    assert_eq!(interrupt(&mut first, "write --wait"), 130);
    let said = std::fs::read_to_string(err).unwrap();
    assert!(said.contains("wrote 0 record(s) (0 bytes); stopped by SIGINT"), "{said}");
}

#[test]
fn write_refuses_a_ring_buffer_map() {
    let Some(_fs) = setup() else { return };
    let (map, _prog) = ring(8);
    let id = format!("bpf-id:{}", map.id().unwrap());
    let o = run(&["write", &id, "/dev/null"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(o.stderr.starts_with(&format!("ringtrace: error: {id}: BPF map ")), "{}", o.stderr);
    assert!(o.stderr.contains("is a ring buffer map (BPF_MAP_TYPE_RINGBUF): the kernel writes those"), "{}", o.stderr);
    let o = run(&["write", "bpf-id:4294967295", "/dev/null"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("no BPF map has id 4294967295"), "{}", o.stderr);
}
