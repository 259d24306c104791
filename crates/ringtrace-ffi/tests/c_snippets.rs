//! Every C snippet in README.md and the Markdown files under docs/ compiles as written
//! against the committed header, `include/ringtrace.h`.
//!
//! The convention: each fenced block marked `c` is a whole translation unit. It includes
//! the headers it uses and declares what it refers to (a fragment of a program is shown
//! inside a function of its own), so that a reader can paste it into a file. Each is
//! compiled with `cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I
//! crates/ringtrace-ffi/include`; a block that defines `main` is a whole program: it is
//! also linked with this crate's `libringtrace`, and run in a directory of its own,
//! where it must exit 0.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a program may run.
const RUN: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fenced C block: where it starts (`FILE:LINE`) and its text.
#[derive(Debug)]
struct Snippet {
    at: String,
    code: String,
}

/// The fenced blocks of `text` whose info string is `c`.
fn c_blocks(file: &str, text: &str) -> Vec<Snippet> {
    let mut found = Vec::new();
    let mut open: Option<(String, bool, String)> = None; // (at, is C, code)
    for (n, line) in text.lines().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            match open.take() {
                Some((at, true, code)) => found.push(Snippet { at, code }),
                Some(_) => {}
                None => open = Some((format!("{file}:{}", n + 1), info.trim() == "c", String::new())),
            }
            continue;
        }
        if let Some((_, _, code)) = &mut open {
            code.push_str(line);
            code.push('\n');
        }
    }
    found
}

/// README.md and every Markdown file under docs/, relative to the repository.
fn documents() -> Vec<String> {
    let mut files = vec!["README.md".to_owned()];
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

/// Whether a snippet defines `main`: a whole program.
fn is_program(code: &str) -> bool {
    code.lines().any(|l| l.starts_with("int main("))
}

/// The directory holding this crate's `libringtrace.so`: the release directory, or its
/// `deps/` (where this test runs from).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let found = [deps.parent().unwrap(), deps].into_iter().find(|d| d.join("libringtrace.so").is_file());
    match found {
        Some(dir) => dir.to_path_buf(),
        None => panic!("no libringtrace.so beside {}: the crate's cdylib was not built", deps.display()),
    }
}

/// Runs `cmd` to its end, at most `limit`; its status and output (stdout and stderr).
fn run(mut cmd: Command, limit: Duration, what: &str) -> (std::process::ExitStatus, String) {
    let out = tempfile(what);
    let file = std::fs::File::create(&out).unwrap();
    let mut child =
        cmd.stdin(Stdio::null()).stdout(file.try_clone().unwrap()).stderr(file).spawn().unwrap_or_else(|e| {
            panic!("{what}: cannot start it: {e}");
        });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (status, std::fs::read_to_string(&out).unwrap_or_default())
}

/// A fresh path in the test's temporary directory.
fn tempfile(name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "c-snippets-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name.replace(['/', ':'], "_"))
}

/// Compiles `s` (and, for a program, links and runs it); the reason it fails, if it does.
fn check(s: &Snippet) -> Result<(), String> {
    let src = tempfile(&format!("{}.c", s.at));
    std::fs::write(&src, &s.code).unwrap();
    let include = repo().join("crates/ringtrace-ffi/include");
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I"]).arg(&include).arg(&src);
    let (status, out) = run(cc, RUN, &s.at);
    if !status.success() {
        return Err(format!("{}: does not compile ({status}):\n{out}", s.at));
    }
    if !is_program(&s.code) {
        return Ok(());
    }
    let lib = library_dir();
    let exe = src.with_extension("");
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(&include)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lringtrace", "-lpthread"]);
    let (status, out) = run(cc, RUN, &s.at);
    if !status.success() {
        return Err(format!("{}: does not link ({status}):\n{out}", s.at));
    }
    let mut prog = Command::new(&exe);
    prog.current_dir(exe.parent().unwrap());
    let (status, out) = run(prog, RUN, &s.at);
    if !status.success() {
        return Err(format!("{}: the program exits {status}:\n{out}", s.at));
    }
    Ok(())
}

#[test]
fn every_c_snippet_in_the_docs_compiles_against_the_header() {
    let snippets: Vec<Snippet> =
        documents().iter().flat_map(|f| c_blocks(f, &std::fs::read_to_string(repo().join(f)).unwrap())).collect();
    assert!(snippets.len() >= 2, "only {} C snippets found: is the extraction broken? {snippets:?}", snippets.len());
    assert!(snippets.iter().any(|s| is_program(&s.code)), "no whole program among {snippets:?}");
    let failures: Vec<String> = snippets.iter().filter_map(|s| check(s).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_extraction_takes_c_blocks_only() {
    let text = "```c\nint x;\n```\n\n```rust\nfn f() {}\n```\n```c\nint main(void) { return 0; }\n```\n";
    let found = c_blocks("X.md", text);
    let got: Vec<(&str, &str)> = found.iter().map(|s| (s.at.as_str(), s.code.as_str())).collect();
    assert_eq!(got, [("X.md:1", "int x;\n"), ("X.md:8", "int main(void) { return 0; }\n")]);
    assert!(!is_program(&found[0].code) && is_program(&found[1].code));
}

#[test]
fn a_snippet_that_does_not_compile_is_caught() {
    // What the check would say of a fragment that uses a name no header it includes
    // declares: SIGUSR1 without <signal.h>.
    let s = Snippet {
        at: "sample".into(),
        code: "#include <ringtrace.h>\nint f(ringtrace_recorder *r) {\n    \
               return ringtrace_recorder_dump_on_signal(r, SIGUSR1, \"/tmp/x.rtt\");\n}\n"
            .into(),
    };
    let e = check(&s).expect_err("SIGUSR1 without <signal.h> compiled");
    assert!(e.contains("SIGUSR1"), "{e}");
}
