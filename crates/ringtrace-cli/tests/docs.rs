//! Every `ringtrace` command line shown in README.md and docs/cli.md stays true.
//!
//! The lines are extracted from the documents, not copied here:
//! * In code blocks (indented or fenced `sh`/`console`), a line that runs `ringtrace`
//!   (or `cargo run ... -p ringtrace-cli --`) with concrete arguments is run: each
//!   block's lines as one bash script (`set -e -o pipefail`), block after block in one
//!   sandbox directory per document, with `ringtrace` on PATH and `/dev/shm/`,
//!   `/var/tmp/` and `/tmp/` paths moved into the sandbox. A block must exit 0.
//! * A synopsis line (with placeholders such as SOURCE, PATH, N, `[--flag]` or
//!   `a|b`), in a code block or inline in the prose, is parsed by the command itself:
//!   placeholders become sample values (an endpoint's `HOST` and `PORT` too), the first
//!   of each alternative is taken, and
//!   `--help` is appended; a flag or value the command does not take fails with exit 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tracing_subscriber::layer::SubscriberExt;

mod common;

use common::{temp, Guard, BIN};

/// How long one block may run.
const BLOCK: Duration = Duration::from_secs(120);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A code block's command lines, or an inline one.
#[derive(Debug)]
struct Shown {
    /// Where: `FILE:LINE`.
    at: String,
    lines: Vec<String>,
    inline: bool,
}

/// The command part of a shown line: `$ ` dropped, a description or comment after two
/// spaces cut, `cargo run ... -p ringtrace-cli --` spelled `ringtrace`.
fn command_of(line: &str) -> Option<String> {
    let line = line.trim().trim_start_matches("$ ");
    let line = line.split("  ").next().unwrap_or("").trim();
    let line = line.replace("cargo run --release -p ringtrace-cli --", "ringtrace");
    let runs = line.starts_with("ringtrace ")
        || line.contains("| ringtrace ")
        || line.contains("; ringtrace ")
        || line.contains("do ringtrace ")
        || line.contains("do seq");
    (runs && line.contains("ringtrace ")).then_some(line)
}

/// Every block and inline span that shows a `ringtrace` command.
fn extract(file: &str) -> Vec<Shown> {
    let text = std::fs::read_to_string(repo().join(file)).unwrap();
    let mut shown = Vec::new();
    let mut fenced: Option<bool> = None; // Some(runnable?) inside a fence
    let mut block: Option<Shown> = None;
    for (n, line) in text.lines().enumerate() {
        let at = format!("{file}:{}", n + 1);
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            fenced = match fenced {
                Some(_) => None,
                None => Some(matches!(lang.trim(), "" | "sh" | "bash" | "console" | "shell")),
            };
            if let Some(b) = block.take() {
                shown.push(b);
            }
            continue;
        }
        let in_code = match fenced {
            Some(runnable) => runnable,
            None => line.starts_with("    ") && !line.trim_start().starts_with(['*', '-']),
        };
        if in_code {
            if let Some(cmd) = command_of(line) {
                block.get_or_insert_with(|| Shown { at, lines: Vec::new(), inline: false }).lines.push(cmd);
            }
            continue;
        }
        if fenced.is_none() && !line.trim().is_empty() {
            if let Some(b) = block.take() {
                shown.push(b);
            }
        }
        if fenced.is_none() {
            for (i, span) in line.split('`').enumerate() {
                if i % 2 == 1 {
                    if let Some(cmd) = command_of(span) {
                        shown.push(Shown { at: at.clone(), lines: vec![cmd], inline: true });
                    }
                }
            }
        }
    }
    shown.extend(block);
    shown
}

