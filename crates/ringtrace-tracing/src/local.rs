//! Each thread's state for each recorder: its ring's producer, the spans it has
//! entered, its cache of callsite numbers, its scratch buffer and the record it holds
//! back. Nothing here is shared with another thread (but a flag saying whether it holds
//! a record, on a line of its own), so the event path touches no shared cache line.
//!
//! Held records: a span's `new span` record is held until the thread's next call into
//! the recorder. If that call enters the span, the two are written as one `open`
//! record, at the time of the `new span`; a span's `exit` is held likewise, and written
//! with a `close` that follows it as one `done` record. Anything else (an event, another
//! span, the thread's exit, [`flush`]) writes the held record first, as it was, with
//! its own time. A record held is in no ring: a dump taken meanwhile, or a stream that
//! finishes while a thread that went idle holds one, goes without it; the recorder's
//! stats count them (`held`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use tracing_core::Metadata;

use crate::catalog::ThreadInfo;
use ringtrace::channel::Stamp;

use crate::shared::{Counters, HeldFlag, LaneProducer, Shared};
use crate::wire::{self, kind};

/// Hashes a metadata address: the address itself, its low (alignment) bits dropped.
#[derive(Default)]
pub(crate) struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        // Fibonacci hashing: the multiplication spreads the address over the high bits
        // that hashbrown's control bytes take.
        self.0 = (n as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub(crate) struct Local {
    pub shared: Arc<Shared>,
    /// `None`: no ring could be had (every slot of a recorder directory taken).
    producer: Option<LaneProducer>,
    /// Entered spans, innermost last: `(span id, callsite number)`.
    pub stack: Vec<(u64, u32)>,
    cache: HashMap<usize, u32, BuildHasherDefault<AddrHasher>>,
    /// Where records are encoded; taken out while field values are formatted.
    pub scratch: Vec<u8>,
    /// Records this thread could not write since its last written one.
    lost: u64,
    /// The record held back (module docs); a `new span` record's bytes are in
    /// `held_buf`.
    held: Held,
    held_buf: Vec<u8>,
    holder: Arc<HeldFlag>,
}

/// A record a thread holds back, and the time it stands for.
#[derive(Clone, Copy, Debug)]
enum Held {
    None,
    /// A span's `new span` record (in `held_buf`) and its callsite's number.
    New {
        span: u64,
        callsite: u32,
        stamp: Stamp,
    },
    /// A span's `exit`.
    Exit {
        span: u64,
        stamp: Stamp,
    },
}

/// Where a thread's name comes from when its state is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Naming {
    /// Rust's name of the thread (`std::thread::Builder::name`), else none.
    Rust,
    /// Rust's name, else the kernel's (`PR_GET_NAME`: what `pthread_setname_np` set):
    /// for threads another language made.
    Kernel,
}

impl Local {
    fn new(shared: Arc<Shared>, naming: Naming) -> Local {
        let producer = shared.sink.producer().ok();
        if let Some(p) = &producer {
            let t = std::thread::current();
            let name = match (t.name(), naming) {
                (Some(n), _) => n.to_owned(),
                (None, Naming::Kernel) => {
                    rustix::thread::name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
                }
                (None, Naming::Rust) => String::new(),
            };
            let info = ThreadInfo {
                lane: p.lane(),
                tid: rustix::thread::gettid().as_raw_nonzero().get() as u32,
                number: shared.thread_number(),
                since_ns: shared.sink.now_ns(),
                name,
            };
            shared.catalog.add_thread(&info);
        }
        let scratch = Vec::with_capacity(shared.limits.max_record);
        let held_buf = Vec::with_capacity(shared.limits.max_record);
        let holder = shared.holder();
        Local {
            shared,
            producer,
            stack: Vec::new(),
            cache: HashMap::default(),
            scratch,
            lost: 0,
            held: Held::None,
            held_buf,
            holder,
        }
    }

    /// The number of `meta`'s callsite, from this thread's cache.
    #[inline]
    pub fn callsite(&mut self, meta: &'static Metadata<'static>) -> u32 {
        let key = meta as *const Metadata<'static> as usize;
        if let Some(&id) = self.cache.get(&key) {
            return id;
        }
        let id = self.shared.callsite_id(meta);
        self.cache.insert(key, id);
        id
    }

