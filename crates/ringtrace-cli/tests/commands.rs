//! The commands that make and write ring files (`create`, `write`), the generated
//! documentation (`completions`, `man`), and what `stat` prints for people and for
//! JSON readers.

use std::io::Write;
use std::process::{Command, Stdio};

use ringtrace::{FlightRecorder, Wakeup};

mod common;

use common::{run, temp, Output, BIN};

fn json(o: &Output) -> serde_json::Value {
    assert_eq!(o.code, 0, "{}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", o.stdout))
}

/// A new ring file of `capacity` made by `ringtrace create` with `extra` arguments.
fn create(name: &str, capacity: &str, extra: &[&str]) -> String {
    let path = temp(name).to_str().unwrap().to_owned();
    let mut args = vec!["create", &path, "--capacity", capacity];
    args.extend(extra);
    let o = run(&args);
    assert_eq!((o.code, o.stdout.as_str()), (0, ""), "{args:?}");
    // What was done is said on stderr; stdout carries only what a command prints.
    assert!(o.stderr.starts_with(&format!("created {path}: ")), "{}", o.stderr);
    path
}

fn input(lines: &[String]) -> String {
    let path = temp("input.txt");
    std::fs::write(&path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn create_stat_write_tail_round_trip() {
    let path = create("round.ring", "64k", &[]);
    let o = run(&["stat", &path]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for want in ["kind          mpsc", "mode          discard", "capacity      65536 bytes (64 KiB)", "committed 0,"] {
        assert!(o.stdout.contains(want), "{want}: {}", o.stdout);
    }
    // From files: one record per line.
    let lines: Vec<String> = (0..5).map(|i| format!("line {i} of the input")).collect();
    let o = run(&["write", &path, &input(&lines[..3]), &input(&lines[3..])]);
    assert_eq!((o.code, o.stdout.as_str()), (0, ""));
    assert_eq!(o.stderr, format!("{path}: wrote 5 record(s) (95 bytes)\n"));
    // From stdin, the last line without a newline; then one input whole.
    let mut child = Command::new(BIN).args(["write", &path]).stdin(Stdio::piped()).output_with(b"six\n\nseven");
    assert!(child.status.success(), "{}", String::from_utf8_lossy(&child.stderr));
    assert_eq!(
        String::from_utf8(std::mem::take(&mut child.stderr)).unwrap(),
        format!("{path}: wrote 3 record(s) (8 bytes)\n")
    );
    let whole = input(&["a".into(), "b".into()]);
    let o = run(&["write", "--whole", &path, &whole]);
    assert_eq!(o.stderr, format!("{path}: wrote 1 record(s) (4 bytes)\n"));

    let o = run(&["tail", "-n", "100", &path]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    let mut want: Vec<String> = lines.clone();
    want.extend(["six", "", "seven", "a\\nb\\n"].map(String::from));
    assert_eq!(o.stdout.lines().collect::<Vec<_>>(), want);
    let j = json(&run(&["stat", "--format", "json", &path]));
    assert_eq!((j["committed"].as_u64(), j["lost"].as_u64(), j["mode"].as_str()), (Some(9), Some(0), Some("discard")));
}

/// Runs a command with `input` on its stdin.
trait OutputWith {
    fn output_with(&mut self, input: &[u8]) -> std::process::Output;
}

impl OutputWith for Command {
    fn output_with(&mut self, input: &[u8]) -> std::process::Output {
        let mut child = self.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    }
}

#[test]
fn write_to_a_full_discard_ring_reports_refusals() {
    let path = create("full.ring", "4096", &["--producers", "spsc"]);
    let lines: Vec<String> = (0..100).map(|i| format!("{i:03} {}", "x".repeat(96))).collect();
    let file = input(&lines);
    let o = run(&["write", &path, &file]);
    assert_eq!((o.code, o.stdout.as_str()), (1, ""), "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(
        o.stderr.starts_with(&format!("ringtrace: error: {path}: ")) && o.stderr.contains("refused"),
        "{}",
        o.stderr
    );
    // 4096 bytes hold 36 records of 100 bytes (8-byte header, padded to 8).
    let j = json(&run(&["stat", "--format", "json", &path]));
    let (written, lost) = (j["committed"].as_u64().unwrap(), j["lost"].as_u64().unwrap());
    assert!(written > 0 && lost > 0 && written + lost == 100, "{j}");
    assert!(
        o.stderr.contains(&format!("wrote {written} record(s)")) && o.stderr.contains(&format!("refused {lost} ")),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("the ring was full"), "{}", o.stderr);
    // --drop: the same report, exit 0.
    let o = run(&["write", "--drop", &path, &file]);
    assert_eq!((o.code, o.stdout.as_str()), (0, ""));
    assert!(o.stderr.contains("wrote 0 record(s)") && o.stderr.contains("refused 100 "), "{}", o.stderr);
    // The records that fitted are the first ones, in order.
    let t = run(&["snapshot", &path]);
    assert_eq!(t.stdout.lines().collect::<Vec<_>>(), lines[..written as usize]);
}

#[test]
fn create_refuses_an_existing_file() {
    let path = create("exists.ring", "4k", &[]);
    assert_eq!(run(&["write", &path, &input(&["kept".into()])]).code, 0);
    let o = run(&["create", &path, "--capacity", "8k"]);
    assert_eq!((o.code, o.stdout.as_str()), (1, ""));
    assert!(o.stderr.starts_with("ringtrace: error: ") && o.stderr.contains(&path), "{}", o.stderr);
    assert!(o.stderr.contains("exists") && o.stderr.contains("--force"), "{}", o.stderr);
    assert_eq!(run(&["tail", &path]).stdout, "kept\n");
    let o = run(&["create", &path, "--capacity", "8k", "--mode", "overwrite", "--force"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j = json(&run(&["stat", "--format", "json", &path]));
    assert_eq!(
        (j["capacity"].as_u64(), j["mode"].as_str(), j["committed"].as_u64()),
        (Some(8192), Some("overwrite"), Some(0))
    );
}

#[test]
fn bad_capacity_is_a_usage_error() {
    let path = temp("never.ring");
    let p = path.to_str().unwrap();
    for bad in ["12q", "1000", "1k", "8G", "", "-4096", "1.5M"] {
        let o = run(&["create", p, "--capacity", bad]);
        assert_eq!(o.code, 2, "{bad}: {}", o.stderr);
        assert!(o.stderr.contains("--capacity"), "{bad}: {}", o.stderr);
    }
    assert!(!path.exists());
    assert_eq!(run(&["demo", "--capacity", "3000"]).code, 2);
    for good in ["4096", "64k", "64KiB", "1MiB", "1M"] {
        let p = temp("good.ring");
        let o = run(&["create", p.to_str().unwrap(), "--capacity", good]);
        assert_eq!(o.code, 0, "{good}: {}", o.stderr);
    }
}

#[test]
fn completions_and_man_page_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish"] {
        let o = run(&["completions", shell]);
        assert_eq!((o.code, o.stderr.as_str()), (0, ""), "{shell}");
        for cmd in ["stat", "tail", "snapshot", "create", "write", "demo"] {
            assert!(o.stdout.contains(cmd), "{shell}: no {cmd}");
        }
        assert!(!o.stdout.contains("__demo-producer"), "{shell}: lists the internal subcommand");
    }
    assert_eq!(run(&["completions", "tcsh"]).code, 2);
    let o = run(&["man"]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    assert!(
        o.stdout.starts_with(".ie") || o.stdout.contains(".TH ringtrace"),
        "{}",
        &o.stdout[..200.min(o.stdout.len())]
    );
    for cmd in ["stat", "tail", "consume", "snapshot", "create", "write", "completions"] {
        assert!(o.stdout.contains(&format!("ringtrace\\-{cmd}")), "man: no {cmd}");
    }
}

/// Every page `man --dir` writes renders without a groff warning, has the sections a
/// user looks for, and the top page names exactly the pages that exist.
#[test]
fn man_pages_one_per_subcommand_render_cleanly() {
    let dir = temp("man");
    let o = run(&["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!((o.code, o.stdout.as_str(), o.stderr.as_str()), (0, "", ""));
    let mut pages: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    pages.sort();
    let subcommands = [
        "completions",
        "consume",
        "create",
        "decode",
        "demo",
        "export",
        "man",
        "ship",
        "snapshot",
        "stat",
        "tail",
        "write",
    ];
    let mut want: Vec<String> = subcommands.iter().map(|s| format!("ringtrace-{s}.1")).collect();
    want.push("ringtrace.1".into());
    want.sort();
    assert_eq!(pages, want);
    for page in &pages {
        let roff = std::fs::read_to_string(dir.join(page)).unwrap();
        let stem = page.trim_end_matches(".1");
        for section in ["NAME", "SYNOPSIS", "OPTIONS", "\"EXIT STATUS\"", "EXAMPLES", "\"SEE ALSO\""] {
            assert!(roff.contains(&format!(".SH {section}")), "{page}: no {section} section");
        }
        if ![
            "ringtrace-completions",
            "ringtrace-create",
            "ringtrace-write",
            "ringtrace-demo",
            "ringtrace-man",
            "ringtrace-ship",
        ]
        .contains(&stem)
        {
            assert!(roff.contains(".SH SOURCE"), "{page}: no SOURCE section");
        }
        // Every page it names exists.
        for (i, _) in roff.match_indices("\\fBringtrace\\-") {
            let name: String = roff[i + 14..].chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            assert!(
                pages.contains(&format!("ringtrace-{name}.1")),
                "{page} names ringtrace-{name}(1), which does not exist"
            );
        }
        // groff's own warnings (-ww), as man(1) would render it.
        let g = Command::new("groff").args(["-man", "-Tutf8", "-ww", "-z"]).arg(dir.join(page)).output().unwrap();
        assert!(g.status.success() && g.stderr.is_empty(), "{page}: {}", String::from_utf8_lossy(&g.stderr));
    }
    // The same page on stdout, by name; an unknown name is a usage error that lists them.
    let o = run(&["man", "tail"]);
    assert_eq!(o.stdout, std::fs::read_to_string(dir.join("ringtrace-tail.1")).unwrap());
    let o = run(&["man", "nosuch"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("consume"), "{}", o.stderr);
}

/// An overwrite ring (no watermark: forced wakeups only) written past its capacity.
fn flight_recorder() -> String {
    let path = temp("flight.ring");
    let ring = FlightRecorder::builder(4096).create(&path).unwrap();
    let mut p = ring.producer().unwrap();
    for i in 0..500 {
        p.output(format!("event {i:03}").as_bytes(), Wakeup::Default).unwrap();
    }
    path.to_str().unwrap().to_owned()
}

#[test]
fn stat_json_has_the_library_counter_names() {
    let path = flight_recorder();
    let j = json(&run(&["stat", "--format", "json", &path]));
    let n = |k: &str| j[k].as_u64().unwrap_or_else(|| panic!("{k}: {j}"));
    // Records given up to make room (Stats::overwritten), and of them those no
    // consumer read (Stats::overwritten_unread): no consumer read any here.
    assert!(n("overwritten") > 0 && n("overwritten") < 500, "{j}");
    assert_eq!(n("overwritten_unread"), 0, "{j}");
    assert_eq!(n("committed"), 500);
    assert_eq!(n("refused_paused"), 0);
    assert_eq!((j["watermark"].as_u64(), j["wakeup"].as_str()), (Some(u64::MAX), Some("forced-only")));
    assert!(j["watermark_bytes"].is_null(), "{j}");
    let held = run(&["snapshot", &path]).stdout.lines().count() as u64;
    assert_eq!(held + n("overwritten"), 500);
    // The hidden alias prints the same object.
    assert_eq!(run(&["stat", "--json", &path]).stdout, run(&["stat", "--format", "json", &path]).stdout);
}

#[test]
fn stat_text_says_the_watermark_in_words() {
    let path = flight_recorder();
    let o = run(&["stat", &path]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stdout.contains(&u64::MAX.to_string()), "{}", o.stdout);
    assert!(!o.stdout.contains(&(u64::MAX - 1).to_string()), "{}", o.stdout);
    let line = o.stdout.lines().find(|l| l.starts_with("wakeups")).unwrap();
    assert!(line.contains("forced wakeups only"), "{line}");
    assert!(o.stdout.contains("capacity      4096 bytes (4 KiB)"), "{}", o.stdout);
}

#[test]
fn write_takes_ring_files_only() {
    let path = flight_recorder();
    let mut snap = Vec::new();
    FlightRecorder::open(&path).unwrap().snapshot().unwrap().write_to(&mut snap).unwrap();
    let file = temp("s.rtsnap");
    std::fs::write(&file, snap).unwrap();
    let o = run(&["write", file.to_str().unwrap(), &input(&["x".into()])]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("is a snapshot file: write appends to ring files"), "{}", o.stderr);
    let o = run(&["write", "/nonexistent/ring"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.starts_with("ringtrace: error: ") && o.stderr.contains("/nonexistent/ring"), "{}", o.stderr);
}
