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
use ringtrace_tracing::decode::{text, Event, Trace, Value};
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

/// Chunk kinds (`file.rs`).
const CALLSITE: u8 = 2;
const RECORDS: u8 = 4;

/// The chunks of a trace file, by their heads: (offset, kind, payload length).
fn heads(bytes: &[u8]) -> Vec<(usize, u8, usize)> {
    let mut out = Vec::new();
    let mut at = 16;
    while at + 12 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        out.push((at, bytes[at], len));
        at += 12 + len;
    }
    assert_eq!(at, bytes.len());
    out
}

/// The records and the events a records chunk's payload holds.
fn framed(payload: &[u8]) -> (usize, usize) {
    let (mut records, mut events, mut at) = (0, 0, 0);
    while at < payload.len() {
        let len = u32::from_le_bytes(payload[at + 12..at + 16].try_into().unwrap()) as usize;
        records += 1;
        events += usize::from(payload[at + 16] == 1);
        at += 16 + len;
    }
    (records, events)
}

/// Every event a damaged trace yields is one the whole trace has: the same time, lane
/// and values; its callsite, thread, span and field names the same or unknown (their
/// catalog chunk damaged), never other.
fn subset(part: &Trace, whole: &Trace) {
    let whole = whole.events();
    for e in part.events() {
        let same = |w: &&Event<'_>| {
            let name = |p: &str, w: &str| p == w || p.starts_with("field") || p == "?";
            (w.ts_ns, w.lane, w.dropped) == (e.ts_ns, e.lane, e.dropped)
                && e.callsite.is_none_or(|c| Some(c) == w.callsite)
                && e.thread.is_none_or(|t| Some(t) == w.thread)
                && e.fields.len() == w.fields.len()
                && e.fields
                    .iter()
                    .zip(&w.fields)
                    .all(|(p, w)| (&p.value, p.cut) == (&w.value, w.cut) && name(&p.name, &w.name))
                && e.spans.len() == w.spans.len()
                && e.spans.iter().zip(&w.spans).all(|(p, w)| {
                    p.id == w.id
                        && name(&p.name, &w.name)
                        && p.fields.as_ref().is_none_or(|pf| {
                            w.fields.as_ref().is_some_and(|wf| {
                                pf.len() == wf.len()
                                    && pf.iter().zip(wf).all(|(p, w)| p.value == w.value && name(&p.name, &w.name))
                            })
                        })
                })
        };
        assert!(whole.iter().any(|w| same(&w)), "an event the trace did not hold: {e:?}");
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
                assert!(t.problems.damaged.is_empty(), "cut at {n}: {:?}", t.problems);
                if n > 16 {
                    assert!(text::summary(&t).contains("no end chunk"), "cut at {n}: {}", text::summary(&t));
                }
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
    let heads = heads(&bytes);
    for bit in 0..bytes.len() * 8 {
        let mut b = bytes.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        match read_both(&dir, &b) {
            Err(_) => assert!(bit < 128, "bit {bit}"),
            Ok(t) => {
                assert!(t.problems.any(), "bit {bit} went unnoticed");
                subset(&t, &whole);
                // A bit of a chunk other than its length: that chunk alone is skipped,
                // every other read.
                let &(at, kind, len) = heads.iter().rfind(|h| h.0 <= bit / 8).unwrap();
                if (at + 4..at + 8).contains(&(bit / 8)) {
                    continue;
                }
                let p = &t.problems;
                assert_eq!(p.damaged.len(), 1, "bit {bit}: {p:?}");
                let d = &p.damaged[0];
                assert_eq!((d.offset, d.bytes), (at as u64, 12 + len as u64), "bit {bit}");
                assert!(p.cut.is_none() && !p.incomplete, "bit {bit}: {p:?}");
                let (records, skipped) = if kind == RECORDS { framed(&bytes[at + 12..][..len]) } else { (0, 0) };
                assert_eq!(t.events().len() + skipped, whole.events().len(), "bit {bit}");
                // What the damaged chunk held is counted where it can be, and then
                // counted right.
                if let (Some(r), Some(e)) = (d.records, d.events) {
                    assert_eq!(r as usize, records, "bit {bit}");
                    assert_eq!(e as usize, skipped, "bit {bit}");
                }
            }
        }
    }
}

