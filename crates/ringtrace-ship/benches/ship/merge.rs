//! The `merge` row: the fleet reader merging 4 hosts into one Perfetto trace.
//!
//! Once, before the rounds, a fresh topic (6 partitions, replication 3) is filled with
//! `--merge-records` records (2,000,000 by default) of 4 hosts of 3 sources each, as
//! their agents would ship them: batches of up to 256 KiB made with
//! [`BatchWriter`], keyed `host/source`, produced by one idempotent `acks=all` lz4
//! producer of this process (faster than running 4 agents, and the same messages),
//! each source's batches in turn, one at a time, as agents shipping at once fill a
//! topic (a partition's records come roughly in time order). Each source's records are
//! spread evenly over the same 10 s of wall-clock time, each source offset by a twelfth
//! of its spacing, so that the merge interleaves all twelve record by record. A payload is 64 bytes: the record's sequence number, then 56
//! pseudo-random bytes (xorshift), which lz4 cannot shrink: the most bytes on the wire
//! per record, as binary payloads bring.
//!
//! Each round then times, on the same topic:
//!
//! * **read**: [`fleet::read_topic`], every partition from its start to its end, into a
//!   [`Fleet`](ringtrace_ship::fleet::Fleet): fetching, decompressing, checking and
//!   decoding the batches, sorting each source by sequence;
//! * **merge + export**: [`export::perfetto`] of [`Fleet::timeline`] (the k-way merge by
//!   time) into a file (`BufWriter<File>` in the run's temporary directory);
//! * and **both**, the figure the target is for (at least 2 M records/s).
//!
//! * **streamed**: `ringtrace export --format perfetto` and `--format ctf` of the same
//!   topic (the command built beside the bench, with its `kafka` feature), a process
//!   each: [`fleet::stream_topic`] through the bounded merge into
//!   [`export::TraceWriter`], records out as they are read. Its wall time, its CPU
//!   time, and its peak resident memory (`VmHWM`, sampled every millisecond): the
//!   targets are 2 M records/s and at most 256 MiB, whatever the topic's length.
//!
//! Each as records per second of wall time, and as CPU ns per record: the CPU time of
//! this whole process (`CLOCK_PROCESS_CPUTIME_ID`: the bench's thread and librdkafka's).
//! The brokers serving the fetches run on the same two cores and are not counted. Every
//! round checks that each record was read once (no copy, no gap, nothing damaged) and
//! written once, on 4 processes and 12 threads. Verdict: the median over rounds of
//! each round's records per second of both.
//!
//! [`Fleet::timeline`]: ringtrace_ship::fleet::Fleet::timeline

use std::fs::File;
use std::io::BufWriter;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use rdkafka::types::RDKafkaErrorCode;
use ringtrace_ship::fleet::{self, export};
use ringtrace_ship::frame::{BatchWriter, TimeSource, RECORD_HEADER_LEN};

use crate::{
    children_cpu, flag, load, median, now_ns, process_cpu, ringtrace_command, spread, verdict, Bench, Topics,
    PARTITIONS,
};

/// Hosts in the fleet.
pub(crate) const HOSTS: usize = 4;
/// Sources (ring files) of each host.
pub(crate) const SOURCES: usize = 3;
/// The largest batch, as the agent makes them.
const BATCH: usize = 256 << 10;
/// The wall-clock span the records' times cover.
pub(crate) const SPAN_NS: u64 = 10_000_000_000;
/// The target: records per second, read and merged into a Perfetto trace.
pub(crate) const TARGET: f64 = 2e6;
/// The target: the streamed export's peak resident memory, MiB, whatever the topic's
/// length.
pub(crate) const STREAM_PEAK_MIB: u64 = 256;

/// Fills `topic` with `n` records of [`HOSTS`] × [`SOURCES`] sources (see the module
/// docs), their times spread over `span_ns`; returns the messages and bytes produced.
pub(crate) fn produce(brokers: &str, topic: &str, n: u64, span_ns: u64) -> (u64, u64) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("compression.type", "lz4")
        .set("linger.ms", "20")
        .create()
        .expect("producer");
    let sources = (HOSTS * SOURCES) as u64;
    let base = now_ns() - 60_000_000_000;
    let (mut messages, mut bytes) = (0u64, 0u64);
    let mut send = |key: &str, m: Vec<u8>| {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            match producer.send(BaseRecord::to(topic).key(key).payload(&m)) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) if Instant::now() < deadline => {
                    producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => panic!("producing to {topic}: {e}"),
            }
        }
        messages += 1;
        bytes += m.len() as u64;
    };
    // Each source's batches in turn, one at a time, as agents shipping at once put
    // them in the topic: a partition's records come roughly in time order.
    let mut gens: Vec<Source> = (0..sources).map(|j| Source::new(j, n, sources, base, span_ns)).collect();
    while gens.iter().any(|g| g.left > 0) {
        for g in gens.iter_mut().filter(|g| g.left > 0) {
            let (key, m) = g.batch();
            send(&key, m);
        }
    }
    producer.flush(Duration::from_secs(300)).expect("flushing the producer");
    (messages, bytes)
}

