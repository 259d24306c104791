//! Rows and their output: the terminal table, JSON lines and an SVG chart.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use crate::harness::Measured;

/// One result line. JSON field names are part of the interface.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// `parallel`, `back-to-back`, `sampled`, `reserve-vs-output`, `contention`,
    /// `overwrite-contention`, `snapshot`, `shm`, `channel-scaling`.
    ///
    /// `overwrite-contention`: producers into ringtrace's flight recorder with no reader
    /// (`overwrite/no-reader`) or with a thread taking snapshots back to back
    /// (`overwrite/snapshots`), and into crossbeam's `ArrayQueue::force_push` with no
    /// reader or a thread popping; these rows count records committed, as nothing there
    /// consumes. `discard/consumer` is the `contention` row's discard ring and consumer,
    /// for reference (the target: overwrite at least 0.9x its records/s at 1 and 2
    /// producers).
    ///
    /// `snapshot`: snapshots of a full flight recorder (`ring=64KiB`, `1MiB`, `16MiB`)
    /// with no producer running; records/s counts the records the snapshots captured and
    /// `ns_per_rec` is a snapshot's time divided by the records it captured, so a
    /// snapshot takes `ns_per_rec` times the records in the ring (about capacity / 16
    /// for 8-byte records).
    ///
    /// `shm`: one ring file, producers as threads of the bench process
    /// (`mpsc/in-process`) or as child processes (`mpsc/shm`), the consumer in the bench
    /// process (the target: `shm` within 10% of `in-process`).
    ///
    /// `channel-scaling`: 1, 2, 4, 8 writer threads into a flight-recorder channel (one
    /// ring each; `ringtrace-channel`, `ts=none`, `ts=tsc`, `ts=mono`), into one shared
    /// flight recorder (`ringtrace-mpsc`), into crossbeam's `ArrayQueue::force_push`
    /// (`crossbeam-arrayqueue`, `force_push`) and, one writer, into rtrb; `ns_per_rec` there
    /// is CPU time, not wall time (see `ns_per_rec`).
    ///
    /// `waiting`: producers that wait for room (`output-wait`) against crossbeam-channel's
    /// blocking `send` (`send-blocking`). `async`: one producer (`sampled`: bursts of 16
    /// with 200 µs pauses; `busy`: never stopping), consumed by `Consumer::poll`
    /// (`blocking/...`) or by `AsyncReader::consume` on a current-thread tokio runtime
    /// (`async/...`), with latency percentiles (`p50_ns`, `p99_ns`).
    ///
    /// `c-api`: a record written from C through `ringtrace_channel_output`
    /// (`ringtrace-c`), through an LTTng-UST tracepoint into a flight-recorder session
    /// (`lttng-ust`) and through `Channel::output` from Rust (`ringtrace-rust`); `variant`
    /// `8B` or `64B`; `ns_per_rec` is writer CPU time, as in `channel-scaling`. The C
    /// program prints these rows as JSON lines, read back with `Deserialize`.
    ///
    /// `otel`: a `tracing` span of 4 fields entered and exited around an event of 4
    /// fields, through `ringtrace-tracing`'s layer (`stream`, `flight`), through
    /// `tracing-opentelemetry` with the OTLP batch exporter (`otlp-http/batch`) or through
    /// a layer that does nothing (`noop-layer` `registry`), and the same unit of work
    /// through fastrace (`root`, `local`, `otlp-http/batch`), 1 and 2 writer threads; a
    /// record is a span emitted; `ns_per_rec` is writer CPU time (see `otel.rs`).
    ///
    /// `kernel-bpf`: one kernel producer (a BPF program, 8-byte records, 512 KiB map)
    /// consumed by ringtrace (`ringtrace`) or libbpf's `ring_buffer` (`libbpf`),
    /// `parallel`, `parallel/linger=0` or `back-to-back`. `kernel-user-ringbuf`: 64-byte
    /// samples produced into a BPF user ring buffer map by ringtrace (`ringtrace`) or
    /// libbpf's `user_ring_buffer` (`libbpf`), drained by a BPF program: `throughput`
    /// and `fill` (`ns_per_rec`: the producer thread's CPU time per sample), `blocking`
    /// (latency percentiles of a blocked reserve woken by a drain; `cpu_ns_per_rec`: the
    /// producer's CPU time per blocking reserve). `perf-backward`: full reads of
    /// a 1 MiB backward perf ring; `buf=1MiB/per-read` counts one whole read as a record.
    pub bench: String,
    /// Implementation: `ringtrace`, `crossbeam-arrayqueue`, `crossbeam-channel`, `disruptor`, `rtrb`;
    /// `ringtrace-channel` and `ringtrace-mpsc` (and `crossbeam-arrayqueue`) in `channel-scaling`; `libbpf` in
    /// `kernel-bpf` and `kernel-user-ringbuf`; `ringtrace-c`, `ringtrace-rust` and `lttng-ust` in `c-api`;
    /// `ringtrace-tracing`, `tracing-opentelemetry`, `noop-layer` and `fastrace` in `otel`.
    #[serde(rename = "impl")]
    pub imp: String,
    /// `mpsc`/`spsc` (and detail after `/`) for ringtrace, but the ring's mode and reader in
    /// `overwrite-contention` and its size in `snapshot`; the clock (`ts=none`, `ts=tsc`,
    /// `ts=mono`, and `/pop-inline` for one thread pushing and popping) in
    /// `channel-scaling`; free text for peers.
    pub variant: String,
    /// Producer threads.
    pub producers: usize,
    /// Payload bytes per record.
    pub record_bytes: usize,
    /// Millions of records delivered to the consumer per second (committed, for a row with no
    /// consumer or whose reader counts none: `overwrite-contention`; captured, in `snapshot`).
    pub mrec_per_s: f64,
    /// Wall-clock nanoseconds per record counted in `mrec_per_s`; but in
    /// `channel-scaling`, `c-api`, `tracing` and `otel`, CPU nanoseconds per record: the
    /// writer threads' CPU time (`CLOCK_THREAD_CPUTIME_ID`) summed over writers, divided
    /// by the records they wrote (LTTng's "ns CPU time/record"; `pop-inline` rows: the
    /// push loops' CPU time). The table shows it as `writer CPU` where it is neither the
    /// wall time nor `cpu_ns_per_rec`.
    pub ns_per_rec: f64,
    /// Failed pushes per second.
    pub drops_per_s: f64,
    /// The round this measurement is from (0-based); the table shows each row's median
    /// round.
    pub round: usize,
    /// Wall-clock nanoseconds per record counted in `mrec_per_s` (`ns_per_rec`, but
    /// always wall time).
    pub wall_ns_per_rec: f64,
    /// CPU nanoseconds per record: the CPU time of every thread of the row (producers,
    /// consumer; `channel-scaling`: the writers) over the window, divided by the records
    /// counted. Less sensitive to steal time than wall time, and what a user pays per
    /// record. `null` where it is not measured: rows whose work runs in other processes
    /// or in the kernel (`shm`, `kernel-bpf`, `perf-backward`).
    pub cpu_ns_per_rec: Option<f64>,
    /// Peak resident memory of the process that did the work, MiB (`export`: the
    /// child's `VmHWM`); `null` elsewhere.
    pub peak_mib: Option<f64>,
    /// `async`: the median latency of a record, nanoseconds from its producer's
    /// `output` to the consumer holding it (TSC timestamps in the records);
    /// `kernel-user-ringbuf` `blocking`: from a drain's start to the blocked producer's
    /// reserve returning; `null` elsewhere.
    pub p50_ns: Option<f64>,
    /// The 99th percentile of the same latency; `null` elsewhere.
    pub p99_ns: Option<f64>,
}

