//! `kafka://BROKERS/TOPIC` (the `kafka` feature): a fleet's records read back with
//! `ringtrace-ship`'s fleet reader, copies dropped, merged by time; or followed as their
//! batches arrive.

use std::path::Path;
use std::time::Duration;

use ringtrace_ship::fleet::{self, Fleet, FollowError};

use super::{Follow, Held, RecordSource};
use crate::failure::Failure;
use crate::fleet::{summary, Read, Topic, Window};
use crate::output::{stdout_err, warn, ReportFormat};
use crate::pipeline::output::Sink;
use crate::pipeline::record::{Record, Shape, Timeline};

/// How long reading a topic to its end may take before the command gives up.
const READ_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a follow waits for a batch before it looks at its `--timeout`.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// A topic's records in a time window, before they are read.
#[derive(Debug)]
pub struct Kafka {
    topic: Topic,
    window: Window,
}

impl Kafka {
    pub fn new(topic: Topic, window: Window) -> Self {
        Kafka { topic, window }
    }

    /// The topic read to its end (from `window.since` on), copies dropped.
    fn read_all(&self) -> Result<Read, Failure> {
        let (t, since) = (&self.topic, self.window.since);
        let fleet: Fleet = fleet::read_topic_since(&t.brokers, &t.topic, since, READ_TIMEOUT, |w| warn(&w))
            .map_err(|e| Failure::msg(e.to_string()))?;
        Ok(Read { topic: self.topic.clone(), window: self.window, fleet })
    }
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
        Ok(Box::new(self.read_all()?))
    }

    /// Every new record as its batch arrives, from the topic's end (or `--since`).
    fn follow(&mut self) -> Result<Box<dyn Follow + '_>, Failure> {
        let (t, since) = (&self.topic, self.window.since);
        let mut f =
            fleet::Follow::start(&t.brokers, &t.topic, since, READ_TIMEOUT).map_err(|e| Failure::msg(e.to_string()))?;
        f.reorder(self.window.reorder);
        Ok(Box::new(Followed { f, source: self }))
    }

    fn timeline(&mut self) -> Option<Result<Timeline, Failure>> {
        Some(self.read_all().map(Timeline::Fleet))
    }

    fn stat(&mut self, _path: &Path, format: ReportFormat) -> Result<(), Failure> {
        let read = self.read_all()?;
        crate::fleet::ridden(&read.topic, read.fleet.stats());
        crate::report::fleet::stat(&read, format)
    }
}

impl Held for Read {
    fn records(&self) -> Box<dyn Iterator<Item = Record<'_>> + '_> {
        Box::new(self.entries().map(Record::Fleet))
    }

    fn finish(&self) {
        self.summary();
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
        let window = self.source.window;
        let each = |e: fleet::Entry<'_>| if window.holds(e.time_ns) { out.write(&Record::Fleet(e)) } else { Ok(()) };
        let n = self.f.poll(FOLLOW_POLL, each, |w| warn(&w)).map_err(|e| match e {
            FollowError::Kafka(e) => Failure::msg(e.to_string()),
            FollowError::Output(e) => stdout_err(e),
        })?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn drain(&mut self, out: &mut dyn Sink) -> Result<usize, Failure> {
        let window = self.source.window;
        let n = self
            .f
            .drain(|e: fleet::Entry<'_>| if window.holds(e.time_ns) { out.write(&Record::Fleet(e)) } else { Ok(()) })
            .map_err(stdout_err)?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn finish(&self) {
        summary(&self.source.topic, self.f.stats());
    }
}