/// One source's records still to produce.
struct Source {
    j: u64,
    host: String,
    source: String,
    sources: u64,
    step: u64,
    base: u64,
    next: u64,
    left: u64,
    rng: u64,
}

impl Source {
    fn new(j: u64, n: u64, sources: u64, base: u64, span_ns: u64) -> Source {
        let (host, source) =
            (format!("host-{}", j / SOURCES as u64), format!("/run/ringtrace/src-{}.ring", j % SOURCES as u64));
        let count = n / sources + u64::from(j < n % sources);
        let step = span_ns / count.max(1);
        Source { j, host, source, sources, step, base, next: 0, left: count, rng: 0x9e37_79b9_7f4a_7c15_u64 ^ (j + 1) }
    }

    /// Its next batch (up to [`BATCH`] bytes) and its key.
    fn batch(&mut self) -> (String, Vec<u8>) {
        let mut w = BatchWriter::new(&self.host, &self.source, self.next, TimeSource::Drained, 0).unwrap();
        let mut payload = [0u8; 64];
        while self.left > 0 && w.len() + RECORD_HEADER_LEN + payload.len() <= BATCH {
            let i = self.next;
            payload[..8].copy_from_slice(&i.to_le_bytes());
            for chunk in payload[8..].chunks_exact_mut(8) {
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                chunk.copy_from_slice(&self.rng.to_le_bytes());
            }
            w.push(self.base + i * self.step + self.j * self.step / self.sources, &payload).unwrap();
            self.next += 1;
            self.left -= 1;
        }
        (format!("{}/{}", self.host, self.source), w.finish())
    }
}

/// One round's figures: wall seconds and CPU seconds of the read and of the export.
struct Round {
    read: (f64, f64),
    export: (f64, f64),
}

/// A streamed export's figures: wall seconds, CPU seconds and peak resident KiB of the
/// `ringtrace export` process.
#[derive(Clone, Copy)]
pub(crate) struct Streamed {
    pub(crate) wall: f64,
    pub(crate) cpu: f64,
    pub(crate) peak_kib: u64,
}

