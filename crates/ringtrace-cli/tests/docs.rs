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
//! * A command that delivers to an OTLP endpoint (`--to otlp://HOST:PORT`,
//!   `otlp+http://HOST:PORT`) runs against the test command's Jaeger
//!   (`ringtrace_fixtures::jaeger`): its address replaces the one written, and without a
//!   Jaeger the line is skipped through that helper. One that follows until Ctrl-C
//!   (`--follow`) gets SIGINT after [`FOLLOW`] and must exit 130 having delivered.
//!
//! Every repository path the documents name (`crates/...`, `scripts/...`, `docs/...`,
//! a crate's `src/...`, `tests/...`, `include/...`, and every relative link) exists.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tracing_subscriber::layer::SubscriberExt;

mod common;

use common::{temp, Guard, BIN};

/// How long one block may run.
const BLOCK: Duration = Duration::from_secs(120);

/// How long a command that follows until Ctrl-C runs before it gets SIGINT.
const FOLLOW: Duration = Duration::from_secs(5);

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

/// Whether a command line delivers to an OTLP endpoint.
fn delivers(line: &str) -> bool {
    line.split_whitespace().any(|w| w.starts_with("otlp://") || w.starts_with("otlp+http://"))
}

/// `line` with each OTLP endpoint's `HOST:PORT` replaced by `jaeger`'s receiver of its
/// protocol (a path after it kept), and, for a command that runs until Ctrl-C
/// (`--follow`), run for [`FOLLOW`], stopped with SIGINT and required to exit 130 with
/// what it delivered said on stderr.
fn against(line: &str, jaeger: &ringtrace_fixtures::Jaeger) -> String {
    let line = line
        .split(' ')
        .map(|w| {
            for (scheme, addr) in [("otlp://", &jaeger.grpc), ("otlp+http://", &jaeger.http)] {
                if let Some(rest) = w.strip_prefix(scheme) {
                    let path = rest.find('/').map_or("", |i| &rest[i..]);
                    return format!("{scheme}{addr}{path}");
                }
            }
            w.to_owned()
        })
        .collect::<Vec<_>>()
        .join(" ");
    if !line.split_whitespace().any(|w| w == "--follow") {
        return line;
    }
    format!(
        "s=0; timeout --preserve-status -s INT {} {line} 2> follow.err || s=$?; cat follow.err >&2; \
         [ $s -eq 130 ] && grep -q ' delivered ' follow.err",
        FOLLOW.as_secs()
    )
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
    // The test command's Jaeger, asked for once a command needs it.
    let mut jaeger: Option<Option<ringtrace_fixtures::Jaeger>> = None;
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
        let mut lines = Vec::new();
        for line in runnable {
            if !delivers(line) {
                lines.push(line.clone());
            } else if let Some(jaeger) = jaeger.get_or_insert_with(ringtrace_fixtures::jaeger) {
                lines.push(against(line, jaeger));
            }
        }
        if lines.is_empty() {
            continue;
        }
        let script = lines.iter().map(|l| into_sandbox(l, sb)).collect::<Vec<_>>().join("\n");
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
        checked += lines.len();
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

/// The documents a reader follows: README.md, CHANGELOG.md, each crate's README.md
/// and every Markdown file under docs/.
fn documents() -> Vec<String> {
    let mut files = vec!["README.md".to_owned(), "CHANGELOG.md".to_owned()];
    for e in std::fs::read_dir(repo().join("crates")).unwrap() {
        let readme = Path::new("crates").join(e.unwrap().file_name()).join("README.md");
        if repo().join(&readme).is_file() {
            files.push(readme.to_str().unwrap().to_owned());
        }
    }
    let mut dirs = vec![PathBuf::from("docs")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(repo().join(&dir)).unwrap() {
            let e = e.unwrap();
            let rel = dir.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                dirs.push(rel);
            } else if rel.extension().is_some_and(|x| x == "md") {
                files.push(rel.to_str().unwrap().to_owned());
            }
        }
    }
    files.sort();
    files
}

