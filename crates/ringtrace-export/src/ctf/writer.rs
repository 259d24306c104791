//! The CTF writer that a trace's entries and a fleet's records both reach: streams
//! (one a thread), packets, event classes and the metadata, over the
//! [record model](crate::record).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use foldhash::HashMap;
// The files made as the tracing layer makes its own: new, never through a symlink,
// mode 0600 (directories 0700).
use ringtrace_tracing::files::{self, Partial};

use super::class::{Classes, CtfArgs, Event};
use super::text::{put_string, quoted};
use crate::record::Record;

/// A packet is ended once its events reach this many bytes.
const PACKET_EVENTS: usize = 1 << 20;
/// CTF's packet magic.
const MAGIC: u32 = 0xC1FC_1FC1;
/// The latest event time written: babeltrace2 keeps times as signed 64-bit ns from
/// the clock's origin, and refuses `i64::MAX` itself.
const LATEST: u64 = i64::MAX as u64 - 1;
/// The class of `ringtrace:span_enter { id, name }`.
const SPAN_ENTER: u32 = 0;
/// The class of `ringtrace:span_exit { id }`.
const SPAN_EXIT: u32 = 1;

/// The head of the metadata: the version, and how strings are written ([`put_string`]).
pub const METADATA_HEAD: &str =
    "/* CTF 1.8 */\n\n/* In strings, the two characters \\\\ are a backslash and \\0 a NUL. */\n\n";

/// How the records' processes and threads are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracks {
    /// One process (a trace's): `env` holds `procname` and `vpid`; a stream file
    /// `stream-TID` a thread; the packet context holds `events_discarded` (the thread's
    /// events lost so far) and `uint32_t tid`.
    Threads,
    /// Processes and threads named (a fleet's hosts and sources): `env` holds
    /// `host_PID = "NAME"` for each process; a stream file `stream-PID-TID` a thread;
    /// the packet context holds `uint32_t pid`, `uint32_t tid` and the strings `host`
    /// and `source`. Losses cannot be written.
    Named,
}

/// How the files are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Files {
    /// Each written beside its name and renamed over it once all are written
    /// (`metadata` last): a directory exported into again is replaced.
    Replace,
    /// Each created new under its name: `AlreadyExists` where one is there.
    New,
}

/// What a CTF trace is: its layout, identity and clock.
#[derive(Clone, Debug)]
pub struct Layout<'a> {
    /// How processes and threads are laid out.
    pub tracks: Tracks,
    /// How the files are made.
    pub files: Files,
    /// The trace's UUID, in every packet's header where given.
    pub uuid: Option<[u8; 16]>,
    /// The `env`'s `tracer_name`.
    pub tracer: &'a str,
    /// The clock's name.
    pub clock: &'a str,
    /// The clock's description.
    pub clock_description: &'a str,
    /// The clock's origin, ns since the Unix epoch (its `offset`).
    pub clock_offset_ns: u64,
    /// Whether the clock is absolute (the same on every machine).
    pub clock_absolute: bool,
}

#[derive(Debug)]
enum Out {
    Partial(Partial),
    New(File),
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Out::Partial(f) => f.write(buf),
            Out::New(f) => f.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Out::Partial(f) => f.flush(),
            Out::New(f) => f.flush(),
        }
    }
}

/// One thread's stream file and its open packet.
#[derive(Debug)]
struct Stream {
    out: BufWriter<Out>,
    /// The end of every packet's context, after `events_discarded` where it has one.
    tail: Vec<u8>,
    events: Vec<u8>,
    begin: u64,
    end: u64,
    /// The last time written: no event is stamped before it.
    last: Option<u64>,
    discarded: u64,
}