/// A dump of several records chunks: one failing its checksum in the middle is
/// skipped, named at its offset with the records it held, and the chunks after it are
/// read; the file is not said to be unfinished.
#[test]
fn a_chunk_failing_its_checksum_is_skipped_and_the_chunks_after_it_read() {
    let dir = TempDir::new("midchunk");
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(16 << 20).build().unwrap();
    tracing::dispatcher::with_default(&dispatch(layer), || {
        for seq in 0..60_000u64 {
            tracing::info!(seq, text = "abcdefgh", "m");
        }
    });
    recorder.dump(dir.join("d.rtt")).unwrap();
    let bytes = std::fs::read(dir.join("d.rtt")).unwrap();
    let whole = read_both(&dir, &bytes).unwrap();
    assert_eq!(whole.events().len(), 60_000);
    let records: Vec<_> = heads(&bytes).into_iter().filter(|h| h.1 == RECORDS).collect();
    assert!(records.len() >= 3, "{} records chunks", records.len());
    let (at, _, len) = records[1];
    let (in_chunk, events_in_chunk) = framed(&bytes[at + 12..][..len]);
    // A bit of its first record's timestamp (the record still decodes: its records can
    // be counted).
    let mut b = bytes.clone();
    b[at + 12 + 6] ^= 0x04;
    let t = read_both(&dir, &b).unwrap();
    let p = &t.problems;
    assert_eq!(p.damaged.len(), 1, "{p:?}");
    let d = &p.damaged[0];
    assert_eq!((d.offset, d.bytes), (at as u64, 12 + len as u64));
    assert_eq!((d.records, d.events), (Some(in_chunk as u64), Some(events_in_chunk as u64)));
    assert!(p.cut.is_none() && !p.incomplete, "{p:?}");
    assert_eq!(t.events().len() + events_in_chunk, 60_000);
    subset(&t, &whole);
    let s = text::summary(&t);
    assert!(s.contains(&format!("damaged records chunk at byte {at}")), "{s}");
    assert!(s.contains(&format!("{in_chunk} records ({events_in_chunk} events) not read")), "{s}");
    assert!(!s.contains("no end chunk"), "{s}");
}

/// A damaged catalog chunk costs the names it held, not the records after it.
#[test]
fn a_damaged_callsite_chunk_leaves_names_unknown_and_the_records_read() {
    let dir = TempDir::new("midcallsite");
    let bytes = small_dump(&dir);
    let (at, _, len) = heads(&bytes).into_iter().find(|h| h.1 == CALLSITE).unwrap();
    let mut b = bytes.clone();
    b[at + 12 + len / 2] ^= 0x01;
    let t = read_both(&dir, &b).unwrap();
    assert_eq!(t.events().len(), 3);
    let p = &t.problems;
    assert_eq!(p.damaged.len(), 1, "{p:?}");
    assert_eq!((p.damaged[0].offset, p.damaged[0].records), (at as u64, None));
    assert!(!p.incomplete);
    let s = text::summary(&t);
    assert!(s.contains(&format!("damaged callsite chunk at byte {at}")), "{s}");
    assert!(s.contains(&format!("its {} bytes not read", 12 + len)), "{s}");
    assert!(!s.contains("no end chunk"), "{s}");
}

