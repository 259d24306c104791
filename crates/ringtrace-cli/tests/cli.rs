//! Runs the `ringtrace` binary on good, bad and hostile ring files: exit status 0, 1
//! (one line `ringtrace: error: ...` on stderr) or 2 (usage), never a signal or a hang.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use ringtrace::channel::ChannelProducer;
use ringtrace::clock::{Monotonic, NoClock};
use ringtrace::config::{Discard, Overwrite};
use ringtrace::inspect::image::{self, ImageBuilder};
use ringtrace::inspect::{RingKind, RingMode};
use ringtrace::{Channel, Wakeup};

mod common;

use common::{code, fails, run, temp, Guard, BIN, DEADLINE};

fn write_image(name: &str, img: &[u8]) -> String {
    let path = temp(name);
    std::fs::write(&path, img).unwrap();
    path.to_str().unwrap().to_owned()
}

fn valid() -> Vec<u8> {
    ImageBuilder::new(4096, RingMode::Overwrite)
        .start(4096 - 24)
        .record(b"first")
        .record(b"second\n")
        .pid(77)
        .record(b"\xff\x00bin")
        .build()
}

#[test]
fn missing_file_directory_fifo_and_devices_fail_cleanly() {
    fails("/nonexistent/ring", "cannot open /nonexistent/ring: No such file or directory");
    let dir = temp("dir");
    std::fs::create_dir(&dir).unwrap();
    fails(dir.to_str().unwrap(), "is a directory, not a regular file");
    let fifo = temp("fifo");
    let ok = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(ok.success());
    fails(fifo.to_str().unwrap(), "is a FIFO, not a regular file");
    fails("/dev/zero", "/dev/zero is a character device, not a regular file");
    fails("/dev/null", "is a character device");
}