/// Writes [`Record`]s as a CTF 1.8 trace into a directory (see [`Layout`]); a
/// thread's stream is made on its first record (named by its `Thread` record, where one
/// came before). Instants are written by their arguments ([`CtfArgs::write_ctf`]), slices
/// as `ringtrace:span_enter { id, name }` and `ringtrace:span_exit { id }`; losses end
/// the thread's packet and count in the next one's `events_discarded`. A stream cannot
/// go back in time: an earlier record is stamped at the stream's last time, nor past
/// `i64::MAX - 1` ns (babeltrace2's limit).
#[derive(Debug)]
pub struct Writer<'a> {
    dir: PathBuf,
    layout: Layout<'a>,
    streams: Vec<Stream>,
    by_tid: HashMap<u64, usize>,
    /// Each process's name, by pid, in the order described.
    processes: Vec<(u32, String)>,
    /// Threads described but not yet written: tid to name.
    named: HashMap<u64, String>,
    classes: Classes,
}

impl<'a> Writer<'a> {
    /// Makes the directory `dir` (mode 0700 if missing) for the trace.
    pub fn new(dir: &Path, layout: Layout<'a>) -> io::Result<Self> {
        files::make_dir(dir)?;
        let (streams, by_tid, named) = (Vec::new(), HashMap::default(), HashMap::default());
        Ok(Writer {
            dir: dir.into(),
            layout,
            streams,
            by_tid,
            processes: Vec::new(),
            named,
            classes: Classes::default(),
        })
    }

    fn create(&self, name: &str) -> io::Result<Out> {
        let path = self.dir.join(name);
        Ok(match self.layout.files {
            Files::Replace => Out::Partial(Partial::create(&path)?),
            Files::New => Out::New(files::create_new(&path)?),
        })
    }

    /// The stream of thread `tid` of process `pid`, made if new.
    fn stream(&mut self, pid: u32, tid: u64) -> io::Result<&mut Stream> {
        let i = self.index(pid, tid)?;
        Ok(&mut self.streams[i])
    }

    /// The index of thread `tid`'s stream, made if new.
    fn index(&mut self, pid: u32, tid: u64) -> io::Result<usize> {
        Ok(match self.by_tid.get(&tid) {
            Some(&i) => i,
            None => {
                let mut tail = Vec::new();
                let name = match self.layout.tracks {
                    Tracks::Threads => {
                        tail.extend_from_slice(&(tid as u32).to_le_bytes());
                        format!("stream-{tid}")
                    }
                    Tracks::Named => {
                        let host = self.processes.iter().find(|p| p.0 == pid).map_or("", |p| p.1.as_str());
                        let source = self.named.get(&tid).map_or("", String::as_str);
                        tail.extend_from_slice(&pid.to_le_bytes());
                        tail.extend_from_slice(&(tid as u32).to_le_bytes());
                        put_string(&mut tail, host);
                        put_string(&mut tail, source);
                        format!("stream-{pid}-{tid}")
                    }
                };
                let out = BufWriter::with_capacity(1 << 16, self.create(&name)?);
                let s = Stream { out, tail, events: Vec::new(), begin: 0, end: 0, last: None, discarded: 0 };
                self.streams.push(s);
                self.by_tid.insert(tid, self.streams.len() - 1);
                self.streams.len() - 1
            }
        })
    }

