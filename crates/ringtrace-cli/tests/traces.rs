//! `ringtrace decode`, and `snapshot`, `tail` and `stat` of `ringtrace-tracing` traces:
//! a recorder directory read from outside the process that writes it, and the trace
//! file `snapshot --output` makes of it.

use tracing_subscriber::layer::SubscriberExt;

mod common;

use common::{run, temp};

/// A recorder directory holding three events in a span, from a thread named "worker";
/// the recorder is kept alive (as a live process's would be).
fn recorder() -> (ringtrace_tracing::Recorder, String) {
    let dir = temp("rec");
    let (layer, recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).directory(&dir).build().unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    std::thread::Builder::new()
        .name("worker".into())
        .spawn(move || {
            tracing::dispatcher::with_default(&d, || {
                let span = tracing::info_span!("request", id = 7u64);
                let _e = span.enter();
                for n in 0..3u64 {
                    tracing::warn!(n, path = "/a b", "slow write");
                }
            })
        })
        .unwrap()
        .join()
        .unwrap();
    (recorder, dir.to_str().unwrap().to_owned())
}

#[test]
fn decode_prints_a_live_recorder_directory_one_event_a_line() {
    let (_recorder, dir) = recorder();
    let o = run(&["decode", &dir]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", o.stdout);
    for (n, line) in lines.iter().enumerate() {
        assert!(
            line.ends_with(&format!(" WARN worker: request{{id=7}}: traces: slow write n={n} path=\"/a b\"")),
            "{line}"
        );
    }
    let o = run(&["decode", &dir, "--format", "json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let first: serde_json::Value = serde_json::from_str(o.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["level"], "WARN");
    assert_eq!(first["thread"], "worker");
    assert_eq!(first["fields"]["path"], "/a b");
    assert_eq!(first["spans"][0]["name"], "request");
    // Identifiers and times are decimal strings; small recorded integers numbers.
    assert!(first["ts_ns"].as_str().is_some_and(|t| t.parse::<u64>().is_ok()), "{first}");
    assert!(first["spans"][0]["id"].as_str().is_some_and(|t| t.parse::<u64>().is_ok()), "{first}");
    assert_eq!((first["fields"]["n"].as_u64(), first["spans"][0]["fields"]["id"].as_u64()), (Some(0), Some(7)));
    assert_eq!(run(&["decode", &dir, "--json"]).stdout, o.stdout, "--json is --format json");
}

#[test]
fn snapshot_of_a_recorder_directory_writes_a_trace_file_that_decodes_the_same() {
    let (_recorder, dir) = recorder();
    let file = temp("snap.rtt");
    let file = file.to_str().unwrap();
    let o = run(&["snapshot", &dir, "--output", file]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("3 records written") || o.stderr.contains("records written"), "{}", o.stderr);
    assert_eq!(run(&["decode", file]).stdout, run(&["decode", &dir]).stdout);
    // Without --output: the events, newest first with --reverse.
    let o = run(&["snapshot", &dir, "--reverse"]);
    assert!(o.stdout.lines().next().unwrap().contains("n=2"), "{}", o.stdout);
    let o = run(&["tail", "-n", "1", file]);
    assert_eq!(o.stdout.lines().count(), 1);
    assert!(o.stdout.contains("n=2"), "{}", o.stdout);
    let o = run(&["stat", file, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!((v["events"].as_u64(), v["threads"].as_u64(), v["lost"].as_u64()), (Some(3), Some(1), Some(0)));
}

#[test]
fn decode_refuses_what_is_not_a_trace_with_one_line() {
    let junk = temp("junk.rtt");
    std::fs::write(&junk, b"RTTRACE\0\x09\0\0\0\0\0\0\0").unwrap();
    let o = run(&["decode", junk.to_str().unwrap()]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.starts_with("ringtrace: error: ") && o.stderr.contains("version 9"), "{}", o.stderr);
    let dir = temp("empty-dir");
    std::fs::create_dir_all(&dir).unwrap();
    let o = run(&["decode", dir.to_str().unwrap()]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("nor a recorder directory"), "{}", o.stderr);
    let ring = temp("a.ring");
    assert_eq!(run(&["create", ring.to_str().unwrap(), "--capacity", "4k"]).code, 0);
    let o = run(&["decode", ring.to_str().unwrap()]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("not a ring file"), "{}", o.stderr);
}

#[test]
fn a_damaged_trace_file_decodes_as_far_as_it_is_sound_and_says_what_was_skipped() {
    let (_recorder, dir) = recorder();
    let file = temp("cut.rtt");
    assert_eq!(run(&["snapshot", &dir, "--output", file.to_str().unwrap()]).code, 0);
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() - 30]).unwrap();
    let o = run(&["decode", file.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("not read") && o.stderr.contains("no end chunk"), "{}", o.stderr);
}

/// The chunks of a trace file, by their heads: (offset, kind, payload length).
fn chunk_heads(bytes: &[u8]) -> Vec<(usize, u8, usize)> {
    let mut out = Vec::new();
    let mut at = 16;
    while at + 12 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        out.push((at, bytes[at], len));
        at += 12 + len;
    }
    out
}

#[test]
fn a_chunk_failing_its_checksum_is_named_at_its_offset_and_the_rest_decoded() {
    let (_recorder, dir) = recorder();
    let file = temp("flipped.rtt");
    let file = file.to_str().unwrap();
    assert_eq!(run(&["snapshot", &dir, "--output", file]).code, 0);
    let bytes = std::fs::read(file).unwrap();
    let heads = chunk_heads(&bytes);
    // A bit of the records chunk (of its first record's timestamp): its records are not
    // read, and counted; the file is whole.
    let (at, _, _) = *heads.iter().find(|h| h.1 == 4).unwrap();
    let mut b = bytes.clone();
    b[at + 12 + 6] ^= 0x20;
    std::fs::write(file, &b).unwrap();
    let o = run(&["decode", file]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains(&format!("damaged records chunk at byte {at}")), "{}", o.stderr);
    assert!(o.stderr.contains("events) not read"), "{}", o.stderr);
    assert!(!o.stderr.contains("no end chunk"), "{}", o.stderr);
    // A bit of a thread chunk: every event still decodes, its thread unnamed.
    let (at, _, len) = *heads.iter().find(|h| h.1 == 3).unwrap();
    let mut b = bytes.clone();
    b[at + 12 + len / 2] ^= 0x20;
    std::fs::write(file, &b).unwrap();
    let o = run(&["decode", file]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout.lines().count(), 3, "{}", o.stdout);
    assert!(o.stderr.contains(&format!("damaged thread chunk at byte {at}")), "{}", o.stderr);
    assert!(!o.stderr.contains("no end chunk"), "{}", o.stderr);
}

#[test]
fn export_chrome_writes_json_a_trace_viewer_reads() {
    let (_recorder, dir) = recorder();
    let out = temp("chrome.json");
    let o = run(&["export", "--format", "chrome", &dir, "-o", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.starts_with("3 events, 1 span slices and 0 lost-event markers written to "), "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let evs = v["traceEvents"].as_array().unwrap();
    let instants: Vec<_> = evs.iter().filter(|e| e["ph"] == "i").collect();
    assert_eq!(instants.len(), 3);
    assert_eq!(instants[2]["args"]["n"], 2);
    assert_eq!(instants[2]["args"]["path"], "/a b");
    assert!(evs.iter().any(|e| e["ph"] == "M" && e["args"]["name"] == "worker"));
    // To stdout without -o; a ring file is refused.
    assert_eq!(run(&["export", "--format", "chrome", &dir]).stdout, std::fs::read_to_string(&out).unwrap());
    let ring = temp("b.ring");
    assert_eq!(run(&["create", ring.to_str().unwrap(), "--capacity", "4k"]).code, 0);
    let o = run(&["export", "--format", "chrome", ring.to_str().unwrap()]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("export reads ringtrace-tracing traces"), "{}", o.stderr);
}

#[test]
fn export_perfetto_writes_a_protobuf_trace() {
    let (_recorder, dir) = recorder();
    let out = temp("t.pftrace");
    let o = run(&["export", "--format", "perfetto", &dir, "-o", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.starts_with("3 events, 1 span slices"), "{}", o.stderr);
    let bytes = std::fs::read(&out).unwrap();
    // A Trace whose packets (field 1, length-delimited) hold the thread's name.
    assert_eq!(bytes[0], 0x0A);
    assert!(bytes.windows(6).any(|w| w == b"worker"));
}

#[test]
fn export_reads_a_channel_file_of_raw_records() {
    use ringtrace::channel::Channel;
    use ringtrace::clock::Monotonic;
    use ringtrace::config::Discard;
    let path = temp("raw.chan");
    let ch = Channel::<Discard, Monotonic>::builder(4096).max_producers(1).create(&path, Monotonic).unwrap();
    ch.output(b"abc", ringtrace::Wakeup::Default).unwrap();
    let o = run(&["export", "--format", "chrome", path.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let e = v["traceEvents"].as_array().unwrap().iter().find(|e| e["ph"] == "i").unwrap().clone();
    assert_eq!(
        (e["name"].as_str(), e["args"]["len"].as_u64(), e["args"]["head"].as_str()),
        (Some("ringtrace: record"), Some(3), Some("616263"))
    );
}

#[test]
fn decode_and_export_read_a_recorder_directorys_rings_file_as_the_directory() {
    let (_recorder, dir) = recorder();
    let rings = format!("{dir}/{}", ringtrace_tracing::RINGS_FILE);
    let from_dir = run(&["decode", &dir, "--format", "json"]);
    assert_eq!(from_dir.code, 0, "{}", from_dir.stderr);
    assert_eq!(from_dir.stdout.lines().count(), 3, "{}", from_dir.stdout);
    // The same events, decoded with the catalog beside the rings, not raw records.
    let from_rings = run(&["decode", &rings, "--format", "json"]);
    assert_eq!((from_rings.code, from_rings.stdout.as_str()), (0, from_dir.stdout.as_str()), "{}", from_rings.stderr);
    for format in ["chrome", "otlp-json"] {
        let (a, b) = (run(&["export", &dir, "--format", format]), run(&["export", &rings, "--format", format]));
        assert_eq!((a.code, b.code), (0, 0), "{format}: {} / {}", a.stderr, b.stderr);
        assert!(b.stdout.contains("slow write"), "{format}: {}", b.stdout);
        assert_eq!(a.stdout, b.stdout, "{format}");
    }
    // Run from inside the directory: `rings.chan` alone names it too.
    let in_dir = temp("in-dir.out");
    let child = std::process::Command::new(common::BIN)
        .args(["decode", ringtrace_tracing::RINGS_FILE, "--format", "json"])
        .current_dir(&dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&in_dir).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = common::Guard(child).wait(common::DEADLINE, "decode rings.chan");
    assert!(status.success(), "decode rings.chan in the directory: {status}");
    assert_eq!(std::fs::read_to_string(&in_dir).unwrap(), from_dir.stdout);
    // An output that would land in the directory read is refused, as for the directory.
    let out = format!("{dir}/{}", ringtrace_tracing::CATALOG_FILE);
    let o = run(&["export", &rings, "--format", "chrome", "-o", &out]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("inside the source directory"), "{}", o.stderr);
}

#[test]
fn decode_reads_a_channel_file_of_raw_records() {
    use ringtrace::channel::Channel;
    use ringtrace::clock::Monotonic;
    use ringtrace::config::Discard;
    // A channel file named as a recorder's rings, without a catalog beside it: raw records.
    let dir = temp("raw-rings");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(ringtrace_tracing::RINGS_FILE);
    let ch = Channel::<Discard, Monotonic>::builder(4096).max_producers(1).create(&path, Monotonic).unwrap();
    ch.output(b"abc", ringtrace::Wakeup::Default).unwrap();
    let o = run(&["decode", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(o.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(
        (v["level"].as_str(), v["name"].as_str(), v["fields"]["len"].as_u64(), v["fields"]["head"].as_str()),
        (Some("INFO"), Some("ringtrace: record"), Some(3), Some("616263")),
        "{v}"
    );
}
