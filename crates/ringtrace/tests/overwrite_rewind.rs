//! Reading an overwrite ring again from a [`ReadMark`]: record numbers, rewinds and
//! their counts, drawn by proptest against what the docs promise, and the marks refused.
#![cfg(not(loom))]

use proptest::prelude::*;
use ringtrace::recorder::ReadMark;
use ringtrace::{Error, FlightRecorder, Wakeup};

const CAPACITY: u64 = 4096;

#[derive(Debug, Clone)]
enum Op {
    /// Write records of these payload lengths (at least 8: the index goes first).
    Write(Vec<usize>),
    /// Consume at most this many records.
    Consume(usize),
    /// Take a mark.
    Mark,
    /// Rewind to the mark of this index (modulo the marks taken).
    Rewind(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => prop::collection::vec(8usize..600, 1..12).prop_map(Op::Write),
        3 => (1usize..40).prop_map(Op::Consume),
        1 => Just(Op::Mark),
        1 => any::<usize>().prop_map(Op::Rewind),
    ]
}

fn footprint(len: usize) -> u64 {
    (len as u64 + 8).next_multiple_of(8)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Every record delivered carries its index among the records written as its
    /// number; numbers rise between rewinds; a rewind delivers again from the mark's
    /// number on, and exactly what was delivered after the mark while nothing was ever
    /// overwritten; at the end `consumed + overwritten_unread` is every record written.
    #[test]
    fn rewinds_deliver_again_with_the_same_numbers(ops in prop::collection::vec(op(), 1..60)) {
        let ring = FlightRecorder::builder(CAPACITY).retire_ahead(0).build().unwrap();
        let mut p = ring.producer().unwrap();
        let mut c = ring.consumer().unwrap();
        let (mut written, mut bytes) = (0u64, 0u64);
        // Each mark, with the records delivered after it (while it is the latest rewound-to state).
        let mut marks: Vec<(ReadMark, Vec<u64>)> = Vec::new();
        let mut last: Option<u64> = None;
        for op in ops {
            match op {
                Op::Write(lens) => {
                    for len in lens {
                        let mut rec = vec![0xa5u8; len];
                        rec[..8].copy_from_slice(&written.to_le_bytes());
                        p.output(&rec, Wakeup::Default).unwrap();
                        written += 1;
                        bytes += footprint(len);
                    }
                }
                Op::Consume(k) => {
                    let mut got = Vec::new();
                    c.consume_numbered(k, |n, rec| {
                        assert_eq!(rec[..8], n.to_le_bytes(), "a record delivered under another's number");
                        got.push(n);
                    }).unwrap();
                    for &n in &got {
                        prop_assert!(last.is_none_or(|l| n > l), "number {n} after {last:?}");
                        last = Some(n);
                    }
                    for (_, after) in marks.iter_mut() {
                        after.extend(&got);
                    }
                    // The next number is past the last delivered.
                    prop_assert!(last.is_none_or(|l| c.mark().next_number() > l));
                }
                Op::Mark => marks.push((c.mark(), Vec::new())),
                Op::Rewind(i) if !marks.is_empty() => {
                    let i = i % marks.len();
                    let (mark, after) = marks[i].clone();
                    c.rewind(mark).unwrap();
                    prop_assert_eq!(c.mark(), mark);
                    // Read again what was delivered after the mark, as far as it went.
                    let mut again = Vec::new();
                    c.consume_numbered(after.len(), |n, rec| {
                        assert_eq!(rec[..8], n.to_le_bytes());
                        again.push(n);
                    }).unwrap();
                    prop_assert!(again.first().is_none_or(|&n| n >= mark.next_number()));
                    // The ring holds `capacity - 8` bytes of records: the next header's
                    // word is always zero (`protocol::retire`'s `P + 8 <= Z`).
                    if bytes <= CAPACITY - 8 {
                        // Nothing was ever overwritten: the very same records.
                        prop_assert_eq!(&again, &after);
                    } else {
                        // Producers overwrite the oldest first: what survives of them is a
                        // suffix, delivered first and in order (then newer records).
                        let j = after.iter().position(|&n| Some(&n) == again.first()).unwrap_or(after.len());
                        let survived = &after[j..];
                        prop_assert_eq!(&again[..survived.len().min(again.len())], survived);
                        prop_assert!(again.first().is_none_or(|&n| j < after.len() || after.last().is_none_or(|&l| n > l)));
                    }
                    last = again.last().copied().or(Some(mark.next_number()).filter(|&n| n > 0).map(|n| n - 1));
                    // Marks taken after this one describe reads now undone; the earlier
                    // ones' reads after this mark are replaced by the reads again.
                    marks.truncate(i + 1);
                    for (_, before) in marks.iter_mut() {
                        before.truncate(before.len() - after.len());
                        before.extend(&again);
                    }
                }
                Op::Rewind(_) => {}
            }
        }
        // Drain: every record written is consumed or counted overwritten.
        c.consume_numbered(usize::MAX, |n, rec| assert_eq!(rec[..8], n.to_le_bytes())).unwrap();
        let m = c.mark();
        prop_assert_eq!(m.consumed + m.overwritten_unread, written, "{:?}", m);
        prop_assert_eq!(c.overwritten_unread(), m.overwritten_unread);
    }
}

