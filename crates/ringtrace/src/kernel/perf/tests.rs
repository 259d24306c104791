//! Unit tests of the walks on crafted data areas: valid images written the way the kernel
//! writes them, corrupt ones, and random ones (proptest).

use std::convert::Infallible;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use proptest::prelude::*;

use super::map::DataArea;
use super::walk::{backward, forward};
use super::*;
use crate::error::ConsumeError;

/// Writes `bytes` at ring position `pos`, wrapping around the end of `data`.
fn put(data: &mut [u8], pos: u64, bytes: &[u8]) {
    let mask = data.len() as u64 - 1;
    for (i, b) in bytes.iter().enumerate() {
        data[(pos.wrapping_add(i as u64) & mask) as usize] = *b;
    }
}

/// A record of `size` bytes of type `kind` whose body bytes are `fill`.
fn record(kind: u32, size: u16, fill: u8) -> Vec<u8> {
    let mut r = vec![fill; size as usize];
    r[0..4].copy_from_slice(&kind.to_ne_bytes());
    r[4..6].copy_from_slice(&0u16.to_ne_bytes());
    r[6..8].copy_from_slice(&size.to_ne_bytes());
    r
}

/// Writes records forward from `start` as the kernel does; returns the head.
fn write_forward(data: &mut [u8], start: u64, recs: &[Vec<u8>]) -> u64 {
    let mut head = start;
    for r in recs {
        put(data, head, r);
        head = head.wrapping_add(r.len() as u64);
    }
    head
}

/// Writes records backward from 0 as the kernel does with `write_backward`
/// (`head -= size`, the record at the new head); returns `data_head`.
fn write_backward(data: &mut [u8], recs: &[Vec<u8>]) -> u64 {
    let mut head = 0u64;
    for r in recs {
        head = head.wrapping_sub(r.len() as u64);
        put(data, head, r);
    }
    head
}

type Got = Vec<(u32, u64, Vec<u8>)>;

/// Collects `(kind, pos, bytes)` of a walk, checking the count it returns.
fn collect(
    walk: impl FnOnce(&mut dyn FnMut(PerfRecord<'_>) -> Result<(), Infallible>) -> Result<usize, ConsumeError<Infallible>>,
) -> Result<Got, KernelError> {
    let mut out = Vec::new();
    match walk(&mut |r| {
        out.push((r.kind, r.pos, r.bytes.to_vec()));
        Ok(())
    }) {
        Ok(n) => {
            assert_eq!(n, out.len());
            Ok(out)
        }
        Err(ConsumeError::Kernel(e)) => Err(e),
        Err(ConsumeError::Callback(never)) => match never {},
        Err(e) => panic!("a walk fails with a kernel error only: {e}"),
    }
}

fn collect_forward(data: &[u8], tail: &mut u64, head: u64) -> Result<Got, KernelError> {
    collect(|f| walk_forward(data, tail, head, &mut Vec::new(), f))
}

fn collect_backward(data: &[u8], head: u64, limit: u64) -> Result<Got, KernelError> {
    collect(|f| walk_backward(data, head, limit, &mut Vec::new(), f))
}

fn corrupt(e: KernelError) -> (u64, u64, CorruptReason) {
    match e {
        KernelError::Corrupt { offset, size, reason, .. } => (offset, size, reason),
        other => panic!("expected a corrupt header, got {other}"),
    }
}

#[test]
fn forward_delivers_records_in_order_and_moves_the_tail_to_the_head() {
    let mut data = vec![0u8; 256];
    let recs = [record(9, 16, 1), record(2, 24, 2), record(9, 8, 3)];
    let head = write_forward(&mut data, 1000, &recs);
    let mut tail = 1000;
    let got = collect_forward(&data, &mut tail, head).unwrap();
    assert_eq!(tail, head);
    let want = recs.to_vec();
    assert_eq!(got.iter().map(|g| g.2.clone()).collect::<Vec<_>>(), want);
    assert_eq!(got.iter().map(|g| g.1).collect::<Vec<_>>(), [1000, 1016, 1040]);
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [9, 2, 9]);
    // Nothing new: an empty walk.
    assert!(collect_forward(&data, &mut tail, head).unwrap().is_empty());
}

#[test]
fn forward_copies_a_record_that_wraps_around_the_end() {
    let mut data = vec![0u8; 64];
    // Starts 16 bytes before the end; 40 bytes long: 24 more at the start.
    let mut rec = record(9, 40, 0);
    for (i, b) in rec.iter_mut().enumerate().skip(8) {
        *b = i as u8;
    }
    let start = 64 * 5 + 48;
    let head = write_forward(&mut data, start, std::slice::from_ref(&rec));
    let mut tail = start;
    let got = collect_forward(&data, &mut tail, head).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].2, rec);
    assert_eq!(tail, head);
}

