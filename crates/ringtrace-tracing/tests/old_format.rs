//! A trace written in trace file format 1 (the format before spans could be folded into
//! `open` and `done` records) still decodes, entry for entry. The file was written by
//! that version's stream recorder from this workload:
//!
//! ```text
//! let outer = info_span!("request", id = 7u64, path = "/a", ok = true);
//! let _g = outer.enter();
//! info!(n = 1u64, x = -2i64, f = 0.5, s = "text", "first");
//! for i in 0..3u64 {
//!     let inner = debug_span!("step", i, late = field::Empty);
//!     inner.record("late", 9u64);
//!     inner.follows_from(&outer);
//!     inner.in_scope(|| warn!(i, d = ?vec![i; 2], "inside"));
//! }
//! let idle = info_span!("idle", k = "v");
//! error!(e = 1u128 << 100, "between new and enter");
//! idle.in_scope(|| trace!("in idle"));
//! ```

mod common;

use common::TempDir;
use ringtrace_tracing::decode::{EntryKind, Field, Trace};
use ringtrace_tracing::Builder;
use tracing_subscriber::layer::SubscriberExt;

fn fields(f: &[Field<'_>]) -> String {
    f.iter().map(|f| format!("{}={}", f.name, f.value)).collect::<Vec<_>>().join(" ")
}

/// Each entry as a line: kind, span ids, callsite name, fields.
pub fn lines(t: &Trace) -> Vec<String> {
    t.entries()
        .map(|e| match e.kind {
            EntryKind::Event(ev) => {
                let spans: Vec<_> = ev.spans.iter().map(|s| s.id.to_string()).collect();
                let name = ev.callsite.map_or("?", |c| c.name.as_str());
                format!("event {name} in [{}] {}", spans.join(","), fields(&ev.fields))
            }
            EntryKind::NewSpan { span, parent, callsite, fields: f } => {
                format!("new {span} parent {parent} {} {}", callsite.map_or("?", |c| c.name.as_str()), fields(&f))
            }
            EntryKind::Record { span, fields: f } => format!("record {span} {}", fields(&f)),
            EntryKind::Enter { span } => format!("enter {span}"),
            EntryKind::Exit { span } => format!("exit {span}"),
            EntryKind::Close { span } => format!("close {span}"),
            EntryKind::FollowsFrom { span, follows } => format!("follows {span} {follows}"),
            EntryKind::Lost { count } => format!("lost {count}"),
        })
        .collect()
}

/// The file's workload (module docs), recorded now.
fn workload() {
    let outer = tracing::info_span!("request", id = 7u64, path = "/a", ok = true);
    let _g = outer.enter();
    tracing::info!(n = 1u64, x = -2i64, f = 0.5, s = "text", "first");
    for i in 0..3u64 {
        let inner = tracing::debug_span!("step", i, late = tracing::field::Empty);
        inner.record("late", 9u64);
        inner.follows_from(&outer);
        inner.in_scope(|| tracing::warn!(i, d = ?vec![i; 2], "inside"));
    }
    let idle = tracing::info_span!("idle", k = "v");
    tracing::error!(e = 1u128 << 100, "between new and enter");
    idle.in_scope(|| tracing::trace!("in idle"));
}

/// The lines without the events' names (their callsites' file and line).
fn unnamed(lines: &[String]) -> Vec<String> {
    lines.iter().map(|l| l.split(" in [").last().map_or(l.clone(), |rest| format!("event in [{rest}"))).collect()
}

/// The same workload recorded by this version folds what it can (its records are
/// fewer) and decodes to the same entries, entry for entry.
#[test]
fn the_same_workload_recorded_now_folds_and_decodes_the_same() {
    let dir = TempDir::new("old-format-now");
    let path = dir.join("now.rtt");
    let (layer, recorder) = Builder::stream(&path).per_thread_bytes(1 << 16).build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), workload);
    let stats = recorder.finish().unwrap();
    assert_eq!(stats.held, 0, "{stats:?}");
    let now = Trace::open(&path).unwrap();
    let old = Trace::open(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/trace-format-1.rtt")).unwrap();
    assert_eq!(unnamed(&lines(&now)), unnamed(&lines(&old)));
    // Folded: `request`'s new and enter, and the exit and close of all five spans.
    assert_eq!((old.len(), now.len()), (32, 26));
}

#[test]
fn a_format_1_trace_decodes_entry_for_entry() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/trace-format-1.rtt");
    let t = Trace::open(path).expect("a format 1 trace opens");
    let got = lines(&t);
    let want: &[&str] = &[
        "new 1 parent 0 request id=7 path=/a ok=true",
        "enter 1",
        "event event src/main.rs:9 in [1] message=first n=1 x=-2 f=0.5 s=text",
        "new 2 parent 1 step i=0",
        "record 2 late=9",
        "follows 2 1",
        "enter 2",
        "event event src/main.rs:14 in [1,2] message=inside i=0 d=[0, 0]",
        "exit 2",
        "close 2",
        "new 2251799813685250 parent 1 step i=1",
        "record 2251799813685250 late=9",
        "follows 2251799813685250 1",
        "enter 2251799813685250",
        "event event src/main.rs:14 in [1,2251799813685250] message=inside i=1 d=[1, 1]",
        "exit 2251799813685250",
        "close 2251799813685250",
        "new 4503599627370498 parent 1 step i=2",
        "record 4503599627370498 late=9",
        "follows 4503599627370498 1",
        "enter 4503599627370498",
        "event event src/main.rs:14 in [1,4503599627370498] message=inside i=2 d=[2, 2]",
        "exit 4503599627370498",
        "close 4503599627370498",
        "new 6755399441055746 parent 1 idle k=v",
        "event event src/main.rs:17 in [1] message=between new and enter e=1267650600228229401496703205376",
        "enter 6755399441055746",
        "event event src/main.rs:18 in [1,6755399441055746] message=in idle",
        "exit 6755399441055746",
        "close 6755399441055746",
        "exit 1",
        "close 1",
    ];
    assert_eq!(got, want);
}
