//! What the command says is what it means: a duration's refusal names only units it
//! takes (and `365d`, the longest, is taken); a page `man` has not is a usage error; a
//! trace's `stat` gives each count once, under a label of its own; the demo's live
//! table says the unit of each column.

use tracing_subscriber::layer::SubscriberExt;

mod common;

use common::{run, temp};

/// A new, empty ring file.
fn ring() -> String {
    let path = temp("r.ring");
    let o = run(&["create", path.to_str().unwrap(), "--capacity", "4k"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    path.to_str().unwrap().to_owned()
}

#[test]
fn durations_take_days_and_a_refusal_names_only_units_taken() {
    let r = ring();
    // The longest duration, written in the unit that says it.
    let o = run(&["write", &r, "--wait=365d"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = run(&["tail", "-n", "0", "--timeout", "365d", &r]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for (arg, said) in [
        ("366d", "365d"),
        ("2x", "as in 500ms, 2s, 1m or 1h30m"),
        ("5", "a duration needs a unit, as in 5s or 5ms"),
        ("0.5", "as in 0.5s or 0.5ms"),
    ] {
        let o = run(&["tail", "--timeout", arg, &r]);
        assert_eq!(o.code, 2, "--timeout {arg}: {}", o.stderr);
        assert!(o.stderr.contains(said), "--timeout {arg}: {}", o.stderr);
        // What the message says, without the input it quotes: no unit it would refuse.
        let said = o.stderr.replace(arg, "");
        for word in ["days", "day", "weeks", "w"] {
            assert!(
                !said.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == word),
                "--timeout {arg}: the message names {word:?}: {}",
                o.stderr
            );
        }
    }
}

#[test]
fn a_page_man_does_not_have_is_a_usage_error() {
    let o = run(&["man", "bogus"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stdout.is_empty() && o.stderr.contains("bogus") && o.stderr.contains("consume"), "{}", o.stderr);
    let o = run(&["man", "consume"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("ringtrace\\-consume"), "{}", o.stdout);
}

/// The label of each line of `stat`'s text: the words before its first number.
fn labels(text: &str) -> Vec<String> {
    text.lines().skip(1).map(|l| l.split(|c: char| c.is_ascii_digit()).next().unwrap_or("").trim().to_owned()).collect()
}

#[test]
fn stat_of_a_trace_gives_each_count_once_under_its_own_label() {
    let dir = temp("rec");
    let (layer, recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).directory(&dir).build().unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || {
        for i in 0..2000u64 {
            let _s = tracing::info_span!("job", i).entered();
            tracing::info!(i, "working");
        }
    });
    let dump = temp("t.rtt");
    recorder.dump(&dump).unwrap();
    for source in [dump.to_str().unwrap(), dir.to_str().unwrap()] {
        let o = run(&["stat", source]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let labels = labels(&o.stdout);
        for (i, l) in labels.iter().enumerate() {
            assert!(!labels[..i].contains(l), "{source}: the label {l:?} is given twice:\n{}", o.stdout);
        }
        // The events lost in all, and the recorder's counter of refused records, apart.
        let lost: Vec<&str> = o.stdout.lines().filter(|l| l.contains("lost")).collect();
        assert!(lost.iter().any(|l| l.trim_start().starts_with("events lost ")), "{}", o.stdout);
        if source.ends_with(".rtt") {
            assert!(lost.iter().any(|l| l.contains("records a thread's ring refused")), "{}", o.stdout);
            assert!(o.stdout.lines().any(|l| l.contains("overwritten") && l.contains("records")), "{}", o.stdout);
        }
    }
    drop(recorder);
}

#[test]
fn the_demo_table_says_the_unit_of_each_column() {
    let o = run(&["demo", "--seconds", "2", "--processes", "1", "--capacity", "64k"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let header = o.stdout.lines().find(|l| l.trim_start().starts_with("time")).expect("the live table's header");
    // Columns are right-aligned under their names: each name holds its unit.
    let columns: Vec<&str> = header.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
    assert!(columns.len() >= 5, "{header}");
    for column in &columns[1..] {
        assert!(
            column.ends_with("rec/s") || column.ends_with("records"),
            "the column {column:?} has no unit: {header}"
        );
    }
    // Its rows: rates as numbers (the unit is the header's), counts as numbers.
    let row = o.stdout.lines().find(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()) && l.contains(" s "));
    let row = row.expect("a row of the live table");
    assert!(!row.contains("/s") && !row.contains("events"), "{row}");
}