#[test]
fn forward_reads_a_header_that_wraps_at_a_misaligned_tail() {
    let mut data = vec![0u8; 64];
    let rec = record(7, 16, 0xaa);
    let head = write_forward(&mut data, 60, std::slice::from_ref(&rec));
    let mut tail = 60;
    let got = collect_forward(&data, &mut tail, head).unwrap();
    assert_eq!((got[0].0, &got[0].2), (7, &rec));
}

#[test]
fn forward_size_zero_is_corrupt_and_named() {
    let data = vec![0u8; 64];
    let mut tail = 64 + 8;
    let e = collect_forward(&data, &mut tail, 64 + 24).unwrap_err();
    let msg = e.to_string();
    assert_eq!(corrupt(e), (8, 0, CorruptReason::Zero));
    assert!(msg.contains("data offset 8") && msg.contains("size 0"), "{msg}");
    assert_eq!(tail, 64 + 8, "nothing delivered, the tail stays");
}

#[test]
fn forward_size_smaller_than_a_header_is_corrupt() {
    let mut data = vec![0u8; 64];
    let head = write_forward(&mut data, 0, &[record(9, 16, 0)]);
    put(&mut data, head, &[1, 0, 0, 0, 0, 0, 4, 0]);
    let mut tail = 0;
    let e = collect_forward(&data, &mut tail, head + 16).unwrap_err();
    assert_eq!(corrupt(e), (16, u16::from_ne_bytes([4, 0]) as u64, CorruptReason::TooSmall));
    assert_eq!(tail, 16, "the record before it was delivered");
}

#[test]
fn forward_size_not_a_multiple_of_8_is_corrupt() {
    let mut data = vec![0u8; 64];
    let mut rec = record(9, 16, 0);
    rec[6..8].copy_from_slice(&12u16.to_ne_bytes());
    put(&mut data, 0, &rec);
    let e = collect_forward(&data, &mut 0, 16).unwrap_err();
    assert_eq!(corrupt(e), (0, 12, CorruptReason::Unaligned));
}

#[test]
fn forward_size_past_the_head_or_the_buffer_is_corrupt() {
    let mut data = vec![0u8; 64];
    put(&mut data, 0, &record(9, 32, 0)[..8]);
    let e = collect_forward(&data, &mut 0, 16).unwrap_err();
    assert_eq!(corrupt(e), (0, 32, CorruptReason::PastEnd { available: 16 }));
    put(&mut data, 0, &record(9, 128, 0)[..8]);
    let e = collect_forward(&data, &mut 0, 64).unwrap_err();
    let msg = e.to_string();
    assert_eq!(corrupt(e), (0, 128, CorruptReason::PastEnd { available: 64 }));
    assert!(msg.contains("size 128") && msg.contains("64 bytes left"), "{msg}");
}

#[test]
fn forward_head_more_than_a_buffer_ahead_is_an_overrun() {
    let data = vec![0u8; 64];
    let mut tail = 8;
    match collect_forward(&data, &mut tail, 8 + 65).unwrap_err() {
        KernelError::Overrun { head: 73, tail: 8, size: 64 } => {}
        e => panic!("{e}"),
    }
    assert_eq!(tail, 8);
    // A head behind the tail is the same (it wraps to a huge distance).
    assert!(matches!(collect_forward(&data, &mut tail, 0).unwrap_err(), KernelError::Overrun { .. }));
}

