//! The hosts and sources of an export: the pid and tid each is drawn as (see the
//! [mapping](super#the-mapping-the-same-in-the-three-trace-formats)), found per record
//! by the addresses of its names, and whether each was described yet.

use foldhash::HashMap;
use ringtrace_export::record::{Plain, Record};

use super::payload::{CATEGORY, NAME};
use crate::fleet::{Entry, Fleet};

/// What an export wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exported {
    /// Records written: each an instant event, or, of an events source, what its
    /// object draws (see the [mapping](super#an-events-sources-records)).
    pub records: u64,
    /// Of them, an events source's records drawn as its recorder's events, slices
    /// (enters and exits) and losses.
    pub events: u64,
    /// Hosts described (processes): those with at least one record written.
    pub hosts: u32,
    /// Sources described (threads, or an events source's threads): those with at
    /// least one record written.
    pub sources: u32,
}

/// Name addresses remembered at most (entries made by hand may each bring their own).
const MAX_ADDRS: usize = 1 << 16;

/// A host: its pid, and whether it was described.
#[derive(Debug)]
pub(super) struct Host {
    pub(super) name: String,
    pub(super) pid: u32,
    pub(super) described: bool,
}

/// A source, or a thread of an events source's recorder: its host, its name, its tid,
/// and whether it was described.
#[derive(Debug)]
pub(super) struct Track {
    pub(super) host: usize,
    pub(super) source: String,
    pub(super) tid: u32,
    pub(super) described: bool,
    /// A recorder thread's source track.
    pub(super) of: Option<usize>,
    /// An events source's track (its batches say their payloads are events).
    pub(super) events: bool,
    /// Counted among the sources described (a source, when it or one of its threads
    /// was first described).
    pub(super) counted: bool,
}

/// What [`Tracks::first_use`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Use {
    /// The track was described already.
    Again,
    /// Its first record: describe the track (its host was described already).
    NewTrack,
    /// The first record of its host: describe the host, then the track.
    NewHost,
}

/// The hosts and sources of an export, numbered from the fleet (a [`Fleet`] export's)
/// or as they first come (a stream's).
#[derive(Debug, Default)]
pub(super) struct Tracks {
    pub(super) hosts: Vec<Host>,
    pub(super) sources: Vec<Track>,
    /// Tracks by the addresses and lengths of their names: an entry of
    /// [`Fleet::timeline`] borrows the fleet's names, so this finds its track without
    /// hashing the texts. Only entries that borrow names for the whole export are
    /// looked up so (a `&'a str`'s bytes do not change while `'a` lasts, so one address
    /// and length is one text).
    pub(super) by_addr: HashMap<(usize, usize, usize, usize), usize>,
    /// Tracks by a stream's source numbers ([`Item::lane`](crate::fleet::Item)), plus one.
    pub(super) by_lane: Vec<usize>,
    pub(super) by_text: HashMap<String, HashMap<String, usize>>,
    pub(super) host_by_name: HashMap<String, usize>,
    /// The next id for a host or source.
    pub(super) next_id: u32,
    pub(super) described_hosts: u32,
    pub(super) described_sources: u32,
}

impl Tracks {
    /// No host or source yet: each is numbered as it first comes.
    pub(super) fn new() -> Self {
        Tracks { next_id: 1, ..Tracks::default() }
    }

    /// The fleet's hosts and sources, numbered (none described yet).
    pub(super) fn of(fleet: &Fleet) -> Self {
        let mut t = Tracks::new();
        let sources: Vec<(&str, &str)> = fleet.sources().collect();
        for &(host, _) in &sources {
            t.host(host);
        }
        for (host, source) in sources {
            let i = t.add(host, source);
            t.by_addr.insert(Self::addr(host, source), i);
        }
        t
    }

    pub(super) fn addr(host: &str, source: &str) -> (usize, usize, usize, usize) {
        (host.as_ptr().addr(), host.len(), source.as_ptr().addr(), source.len())
    }

    pub(super) fn next(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id = self.next_id.saturating_add(1);
        id
    }

    /// The index of `host`, numbered next if new.
    pub(super) fn host(&mut self, host: &str) -> usize {
        if let Some(&i) = self.host_by_name.get(host) {
            return i;
        }
        let pid = self.next();
        self.hosts.push(Host { name: host.to_owned(), pid, described: false });
        self.host_by_name.insert(host.to_owned(), self.hosts.len() - 1);
        self.hosts.len() - 1
    }

    /// Numbers a new track (and its host, if new).
    pub(super) fn add(&mut self, host: &str, source: &str) -> usize {
        if let Some(&i) = self.by_text.get(host).and_then(|m| m.get(source)) {
            return i;
        }
        let h = self.host(host);
        let tid = self.next();
        self.sources.push(Track {
            host: h,
            source: source.to_owned(),
            tid,
            described: false,
            of: None,
            events: false,
            counted: false,
        });
        let i = self.sources.len() - 1;
        self.by_text.entry(host.to_owned()).or_default().insert(source.to_owned(), i);
        i
    }