impl Row {
    /// A row from a measurement (`delivered` counts, or `committed` when nothing consumed).
    pub fn new(bench: &str, imp: &str, variant: impl Into<String>, producers: usize, m: &Measured) -> Row {
        let secs = m.elapsed.as_secs_f64().max(1e-9);
        let recs = if m.delivered > 0 { m.delivered } else { m.committed } as f64;
        let per = |ns: f64| if recs > 0.0 { ns / recs } else { f64::INFINITY };
        Row {
            bench: bench.into(),
            imp: imp.into(),
            variant: variant.into(),
            producers,
            record_bytes: 8,
            mrec_per_s: recs / secs / 1e6,
            ns_per_rec: per(secs * 1e9),
            drops_per_s: m.drops as f64 / secs,
            round: 0,
            wall_ns_per_rec: per(secs * 1e9),
            cpu_ns_per_rec: m.cpu.map(|c| per(c.as_nanos() as f64)),
            peak_mib: None,
            p50_ns: None,
            p99_ns: None,
        }
    }
}

/// A row over the rounds that measured it: the median round's measurement (the round
/// whose records/s is the median: the whole row, CPU time and drops included, comes from
/// that one round), and the range of records/s over all of them.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The median round's measurement.
    pub median: Row,
    /// The lowest records/s of any round.
    pub min_mrec_per_s: f64,
    /// The highest records/s of any round.
    pub max_mrec_per_s: f64,
    /// How many rounds measured the row.
    pub rounds: usize,
}

