//! A channel's doorbell: an idle reader sleeps until a commit wakes it, and no commit
//! leaves it asleep (the no-lost-wakeup protocol, `wait::flag`, whose loom model sits
//! beside it), for the blocking `poll` and the async reader.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::asleep::voluntary_switches;
use common::channel::{parse, record};
use ringtrace::clock::Monotonic;
use ringtrace::config::{Discard, Overwrite};
use ringtrace::{Channel, Wakeup};

/// Added to a writer's tag on its last record.
const END: u64 = 100;

/// A reader that looked every millisecond woke about 300 times in this test; a reader
/// on a doorbell, a handful.
#[test]
fn an_idle_reader_sleeps_until_a_commit_wakes_it() {
    let channel = Channel::<Discard, Monotonic>::builder(1 << 16).build(Monotonic).unwrap();
    let mut producer = channel.producer().unwrap();
    let mut reader = channel.reader().unwrap();
    let before = voluntary_switches();
    let start = Instant::now();
    let mut got = Vec::new();
    std::thread::scope(|s| {
        let producer = &mut producer;
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            producer.output(b"late", Wakeup::Default).unwrap();
        });
        let n = reader.poll(Some(Duration::from_secs(30)), |r| got.push(r.data.to_vec())).unwrap();
        assert_eq!(n, 1);
    });
    let (elapsed, switches) = (start.elapsed(), voluntary_switches() - before);
    assert_eq!(got, [b"late".to_vec()]);
    assert!(elapsed >= Duration::from_millis(300), "woke before the commit: {elapsed:?}");
    assert!(switches < 30, "the idle reader woke {switches} times in {elapsed:?}");
}

/// Writers that each wait for their last record to be delivered before they write the
/// next, with drawn pauses, so that commits land at every point of the reader's way to
/// sleep (its reset of the doorbell, its flag, its look, its sleep). A lost wakeup
/// leaves a record unread for the whole 10 s timeout of the reader's poll.
macro_rules! no_commit_is_left_unread {
    ($name:ident, $mode:ty) => {
        #[test]
        fn $name() {
            const WRITERS: usize = 2;
            let channel = Channel::<$mode, Monotonic>::builder(1 << 16).slack(Duration::ZERO).build(Monotonic).unwrap();
            let mut reader = channel.reader().unwrap();
            let delivered: [AtomicU64; WRITERS] = Default::default();
            let written = AtomicU64::new(0);
            let run = Duration::from_millis(1500);
            std::thread::scope(|s| {
                for t in 0..WRITERS {
                    let (channel, delivered, written) = (&channel, &delivered, &written);
                    s.spawn(move || {
                        let mut producer = channel.producer().unwrap();
                        let start = Instant::now();
                        let mut seq = 0u64;
                        let mut last = false;
                        while !last {
                            // The last record's tag says so (the writer's tag + END).
                            last = start.elapsed() >= run;
                            let tag = t as u64 + if last { END } else { 0 };
                            producer.output(&record(tag, seq), Wakeup::Default).unwrap();
                            written.fetch_add(1, Ordering::Relaxed);
                            seq += 1;
                            // Until the reader has it (bounded: a lost wakeup fails the
                            // reader's poll first).
                            let wait = Instant::now();
                            while delivered[t].load(Ordering::Acquire) < seq && wait.elapsed() < Duration::from_secs(20)
                            {
                                std::thread::yield_now();
                            }
                            // A drawn pause: none, a spin, a yield or a short sleep.
                            match (seq * 7 + t as u64) % 4 {
                                0 => {}
                                1 => (0..seq % 500).for_each(|_| std::hint::spin_loop()),
                                2 => std::thread::yield_now(),
                                _ => std::thread::sleep(Duration::from_micros(seq % 50)),
                            }
                        }
                    });
                }
                let (mut total, mut ended) = (0u64, 0);
                while ended < WRITERS {
                    let began = Instant::now();
                    let n = reader
                        .poll(Some(Duration::from_secs(10)), |rec| {
                            let (tag, seq) = parse(&rec);
                            ended += usize::from(tag >= END);
                            let slot = &delivered[(tag % END) as usize];
                            assert_eq!(slot.load(Ordering::Relaxed), seq, "writer {tag}: in order, none missing");
                            // Release: pairs with the writer's Acquire load.
                            slot.store(seq + 1, Ordering::Release);
                        })
                        .unwrap();
                    total += n as u64;
                    // The poll reads once more when its time is up: a lost wakeup shows
                    // as a poll that lasted its whole timeout.
                    let slept = began.elapsed();
                    assert!(
                        n > 0 && slept < Duration::from_secs(9),
                        "a commit left the reader asleep for {slept:?} ({total} delivered)"
                    );
                }
            });
            let written = written.load(Ordering::Relaxed);
            assert!(written > 100, "the writers wrote {written}");
            let stats = channel.stats();
            assert_eq!((stats.written, stats.read, stats.lost), (written, written, 0), "{stats:?}");
        }
    };
}

no_commit_is_left_unread!(no_commit_is_left_unread_in_discard_mode, Discard);
no_commit_is_left_unread!(no_commit_is_left_unread_in_overwrite_mode, Overwrite);