/// `ringtrace export --format FORMAT kafka://BROKERS/TOPIC -o OUT` in a child process,
/// its peak memory (`VmHWM`) sampled every millisecond; checks that it wrote `n`
/// records of every host and source.
pub(crate) fn stream_export(bench: &Bench, t: &str, format: &str, out: &std::path::Path, n: u64) -> Streamed {
    let _ = std::fs::remove_dir_all(out);
    let _ = std::fs::remove_file(out);
    let src = format!("kafka://{}/{t}", bench.brokers);
    let (c0, w0) = (children_cpu(), Instant::now());
    let mut child = std::process::Command::new(ringtrace_command())
        .args(["export", "--format", format, &src, "-o"])
        .arg(out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ringtrace export");
    let status = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0u64;
    let deadline = Instant::now() + Duration::from_secs(600);
    let exit = loop {
        if let Some(kib) = std::fs::read_to_string(&status).ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        }) {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(exit) = child.try_wait().expect("waiting for ringtrace export") {
            break exit;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ringtrace export {format} did not finish in 600 s");
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let wall = w0.elapsed().as_secs_f64();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err).expect("stderr");
    assert!(exit.success(), "ringtrace export {format}: {exit}: {err}");
    let want = format!("{n} records of {HOSTS} hosts ({} sources)", HOSTS * SOURCES);
    assert!(err.contains(&want), "ringtrace export {format}: {err}");
    let _ = std::fs::remove_dir_all(out);
    let _ = std::fs::remove_file(out);
    Streamed { wall, cpu: children_cpu() - c0, peak_kib }
}

/// Runs the row: `n` records in the topic, `rounds` reads of it.
pub fn run(bench: &Bench, n: u64) {
    let (brokers, rounds) = (&bench.brokers, bench.rounds);
    let mut topics = Topics::new(brokers);
    let t = topics.create("merge", PARTITIONS);
    let t0 = Instant::now();
    let (messages, bytes) = produce(brokers, &t, n, SPAN_NS);
    println!(
        "merge: {n} records of 64 bytes, {HOSTS} hosts x {SOURCES} sources, {messages} batches ({:.1} MB before lz4) \
         produced in {:.1} s; {rounds} rounds of read_topic, then export::perfetto(timeline) into a file; \
         CPU = this process",
        bytes as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );
    println!("{:<6} {:<22}| {:<22}| {:<22}| {:>8} {:>5}", "", " read", " merge + export", " both", "trace", "");
    println!(
        "{:<6} {:>11} {:>9} | {:>11} {:>9} | {:>11} {:>9} | {:>8} {:>5}",
        "round", "records/s", "CPU ns/r", "records/s", "CPU ns/r", "records/s", "CPU ns/r", "B/record", "load"
    );
    let path = bench.dir.join("merge.pftrace");
    let mut rows = Vec::new();
    let mut streamed: Vec<[Streamed; 2]> = Vec::new();
    for round in 0..rounds {
        let load = load();
        let (c0, w0) = (process_cpu(), Instant::now());
        let fleet = fleet::read_topic(brokers, &t, Duration::from_secs(300), |w| eprintln!("merge: {w}"))
            .expect("reading the topic");
        let (c1, w1) = (process_cpu(), Instant::now());
        let mut out = BufWriter::new(File::create(&path).expect("the trace file"));
        let done = export::perfetto(&fleet, fleet.timeline(), &mut out).expect("writing the trace");
        drop(out);
        let (c2, w2) = (process_cpu(), Instant::now());
        let s = fleet.stats();
        assert_eq!((s.records, s.duplicates, s.missing, s.damaged), (n, 0, 0, 0), "round {round}: {s:?}");
        assert_eq!((done.records, done.hosts, done.sources), (n, HOSTS as u32, SOURCES as u32 * HOSTS as u32));
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        let _ = std::fs::remove_file(&path);
        drop(fleet);
        let r = Round {
            read: ((w1 - w0).as_secs_f64(), (c1 - c0).as_secs_f64()),
            export: ((w2 - w1).as_secs_f64(), (c2 - c1).as_secs_f64()),
        };
        let both = (r.read.0 + r.export.0, r.read.1 + r.export.1);
        let cell = |(wall, cpu): (f64, f64)| format!("{:>11.0} {:>9.0}", n as f64 / wall, cpu * 1e9 / n as f64);
        println!(
            "{round:<6} {} | {} | {} | {:>8.1} {load:>5}",
            cell(r.read),
            cell(r.export),
            cell(both),
            size as f64 / n as f64
        );
        rows.push(r);
        // The same topic streamed back by the command, in bounded memory.
        let pf = stream_export(bench, &t, "perfetto", &bench.dir.join("stream.pftrace"), n);
        let ctf = stream_export(bench, &t, "ctf", &bench.dir.join("stream.ctf"), n);
        for (what, x) in [("perfetto", pf), ("ctf", ctf)] {
            println!(
                "       streamed by `ringtrace export --format {what}`: {:>11.0} records/s {:>9.0} CPU ns/r, peak {:.1} MiB",
                n as f64 / x.wall,
                x.cpu * 1e9 / n as f64,
                x.peak_kib as f64 / 1024.0
            );
        }
        streamed.push([pf, ctf]);
    }
    let _ = std::fs::remove_file(&path);
    if flag("--explain") {
        crate::explain::run(bench, &t, n);
    }
    drop(topics);
    let rate = |f: &dyn Fn(&Round) -> f64| -> Vec<f64> { rows.iter().map(|r| n as f64 / f(r)).collect() };
    let ns = |f: &dyn Fn(&Round) -> f64| median(rows.iter().map(|r| f(r) * 1e9 / n as f64).collect());
    let both = rate(&|r| r.read.0 + r.export.0);
    let (lo, hi) = spread(&both);
    let met = both.iter().filter(|&&r| r >= TARGET).count();
    let m = median(both);
    println!("verdict (medians over {rounds} rounds):");
    println!(
        "  read + merge + export into Perfetto: {m:.0} records/s (rounds {lo:.0} to {hi:.0}, {met}/{rounds} met; \
         target >= {TARGET:.0}): {}",
        verdict(m >= TARGET)
    );
    for (k, what) in ["Perfetto", "CTF"].iter().enumerate() {
        let rates: Vec<f64> = streamed.iter().map(|x| n as f64 / x[k].wall).collect();
        let (lo, hi) = spread(&rates);
        let m = median(rates);
        let peak = streamed.iter().map(|x| x[k].peak_kib).max().unwrap_or(0) as f64 / 1024.0;
        let cpu = median(streamed.iter().map(|x| x[k].cpu * 1e9 / n as f64).collect());
        println!(
            "  streamed (`ringtrace export kafka://` into {what}): {m:.0} records/s (rounds {lo:.0} to {hi:.0}; target \
             >= {TARGET:.0}): {}; {cpu:.0} CPU ns/record; peak resident {peak:.1} MiB (target <= {STREAM_PEAK_MIB} MiB): {}",
            verdict(m >= TARGET),
            verdict(peak <= STREAM_PEAK_MIB as f64)
        );
    }
    println!(
        "  read {:.0} records/s ({:.0} CPU ns/record), merge + export {:.0} records/s ({:.0} CPU ns/record), both {:.0} CPU ns/record",
        median(rate(&|r| r.read.0)),
        ns(&|r| r.read.1),
        median(rate(&|r| r.export.0)),
        ns(&|r| r.export.1),
        ns(&|r| r.read.1 + r.export.1)
    );
}
