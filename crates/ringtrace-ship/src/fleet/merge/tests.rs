//! The streaming merge against the timeline (its model): the same batches, read
//! partition by partition in any interleaving, give the timeline's records, order,
//! counts and gaps where no partition is more out of time order than the bound; each
//! record once, and the late ones counted, where one is.

use proptest::prelude::*;

use super::*;
use crate::fleet::Timeline;
use crate::frame::{Batch, BatchWriter, TimeSource};

/// A drawn topic: each message's partition and bytes, in the order each partition
/// holds them.
#[derive(Debug, Clone)]
struct Topic {
    partitions: usize,
    messages: Vec<(usize, Vec<u8>)>,
}

/// Sources (each on one partition, of one of two hosts) of records whose times step
/// back now and then; cut into batches, some sent twice (the copy later in the
/// partition), some dropped, some records too large (a marker); the partitions'
/// messages interleaved at random.
fn topic() -> impl Strategy<Value = Topic> {
    let source = (0usize..4, 1usize..30, prop::collection::vec((0u64..40, 0u8..20), 30), 1usize..6);
    (1usize..4, prop::collection::vec(source, 1..6), prop::collection::vec(0u8..8, 40), any::<u64>()).prop_map(
        |(partitions, sources, fates, seed)| {
            let mut per_partition: Vec<Vec<Vec<u8>>> = vec![Vec::new(); partitions];
            let mut fate = fates.iter().cycle();
            for (i, (p, n, steps, cut)) in sources.into_iter().enumerate() {
                let p = p % partitions;
                let (host, name) = (format!("h{}", i % 2), format!("s{i}"));
                let mut time = 1_000u64;
                let mut seq = 0u64;
                let mut sent: Vec<Vec<u8>> = Vec::new();
                while (seq as usize) < n {
                    let mut w = BatchWriter::new(&host, &name, seq, TimeSource::Drained, 0).unwrap();
                    for k in 0..cut.min(n - seq as usize) {
                        let (step, kind) = steps[(seq as usize + k) % steps.len()];
                        // A step back now and then: a source's times are not monotonic.
                        time = if kind == 0 { time.saturating_sub(step) } else { time + step };
                        if kind == 1 {
                            w.push_too_large(time, 1 << 20).unwrap();
                        } else {
                            w.push(time, format!("{name}/{}", seq as usize + k).as_bytes()).unwrap();
                        }
                    }
                    seq += w.count() as u64;
                    let m = w.finish();
                    match fate.next().copied().unwrap_or(0) {
                        0 => {}                    // dropped: its records are missing
                        1 => sent.push(m.clone()), // sent twice, the copy at once
                        2 if !sent.is_empty() => {
                            // a copy of an earlier one, later
                            let earlier = sent[sent.len() / 2].clone();
                            sent.push(earlier);
                        }
                        _ => {}
                    }
                    sent.push(m);
                }
                per_partition[p].extend(sent);
            }
            // Interleave the partitions, each kept in its order.
            let mut rng = seed;
            let mut next = vec![0usize; partitions];
            let mut messages = Vec::new();
            while let Some(left) = (0..partitions).filter(|&p| next[p] < per_partition[p].len()).count().checked_sub(1)
            {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let pick = (rng >> 33) as usize % (left + 1);
                let p = (0..partitions).filter(|&p| next[p] < per_partition[p].len()).nth(pick).unwrap();
                messages.push((p, per_partition[p][next[p]].clone()));
                next[p] += 1;
            }
            Topic { partitions, messages }
        },
    )
}

/// A record out: host, source, sequence number, time and gap before it.
type Out = (String, String, u64, u64, (u64, u64));

/// How far out of time order the partitions' records come: the most a record is older
/// than one read before it from its partition.
fn disorder(t: &Topic) -> u64 {
    let mut newest = vec![0u64; t.partitions];
    let mut worst = 0;
    for (p, m) in &t.messages {
        for r in Batch::decode(m).unwrap().records() {
            worst = worst.max(newest[*p].saturating_sub(r.time_ns));
            newest[*p] = newest[*p].max(r.time_ns);
        }
    }
    worst
}

