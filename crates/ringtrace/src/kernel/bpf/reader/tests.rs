//! The reading algorithm against a simulated kernel ring: the kernel's reserve, commit
//! and discard (`kernel/bpf/ringbuf.c`, with the 6.19 overwrite mode) over heap memory,
//! so that overwrite mode is tested on kernels that do not have it, and corrupt images
//! can be fed to the reader.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use super::{Reader, RingMem};
use crate::error::ConsumeError;
use crate::format::record::{footprint, BUSY_BIT, DISCARD_BIT};

/// A simulated `struct bpf_ringbuf`: one producer (the kernel's lock makes reservation
/// serial anyway), data words stored twice (the double mapping).
struct Sim {
    size: u64,
    words: Box<[AtomicU32]>,
    cons: AtomicU64,
    prod: AtomicU64,
    over: AtomicU64,
    pending: AtomicU64,
    overwrite: bool,
}

impl Sim {
    fn new(size: u64, overwrite: bool) -> Arc<Sim> {
        let words = (0..2 * size / 4).map(|_| AtomicU32::new(0)).collect();
        Arc::new(Sim {
            size,
            words,
            cons: AtomicU64::new(0),
            prod: AtomicU64::new(0),
            over: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            overwrite,
        })
    }

    fn store(&self, pos: u64, v: u32) {
        let i = ((pos & (self.size - 1)) / 4) as usize;
        self.words[i].store(v, Ordering::Release);
        self.words[i + (self.size / 4) as usize].store(v, Ordering::Release);
    }

    fn load(&self, pos: u64) -> u32 {
        self.words[((pos & (self.size - 1)) / 4) as usize].load(Ordering::Acquire)
    }

    /// `__bpf_ringbuf_reserve`: the record's position, or None.
    fn reserve(&self, len: u32) -> Option<u64> {
        let fp = footprint(len);
        let mask = self.size - 1;
        if fp > mask {
            return None;
        }
        let cons = self.cons.load(Ordering::Acquire);
        let prod = self.prod.load(Ordering::Relaxed);
        let mut pend = self.pending.load(Ordering::Relaxed);
        while pend < prod {
            let l = self.load(pend);
            if l & BUSY_BIT != 0 {
                break;
            }
            pend += footprint(l & !DISCARD_BIT);
        }
        self.pending.store(pend, Ordering::Relaxed);
        let new_prod = prod + fp;
        if new_prod - pend > mask || (!self.overwrite && new_prod - cons > mask) {
            return None;
        }
        if self.overwrite {
            let mut over = self.over.load(Ordering::Relaxed);
            while new_prod - over > mask {
                over += footprint(self.load(over) & !(BUSY_BIT | DISCARD_BIT));
            }
            self.over.store(over, Ordering::Relaxed);
        }
        self.store(prod, len | BUSY_BIT);
        self.store(prod + 4, 7); // pg_off
        self.prod.store(new_prod, Ordering::Release);
        Some(prod)
    }

    fn write(&self, pos: u64, payload: &[u8]) {
        for (k, chunk) in payload.chunks(4).enumerate() {
            let mut w = [0u8; 4];
            w[..chunk.len()].copy_from_slice(chunk);
            self.store(pos + 8 + 4 * k as u64, u32::from_ne_bytes(w));
        }
    }

    fn commit(&self, pos: u64, discard: bool) {
        let l = self.load(pos) & !BUSY_BIT;
        self.store(pos, if discard { l | DISCARD_BIT } else { l });
    }

    fn output(&self, payload: &[u8]) -> bool {
        match self.reserve(payload.len() as u32) {
            Some(pos) => {
                self.write(pos, payload);
                self.commit(pos, false);
                true
            }
            None => false,
        }
    }
}

impl RingMem for Arc<Sim> {
    fn size(&self) -> u64 {
        self.size
    }
    fn consumer_pos(&self) -> &AtomicU64 {
        &self.cons
    }
    fn producer_pos(&self) -> &AtomicU64 {
        &self.prod
    }
    fn overwrite_pos(&self) -> &AtomicU64 {
        &self.over
    }
    fn header(&self, pos: u64) -> &AtomicU32 {
        &self.words[((pos & (self.size - 1)) / 4) as usize]
    }
    fn bytes(&self, pos: u64, len: usize) -> &[u8] {
        let at = (pos & (self.size - 1)) as usize;
        assert!(at + len <= 2 * self.size as usize);
        // SAFETY: `[at, at + len)` lies inside `words` (2 * size bytes); u8 has no
        // alignment; the reader asks only for committed bytes nobody stores to while
        // they are borrowed (discard mode, single-threaded tests).
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>().add(at), len) }
    }
    fn copy(&self, pos: u64, out: &mut [u8]) {
        for (k, dst) in out.chunks_exact_mut(4).enumerate() {
            dst.copy_from_slice(
                &self.words[(((pos + 4 * k as u64) & (self.size - 1)) / 4) as usize]
                    .load(Ordering::Relaxed)
                    .to_ne_bytes(),
            );
        }
    }
}

