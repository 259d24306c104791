//! A live channel reader dropped while it holds records it copied out of the rings
//! (held back by the slack, or past a callback's early stop) hands them to the next
//! reader: no record goes missing between readers.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use ringtrace::clock::Monotonic;
use ringtrace::config::Discard;
use ringtrace::{Channel, Wakeup};

/// Reads until `n` records came or the deadline passed.
fn read_all(channel: &Channel<Discard, Monotonic>, n: usize) -> Vec<Vec<u8>> {
    let mut reader = channel.reader().unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        got.extend(reader.iter().unwrap().map(|r| r.data.to_vec()));
    }
    got
}

/// Records held back by the slack when the reader goes come from the next one.
#[test]
fn records_held_back_by_the_slack_pass_to_the_next_reader() {
    let channel =
        Channel::<Discard, Monotonic>::builder(4096).slack(Duration::from_secs(3600)).build(Monotonic).unwrap();
    // Two producers on threads of their own, each attached until told to exit: the
    // first writes "0" and idles, the second then writes "a", "b", "c".
    let writer = |records: &'static [&'static [u8]]| {
        let (wrote, exit) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let channel = channel.clone();
        let thread = std::thread::spawn(move || {
            for r in records {
                channel.output(r, Wakeup::Default).unwrap();
            }
            wrote.0.send(()).unwrap();
            let _ = exit.1.recv();
        });
        wrote.1.recv().unwrap();
        (thread, exit.0)
    };
    let idle = writer(&[b"0"]);
    let busy = writer(&[b"a", b"b", b"c"]);
    let mut reader = channel.reader().unwrap();
    // "0" is delivered; "a", "b", "c" are copied out and held: the idle producer could
    // still write a record older than them, for an hour.
    let first: Vec<Vec<u8>> = reader.iter().unwrap().map(|r| r.data.to_vec()).collect();
    assert_eq!(first, [b"0".to_vec()]);
    drop(reader);
    // The producers' threads exit: nothing older can come, the next reader delivers.
    for (thread, exit) in [idle, busy] {
        exit.send(()).unwrap();
        thread.join().unwrap();
    }
    assert_eq!(read_all(&channel, 3), [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Readers made and dropped at drawn moments (some after a callback stopped them
    /// early) between drawn writes: every record is delivered once, in order.
    #[test]
    fn readers_dropped_between_calls_lose_nothing(
        steps in prop::collection::vec((1usize..40, 0usize..5, any::<bool>()), 1..20),
    ) {
        let channel = Channel::<Discard, Monotonic>::builder(1 << 16)
            .slack(Duration::from_millis(1))
            .build(Monotonic)
            .unwrap();
        let mut next = 0u32;
        let mut got: Vec<u32> = Vec::new();
        for (writes, take, early) in steps {
            for _ in 0..writes {
                channel.output(&next.to_le_bytes(), Wakeup::Default).unwrap();
                next += 1;
            }
            let mut reader = channel.reader().unwrap();
            if early {
                // Stop at record `take`: the rest stay staged in this reader. The record
                // the callback fails on is delivered (and counted read) all the same.
                let mut n = 0;
                let _ = reader.consume(|r| {
                    got.push(u32::from_le_bytes(r.data.try_into().unwrap()));
                    n += 1;
                    if n > take { Err(()) } else { Ok(()) }
                });
            } else {
                got.extend(reader.iter().unwrap().map(|r| u32::from_le_bytes(r.data.try_into().unwrap())));
            }
        }
        std::thread::sleep(Duration::from_millis(2));
        got.extend(read_all(&channel, next as usize - got.len()).iter().map(|d| u32::from_le_bytes(d[..].try_into().unwrap())));
        prop_assert_eq!(got, (0..next).collect::<Vec<_>>());
    }
}

/// Four writer threads and a reader replaced every few passes while they write: each
/// producer's records arrive once, in order, none missing.
#[test]
fn readers_replaced_under_concurrent_writers_lose_nothing() {
    const PER: u32 = 50_000;
    let channel =
        Channel::<Discard, Monotonic>::builder(1 << 16).slack(Duration::from_millis(2)).build(Monotonic).unwrap();
    let writers: Vec<_> = (0..4u32)
        .map(|w| {
            let channel = channel.clone();
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(60);
                for i in 0..PER {
                    let rec = [w.to_le_bytes(), i.to_le_bytes()].concat();
                    // A full ring is waited out (the reader is being replaced).
                    while channel.output(&rec, Wakeup::Default).is_err() {
                        assert!(Instant::now() < deadline, "writer {w} stuck at {i}");
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    let mut next = [0u32; 4];
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut replaced = 0u32;
    while next.iter().any(|&n| n < PER) {
        assert!(Instant::now() < deadline, "records missing: {next:?} of {PER} each");
        let mut reader = channel.reader().unwrap();
        replaced += 1;
        for _ in 0..1 + replaced % 5 {
            for r in reader.iter().unwrap() {
                let w = u32::from_le_bytes(r.data[..4].try_into().unwrap()) as usize;
                let i = u32::from_le_bytes(r.data[4..].try_into().unwrap());
                assert_eq!(i, next[w], "writer {w}: record {i} came where {} was due", next[w]);
                next[w] += 1;
            }
        }
    }
    for w in writers {
        w.join().unwrap();
    }
    // The exited producers' rings were freed once drained: their counts are in the sums.
    let stats = channel.stats();
    assert_eq!((stats.written, stats.read), (u64::from(4 * PER), u64::from(4 * PER)), "{stats:?}");
}