/// The records out of a merge with `reorder` and `max_held`, released after each
/// message, with the most bytes it held after a release.
fn merged(t: &Topic, reorder: u64, max_held: usize) -> (Vec<Out>, FleetStats, usize) {
    let mut m = Merge::new(t.partitions, reorder, max_held);
    let mut out = Vec::new();
    let mut most = 0;
    let mut take = |i: Item<'_>| -> Result<(), ()> {
        let e = i.entry;
        assert_eq!(e.payload, format!("{}/{}", e.source, e.seq).as_bytes());
        out.push((e.host.to_string(), e.source.to_string(), e.seq, e.time_ns, i.gap));
        Ok(())
    };
    let last: Vec<usize> =
        (0..t.partitions).map(|p| t.messages.iter().rposition(|(q, _)| *q == p).unwrap_or(usize::MAX)).collect();
    for p in (0..t.partitions).filter(|&p| last[p] == usize::MAX) {
        m.close(p);
    }
    for (i, (p, bytes)) in t.messages.iter().enumerate() {
        m.push(*p, bytes, &mut |_| {}).unwrap();
        if last[*p] == i {
            m.close(*p);
        }
        m.release(false, &mut take).unwrap();
        most = most.max(m.held_bytes());
    }
    m.release(true, &mut take).unwrap();
    assert_eq!(m.held_bytes(), 0);
    (out, m.stats(), most)
}

/// Records out older than one out before them.
fn late(out: &[Out]) -> u64 {
    let mut newest = 0;
    out.iter()
        .filter(|r| {
            let older = r.3 < newest;
            newest = newest.max(r.3);
            older
        })
        .count() as u64
}

/// The timeline of the same messages.
fn timeline(t: &Topic) -> (Vec<Out>, FleetStats) {
    let mut tl = Timeline::new();
    for (_, bytes) in &t.messages {
        tl.push(bytes).unwrap();
    }
    let f = tl.finish();
    let lanes: Vec<(String, String)> = f.sources().map(|(h, s)| (h.to_string(), s.to_string())).collect();
    let out = f
        .timeline()
        .map(|e| {
            let lane = lanes.iter().position(|(h, s)| h == e.host && s == e.source).unwrap();
            (e.host.to_string(), e.source.to_string(), e.seq, e.time_ns, f.gap_before(lane, e.seq))
        })
        .collect();
    (out, f.stats())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With a bound at least the partitions' disorder, the merge is the timeline:
    /// records, order, gaps and counts.
    #[test]
    fn within_the_bound_the_merge_is_the_timeline(t in topic(), extra in 0u64..20) {
        let (want, want_stats) = timeline(&t);
        let (got, stats, _) = merged(&t, disorder(&t) + extra, usize::MAX);
        prop_assert_eq!(&got, &want);
        // Late: only where a source's own times step back, as in the timeline.
        prop_assert_eq!(stats, FleetStats { late: late(&want), ..want_stats });
    }

    /// With any bound and a small byte limit: each record once, the late ones counted
    /// (those older than one out before them), the counts the timeline's but `late`,
    /// and no more held than the limit allows (one record beyond it at most).
    #[test]
    fn any_bound_hands_out_each_record_once_and_counts_the_late(
        t in topic(),
        reorder in 0u64..30,
        max_held in 0usize..600,
    ) {
        let (mut want, want_stats) = timeline(&t);
        let (got, stats, most) = merged(&t, reorder, max_held);
        prop_assert_eq!(stats.late, late(&got));
        prop_assert_eq!(FleetStats { late: 0, ..stats }, want_stats);
        let mut got: Vec<_> = got.into_iter().map(|r| (r.0, r.1, r.2, r.3)).collect();
        got.sort();
        let mut want: Vec<_> = want.drain(..).map(|r| (r.0, r.1, r.2, r.3)).collect();
        want.sort();
        prop_assert_eq!(got, want);
        // The largest record: 1 MiB markers are not held; payloads are a few bytes.
        prop_assert!(most <= max_held + RECORD_COST + 16, "{} held, limit {}", most, max_held);
    }
}

/// A source whose batches are split over two partitions (the topic's partition count
/// changed): the numbers one partition lacks come from the other, none taken for a
/// copy, none missing.
#[test]
fn a_source_split_over_two_partitions_loses_nothing() {
    let batch = |first: u64, times: &[u64]| {
        let mut w = BatchWriter::new("h", "s", first, TimeSource::Drained, 0).unwrap();
        for (k, &t) in times.iter().enumerate() {
            w.push(t, format!("s/{}", first + k as u64).as_bytes()).unwrap();
        }
        w.finish()
    };
    let t = Topic {
        partitions: 2,
        messages: vec![(1, batch(4, &[40, 50])), (0, batch(0, &[1, 2])), (0, batch(2, &[3, 4])), (1, batch(0, &[1]))],
    };
    let (got, stats, _) = merged(&t, 100, usize::MAX);
    let seqs: Vec<u64> = got.iter().map(|r| r.2).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4, 5]);
    assert_eq!((stats.records, stats.duplicates, stats.missing), (6, 1, 0));
}

#[test]
fn a_message_that_is_not_a_batch_is_counted_damaged() {
    let mut m = Merge::new(1, 0, usize::MAX);
    assert!(m.push(0, b"not a batch", &mut |_| {}).is_err());
    assert_eq!(m.stats().damaged, 1);
}