#[test]
fn forward_callback_error_counts_its_record_as_read() {
    let mut data = vec![0u8; 128];
    let head = write_forward(&mut data, 0, &[record(1, 8, 0), record(2, 16, 0), record(3, 8, 0)]);
    let mut tail = 0;
    let r = walk_forward(&data, &mut tail, head, &mut Vec::new(), |r| if r.kind == 2 { Err("stop") } else { Ok(()) });
    assert!(matches!(r, Err(ConsumeError::Callback("stop"))));
    assert_eq!(tail, 24);
}

#[test]
fn walks_refuse_a_data_area_that_is_not_a_power_of_two() {
    for len in [0usize, 4, 24, 100] {
        let data = vec![0u8; len];
        assert!(matches!(collect_forward(&data, &mut 0, 0), Err(KernelError::InvalidDataArea { .. })));
        assert!(matches!(collect_backward(&data, 0, 8), Err(KernelError::InvalidDataArea { .. })));
    }
}

#[test]
fn backward_before_the_ring_fills_stops_at_never_written_space() {
    let mut data = vec![0u8; 256];
    let recs = [record(1, 16, 1), record(2, 24, 2), record(3, 8, 3)];
    let head = write_backward(&mut data, &recs);
    assert_eq!(head, 0u64.wrapping_sub(48));
    let got = collect_backward(&data, head, 256).unwrap();
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [3, 2, 1]);
    assert_eq!(
        got.iter().map(|g| g.2.clone()).collect::<Vec<_>>(),
        [recs[2].clone(), recs[1].clone(), recs[0].clone()]
    );
}

#[test]
fn backward_after_overwriting_delivers_the_newest_whole_records() {
    // 37 records of 8..=40 bytes into a 128-byte ring: many wraps, wrapping records.
    let mut data = vec![0u8; 128];
    let recs: Vec<_> = (0..37u32).map(|i| record(i, 8 * (1 + (i % 5) as u16), i as u8)).collect();
    let head = write_backward(&mut data, &recs);
    let got = collect_backward(&data, head, 128).unwrap();
    // The expected newest records: those whose sizes sum to at most 128.
    let mut want = Vec::new();
    let mut used = 0;
    for r in recs.iter().rev() {
        if used + r.len() > 128 {
            break;
        }
        used += r.len();
        want.push(r.clone());
    }
    assert_eq!(got.iter().map(|g| g.2.clone()).collect::<Vec<_>>(), want);
    assert_eq!(got[0].1, head, "the first one delivered is at the head");
}

#[test]
fn backward_delivers_records_that_fill_the_ring_exactly() {
    // Unlike tools/lib/perf's `>=`, a record ending exactly one ring size from the head
    // is whole (it ends where the newest record starts).
    let mut data = vec![0u8; 64];
    let recs: Vec<_> = (0..8u32).map(|i| record(i, 16, i as u8)).collect();
    let head = write_backward(&mut data, &recs);
    let got = collect_backward(&data, head, 64).unwrap();
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [7, 6, 5, 4]);
}

#[test]
fn backward_limit_stops_at_the_previous_head() {
    let mut data = vec![0u8; 256];
    let head1 = write_backward(&mut data, &[record(1, 16, 0), record(2, 16, 0)]);
    let mut more = data.clone();
    let recs2 = [record(1, 16, 0), record(2, 16, 0), record(3, 24, 0), record(4, 8, 0)];
    let head2 = write_backward(&mut more, &recs2);
    let got = collect_backward(&more, head2, head1.wrapping_sub(head2)).unwrap();
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [4, 3]);
    assert!(collect_backward(&more, head2, 0).unwrap().is_empty());
}