/// Whether a word is a placeholder: SOURCE, PATH, N, `[-f]`, `a|b`, `...`.
fn is_synopsis(line: &str) -> bool {
    line.split_whitespace().any(|w| {
        let bare = w.trim_matches(|c| "[]().,:".contains(c));
        let bare = bare.split('=').next_back().unwrap_or(bare);
        w.starts_with('[')
            || w.contains("...")
            || (!bare.is_empty() && bare.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
            || (w.contains('|') && !w.starts_with('|'))
            || w.contains("://HOST")
    })
}

/// The argv a synopsis stands for, with sample values; `None` if it names no
/// subcommand (`ringtrace ARGS`).
fn sample_argv(line: &str) -> Option<Vec<String>> {
    let cmd = &line[line.find("ringtrace ")? + "ringtrace ".len()..];
    let cmd = cmd.split(" | ").next().unwrap_or(cmd);
    let mut argv = Vec::new();
    for w in cmd.split_whitespace() {
        let w = w.replace(['[', ']'], "").replace("...", "").replace("/PREFIX", "");
        // An endpoint's placeholders: `otlp://HOST:PORT`.
        let w = w.replace("://HOST", "://127.0.0.1").replace(":PORT", ":4317");
        let w = w.split('|').next().unwrap_or("").to_owned();
        let (flag, value) = match w.split_once('=') {
            Some((f, v)) => (f.to_owned(), Some(v.to_owned())),
            None => (w.clone(), None),
        };
        let sample = |v: &str| -> String {
            match v {
                "SOURCE" | "PATH" | "FILE" | "DIR" | "INPUT" | "OUT" => "x".into(),
                "N" => "1".into(),
                "SIZE" | "BYTES" => "64k".into(),
                "DURATION" | "TIMEOUT" => "1s".into(),
                "SHELL" => "bash".into(),
                "SUBCOMMAND" => "tail".into(),
                other => other.into(),
            }
        };
        if flag.is_empty() {
            continue;
        }
        if flag == "ARGS" {
            return None;
        }
        match value {
            Some(v) => argv.push(format!("{flag}={}", sample(&v))),
            None => argv.push(sample(&flag)),
        }
    }
    argv.push("--help".into());
    Some(argv)
}

/// Asserts that the command takes `line` (its sample argv, `--help` appended); false
/// for a line that names no subcommand (`ringtrace ARGS`).
fn parses(at: &str, line: &str) -> bool {
    let Some(argv) = sample_argv(line) else { return false };
    let o = Command::new(BIN).args(&argv).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{at}: `{line}` is not a command line ringtrace takes (as {argv:?}): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    true
}

/// A recorder directory at `dir`, as a live process keeps it.
fn recorder(dir: &Path) -> ringtrace_tracing::Recorder {
    let (layer, recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).directory(dir).build().unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || {
        let span = tracing::info_span!("job", worker = 2u64);
        let _e = span.enter();
        tracing::warn!(elapsed_ms = 12.5, "slow job");
    });
    recorder
}

/// `line` with each word that starts with /dev/shm/, /var/tmp/ or /tmp/ moved into
/// `sandbox`.
fn into_sandbox(line: &str, sandbox: &str) -> String {
    line.split(' ')
        .map(|w| {
            for prefix in ["/dev/shm/", "/var/tmp/", "/tmp/"] {
                if let Some(rest) = w.strip_prefix(prefix) {
                    return format!("{sandbox}/{rest}");
                }
            }
            w.to_owned()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn check(file: &str) -> usize {
    let sandbox = temp("sandbox");
    std::fs::create_dir_all(&sandbox).unwrap();
    // What README.md's commands read: a recorder directory.
    let _recorder = recorder(&sandbox.join("myapp-recorder"));
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let sb = sandbox.to_str().unwrap();
    let mut checked = 0;
    for shown in extract(file) {
        let (synopses, runnable): (Vec<&String>, Vec<&String>) = shown.lines.iter().partition(|l| is_synopsis(l));
        for line in synopses {
            checked += usize::from(parses(&shown.at, line));
        }
        if runnable.is_empty() {
            continue;
        }
        if shown.inline {
            // An inline command in prose: parsed, not run (it may name files of the
            // reader's own); `--help` after it checks its flags.
            checked += usize::from(parses(&shown.at, runnable[0]));
            continue;
        }
        let script = runnable.iter().map(|l| into_sandbox(l, sb)).collect::<Vec<_>>().join("\n");
        let log = sandbox.join("block.log");
        let child = Command::new("bash")
            .args(["-c", &format!("set -e -o pipefail\n{script}")])
            .current_dir(&sandbox)
            .env("PATH", &path)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = Guard(child);
        let status = child.wait(BLOCK, &script);
        let mut err = String::new();
        std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{}: the block\n{script}\nfailed ({status}): {err}", shown.at);
        checked += runnable.len();
    }
    checked
}

#[test]
fn every_command_line_in_the_readme_runs() {
    let n = check("README.md");
    assert!(n >= 10, "only {n} command lines found in README.md: is the extraction broken?");
}

#[test]
fn every_command_line_in_the_cli_guide_runs() {
    let n = check("docs/cli.md");
    assert!(n >= 15, "only {n} command lines found in docs/cli.md: is the extraction broken?");
}

#[test]
fn the_extraction_finds_blocks_synopses_and_inline_commands() {
    let shown = extract("docs/cli.md");
    let all: Vec<&String> = shown.iter().flat_map(|s| &s.lines).collect();
    assert!(all.iter().any(|l| l.starts_with("ringtrace consume SOURCE")), "{all:?}");
    assert!(all.iter().any(|l| l.as_str() == "ringtrace tail /dev/shm/app.ring"), "{all:?}");
    assert!(shown.iter().any(|s| s.inline && s.lines[0].starts_with("ringtrace man")), "{all:?}");
    assert!(is_synopsis("ringtrace tail SOURCE [-n N]"));
    assert!(!is_synopsis("ringtrace tail /dev/shm/app.ring"));
    assert_eq!(
        sample_argv("ringtrace write PATH [INPUT]... [--wait[=TIMEOUT]]").unwrap(),
        ["write", "x", "x", "--wait=1s", "--help"]
    );
}