    /// The innermost entered span and its callsite (zeros: none).
    #[inline]
    pub fn current(&self) -> (u64, u32) {
        self.stack.last().copied().unwrap_or((0, 0))
    }

    /// Writes `bytes` as one record, now, after the record held back if any (module
    /// docs).
    #[inline]
    pub fn write(&mut self, bytes: &[u8]) {
        if !matches!(self.held, Held::None) {
            self.flush();
        }
        match &self.producer {
            Some(p) => {
                let stamp = p.stamp();
                self.write_stamped(bytes, stamp)
            }
            None => Counters::bump(&self.shared.counters.no_ring, 1),
        }
    }

    /// Writes `bytes` as one record stamped `stamp`, after a `lost` record if earlier
    /// ones were lost. Once a stream is finishing, nothing more is written: the record
    /// is counted as lost and unreported (the file is being closed).
    #[inline]
    fn write_stamped(&mut self, bytes: &[u8], stamp: Stamp) {
        let Some(p) = &mut self.producer else {
            return Counters::bump(&self.shared.counters.no_ring, 1);
        };
        let c = &self.shared.counters;
        if self.shared.is_closed() {
            Counters::bump(&c.lost, 1);
            return Counters::bump(&c.unreported, 1);
        }
        // The count goes first; while it cannot be written, neither is the record (room
        // freed in between would put the record before the count of what preceded it).
        if self.lost > 0 && p.output_stamped(&lost_record(self.lost), stamp).is_ok() {
            Counters::take(&c.unreported, self.lost);
            self.lost = 0;
        }
        if self.lost > 0 || p.output_stamped(bytes, stamp).is_err() {
            self.lost += 1;
            Counters::bump(&c.lost, 1);
            Counters::bump(&c.unreported, 1);
        }
    }

    /// Writes a record of a kind without values.
    #[inline]
    pub fn write_simple(&mut self, k: u8, a: u64, b: Option<u64>) {
        let (bytes, n) = wire::simple_bytes(k, a, b);
        self.write(&bytes[..n]);
    }

    /// Replaces the record held back, and the thread's flag that it holds one, and
    /// returns the one it held.
    #[inline]
    fn set_held(&mut self, held: Held) -> Held {
        self.holder.set(!matches!(held, Held::None));
        std::mem::replace(&mut self.held, held)
    }

    /// Writes the record held back, if any, as it is.
    pub fn flush(&mut self) {
        if matches!(self.held, Held::None) {
            return;
        }
        match self.set_held(Held::None) {
            Held::None => {}
            Held::New { stamp, .. } => {
                let buf = std::mem::take(&mut self.held_buf);
                self.write_stamped(&buf, stamp);
                self.held_buf = buf;
            }
            Held::Exit { span, stamp } => {
                let (bytes, n) = wire::simple_bytes(kind::EXIT, span, None);
                self.write_stamped(&bytes[..n], stamp);
            }
        }
    }

    /// Holds span `span`'s `new span` record, encoded in `buf` (which gets the held
    /// buffer in exchange), stamped now.
    #[inline]
    pub fn hold_new(&mut self, span: u64, callsite: u32, buf: &mut Vec<u8>) {
        self.flush();
        let Some(p) = &self.producer else { return self.write(buf) };
        let stamp = p.stamp();
        std::mem::swap(&mut self.held_buf, buf);
        self.set_held(Held::New { span, callsite, stamp });
    }

    /// If the record held is span `span`'s `new span`, writes it as an `open` record
    /// (made and entered at the time of the `new span`) and returns the span's callsite.
    #[inline]
    pub fn open(&mut self, span: u64) -> Option<u32> {
        let Held::New { span: held, callsite, stamp } = self.held else { return None };
        if held != span {
            return None;
        }
        self.set_held(Held::None);
        let mut buf = std::mem::take(&mut self.held_buf);
        buf[0] = kind::OPEN;
        self.write_stamped(&buf, stamp);
        self.held_buf = buf;
        Some(callsite)
    }

    /// Holds span `span`'s `exit`, stamped now.
    #[inline]
    pub fn hold_exit(&mut self, span: u64) {
        self.flush();
        let Some(p) = &self.producer else { return self.write_simple(kind::EXIT, span, None) };
        let stamp = p.stamp();
        self.set_held(Held::Exit { span, stamp });
    }

