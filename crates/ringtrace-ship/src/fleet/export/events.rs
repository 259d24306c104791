//! An events source's records (a `ringtrace-tracing` recorder's, one JSON object each)
//! drawn as the trace export draws the recorder on its host (see the
//! [mapping](super#an-events-sources-records)): each recorder thread a thread track of
//! the host's process, events as instants, spans as slices, losses as losses.

use foldhash::HashMap;
use ringtrace_tracing::Level;
use serde_json::Value as Json;

use super::object::Object;
use super::tracks::Tracks;

/// Spans remembered at most, over all sources (a span's name, target and fields, from
/// its `new` or `open` object to its `close` or `done`): past this, a span entered
/// shows as `?`, as a span whose `new span` record a recorder overwrote does.
const MAX_SPANS: usize = 1 << 16;

/// Recorder threads at most, over all sources: past this, an object goes on its
/// source's own track.
const MAX_THREADS: usize = 1 << 14;

/// CTF event classes numbered at most (one per target, name, level and field names);
/// past this, events share one class per shape, named `ringtrace:event`.
const MAX_CLASSES: usize = 4096;

/// The CTF class number past [`MAX_CLASSES`] (the fleet's plain records' is `u64::MAX`).
pub(super) const SHARED_CLASS: u64 = u64::MAX - 1;

/// What a CTF event class is kept apart by: target, callsite name, level, field names.
type ClassKey = (String, String, Level, Vec<String>);

/// A span as its `new` (or `open`) object and later `record`s describe it.
#[derive(Debug)]
pub(super) struct Span {
    pub(super) name: String,
    pub(super) target: String,
    /// Its fields: name, JSON value and kind (see [`object::typed`](super::object::typed)).
    pub(super) fields: Vec<(String, Json, Option<char>)>,
}

impl Span {
    /// `o`'s fields into the span's: a field recorded again replaces its value in place.
    fn record(&mut self, o: &Object) {
        let mut kinds = o.kinds.as_deref().unwrap_or("").chars();
        for (k, v) in o.fields.iter().flatten() {
            let kind = kinds.next();
            match self.fields.iter_mut().find(|f| f.0 == *k) {
                Some(f) => (f.1, f.2) = (v.clone(), kind),
                None => self.fields.push((k.clone(), v.clone(), kind)),
            }
        }
    }
}

/// What one object draws.
pub(super) enum Drawn<'o> {
    /// Not an object of the agent's, or a record its host could not decode: drawn as a
    /// plain source's record.
    Raw,
    /// Nothing: a span's `new`, `record`, `close` or `follows`, noted.
    Nothing,
    /// An event on thread track `track`.
    Event { track: usize, name: &'o str, category: &'o str, level: Level, class: u64 },
    /// A slice opens: span `span` entered (`None`: a span not known, drawn `?`).
    Begin { track: usize, span: u64, known: Option<&'o Span> },
    /// Span `span` exited: the innermost slice of the thread closes if `closes` (it is
    /// that span's); else the trace formats draw nothing and CTF its `span_exit`, as the
    /// trace export does.
    End { track: usize, span: u64, closes: bool },
    /// Events the recorder lost.
    Lost { track: usize, count: u64 },
}

/// The state of an export's events sources: their threads, spans, open slices.
#[derive(Debug, Default)]
pub(super) struct Events {
    /// Spans by (source track, span id).
    spans: HashMap<(usize, u64), Span>,
    /// Each thread track's open slices, innermost last.
    open: HashMap<usize, Vec<u64>>,
    /// Thread tracks by (source track, recorder tid) and by (source track, thread name)
    /// (an object without a tid).
    by_tid: HashMap<(usize, u32), usize>,
    by_name: HashMap<(usize, String), usize>,
    /// CTF class numbers, where numbered (a CTF export's: the others need none).
    classes: Option<HashMap<ClassKey, u64>>,
    /// The latest time of a span's object, where slices still open at the end close.
    last: u64,
    /// Records drawn as events, slices or losses.
    pub(super) drawn: u64,
}

/// The event name the trace export gives: its `message` (text; another value's is
/// empty), else its callsite's name, else `?`.
fn event_name(o: &Object) -> &str {
    match o.fields.as_ref().and_then(|f| f.get("message")) {
        Some(Json::String(m)) => m,
        Some(_) => "",
        None => o.name.as_deref().unwrap_or("?"),
    }
}

impl Events {
    /// No source yet; CTF event classes numbered where `classes`.
    pub(super) fn new(classes: bool) -> Self {
        Events { classes: classes.then(HashMap::default), ..Events::default() }
    }

