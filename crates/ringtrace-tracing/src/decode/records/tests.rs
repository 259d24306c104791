use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use proptest::prelude::*;

use super::*;
use crate::decode::{EntryKind, Trace};
use crate::file::chunk;

/// A trace file of records chunks, each record an `enter` of a span numbered in file
/// order (so that the order of records of equal times shows).
fn trace_file(chunks: &[Vec<(u32, u64)>]) -> Vec<u8> {
    let mut out = file::header().to_vec();
    let mut n = 0;
    for c in chunks {
        let mut payload = Vec::new();
        for &(lane, ts) in c {
            n += 1;
            let (rec, len) = wire::simple_bytes(wire::kind::ENTER, n, None);
            file::put_record(&mut payload, lane, ts, &rec[..len]);
        }
        out.extend(file::encode_chunk(chunk::RECORDS, &payload));
    }
    out.extend(file::encode_chunk(chunk::END, &[]));
    out
}

fn temp_file(bytes: &[u8]) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let p =
        std::env::temp_dir().join(format!("ringtrace-records-{}-{}.rtt", std::process::id(), N.fetch_add(1, Relaxed)));
    std::fs::write(&p, bytes).unwrap();
    p
}

fn order(t: &Trace) -> Vec<(u64, u32, u64)> {
    t.entries()
        .map(|e| match e.kind {
            EntryKind::Enter { span } => (e.ts_ns, e.lane, span),
            other => panic!("{other:?}"),
        })
        .collect()
}

proptest! {
    /// Chunks whose times overlap, chunks out of order inside, times repeated: read from
    /// the file chunk by chunk, the records come in the order a stable sort of them all
    /// by time gives (which is how the held reading orders them).
    #[test]
    fn reading_chunk_by_chunk_orders_as_a_stable_sort(
        chunks in proptest::collection::vec(proptest::collection::vec((0u32..3, 0u64..40), 0..30), 0..8)
    ) {
        let bytes = trace_file(&chunks);
        let path = temp_file(&bytes);
        let opened = Trace::open(&path).unwrap();
        let held = Trace::from_bytes(&bytes, &path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let got = order(&opened);
        let mut want: Vec<_> = chunks.iter().flatten().zip(1..).map(|(&(lane, ts), n)| (ts, lane, n)).collect();
        want.sort_by_key(|r| r.0);
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(order(&held), want);
    }
}

#[test]
fn chunks_in_time_order_are_held_one_at_a_time() {
    let chunks: Vec<Vec<(u32, u64)>> =
        (0..50u64).map(|c| (0..100).map(|i| ((i % 4) as u32, c * 100 + i)).collect()).collect();
    let path = temp_file(&trace_file(&chunks));
    let trace = Trace::open(&path).unwrap();
    let mut reading = trace.records.read();
    let mut unread = Unread::default();
    let mut n = 0;
    while reading.next(&mut unread).is_some() {
        n += 1;
    }
    std::fs::remove_file(&path).unwrap();
    assert_eq!(n, 5000);
    let Reading::File(f) = reading else { panic!("a trace file is read from the file") };
    assert_eq!(f.peak, 1);
}

#[test]
fn a_file_changed_after_it_was_opened_is_counted_not_read_wrong() {
    let chunks: Vec<Vec<(u32, u64)>> = (0..3u64).map(|c| (0..10).map(|i| (0, c * 10 + i)).collect()).collect();
    let bytes = trace_file(&chunks);
    let path = temp_file(&bytes);
    let trace = Trace::open(&path).unwrap();
    // A byte of the second chunk's records changes on disk.
    let mut changed = bytes.clone();
    let second = trace_file(&chunks[..1]).len() - (12/* end chunk */) + 12 + 20;
    changed[second] ^= 0xff;
    std::fs::write(&path, &changed).unwrap();
    let mut entries = trace.entries();
    let times: Vec<u64> = entries.by_ref().map(|e| e.ts_ns).collect();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(times, (0..10).chain(20..30).collect::<Vec<_>>());
    let (unread, why) = entries.unread_chunks();
    assert_eq!(unread, 1);
    assert!(why.unwrap().contains("changed since it was opened"), "{why:?}");
}
