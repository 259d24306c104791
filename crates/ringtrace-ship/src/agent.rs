//! The agent: drains a host's ring files (and channel files, flight recorders and BPF
//! ring buffer maps) into a Kafka topic, exactly once across crashes.
//!
//! A round reads what each ring holds (up to [`Config::round_bytes`] a ring) into
//! batches ([`crate::frame`]), sends them keyed by `host/source` (so each source's
//! batches stay in one partition, in order), and waits for Kafka's acknowledgements
//! (`acks=all`, idempotent producer). Only then does it store each source's next
//! sequence number and position in the state file ([`crate::state`]), and only after
//! that does it hand the records' space back to the rings. So:
//!
//! * killed before the acknowledgements, a restarted agent reads the same records
//!   again from the ring and sends them with the same sequence numbers: readers drop
//!   the copies by (host, source, sequence);
//! * killed after storing the state, it steps over the records the state says were
//!   acknowledged (counted in [`ShipStats::recovered`]).
//!
//! While Kafka is slow or down, rounds fail and are retried (after a pause that grows
//! to a second); the agent reads nothing new meanwhile, so the rings do what they are
//! configured to do: discard rings refuse records and count them
//! ([`ringtrace::Stats::lost`], reported in [`ShipStats::ring_lost`]); flight recorders
//! overwrite their oldest records, which the agent counts as it finds them gone
//! ([`ShipStats::overwritten`]) and which leave gaps in their sequences (a flight
//! recorder is followed as its `source::flight` module says: its consumer goes back to
//! the last acknowledged mark instead of holding its records).
//!
//! With a spool directory ([`Config::spool`], [`crate::spool`]), a round not
//! acknowledged within [`Config::spool_wait`] is kept on disk instead, and the rings
//! get its space back: the agent goes on draining them into the spool while Kafka is
//! away, up to [`Config::spool_max`] bytes, and sends the spool, oldest round first,
//! before any newer round once Kafka is back. Only a full spool leaves records in the
//! rings.

#[cfg(feature = "command")]
mod config_file;
mod error;
mod kafka;
mod source;
mod spooling;
mod stats;

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[cfg(feature = "command")]
pub use config_file::{ConfigError, FileConfig, ParseError};
pub use error::ShipError;
pub use kafka::Compression;
use kafka::{Round, Sender, Unacked};
use source::Source;
pub use source::{SourceError, SourceErrorKind};
pub use stats::ShipStats;

use crate::spool::SpoolPart;
use crate::state::State;
use spooling::{counts_of, Spooling};

/// What the agent is to do.
#[derive(Debug, Clone)]
pub struct Config {
    /// Kafka's bootstrap servers, `host:port,...`.
    pub brokers: String,
    /// The topic records go to.
    pub topic: String,
    /// This host's name in every batch (at most 255 bytes).
    pub host: String,
    /// Ring files to drain (discard mode, either producer kind), and channel files
    /// (discard mode): one source per slot, named `PATH#SLOT`.
    pub sources: Vec<PathBuf>,
    /// The state file (created if missing).
    pub state: PathBuf,
    /// Compression of the batches on the wire.
    pub compression: Compression,
    /// The size a batch is closed at: 256 KiB by default. A record that does not fit
    /// an open batch starts the next, which may grow past this up to `max_message`.
    pub batch_bytes: usize,
    /// The largest message (one batch) sent: 1,000,000 bytes by default, librdkafka's
    /// default `message.max.bytes` and below the broker's and topics' default limit
    /// (1,048,588). It must not pass the topic's `max.message.bytes`. A record whose
    /// batch alone would pass it is not shipped: a marker takes its place
    /// ([`crate::frame::TOO_LARGE`]) and [`ShipStats::too_large`] counts it.
    pub max_message: usize,
    /// The most read from one ring in one round: 4 MiB by default.
    pub round_bytes: usize,
    /// How long a message may wait for its acknowledgement before its round fails.
    pub ack_timeout: Duration,
    /// Stop once every source's producers are gone and its records shipped (a channel
    /// file: every slot that ever had a producer, and at least one had one).
    pub until_disconnected: bool,
    /// Stop after this long, if set.
    pub duration: Option<Duration>,
    /// The spool directory, if any ([`crate::spool`]): rounds Kafka did not take in
    /// time wait there instead of in the rings.
    pub spool: Option<PathBuf>,
    /// The most bytes the spool holds: 1 GiB by default.
    pub spool_max: u64,
    /// How long a round waits for its acknowledgements before it is spooled: 2 s by
    /// default (the rings must hold this long of records).
    pub spool_wait: Duration,
}