/// Each row's summary over rounds: measurements are matched by bench, impl, variant and
/// producers, in the order rows first appear.
pub fn summarize(measurements: &[Row]) -> Vec<Summary> {
    let key = |r: &Row| (r.bench.clone(), r.imp.clone(), r.variant.clone(), r.producers);
    let mut groups: Vec<Vec<&Row>> = Vec::new();
    for row in measurements {
        match groups.iter_mut().find(|g| key(g[0]) == key(row)) {
            Some(g) => g.push(row),
            None => groups.push(vec![row]),
        }
    }
    groups
        .into_iter()
        .map(|mut g| {
            g.sort_by(|a, b| a.mrec_per_s.total_cmp(&b.mrec_per_s));
            Summary {
                median: g[g.len() / 2].clone(),
                min_mrec_per_s: g[0].mrec_per_s,
                max_mrec_per_s: g[g.len() - 1].mrec_per_s,
                rounds: g.len(),
            }
        })
        .collect()
}

/// The table, grouped by bench: each row's median round, with the range of records/s
/// over the rounds.
pub fn print_table(rows: &[Summary], out: &mut impl Write) -> io::Result<()> {
    let mut last = "";
    for s in rows {
        let r = &s.median;
        if r.bench != last {
            writeln!(out, "\n{}", r.bench)?;
            writeln!(
                out,
                "  {:<22} {:<24} {:>4} {:>10} {:>17} {:>9} {:>9} {:>12}",
                "impl", "variant", "prod", "Mrec/s", "min-max", "ns/rec", "CPUns/rec", "drops/s"
            )?;
            last = &r.bench;
        }
        let cpu = r.cpu_ns_per_rec.map_or_else(|| "-".to_owned(), |c| format!("{c:.2}"));
        let range = format!("{:.2}-{:.2}", s.min_mrec_per_s, s.max_mrec_per_s);
        let mut peak = r.peak_mib.map_or_else(String::new, |m| format!("  peak {m:.0} MiB"));
        if r.ns_per_rec != r.wall_ns_per_rec && Some(r.ns_per_rec) != r.cpu_ns_per_rec {
            let _ = write!(peak, "  writer CPU {:.2} ns/rec", r.ns_per_rec);
        }
        if let (Some(p50), Some(p99)) = (r.p50_ns, r.p99_ns) {
            let _ = write!(peak, "  latency p50 {:.1} us, p99 {:.1} us", p50 / 1e3, p99 / 1e3);
        }
        writeln!(
            out,
            "  {:<22} {:<24} {:>4} {:>10.2} {:>17} {:>9.2} {:>9} {:>12.0}{peak}",
            r.imp, r.variant, r.producers, r.mrec_per_s, range, r.wall_ns_per_rec, cpu, r.drops_per_s
        )?;
    }
    writeln!(out, "\n(2 cores: contention rows with 2+ producers run more threads than cores on purpose)")?;
    writeln!(
        out,
        "(Mrec/s: the median round; min-max: the lowest and highest round; \
         ns/rec: wall time per record; CPUns/rec: CPU time of all the row's threads per record, \
         - where the work is another process's or the kernel's; channel-scaling: the writers' CPU time, \
         LTTng's metric; tracing: per event recorded, otel: per span emitted, writer CPU the writer threads' \
         CPU time, CPUns/rec the whole process's)"
    )?;
    Ok(())
}

