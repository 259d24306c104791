//! Spans recorded in folded form (`open`, `done`) where nothing happens between a
//! span's two records on its thread, unfolded otherwise: drawn sequences of span and
//! event operations on two threads, taking turns, against a model of what they record.
//! Decoding gives back exactly the model's entries, whichever form each span took:
//! records between a span's new and its enter, re-entry, spans entered and exited on
//! another thread than the one that made them, exits in any order, records and
//! follows-from, a thread's exit with a record held.

mod common;

use std::sync::mpsc;
use std::sync::Mutex;

use common::{dispatch, TempDir};
use proptest::prelude::*;
use ringtrace_tracing::decode::view::{ViewKind, Views};
use ringtrace_tracing::decode::{EntryKind, Trace, Value};
use ringtrace_tracing::Builder;
use tracing::{Dispatch, Span};

/// Span slots the operations name.
const SLOTS: usize = 4;
/// Threads taking turns.
const THREADS: usize = 2;

#[derive(Clone, Copy, Debug)]
enum Op {
    /// A new span in the slot (the slot's span, if any and entered nowhere, dropped
    /// first: it closes).
    New(usize),
    Enter(usize),
    Exit(usize),
    /// The slot's span dropped (it closes), if entered nowhere.
    Drop(usize),
    Event,
    Record(usize),
    Follows(usize, usize),
}

fn op() -> impl Strategy<Value = (usize, Op)> {
    let slot = 0..SLOTS;
    let op = prop_oneof![
        3 => slot.clone().prop_map(Op::New),
        4 => slot.clone().prop_map(Op::Enter),
        4 => slot.clone().prop_map(Op::Exit),
        2 => slot.clone().prop_map(Op::Drop),
        3 => Just(Op::Event),
        1 => slot.clone().prop_map(Op::Record),
        1 => (slot.clone(), slot).prop_map(|(a, b)| Op::Follows(a, b)),
    ];
    // Mostly one thread, so that a span's records often follow one another.
    (prop_oneof![4 => Just(0usize), 1 => Just(1usize)], op)
}

/// What the operations should record, as [`render`] writes decoded entries: spans by
/// the number `n` each was made with.
///
/// The folding the crate documents: a thread's `new span` followed, on that thread, by
/// the span's `enter` (nothing else recorded between) is one record at the time of the
/// `new span`, so the `enter` comes right after it, before what other threads recorded
/// meanwhile; likewise a `close` right after its `exit`.
#[derive(Default)]
struct Model {
    /// Each slot's span number.
    slots: [Option<u64>; SLOTS],
    /// Each thread's entered spans (slots), innermost last, and whether the span was
    /// entered already further out (the registry's "duplicate": its own idea of the
    /// current span, which becomes a new span's parent there and keeps that parent
    /// open, skips those; the layer's does not).
    entered: [Vec<(usize, bool)>; THREADS],
    /// Each thread's last record, if a `new span` (true) or an `exit` (false): the span's
    /// number and the record's place in `want`.
    last: [Option<(bool, u64, usize)>; THREADS],
    /// Each span not closed yet: its parent in the registry, and its children there not
    /// closed yet. The registry keeps a span open while a child is: it closes with its
    /// last child.
    /// (`(parent, children open, its handle dropped)`).
    open: std::collections::HashMap<u64, (u64, u32, bool)>,
    next: u64,
    want: Vec<String>,
}

impl Model {
    fn entered_anywhere(&self, s: usize) -> bool {
        self.entered.iter().any(|e| e.iter().any(|&(x, _)| x == s))
    }

    /// Thread `t` records `line`: after its last record if that is the `new span` (for
    /// an `enter`, `is_new`) or `exit` (for a `close`) of span `n`, else at the end.
    fn push(&mut self, t: usize, line: String, folds_after: Option<(bool, u64)>) {
        match (self.last[t].take(), folds_after) {
            (Some((is_new, held, at)), Some((want_new, n))) if is_new == want_new && held == n => {
                self.want.insert(at + 1, line);
                for l in self.last.iter_mut().flatten() {
                    if l.2 > at {
                        l.2 += 1;
                    }
                }
            }
            _ => self.want.push(line),
        }
    }

