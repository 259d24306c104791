//! The agent: drains a host's ring files into a Kafka topic, exactly once across
//! crashes.
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
//! ([`ringtrace::Stats::lost`], reported in [`ShipStats::ring_lost`]).

mod error;
mod kafka;
mod source;

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use error::ShipError;
pub use kafka::Compression;
use kafka::{Round, Sender};
use source::Source;

use crate::state::State;

/// What the agent is to do.
#[derive(Debug, Clone)]
pub struct Config {
    /// Kafka's bootstrap servers, `host:port,...`.
    pub brokers: String,
    /// The topic records go to.
    pub topic: String,
    /// This host's name in every batch (at most 255 bytes).
    pub host: String,
    /// Ring files to drain (discard mode, either producer kind).
    pub sources: Vec<PathBuf>,
    /// The state file (created if missing).
    pub state: PathBuf,
    /// Compression of the batches on the wire.
    pub compression: Compression,
    /// The largest Kafka message (one batch): 256 KiB by default (brokers take 1 MiB).
    pub batch_bytes: usize,
    /// The most read from one ring in one round: 4 MiB by default.
    pub round_bytes: usize,
    /// How long a message may wait for its acknowledgement before its round fails.
    pub ack_timeout: Duration,
    /// Stop once every source's producers are gone and its records shipped.
    pub until_disconnected: bool,
    /// Stop after this long, if set.
    pub duration: Option<Duration>,
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
            round_bytes: 4 << 20,
            ack_timeout: Duration::from_secs(30),
            until_disconnected: false,
            duration: None,
        }
    }
}

/// The longest nap of an agent with several rings, all empty, before it looks again.
const IDLE_MAX: Duration = Duration::from_millis(20);

/// The agent's counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ShipStats {
    /// Records acknowledged by Kafka.
    pub shipped: u64,
    /// Messages (batches) acknowledged.
    pub batches: u64,
    /// Rounds that failed (records kept in their rings and sent again).
    pub failed_rounds: u64,
    /// Records an earlier agent had shipped but not handed back, stepped over at start.
    pub recovered: u64,
    /// Records the rings refused while they were full (their producers' `lost`),
    /// summed over the sources.
    pub ring_lost: u64,
}

/// Wall-clock nanoseconds since the Unix epoch.
fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Runs the agent until `config` says to stop (or `stop` returns true); returns its
/// counters. Logs to stderr when a round fails and when it recovers.
pub fn run(config: &Config, mut stop: impl FnMut() -> bool) -> Result<ShipStats, ShipError> {
    let start = Instant::now();
    let mut state = State::load(&config.state)
        .map_err(|e| ShipError::State(e.to_string()))?
        .unwrap_or_else(|| State { host: config.host.clone(), sources: Vec::new() });
    if state.host != config.host {
        return Err(ShipError::State(format!(
            "state file {} belongs to host {:?}, not {:?}",
            config.state.display(),
            state.host,
            config.host
        )));
    }
    let mut stats = ShipStats::default();
    let mut sources = Vec::with_capacity(config.sources.len());
    for path in &config.sources {
        let mut s = Source::open(path)?;
        let found = s.recover(state.get(&s.name), Instant::now() + Duration::from_secs(10))?;
        stats.recovered += found.acknowledged;
        if found.acknowledged > 0 {
            eprintln!(
                "ringtrace-ship: {}: stepped over {} record(s) acknowledged before a restart",
                s.name, found.acknowledged
            );
        }
        sources.push(s);
    }
    let mut sender = Sender::new(&config.brokers, &config.topic, config.compression, config.ack_timeout)?;
    let mut messages: Vec<Vec<u8>> = Vec::new();
    let mut backoff = Duration::ZERO;
    let mut nap = Duration::ZERO;
    loop {
        let (mut read, mut sent) = (0, 0);
        let time = now_ns();
        for s in sources.iter_mut() {
            messages.clear();
            read += s.fill(&config.host, time, config.batch_bytes, config.round_bytes, &mut messages)?;
            let key = format!("{}/{}", config.host, s.name);
            sender.send(&key, &messages)?;
            sent += messages.len() as u64;
        }
        if read > 0 {
            match sender.settle() {
                Round::Acked => {
                    for s in sources.iter() {
                        if let Some(entry) = s.pending_state() {
                            state.set(entry);
                        }
                    }
                    state.store(&config.state).map_err(|e| ShipError::State(e.to_string()))?;
                    for s in sources.iter_mut() {
                        s.acknowledged();
                    }
                    stats.shipped += read;
                    stats.batches += sent;
                    if backoff > Duration::ZERO {
                        eprintln!("ringtrace-ship: delivering again");
                        backoff = Duration::ZERO;
                    }
                }
                Round::Failed(why) => {
                    for s in sources.iter_mut() {
                        s.failed();
                    }
                    stats.failed_rounds += 1;
                    if let Some(fatal) = sender.renew_if_fatal()? {
                        eprintln!("ringtrace-ship: the producer failed for good ({fatal}); a new one takes over");
                    }
                    backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                    eprintln!(
                        "ringtrace-ship: a round failed ({why}); its records stay in the rings, retry in {backoff:?}"
                    );
                    std::thread::sleep(backoff);
                }
            }
        }
        stats.ring_lost = sources.iter().map(|s| s.stats().lost).sum();
        if stop() || config.duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        if read == 0 {
            if config.until_disconnected && sources.iter().all(|s| s.is_disconnected() && !s.ready()) {
                break;
            }
            // Nothing in flight. One ring: sleep on its doorbell. Several (a ring
            // file's consumer has a doorbell of its own, and there is no waiting on
            // many): look again after a nap that doubles from 1 ms to IDLE_MAX while
            // they stay empty, which bounds both the added latency and the idle cost.
            if let [only] = sources.as_mut_slice() {
                only.wait(Duration::from_millis(100))?;
            } else {
                nap = (nap * 2).clamp(Duration::from_millis(1), IDLE_MAX);
                std::thread::sleep(nap);
            }
        } else {
            nap = Duration::ZERO;
        }
    }
    sender.flush();
    Ok(stats)
}