/// The repository paths `text` names: each word of a backquoted span that starts with
/// a top-level directory (`crates/`, `scripts/`, `docs/`); as [`Root::Crate`], each
/// that starts with a crate's own (`src/`, `tests/`, `examples/`, `benches/`,
/// `include/`, `c/`); as [`Root::Src`], each other Rust file (`protocol/lock.rs`,
/// `repair.rs`), named from one of a crate's directories or by its name alone;
/// `(path, root, line)`. Words with placeholders or patterns (`NAME`, `foo`, `dir`, `*`,
/// `{a,b}`, `...`) are not paths.
fn named_paths(text: &str) -> Vec<(String, Root, usize)> {
    const TOP: [&str; 3] = ["crates/", "scripts/", "docs/"];
    const IN_CRATE: [&str; 6] = ["src/", "tests/", "examples/", "benches/", "include/", "c/"];
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for span in line.split('`').skip(1).step_by(2) {
            for w in span.split(|c: char| c.is_whitespace() || "()[],;:=\"'".contains(c)) {
                let w = w.trim_end_matches('.');
                let placeholder = w.split('/').any(|seg| {
                    let stem = seg.split('.').next().unwrap_or(seg);
                    (seg.len() > 1 && seg.chars().all(|c| c.is_ascii_uppercase()))
                        || ["foo", "bar", "dir"].contains(&stem)
                });
                if placeholder || w.contains(['*', '{', '<', '$']) || w.contains("...") {
                    continue;
                }
                if TOP.iter().any(|t| w.starts_with(t)) {
                    found.push((w.to_owned(), Root::Top, n + 1));
                } else if IN_CRATE.iter().any(|t| w.starts_with(t)) {
                    found.push((w.to_owned(), Root::Crate, n + 1));
                } else if w.ends_with(".rs") && !w.starts_with(['/', '.', '~']) && !w.contains("::") {
                    found.push((w.to_owned(), Root::Src, n + 1));
                }
            }
        }
    }
    found
}

/// The targets of `text`'s relative Markdown links, `(file, anchor, line)`: the file
/// empty for a link within `text`, the anchor empty for none.
fn links(text: &str) -> Vec<(String, String, usize)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for part in line.split("](").skip(1) {
            let Some(end) = part.find(')') else { continue };
            let (file, anchor) = part[..end].split_once('#').unwrap_or((&part[..end], ""));
            if !part[..end].is_empty() && !file.contains("://") && !file.starts_with("mailto:") {
                found.push((file.to_owned(), anchor.to_owned(), n + 1));
            }
        }
    }
    found
}

/// The anchors GitHub gives `text`'s headings: lowercased, punctuation other than `-`
/// and `_` dropped, spaces made `-`.
fn anchors(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            l.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect()
}