impl Config {
    /// A configuration with the defaults above.
    pub fn new(brokers: &str, topic: &str, host: &str, state: PathBuf) -> Config {
        Config {
            brokers: brokers.to_string(),
            topic: topic.to_string(),
            host: host.to_string(),
            sources: Vec::new(),
            state,
            compression: Compression::Lz4,
            batch_bytes: 256 << 10,
            max_message: DEFAULT_MAX_MESSAGE,
            round_bytes: 4 << 20,
            ack_timeout: Duration::from_secs(30),
            until_disconnected: false,
            duration: None,
            spool: None,
            spool_max: 1 << 30,
            spool_wait: Duration::from_secs(2),
        }
    }
}

#[cfg(feature = "command")]
impl Config {
    /// Sets what a configuration file says (its `None`s leave this configuration's
    /// values); its sources are added to these.
    pub fn apply(&mut self, file: &FileConfig) {
        let set = |to: &mut String, from: &Option<String>| {
            if let Some(v) = from {
                to.clone_from(v);
            }
        };
        set(&mut self.brokers, &file.brokers);
        set(&mut self.topic, &file.topic);
        set(&mut self.host, &file.host);
        if let Some(s) = &file.state {
            self.state.clone_from(s);
        }
        self.sources.extend(file.sources.iter().cloned());
        self.compression = file.compression.unwrap_or(self.compression);
        self.max_message = file.max_message.unwrap_or(self.max_message);
        self.batch_bytes = file.batch_bytes.unwrap_or(self.batch_bytes);
        self.round_bytes = file.round_bytes.unwrap_or(self.round_bytes);
        self.ack_timeout = file.ack_timeout.unwrap_or(self.ack_timeout);
        if file.spool.is_some() {
            self.spool.clone_from(&file.spool);
        }
        self.spool_max = file.spool_max.unwrap_or(self.spool_max);
        self.spool_wait = file.spool_wait.unwrap_or(self.spool_wait);
    }
}

/// [`Config::max_message`] by default.
pub const DEFAULT_MAX_MESSAGE: usize = 1_000_000;
/// The smallest [`Config::max_message`]: room for a batch of a marker whatever the names.
pub const MIN_MAX_MESSAGE: usize = 8192;
/// The largest [`Config::max_message`]: librdkafka's `message.max.bytes` tops at 10^9,
/// less room for the key and the message's framing.
pub const MAX_MAX_MESSAGE: usize = 999_000_000;

/// The longest nap of an agent with several rings, all empty, before it looks again.
const IDLE_MAX: Duration = Duration::from_millis(20);