/// Marks the consumer cannot return to are refused, and leave it as it was.
#[test]
fn marks_ahead_or_off_a_boundary_are_refused() {
    let ring = FlightRecorder::new(4096).unwrap();
    let mut p = ring.producer().unwrap();
    let mut c = ring.consumer().unwrap();
    p.output(b"one", Wakeup::Default).unwrap();
    c.consume(|_| ()).unwrap();
    let now = c.mark();
    for bad in [
        ReadMark { position: now.position + 8, ..now },
        ReadMark { position: 4, consumed: 0, ..ReadMark::default() },
        ReadMark { consumed: now.consumed + 1, ..now },
        ReadMark { overwritten_unread: 1, ..now },
    ] {
        let e = c.rewind(bad).unwrap_err();
        assert!(matches!(e, Error::InvalidMark { .. }), "{bad:?}: {e}");
        assert_eq!(c.mark(), now, "{bad:?} moved the consumer");
    }
    c.rewind(ReadMark::default()).unwrap();
    let mut got = Vec::new();
    c.consume_numbered(usize::MAX, |n, rec| got.push((n, rec.to_vec()))).unwrap();
    assert_eq!(got, [(0, b"one".to_vec())]);
}

/// A mark stored by one consumer is returned to by the next one of the ring (an agent
/// restarted): what was read after the mark is delivered again with the same numbers,
/// and what producers overwrote meanwhile is counted.
#[test]
fn a_later_consumer_rewinds_to_an_earlier_ones_mark() {
    let ring = FlightRecorder::builder(4096).retire_ahead(0).build().unwrap();
    let mut p = ring.producer().unwrap();
    let mut write = |range: std::ops::Range<u64>| {
        for i in range {
            let mut rec = [0u8; 56];
            rec[..8].copy_from_slice(&i.to_le_bytes());
            p.output(&rec, Wakeup::Default).unwrap();
        }
    };
    write(0..10);
    let mark = {
        let mut c = ring.consumer().unwrap();
        c.consume_n(4, |_| ()).unwrap();
        let mark = c.mark();
        c.consume(|_| ()).unwrap();
        mark
    };
    let mut c = ring.consumer().unwrap();
    c.rewind(mark).unwrap();
    let mut got = Vec::new();
    c.consume_numbered(usize::MAX, |n, _| got.push(n)).unwrap();
    assert_eq!(got, (4..10).collect::<Vec<_>>());
    // 64-byte records in 4 KiB: 64 fit; 100 more overwrite the ones after the mark.
    let mark = c.mark();
    write(10..110);
    c.consume(|_| ()).unwrap();
    drop(c);
    let mut c = ring.consumer().unwrap();
    c.rewind(mark).unwrap();
    let mut got = Vec::new();
    c.consume_numbered(usize::MAX, |n, rec| {
        assert_eq!(rec[..8], n.to_le_bytes());
        got.push(n);
    })
    .unwrap();
    let m = c.mark();
    assert_eq!(*got.last().unwrap(), 109);
    assert_eq!(got.len() as u64 + m.overwritten_unread - mark.overwritten_unread, 100);
    assert_eq!(m.consumed + m.overwritten_unread, 110);
}