/// Where a path [`named_paths`] found is looked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Root {
    /// The repository's top level.
    Top,
    /// One of the crates' directories.
    Crate,
    /// The end of the path of a crate's file (`protocol/lock.rs`, `repair.rs`): a
    /// path within one of its directories, or a file name alone.
    Src,
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn every_repository_path_in_the_docs_exists() {
    let root = repo();
    let crates: Vec<PathBuf> =
        std::fs::read_dir(root.join("crates")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    let sources: Vec<PathBuf> = crates.iter().flat_map(|c| files_under(c)).collect();
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in documents() {
        let text = std::fs::read_to_string(root.join(&file)).unwrap();
        for (path, at, line) in named_paths(&text) {
            let exists = match at {
                Root::Top => root.join(&path).exists(),
                // Relative to the crate the text is about: one of them holds it.
                Root::Crate => crates.iter().any(|c| c.join(&path).exists()),
                Root::Src => sources.iter().any(|f| f.ends_with(&path)),
            };
            if !exists {
                missing.push(format!("{file}:{line}: `{path}`"));
            }
            checked += 1;
        }
        let dir = Path::new(&file).parent().unwrap();
        for (target, anchor, line) in links(&text) {
            let path = if target.is_empty() { root.join(&file) } else { root.join(dir).join(&target) };
            if !path.exists() {
                missing.push(format!("{file}:{line}: link ({target})"));
            } else if !anchor.is_empty()
                && path.is_file()
                && !anchors(&std::fs::read_to_string(&path).unwrap_or_default()).contains(&anchor)
            {
                missing.push(format!("{file}:{line}: link ({target}#{anchor}): no such heading"));
            }
            checked += 1;
        }
    }
    assert!(missing.is_empty(), "the docs name files that do not exist:\n{}", missing.join("\n"));
    assert!(checked >= 50, "only {checked} paths found in the docs: is the extraction broken?");
}

#[test]
fn the_path_extraction_finds_top_level_and_crate_paths() {
    let text = "see `crates/ringtrace/src/lib.rs` and `src/wait/mod.rs`, run `bash scripts/test.sh`;\n\
                not `crates/*/examples`, `crates/NAME`, `/tmp/x` nor `target/release/x`; [a](docs/cli.md#x)\n\
                `protocol/lock.rs` holds it, `repair.rs` too, not `foo/tests.rs`";
    let paths: Vec<(String, Root)> = named_paths(text).into_iter().map(|(p, at, _)| (p, at)).collect();
    assert_eq!(
        paths,
        [
            ("crates/ringtrace/src/lib.rs".to_owned(), Root::Top),
            ("src/wait/mod.rs".to_owned(), Root::Crate),
            ("scripts/test.sh".to_owned(), Root::Top),
            ("protocol/lock.rs".to_owned(), Root::Src),
            ("repair.rs".to_owned(), Root::Src)
        ]
    );
    assert_eq!(links(text), [("docs/cli.md".to_owned(), "x".to_owned(), 2)]);
    assert_eq!(
        anchors("# A\n## OpenTelemetry: `--to otlp://`\ntext\n### `otel`: the layer"),
        ["a", "opentelemetry---to-otlp", "otel-the-layer"]
    );
}

/// A figure of `table`'s row whose first cells are `first`: the cell `col` (0-based).
fn cell(table: &str, first: &[&str], col: usize) -> f64 {
    let row = table
        .lines()
        .map(|l| l.split('|').map(str::trim).skip(1).collect::<Vec<_>>())
        .find(|cells| cells.len() > col && cells[..first.len()] == *first)
        .unwrap_or_else(|| panic!("docs/benchmark.md has no row {first:?}"));
    row[col].parse().unwrap_or_else(|_| panic!("row {first:?}: {:?} is not a number", row[col]))
}

#[test]
fn the_readmes_cost_per_span_is_the_benchmarks() {
    let bench = std::fs::read_to_string(repo().join("docs/benchmark.md")).unwrap();
    let otel = &bench[bench.find("### `otel`").expect("docs/benchmark.md's otel section")..];
    // Writer CPU ns a span, one writer: the floor (the registry alone) and the layer.
    let floor = cell(otel, &["noop-layer", "registry", "1"], 3).round() as u64;
    let all = cell(otel, &["ringtrace-tracing", "flight", "1"], 3).round() as u64;
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let at = readme.find("### Into Jaeger").expect("README's Jaeger section");
    let section = &readme[at..at + readme[at..].find("\n## ").unwrap_or(readme.len() - at)];
    for (what, ns) in [("in all", all), ("the floor", floor), ("over the floor", all - floor)] {
        assert!(
            section.contains(&format!("about {ns} ns")),
            "README's Jaeger section does not give the otel group's {what}, about {ns} ns a span \
             (docs/benchmark.md)"
        );
    }
    assert!(section.contains("docs/benchmark.md"), "README's figures name their source");
}

#[test]
fn the_readmes_otlp_commands_run_against_the_scripts_jaeger() {
    // scripts/jaeger.sh's ports: OTLP/gRPC at BASE + 7, OTLP/HTTP at BASE + 8.
    let script = std::fs::read_to_string(repo().join("scripts/jaeger.sh")).unwrap();
    let base: u16 = script
        .lines()
        .find_map(|l| l.strip_prefix("BASE=${JAEGER_BASE_PORT:-")?.strip_suffix('}')?.parse().ok())
        .expect("scripts/jaeger.sh's BASE port");
    let endpoints = [format!("otlp://127.0.0.1:{}", base + 7), format!("otlp+http://127.0.0.1:{}", base + 8)];
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(readme.contains("bash scripts/jaeger.sh start "), "README does not start the script's Jaeger");
    let lines: Vec<String> = extract("README.md")
        .into_iter()
        .filter(|s| !s.inline)
        .flat_map(|s| s.lines)
        .filter(|l| delivers(l) && !is_synopsis(l))
        .collect();
    for endpoint in &endpoints {
        assert!(
            lines.iter().any(|l| l.split_whitespace().any(|w| w == endpoint)),
            "no command in README.md delivers to the script's Jaeger at {endpoint}: {lines:?}"
        );
    }
    for l in &lines {
        // Jaeger refuses log records: a command that sends them fails against it.
        assert!(l.contains("--signals traces"), "README.md: `{l}` sends log records, which Jaeger refuses");
    }
}