/// Wall-clock nanoseconds since the Unix epoch.
fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Runs the agent until `config` says to stop (or `stop` returns true); returns its
/// counters. Logs (`tracing` events, warnings and infos) when a round fails and when
/// it recovers.
pub fn run(config: &Config, mut stop: impl FnMut() -> bool) -> Result<ShipStats, ShipError> {
    let start = Instant::now();
    let mut state =
        State::load(&config.state)?.unwrap_or_else(|| State { host: config.host.clone(), ..State::default() });
    if state.host != config.host {
        return Err(ShipError::OtherHost { path: config.state.clone(), found: state.host, host: config.host.clone() });
    }
    if !(MIN_MAX_MESSAGE..=MAX_MAX_MESSAGE).contains(&config.max_message) {
        return Err(ShipError::MaxMessage(config.max_message));
    }
    let mut stats = ShipStats::default();
    let mut spooling = match &config.spool {
        Some(dir) => {
            Some(Spooling::open(dir, config.spool_max, config.spool_wait, &mut state, &config.state, &mut stats)?)
        }
        None if state.spool_tail > state.spool_head => {
            return Err(ShipError::SpoolNeeded {
                path: config.state.clone(),
                rounds: state.spool_tail - state.spool_head,
            })
        }
        None => None,
    };
    let mut sources = Vec::with_capacity(config.sources.len());
    for mut s in Source::expand(&config.sources)? {
        let found = s.recover(state.get(&s.name), Instant::now() + Duration::from_secs(10))?;
        stats.recovered += found.acknowledged;
        if found.acknowledged > 0 {
            tracing::info!("{}: stepped over {} record(s) acknowledged before a restart", s.name, found.acknowledged);
        }
        sources.push(s);
    }
    let mut sender =
        Sender::new(&config.brokers, &config.topic, config.compression, config.ack_timeout, config.max_message)?;
    sender.check_topic(Duration::from_secs(5))?;
    let limits = source::Limits {
        batch: config.batch_bytes.min(config.max_message),
        max: config.max_message,
        round: config.round_bytes,
    };
    // Each source's messages of the round in flight, kept until it is acknowledged (or
    // spooled).
    let mut messages: Vec<Vec<Vec<u8>>> = vec![Vec::new(); sources.len()];
    let mut round = vec![source::Filled::default(); sources.len()];
    let mut backoff = Duration::ZERO;
    let mut nap = Duration::ZERO;
    loop {
        if let Some(sp) = spooling.as_mut() {
            sp.pump(&mut sender, config.ack_timeout, &mut state, &config.state, &mut stats)?;
        }
        let (mut read, mut sent, mut too_large) = (0, 0, 0);
        let time = now_ns();
        for ((s, filled), out) in sources.iter_mut().zip(round.iter_mut()).zip(messages.iter_mut()) {
            out.clear();
            *filled = s.fill(&config.host, time, limits, out)?;
            read += filled.records;
            too_large += filled.too_large;
            sent += out.len() as u64;
        }
        if read > 0 {
            // Older rounds wait in the spool: this one joins them, to keep each
            // source's records in order.
            let outcome = if spooling.as_ref().is_some_and(Spooling::backlog) {
                Round::Unsettled(Unacked::BehindSpool)
            } else {
                for (s, out) in sources.iter().zip(&messages) {
                    sender.send(&format!("{}/{}", config.host, s.name), out)?;
                }
                let outcome = sender.settle(spooling.as_ref().map(|sp| sp.wait));
                if matches!(outcome, Round::Unsettled(_)) {
                    sender.abandon()?;
                }
                outcome
            };
            let outcome = match (outcome, spooling.as_mut()) {
                (Round::Acked, _) => Ok(Delivered::Kafka),
                (Round::Failed(why) | Round::Unsettled(why), Some(sp)) => {
                    let parts = sources
                        .iter()
                        .zip(&round)
                        .zip(messages.iter_mut())
                        .filter(|((_, filled), _)| filled.records > 0)
                        .map(|((s, filled), out)| SpoolPart {
                            source: s.name.clone(),
                            records: filled.records,
                            messages: std::mem::take(out),
                        })
                        .collect();
                    let first = !sp.backlog();
                    match sp.keep(parts) {
                        Some(serial) => {
                            if first {
                                tracing::warn!("rounds go to the spool ({why})");
                            }
                            state.spool_tail = serial + 1;
                            Ok(Delivered::Spool)
                        }
                        None => Err(why),
                    }
                }
                (Round::Failed(why) | Round::Unsettled(why), None) => Err(why),
            };
            match outcome {
                Ok(to) => {
                    for (s, filled) in sources.iter().zip(&round) {
                        if let Some(mut entry) = s.pending_state() {
                            let overwritten = entry.counts.overwritten;
                            entry.counts = state.get(&entry.source).map(|e| e.counts).unwrap_or_default();
                            entry.counts.ring_lost = s.stats().lost;
                            entry.counts.overwritten = overwritten;
                            match to {
                                // Records delivered whole: the markers are `too_large`'s.
                                Delivered::Kafka => {
                                    entry.counts.shipped += filled.records.saturating_sub(filled.too_large)
                                }
                                Delivered::Spool => entry.counts.spooled += filled.records,
                            }
                            entry.counts.too_large += filled.too_large;
                            state.set(entry);
                        }
                    }
                    state.updated_ns = now_ns();
                    let stored = state.store(&config.state);
                    // A store that failed after its rename (syncing the directory) left
                    // this state in the file all the same, and the next agent takes up
                    // from it: the sources must say the same, or a flight recorder's
                    // consumer, going back to its older mark as it drops, would be
                    // behind the file's (and read as a new ring, renumbered). A power
                    // loss before the directory reaches the disk could still bring the
                    // older file back: the agent stops here, on the error, rather than
                    // go on over a directory that cannot be synced.
                    if stored.is_ok() || State::load(&config.state).ok().flatten().as_ref() == Some(&state) {
                        for s in sources.iter_mut() {
                            s.acknowledged();
                        }
                    }
                    stored?;
                    match to {
                        Delivered::Kafka => {
                            stats.shipped += read.saturating_sub(too_large);
                            stats.batches += sent;
                        }
                        Delivered::Spool => stats.spooled += read,
                    }
                    stats.too_large += too_large;
                    if backoff > Duration::ZERO {
                        tracing::info!("delivering again");
                        backoff = Duration::ZERO;
                    }
                }
                Err(why) => {
                    for s in sources.iter_mut() {
                        s.failed();
                    }
                    stats.failed_rounds += 1;
                    // The counters only: what the rings refused meanwhile, for `stat`.
                    state.failed_rounds += 1;
                    state.updated_ns = now_ns();
                    for s in &sources {
                        counts_of(&mut state, &s.name, |c| c.ring_lost = s.stats().lost);
                    }
                    state.store(&config.state)?;
                    if let Some(fatal) = sender.renew_if_fatal()? {
                        tracing::warn!("the producer failed for good ({fatal}); a new one takes over");
                    }
                    backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                    tracing::warn!("a round failed ({why}); its records stay in the rings, retry in {backoff:?}");
                    std::thread::sleep(backoff);
                }
            }
        }
        stats.ring_lost = sources.iter().map(|s| s.stats().lost).sum();
        stats.overwritten = state.sources.iter().map(|s| s.counts.overwritten).sum();
        if stop() || config.duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        if read == 0 {
            let spooled = spooling.as_ref().is_some_and(Spooling::backlog);
            if config.until_disconnected && !spooled && sources.iter().all(|s| s.is_disconnected() && !s.ready()) {
                break;
            }
            // Nothing in flight. One ring and no spool to send: sleep on its doorbell.
            // Several (a ring file's consumer has a doorbell of its own, and there is
            // no waiting on many), or a spool waiting to be sent: look again after a
            // nap that doubles from 1 ms to IDLE_MAX while they stay empty, which
            // bounds both the added latency and the idle cost.
            match sources.as_mut_slice() {
                [only] if !spooled => only.wait(Duration::from_millis(100))?,
                _ => {
                    nap = (nap * 2).clamp(Duration::from_millis(1), IDLE_MAX);
                    std::thread::sleep(nap);
                }
            }
        } else {
            nap = Duration::ZERO;
        }
    }
    sender.flush();
    Ok(stats)
}

/// Where a round's records went.
#[derive(Clone, Copy)]
enum Delivered {
    /// Kafka acknowledged them.
    Kafka,
    /// The spool keeps them.
    Spool,
}