#[test]
fn backward_corrupt_header_is_named() {
    let mut data = vec![0u8; 64];
    let head = write_backward(&mut data, &[record(1, 16, 0), record(2, 16, 0)]);
    // The older record's header (at head + 16) says 4 bytes.
    put(&mut data, head.wrapping_add(16), &[1, 0, 0, 0, 0, 0, 4, 0]);
    let mut n = 0;
    let r = walk_backward(&data, head, 64, &mut Vec::new(), |_| {
        n += 1;
        Ok::<(), Infallible>(())
    });
    let Err(ConsumeError::Kernel(e)) = r else { panic!("expected an error") };
    let msg = e.to_string();
    assert_eq!(corrupt(e), (48, u16::from_ne_bytes([4, 0]) as u64, CorruptReason::TooSmall));
    assert!(msg.contains("data offset 48"), "{msg}");
    assert_eq!(n, 1, "the newest record came first");
    put(&mut data, head.wrapping_add(16), &record(1, 16, 0)[..6]);
    put(&mut data, head.wrapping_add(22), &20u16.to_ne_bytes());
    assert_eq!(corrupt(collect_backward(&data, head, 64).unwrap_err()).2, CorruptReason::Unaligned);
}

#[test]
fn lost_and_sample_records_decode() {
    let mut bytes = record(RECORD_LOST, 24, 0);
    bytes[16..24].copy_from_slice(&77u64.to_ne_bytes());
    let rec = PerfRecord { kind: RECORD_LOST, misc: 0, pos: 0, bytes: &bytes };
    assert_eq!(rec.lost(), Some(77));
    assert_eq!(rec.body().len(), 16);
    assert_eq!(Sample::parse(&rec, SAMPLE_TIME), None, "not a sample");

    // IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD: 9 words.
    let all = SAMPLE_IDENTIFIER
        | SAMPLE_IP
        | SAMPLE_TID
        | SAMPLE_TIME
        | SAMPLE_ADDR
        | SAMPLE_ID
        | SAMPLE_STREAM_ID
        | SAMPLE_CPU
        | SAMPLE_PERIOD;
    let mut bytes = record(RECORD_SAMPLE, 80, 0);
    let words: [u64; 9] = [5, 0x4000, 0, 99, 0xdead, 5, 6, 0, 1000];
    for (i, w) in words.iter().enumerate() {
        bytes[8 + 8 * i..16 + 8 * i].copy_from_slice(&w.to_ne_bytes());
    }
    bytes[24..28].copy_from_slice(&10u32.to_ne_bytes());
    bytes[28..32].copy_from_slice(&11u32.to_ne_bytes());
    bytes[64..68].copy_from_slice(&1u32.to_ne_bytes());
    let rec = PerfRecord { kind: RECORD_SAMPLE, misc: 0, pos: 0, bytes: &bytes };
    let s = Sample::parse(&rec, all).unwrap();
    assert_eq!(
        s,
        Sample {
            ip: Some(0x4000),
            pid: Some(10),
            tid: Some(11),
            time: Some(99),
            addr: Some(0xdead),
            id: Some(5),
            stream_id: Some(6),
            cpu: Some(1),
            period: Some(1000),
        }
    );
    let short = PerfRecord { bytes: &bytes[..72], ..rec };
    assert_eq!(Sample::parse(&short, all), None);
    assert_eq!(Sample::parse(&short, SAMPLE_IDENTIFIER | SAMPLE_PERIOD).unwrap().period, Some(0x4000));
}

/// A data area: random bytes, or records written as the kernel writes them (either
/// direction) with some bytes then overwritten at random.
/// A cursor position: anywhere, or within a few KiB below `u64::MAX`, so
/// that the walks cross the wrap of the 64-bit counters often (a position
/// the kernel reaches after 16 EiB, and a test reaches only if it draws it).
fn position() -> impl Strategy<Value = u64> {
    prop_oneof![any::<u64>(), (u64::MAX - 4096)..=u64::MAX]
}