    /// The thread track of `o`, an object of the source drawn on track `source`.
    fn thread(&mut self, tracks: &mut Tracks, source: usize, o: &Object) -> usize {
        let name = o.thread.as_deref();
        if let Some(&t) = o.tid.and_then(|tid| self.by_tid.get(&(source, tid))) {
            return t;
        }
        if o.tid.is_none() {
            if let Some(&t) = name.and_then(|n| self.by_name.get(&(source, n.to_owned()))) {
                return t;
            }
        }
        let Some(name) = name else { return source };
        if self.by_tid.len() + self.by_name.len() >= MAX_THREADS {
            return source;
        }
        let t = tracks.thread(source, name);
        if let Some(tid) = o.tid {
            self.by_tid.insert((source, tid), t);
        }
        self.by_name.insert((source, name.to_owned()), t);
        t
    }

    /// What `o`, a record at `time_ns` of the source drawn on track `source`, draws.
    pub(super) fn take<'s>(&'s mut self, tracks: &mut Tracks, source: usize, o: &'s Object, time_ns: u64) -> Drawn<'s> {
        match (&o.level, o.lost, &o.span, &o.undecodable) {
            (Some(level), None, None, None) => {
                let Ok(level) = level.parse::<Level>() else { return Drawn::Raw };
                let track = self.thread(tracks, source, o);
                let (name, category) = (event_name(o), o.target.as_deref().unwrap_or("?"));
                let class = self.class(o, level);
                self.drawn += 1;
                Drawn::Event { track, name, category, level, class }
            }
            (None, Some(count), None, None) => {
                self.drawn += 1;
                Drawn::Lost { track: self.thread(tracks, source, o), count }
            }
            (None, None, Some(kind), None) => {
                let Some(Ok(id)) = o.id.as_ref().map(|i| i.get()) else { return Drawn::Raw };
                if !["new", "record", "enter", "exit", "close", "follows", "open", "done"].contains(&kind.as_str()) {
                    return Drawn::Raw;
                }
                let track = self.thread(tracks, source, o);
                self.last = self.last.max(time_ns);
                self.span(source, track, kind, id, o)
            }
            _ => Drawn::Raw,
        }
    }

    /// A span's object: noted, and a slice opened or closed.
    fn span<'s>(&'s mut self, source: usize, track: usize, kind: &str, id: u64, o: &Object) -> Drawn<'s> {
        if matches!(kind, "new" | "open") && self.spans.len() < MAX_SPANS {
            let mut span = Span {
                name: o.name.clone().unwrap_or_else(|| "?".into()),
                target: o.target.clone().unwrap_or_default(),
                fields: Vec::new(),
            };
            span.record(o);
            self.spans.insert((source, id), span);
        }
        match kind {
            "record" => {
                if let Some(s) = self.spans.get_mut(&(source, id)) {
                    s.record(o);
                }
                Drawn::Nothing
            }
            "enter" | "open" => {
                self.open.entry(track).or_default().push(id);
                self.drawn += 1;
                Drawn::Begin { track, span: id, known: self.spans.get(&(source, id)) }
            }
            "exit" | "done" => {
                let stack = self.open.entry(track).or_default();
                let closes = stack.last() == Some(&id);
                if closes {
                    stack.pop();
                }
                if kind == "done" {
                    self.spans.remove(&(source, id));
                }
                self.drawn += 1;
                Drawn::End { track, span: id, closes }
            }
            "close" => {
                self.spans.remove(&(source, id));
                Drawn::Nothing
            }
            _ => Drawn::Nothing,
        }
    }

    /// The CTF class number of an event of `o` (see [`MAX_CLASSES`]); 0 where classes
    /// are not numbered.
    fn class(&mut self, o: &Object, level: Level) -> u64 {
        let Some(classes) = &mut self.classes else { return 0 };
        let names: Vec<String> = o.fields.iter().flatten().map(|(k, _)| k.clone()).collect();
        let key = (o.target.clone().unwrap_or_default(), o.name.clone().unwrap_or_default(), level, names);
        let n = classes.len() as u64;
        match classes.get(&key) {
            Some(&c) => c,
            None if classes.len() < MAX_CLASSES => {
                classes.insert(key, n);
                n
            }
            None => SHARED_CLASS,
        }
    }

    /// The slices still open, one `(thread track, latest time)` a slice, innermost
    /// first, threads in the order of `tid`.
    pub(super) fn open_at_end(&mut self, tid: impl Fn(usize) -> u32) -> Vec<(usize, u64)> {
        let mut open: Vec<(usize, usize)> = self.open.drain().map(|(t, s)| (t, s.len())).collect();
        open.sort_by_key(|&(t, _)| tid(t));
        open.into_iter().flat_map(|(t, n)| std::iter::repeat_n((t, self.last), n)).collect()
    }
}