    /// A new thread track named `name`, of source track `source`'s host.
    pub(super) fn thread(&mut self, source: usize, name: &str) -> usize {
        let host = self.sources.get(source).map_or(0, |t| t.host);
        let tid = self.next();
        let t = Track {
            host,
            source: name.to_owned(),
            tid,
            described: false,
            of: Some(source),
            events: false,
            counted: false,
        };
        self.sources.push(t);
        self.sources.len() - 1
    }

    /// The track of `e`, whose names live as long as the export, numbered next if the
    /// fleet does not have it.
    pub(super) fn find(&mut self, e: &Entry<'_>) -> usize {
        let key = Self::addr(e.host, e.source);
        if let Some(&i) = self.by_addr.get(&key) {
            return i;
        }
        let i = self.add(e.host, e.source);
        if self.by_addr.len() < MAX_ADDRS {
            self.by_addr.insert(key, i);
        }
        i
    }

    /// The track of a stream's record of source number `lane`, numbered next if new.
    pub(super) fn of_lane(&mut self, lane: u32, e: &Entry<'_>) -> usize {
        let at = lane as usize;
        if let Some(&i) = self.by_lane.get(at).filter(|&&i| i > 0) {
            return i - 1;
        }
        let i = self.add(e.host, e.source);
        if at < MAX_ADDRS {
            if self.by_lane.len() <= at {
                self.by_lane.resize(at + 1, 0);
            }
            self.by_lane[at] = i + 1;
        }
        i
    }

    /// Marks track `i` (and its host) described, telling what was not yet.
    pub(super) fn first_use(&mut self, i: usize) -> Use {
        let Some(t) = self.sources.get_mut(i) else { return Use::Again };
        if t.described {
            return Use::Again;
        }
        t.described = true;
        let (host, owner) = (t.host, t.of.unwrap_or(i));
        if let Some(o) = self.sources.get_mut(owner).filter(|o| !o.counted) {
            o.counted = true;
            self.described_sources = self.described_sources.saturating_add(1);
        }
        let Some(h) = self.hosts.get_mut(host) else { return Use::NewTrack };
        if h.described {
            return Use::NewTrack;
        }
        h.described = true;
        self.described_hosts = self.described_hosts.saturating_add(1);
        Use::NewHost
    }

    /// Track `i`'s host name, pid, source name and tid.
    pub(super) fn ids(&self, i: usize) -> (&str, u32, &str, u32) {
        let Some(t) = self.sources.get(i) else { return ("", 0, "", 0) };
        let (host, pid) = self.hosts.get(t.host).map_or(("", 0), |h| (h.name.as_str(), h.pid));
        (host, pid, &t.source, t.tid)
    }

    pub(super) fn exported(&self, records: u64, events: u64) -> Exported {
        Exported { records, events, hosts: self.described_hosts, sources: self.described_sources }
    }

    /// Where track `i`'s next record is drawn, and what to describe before it.
    pub(super) fn place(&mut self, i: usize) -> Place<'_> {
        let u = self.first_use(i);
        let (host, pid, source, tid) = self.ids(i);
        let tid = u64::from(tid);
        // The process's description is given on its first thread, so that readers make
        // no thread of it.
        let process = (u == Use::NewHost).then_some(Plain::Process {
            pid,
            tid,
            name: host,
            sort_index: Some(u64::from(pid)),
            category: None,
        });
        let thread = (u != Use::Again).then_some(Plain::Thread {
            pid,
            tid,
            name: source,
            sort_index: Some(tid),
            category: None,
        });
        Place { pid, tid, described: [process, thread] }
    }
}

/// Where an entry is drawn: its host's pid and its source's tid, and what to write
/// before it (its host's process and its source's thread, before their first record).
pub(super) struct Place<'a> {
    pid: u32,
    tid: u64,
    described: [Option<Plain<'a>>; 2],
}

impl<'a> Place<'a> {
    /// The descriptions to write before the record: none, the thread, or the process and
    /// the thread.
    pub(super) fn described(&self) -> impl Iterator<Item = &Plain<'a>> {
        self.described.iter().flatten()
    }

    /// The pid and tid the record is drawn on.
    pub(super) fn at(&self) -> (u32, u64) {
        (self.pid, self.tid)
    }

    /// `e`'s instant event, with its arguments `args`.
    pub(super) fn instant<A>(&self, e: &Entry<'_>, args: A) -> Record<'a, A> {
        Record::Instant { ts_ns: e.time_ns, pid: self.pid, tid: self.tid, name: NAME, category: CATEGORY, args }
    }
}