fn image() -> impl Strategy<Value = (Vec<u8>, u64, u64)> {
    let random = (3u32..10, position(), 0u64..1100).prop_flat_map(|(shift, start, span)| {
        (proptest::collection::vec(any::<u8>(), 1usize << shift), Just(start), Just(start.wrapping_add(span)))
    });
    let written = (
        3u32..10,
        position(),
        any::<bool>(),
        proptest::collection::vec(1u16..12, 0..200),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    )
        .prop_map(|(shift, start, backward, sizes, flips)| {
            let mut data = vec![0u8; 1 << shift];
            let recs: Vec<_> = sizes.iter().enumerate().map(|(i, s)| record(i as u32, s * 8, i as u8)).collect();
            let (tail, head) = if backward {
                (0, write_backward(&mut data, &recs))
            } else {
                // Forward: only what fits after the tail (the kernel respects it).
                let mut fit = Vec::new();
                let mut used = 0;
                for r in recs {
                    if used + r.len() > data.len() {
                        break;
                    }
                    used += r.len();
                    fit.push(r);
                }
                (start, write_forward(&mut data, start, &fit))
            };
            for (i, b) in flips {
                let at = i.index(data.len());
                data[at] = b;
            }
            (data, tail, head)
        });
    prop_oneof![random, written]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn walks_never_panic_and_deliver_only_records_within_bounds(
        (data, tail, head) in image(),
        limit in prop_oneof![Just(u64::MAX), 0u64..1200],
    ) {
        let size = data.len() as u64;
        let mask = size - 1;
        let at = |pos: u64, len: usize| -> Vec<u8> { (0..len as u64).map(|i| data[(pos.wrapping_add(i) & mask) as usize]).collect() };

        let mut cursor = tail;
        let mut expect_pos = tail;
        let r = walk_forward(&data, &mut cursor, head, &mut Vec::new(), |rec| {
            prop_assert_eq!(rec.pos, expect_pos);
            prop_assert!(rec.bytes.len() >= 8 && rec.bytes.len() % 8 == 0);
            prop_assert!(rec.pos.wrapping_sub(tail) + rec.bytes.len() as u64 <= head.wrapping_sub(tail));
            prop_assert_eq!(rec.bytes, &at(rec.pos, rec.bytes.len())[..]);
            expect_pos = rec.pos.wrapping_add(rec.bytes.len() as u64);
            Ok(())
        });
        match r {
            Ok(_) => prop_assert_eq!(cursor, head),
            Err(ConsumeError::Callback(e)) => return Err(e),
            Err(ConsumeError::Kernel(_)) => prop_assert_eq!(cursor, expect_pos),
            Err(e) => panic!("a walk fails with a kernel error or the callback's: {e:?}"),
        }

        let mut walked = 0u64;
        let r = walk_backward(&data, head, limit, &mut Vec::new(), |rec| {
            prop_assert_eq!(rec.pos, head.wrapping_add(walked));
            prop_assert!(rec.bytes.len() >= 8 && rec.bytes.len() % 8 == 0);
            walked += rec.bytes.len() as u64;
            prop_assert!(walked <= limit.min(size));
            prop_assert_eq!(rec.bytes, &at(rec.pos, rec.bytes.len())[..]);
            Ok(())
        });
        if let Err(ConsumeError::Callback(e)) = r {
            return Err(e);
        }
    }
}

/// `data` as 8-byte words, for a [`DataArea`] (a mapping's view) over them.
fn words(data: &[u8]) -> Vec<AtomicU64> {
    data.chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            AtomicU64::new(u64::from_ne_bytes(w))
        })
        .collect()
}

/// The view a ring reads its mapping through, over `words`.
fn view(words: &[AtomicU64]) -> DataArea<'_> {
    // SAFETY: the words are 8-aligned, readable while borrowed, and accessed by atomics
    // only.
    unsafe { DataArea::new(NonNull::from(words).cast::<u8>(), std::mem::size_of_val(words)) }
}

#[test]
fn the_view_copies_any_range_word_by_word() {
    let data: Vec<u8> = (0..64u8).collect();
    let w = words(&data);
    let area = view(&w);
    for off in 0..64 {
        for len in 0..=64 - off {
            let mut out = vec![0xee; len];
            super::walk::Area::copy_to(&area, off, &mut out);
            assert_eq!(out, &data[off..off + len], "{off} + {len}");
        }
    }
}