    /// Thread `t`'s last record is `line`, a `new span` (`is_new`) or `exit` of span `n`.
    fn push_held(&mut self, t: usize, line: String, is_new: bool, n: u64) {
        self.push(t, line, None);
        self.last[t] = Some((is_new, n, self.want.len() - 1));
    }

    /// Span `n`'s last handle is dropped on thread `t`: it closes, unless a child is
    /// open; a parent whose handle went and whose last child this was closes after it.
    fn drop_span(&mut self, t: usize, n: u64) {
        let span = self.open.get_mut(&n).unwrap();
        span.2 = true;
        if span.1 == 0 {
            self.close(t, n);
        }
    }

    fn close(&mut self, t: usize, n: u64) {
        let (parent, _, _) = self.open.remove(&n).unwrap();
        self.push(t, format!("close {n}"), Some((false, n)));
        if let Some(p) = self.open.get_mut(&parent) {
            p.1 -= 1;
            if p.1 == 0 && p.2 {
                self.close(t, parent);
            }
        }
    }

    /// Whether `op` on thread `t` is carried out (else it is skipped by both sides), and
    /// what it records in the model.
    fn apply(&mut self, t: usize, op: Op) -> bool {
        match op {
            Op::New(s) => {
                if self.entered_anywhere(s) {
                    return false;
                }
                if let Some(n) = self.slots[s].take() {
                    self.drop_span(t, n);
                }
                self.next += 1;
                let parent = self.entered[t].last().and_then(|&(p, _)| self.slots[p]).unwrap_or(0);
                self.push_held(t, format!("new {} parent {parent}", self.next), true, self.next);
                self.slots[s] = Some(self.next);
                let held_by =
                    self.entered[t].iter().rev().find(|&&(_, dup)| !dup).and_then(|&(p, _)| self.slots[p]).unwrap_or(0);
                self.open.insert(self.next, (held_by, 0, false));
                if let Some(p) = self.open.get_mut(&held_by) {
                    p.1 += 1;
                }
            }
            Op::Enter(s) => {
                let Some(n) = self.slots[s] else { return false };
                let dup = self.entered[t].iter().any(|&(x, _)| x == s);
                self.entered[t].push((s, dup));
                self.push(t, format!("enter {n}"), Some((true, n)));
            }
            Op::Exit(s) => {
                let Some(i) = self.entered[t].iter().rposition(|&(e, _)| e == s) else { return false };
                self.entered[t].remove(i);
                let n = self.slots[s].unwrap();
                self.push_held(t, format!("exit {n}"), false, n);
            }
            Op::Drop(s) => {
                if self.entered_anywhere(s) {
                    return false;
                }
                let Some(n) = self.slots[s].take() else { return false };
                self.drop_span(t, n);
            }
            Op::Event => {
                self.next += 1;
                let inner = self.entered[t].last().and_then(|&(p, _)| self.slots[p]).unwrap_or(0);
                self.push(t, format!("event {} in {inner}", self.next), None);
            }
            Op::Record(s) => {
                let Some(n) = self.slots[s] else { return false };
                self.next += 1;
                self.push(t, format!("record {n} v={}", self.next), None);
            }
            Op::Follows(a, b) => {
                let (Some(x), Some(y)) = (self.slots[a], self.slots[b]) else { return false };
                self.push(t, format!("follows {x} {y}"), None);
            }
        }
        true
    }
}

/// Carries out `op` on the calling thread; `n` is the model's number for what it makes.
fn run(op: Op, slots: &Mutex<[Option<Span>; SLOTS]>, n: u64) {
    let mut slots = slots.lock().unwrap();
    match op {
        Op::New(s) => {
            drop(slots[s].take());
            slots[s] = Some(tracing::info_span!("s", n, v = tracing::field::Empty));
        }
        Op::Enter(s) => {
            let id = slots[s].as_ref().unwrap().id().unwrap();
            tracing::dispatcher::get_default(|d| d.enter(&id));
        }
        Op::Exit(s) => {
            let id = slots[s].as_ref().unwrap().id().unwrap();
            tracing::dispatcher::get_default(|d| d.exit(&id));
        }
        Op::Drop(s) => drop(slots[s].take()),
        Op::Event => tracing::info!(n, "e"),
        Op::Record(s) => {
            slots[s].as_ref().unwrap().record("v", n);
        }
        Op::Follows(a, b) => {
            let follows = slots[b].as_ref().unwrap().clone();
            slots[a].as_ref().unwrap().follows_from(&follows);
        }
    }
}

