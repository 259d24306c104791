//! An export in two halves on two threads. A trace file's records split at a time
//! (`Trace::middle`) into those before it and those after, about as many; each half is
//! read (the chunks holding its times), decoded and written by a thread of its own into
//! blocks, and the calling thread writes the blocks out, the halves' in turn, so that
//! the output is the same from run to run and memory stays bounded ([`AHEAD`] blocks of
//! [`BLOCK`] bytes a half). The two halves read one after the other are exactly what
//! one reading gives: each half sees its records in the same order.
//!
//! Only a format whose readers take the records of different threads of writing in any
//! order can go in halves: Perfetto's (`trace_processor` sorts packets across
//! sequences by time), whose each half writes its packets on sequences of its own.

use std::io::{self, Write};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};

use crate::Exported;
use ringtrace_tracing::decode::Trace;

/// Bytes a half hands to the writer at a time.
pub(crate) const BLOCK: usize = 256 << 10;
/// Blocks a half may have on their way to the writer. A half further ahead of the other
/// waits for it: with 2, the second half's replay of the first half's span records held
/// the first half back, and a million-event export took 0.37 s instead of 0.24 s.
pub(crate) const AHEAD: usize = 16;
/// Records a trace must hold for its export to go in halves: below, starting the
/// threads costs more than they save.
pub(crate) const MIN_RECORDS: u64 = 1 << 16;

/// A half's output, gathered into blocks for the writer.
pub(crate) struct Blocks {
    tx: SyncSender<Vec<u8>>,
    /// Blocks the writer has written, for reuse: a new block's pages would each fault
    /// in on first write.
    written: Receiver<Vec<u8>>,
    buf: Vec<u8>,
}

impl Blocks {
    fn send(&mut self) -> io::Result<()> {
        let mut next = self.written.try_recv().unwrap_or_else(|_| Vec::with_capacity(BLOCK));
        next.clear();
        let block = std::mem::replace(&mut self.buf, next);
        self.tx.send(block).map_err(|_| io::Error::other("the export's writer stopped"))
    }
}

impl Write for Blocks {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= BLOCK {
            self.send()?;
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            self.send()
        }
    }
}

/// The writer's end of a half's blocks: blocks come in, and go back once written.
struct Pipe {
    blocks: Receiver<Vec<u8>>,
    back: Sender<Vec<u8>>,
}

/// A half's count of records done, on a cache line of its own (the two halves update
/// theirs as they go).
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct Done(AtomicU64);

impl Done {
    /// Records done so far (read by the writer for the progress display only).
    pub fn set(&self, n: u64) {
        self.0.store(n, Relaxed);
    }
}

/// One half: which (0 or 1), its times, its count of records done.
pub(crate) struct Half<'d> {
    pub index: usize,
    pub times: Range<u64>,
    pub done: &'d Done,
}

/// The times of the two halves `trace` splits into, if it is worth it and the machine
/// has a second CPU.
pub(crate) fn split(trace: &Trace) -> Option<[Range<u64>; 2]> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 || (trace.len() as u64) < MIN_RECORDS {
        return None;
    }
    let t = trace.middle()?;
    Some([0..t, t..u64::MAX])
}

/// Runs `half` on each of `halves` on a thread of its own, writing their blocks to
/// `out`, the first half's then the second's in turn; `progress` hears records done
/// as blocks arrive. The halves' counts, added.
pub(crate) fn run<W: Write + ?Sized>(
    trace: &Trace,
    halves: [Range<u64>; 2],
    out: &mut W,
    progress: &mut dyn FnMut(u64, u64),
    half: impl Fn(Half<'_>, &mut Blocks) -> io::Result<Exported> + Sync,
) -> io::Result<Exported> {
    let total = trace.len() as u64;
    let done = [Done::default(), Done::default()];
    std::thread::scope(|s| {
        let mut rxs: Vec<Option<Pipe>> = Vec::new();
        let mut workers = Vec::new();
        for (index, times) in halves.into_iter().enumerate() {
            let (tx, rx) = sync_channel(AHEAD);
            let (back, written) = channel();
            rxs.push(Some(Pipe { blocks: rx, back }));
            let (half, done) = (&half, &done[index]);
            workers.push(s.spawn(move || {
                let mut blocks = Blocks { tx, written, buf: Vec::with_capacity(BLOCK) };
                let x = half(Half { index, times, done }, &mut blocks)?;
                blocks.flush()?;
                Ok::<_, io::Error>(x)
            }));
        }
        let mut written = Ok(());
        // Each turn takes a block of each half still sending: bounded by the blocks.
        'out: while rxs.iter().any(Option::is_some) {
            for slot in rxs.iter_mut() {
                let Some(Pipe { blocks, back }) = slot else { continue };
                match blocks.recv() {
                    Ok(block) => {
                        if let Err(e) = out.write_all(&block) {
                            written = Err(e);
                            break 'out;
                        }
                        // Back to its half, which reuses it (or drops it, if done).
                        let _ = back.send(block);
                    }
                    // The half is done (or failed: its result says).
                    Err(_) => *slot = None,
                }
            }
            progress(done.iter().map(|d| d.0.load(Relaxed)).sum(), total);
        }
        // A half waiting to send a block sees the writer gone, and stops.
        drop(rxs);
        let mut x = Exported::default();
        for w in workers {
            match w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
                Ok(part) => x.add(&part),
                Err(e) => {
                    if written.is_ok() {
                        written = Err(e);
                    }
                }
            }
        }
        written.map(|()| x)
    })
}
