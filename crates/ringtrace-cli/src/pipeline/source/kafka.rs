//! `kafka://BROKERS/TOPIC` (the `kafka` feature): a fleet's records read back with
//! `ringtrace-ship`'s streaming reader, copies dropped, merged by time in bounded
//! memory; or followed as their batches arrive.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::Path;
use std::time::Duration;

use ringtrace_ship::fleet::{self, Entry, FollowError};

use super::{Follow, Held, RecordSource};
use crate::failure::Failure;
use crate::fleet::{summary, Read, Topic, Window};
use crate::output::{stdout_err, warn, ReportFormat};
use crate::pipeline::output::Sink;
use crate::pipeline::record::{Pick, Record, Shape, Timeline};
use crate::report::fleet::{SourceStat, TopicStat};

/// How long a follow's start may take to find the topic's partitions and offsets.
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a follow waits for a batch before it looks at its `--timeout`.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// A topic's records in a time window, before they are read.
#[derive(Debug)]
pub struct Kafka {
    read: Read,
}

impl Kafka {
    pub fn new(topic: Topic, window: Window) -> Self {
        Kafka { read: Read { topic, window } }
    }
}

/// A record kept for `tail -n` of a topic (a stream lends its records).
struct Kept {
    host: String,
    source: String,
    seq: u64,
    time_ns: u64,
    payload: Vec<u8>,
}

impl RecordSource for Kafka {
    fn kind(&self) -> &'static str {
        "a kafka:// topic"
    }

    fn shape(&self) -> Shape {
        Shape::Fleet
    }

    fn is_trace(&self) -> bool {
        true
    }

    fn read(&mut self) -> Result<Box<dyn Held + '_>, Failure> {
        Err(Failure::msg("a kafka:// topic is read as a stream"))
    }

    fn streams(&self) -> bool {
        true
    }

    fn stream(&mut self, pick: Pick, put: &mut dyn FnMut(&Record<'_>) -> io::Result<()>) -> io::Result<()> {
        let stats = match pick {
            Pick::All => self.read.stream(|i| put(&Record::Fleet(i.entry)))?,
            Pick::Last(n) => {
                let mut kept = VecDeque::with_capacity(n.min(1 << 16));
                let stats = self.read.stream(|i| {
                    if kept.len() == n {
                        kept.pop_front();
                    }
                    if n > 0 {
                        let e = i.entry;
                        let (host, source) = (e.host.to_owned(), e.source.to_owned());
                        kept.push_back(Kept {
                            host,
                            source,
                            seq: e.seq,
                            time_ns: e.time_ns,
                            payload: e.payload.to_vec(),
                        });
                    }
                    Ok(())
                })?;
                for k in &kept {
                    let e =
                        Entry { host: &k.host, source: &k.source, seq: k.seq, time_ns: k.time_ns, payload: &k.payload };
                    put(&Record::Fleet(e))?;
                }
                stats
            }
            Pick::Reversed => return Err(Failure::msg("a kafka:// topic is not read newest first").into_io()),
        };
        self.read.summary(stats);
        Ok(())
    }

    /// Every new record as its batch arrives, from the topic's end (or `--since`).
    fn follow(&mut self) -> Result<Box<dyn Follow + '_>, Failure> {
        let (t, since) = (&self.read.topic, self.read.window.since);
        let mut f = fleet::Follow::start(&t.brokers, &t.topic, since, START_TIMEOUT)
            .map_err(|e| Failure::msg(e.to_string()))?;
        f.reorder(self.read.window.reorder);
        Ok(Box::new(Followed { f, source: self }))
    }

    fn timeline(&mut self) -> Option<Result<Timeline, Failure>> {
        Some(Ok(Timeline::Fleet(self.read.clone())))
    }

    /// What the topic holds in the window, read as a stream: per source, its records
    /// and first and last sequence numbers.
    fn stat(&mut self, _path: &Path, format: ReportFormat) -> Result<(), Failure> {
        let mut lanes: Vec<Option<(String, String, SourceStat)>> = Vec::new();
        let (mut first, mut last) = (None::<u64>, None::<u64>);
        let stats = self
            .read
            .stream(|i| {
                let (e, lane) = (i.entry, i.lane as usize);
                if lanes.len() <= lane {
                    lanes.resize_with(lane + 1, || None);
                }
                let (_, _, s) = lanes[lane].get_or_insert_with(|| {
                    let s = SourceStat { records: 0, first_seq: e.seq, last_seq: e.seq };
                    (e.host.to_owned(), e.source.to_owned(), s)
                });
                s.records += 1;
                s.first_seq = s.first_seq.min(e.seq);
                s.last_seq = s.last_seq.max(e.seq);
                first = Some(first.map_or(e.time_ns, |f| f.min(e.time_ns)));
                last = Some(last.map_or(e.time_ns, |l| l.max(e.time_ns)));
                Ok(())
            })
            .map_err(|e| Failure::from_io(e).unwrap_or_else(|e| Failure::msg(e.to_string())))?;
        let sources: BTreeMap<(String, String), SourceStat> =
            lanes.into_iter().flatten().map(|(h, s, stat)| ((h, s), stat)).collect();
        crate::fleet::ridden(&self.read.topic, stats);
        self.read.unread(stats);
        let stat = TopicStat { topic: &self.read.topic, stats, sources, first_ns: first, last_ns: last };
        crate::report::fleet::stat(&stat, format)
    }
}

/// A topic being followed.
struct Followed<'a> {
    f: fleet::Follow,
    source: &'a Kafka,
}

impl Follow for Followed<'_> {
    fn first(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        Box::new(std::iter::empty())
    }

    fn poll(&mut self, out: &mut dyn Sink) -> Result<usize, Failure> {
        let window = self.source.read.window;
        let each = |e: fleet::Entry<'_>| if window.holds(e.time_ns) { out.write(&Record::Fleet(e)) } else { Ok(()) };
        let n = self.f.poll(FOLLOW_POLL, each, |w| warn(&w)).map_err(|e| match e {
            FollowError::Kafka(e) => Failure::msg(e.to_string()),
            FollowError::Output(e) => stdout_err(e),
        })?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn drain(&mut self, out: &mut dyn Sink) -> Result<usize, Failure> {
        let window = self.source.read.window;
        let n = self
            .f
            .drain(|e: fleet::Entry<'_>| if window.holds(e.time_ns) { out.write(&Record::Fleet(e)) } else { Ok(()) })
            .map_err(stdout_err)?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn finish(&self) {
        summary(&self.source.read.topic, self.f.stats());
    }
}
