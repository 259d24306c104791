//! Bad input: a dump cut short or damaged, a directory of something else, records
//! written by a hostile producer. A clear error or a counted skip, never a panic or a
//! wrong event.

mod common;

use std::path::Path;

use common::{dispatch, TempDir};
use ringtrace::channel::Channel;
use ringtrace::clock::BestClock;
use ringtrace::config::Overwrite;
use ringtrace::Wakeup;
use ringtrace_tracing::decode::{Trace, Value};
use ringtrace_tracing::{Builder, RINGS_FILE};

fn small_dump(dir: &TempDir) -> Vec<u8> {
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(4096).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || {
        let s = tracing::info_span!("s", k = 1u64);
        let _e = s.enter();
        for seq in 0..3u64 {
            tracing::info!(seq, text = "abc", "m");
        }
    });
    recorder.dump(dir.join("d.rtt")).unwrap();
    std::fs::read(dir.join("d.rtt")).unwrap()
}

/// Every event a damaged trace yields is one the whole trace has.
fn subset(part: &Trace, whole: &Trace) {
    let whole: Vec<String> = whole.events().iter().map(|e| format!("{e:?}")).collect();
    for e in part.events() {
        assert!(whole.contains(&format!("{e:?}")), "an event the trace did not hold: {e:?}");
    }
}

/// Reads `bytes` both ways a trace file is read: held ([`Trace::from_bytes`]) and from
/// the file, read again chunk by chunk ([`Trace::open`]); the two must agree on the
/// error, the problems and every entry.
fn read_both(dir: &TempDir, bytes: &[u8]) -> Result<Trace, String> {
    let path = dir.join("both.rtt");
    std::fs::write(&path, bytes).unwrap();
    let held = Trace::from_bytes(bytes, &path).map_err(|e| e.to_string());
    let opened = Trace::open(&path).map_err(|e| e.to_string());
    match (&held, &opened) {
        (Err(a), Err(b)) => assert_eq!(a, b),
        (Ok(a), Ok(b)) => {
            assert_eq!(a.problems, b.problems);
            assert_eq!((a.len(), a.lost()), (b.len(), b.lost()));
            assert!(a.entries().eq(b.entries()), "the two readings differ");
        }
        _ => panic!("held {held:?}, opened {opened:?}"),
    }
    held
}

#[test]
fn a_dump_cut_at_any_length_is_an_error_or_a_reported_partial_read() {
    let dir = TempDir::new("cut");
    let bytes = small_dump(&dir);
    let whole = Trace::from_bytes(&bytes, Path::new("d")).unwrap();
    assert_eq!(whole.events().len(), 3);
    for n in 0..bytes.len() {
        match read_both(&dir, &bytes[..n]) {
            Err(e) => assert!(n < 16, "cut at {n}: {e}"),
            Ok(t) => {
                assert!(t.problems.incomplete, "cut at {n} went unnoticed");
                subset(&t, &whole);
            }
        }
    }
}

#[test]
fn every_flipped_bit_of_a_dump_is_refused_or_reported() {
    let dir = TempDir::new("flip");
    let bytes = small_dump(&dir);
    let whole = Trace::from_bytes(&bytes, Path::new("d")).unwrap();
    for bit in 0..bytes.len() * 8 {
        let mut b = bytes.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        match read_both(&dir, &b) {
            Err(_) => assert!(bit < 128, "bit {bit}"),
            Ok(t) => {
                assert!(t.problems.damage.is_some(), "bit {bit} went unnoticed");
                subset(&t, &whole);
            }
        }
    }
}

