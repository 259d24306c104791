//! Ring and channel files on a filesystem that fills up: a ring file's space is
//! reserved when it is made (so a full filesystem is an error naming the file and the
//! size, and no half-made file stays behind), a ring that was made keeps working when
//! the filesystem fills afterwards, and a sparse ring file (made by hand) is reserved or
//! refused when attached. Never a SIGBUS: every case runs in a child process (this test
//! binary run again, `common::spawn_child`) whose exit status must be a code, not a
//! signal.
//!
//! Each test mounts a small private tmpfs (`ringtrace_fixtures::Tmpfs`), which needs
//! root: without it they skip (or fail, where `RINGTRACE_REQUIRE` lists `root`).
#![cfg(not(loom))]

mod common;

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ringtrace::clock::Monotonic;
use ringtrace::config::Discard;
use ringtrace::error::with_causes;
use ringtrace::{Channel, FlightRecorder, MpscRing, Wakeup};
use ringtrace_fixtures::{have_root, Tmpfs};

/// The child side: not a test (see `common::child_role`).
#[test]
#[ignore = "a child role: run by this binary's multi-process tests (common::spawn_child)"]
fn child() {
    let (role, args) = common::child_role();
    let dir = PathBuf::from(&args[0]);
    match role.as_str() {
        "create-too-big" => create_too_big(&dir),
        "fill-after-create" => fill_after_create(&dir),
        "attach-sparse" => attach_sparse(&dir.join("sparse.ring")),
        "claim-until-full" => claim_until_full(&dir.join("slots.chan")),
        "attach-sparse-channel" => attach_sparse_channel(&dir.join("sparse.chan")),
        other => panic!("unknown child role {other}"),
    }
}

