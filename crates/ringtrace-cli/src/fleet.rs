//! `kafka://BROKERS/TOPIC`: the records a fleet's agents (`ringtrace-ship ship`)
//! shipped into a Kafka topic, read back as one timeline by `decode`, `export`, `tail`
//! and `stat` (the pipeline's `kafka` source). Copies (an agent restarted after a crash sends its unacknowledged
//! batches again) are dropped by (host, source, sequence) and counted; damaged
//! messages and records too large to ship are counted and reported on stderr.
//!
//! Reading Kafka needs the command built with the `kafka` feature ([`KAFKA_FEATURE`]),
//! which links librdkafka; without it these sources are refused with a message saying
//! so.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::failure::Failure;
use crate::output::ReportFormat;

/// The first bytes of an agent's state file (`ringtrace_ship::state::MAGIC`, which the
/// command without the `kafka` feature cannot name).
pub const STATE_MAGIC: [u8; 8] = *b"RTSHIPST";

/// How to get a command with Kafka: built with its kafka feature, from a checkout of
/// the repository (its crates are not published).
#[cfg_attr(feature = "kafka", allow(dead_code))]
pub const KAFKA_FEATURE: &str = ringtrace_ship::command::KAFKA_FEATURE;

/// The prefix of a Kafka source.
pub const SCHEME: &str = "kafka://";

/// A topic on a cluster: `kafka://BROKERS/TOPIC`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    /// Bootstrap servers, `host:port,...`.
    pub brokers: String,
    /// The topic's name.
    pub topic: String,
}

impl Topic {
    /// Parses what follows `kafka://`.
    pub fn parse(rest: &str) -> Result<Topic, Failure> {
        let usage = "as in kafka://127.0.0.1:9092/events or kafka://b1:9092,b2:9092/events";
        let Some((brokers, topic)) = rest.split_once('/') else {
            return Err(Failure::msg(format!("kafka://{rest}: name the brokers, then the topic, {usage}")));
        };
        if brokers.is_empty() || brokers.split(',').any(|b| b.trim().is_empty()) {
            return Err(Failure::msg(format!("kafka://{rest}: a broker is missing before the topic, {usage}")));
        }
        // Kafka's rule for topic names (kafka.common.internals.Topic.validate).
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if topic.is_empty() || topic.len() > 249 || !topic.chars().all(valid) || topic == "." || topic == ".." {
            return Err(Failure::msg(format!(
                "kafka://{rest}: {topic:?} is not a topic name (1 to 249 of a-z, A-Z, 0-9, '.', '_' and '-'), {usage}"
            )));
        }
        Ok(Topic { brokers: brokers.to_string(), topic: topic.to_string() })
    }
}

/// Which records, by time: wall-clock ns since the Unix epoch, `since` included,
/// `until` not; how long after `until` their messages may have been sent and still be
/// read (`--until-slack`; `None`: the topic is read to its end); and the reorder bound
/// (`--reorder`): for a topic followed, how long each record is held to go out in time
/// order (`tail -f`; zero: as batches arrive); for a topic read back, how far out of
/// time order a partition's records may come and still go out in order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    pub since: Option<u64>,
    pub until: Option<u64>,
    pub until_slack: Option<std::time::Duration>,
    pub reorder: std::time::Duration,
}

impl Window {
    /// Whether a record of time `ns` is in the window.
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    pub fn holds(&self, ns: u64) -> bool {
        self.since.is_none_or(|s| ns >= s) && self.until.is_none_or(|u| ns < u)
    }

    /// The send time before which each partition's messages are read: `until` plus
    /// the slack (saturating), if both are set.
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    pub fn sent_before(&self) -> Option<u64> {
        let slack = |s: std::time::Duration| u64::try_from(s.as_nanos()).unwrap_or(u64::MAX);
        self.until.zip(self.until_slack).map(|(u, s)| u.saturating_add(slack(s)))
    }

    /// Whether the window selects anything (no bound set).
    pub fn is_all(&self) -> bool {
        self.since.is_none() && self.until.is_none()
    }
}

/// How long a read back may go without a Kafka message before the command gives up.
#[cfg(feature = "kafka")]
const READ_IDLE: std::time::Duration = std::time::Duration::from_secs(300);

/// A topic's records in a time window, to read back: streamed in time order in bounded
/// memory ([`Read::stream`]).
#[cfg(feature = "kafka")]
#[derive(Debug, Clone)]
pub struct Read {
    pub topic: Topic,
    pub window: Window,
}