/// One JSON object per line: every measurement of every round.
pub fn write_json(path: &Path, rows: &[Row]) -> io::Result<()> {
    let mut f = io::BufWriter::new(std::fs::File::create(path)?);
    for r in rows {
        serde_json::to_writer(&mut f, r)?;
        writeln!(f)?;
    }
    f.flush()
}

const COLORS: [&str; 8] = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

/// Records/s by producers and implementation: one panel of grouped bars per bench, each
/// bar the median round with a whisker from the lowest to the highest round.
pub fn svg(summaries: &[Summary]) -> String {
    let rows: Vec<&Row> = summaries.iter().map(|s| &s.median).collect();
    let mut benches: Vec<&str> = rows.iter().map(|r| r.bench.as_str()).collect();
    benches.dedup();
    benches.sort();
    benches.dedup();
    let series = |r: &Row| format!("{} {}", r.imp, r.variant);
    let mut names: Vec<String> = rows.iter().map(|r| series(r)).collect();
    names.sort();
    names.dedup();
    let (pw, ph, top) = (900.0, 260.0, 60.0);
    let height = top + benches.len() as f64 * (ph + 50.0) + 20.0 + 18.0 * names.len() as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" font-family="sans-serif" font-size="12">"#,
        w = pw + 120.0
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="20" y="30" font-size="18">ringtrace-bench: million records/s (8-byte records; median round, whiskers: min-max)</text>"#
    );
    for (bi, bench) in benches.iter().enumerate() {
        let y0 = top + bi as f64 * (ph + 50.0);
        let rs: Vec<&Summary> = summaries.iter().filter(|x| x.median.bench == *bench).collect();
        let max = rs.iter().map(|x| x.max_mrec_per_s).fold(1e-9, f64::max);
        let mut groups: Vec<usize> = rs.iter().map(|x| x.median.producers).collect();
        groups.sort();
        groups.dedup();
        let _ = writeln!(s, r#"<text x="80" y="{}" font-size="14" font-weight="bold">{bench}</text>"#, y0 + 14.0);
        let (x0, yb) = (80.0, y0 + ph);
        let _ = writeln!(s, r#"<line x1="{x0}" y1="{yb}" x2="{}" y2="{yb}" stroke="black"/>"#, x0 + pw - 80.0);
        let _ = writeln!(s, r#"<line x1="{x0}" y1="{}" x2="{x0}" y2="{yb}" stroke="black"/>"#, y0 + 20.0);
        let _ = writeln!(s, r#"<text x="10" y="{}" >{max:.0} M/s</text>"#, y0 + 28.0);
        let gw = (pw - 100.0) / groups.len() as f64;
        for (gi, p) in groups.iter().enumerate() {
            let in_group: Vec<&Summary> = rs.iter().copied().filter(|x| x.median.producers == *p).collect();
            let bw = (gw - 20.0) / in_group.len().max(1) as f64;
            let gx = x0 + 10.0 + gi as f64 * gw;
            for (k, x) in in_group.iter().enumerate() {
                let r = &x.median;
                let h = (ph - 30.0) * r.mrec_per_s / max;
                let ci = names.iter().position(|n| *n == series(r)).unwrap_or(0) % COLORS.len();
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>{} {}: {:.2} M/s</title></rect>"#,
                    gx + k as f64 * bw,
                    yb - h,
                    (bw - 2.0).max(1.0),
                    COLORS[ci],
                    r.imp,
                    r.variant,
                    r.mrec_per_s
                );
                let (lo, hi) = (x.min_mrec_per_s, x.max_mrec_per_s);
                let (xm, cap) = (gx + k as f64 * bw + (bw - 2.0).max(1.0) / 2.0, ((bw - 2.0) / 4.0).clamp(0.5, 6.0));
                let (ylo, yhi) = (yb - (ph - 30.0) * lo / max, yb - (ph - 30.0) * hi / max);
                let _ = writeln!(
                    s,
                    r#"<path d="M{xm:.1} {ylo:.1}V{yhi:.1}M{:.1} {ylo:.1}H{:.1}M{:.1} {yhi:.1}H{:.1}" stroke="black"><title>{} {}: {lo:.2}-{hi:.2} M/s</title></path>"#,
                    xm - cap,
                    xm + cap,
                    xm - cap,
                    xm + cap,
                    r.imp,
                    r.variant
                );
            }
            let _ = writeln!(s, r#"<text x="{:.1}" y="{}">{p} producer(s)</text>"#, gx, yb + 16.0);
        }
    }
    let ly = top + benches.len() as f64 * (ph + 50.0);
    for (i, n) in names.iter().enumerate() {
        let y = ly + 18.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<rect x="80" y="{}" width="12" height="12" fill="{}"/>"#,
            y - 10.0,
            COLORS[i % COLORS.len()]
        );
        let _ = writeln!(s, r#"<text x="98" y="{y}">{n}</text>"#);
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn row(imp: &str) -> Row {
        let m = Measured {
            delivered: 1000,
            committed: 1000,
            drops: 5,
            elapsed: Duration::from_millis(1),
            cpu: Some(Duration::from_millis(2)),
        };
        Row::new("parallel", imp, "x", 1, &m)
    }

    #[test]
    fn json_has_exactly_the_documented_fields() {
        let v = serde_json::to_value(row("rtrb")).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "bench",
                "cpu_ns_per_rec",
                "drops_per_s",
                "impl",
                "mrec_per_s",
                "ns_per_rec",
                "p50_ns",
                "p99_ns",
                "peak_mib",
                "producers",
                "record_bytes",
                "round",
                "variant",
                "wall_ns_per_rec"
            ]
        );
        assert!((v["mrec_per_s"].as_f64().unwrap() - 1.0).abs() < 1e-9);
        assert!((v["wall_ns_per_rec"].as_f64().unwrap() - 1000.0).abs() < 1e-6);
        assert!((v["cpu_ns_per_rec"].as_f64().unwrap() - 2000.0).abs() < 1e-6, "2 ms of CPU over 1000 records");
    }

    fn summary(imp: &str) -> Summary {
        Summary { median: row(imp), min_mrec_per_s: 0.5, max_mrec_per_s: 1.5, rounds: 3 }
    }

    #[test]
    fn svg_has_a_legend_entry_and_a_whisker_per_series() {
        let s = svg(&[summary("rtrb"), summary("ringtrace")]);
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert!(s.contains(">rtrb x<") && s.contains(">ringtrace x<"));
        assert_eq!(s.matches("0.50-1.50 M/s").count(), 2, "{s}");
    }

    #[test]
    fn summaries_take_the_median_round_and_the_range() {
        let mut rows = Vec::new();
        for (round, mrec) in [5.0, 1.0, 9.0, 3.0, 4.0].into_iter().enumerate() {
            let mut r = row("rtrb");
            r.mrec_per_s = mrec;
            r.round = round;
            rows.push(r);
        }
        let mut other = row("ringtrace");
        other.mrec_per_s = 7.0;
        rows.push(other);
        let s = summarize(&rows);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].median.imp.as_str(), s[0].median.mrec_per_s, s[0].median.round), ("rtrb", 4.0, 4));
        assert_eq!((s[0].min_mrec_per_s, s[0].max_mrec_per_s, s[0].rounds), (1.0, 9.0, 5));
        assert_eq!((s[1].min_mrec_per_s, s[1].max_mrec_per_s, s[1].rounds), (7.0, 7.0, 1));
        let mut out = Vec::new();
        print_table(&s, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("1.00-9.00"), "{text}");
    }
}