/// A file large enough that opening it checks its chunks on two threads: whole, with a
/// byte changed in the middle, and cut in the middle, it reads as the held reading
/// does (the same problems, the same entries).
#[test]
fn a_large_file_checked_on_two_threads_reads_as_the_held_reading() {
    let dir = TempDir::new("large");
    // A ring that holds every record, so that none is lost however late the drain runs.
    let (layer, recorder) = Builder::stream(dir.join("s.rtt")).per_thread_bytes(32 << 20).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || {
        for seq in 0..150_000u64 {
            tracing::info!(seq, text = "some text to fill the file", "m");
        }
    });
    recorder.finish().unwrap();
    let bytes = std::fs::read(dir.join("s.rtt")).unwrap();
    assert!(bytes.len() > 9 << 20, "{} bytes", bytes.len());
    let whole = read_both(&dir, &bytes).unwrap();
    assert!(!whole.problems.any(), "{:?}", whole.problems);
    let mut changed = bytes.clone();
    changed[bytes.len() / 2] ^= 0x10;
    let t = read_both(&dir, &changed).unwrap();
    assert!(t.problems.damage.is_some());
    let t = read_both(&dir, &bytes[..bytes.len() / 2]).unwrap();
    assert!(t.problems.incomplete && t.problems.damage.is_some());
}

#[test]
fn files_that_are_not_traces_are_clear_errors() {
    let dir = TempDir::new("notrace");
    std::fs::write(dir.join("junk"), b"hello, this is not a trace file").unwrap();
    let e = Trace::open(dir.join("junk")).unwrap_err().to_string();
    assert!(e.contains("not a ringtrace trace file"), "{e}");
    let e = Trace::open(&dir.0).unwrap_err().to_string();
    assert!(e.contains("not a recorder directory"), "{e}");
    std::fs::write(dir.join(RINGS_FILE), vec![0u8; 8192]).unwrap();
    std::fs::write(dir.join(ringtrace_tracing::CATALOG_FILE), b"RTTRACE\0\x01\0\0\0\0\0\0\0").unwrap();
    let e = Trace::open(&dir.0).unwrap_err().to_string();
    assert!(e.contains(RINGS_FILE), "{e}");
    let e = Trace::open(dir.join("missing")).unwrap_err().to_string();
    assert!(e.contains("missing"), "{e}");
}

#[test]
fn records_a_hostile_producer_writes_into_a_recorder_directory_are_counted_and_skipped() {
    let dir = TempDir::new("hostile");
    let (layer, recorder) = Builder::flight_recorder()
        .per_thread_bytes(64 << 10)
        .max_threads(4)
        .directory(dir.join("rec"))
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || tracing::info!(n = 1u64, "good"));
    // Another process attaches to the channel file and writes garbage records.
    let theirs = Channel::<Overwrite, BestClock>::open(dir.join("rec").join(RINGS_FILE)).unwrap();
    let mut p = theirs.producer().unwrap();
    for junk in [&[][..], &[99, 1, 2][..], &[1, 0, 0][..], &[1; 64][..], &[5, 1, 2, 3, 4, 5, 6, 7, 8][..]] {
        p.output(junk, Wakeup::Default).unwrap();
    }
    drop(p);
    let trace = Trace::open(dir.join("rec")).unwrap();
    let events = trace.events();
    assert_eq!(events.len(), 1, "only the good event");
    assert_eq!(events[0].field("n"), Some(&Value::U64(1)));
    assert_eq!(trace.problems.bad_records, 4, "{:?}", trace.problems);
    // The exit record of the hostile producer's "span 0x0807060504030201" decodes: it
    // is a well-formed record of no span the trace knows, and names no event.
    drop(recorder);
}

#[test]
fn a_catalog_cut_short_leaves_names_unknown_not_wrong() {
    let dir = TempDir::new("catalog");
    let (layer, recorder) =
        Builder::flight_recorder().per_thread_bytes(64 << 10).directory(dir.join("rec")).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || tracing::info!(n = 1u64, "good"));
    drop(recorder);
    let catalog = dir.join("rec").join(ringtrace_tracing::CATALOG_FILE);
    let bytes = std::fs::read(&catalog).unwrap();
    for n in 16..bytes.len() {
        std::fs::write(&catalog, &bytes[..n]).unwrap();
        let trace = Trace::open(dir.join("rec")).unwrap();
        let events = trace.events();
        assert_eq!(events.len(), 1);
        if let Some(c) = events[0].callsite {
            assert!(c.name.contains("event"), "{c:?}");
            assert_eq!(events[0].field("n"), Some(&Value::U64(1)));
        }
    }
}
