use super::*;

/// A round's row delivering `mrec` million records in one second.
fn row(bench: &str, imp: &str, variant: &str, producers: usize, round: usize, mrec: f64) -> Row {
    let m = crate::Measured {
        delivered: (mrec * 1e6) as u64,
        elapsed: std::time::Duration::from_secs(1),
        ..Default::default()
    };
    Row { round, ..Row::new(bench, imp, variant, producers, &m) }
}

#[test]
fn ratios_are_taken_inside_each_round_and_the_median_decides() {
    // The machine is twice as fast in round 1: the rows' medians taken separately
    // would pair round 1's ringtrace with round 0's peer; paired ratios do not.
    let mut rows = Vec::new();
    for (round, scale) in [(0, 1.0), (1, 2.0), (2, 1.0)] {
        rows.push(row("parallel", "ringtrace", "spsc", 1, round, 130.0 * scale));
        rows.push(row("parallel", "disruptor", "sp", 1, round, 100.0 * scale));
    }
    rows[4].mrec_per_s = 50.0; // one unlucky round for ringtrace
    let v = judge_of(&rows, TARGETS);
    assert_eq!(v.len(), 1, "only the target whose rows exist");
    assert_eq!(v[0].ratios.len(), 3);
    assert!((v[0].median() - 1.3).abs() < 1e-9, "{:?}", v[0].ratios);
    assert_eq!(v[0].rounds_met(), 2);
    assert!(v[0].meets(v[0].median()));
}

#[test]
fn ns_targets_compare_time_per_record() {
    let rows = [
        row("back-to-back", "ringtrace", "spsc", 1, 0, 100.0), // 10 ns
        row("back-to-back", "rtrb", "spsc", 1, 0, 300.0),      // 3.3 ns
    ];
    let v = judge_of(&rows, TARGETS);
    let spsc = v.iter().find(|v| matches!(v.target.goal, Goal::NsAtMost(_, x) if x == 1.5)).unwrap();
    assert!((spsc.median() - 3.0).abs() < 1e-9);
    assert_eq!(spsc.rounds_met(), 0);
    let mut out = Vec::new();
    print(&v, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("ns/rec <= 1.5x") && text.contains("MISSED"), "{text}");
}

#[test]
fn writer_cpu_targets_compare_ns_per_rec_not_the_process_cpu() {
    let otel_row = |imp: &str, variant: &str, writer_ns: f64, process_ns: f64| {
        let mut r = row("otel", imp, variant, 1, 0, 1.0);
        r.ns_per_rec = writer_ns;
        r.cpu_ns_per_rec = Some(process_ns);
        r
    };
    let rows = [
        otel_row("ringtrace-tracing", "flight", 300.0, 2000.0),
        otel_row("tracing-opentelemetry", "otlp-http/batch", 4000.0, 4000.0),
    ];
    let v = judge_of(&rows, TARGETS);
    assert_eq!(v.len(), 1);
    assert!((v[0].median() - 0.075).abs() < 1e-9, "{:?}", v[0].ratios);
    assert_eq!(v[0].rounds_met(), 1);
    let mut out = Vec::new();
    print(&v, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("writer ns <= 0.08x") && text.contains("0.07x"), "{text}");
}

#[test]
fn a_cost_over_the_floor_is_the_median_of_per_round_differences() {
    // The machine is twice as slow in round 0: its difference is twice as large,
    // where its ratio is the same; the median difference decides.
    let otel_row = |imp: &str, variant: &str, round: usize, writer_ns: f64| {
        let mut r = row("otel", imp, variant, 1, round, 1.0);
        r.ns_per_rec = writer_ns;
        r.cpu_ns_per_rec = Some(writer_ns * 10.0);
        r
    };
    let mut rows = Vec::new();
    for (round, ours, floor) in [(0, 260.0, 120.0), (1, 130.0, 60.0), (2, 135.0, 60.0)] {
        rows.push(otel_row("ringtrace-tracing", "flight", round, ours));
        rows.push(otel_row("noop-layer", "registry", round, floor));
    }
    let v = judge_of(&rows, TARGETS);
    let over = v.iter().find(|v| matches!(v.target.goal, Goal::WriterCpuOverAtMost(..))).unwrap();
    assert_eq!(over.target.peer().map(|p| (p.imp, p.variant, p.producers)), Some(("noop-layer", "registry", 1)));
    assert_eq!(over.ratios, [140.0, 70.0, 75.0], "ours - floor in each round, writer CPU ns");
    assert!((over.median() - 75.0).abs() < 1e-9);
    assert_eq!(over.rounds_met(), 2, "140 ns over misses 80");
    assert!(over.meets(over.median()) && !over.meets(80.5));
    let ratio =
        v.iter().find(|v| matches!(v.target.goal, Goal::WriterCpuAtMost(p, _) if p.imp == "noop-layer")).unwrap();
    assert!((ratio.median() - 130.0 / 60.0).abs() < 1e-9, "{:?}", ratio.ratios);
    let mut out = Vec::new();
    print(&v, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("writer ns <= +80") && text.contains("75.00 ns"), "{text}");
    assert!(text.contains("writer ns <= 2.3x") && text.contains("2.17x"), "{text}");
}

#[test]
fn a_bound_without_a_peer_judges_each_rounds_own_value() {
    // 1 ms per whole read is the bound; rows count one read as a record.
    let per_read =
        |round, reads_per_s: f64| row("perf-backward", "ringtrace", "buf=1MiB/per-read", 1, round, reads_per_s / 1e6);
    let rows = [per_read(0, 10_000.0), per_read(1, 500.0), per_read(2, 12_000.0)];
    let v = judge_of(&rows, TARGETS);
    assert_eq!(v.len(), 1);
    assert!(v[0].target.peer().is_none());
    assert_eq!(v[0].ratios.len(), 3);
    assert!((v[0].median() - 100_000.0).abs() < 1.0, "{:?}", v[0].ratios);
    assert_eq!(v[0].rounds_met(), 2, "the 2 ms round misses");
    let mut out = Vec::new();
    print(&v, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("perf-backward: ringtrace buf=1MiB/per-read p=1") && text.contains("ns/rec <= 1000000"),
        "{text}"
    );
    assert!(text.contains("  met"), "{text}");
}
