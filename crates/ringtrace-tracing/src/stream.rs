//! A stream recorder's drain: a background thread that moves every thread's records,
//! merged by timestamp, into the trace file, with the catalog entries they name.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ringtrace::channel::ChannelReader;
use ringtrace::clock::BestClock;
use ringtrace::config::Discard;

use crate::error::Error;
use crate::file::{self, chunk};
use crate::shared::{Counters, Shared, Sink};

/// A records chunk is written once it holds this much.
const CHUNK_BYTES: usize = 1 << 20;
/// How long finishing waits for exiting threads' loss counts and held records, and
/// then for records committed just as the stream closed.
const FINISH_PATIENCE: Duration = Duration::from_millis(100);
/// The longest sleep of an idle drain: how late a record reaches the file at most,
/// once it can be delivered.
const MAX_IDLE: Duration = Duration::from_millis(16);

pub(crate) struct Drain {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<(), Error>>,
}

impl Drain {
    pub fn start(shared: Arc<Shared>, out: File, path: PathBuf) -> Result<Drain, Error> {
        let Sink::Stream(ch) = &shared.sink else { return Err(Error::NotFlight) };
        let reader = ch.reader()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("ringtrace-drain".into())
            .spawn(move || {
                let mut w = Writer { shared, out: BufWriter::with_capacity(CHUNK_BYTES, out), catalog_done: 0 };
                w.run(reader, &stop2).map_err(|e| Error::io("writing the stream", &path, e))
            })
            .map_err(|e| Error::io("starting the drain thread for", Path::new("the stream"), e))?;
        Ok(Drain { stop, handle })
    }

    /// Stops the drain after a last pass that takes everything left, and waits for it.
    pub fn finish(self, shared: &Shared) -> Result<(), Error> {
        // Threads that lost records and are exiting write their counts now, and threads
        // that hold a record back write it as they exit (their thread-local state goes
        // after a join returns): give them a moment while the drain still makes room.
        let deadline = Instant::now() + FINISH_PATIENCE;
        while (Counters::get(&shared.counters.unreported) > 0 || shared.held() > 0) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(500));
        }
        shared.close();
        // Release: pairs with the drain's Acquire load; nothing else is published
        // through it (records are published by the rings themselves).
        self.stop.store(true, Ordering::Release);
        self.handle.join().unwrap_or_else(|_| Err(Error::Config("the drain thread panicked".into())))
    }
}

struct Writer {
    shared: Arc<Shared>,
    out: BufWriter<File>,
    /// Catalog entries already in the file.
    catalog_done: usize,
}

impl Writer {
    fn run(&mut self, mut reader: ChannelReader<Discard, BestClock>, stop: &AtomicBool) -> std::io::Result<()> {
        self.out.write_all(&file::header())?;
        file::write_chunk(&mut self.out, chunk::PROCESS, &self.shared.process.encode())?;
        let mut buf = Vec::with_capacity(CHUNK_BYTES + 4096);
        let mut idle = Duration::from_millis(1);
        let mut closing = None::<Instant>;
        loop {
            // Acquire: pairs with `finish`'s Release store.
            let last = stop.load(Ordering::Acquire);
            buf.clear();
            let drained = &self.shared.counters.drained;
            let mut put = |r: ringtrace::channel::ChannelRecord<'_>| {
                file::put_record(&mut buf, r.producer, r.timestamp, r.data);
                Counters::bump(drained, 1);
                // Stop the pass at a full chunk; the rest comes on the next.
                if buf.len() >= CHUNK_BYTES {
                    Err(())
                } else {
                    Ok(())
                }
            };
            let got = if last { reader.drain(put) } else { reader.consume(&mut put) };
            let full = matches!(got, Err(ringtrace::ConsumeError::Callback(())));
            if let Err(e) = got {
                if !full {
                    return Err(std::io::Error::other(format!("reading the rings: {e:?}")));
                }
            }
            // The catalog after the records: each record's callsite and thread entries
            // were added before it was committed, so they are there now.
            self.write_catalog()?;
            if !buf.is_empty() {
                file::write_chunk(&mut self.out, chunk::RECORDS, &buf)?;
            }
            if last && !full {
                // Every commit read, or a writer that read the stream open just before it
                // closed has had its moment.
                if self.all_read() || Instant::now() >= *closing.get_or_insert_with(|| Instant::now() + FINISH_PATIENCE)
                {
                    break;
                }
                continue;
            }
            if buf.is_empty() {
                self.out.flush()?;
                std::thread::sleep(idle);
                idle = (idle * 2).min(MAX_IDLE);
            } else {
                idle = Duration::from_millis(1);
            }
        }
        let mut stats = self.shared.counters.named().to_vec();
        // Span records threads that went idle still hold back: not in the file.
        stats.push(("held", self.shared.held()));
        file::write_chunk(&mut self.out, chunk::STATS, &file::encode_stats(&stats))?;
        file::write_chunk(&mut self.out, chunk::END, &[])?;
        self.out.flush()?;
        self.out.get_ref().sync_all()
    }

    /// Whether every record committed so far has been drained.
    fn all_read(&self) -> bool {
        let Sink::Stream(ch) = &self.shared.sink else { return true };
        ch.stats().written == Counters::get(&self.shared.counters.drained)
    }

    fn write_catalog(&mut self) -> std::io::Result<()> {
        let entries = self.shared.catalog.lock();
        for (kind, payload) in &entries.chunks[self.catalog_done..] {
            file::write_chunk(&mut self.out, *kind, payload)?;
        }
        self.catalog_done = entries.chunks.len();
        Ok(())
    }
}
