//! The hosts and sources of an export: the pid and tid each is drawn as (see the
//! [mapping](super#the-mapping-the-same-in-the-three-trace-formats)), found per record
//! by the addresses of its names, and whether each was described yet.

use std::io;

use foldhash::HashMap;
use ringtrace_export::record::{Plain, Record};

use super::{CATEGORY, NAME};
use crate::fleet::{Entry, Fleet};

/// What an export wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exported {
    /// Records written (one instant event each).
    pub records: u64,
    /// Hosts described (processes): those with at least one record written.
    pub hosts: u32,
    /// Sources described (threads): those with at least one record written.
    pub sources: u32,
}

/// Name addresses remembered at most (entries made by hand may each bring their own).
const MAX_ADDRS: usize = 1 << 16;

/// A host: its pid, and whether it was described.
#[derive(Debug)]
pub(super) struct Host<'a> {
    pub(super) name: &'a str,
    pub(super) pid: u32,
    pub(super) described: bool,
}

/// A source: its host, its tid, and whether it was described.
#[derive(Debug)]
pub(super) struct Track<'a> {
    pub(super) host: usize,
    pub(super) source: &'a str,
    pub(super) tid: u32,
    pub(super) described: bool,
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

/// The hosts and sources of an export, numbered from the fleet.
#[derive(Debug)]
pub(super) struct Tracks<'a> {
    pub(super) hosts: Vec<Host<'a>>,
    pub(super) sources: Vec<Track<'a>>,
    /// Tracks by the addresses and lengths of their names: an entry of
    /// [`Fleet::timeline`] borrows the fleet's names, so this finds its track without
    /// hashing the texts. A `&'a str`'s bytes do not change while `'a` lasts, so one
    /// address and length is one text.
    pub(super) by_addr: HashMap<(usize, usize, usize, usize), usize>,
    pub(super) by_text: HashMap<(&'a str, &'a str), usize>,
    pub(super) host_by_name: HashMap<&'a str, usize>,
    /// The next id for a host or source the fleet does not have.
    pub(super) next_id: u32,
    pub(super) described_hosts: u32,
    pub(super) described_sources: u32,
}

impl<'a> Tracks<'a> {
    /// The fleet's hosts and sources, numbered (none described yet).
    pub(super) fn new(fleet: &'a Fleet) -> Self {
        let mut t = Tracks {
            hosts: Vec::new(),
            sources: Vec::new(),
            by_addr: HashMap::default(),
            by_text: HashMap::default(),
            host_by_name: HashMap::default(),
            next_id: 1,
            described_hosts: 0,
            described_sources: 0,
        };
        let sources: Vec<(&'a str, &'a str)> = fleet.sources().collect();
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
    pub(super) fn host(&mut self, host: &'a str) -> usize {
        if let Some(&i) = self.host_by_name.get(host) {
            return i;
        }
        let pid = self.next();
        self.hosts.push(Host { name: host, pid, described: false });
        self.host_by_name.insert(host, self.hosts.len() - 1);
        self.hosts.len() - 1
    }

    /// Numbers a new track (and its host, if new).
    pub(super) fn add(&mut self, host: &'a str, source: &'a str) -> usize {
        if let Some(&i) = self.by_text.get(&(host, source)) {
            return i;
        }
        let h = self.host(host);
        let tid = self.next();
        self.sources.push(Track { host: h, source, tid, described: false });
        self.by_text.insert((host, source), self.sources.len() - 1);
        self.sources.len() - 1
    }

    /// The track of `e`, numbered next if the fleet does not have it.
    pub(super) fn find(&mut self, e: &Entry<'a>) -> usize {
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

    /// Marks track `i` (and its host) described, telling what was not yet.
    pub(super) fn first_use(&mut self, i: usize) -> Use {
        let Some(t) = self.sources.get_mut(i) else { return Use::Again };
        if t.described {
            return Use::Again;
        }
        t.described = true;
        self.described_sources = self.described_sources.saturating_add(1);
        let Some(h) = self.hosts.get_mut(t.host) else { return Use::NewTrack };
        if h.described {
            return Use::NewTrack;
        }
        h.described = true;
        self.described_hosts = self.described_hosts.saturating_add(1);
        Use::NewHost
    }

    /// Track `i`'s host name, pid, source name and tid.
    pub(super) fn ids(&self, i: usize) -> (&'a str, u32, &'a str, u32) {
        let Some(t) = self.sources.get(i) else { return ("", 0, "", 0) };
        let (host, pid) = self.hosts.get(t.host).map_or(("", 0), |h| (h.name, h.pid));
        (host, pid, t.source, t.tid)
    }

    pub(super) fn exported(&self, records: u64) -> Exported {
        Exported { records, hosts: self.described_hosts, sources: self.described_sources }
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

    /// `e`'s instant event, with its arguments `args`.
    pub(super) fn instant<A>(&self, e: &Entry<'_>, args: A) -> Record<'a, A> {
        Record::Instant { ts_ns: e.time_ns, pid: self.pid, tid: self.tid, name: NAME, category: CATEGORY, args }
    }
}

/// Hands `put` each entry of `entries` with its [`Place`]: the one walk of the fleet's
/// hosts and sources that every trace format's export makes (see the
/// [mapping](super#the-mapping-the-same-in-the-three-trace-formats)).
pub(super) fn draw<'a>(
    fleet: &'a Fleet,
    entries: impl IntoIterator<Item = Entry<'a>>,
    mut put: impl FnMut(&Place<'a>, &Entry<'a>) -> io::Result<()>,
) -> io::Result<Exported> {
    let mut tracks = Tracks::new(fleet);
    let mut records = 0u64;
    for e in entries {
        let i = tracks.find(&e);
        let (host, pid, source, tid) = tracks.ids(i);
        let tid = u64::from(tid);
        let u = tracks.first_use(i);
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
        put(&Place { pid, tid, described: [process, thread] }, &e)?;
        records += 1;
    }
    Ok(tracks.exported(records))
}
