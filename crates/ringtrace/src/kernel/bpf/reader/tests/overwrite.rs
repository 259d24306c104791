//! Overwrite mode (`BPF_F_RB_OVERWRITE`, Linux 6.19): the reader against the simulated
//! kernel ring writing over what it has not read.

use super::*;

#[test]
fn overwrite_mode_is_not_ready_at_a_record_still_being_written() {
    let sim = Sim::new(4096, true);
    let mut r = Reader::new(sim.clone(), true).unwrap();
    let a = sim.reserve(8).unwrap();
    assert!(!r.ready(), "BUSY at the read position");
    assert!(r.arm());
    sim.write(a, &record(0, 8));
    sim.commit(a, false);
    assert!(r.ready());
}

#[test]
fn overwrite_mode_keeps_the_newest_records_and_counts_the_bytes_lost() {
    let sim = Sim::new(4096, true);
    let mut r = Reader::new(sim.clone(), true).unwrap();
    let mut written = 0u64;
    for s in 0..1000u64 {
        assert!(sim.output(&record(s, 8 + (s % 5) as usize * 8)), "overwrite never refuses");
        written += footprint(8 + (s % 5) as u32 * 8);
    }
    let mut got = Vec::new();
    let mut bytes = 0;
    r.consume(usize::MAX, |_, rec| {
        got.push(check(rec));
        bytes += footprint(rec.len() as u32);
        Ok::<(), Never>(())
    })
    .unwrap();
    assert_eq!(*got.last().unwrap(), 999, "ends at the newest");
    assert!(got.windows(2).all(|w| w[1] == w[0] + 1), "a contiguous run");
    assert!(got.len() > 50);
    assert_eq!(r.pos, written);
    assert_eq!(r.stats.overwritten_bytes, sim.over.load(Ordering::Relaxed));
    assert_eq!(r.stats.overwritten_bytes + bytes, written, "every byte delivered or counted as overwritten");

    // Newest to oldest, without consuming.
    for s in 1000..1010u64 {
        assert!(sim.output(&record(s, 8)));
    }
    let snap = r.snapshot().unwrap();
    let newest: Vec<u64> = snap.iter().rev().map(seq_of).collect();
    assert_eq!(newest, (1000..1010).rev().collect::<Vec<_>>());
}

#[test]
fn overwrite_snapshot_of_an_unread_ring_starts_at_overwrite_pos() {
    let sim = Sim::new(4096, true);
    let r = Reader::new(sim.clone(), true).unwrap();
    for s in 0..500u64 {
        assert!(sim.output(&record(s, 40)));
    }
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.oldest_position(), sim.over.load(Ordering::Relaxed));
    let seqs: Vec<u64> = snap.iter().map(check).collect();
    assert_eq!(*seqs.last().unwrap(), 499);
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
    assert_eq!(seqs.len() as u64, (4096 - 8) / 48, "a full ring of 48-byte records, less the partial one");
}

#[test]
fn overwrite_reader_racing_the_producer_delivers_only_intact_records() {
    let sim = Sim::new(8192, true);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let producer = {
        let (sim, stop) = (sim.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut s = 0u64;
            while !stop.load(Ordering::Relaxed) {
                sim.output(&record(s, 8 + (s % 11) as usize * 8));
                s += 1;
            }
            s
        })
    };
    let mut r = Reader::new(sim.clone(), true).unwrap();
    let mut last: Option<u64> = None;
    let mut delivered = 0u64;
    let mut busy = 0;
    let mut calls = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // Until 100k records arrived (the producer thread may start late), bounded in time.
    while delivered < 100_000 && std::time::Instant::now() < deadline {
        calls += 1;
        match r.consume(usize::MAX, |_, rec| {
            let s = check(rec);
            assert!(last.is_none_or(|l| s > l), "in order: {s} after {last:?}");
            last = Some(s);
            delivered += 1;
            Ok::<(), Never>(())
        }) {
            Ok(_) => {}
            Err(ConsumeError::Busy) => busy += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let written = producer.join().unwrap();
    assert!(delivered >= 100_000 && delivered <= written, "{delivered} of {written}");
    assert!(busy < calls, "{busy} of {calls} reads found everything overwritten");
}