#[cfg(feature = "kafka")]
impl Read {
    /// Hands each record in the window to `each`, merged by time (within the window's
    /// reorder bound: `ringtrace_ship::fleet::Merge`), copies dropped, and returns the
    /// counters. A failure of the read comes out as an `io::Error` that carries it
    /// ([`Failure::into_io`]), so that a read written to an output fails as the read.
    pub fn stream(
        &self,
        mut each: impl FnMut(ringtrace_ship::fleet::Item<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<ringtrace_ship::fleet::FleetStats> {
        use ringtrace_ship::fleet::{stream_topic, FollowError, ReadOptions};
        let opts = ReadOptions::default()
            .since(self.window.since)
            .sent_before(self.window.sent_before())
            .reorder(self.window.reorder)
            .idle(READ_IDLE);
        let window = self.window;
        let keep = |i: ringtrace_ship::fleet::Item<'_>| if window.holds(i.entry.time_ns) { each(i) } else { Ok(()) };
        stream_topic(&self.topic.brokers, &self.topic.topic, &opts, keep, |w| crate::output::warn(&w)).map_err(|e| {
            match e {
                FollowError::Output(e) => e,
                FollowError::Kafka(e) => Failure::msg(e.to_string()).into_io(),
            }
        })
    }

    /// Says on stderr what the reader dropped and skipped, if anything.
    pub fn summary(&self, stats: ringtrace_ship::fleet::FleetStats) {
        summary(&self.topic, stats);
        self.unread(stats);
    }

    /// Says on stderr how many messages were left unread past `--until` plus
    /// `--until-slack`, if any, and how to read them.
    pub fn unread(&self, s: ringtrace_ship::fleet::FleetStats) {
        if s.unread == 0 {
            return;
        }
        let slack =
            self.window.until_slack.map_or_else(|| "end".to_string(), |d| humantime::format_duration(d).to_string());
        crate::output::warn(&format!(
            "kafka://{}/{}: {} messages sent more than --until-slack ({slack}) after --until were left unread: records \
             before --until that an agent sent that late (held through an outage) are not read; a longer \
             --until-slack, or --until-slack end, reads them",
            self.topic.brokers, self.topic.topic, s.unread
        ));
    }
}

/// Says on stderr what a reader of `topic` dropped and skipped, if anything.
#[cfg(feature = "kafka")]
pub fn summary(topic: &Topic, s: ringtrace_ship::fleet::FleetStats) {
    if s.duplicates + s.missing + s.damaged + s.too_large > 0 {
        crate::output::warn(&format!(
            "kafka://{}/{}: {} duplicates dropped, {} records missing, {} damaged messages skipped, {} records too \
             large to ship",
            topic.brokers, topic.topic, s.duplicates, s.missing, s.damaged, s.too_large
        ));
    }
    if s.expired > 0 {
        crate::output::warn(&format!(
            "kafka://{}/{}: {} offsets deleted before they were read (retention, or records deleted) were skipped",
            topic.brokers, topic.topic, s.expired
        ));
    }
    if s.vanished > 0 {
        crate::output::warn(&format!(
            "kafka://{}/{}: {} offsets were left unread in partitions that vanished (the topic deleted) during the \
             read",
            topic.brokers, topic.topic, s.vanished
        ));
    }
    ridden(topic, s);
    if s.late > 0 {
        crate::output::warn(&format!(
            "kafka://{}/{}: {} records arrived later than --reorder and were printed out of time order",
            topic.brokers, topic.topic, s.late
        ));
    }
}

/// Says on stderr how many transient Kafka errors a reader of `topic` rode through, if
/// any.
#[cfg(feature = "kafka")]
pub fn ridden(topic: &Topic, s: ringtrace_ship::fleet::FleetStats) {
    if s.transient > 0 {
        crate::output::warn(&format!(
            "kafka://{}/{}: {} transient Kafka errors ridden through (a broker down, a partition's leader moving)",
            topic.brokers, topic.topic, s.transient
        ));
    }
}

/// `stat` of an agent's state file (`ringtrace-ship ship --state`): what each source
/// shipped, could not ship (too large) and had refused by its ring, and the rounds that
/// failed.
pub fn stat_agent_state(path: &std::path::Path, format: ReportFormat) -> Result<(), Failure> {
    #[cfg(feature = "kafka")]
    {
        crate::report::agent::agent_state(path, format)
    }
    #[cfg(not(feature = "kafka"))]
    {
        let _ = format;
        Err(Failure::msg(format!(
            "{} is a ringtrace-ship agent state file, which this ringtrace, built without the kafka feature, does \
             not read (ringtrace-ship stat reads it)",
            path.display()
        )))
    }
}

/// `ringtrace ship --to kafka://...`: the agent until it ends, or a first
/// SIGINT/SIGTERM/SIGHUP asks it to stop after its round in flight; as `ringtrace-ship
/// ship` ([`ringtrace_ship::command::KafkaShip::run_until_signalled`]), with this
/// command's signal thread ([`crate::cleanup`]) taking the signals. Prints the agent's
/// counters on stdout.
pub fn ship(agent: ringtrace_ship::command::KafkaShip) -> Result<(), Failure> {
    crate::cleanup::stop_gracefully();
    let signalled = || crate::cleanup::stop_requested().map(i32::from);
    let shipped = agent.run_until_signalled(signalled).map_err(|e| Failure::msg(e.to_string()))?;
    println!("{}", shipped.report);
    match shipped.signal {
        Some(signal) => Err(Failure::Interrupted(u8::try_from(signal).unwrap_or(u8::MAX))),
        None => Ok(()),
    }
}

/// `--until-slack`: how long after `--until` a record's message may have been sent
/// and still be read; `None` (`end`): every partition is read to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UntilSlack(pub Option<std::time::Duration>);

impl Default for UntilSlack {
    /// 10 minutes, as the option's default.
    fn default() -> Self {
        UntilSlack(Some(std::time::Duration::from_secs(600)))
    }
}

/// Parses `--until-slack`: a duration (as `--reorder`, zero allowed), or `end`.
pub fn parse_until_slack(s: &str) -> Result<UntilSlack, String> {
    if s.trim() == "end" {
        return Ok(UntilSlack(None));
    }
    crate::units::parse_duration_or_zero(s).map(|d| UntilSlack(Some(d))).map_err(|e| format!("{e}; or end"))
}

/// Parses a `--since`/`--until` time: RFC 3339 in UTC (`2026-11-27T10:00:00Z`, a
/// fraction of a second allowed), a duration before now with its unit (`90s`, `15m`,
/// `2h`), or nanoseconds since the Unix epoch (digits only).
pub fn parse_time(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().map_err(|_| format!("`{s}`: nanoseconds since the epoch fit in 20 digits"));
    }
    let since_epoch = |at: SystemTime| at.duration_since(UNIX_EPOCH).map(|d| d.as_nanos());
    if t.contains('-') {
        let at = humantime::parse_rfc3339_weak(t).map_err(|e| {
            format!("`{s}` is not a time: {e} (write 2026-11-27T10:00:00Z, a duration ago such as 15m, or ns since the epoch)")
        })?;
        let ns = since_epoch(at).map_err(|_| format!("`{s}` is before 1970"))?;
        return u64::try_from(ns).map_err(|_| format!("`{s}` is past 2554"));
    }
    let ago = crate::units::parse_duration(t).map_err(|e| format!("{e}; or a time, as 2026-11-27T10:00:00Z"))?;
    let now = since_epoch(SystemTime::now()).map_err(|_| "the clock is before 1970".to_string())?;
    Ok(u64::try_from(now.saturating_sub(ago.as_nanos())).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_parse() {
        let t = Topic::parse("127.0.0.1:9092,b:1/events.v1").unwrap();
        assert_eq!((t.brokers.as_str(), t.topic.as_str()), ("127.0.0.1:9092,b:1", "events.v1"));
        for bad in ["", "b:1", "/t", "b:1/", "b:1,/t", "b:1/a/b", "b:1/..", "b:1/sp ace"] {
            assert!(Topic::parse(bad).is_err(), "{bad:?}");
        }
        assert!(Topic::parse(&format!("b:1/{}", "x".repeat(250))).is_err());
    }

    #[test]
    fn times_parse() {
        assert_eq!(parse_time("1700000000000000000"), Ok(1_700_000_000_000_000_000));
        assert_eq!(parse_time("2023-11-14T22:13:20Z"), Ok(1_700_000_000_000_000_000));
        assert_eq!(parse_time("2023-11-14T22:13:20.5Z"), Ok(1_700_000_000_500_000_000));
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
        let ago = parse_time("15m").unwrap();
        assert!((now - 15 * 60 * 1_000_000_000).abs_diff(ago) < 60 * 1_000_000_000);
        for bad in ["", "yesterday", "2023-13-01T00:00:00Z", "5x", "1969-12-31T23:59:59Z"] {
            assert!(parse_time(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn until_slacks_parse_and_add_to_until() {
        use std::time::Duration;
        assert_eq!(parse_until_slack("10m"), Ok(UntilSlack(Some(Duration::from_secs(600)))));
        assert_eq!(parse_until_slack("0"), Ok(UntilSlack(Some(Duration::ZERO))));
        assert_eq!(parse_until_slack("end"), Ok(UntilSlack(None)));
        for bad in ["", "10", "ends", "-1s"] {
            assert!(parse_until_slack(bad).is_err(), "{bad:?}");
        }
        let w = Window { until: Some(5), until_slack: Some(Duration::from_nanos(3)), ..Window::default() };
        assert_eq!(w.sent_before(), Some(8));
        let w = Window { until: Some(u64::MAX - 1), until_slack: Some(Duration::from_secs(1)), ..Window::default() };
        assert_eq!(w.sent_before(), Some(u64::MAX), "saturating");
        assert_eq!(Window { until_slack: None, ..w }.sent_before(), None, "end: no bound");
        assert_eq!(Window { until: None, ..w }.sent_before(), None, "no --until: no bound");
    }

    #[test]
    fn windows_hold_since_and_not_until() {
        let w = Window { since: Some(10), until: Some(20), ..Window::default() };
        assert!(!w.holds(9) && w.holds(10) && w.holds(19) && !w.holds(20));
        assert!(Window::default().holds(0) && Window::default().is_all());
    }
}
