//! The `latency` row: how long a record takes from its commit into a ring file on one
//! host to its arrival at a fleet reader, at a steady 100,000 records/s.
//!
//! Each round, on a fresh topic:
//!
//! 1. A fleet reader ([`Follow`], from the topic's end) starts in this process, before
//!    anything is written.
//! 2. A fresh 4 MiB ring file (discard mode, the default wake-up policy) gets a
//!    producer, and a real agent process, `ringtrace-ship ship --until-disconnected`
//!    with its defaults (`linger.ms` 20, lz4, `acks=all`; with one ring it sleeps on the
//!    ring's doorbell), starts on it.
//! 3. A writer thread writes 64-byte records at `--rate` (100,000/s by default) for 1 s
//!    of warm-up and then `--seconds` (10 by default). It paces by a deadline schedule
//!    on the monotonic clock: record `i` is due at `start + i / rate`; at each 1 ms tick
//!    it writes every record due by then, then sleeps until the next tick, so a late
//!    wake-up is caught up rather than added to. Each record carries its index
//!    (bytes 0..8) and its commit time (bytes 8..16), both little-endian: wall-clock
//!    (`CLOCK_REALTIME`) ns read just before the record is committed, the clock the
//!    agent stamps records with, so one clock serves every difference below (all on
//!    one host).
//! 4. The reader takes each record as its batch arrives and reads the wall clock: its
//!    arrival. It stops once every record the ring took arrived (or 30 s after the
//!    writer finished, which counts the rest as missing).
//!
//! Of the records written after the warm-up, a row gives the latency, arrival − commit:
//! p50, p99, p99.9 and max (nearest rank). It is split at the record's drained time (the
//! batch's `time_ns`, the wall clock the agent read at the start of the round that read
//! it from the ring): commit → drain is the wait in the ring (for the agent to wake and
//! come round), drain → arrival the agent's round (encode, linger, send, replicate,
//! acknowledge) and the reader's fetch. The agent's round (p50 and max), from one
//! round's drained time to the next's, bounds the wait in the ring. Beside them: the records the ring refused
//! (full; during the warm-up, while the agent starts and connects, and after it), the
//! agent's CPU per record (its `cutime + cstime`, 10 ms ticks), the
//! writer's worst slip behind its schedule (a large one means this process was not
//! running: a disturbed round), and the load average when the round began.
//!
//! Verdict: the median over rounds of each round's p99 (target: under 250 ms).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringtrace::{MpscRing, Producer, ReserveError, Wakeup};
use ringtrace_ship::fleet::Follow;

use crate::{children_cpu, delete_topics, load, median, now_ns, spread, topic, verdict, Bench, PARTITIONS};

/// The writer's tick: it writes what is due, then sleeps until the next one.
const TICK: Duration = Duration::from_millis(1);

/// How long the reader waits for the last records once the writer is done.
const DRAIN: Duration = Duration::from_secs(30);

/// The target: p99 under this many ms.
const TARGET_MS: f64 = 250.0;

/// What the writer did.
struct Written {
    /// Records the ring took.
    committed: u64,
    /// Records the ring refused (full): during the warm-up, and after it.
    lost: (u64, u64),
    /// The worst slip behind the schedule: how late the first record of a tick was
    /// written after the time it was due.
    late_max: Duration,
}

/// Writes `total` records at `rate` a second into `p` by a deadline schedule (see the
/// module docs), each carrying its index and its commit time.
fn write_paced(mut p: Producer, rate: u64, warm_n: u64, total: u64) -> Written {
    let mut rec = [0u8; 64];
    let (mut i, mut lost) = (0u64, (0u64, 0u64));
    let mut late_max = Duration::ZERO;
    let start = Instant::now();
    while i < total {
        let elapsed = start.elapsed();
        // Records due by now: record `i` is due at `i / rate` s.
        let due = ((elapsed.as_nanos() * u128::from(rate) / 1_000_000_000) as u64 + 1).min(total);
        if i < due {
            let due_at = Duration::from_nanos((u128::from(i) * 1_000_000_000 / u128::from(rate)) as u64);
            late_max = late_max.max(elapsed.saturating_sub(due_at));
        }
        while i < due {
            rec[..8].copy_from_slice(&i.to_le_bytes());
            rec[8..16].copy_from_slice(&now_ns().to_le_bytes());
            match p.output(&rec, Wakeup::Default) {
                Ok(()) => {}
                Err(ReserveError::Full { .. }) if i < warm_n => lost.0 += 1,
                Err(ReserveError::Full { .. }) => lost.1 += 1,
                Err(e) => panic!("writing to the ring: {e}"),
            }
            i += 1;
        }
        // Sleep to the next tick of the schedule after now.
        let elapsed = start.elapsed();
        let next = TICK * (elapsed.as_nanos() / TICK.as_nanos() + 1) as u32;
        std::thread::sleep(next.saturating_sub(elapsed));
    }
    // Dropping the producer disconnects it: the agent ships what is left and exits.
    Written { committed: total - lost.0 - lost.1, lost, late_max }
}