/// Record `seq`: `len` bytes, the seq in the first 8 (when there is room), then a
/// pattern of it.
fn record(seq: u64, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len).map(|i| (seq as u8).wrapping_mul(31).wrapping_add(i as u8)).collect();
    if len >= 8 {
        v[..8].copy_from_slice(&seq.to_ne_bytes());
    }
    v
}

fn seq_of(rec: &[u8]) -> u64 {
    u64::from_ne_bytes(rec[..8].try_into().unwrap())
}

fn check(rec: &[u8]) -> u64 {
    let s = seq_of(rec);
    assert_eq!(rec, &record(s, rec.len())[..], "record {s} corrupted");
    s
}

type Never = std::convert::Infallible;

#[test]
fn discard_mode_delivers_in_order_skips_discards_and_hands_space_back() {
    let sim = Sim::new(4096, false);
    let mut r = Reader::new(sim.clone(), false).unwrap();
    let mut next = 0u64;
    let mut want = Vec::new();
    for round in 0..200u64 {
        // Fill with records of varying lengths, discarding every third.
        for k in 0..(round % 7 + 1) {
            let len = 8 + ((round * 7 + k * 13) % 90) as usize;
            let Some(pos) = sim.reserve(len as u32) else { break };
            sim.write(pos, &record(next, len));
            let discard = next % 3 == 2;
            sim.commit(pos, discard);
            if !discard {
                want.push(next);
            }
            next += 1;
        }
        let mut got = Vec::new();
        r.consume(usize::MAX, |_, rec| {
            got.push(check(rec));
            Ok::<(), Never>(())
        })
        .unwrap();
        assert_eq!(got, want, "round {round}");
        want.clear();
        let (cons, prod) = (sim.cons.load(Ordering::Relaxed), sim.prod.load(Ordering::Relaxed));
        assert!(prod - cons <= footprint(97), "all but the last record handed back");
        assert!(r.arm());
        assert_eq!(sim.cons.load(Ordering::Relaxed), prod, "arm hands back the rest");
    }
    assert_eq!(r.stats.discarded, next / 3);
}

#[test]
fn a_busy_record_stops_delivery_until_it_is_committed() {
    let sim = Sim::new(4096, false);
    let mut r = Reader::new(sim.clone(), false).unwrap();
    let a = sim.reserve(8).unwrap();
    sim.write(a, &record(0, 8));
    assert!(sim.output(&record(1, 8)));
    assert_eq!(r.consume(usize::MAX, |_, _| Ok::<(), Never>(())).unwrap(), 0);
    assert!(!r.ready());
    assert!(r.arm(), "safe to sleep: the kernel wakes the reader when it commits the record at its position");
    sim.commit(a, false);
    assert!(r.ready() && !r.arm());
    let mut got = Vec::new();
    r.consume(usize::MAX, |_, rec| {
        got.push(check(rec));
        Ok::<(), Never>(())
    })
    .unwrap();
    assert_eq!(got, [0, 1]);
}

#[test]
fn consume_n_and_callback_errors_keep_the_rest() {
    let sim = Sim::new(4096, false);
    let mut r = Reader::new(sim.clone(), false).unwrap();
    for s in 0..10 {
        assert!(sim.output(&record(s, 16)));
    }
    let mut got = Vec::new();
    assert_eq!(
        r.consume(3, |_, rec| {
            got.push(check(rec));
            Ok::<(), Never>(())
        })
        .unwrap(),
        3
    );
    let e = r.consume(usize::MAX, |_, rec| {
        if check(rec) == 5 {
            Err("stop")
        } else {
            got.push(seq_of(rec));
            Ok(())
        }
    });
    assert!(matches!(e, Err(ConsumeError::Callback("stop"))));
    r.consume(usize::MAX, |_, rec| {
        got.push(check(rec));
        Ok::<(), Never>(())
    })
    .unwrap();
    assert_eq!(got, [0, 1, 2, 3, 4, 6, 7, 8, 9], "the failing record counts as consumed");
}