#[test]
#[should_panic(expected = "outside a data area")]
fn the_view_refuses_a_copy_past_its_end() {
    let w = words(&[0; 16]);
    super::walk::Area::copy_to(&view(&w), 9, &mut [0; 8]);
}

/// A walk over a data area that another thread rewrites all the while (as the kernel
/// may, see `map::DataArea`) ends, and lends only records as long as their header says.
#[test]
fn walks_over_a_view_that_changes_meanwhile_end_and_stay_in_bounds() {
    let recs: Vec<_> = (0..20u8).map(|i| record(i.into(), 8 * (1 + u16::from(i % 5)), i)).collect();
    let mut data = vec![0u8; 512];
    let newest = write_backward(&mut data, &recs);
    let w = words(&data);
    let stop = AtomicBool::new(false);
    let passes = AtomicU64::new(0);
    /// Stops the writer however the reader ends (a failed assertion too: the scope
    /// waits for the writer before the panic goes on).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut x = 1u64;
            while !stop.load(Ordering::Relaxed) {
                for (i, word) in w.iter().enumerate() {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    // Sizes of 0..=255 bytes in the header words, anything elsewhere.
                    let v = if i % 2 == 0 { x & 0x00ff_0000_ffff_ffff } else { x };
                    word.store(v, Ordering::Relaxed);
                }
                passes.fetch_add(1, Ordering::Relaxed);
            }
        });
        let _stop = Stop(&stop);
        let area = view(&w);
        let mut scratch = Vec::new();
        // At least 2000 walks of each kind, and on until the writer rewrote the area
        // 20000 times or 5 s passed (a loaded machine may give the writer little time).
        let start = std::time::Instant::now();
        let mut i = 0u64;
        while i < 2000
            || (passes.load(Ordering::Relaxed) < 20_000 && start.elapsed() < std::time::Duration::from_secs(5))
        {
            i += 1;
            let check = |rec: PerfRecord<'_>| {
                let size = u16::from_ne_bytes([rec.bytes[6], rec.bytes[7]]);
                // The header lent is the one the walk checked, even if the memory changed.
                assert_eq!(rec.bytes.len(), usize::from(size));
                assert_eq!(u32::from_ne_bytes(rec.bytes[..4].try_into().unwrap()), rec.kind);
                assert_eq!(u16::from_ne_bytes([rec.bytes[4], rec.bytes[5]]), rec.misc);
                Ok::<(), Infallible>(())
            };
            // Aligned tails, and misaligned ones (a header that wraps).
            let mut tail = i.wrapping_mul(if i % 2 == 0 { 8 } else { 3 });
            let head = tail.wrapping_add(512);
            let _ = forward(&area, &mut tail, head, &mut scratch, check);
            let _ = backward(&area, newest, 512, &mut scratch, check);
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// The rings walk their mapping through `DataArea`, which copies every record: they
    /// deliver exactly what the public walks deliver over the same bytes.
    #[test]
    fn walks_over_the_view_deliver_what_walks_over_the_bytes_deliver(
        (data, tail, head) in image(),
        limit in prop_oneof![Just(u64::MAX), 0u64..1200],
    ) {
        let w = words(&data);
        let area = view(&w);
        let text = |r: Result<Got, KernelError>| r.map_err(|e| e.to_string());

        let (mut t1, mut t2) = (tail, tail);
        let bytes = collect(|f| walk_forward(&data, &mut t1, head, &mut Vec::new(), f));
        let viewed = collect(|f| forward(&area, &mut t2, head, &mut Vec::new(), f));
        prop_assert_eq!(text(bytes), text(viewed));
        prop_assert_eq!(t1, t2);

        let bytes = collect_backward(&data, head, limit);
        let viewed = collect(|f| backward(&area, head, limit, &mut Vec::new(), f));
        prop_assert_eq!(text(bytes), text(viewed));
    }
}