    /// Writes one record.
    pub fn put<A: CtfArgs>(&mut self, r: &Record<'_, A>) -> io::Result<()> {
        let (uuid, threads) = (self.layout.uuid, self.layout.tracks == Tracks::Threads);
        let s = match r {
            Record::Process { pid, name, .. } => {
                if !self.processes.iter().any(|p| p.0 == *pid) {
                    self.processes.push((*pid, (*name).to_owned()));
                }
                return Ok(());
            }
            Record::Thread { tid, name, .. } => {
                if !self.by_tid.contains_key(tid) {
                    self.named.insert(*tid, (*name).to_owned());
                }
                return Ok(());
            }
            Record::Instant { ts_ns, pid, tid, args, .. } => {
                let i = self.index(*pid, *tid)?;
                let s = &mut self.streams[i];
                let at = s.event(0, *ts_ns);
                let mut ev = Event { buf: &mut s.events, classes: &mut self.classes, class: None };
                args.write_ctf(&mut ev)?;
                let id = ev.class.ok_or_else(|| io::Error::other("CTF event arguments named no event class"))?;
                s.events[at..at + 4].copy_from_slice(&id.to_le_bytes());
                s
            }
            Record::Begin { ts_ns, pid, tid, span, name, .. } => {
                let s = self.stream(*pid, *tid)?;
                s.event(SPAN_ENTER, *ts_ns);
                s.events.extend_from_slice(&span.to_le_bytes());
                put_string(&mut s.events, name);
                s
            }
            Record::End { ts_ns, pid, tid, span, .. } => {
                let s = self.stream(*pid, *tid)?;
                s.event(SPAN_EXIT, *ts_ns);
                s.events.extend_from_slice(&span.unwrap_or(0).to_le_bytes());
                s
            }
            Record::Lost { ts_ns, pid, tid, count } => {
                if !threads {
                    return Err(io::Error::other("a CTF trace of named tracks has no place for events lost"));
                }
                let s = self.stream(*pid, *tid)?;
                // The packet so far, then the count: it falls between the two packets.
                s.flush(uuid.as_ref(), threads, false)?;
                s.discarded += count;
                let ts = s.last.map_or(*ts_ns, |l| l.max(*ts_ns)).min(LATEST);
                (s.begin, s.end, s.last) = (ts, ts, Some(ts));
                return Ok(());
            }
        };
        if s.events.len() >= PACKET_EVENTS {
            s.flush(uuid.as_ref(), threads, false)?;
        }
        Ok(())
    }

    /// Writes the open packets and the metadata, and puts the files in place.
    pub fn finish(self) -> io::Result<()> {
        let meta = self.metadata();
        let mut files = Vec::with_capacity(self.streams.len() + 1);
        for mut s in self.streams {
            // A stream whose last packet holds only a count of losses still carries it.
            let pending = s.events.is_empty() && s.discarded > 0;
            s.flush(self.layout.uuid.as_ref(), self.layout.tracks == Tracks::Threads, pending)?;
            s.out.flush()?;
            files.push(s.out.into_inner().map_err(|e| e.into_error())?);
        }
        let path = self.dir.join("metadata");
        let mut m = match self.layout.files {
            Files::Replace => Out::Partial(Partial::create(&path)?),
            Files::New => Out::New(files::create_new(&path)?),
        };
        m.write_all(meta.as_bytes())?;
        m.flush()?;
        files.push(m);
        for f in files {
            if let Out::Partial(p) = f {
                p.commit()?;
            }
        }
        Ok(())
    }
}

impl Stream {
    /// Starts an event of class `id` at `ts`; returns where its class id is.
    fn event(&mut self, id: u32, ts: u64) -> usize {
        let ts = self.last.map_or(ts, |last| last.max(ts)).min(LATEST);
        self.last = Some(ts);
        if self.events.is_empty() {
            self.begin = ts;
        }
        self.end = ts;
        let at = self.events.len();
        self.events.extend_from_slice(&id.to_le_bytes());
        self.events.extend_from_slice(&ts.to_le_bytes());
        at
    }

    /// Writes the open packet (if it holds events, or `force`).
    fn flush(&mut self, uuid: Option<&[u8; 16]>, discarded: bool, force: bool) -> io::Result<()> {
        if self.events.is_empty() && !force {
            return Ok(());
        }
        let head = 4 + uuid.map_or(0, |u| u.len()) + 4 + 8 * 4 + if discarded { 8 } else { 0 };
        let bits = ((head + self.tail.len() + self.events.len()) as u64).saturating_mul(8);
        let mut h = Vec::with_capacity(head);
        h.extend_from_slice(&MAGIC.to_le_bytes());
        if let Some(u) = uuid {
            h.extend_from_slice(u);
        }
        h.extend_from_slice(&0u32.to_le_bytes());
        for v in [self.begin, self.end.max(self.begin), bits, bits] {
            h.extend_from_slice(&v.to_le_bytes());
        }
        if discarded {
            h.extend_from_slice(&self.discarded.to_le_bytes());
        }
        self.out.write_all(&h)?;
        self.out.write_all(&self.tail)?;
        self.out.write_all(&self.events)?;
        self.events.clear();
        self.begin = self.end;
        Ok(())
    }
}