#[test]
fn batched_publication_lags_by_at_most_the_batch() {
    let sim = Sim::new(1 << 16, false);
    let mut r = Reader::new(sim.clone(), false).unwrap();
    r.batch = 1024;
    for s in 0..1000 {
        assert!(sim.output(&record(s, 24)));
    }
    let mut k = 0u64;
    let mut publications = 0;
    let mut last = 0;
    r.consume(usize::MAX, |_, _| {
        let c = sim.cons.load(Ordering::Relaxed);
        assert!(k * 32 - c <= 1024 + 32, "record {k}: consumer_pos {c} lags more than the batch");
        publications += (c != last) as u32;
        last = c;
        k += 1;
        Ok::<(), Never>(())
    })
    .unwrap();
    assert!(publications < 40, "{publications} publications for 32000 bytes in batches of 1024");
    assert_eq!(sim.cons.load(Ordering::Relaxed), 999 * 32, "all but the last record");
    assert!(r.arm());
    assert_eq!(sim.cons.load(Ordering::Relaxed), 1000 * 32);
}

#[test]
fn corrupt_lengths_and_positions_are_errors() {
    let sim = Sim::new(4096, false);
    sim.cons.store(4, Ordering::Relaxed);
    assert!(Reader::new(sim.clone(), false).is_err(), "misaligned consumer position");
    sim.cons.store(0, Ordering::Relaxed);
    sim.prod.store(8192, Ordering::Relaxed);
    assert!(Reader::new(sim.clone(), false).is_err(), "producer more than a ring ahead");

    let sim = Sim::new(4096, false);
    let mut r = Reader::new(sim.clone(), false).unwrap();
    assert!(sim.output(&record(0, 16)));
    sim.store(0, 4000); // length past the producer position
    let e = r.consume(usize::MAX, |_, _| Ok::<(), Never>(()));
    assert!(matches!(e, Err(ConsumeError::Corrupt { pos: 0, .. })), "{e:?}");

    // The producer position moved behind the reader (another process wrote it).
    let sim = Sim::new(4096, false);
    let mut r = Reader::new(sim.clone(), false).unwrap();
    assert!(sim.output(&record(0, 16)));
    r.consume(usize::MAX, |_, _| Ok::<(), Never>(())).unwrap();
    sim.prod.store(8, Ordering::Relaxed);
    let e = r.consume(usize::MAX, |_, _| Ok::<(), Never>(()));
    assert!(matches!(e, Err(ConsumeError::Positions { reader: 24, producer: 8 })), "{e:?}");
    assert!(e.unwrap_err().to_string().contains("positions are inconsistent"));
}

#[test]
fn large_records_are_not_held_back() {
    // Records of more than half the map: holding one back would refuse every next one.
    let sim = Sim::new(4096, false);
    let mut r = Reader::new(sim.clone(), false).unwrap();
    let mut got = 0;
    for s in 0..100 {
        assert!(sim.output(&record(s, 2100)), "record {s} refused");
        got += r
            .consume(usize::MAX, |_, rec| {
                assert_eq!(check(rec), s);
                Ok::<(), Never>(())
            })
            .unwrap();
    }
    assert_eq!(got, 100);
    // Small ones are held back, and `publish` hands them back.
    assert!(sim.output(&record(100, 8)));
    r.consume(usize::MAX, |_, _| Ok::<(), Never>(())).unwrap();
    assert_eq!(sim.cons.load(Ordering::Relaxed) + 16, sim.prod.load(Ordering::Relaxed));
    r.publish();
    assert_eq!(sim.cons.load(Ordering::Relaxed), sim.prod.load(Ordering::Relaxed));
}

#[test]
fn a_snapshot_beside_another_reader_starts_at_its_consumer_position() {
    // `ringtrace snapshot` opens its own handle while the map's reader consumes: what
    // that reader handed back, the kernel rewrites, so the copy starts at consumer_pos.
    let sim = Sim::new(1024, false);
    let inspector = Reader::new(sim.clone(), false).unwrap(); // opened at 0
    let mut reader = Reader::new(sim.clone(), false).unwrap();
    let mut s = 0;
    for _ in 0..20 {
        while sim.output(&record(s, 40)) {
            s += 1;
        }
        let mut n = 0;
        reader
            .consume(usize::MAX, |_, rec| {
                check(rec);
                n += 1;
                Ok::<(), Never>(())
            })
            .unwrap();
        assert!(reader.arm());
        // Half the ring again, over what was consumed.
        for _ in 0..10 {
            assert!(sim.output(&record(s, 40)));
            s += 1;
        }
        let snap = inspector.snapshot().unwrap();
        let seqs: Vec<u64> = snap.iter().map(check).collect();
        assert_eq!(seqs, (s - 10..s).collect::<Vec<_>>(), "only the records not consumed, intact");
        assert_eq!(snap.oldest_position(), sim.cons.load(Ordering::Relaxed));
        reader.consume(usize::MAX, |_, _| Ok::<(), Never>(())).unwrap();
        assert!(reader.arm());
    }
}

mod hostile;
mod overwrite;