    /// If the record held is span `span`'s `exit`, writes it as a `done` record (exited
    /// and closed at the time of the `exit`) and returns true.
    #[inline]
    pub fn done(&mut self, span: u64) -> bool {
        let Held::Exit { span: held, stamp } = self.held else { return false };
        if held != span {
            return false;
        }
        self.set_held(Held::None);
        let (bytes, n) = wire::simple_bytes(kind::DONE, span, None);
        self.write_stamped(&bytes[..n], stamp);
        true
    }
}

/// How long an exiting thread waits for room to write the count of its lost records.
const EXIT_PATIENCE: std::time::Duration = std::time::Duration::from_millis(20);

impl Drop for Local {
    fn drop(&mut self) {
        self.flush();
        let lost = std::mem::take(&mut self.lost);
        if lost == 0 {
            return;
        }
        let shared = self.shared.clone();
        // A stream's drain makes room as it runs: the thread waits a little for it, so
        // the count lands where the losses were rather than only in the totals.
        let deadline = std::time::Instant::now() + EXIT_PATIENCE;
        let written = self.producer.as_mut().is_some_and(|p| loop {
            // A retired recorder's state may be dropped on another recorder's record:
            // it does not wait there.
            if shared.is_closed() || shared.is_retired() {
                break false;
            }
            if p.output(&lost_record(lost)).is_ok() {
                break true;
            }
            if !p.is_stream() || std::time::Instant::now() >= deadline {
                break false;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        });
        if written {
            Counters::take(&shared.counters.unreported, lost);
        }
        // Else it stays counted unreported, where the recorder's stats (and a dump's or
        // a stream's end) see it.
    }
}

/// A `lost` record's bytes.
fn lost_record(count: u64) -> [u8; 9] {
    let mut b = [0u8; 9];
    b[0] = kind::LOST;
    b[1..].copy_from_slice(&count.to_le_bytes());
    b
}

thread_local! {
    /// This thread's state for each recorder it has written to.
    static LOCALS: RefCell<Vec<Local>> = const { RefCell::new(Vec::new()) };
}

/// Calls `f` with this thread's state for `shared`'s recorder, made on first use.
/// `None`, counted, while the thread is being torn down, or when the state is already
/// borrowed further up this thread's stack (which the layer never lets happen: no user
/// code runs while it holds the state).
#[inline]
pub(crate) fn with<R>(shared: &Arc<Shared>, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    with_named(shared, Naming::Rust, f)
}

/// [`with`], a new state naming its thread by `naming`.
#[inline]
pub(crate) fn with_named<R>(shared: &Arc<Shared>, naming: Naming, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    let r = LOCALS.try_with(|cell| {
        let Ok(mut locals) = cell.try_borrow_mut() else {
            Counters::bump(&shared.counters.busy, 1);
            return None;
        };
        // The states of retired recorders go (the rings they keep alive with them):
        // looked for where the thread holds several, and before making a new one.
        if locals.len() > 1 || shared.is_retired() {
            locals.retain(|l| !l.shared.is_retired());
        }
        if shared.is_retired() {
            Counters::bump(&shared.counters.teardown, 1);
            return None;
        }
        let i = match locals.iter().position(|l| l.shared.id == shared.id) {
            Some(i) => i,
            None => {
                locals.retain(|l| !l.shared.is_retired());
                locals.push(Local::new(shared.clone(), naming));
                locals.len() - 1
            }
        };
        Some(f(&mut locals[i]))
    });
    match r {
        Ok(r) => r,
        Err(_) => {
            Counters::bump(&shared.counters.teardown, 1);
            None
        }
    }
}

/// Writes the record this thread holds back for `shared`'s recorder, if it has a state
/// for it (none is made).
pub(crate) fn flush(shared: &Shared) {
    let _ = LOCALS.try_with(|cell| {
        if let Ok(mut locals) = cell.try_borrow_mut() {
            locals.iter_mut().filter(|l| l.shared.id == shared.id).for_each(Local::flush);
        }
    });
}

/// Forgets this thread's state for `shared`'s recorder (its producer released), so a
/// recorder that is finished does not keep its rings alive through this thread.
pub(crate) fn release(shared: &Shared) {
    let _ = LOCALS.try_with(|cell| {
        if let Ok(mut locals) = cell.try_borrow_mut() {
            locals.retain(|l| l.shared.id != shared.id);
        }
    });
}