impl Writer<'_> {
    fn metadata(&self) -> String {
        let l = &self.layout;
        let mut m = String::from(METADATA_HEAD);
        m.push_str(
            "typealias integer { size = 8; align = 8; signed = false; } := uint8_t;\n\
             typealias integer { size = 32; align = 8; signed = false; } := uint32_t;\n\
             typealias integer { size = 64; align = 8; signed = false; } := uint64_t;\n\
             typealias integer { size = 64; align = 8; signed = true; } := int64_t;\n\
             typealias floating_point { exp_dig = 11; mant_dig = 53; align = 8; } := double;\n\n",
        );
        m.push_str("trace {\n    major = 1;\n    minor = 8;\n    byte_order = le;\n");
        match l.uuid {
            Some(u) => {
                let _ = writeln!(
                    m,
                    "    uuid = \"{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}\";",
                    u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]
                );
                m.push_str(
                    "    packet.header := struct { uint32_t magic; uint8_t uuid[16]; uint32_t stream_id; };\n};\n\n",
                );
            }
            None => m.push_str("    packet.header := struct { uint32_t magic; uint32_t stream_id; };\n};\n\n"),
        }
        let _ = writeln!(m, "env {{\n    tracer_name = {};", quoted(l.tracer));
        match l.tracks {
            Tracks::Threads => {
                let (pid, name) = self.processes.first().map_or((0, ""), |p| (p.0, p.1.as_str()));
                let _ = writeln!(m, "    procname = {};\n    vpid = {pid};", quoted(name));
            }
            Tracks::Named => {
                for (pid, host) in &self.processes {
                    let _ = writeln!(m, "    host_{pid} = {};", quoted(host));
                }
            }
        }
        m.push_str("};\n\n");
        let _ = write!(
            m,
            "clock {{\n    name = {};\n    description = {};\n    freq = 1000000000;\n    \
             offset_s = {};\n    offset = {};\n",
            l.clock,
            quoted(l.clock_description),
            l.clock_offset_ns / 1_000_000_000,
            l.clock_offset_ns % 1_000_000_000
        );
        if l.clock_absolute {
            m.push_str("    absolute = true;\n");
        }
        let _ = write!(
            m,
            "}};\n\ntypealias integer {{ size = 64; align = 8; signed = false; map = clock.{}.value; }} := clk64_t;\n\n\
             stream {{\n    id = 0;\n    packet.context := struct {{\n        clk64_t timestamp_begin;\n        \
             clk64_t timestamp_end;\n        uint64_t content_size;\n        uint64_t packet_size;\n",
            l.clock
        );
        m.push_str(match l.tracks {
            Tracks::Threads => "        uint64_t events_discarded;\n        uint32_t tid;\n",
            Tracks::Named => {
                "        uint32_t pid;\n        uint32_t tid;\n        string host;\n        string source;\n"
            }
        });
        m.push_str("    };\n    event.header := struct { uint32_t id; clk64_t timestamp; };\n};\n\n");
        let _ = write!(
            m,
            "event {{\n    name = \"ringtrace:span_enter\";\n    id = {SPAN_ENTER};\n    stream_id = 0;\n    \
             fields := struct {{ uint64_t id; string name; }};\n}};\n\n\
             event {{\n    name = \"ringtrace:span_exit\";\n    id = {SPAN_EXIT};\n    stream_id = 0;\n    \
             fields := struct {{ uint64_t id; }};\n}};\n\n"
        );
        m.push_str(&self.classes.tsdl);
        m
    }
}