/// A damaged chunk whose length leads to no sound chunk: reading stops there, and the
/// rest of the file is said not read.
#[test]
fn a_damaged_length_stops_the_reading_and_says_how_much_was_not_read() {
    let dir = TempDir::new("badlen");
    let bytes = small_dump(&dir);
    let (at, _, _) = heads(&bytes).into_iter().find(|h| h.1 == CALLSITE).unwrap();
    let mut b = bytes.clone();
    b[at + 4] ^= 0x01;
    let t = read_both(&dir, &b).unwrap();
    let p = &t.problems;
    assert_eq!(p.damaged.len(), 1, "{p:?}");
    assert_eq!((p.damaged[0].offset, p.damaged[0].bytes), (at as u64, (bytes.len() - at) as u64));
    assert!(!p.incomplete && p.cut.is_none(), "{p:?}");
    let s = text::summary(&t);
    assert!(s.contains(&format!("byte {at}")) && s.contains(&format!("{} bytes", bytes.len() - at)), "{s}");
    assert!(!s.contains("no end chunk"), "{s}");
}

/// Many damaged chunks: each skipped and counted; the account names the first few and
/// sums the rest, in one line.
#[test]
fn many_damaged_chunks_are_each_skipped_and_summed_up() {
    let dir = TempDir::new("many");
    let bytes = small_dump(&dir);
    let mut b = bytes.clone();
    // Process, callsites (the dump's two, and any other test's registered meanwhile),
    // thread, stats.
    let damaged: Vec<_> = heads(&bytes).into_iter().filter(|h| h.1 != RECORDS && h.2 > 0).collect();
    assert!(damaged.len() >= 5, "{damaged:?}");
    for &(at, _, len) in &damaged {
        b[at + 12 + len / 2] ^= 0x08;
    }
    let t = read_both(&dir, &b).unwrap();
    assert_eq!(t.events().len(), 3);
    let p = &t.problems;
    let found: Vec<_> = p.damaged.iter().map(|d| (d.offset as usize, d.bytes as usize - 12)).collect();
    assert_eq!(found, damaged.iter().map(|h| (h.0, h.2)).collect::<Vec<_>>());
    assert!(!p.incomplete && p.cut.is_none(), "{p:?}");
    let s = text::summary(&t);
    for &(at, ..) in &damaged[..3] {
        assert!(s.contains(&format!("at byte {at} ")), "{s}");
    }
    let rest: usize = damaged[3..].iter().map(|h| 12 + h.2).sum();
    let more = format!("{} more damaged chunks from byte {}: {rest} bytes not read", damaged.len() - 3, damaged[3].0);
    assert!(s.contains(&more), "{s}");
}

#[test]
fn an_empty_file_is_not_a_trace_and_says_so() {
    let dir = TempDir::new("empty");
    std::fs::write(dir.join("e.rtt"), b"").unwrap();
    let e = Trace::open(dir.join("e.rtt")).unwrap_err().to_string();
    assert!(e.contains("e.rtt") && e.contains("empty file: not a trace"), "{e}");
    let e = Trace::from_bytes(b"", &dir.join("e.rtt")).unwrap_err().to_string();
    assert!(e.contains("empty file: not a trace"), "{e}");
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
    // A bit of the timestamp of the first record of the chunk in the middle of the file:
    // that chunk is skipped, its records counted.
    let (at, _, len) = heads(&bytes).into_iter().filter(|h| h.1 == RECORDS).rfind(|h| h.0 <= bytes.len() / 2).unwrap();
    let mut changed = bytes.clone();
    changed[at + 12 + 4] ^= 0x10;
    let t = read_both(&dir, &changed).unwrap();
    assert_eq!(t.problems.damaged.len(), 1, "{:?}", t.problems);
    assert!(!t.problems.incomplete);
    let skipped = framed(&bytes[at + 12..][..len]).1;
    assert_eq!(t.problems.damaged[0].events, Some(skipped as u64));
    assert!(skipped > 0 && t.events().len() + skipped == whole.events().len());
    let t = read_both(&dir, &bytes[..bytes.len() / 2]).unwrap();
    assert!(t.problems.incomplete && t.problems.cut.is_some());
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