/// Runs `role` in a child and returns what it printed, after checking that it exited
/// with status 0 (a panic is 101; a SIGBUS is no exit code at all).
fn run(role: &str, dir: &Path) -> String {
    let mut child = common::spawn_child(role, &[dir.to_str().unwrap()]);
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the {role} child did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert_eq!(status.signal(), None, "the {role} child was killed by signal {:?}; it said:\n{out}", status.signal());
    assert_eq!(status.code(), Some(0), "the {role} child failed; it said:\n{out}");
    out
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

fn say(line: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

fn create_too_big(dir: &Path) {
    let ring = dir.join("big.ring");
    match MpscRing::builder(1 << 20).create(&ring) {
        Ok(_) => panic!("a ring of 1 MiB was made on a tmpfs of 64 KiB"),
        Err(e) => say(format!("RING {}", with_causes(&e))),
    }
    let over = dir.join("big.rec");
    match FlightRecorder::builder(1 << 20).create(&over) {
        Ok(_) => panic!("a flight recorder of 1 MiB was made on a tmpfs of 64 KiB"),
        Err(e) => say(format!("RECORDER {}", with_causes(&e))),
    }
    let chan = dir.join("big.chan");
    match Channel::<Discard, Monotonic>::builder(16 << 10).max_producers(8).create(&chan, Monotonic) {
        Ok(_) => panic!("a channel file of 8 rings of 16 KiB was made on a tmpfs of 64 KiB"),
        Err(e) => say(format!("CHANNEL {}", with_causes(&e))),
    }
}

#[test]
fn a_ring_file_bigger_than_its_filesystem_is_an_error_naming_it_and_leaves_no_file() {
    if !have_root("mount a small tmpfs") {
        return;
    }
    let fs = Tmpfs::mount(64 << 10).unwrap();
    let out = run("create-too-big", fs.dir());
    for (tag, name) in [("RING", "big.ring"), ("RECORDER", "big.rec")] {
        let line = out.lines().find(|l| l.starts_with(tag)).unwrap_or_else(|| panic!("no {tag} line in {out}"));
        let path = fs.path(name);
        // The whole file: the 1 MiB data area and the control block's pages.
        let kib: u64 = line
            .split_once("reserving ")
            .and_then(|(_, rest)| {
                rest.strip_suffix(&format!(" KiB for {}: No space left on device (os error 28)", path.display()))
            })
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| {
                panic!("not \"reserving N KiB for {}: No space left on device\": {line}", path.display())
            });
        assert!((1028..=1024 + 64).contains(&kib), "{line}");
    }
    let line = out.lines().find(|l| l.starts_with("CHANNEL")).unwrap_or_else(|| panic!("no CHANNEL line in {out}"));
    assert!(line.contains(&format!("for {}", fs.path("big.chan").display())), "{line}");
    assert!(line.contains("No space left on device"), "{line}");
    assert_eq!(names(fs.dir()), Vec::<String>::new(), "a failed create left a file behind");
    assert!(fs.free().unwrap() >= 60 << 10, "a failed create left space taken: {} bytes free", fs.free().unwrap());
}

/// Writes records of 1000 bytes into `ring` until it is full, then consumes them all,
/// `laps` times over; returns how many records went through.
fn laps(ring: &MpscRing, laps: usize) -> u64 {
    let mut producer = ring.producer().unwrap();
    let mut consumer = ring.consumer().unwrap();
    let record = [0xa5_u8; 1000];
    let mut total = 0;
    for _ in 0..laps {
        let mut wrote = 0;
        while producer.output(&record, Wakeup::NoWakeup).is_ok() {
            wrote += 1;
        }
        let read = consumer.consume(|r: &[u8]| assert_eq!(r, &record[..])).unwrap();
        assert_eq!(read as u64, wrote, "records written and read differ");
        total += wrote;
    }
    total
}

fn fill_after_create(dir: &Path) {
    let path = dir.join("fits.ring");
    let ring = MpscRing::builder(64 << 10).create(&path).unwrap();
    let chan_path = dir.join("fits.chan");
    let chan = Channel::<Discard, Monotonic>::builder(16 << 10).max_producers(2).create(&chan_path, Monotonic).unwrap();
    // A channel slot's pages are reserved when a producer takes it: before the fill.
    let mut producer = chan.producer().unwrap();
    let filler = ringtrace_fixtures::Tmpfs::fill_dir(dir).unwrap();
    // The other slot has no room now: its claim is an error, not a SIGBUS later.
    let err = chan.producer().expect_err("a slot was claimed on a full filesystem");
    assert!(matches!(err, ringtrace::Error::NoSpace { .. }), "{}", with_causes(&err));
    say(format!("FULL {}", filler.display()));
    // Every page of the data area, written and zeroed again, several laps round.
    let n = laps(&ring, 4);
    assert!(n > 4 * 60, "only {n} records went through a ring of 64 KiB in 4 laps");
    // Another process's view of the file: attaching maps it again.
    let again = MpscRing::open(&path).unwrap();
    drop(ring);
    let n = laps(&again, 2);
    assert!(n > 2 * 60, "{n}");
    // The channel's rings too, through its writer and reader.
    let record = [0x3c_u8; 500];
    let mut reader = chan.reader().unwrap();
    for _ in 0..4 {
        let mut wrote = 0;
        while producer.output(&record, Wakeup::NoWakeup).is_ok() {
            wrote += 1;
        }
        let read = reader.drain(|_| Ok::<_, std::convert::Infallible>(())).unwrap();
        assert_eq!(read, wrote);
    }
    say("LAPS DONE");
}

#[test]
fn a_ring_made_before_its_filesystem_filled_is_written_and_consumed_whole() {
    if !have_root("mount a small tmpfs") {
        return;
    }
    let fs = Tmpfs::mount(256 << 10).unwrap();
    let out = run("fill-after-create", fs.dir());
    assert!(out.contains("FULL") && out.contains("LAPS DONE"), "{out}");
}

/// A ring file made as sparse as it can be, by hand: the control block of a real ring,
/// then holes to the file's length (`truncate`), on a filesystem filled afterwards.
fn make_sparse(fs: &Tmpfs, capacity: u64) -> PathBuf {
    let elsewhere = common::temp_file("sparse-source", "ring");
    let ring = MpscRing::builder(capacity).create(&elsewhere).unwrap();
    drop(ring);
    let bytes = std::fs::read(&elsewhere).unwrap();
    std::fs::remove_file(&elsewhere).unwrap();
    let page = rustix::param::page_size();
    let path = fs.path("sparse.ring");
    let mut file = std::fs::File::options().write(true).create_new(true).open(&path).unwrap();
    file.write_all(&bytes[..page]).unwrap();
    file.set_len(bytes.len() as u64).unwrap();
    path
}

fn attach_sparse(path: &Path) {
    match MpscRing::open(path) {
        // Reserved at attach: the whole ring is usable.
        Ok(ring) => say(format!("RESERVED {}", laps(&ring, 3))),
        Err(e) => say(format!("REFUSED {}", with_causes(&e))),
    }
}

#[test]
fn a_sparse_ring_file_on_a_full_filesystem_is_refused_not_a_sigbus() {
    if !have_root("mount a small tmpfs") {
        return;
    }
    let fs = Tmpfs::mount(128 << 10).unwrap();
    let path = make_sparse(&fs, 64 << 10);
    let filler = fs.fill().unwrap();
    let out = run("attach-sparse", fs.dir());
    let line = out.lines().find(|l| l.starts_with("REFUSED")).unwrap_or_else(|| panic!("not refused: {out}"));
    assert!(line.contains(&format!("for {}", path.display())), "{line}");
    assert!(line.contains("No space left on device"), "{line}");
    // With room again, attaching reserves the holes and the whole ring works.
    std::fs::remove_file(filler).unwrap();
    let out = run("attach-sparse", fs.dir());
    assert!(out.lines().any(|l| l.starts_with("RESERVED")), "{out}");
    let st = rustix::fs::stat(&path).unwrap();
    assert!(st.st_blocks as u64 * 512 >= st.st_size as u64, "attaching left holes: {st:?}");
}

/// Bytes `fd`'s file has blocks for, and its size.
fn backed(fd: impl std::os::fd::AsFd) -> (u64, u64) {
    let st = rustix::fs::fstat(fd).unwrap();
    (st.st_blocks as u64 * 512, st.st_size as u64)
}

#[test]
fn every_new_ring_file_and_memfd_has_its_pages_reserved() {
    let path = common::temp_file("reserved", "ring");
    let ring = MpscRing::builder(1 << 20).create(&path).unwrap();
    let (blocks, size) = backed(&ring);
    assert!(blocks >= size, "a ring file of {size} bytes has blocks for {blocks}");
    std::fs::remove_file(&path).unwrap();
    // A channel file: its header page and each slot's head (control block and first
    // data page) at once, a slot's whole image when a producer takes it.
    let chan_path = common::temp_file("reserved", "chan");
    let chan = Channel::<Discard, Monotonic>::builder(64 << 10).max_producers(4).create(&chan_path, Monotonic).unwrap();
    let file = std::fs::File::open(&chan_path).unwrap();
    let (page, head, image) = slot_sizes(64 << 10);
    let (blocks, size) = backed(&file);
    assert_eq!(size, page + 4 * image);
    assert!((page + 4 * head..size).contains(&blocks), "a new channel file of {size} bytes has blocks for {blocks}");
    let producer = chan.producer().unwrap();
    let (blocks, _) = backed(&file);
    assert!(blocks >= page + image + 3 * head && blocks < size, "one slot claimed: blocks for {blocks} of {size}");
    drop(producer);
    drop(chan);
    std::fs::remove_file(&chan_path).unwrap();
    for ring in [MpscRing::builder(1 << 20).build_shared().unwrap(), MpscRing::builder(1 << 20).build().unwrap()] {
        let (blocks, size) = backed(&ring);
        assert!(blocks >= size, "a memfd of {size} bytes has blocks for {blocks}");
    }
}

#[test]
fn a_sparse_ring_file_that_cannot_be_reserved_is_refused() {
    // A descriptor open for reading only cannot reserve (fallocate: EBADF): the holes
    // are found and the file refused, before anything is mapped.
    let path = common::temp_file("sparse-readonly", "ring");
    let real = MpscRing::builder(64 << 10).create(&path).unwrap();
    drop(real);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut file = std::fs::File::create_new(&path).unwrap();
    file.write_all(&bytes[..rustix::param::page_size()]).unwrap();
    file.set_len(bytes.len() as u64).unwrap();
    drop(file);
    let fd = std::fs::File::open(&path).unwrap();
    let err = MpscRing::from_fd(fd.into(), ringtrace::Access::Consumer).expect_err("a sparse file was attached");
    assert!(matches!(err, ringtrace::Error::Sparse { .. }), "{}", with_causes(&err));
    let line = with_causes(&err);
    assert!(line.contains(&path.display().to_string()) && line.contains("holes"), "{line}");
    // The same file without holes passes that check (and fails the next: a read-only
    // descriptor cannot map the control block writable).
    std::fs::write(&path, &bytes).unwrap();
    let fd = std::fs::File::open(&path).unwrap();
    let err = MpscRing::from_fd(fd.into(), ringtrace::Access::Consumer).expect_err("a read-only descriptor mapped");
    assert!(!matches!(err, ringtrace::Error::Sparse { .. }), "{}", with_causes(&err));
    std::fs::remove_file(&path).unwrap();
}

/// A channel slot's sizes for rings of `capacity` bytes: the page (the channel header's
/// too), the head reserved at create (control block and the data area's first page),
/// the whole ring image.
fn slot_sizes(capacity: u64) -> (u64, u64, u64) {
    let page = rustix::param::page_size() as u64;
    let control = (ringtrace::format::control::CONTROL_SIZE as u64).next_multiple_of(page);
    (page, control + page, control + capacity)
}

#[test]
fn a_channel_file_of_many_slots_takes_the_space_of_the_slots_its_producers_use() {
    // 4096 slots of 1 MiB: a file of 4 GiB, of which only the header, the slots' heads
    // and the two slots written hold blocks, before and after another attach.
    let path = common::temp_file("per-slot", "chan");
    let chan = Channel::<Discard, Monotonic>::builder(1 << 20).max_producers(4096).create(&path, Monotonic).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let (page, head, image) = slot_sizes(1 << 20);
    let (blocks, size) = backed(&file);
    assert_eq!(size, page + 4096 * image);
    assert!(blocks < 64 << 20, "a new channel file of 4096 slots has blocks for {} MiB", blocks >> 20);
    assert!(blocks >= page + 4096 * head, "the slots' heads are not reserved: {blocks} bytes");
    let record = [0x7e_u8; 1000];
    let mut written = 0;
    for _ in 0..2 {
        let mut p = chan.producer().unwrap();
        while p.output(&record, Wakeup::NoWakeup).is_ok() {
            written += 1;
        }
    }
    assert!(written > 2 * 1000, "{written}");
    let (blocks, _) = backed(&file);
    assert!(blocks >= page + 4096 * head + 2 * (image - head), "the claimed slots are not reserved whole: {blocks}");
    assert!(blocks < 64 << 20, "written by 2 producers: blocks for {} MiB", blocks >> 20);
    // Another handle (as another process attaches): the written slots are reserved
    // again (they are already), the others are not.
    let again = Channel::<Discard, Monotonic>::open(&path).unwrap();
    let (blocks, _) = backed(&file);
    assert!(blocks < 64 << 20, "after another attach: blocks for {} MiB", blocks >> 20);
    let read = again.reader().unwrap().drain(|r| {
        assert_eq!(r.data, &record[..]);
        Ok::<_, std::convert::Infallible>(())
    });
    assert_eq!(read.unwrap(), written);
    let (blocks, _) = backed(&file);
    assert!(blocks < 64 << 20, "after a reader: blocks for {} MiB", blocks >> 20);
    drop((chan, again));
    std::fs::remove_file(&path).unwrap();
}

/// Claims slots of a channel file that does not fit whole (made on a tmpfs of 256
/// KiB), writing each slot's ring full, until a claim fails; then reads every record
/// through another handle, on the full filesystem.
fn claim_until_full(path: &Path) {
    let chan = Channel::<Discard, Monotonic>::builder(64 << 10).max_producers(8).create(path, Monotonic).unwrap();
    say("CREATED");
    let record = [0x42_u8; 1000];
    let (mut producers, mut written) = (Vec::new(), 0u64);
    let err = loop {
        match chan.producer() {
            Ok(mut p) => {
                // Every page of the slot's ring.
                while p.output(&record, Wakeup::NoWakeup).is_ok() {
                    written += 1;
                }
                producers.push(p);
            }
            Err(e) => break e,
        }
    };
    assert!(matches!(err, ringtrace::Error::NoSpace { .. }), "{}", with_causes(&err));
    say(format!("CLAIMS {}", producers.len()));
    say(format!("REFUSED {}", with_causes(&err)));
    // A claim refused leaves its slot free: the channel still counts only the claims made.
    let live = chan.producer_stats().iter().filter(|s| !s.exited).count();
    assert_eq!(live, producers.len());
    let other = Channel::<Discard, Monotonic>::open(path).unwrap();
    let read = other.reader().unwrap().drain(|r| {
        assert_eq!(r.data, &record[..]);
        Ok::<_, std::convert::Infallible>(())
    });
    assert_eq!(read.unwrap() as u64, written);
    say(format!("READ {written}"));
}

#[test]
fn a_channel_file_bigger_than_its_filesystem_is_made_and_a_claim_past_the_room_is_an_error() {
    if !have_root("mount a small tmpfs") {
        return;
    }
    // 8 slots of 72 KiB images: 580 KiB whole, 100 KiB of header and heads.
    let fs = Tmpfs::mount(256 << 10).unwrap();
    let out = run("claim-until-full", fs.dir());
    assert!(out.contains("CREATED"), "{out}");
    let claims: usize = out.lines().find_map(|l| l.strip_prefix("CLAIMS ")?.parse().ok()).unwrap();
    assert!((1..8).contains(&claims), "{out}");
    let line = out.lines().find(|l| l.starts_with("REFUSED")).unwrap();
    let path = fs.path("slots.chan");
    assert!(line.contains(&format!("for {}: No space left on device", path.display())), "{line}");
    assert!(out.lines().any(|l| l.starts_with("READ ")), "{out}");
}

/// A channel file of 8 slots of 64 KiB whose slot 0 holds 3 records, made sparse
/// where a version that did not reserve would have left it so: every data page but
/// slot 0's first.
fn make_sparse_channel(path: &Path) {
    let chan = Channel::<Discard, Monotonic>::builder(64 << 10).max_producers(8).create(path, Monotonic).unwrap();
    let mut p = chan.producer().unwrap();
    for i in 0..3u8 {
        p.output(&[i; 100], Wakeup::NoWakeup).unwrap();
    }
    drop((p, chan));
    punch_channel(path);
}

/// Punches holes over every data page of the channel file at `path` but slot 0's first.
fn punch_channel(path: &Path) {
    let header = *ringtrace::inspect::channel::ChannelFile::open(path).unwrap().header();
    let (page, head, image) = slot_sizes(header.capacity);
    let file = std::fs::File::options().write(true).open(path).unwrap();
    for i in 0..header.slots {
        let from = header.ring_offset(i) + if i == 0 { head } else { head - page };
        let end = header.ring_offset(i) + image;
        let flags = rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
        rustix::fs::fallocate(&file, flags, from, end - from).unwrap();
    }
}

fn attach_sparse_channel(path: &Path) {
    match Channel::<Discard, Monotonic>::open(path) {
        Ok(chan) => {
            let mut seen = Vec::new();
            chan.reader()
                .unwrap()
                .drain(|r| {
                    seen.push(r.data.to_vec());
                    Ok::<_, std::convert::Infallible>(())
                })
                .unwrap();
            assert_eq!(seen, (0..3u8).map(|i| vec![i; 100]).collect::<Vec<_>>());
            say(format!("READ {}", seen.len()));
        }
        Err(e) => say(format!("REFUSED {}", with_causes(&e))),
    }
}

#[test]
fn a_sparse_channel_file_is_reserved_where_written_and_refused_on_a_full_filesystem() {
    if !have_root("mount a small tmpfs") {
        return;
    }
    let fs = Tmpfs::mount(1 << 20).unwrap();
    let path = fs.path("sparse.chan");
    make_sparse_channel(&path);
    // Room for the written slot's pages and the others' heads, not for every slot.
    let filler = fs.fill().unwrap();
    let len = std::fs::metadata(&filler).unwrap().len();
    std::fs::File::options().write(true).open(&filler).unwrap().set_len(len.saturating_sub(160 << 10)).unwrap();
    let out = run("attach-sparse-channel", fs.dir());
    assert!(out.lines().any(|l| l == "READ 3"), "not attached with room for the slots written: {out}");
    // Sparse again, on a full filesystem: refused (the written slot cannot be
    // reserved), never a SIGBUS.
    punch_channel(&path);
    let _full = fs.fill().unwrap();
    let out = run("attach-sparse-channel", fs.dir());
    let line = out.lines().find(|l| l.starts_with("REFUSED")).unwrap_or_else(|| panic!("not refused: {out}"));
    assert!(line.contains(&format!("for {}: No space left on device", path.display())), "{line}");
}