#[test]
fn bad_files_fail_with_one_line() {
    // Files of no ringtrace kind are said to be that, whatever their name says.
    fails(&write_image("empty.rtt", &[]), "not a ringtrace file (ring, channel, snapshot or trace): the file is empty");
    fails(&write_image("short", b"hello\n"), "not a ringtrace file (ring, channel, snapshot or trace): it is 6 bytes");
    let random: Vec<u8> = (0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    fails(
        &write_image("random", &random),
        "not a ringtrace file (ring, channel, snapshot or trace): it is 20000 bytes",
    );
    let mut img = valid();
    img[..8].copy_from_slice(b"NOTARING");
    fails(&write_image("magic", &img), "starts with 4e 4f 54 41 52 49 4e 47 (\"NOTARING\")");
    // A ring file's magic and nothing after it: a ring file cut short.
    fails(&write_image("cut", b"RINGTRC\0"), "ring file is 8 bytes, the header alone needs 8192");
    let mut img = valid();
    image::set_u32(&mut img, image::VERSION_AT, 3);
    fails(&write_image("version", &img), "layout version 3 is not supported (this ringtrace reads version 6");
    let mut img = valid();
    img.truncate(10_000);
    fails(&write_image("truncated", &img), "file is 10000 bytes but capacity 4096 needs 12288 (truncated?)");
    let mut img = valid();
    image::set_u64(&mut img, image::OVER_POS_AT, 1 << 40);
    fails(&write_image("over", &img), "positions are inconsistent: overwrite 1099511627776 is past producer");
    let mut img = valid();
    image::set_u64(&mut img, image::PRODUCER_POS_AT, u64::MAX - 7);
    fails(&write_image("prod", &img), "positions are inconsistent: producer 18446744073709551608 is more than");
}

#[test]
fn valid_image_reads() {
    let path = write_image("valid", &valid());
    let o = run(&["tail", &path]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    assert_eq!(o.stdout, "first\nsecond\\n\n\\xff\\u{0}bin\n");
    let o = run(&["tail", "-n", "1", "--format", "json", &path]);
    assert_eq!(o.stdout, "{\"pos\":4104,\"pid\":77,\"len\":5,\"hex\":\"ff0062696e\"}\n");
    let o = run(&["snapshot", "--reverse", "--format", "hex", &path]);
    assert_eq!(o.stdout, "ff0062696e\n7365636f6e640a\n6669727374\n");
    let out = temp("snap.txt");
    let o = run(&["snapshot", &path, "-o", out.to_str().unwrap()]);
    assert_eq!((o.code, o.stdout.as_str()), (0, ""));
    assert_eq!(std::fs::read_to_string(out).unwrap(), "first\nsecond\\n\n\\xff\\u{0}bin\n");
    let o = run(&["stat", &path]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for want in ["mode          overwrite", "capacity      4096 bytes", "committed 3", "positions 4072..4120"] {
        assert!(o.stdout.contains(want), "{want}: {}", o.stdout);
    }
    let o = run(&["stat", "--format", "json", &path]);
    assert!(o.stdout.starts_with("{\"path\":") && o.stdout.contains("\"committed\":3,"), "{}", o.stdout);
}

#[test]
fn corrupt_records_are_a_warning() {
    let mut img = ImageBuilder::new(4096, RingMode::Discard).record(b"ok").record(b"bad").build();
    image::set_u64(&mut img, image::DATA_AT + 16, 0x0000_0001_0000_1000u64.to_le());
    let o = run(&["snapshot", &write_image("corrupt", &img)]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "ok\n"));
    assert!(o.stderr.contains("warning: corrupt record header") && o.stderr.lines().count() == 1);
}

#[test]
fn usage_errors_exit_2() {
    for args in [&["tail"][..], &["stat", "a", "b"], &["tail", "--format", "xml", "x"], &["nope"], &[]] {
        let o = run(args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
    }
}

#[test]
fn broken_pipe_exits_quietly() {
    let mut b = ImageBuilder::new(1 << 16, RingMode::Discard);
    for i in 0..500u32 {
        b = b.record(&[i as u8; 100]);
    }
    let path = write_image("big", &b.build());
    let mut child = Command::new(BIN)
        .args(["snapshot", "--format", "hex", &path])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap(); // closes the pipe
    assert_eq!(line.len(), 201);
    let mut stderr = child.stderr.take().unwrap();
    assert_eq!(code(Guard(child).wait(DEADLINE, "snapshot | head -1"), "snapshot | head -1"), 0);
    let mut err = String::new();
    stderr.read_to_string(&mut err).unwrap();
    assert_eq!(err, "");
}

#[test]
fn follow_prints_new_records_and_losses() {
    let path = temp("live.ring");
    let img = |b: ImageBuilder| std::fs::write(&path, b.build()).unwrap();
    let base = || ImageBuilder::new(4096, RingMode::Overwrite).record(b"old");
    img(base());
    let mut child = Command::new(BIN)
        .args(["tail", "--follow", "--format", "json", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("\"data\":\"old\""), "{first}");
    // A new record committed (the file rewritten in place with one more).
    std::fs::write(&path, base().record(b"new").build()).unwrap();
    let next = lines.next().unwrap().unwrap();
    assert!(next.contains("\"pos\":16") && next.contains("\"data\":\"new\""), "{next}");
    // The ring moves far ahead: what follow missed is reported on stderr.
    let mut far = ImageBuilder::new(4096, RingMode::Overwrite).start(64 * 100);
    far = far.record(b"far");
    std::fs::write(&path, far.build()).unwrap();
    let next = lines.next().unwrap().unwrap();
    assert!(next.contains("\"data\":\"far\""), "{next}");
    child.kill().unwrap();
    child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    // The image builder says 100 records were retired before 6400; 2 were seen.
    assert_eq!(err, "ringtrace: 98 record(s) were overwritten before they could be printed\n");
}

/// A channel file written by two producers (slots 0 and 1 of 3), 6 records each,
/// interleaved ("a0" b"b0" "a1" ...); the producers stay attached.
fn discard_channel() -> (String, Channel<Discard, Monotonic>, Vec<ChannelProducer<Discard, Monotonic>>) {
    let path = temp("d.chan");
    let ch = Channel::<Discard, Monotonic>::builder(4096).max_producers(3).create(&path, Monotonic).unwrap();
    let mut producers = vec![ch.producer().unwrap(), ch.producer().unwrap()];
    for i in 0..6 {
        for (p, name) in producers.iter_mut().zip(["a", "b"]) {
            p.output(format!("{name}{i}").as_bytes(), Wakeup::Default).unwrap();
        }
    }
    (path.to_str().unwrap().to_owned(), ch, producers)
}

/// Parses a channel text line: slot, timestamp, payload.
fn channel_line(line: &str) -> (u32, u64, String) {
    let mut parts = line.splitn(3, ' ');
    let slot = parts.next().unwrap().parse().unwrap();
    let ts = parts.next().unwrap().parse().unwrap();
    (slot, ts, parts.next().unwrap().to_owned())
}

#[test]
fn channel_stat_snapshot_and_tail() {
    let (path, _ch, _producers) = discard_channel();
    let me = std::process::id().to_string();
    let o = run(&["stat", &path]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    for want in [
        "channel file  ",
        "layout        channel version 2,",
        "mode          discard",
        "clock         mono",
        "slots         3 single-producer",
    ] {
        assert!(o.stdout.contains(want), "{want}: {}", o.stdout);
    }
    let slot_line = |i: &str| o.stdout.lines().find(|l| l.split_whitespace().next() == Some(i)).unwrap().to_owned();
    let cols = |l: String| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(cols(slot_line("0"))[1..], [&*me, "6", "0", "0", "0", "6"]);
    assert_eq!(cols(slot_line("1"))[1..], [&*me, "6", "0", "0", "0", "6"]);
    assert_eq!(cols(slot_line("2"))[1..], ["none", "0", "0", "0", "0", "0"]);
    assert_eq!(cols(slot_line("totals"))[1..], ["2", "live", "12", "0", "0", "0", "12"]);

    let o = run(&["stat", "--format", "json", &path]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    let j = &o.stdout;
    assert!(j.starts_with("{\"path\":") && j.ends_with("}\n") && j.lines().count() == 1, "{j}");
    for want in [
        "\"kind\":\"channel\",\"version\":2,".to_owned(),
        "\"mode\":\"discard\",\"clock\":\"mono\"".to_owned(),
        "\"slot_count\":3,\"capacity\":4096".to_owned(),
        format!("{{\"slot\":0,\"producer_pid\":{me},\"producer_alive\":true,"),
        format!("{{\"slot\":1,\"producer_pid\":{me},\"producer_alive\":true,"),
        "{\"slot\":2,\"producer_pid\":0,\"producer_alive\":false,".to_owned(),
        "\"totals\":{\"committed\":12,\"lost\":0,\"overwritten\":0,\"dead\":0,\"held\":12,".to_owned(),
    ] {
        assert!(j.contains(&want), "{want}: {j}");
    }

    let o = run(&["snapshot", &path]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    let lines: Vec<_> = o.stdout.lines().map(channel_line).collect();
    assert_eq!(lines.len(), 12, "{}", o.stdout);
    assert!(lines.windows(2).all(|w| w[0].1 <= w[1].1), "not in ts order: {}", o.stdout);
    for (slot, ts, payload) in &lines {
        assert!(*ts > 0);
        assert_eq!(*slot, if payload.starts_with('a') { 0 } else { 1 }, "{}", o.stdout);
    }
    for name in ["a", "b"] {
        let of: Vec<_> = lines.iter().filter(|l| l.2.starts_with(name)).map(|l| l.2.clone()).collect();
        assert_eq!(of, (0..6).map(|i| format!("{name}{i}")).collect::<Vec<_>>());
    }
    let o_rev = run(&["snapshot", "--reverse", &path]);
    assert_eq!(o_rev.stdout.lines().rev().collect::<Vec<_>>(), o.stdout.lines().collect::<Vec<_>>());
    let t = run(&["tail", "-n", "3", &path]);
    assert_eq!((t.code, t.stderr.as_str()), (0, ""));
    assert_eq!(t.stdout.lines().collect::<Vec<_>>(), o.stdout.lines().skip(9).collect::<Vec<_>>());

    let j = run(&["snapshot", "--format", "json", &path]);
    let first = j.stdout.lines().next().unwrap();
    let (slot, ts, payload) = &lines[0];
    let want = format!("{{\"slot\":{slot},\"ts\":\"{ts}\",\"pos\":0,\"pid\":{me},\"len\":2,\"data\":\"{payload}\"}}");
    assert_eq!(first, want);
    let h = run(&["tail", "-n", "1", "--format", "hex", &path]);
    let (slot, ts, payload) = &lines[11];
    let hex: String = payload.bytes().map(|b| format!("{b:02x}")).collect();
    assert_eq!(h.stdout, format!("{slot} {ts} {hex}\n"));
}

/// A channel file of layout version 1 (made before the bell line) reads as version 2:
/// the same records, its version printed.
#[test]
fn a_version_1_channel_file_still_reads() {
    let (path, _ch, _producers) = discard_channel();
    let v2 = run(&["snapshot", &path]);
    let mut img = std::fs::read(&path).unwrap();
    img[8..12].copy_from_slice(&1u32.to_ne_bytes());
    let old = write_image("v1.chan", &img);
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let o = run(&["stat", &old]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    assert!(o.stdout.contains("layout        channel version 1,"), "{}", o.stdout);
    assert!(run(&["stat", "--format", "json", &old]).stdout.contains("\"version\":1,"));
    let v1 = run(&["snapshot", &old]);
    assert_eq!((v1.code, v1.stderr.as_str()), (0, ""));
    assert_eq!(v1.stdout, v2.stdout);
    assert_eq!(v1.stdout.lines().count(), 12);
    let t = run(&["tail", "-n", "3", &old]);
    assert_eq!((t.code, t.stdout.lines().count()), (0, 3), "{}", t.stderr);
}

#[test]
fn overwrite_channel_holds_the_newest() {
    let path = temp("o.chan");
    let ch = Channel::<Overwrite, Monotonic>::builder(4096).max_producers(2).create(&path, Monotonic).unwrap();
    let mut p = ch.producer().unwrap();
    for i in 0..500 {
        p.output(format!("record {i:03} of the flight recorder").as_bytes(), Wakeup::Default).unwrap();
    }
    drop(p);
    let path = path.to_str().unwrap();
    let o = run(&["stat", "--format", "json", path]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    let totals = &o.stdout[o.stdout.find("\"totals\":").unwrap()..];
    assert!(totals.starts_with("\"totals\":{\"committed\":500,\"lost\":0,\"overwritten\":"), "{totals}");
    let field = |name: &str| -> usize {
        let v = totals.split(&format!("\"{name}\":")).nth(1).unwrap();
        v.split([',', '}']).next().unwrap().parse().unwrap()
    };
    let (held, overwritten) = (field("held"), field("overwritten"));
    assert!(held > 10 && held < 500 && held + overwritten == 500, "{totals}");
    assert!(o.stdout.contains("{\"slot\":0,\"producer_pid\":0,\"producer_alive\":false,"), "{}", o.stdout);
    let o = run(&["stat", path]);
    assert!(o.stdout.contains("mode          overwrite") && o.stdout.contains(" held\n"), "{}", o.stdout);

    let o = run(&["snapshot", path]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    let lines: Vec<_> = o.stdout.lines().map(channel_line).collect();
    assert_eq!(lines.len(), held);
    assert!(lines.windows(2).all(|w| w[0].1 <= w[1].1));
    assert!(lines.iter().all(|l| l.0 == 0));
    assert_eq!(lines.last().unwrap().2, "record 499 of the flight recorder");
    let t = run(&["tail", "-n", "3", path]);
    let tail: Vec<_> = t.stdout.lines().map(|l| channel_line(l).2).collect();
    assert_eq!(tail, (497..500).map(|i| format!("record {i} of the flight recorder")).collect::<Vec<_>>());
}

#[test]
fn unstamped_channel_lists_slot_by_slot() {
    let path = temp("n.chan");
    let ch = Channel::<Discard, NoClock>::builder(4096).max_producers(2).create(&path, NoClock).unwrap();
    let mut a = ch.producer().unwrap();
    let mut b = ch.producer().unwrap();
    b.output(b"b0", Wakeup::Default).unwrap();
    a.output(b"a0", Wakeup::Default).unwrap();
    b.output(b"", Wakeup::Default).unwrap();
    let o = run(&["snapshot", path.to_str().unwrap()]);
    assert_eq!((o.code, o.stderr.as_str(), o.stdout.as_str()), (0, "", "0 - a0\n1 - b0\n1 - \n"));
    let o = run(&["tail", "-n", "1", "--format", "json", path.to_str().unwrap()]);
    assert!(o.stdout.starts_with("{\"slot\":1,\"ts\":null,\"pos\":16,"), "{}", o.stdout);
}

#[test]
fn bad_channel_files_fail_with_one_line() {
    let (path, _ch, _producers) = discard_channel();
    let good = std::fs::read(&path).unwrap();
    // The channel header's first ring offset and image length (native-endian u64s).
    let word = |at: usize| u64::from_ne_bytes(good[at..at + 8].try_into().unwrap()) as usize;
    let ring_at = |slot: usize| word(40) + slot * word(32);
    let write = |name: &str, img: &[u8]| {
        use std::os::unix::fs::PermissionsExt;
        let p = write_image(name, img);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p
    };
    let mut img = good.clone();
    img[7] ^= 3;
    fails(&write("magic.chan", &img), "channel file format 2 is not supported");
    let mut img = good.clone();
    img[8..12].copy_from_slice(&3u32.to_ne_bytes());
    fails(&write("version.chan", &img), "invalid channel header: channel version is 3, expected 1 or 2");
    let mut img = good.clone();
    img[20..24].copy_from_slice(&0u32.to_ne_bytes());
    fails(&write("slots.chan", &img), "invalid channel header: slots is 0, expected 1 to 4096");
    let mut img = good.clone();
    img.truncate(good.len() - 8);
    fails(&write("short.chan", &img), "(truncated?)");
    // Records too short for a timestamp (slot 2's ring replaced): ts 0, counted.
    let mut img = good.clone();
    let mut stamped = 7u64.to_ne_bytes().to_vec();
    stamped.extend(b"seven");
    let ring = ImageBuilder::new(4096, RingMode::Discard).kind(RingKind::Spsc).record(b"abc").record(&stamped).build();
    let at = ring_at(2);
    img[at..at + ring.len()].copy_from_slice(&ring);
    let short = write("short-records.chan", &img);
    let o = run(&["snapshot", &short]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("2 0 abc\n2 7 seven\n0 "), "{}", o.stdout);
    assert_eq!(o.stdout.lines().count(), 14);
    assert_eq!(o.stderr, "ringtrace: warning: 1 record(s) too short to hold a timestamp (shown with ts 0, whole)\n");
    // A slot's ring that is not one: reported, not fatal.
    let mut img = good.clone();
    img[ring_at(0)..ring_at(0) + 8].copy_from_slice(b"NOTARING");
    let bad = write("slot.chan", &img);
    let o = run(&["stat", &bad]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("     0  error: not a ringtrace ring file: magic is"), "{}", o.stdout);
    assert!(o.stdout.contains("unreadable    1 slot(s)"), "{}", o.stdout);
    let o = run(&["snapshot", &bad]);
    assert_eq!(o.code, 0);
    assert_eq!(o.stdout.lines().count(), 6);
    assert!(o.stderr.starts_with("ringtrace: warning: slot 0 is not shown: not a ringtrace ring file"), "{}", o.stderr);
}

#[test]
fn channel_follow_prints_new_records_of_every_slot() {
    let (path, _ch, mut producers) = discard_channel();
    let mut child = Command::new(BIN)
        .args(["tail", "--follow", "-n", "2", &path])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || channel_line(&lines.next().unwrap().unwrap());
    let (a, b) = (next(), next());
    assert_eq!((a.0, a.2.as_str(), b.0, b.2.as_str()), (0, "a5", 1, "b5"));
    producers[1].output(b"new in 1", Wakeup::Default).unwrap();
    let n = next();
    assert_eq!((n.0, n.2.as_str()), (1, "new in 1"));
    assert!(n.1 >= b.1);
    producers[0].output(b"new in 0", Wakeup::Default).unwrap();
    producers[1].output(b"newer in 1", Wakeup::Default).unwrap();
    let (x, y) = (next(), next());
    assert_eq!((x.0, x.2.as_str(), y.0, y.2.as_str()), (0, "new in 0", 1, "newer in 1"));
    child.kill().unwrap();
    child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(err, "");
}

/// A TSC channel's records carry raw ticks; the command prints them converted with the
/// file's calibration: nanoseconds in CLOCK_MONOTONIC's time base, near "now".
#[test]
fn tsc_channel_stamps_are_printed_in_nanoseconds() {
    let Ok(tsc) = ringtrace::clock::Tsc::shared() else {
        return ringtrace_fixtures::skip(ringtrace_fixtures::Feature::Tsc, "no invariant TSC on this CPU");
    };
    let path = temp("tsc.chan");
    let channel = Channel::<Discard, ringtrace::clock::Tsc>::builder(4096).max_producers(1).create(&path, tsc).unwrap();
    channel.output(b"tick", Wakeup::Default).unwrap();
    let now = ringtrace::clock::monotonic_ns();
    let out = run(&["snapshot", path.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (slot, ts, data) = channel_line(out.stdout.lines().next().unwrap());
    assert_eq!((slot, data.as_str()), (0, "tick"));
    assert!(ts.abs_diff(now) < 1_000_000_000, "printed {ts}, monotonic now {now}");
}

/// Snapshot files (`Snapshot::write_to`): `stat`, `tail` and `snapshot` read them with
/// their checksums checked; a damaged one is one error line naming the file and the
/// checksum, never other records.
#[test]
fn snapshot_files_are_read_and_damage_is_reported() {
    let ring = ringtrace::FlightRecorder::new(4096).unwrap();
    let mut p = ring.producer().unwrap();
    for i in 0..300u32 {
        p.output(format!("event {i}").as_bytes(), Wakeup::Default).unwrap();
    }
    let snap = ring.snapshot().unwrap();
    let mut bytes = Vec::new();
    snap.write_to(&mut bytes).unwrap();
    let path = write_image("flight.rtsnap", &bytes);
    let o = run(&["snapshot", &path]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let want: Vec<String> = snap.iter().map(|r| String::from_utf8(r.to_vec()).unwrap()).collect();
    assert_eq!(o.stdout.lines().collect::<Vec<_>>(), want);
    assert_eq!(o.stdout.lines().last(), Some("event 299"));
    let o = run(&["tail", "-n", "2", &path]);
    assert_eq!(o.stdout, "event 298\nevent 299\n");
    let o = run(&["stat", &path]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains(&format!("records       {} held", snap.len())), "{}", o.stdout);
    assert!(o.stdout.contains("checksums     ok"), "{}", o.stdout);
    let o = run(&["stat", "--format", "json", &path]);
    assert!(o.stdout.contains(&format!("\"records\":{},", snap.len())), "{}", o.stdout);
    // One flipped bit in the records, one in the header.
    let mut bad = bytes.clone();
    bad[500] ^= 0x10;
    let damaged = write_image("damaged.rtsnap", &bad);
    for cmd in ["stat", "snapshot", "tail"] {
        let o = run(&[cmd, &damaged]);
        assert_eq!(o.code, 1, "{cmd}: {}", o.stdout);
        assert!(o.stdout.is_empty(), "{cmd}: {}", o.stdout);
        assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
        assert!(
            o.stderr.contains(&damaged) && o.stderr.contains("checksum mismatch in the ring bytes (bytes 96.."),
            "{cmd}: {}",
            o.stderr
        );
    }
    let mut bad = bytes.clone();
    bad[30] ^= 1;
    let o = run(&["snapshot", &write_image("header.rtsnap", &bad)]);
    assert!(o.stderr.contains("checksum mismatch in the header (bytes 0..88)"), "{}", o.stderr);
}

/// Run as a child process by `stat_says_which_processes_have_exited`: attaches a
/// consumer to the ring file named in the environment and exits holding it. Not a
/// test: ignored, and run by that test with `--ignored`.
#[test]
#[ignore = "a child role: run by stat_says_which_processes_have_exited"]
fn child_role_attach_consumer_and_exit() {
    let Ok(path) = std::env::var("RINGTRACE_CLI_TEST_ATTACH") else {
        panic!("not a test: run by stat_says_which_processes_have_exited with RINGTRACE_CLI_TEST_ATTACH set")
    };
    let ring = ringtrace::MpscRing::open(&path).unwrap();
    let mut p = ring.producer().unwrap();
    p.output(b"from the child", Wakeup::Default).unwrap();
    // Exit holding the consumer and the producer, as a process that crashed would.
    std::mem::forget((ring.consumer().unwrap(), p));
}

#[test]
fn stat_says_which_processes_have_exited() {
    let path = temp("exited.ring");
    let ring = ringtrace::MpscRing::builder(4096).create(&path).unwrap();
    let _live = ring.producer().unwrap(); // slot 0; the child's producer takes slot 1
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_role_attach_consumer_and_exit", "--ignored", "--test-threads=1"])
        .env("RINGTRACE_CLI_TEST_ATTACH", &path)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let child_pid = child.id();
    assert!(child.wait().unwrap().success());
    let me = std::process::id();
    let path = path.to_str().unwrap();
    let o = run(&["stat", path]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let line = o.stdout.lines().find(|l| l.starts_with("processes")).unwrap();
    assert!(line.contains(&format!("consumer {child_pid} (exited)")), "{line}");
    assert!(line.contains("1 producer(s) attached (1 exited)"), "{line}");
    assert!(line.contains(&format!("{me} (slot 0), {child_pid} (slot 1, exited)")), "{line}");
    let o = run(&["stat", "--format", "json", path]);
    assert!(o.stdout.contains(&format!("\"consumer_attached\":{child_pid},\"consumer_alive\":false")), "{}", o.stdout);
    assert!(o.stdout.contains(&format!("\"pid\":{child_pid},\"alive\":false")), "{}", o.stdout);
    assert!(o.stdout.contains(&format!("\"pid\":{me},\"alive\":true")), "{}", o.stdout);
}

/// `tail --help` names the fields of every source's records, a kafka:// topic's
/// included (its JSON objects and text lines are not a ring's).
#[test]
fn tail_help_names_the_fields_of_a_kafka_topics_records() {
    let o = run(&["tail", "--help"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let help = o.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains("kafka:// topics: text lines are \"TIME HOST SOURCE SEQ PAYLOAD\""), "{help}");
    assert!(help.contains("json objects have time, ts_ns"), "{help}");
    assert!(help.contains("host, source, seq, len and data or hex"), "{help}");
}