/// The decoded entries, spans by the number they were made with.
fn render(t: &Trace) -> Vec<String> {
    let mut number = std::collections::HashMap::new();
    let num = |number: &std::collections::HashMap<u64, u64>, id: u64| number.get(&id).copied().unwrap_or(0);
    let mut out = Vec::new();
    for e in t.entries() {
        out.push(match e.kind {
            EntryKind::NewSpan { span, parent, fields, .. } => {
                let Some(Value::U64(n)) = fields.iter().find(|f| f.name == "n").map(|f| f.value.clone()) else {
                    panic!("a span without its number: {fields:?}")
                };
                number.insert(span, n);
                format!("new {n} parent {}", num(&number, parent))
            }
            EntryKind::Enter { span } => format!("enter {}", num(&number, span)),
            EntryKind::Exit { span } => format!("exit {}", num(&number, span)),
            EntryKind::Close { span } => format!("close {}", num(&number, span)),
            EntryKind::Record { span, fields } => format!("record {} v={}", num(&number, span), fields[0].value),
            EntryKind::FollowsFrom { span, follows } => {
                format!("follows {} {}", num(&number, span), num(&number, follows))
            }
            EntryKind::Event(ev) => {
                let inner = ev.spans.last().map_or(0, |s| num(&number, s.id));
                format!("event {} in {inner}", ev.field("n").unwrap())
            }
            EntryKind::Lost { count } => format!("lost {count}"),
        });
    }
    out
}

/// The records seen in place ([`Views`], what the exporters read), as [`render`] writes
/// them but for an event's span.
fn render_views(t: &Trace) -> Vec<String> {
    let mut number = std::collections::HashMap::new();
    let num = |number: &std::collections::HashMap<u64, u64>, id: u64| number.get(&id).copied().unwrap_or(0);
    let mut out = Vec::new();
    let mut views = Views::new(t, 0..u64::MAX, None);
    while let Some(v) = views.next() {
        out.push(match v.kind {
            ViewKind::Event { values, .. } => {
                // `n`, the event's one number (its message is text).
                let n = values.iter().map(|(_, _, v)| v.into_value()).find(|v| matches!(v, Value::U64(_)));
                format!("event {}", n.unwrap())
            }
            ViewKind::Enter(span) => format!("enter {}", num(&number, span)),
            ViewKind::Exit(span) => format!("exit {}", num(&number, span)),
            ViewKind::Lost(count) => format!("lost {count}"),
            ViewKind::Bad => "bad".into(),
            ViewKind::Other(EntryKind::NewSpan { span, parent, fields, .. }) => {
                let Value::U64(n) = fields[0].value else { panic!("a span without its number: {fields:?}") };
                number.insert(span, n);
                format!("new {n} parent {}", num(&number, parent))
            }
            ViewKind::Other(EntryKind::Close { span }) => format!("close {}", num(&number, span)),
            ViewKind::Other(EntryKind::Record { span, fields }) => {
                format!("record {} v={}", num(&number, span), fields[0].value)
            }
            ViewKind::Other(EntryKind::FollowsFrom { span, follows }) => {
                format!("follows {} {}", num(&number, span), num(&number, follows))
            }
            ViewKind::Other(other) => format!("{other:?}"),
        });
    }
    out
}