/// The value at quantile `q` of sorted `v` (nearest rank), in ms.
fn pct(v: &[i64], q: f64) -> f64 {
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1] as f64 / 1e6
}

/// One round's per-record latencies (ns) of the measured records, sorted.
struct Round {
    /// Arrival − commit.
    total: Vec<i64>,
    /// Drained − commit (the drain time is read before the round reads the ring, so a
    /// record committed in between shows a few µs below zero).
    drain: Vec<i64>,
    /// Arrival − drained.
    arrive: Vec<i64>,
    /// The agent's rounds: the time between one round's drain time and the next's (at
    /// this rate every round finds records, so each drain time is seen).
    period: Vec<i64>,
}

/// Runs the row: `rounds` rounds of `warmup` then `measured` at `rate` records a second.
pub fn run(bench: &Bench, rate: u64, warmup: Duration, measured: Duration) {
    let (brokers, rounds) = (&bench.brokers, bench.rounds);
    let agent = env!("CARGO_BIN_EXE_ringtrace-ship");
    let warm_n = (warmup.as_secs_f64() * rate as f64) as u64;
    let total = warm_n + (measured.as_secs_f64() * rate as f64) as u64;
    let ring = bench.dir.join("latency.ring");
    let state = bench.dir.join("latency.state");
    let mut topics = Vec::new();

    println!(
        "latency: commit into a ring -> arrival at a fleet reader (Follow), {rate} records/s of 64 bytes, \
         {:.0} s warm-up + {:.0} s measured a round, {rounds} rounds; one agent (linger.ms 20, acks=all)",
        warmup.as_secs_f64(),
        measured.as_secs_f64()
    );
    println!(
        "{:<6} {:>9} {:>8} {:>8} {:>8} {:>8} | {:>15} | {:>15} | {:>15} | {:>11} {:>10} {:>7} {:>5}",
        "round",
        "records",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "drain p50/p99",
        "arrive p50/p99",
        "round p50/max",
        "lost warm/m",
        "CPU ns/rec",
        "late ms",
        "load"
    );
    let mut p99s = Vec::new();
    let (mut lost_measured, mut lost_rounds) = (0u64, 0usize);
    let mut summary: Vec<[f64; 10]> = Vec::new();
    for round in 0..rounds {
        let load = load();
        let t = topic(brokers, "latency", PARTITIONS);
        topics.push(t.clone());
        let mut follow = Follow::start(brokers, &t, None, Duration::from_secs(30)).expect("following the topic");
        let _ = std::fs::remove_file(&ring);
        let _ = std::fs::remove_file(&state);
        let r = MpscRing::builder(4 << 20).create(&ring).expect("ring file");
        let p = r.producer().expect("producer");
        let cpu0 = children_cpu();
        let mut child = Command::new(agent)
            .args([
                "ship",
                "--to",
                &format!("kafka://{brokers}/{t}"),
                "--host",
                "bench",
                "--until-disconnected",
                "--state",
            ])
            .arg(&state)
            .arg(&ring)
            .stdout(Stdio::null())
            .spawn()
            .expect("ringtrace-ship");
        let mut writer = Some(std::thread::spawn(move || write_paced(p, rate, warm_n, total)));

        let cap = (total - warm_n) as usize;
        let mut lat = Round {
            total: Vec::with_capacity(cap),
            drain: Vec::with_capacity(cap),
            arrive: Vec::with_capacity(cap),
            period: Vec::new(),
        };
        let mut arrived = 0u64;
        let mut last_drained: Option<i64> = None;
        let mut written: Option<(Written, Instant)> = None;
        loop {
            follow
                .poll(
                    Duration::from_millis(100),
                    |e| {
                        let now = now_ns() as i64;
                        let index = u64::from_le_bytes(e.payload[..8].try_into().unwrap());
                        let commit = i64::from_le_bytes(e.payload[8..16].try_into().unwrap());
                        arrived += 1;
                        if index >= warm_n {
                            let drained = e.time_ns as i64;
                            if last_drained.is_some_and(|t| t != drained) {
                                lat.period.push(drained - last_drained.unwrap());
                            }
                            last_drained = Some(drained);
                            lat.total.push(now - commit);
                            lat.drain.push(drained - commit);
                            lat.arrive.push(now - drained);
                        }
                        Ok::<(), ()>(())
                    },
                    |w| eprintln!("latency: {w}"),
                )
                .expect("following the topic");
            if writer.as_ref().is_some_and(|w| w.is_finished()) {
                let w = writer.take().unwrap().join().expect("the writer");
                written = Some((w, Instant::now() + DRAIN));
            }
            if let Some((w, deadline)) = &written {
                if arrived >= w.committed || Instant::now() >= *deadline {
                    break;
                }
            }
        }
        let (w, _) = written.unwrap();
        // The agent exits once the ring is disconnected and drained; it is this
        // process's child, stopped by its handle if it does not.
        let exit_by = Instant::now() + DRAIN;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= exit_by {
                eprintln!("latency: the agent did not exit in {DRAIN:?}: killing it");
                let _ = child.kill();
                break child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(status.success(), "the agent exited with {status}");
        let cpu = children_cpu() - cpu0;
        let s = follow.stats();
        if arrived < w.committed || s.duplicates + s.missing + s.damaged > 0 {
            eprintln!(
                "latency: round {round}: {} of {} records arrived (copies {}, missing {}, damaged {})",
                arrived, w.committed, s.duplicates, s.missing, s.damaged
            );
        }
        assert!(!lat.total.is_empty(), "round {round}: no measured record arrived");
        for v in [&mut lat.total, &mut lat.drain, &mut lat.arrive, &mut lat.period] {
            v.sort_unstable();
        }
        let f = [
            pct(&lat.total, 0.5),
            pct(&lat.total, 0.99),
            pct(&lat.total, 0.999),
            pct(&lat.total, 1.0),
            pct(&lat.drain, 0.5),
            pct(&lat.drain, 0.99),
            pct(&lat.arrive, 0.5),
            pct(&lat.arrive, 0.99),
            pct(&lat.period, 0.5),
            pct(&lat.period, 1.0),
        ];
        println!(
            "{round:<6} {:>9} {:>8.1} {:>8.1} {:>8.1} {:>8.1} | {:>7.1}/{:<7.1} | {:>7.1}/{:<7.1} | {:>7.1}/{:<7.1} | {:>11} {:>10.0} {:>7.1} {:>5}",
            lat.total.len(),
            f[0],
            f[1],
            f[2],
            f[3],
            f[4],
            f[5],
            f[6],
            f[7],
            f[8],
            f[9],
            format!("{}/{}", w.lost.0, w.lost.1),
            cpu * 1e9 / w.committed.max(1) as f64,
            w.late_max.as_secs_f64() * 1e3,
            load
        );
        p99s.push(f[1]);
        lost_measured += w.lost.1;
        lost_rounds += usize::from(w.lost.1 > 0);
        summary.push(f);
    }
    let _ = std::fs::remove_file(&ring);
    let _ = std::fs::remove_file(&state);
    delete_topics(brokers, &topics);
    let med = |k: usize| median(summary.iter().map(|f| f[k]).collect());
    let (lo, hi) = spread(&p99s);
    let met = p99s.iter().filter(|&&p| p < TARGET_MS).count();
    let m = median(p99s);
    println!("verdict (medians over {rounds} rounds):");
    println!(
        "  end-to-end p99: {m:.1} ms (rounds {lo:.1} to {hi:.1}, {met}/{rounds} under; target < {TARGET_MS:.0} ms): {}",
        verdict(m < TARGET_MS)
    );
    if lost_rounds > 0 {
        println!(
            "  the ring refused {lost_measured} records after the warm-up, in {lost_rounds} of {rounds} rounds \
             (not in the percentiles: the agent fell behind by a whole ring)"
        );
    }
    println!(
        "  p50 {:.1} ms, p99.9 {:.1} ms, max {:.1} ms; commit->drain p50/p99 {:.1}/{:.1} ms, drain->arrival p50/p99 \
         {:.1}/{:.1} ms; the agent's round p50/max {:.1}/{:.1} ms",
        med(0),
        med(2),
        med(3),
        med(4),
        med(5),
        med(6),
        med(7),
        med(8),
        med(9)
    );
}
