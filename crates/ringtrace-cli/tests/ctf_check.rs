//! `scripts/check-ctf.py`, the test command's check of the CTF export against `ringtrace
//! decode --format json`, on a trace whose strings are empty after the first events of
//! their callsite. babeltrace2 2.0.4 prints some of those as an earlier event's value,
//! so the check verifies them with a CTF reader of its own (`scripts/ctfread.py`): the
//! sound export passes; an export that writes an earlier value in place of an empty
//! string, which babeltrace2 prints just as it prints the sound export, fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{run, temp};
use tracing_subscriber::layer::SubscriberExt;

const CHECK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/check-ctf.py");
/// Events recorded, all of one callsite.
const EVENTS: u64 = 300;
/// The first events' labels; the others' are empty.
const FIRST: [&str; 7] = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"];
/// The events' `n` is `BASE + i`: bytes that appear once in a stream file, so that
/// event `i` can be found there.
const BASE: u64 = 0x5eed_ca5e_0000_0000;

/// A recorder directory of `EVENTS` events `{ n, label }` from one thread.
fn recorded() -> PathBuf {
    let dir = temp("rec");
    let (layer, recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(1 << 20).directory(&dir).build().unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    std::thread::Builder::new()
        .name("worker".into())
        .spawn(move || {
            tracing::dispatcher::with_default(&d, || {
                for i in 0..EVENTS {
                    let label = FIRST.get(i as usize).copied().unwrap_or("");
                    tracing::info!(n = BASE + i, label);
                }
            })
        })
        .unwrap()
        .join()
        .unwrap();
    drop(recorder);
    dir
}

/// `check-ctf.py CTF JSONL`: (exit status 0, stdout, stderr).
fn check(ctf: &Path, jsonl: &Path) -> (bool, String, String) {
    let o = Command::new("python3").arg(CHECK).arg(ctf).arg(jsonl).output().expect("python3 runs");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn babeltrace2(ctf: &Path) -> String {
    let o = Command::new("babeltrace2").arg(ctf).output().unwrap();
    assert!(o.status.success(), "babeltrace2 {}: {}", ctf.display(), String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// Event `i`'s label as babeltrace2 prints it, for each event it prints.
fn labels(text: &str) -> Vec<(u64, String)> {
    text.lines()
        .filter_map(|l| {
            let n = l.split("n = ").nth(1)?.split(',').next()?.parse::<u64>().ok()?;
            let label = l.split("label = \"").nth(1)?.rsplit_once('"')?.0.to_owned();
            Some((n - BASE, label))
        })
        .collect()
}

/// A copy of the export `ctf` in which event `i`'s empty label holds `value`, the
/// packet holding it grown to match (content_size and packet_size, in bits, at bytes
/// 40 and 48 of each packet; see `ringtrace_export::ctf`).
fn broken_copy(ctf: &Path, i: u64, value: &str) -> PathBuf {
    let out = temp("broken.ctf");
    std::fs::create_dir(&out).unwrap();
    let mut patched = 0;
    for f in std::fs::read_dir(ctf).unwrap() {
        let f = f.unwrap();
        let mut b = std::fs::read(f.path()).unwrap();
        let want = [&(BASE + i).to_le_bytes()[..], &[0]].concat();
        if let Some(at) = b.windows(want.len()).position(|w| w == want) {
            let end = at + 8; // the label's NUL
            b.splice(end..end, value.bytes());
            let mut p = 0;
            loop {
                let u = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
                assert_eq!(u32::from_le_bytes(b[p..p + 4].try_into().unwrap()), 0xC1FC_1FC1, "packet magic");
                let size = (u(&b, p + 48) / 8) as usize;
                if end < p + size {
                    let grown = u(&b, p + 48) + 8 * value.len() as u64;
                    b[p + 40..p + 48].copy_from_slice(&grown.to_le_bytes());
                    b[p + 48..p + 56].copy_from_slice(&grown.to_le_bytes());
                    break;
                }
                p += size;
            }
            patched += 1;
        }
        std::fs::write(out.join(f.file_name()), b).unwrap();
    }
    assert_eq!(patched, 1, "event {i} is in one stream file");
    out
}

#[test]
fn the_ctf_check_verifies_empty_strings_with_its_own_reader() {
    if !ringtrace_fixtures::have_babeltrace2() {
        return;
    }
    let dir = recorded();
    let dir = dir.to_str().unwrap();
    let ctf = temp("sound.ctf");
    let o = run(&["export", "--format", "ctf", dir, "-o", ctf.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = run(&["decode", "--format", "json", dir]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let jsonl = temp("decoded.jsonl");
    std::fs::write(&jsonl, &o.stdout).unwrap();

    let (ok, stdout, stderr) = check(&ctf, &jsonl);
    assert!(ok, "the sound export fails the check: {stdout}{stderr}");
    let empty = EVENTS - FIRST.len() as u64;
    let read = format!("read {EVENTS} events ({EVENTS} strings, {empty} empty)");
    assert!(stdout.contains(&read), "the check's own reader did not say it {read}: {stdout}");

    // Where babeltrace2 prints an empty label as an earlier event's (its 2.0.4 defect),
    // that value at that event is what a broken export could write unnoticed by it.
    let sound = babeltrace2(&ctf);
    let printed = labels(&sound);
    assert_eq!(printed.len() as u64, EVENTS, "{sound}");
    let stale = printed.iter().find(|(i, label)| *i >= FIRST.len() as u64 && !label.is_empty());
    // A babeltrace2 without the defect: any earlier value, at the first empty label.
    let (i, value) = stale.cloned().unwrap_or((FIRST.len() as u64, FIRST[0].to_owned()));
    assert!(FIRST.contains(&value.as_str()), "babeltrace2 printed {value:?} for event {i}");
    let broken = broken_copy(&ctf, i, &value);
    if stale.is_some() {
        assert_eq!(babeltrace2(&broken), sound, "babeltrace2 tells the broken export from the sound one");
    }
    let (ok, stdout, stderr) = check(&broken, &jsonl);
    assert!(!ok, "an export with {value:?} for event {i}'s empty label passes the check: {stdout}");
    assert!(
        stderr.contains("scripts/ctfread.py") && stderr.contains(&format!("field label: read '{value}'")),
        "the check's own reader does not name the wrong value: {stderr}"
    );
}
