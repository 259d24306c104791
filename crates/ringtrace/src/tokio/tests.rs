//! Cancel safety, the stream's yield and the channel's napping, on rings private to
//! this process (whose doorbell is an eventfd).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures_core::Stream;

use super::{AsyncReader, ChannelItem, YIELD_EVERY};
use crate::clock::Monotonic;
use crate::config::Discard;
use crate::{Channel, MpscRing, Wakeup};

fn runtime() -> ::tokio::runtime::Runtime {
    ::tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn rec(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

fn num(rec: &[u8]) -> u64 {
    u64::from_le_bytes(rec.try_into().unwrap())
}

/// Bytes a record of 8 bytes takes in the ring (header included).
const REC_BYTES: u64 = 16;

#[test]
fn a_dropped_readable_future_loses_nothing() {
    runtime().block_on(async {
        let ring = MpscRing::new(4096).unwrap();
        let mut p = ring.producer().unwrap();
        let mut reader = AsyncReader::new(ring.consumer().unwrap()).unwrap();
        // Nothing there: the wait is cut short and dropped, armed.
        let cut = ::tokio::time::timeout(Duration::from_millis(20), reader.readable()).await;
        assert!(cut.is_err(), "readable() returned on an empty ring");
        for i in 0..3 {
            p.output(&rec(i), Wakeup::Default).unwrap();
        }
        ::tokio::time::timeout(Duration::from_secs(10), reader.readable()).await.expect("woken").unwrap();
        let mut got = Vec::new();
        let n = reader.consume(|r: &[u8]| got.push(num(r))).await.unwrap();
        assert_eq!((n, got), (3, vec![0, 1, 2]));
        assert_eq!(reader.get_ref().position(), 3 * REC_BYTES);
    });
}

#[test]
fn a_dropped_consume_future_reads_nothing() {
    runtime().block_on(async {
        let ring = MpscRing::new(4096).unwrap();
        let mut p = ring.producer().unwrap();
        let mut reader = AsyncReader::new(ring.consumer().unwrap()).unwrap();
        let mut seen = 0;
        let cut = ::tokio::time::timeout(Duration::from_millis(20), reader.consume(|_: &[u8]| seen += 1)).await;
        assert!(cut.is_err());
        assert_eq!((seen, reader.get_ref().position()), (0, 0));
        p.output(&rec(7), Wakeup::Default).unwrap();
        let n = ::tokio::time::timeout(Duration::from_secs(10), reader.consume(|r: &[u8]| assert_eq!(num(r), 7)))
            .await
            .expect("woken")
            .unwrap();
        assert_eq!(n, 1);
    });
}

#[test]
fn a_dropped_stream_leaves_what_it_did_not_hand_out() {
    use tokio_stream::StreamExt;
    runtime().block_on(async {
        let ring = MpscRing::new(4096).unwrap();
        let mut p = ring.producer().unwrap();
        for i in 0..10 {
            p.output(&rec(i), Wakeup::Default).unwrap();
        }
        let mut reader = AsyncReader::new(ring.consumer().unwrap()).unwrap();
        {
            let mut s = reader.stream();
            for i in 0..4 {
                assert_eq!(num(&s.next().await.unwrap().unwrap()), i);
            }
        }
        // Exactly the four handed out were consumed.
        assert_eq!(reader.get_ref().position(), 4 * REC_BYTES);
        let mut s = reader.into_stream();
        for i in 4..10 {
            assert_eq!(num(&s.next().await.unwrap().unwrap()), i);
        }
        // A `next()` cut short on an empty ring takes nothing; the record written
        // after it is the next one handed out.
        assert!(::tokio::time::timeout(Duration::from_millis(20), s.next()).await.is_err());
        p.output(&rec(10), Wakeup::Default).unwrap();
        let next = ::tokio::time::timeout(Duration::from_secs(10), s.next()).await.expect("woken");
        assert_eq!(num(&next.unwrap().unwrap()), 10);
        let consumer = s.into_inner().into_inner();
        assert_eq!(consumer.position(), 11 * REC_BYTES);
    });
}

/// Counts wakeups.
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn a_stream_that_never_runs_dry_yields_to_the_runtime() {
    runtime().block_on(async {
        let ring = MpscRing::new(1 << 16).unwrap();
        let mut p = ring.producer().unwrap();
        let total = YIELD_EVERY as u64 * 2 + 10;
        for i in 0..total {
            p.output(&rec(i), Wakeup::Default).unwrap();
        }
        let mut reader = AsyncReader::new(ring.consumer().unwrap()).unwrap();
        let mut s = reader.stream();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let (mut got, mut pendings) = (Vec::new(), Vec::new());
        while (got.len() as u64) < total {
            match std::pin::Pin::new(&mut s).poll_next(&mut cx) {
                Poll::Ready(Some(r)) => got.push(num(&r.unwrap())),
                Poll::Ready(None) => panic!("stream ended"),
                Poll::Pending => pendings.push(got.len()),
            }
        }
        assert_eq!(got, (0..total).collect::<Vec<_>>());
        let every = YIELD_EVERY as usize;
        assert_eq!(pendings, [every, 2 * every], "one yield after each {every} records");
        assert_eq!(count.0.load(Ordering::Relaxed), 2, "each yield wakes the task itself");
    });
}

#[test]
fn a_channel_reader_sleeps_on_its_doorbell_and_delivers_in_order() {
    use tokio_stream::StreamExt;
    runtime().block_on(async {
        let channel = Channel::<Discard, Monotonic>::builder(4096).build(Monotonic).unwrap();
        let mut reader = AsyncReader::new(channel.reader().unwrap()).unwrap();
        let writer = {
            let channel = channel.clone();
            std::thread::spawn(move || {
                for i in 0..50u64 {
                    channel.output(&rec(i), Wakeup::Default).unwrap();
                    if i % 10 == 0 {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
            })
        };
        let mut got = Vec::new();
        let mut s = reader.stream();
        while got.len() < 50 {
            let item: ChannelItem = ::tokio::time::timeout(Duration::from_secs(10), s.next())
                .await
                .expect("records within 10 s")
                .unwrap()
                .unwrap();
            got.push(num(&item.data));
        }
        assert_eq!(got, (0..50).collect::<Vec<_>>());
        writer.join().unwrap();
        // A cut-short `next()` on the idle channel takes nothing.
        assert!(::tokio::time::timeout(Duration::from_millis(10), s.next()).await.is_err());
        channel.output(&rec(50), Wakeup::Default).unwrap();
        assert_eq!(consume_within_10s(&mut reader).await, (1, vec![50]));

        // Idle, the reader sleeps on the channel's doorbell until a commit rings it
        // (a reader that looked every millisecond woke about 300 times).
        let before = voluntary_switches();
        let writer = {
            let channel = channel.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                channel.output(&rec(51), Wakeup::Default).unwrap();
            })
        };
        let got = consume_within_10s(&mut reader).await;
        writer.join().unwrap();
        let switches = voluntary_switches() - before;
        assert_eq!(got, (1, vec![51]));
        assert!(switches < 30, "the idle async reader woke {switches} times");
    });
}

/// One `consume` of an async channel reader, given 10 s: how many records, and their
/// numbers.
async fn consume_within_10s<C: crate::clock::Clock>(
    reader: &mut AsyncReader<crate::ChannelReader<Discard, C>>,
) -> (usize, Vec<u64>) {
    let mut got = Vec::new();
    let n = ::tokio::time::timeout(
        Duration::from_secs(10),
        reader.consume(|r: crate::channel::ChannelRecord<'_>| got.push(num(r.data))),
    )
    .await
    .expect("record within 10 s")
    .unwrap();
    (n, got)
}

/// The calling thread's voluntary context switches: each sleep that ends is one.
fn voluntary_switches() -> u64 {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("voluntary_ctxt_switches:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn the_stream_ends_and_consume_says_disconnected_once_every_producer_is_gone() {
    use tokio_stream::StreamExt;
    runtime().block_on(async {
        let ring = MpscRing::new(4096).unwrap();
        let mut reader = AsyncReader::new(ring.consumer().unwrap()).unwrap();
        let mut p = ring.producer().unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            for i in 0..3 {
                p.output(&rec(i), Wakeup::Default).unwrap();
            }
            // `p` dropped here: the last producer leaves.
        });
        let mut s = reader.stream();
        let mut got = Vec::new();
        // Bounded by the timeout: a stream that does not end fails the test.
        while let Some(r) = ::tokio::time::timeout(Duration::from_secs(10), s.next()).await.expect("the stream ends") {
            got.push(num(&r.unwrap()));
        }
        assert_eq!(got, [0, 1, 2], "every record, then the end");
        writer.join().unwrap();
        let r = ::tokio::time::timeout(Duration::from_secs(10), reader.consume(|_: &[u8]| ())).await.expect("returns");
        assert!(matches!(r, Err(crate::ConsumeError::Disconnected)), "{r:?}");
        // A producer that attaches again is read again.
        let mut p = ring.producer().unwrap();
        p.output(&rec(3), Wakeup::Default).unwrap();
        let n = reader.consume(|r: &[u8]| assert_eq!(num(r), 3)).await.unwrap();
        assert_eq!(n, 1);
    });
}