/// Runs `ops` on two threads taking turns (each waits for the previous operation to be
/// done), into a stream; returns the decoded entries and the model's.
fn record(ops: &[(usize, Op)], dir: &TempDir, case: usize) -> (Vec<String>, Vec<String>) {
    let path = dir.join(&format!("case-{case}.rtt"));
    let (layer, recorder) = Builder::stream(&path).per_thread_bytes(1 << 16).build().unwrap();
    let d: Dispatch = dispatch(layer);
    let slots: Mutex<[Option<Span>; SLOTS]> = Mutex::new(Default::default());
    let mut model = Model::default();
    std::thread::scope(|s| {
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let (txs, threads): (Vec<_>, Vec<_>) = (0..THREADS)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<(Op, u64)>();
                let (d, slots, done) = (d.clone(), &slots, done_tx.clone());
                let thread = s.spawn(move || {
                    tracing::dispatcher::with_default(&d, || {
                        for (op, n) in rx {
                            run(op, slots, n);
                            done.send(()).unwrap();
                        }
                    })
                });
                (tx, thread)
            })
            .unzip();
        for &(t, op) in ops {
            if model.apply(t, op) {
                txs[t].send((op, model.next)).unwrap();
                done_rx.recv().unwrap();
            }
        }
        // Spans still entered are exited, then every span dropped, on the threads that
        // hold them; then the threads exit (writing what they hold back).
        for (t, tx) in txs.iter().enumerate() {
            while let Some(&(s, _)) = model.entered[t].last() {
                model.apply(t, Op::Exit(s));
                tx.send((Op::Exit(s), 0)).unwrap();
                done_rx.recv().unwrap();
            }
        }
        for s in 0..SLOTS {
            if model.apply(0, Op::Drop(s)) {
                txs[0].send((Op::Drop(s), 0)).unwrap();
                done_rx.recv().unwrap();
            }
        }
        // Joined one by one: a join waits for the thread's thread-local state to go,
        // which writes what the thread holds back (the scope's own wait does not).
        drop(txs);
        for t in threads {
            t.join().unwrap();
        }
    });
    drop(d);
    let stats = recorder.finish().unwrap();
    assert_eq!((stats.lost, stats.held), (0, 0), "{stats:?}");
    let tr = Trace::open(&path).unwrap();
    let entries = render(&tr);
    // The same records seen in place, an event's span left out.
    let events_alone: Vec<String> = entries.iter().map(|l| l.split(" in ").next().unwrap_or(l).to_string()).collect();
    assert_eq!(render_views(&tr), events_alone);
    (entries, model.want)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn decode_gives_back_what_was_recorded_folded_or_not(ops in prop::collection::vec(op(), 1..60)) {
        static CASE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = TempDir::new("folding");
        let case = CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (got, want) = record(&ops, &dir, case);
        prop_assert_eq!(got, want);
    }
}

/// A thread that holds a span's `new span` record back when the stream finishes: the
/// stats count it held. A thread that exits holding one writes it as it exits, and a
/// stream's finish waits a moment for it.
#[test]
fn a_record_held_at_the_end_is_counted_or_written() {
    let dir = TempDir::new("folding-held");
    let path = dir.join("held.rtt");
    let (layer, recorder) = Builder::stream(&path).per_thread_bytes(1 << 16).build().unwrap();
    let d = dispatch(layer);
    let (made_tx, made_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let idle = {
        let d = d.clone();
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&d, || {
                let span = tracing::info_span!("idle", n = 1u64);
                made_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                drop(span);
            })
        })
    };
    // A thread that makes a span and exits right away, joined by the scope alone.
    std::thread::scope(|s| {
        s.spawn(|| tracing::dispatcher::with_default(&d, || std::mem::forget(tracing::info_span!("gone", n = 2u64))));
    });
    made_rx.recv().unwrap();
    let stats = recorder.finish().unwrap();
    assert_eq!(stats.held, 1, "the idle thread's new span: {stats:?}");
    go_tx.send(()).unwrap();
    idle.join().unwrap();
    let t = Trace::open(&path).unwrap();
    let names: Vec<String> = render(&t);
    assert_eq!(names, ["new 2 parent 0"], "the exited thread's held record is in the file");
    assert_eq!(t.stat("held"), Some(1), "the file says what it goes without");
    let summary = ringtrace_tracing::decode::text::summary(&t);
    assert!(summary.contains("1 span records (a new span or an exit) held back"), "{summary}");
}
