//! The agent's side of the spool ([`crate::spool`]): reconciling the state with the
//! directory at start, keeping a round Kafka did not take in time, and sending the
//! kept rounds again, oldest first, before any newer round goes out. Sending the spool
//! never blocks the agent: it waits for Kafka's answer while it goes on draining the
//! rings (into the spool).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::frame::Batch;
use crate::spool::{Pending, Spool, SpoolError, SpoolPart, SpoolRound};
use crate::state::{SourceCounts, State};

use super::error::ShipError;
use super::kafka::{Round, Sender};
use super::stats::ShipStats;

/// The most bytes of spooled rounds sent in one go (at least one round).
const SEND_BYTES: u64 = 16 << 20;
/// The longest pause between two attempts to send the spool while Kafka is down.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// A spooled round sent again, with its parts' too-large markers ([`markers`]).
type Sent = (Pending, Vec<u64>);

/// The spool of a running agent, and when to try sending it next.
pub(super) struct Spooling {
    spool: Spool,
    /// How long a round may wait for its acknowledgements before it is spooled.
    pub wait: Duration,
    next_attempt: Instant,
    backoff: Duration,
    /// The rounds sent and not yet answered for, and when they were sent.
    in_flight: Option<(Vec<Sent>, Instant)>,
}

/// The too-large markers in each part of `round`, in the order of its parts (and of
/// [`SpoolRound::counts`]): the records of `spooled` that `shipped`, which counts the
/// records delivered whole, leaves out once the round is delivered.
fn markers(round: &SpoolRound) -> Vec<u64> {
    let of = |m: &Vec<u8>| Batch::decode(m).map_or(0, |b| b.records().filter(|r| r.too_large.is_some()).count() as u64);
    round.parts.iter().map(|p| p.messages.iter().map(of).sum()).collect()
}

/// Applies `f` to the counters of `source` in `state`, if it has an entry.
pub(super) fn counts_of(state: &mut State, source: &str, f: impl FnOnce(&mut SourceCounts)) {
    if let Some(i) = state.sources.iter().position(|e| e.source == source) {
        f(&mut state.sources[i].counts);
    }
}

impl Spooling {
    /// Opens the spool at `dir` for `state`'s host and pending rounds, counts what the
    /// state says is spooled but no intact file holds as lost, and stores the state.
    pub fn open(
        dir: &Path,
        max_bytes: u64,
        wait: Duration,
        state: &mut State,
        state_path: &Path,
        stats: &mut ShipStats,
    ) -> Result<Spooling, ShipError> {
        let (spool, opened) = Spool::open(dir, &state.host, max_bytes, state.spool_head, state.spool_tail)?;
        for d in &opened.damaged {
            tracing::warn!("{d}: its records are lost, and counted (spool_lost)");
        }
        if opened.removed > 0 {
            tracing::info!(
                "{}: removed {} round(s) delivered or never committed before a restart",
                dir.display(),
                opened.removed
            );
        }
        // What intact files hold, by source; the rest of what the state counts is lost.
        for i in 0..state.sources.len() {
            let name = state.sources[i].source.clone();
            let held: u64 =
                spool.pending().iter().flat_map(|p| &p.counts).filter(|(s, _)| *s == name).map(|(_, n)| n).sum();
            let c = &mut state.sources[i].counts;
            let lost = c.spooled.saturating_sub(held);
            c.spool_lost += lost;
            c.spooled = held;
            stats.spool_lost += lost;
        }
        state.spool_head = spool.head();
        state.store(state_path)?;
        Ok(Spooling { spool, wait, next_attempt: Instant::now(), backoff: Duration::ZERO, in_flight: None })
    }

    /// Whether rounds wait in the spool: newer rounds then go to the spool too, so
    /// that every source's records reach Kafka in order.
    pub fn backlog(&self) -> bool {
        !self.spool.pending().is_empty()
    }

    /// Keeps a round in the spool: `Ok(Some(serial))` once its file is on disk (the
    /// caller stores the state with the tail past it, then releases the records),
    /// `Ok(None)` if it does not fit or could not be written (said on stderr: its
    /// records stay in their rings).
    pub fn keep(&mut self, parts: Vec<SpoolPart>) -> Option<u64> {
        match self.spool.write(parts) {
            Ok(serial) => Some(serial),
            Err(e @ SpoolError::Full { .. }) => {
                tracing::warn!("{e}: the round's records stay in their rings");
                None
            }
            Err(e) => {
                tracing::warn!("keeping a round in the spool: {e}: its records stay in their rings");
                None
            }
        }
    }

    /// Moves the spool on, without blocking: once Kafka answered for the rounds in
    /// flight, either stores the state with the head past them and removes their
    /// files (acknowledged), or schedules another try after a pause that doubles to
    /// 5 s (failed, or not answered within `timeout`: the producer's messages in
    /// flight are then abandoned). With none in flight and the pause over, sends the
    /// oldest rounds (up to 16 MiB, at least one). A round found damaged is set aside
    /// and its records counted lost. Meanwhile the agent goes on draining the rings
    /// into the spool, and sends nothing else: the producer's messages in flight are
    /// the spool's.
    pub fn pump(
        &mut self,
        sender: &mut Sender,
        timeout: Duration,
        state: &mut State,
        state_path: &Path,
        stats: &mut ShipStats,
    ) -> Result<(), ShipError> {
        let store = |state: &State| state.store(state_path).map_err(ShipError::from);
        if let Some((due, since)) = &self.in_flight {
            let why = match sender.settle(Some(Duration::ZERO)) {
                Round::Unsettled(_) if since.elapsed() < timeout => return Ok(()),
                Round::Unsettled(why) => {
                    sender.abandon()?;
                    why
                }
                Round::Failed(why) => why,
                Round::Acked => {
                    for (p, markers) in due {
                        for ((source, n), m) in p.counts.iter().zip(markers) {
                            let whole = n.saturating_sub(*m);
                            counts_of(state, source, |c| {
                                c.spooled = c.spooled.saturating_sub(*n);
                                c.shipped += whole;
                            });
                            stats.unspooled += n;
                            stats.shipped += whole;
                        }
                    }
                    state.spool_head = due.last().map_or(state.spool_head, |(p, _)| p.serial + 1);
                    store(state)?;
                    for _ in 0..due.len() {
                        self.spool.pop(false);
                    }
                    self.in_flight = None;
                    if !self.backlog() {
                        tracing::info!("the spool is delivered");
                    }
                    self.backoff = Duration::ZERO;
                    return Ok(());
                }
            };
            self.in_flight = None;
            self.backoff = (self.backoff * 2).clamp(Duration::from_millis(100), RETRY_MAX);
            self.next_attempt = Instant::now() + self.backoff;
            tracing::warn!(
                "sending the spool ({} round(s), {} bytes): {why}; retry in {:?}",
                self.spool.pending().len(),
                self.spool.bytes(),
                self.backoff
            );
            return Ok(());
        }
        if !self.backlog() || Instant::now() < self.next_attempt {
            return Ok(());
        }
        let mut bytes = 0;
        let mut due = Vec::new();
        for p in self.spool.pending() {
            if !due.is_empty() && bytes + p.bytes > SEND_BYTES {
                break;
            }
            bytes += p.bytes;
            due.push(p.clone());
        }
        let mut sent = Vec::with_capacity(due.len());
        for p in due {
            let round = match self.spool.read(p.serial) {
                Ok(round) => round,
                // Only a round at the front can be set aside and counted now; one
                // behind the rounds sent waits its turn.
                Err(_) if !sent.is_empty() => break,
                Err(e) => {
                    tracing::warn!("{e}: its records are lost, and counted (spool_lost)");
                    for (source, n) in &p.counts {
                        counts_of(state, source, |c| {
                            c.spooled = c.spooled.saturating_sub(*n);
                            c.spool_lost += n;
                        });
                        stats.spool_lost += n;
                    }
                    state.spool_head = p.serial + 1;
                    store(state)?;
                    self.spool.pop(true);
                    return Ok(());
                }
            };
            for part in &round.parts {
                sender.send(&format!("{}/{}", round.host, part.source), &part.messages)?;
            }
            sent.push((p, markers(&round)));
        }
        self.in_flight = Some((sent, Instant::now()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{BatchWriter, TimeSource};

    /// A part's markers are counted across its batches, and a part without any counts 0:
    /// delivered, its records less its markers go to `shipped`.
    #[test]
    fn a_spooled_rounds_markers_are_counted_by_part() {
        let batch = |first: u64, markers: &[u64]| {
            let mut w = BatchWriter::new("h", "s", first, TimeSource::Drained, 0).unwrap();
            for seq in first..first + 4 {
                if markers.contains(&seq) {
                    w.push_too_large(seq, 5 << 20).unwrap();
                } else {
                    w.push(seq, b"record").unwrap();
                }
            }
            w.finish()
        };
        let part = |source: &str, messages: Vec<Vec<u8>>| SpoolPart { source: source.into(), records: 8, messages };
        let round = SpoolRound {
            host: "h".into(),
            serial: 0,
            parts: vec![
                part("a", vec![batch(0, &[1]), batch(4, &[4, 7])]),
                part("b", vec![batch(0, &[]), batch(4, &[])]),
            ],
        };
        assert_eq!(markers(&round), [3, 0]);
    }

    /// The messages `topic` of the cluster at `brokers` holds (its one partition's end).
    fn held(brokers: &str, topic: &str) -> i64 {
        let consumer: rdkafka::consumer::BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", "ringtrace-spooling-test")
            .create()
            .unwrap();
        let (low, high) =
            rdkafka::consumer::Consumer::fetch_watermarks(&consumer, topic, 0, Duration::from_secs(10)).unwrap();
        high - low
    }

    /// librdkafka reports a message delivered without the broker's word for it in two
    /// cases: a batch the broker calls a duplicate of one it has (`DUPLICATE_SEQUENCE_NUMBER`,
    /// `rd_kafka_handle_idempotent_Produce_error`), and the batches before one the broker
    /// acknowledged whose own requests failed ("implicitly acked",
    /// `rd_kafka_dr_implicit_ack`), an inference Kafka breaks where a partition holds
    /// nothing of the producer yet and takes any first sequence number from it.
    /// Either report has no offset. A spooled round whose messages came back so must be
    /// sent again, not removed from the spool: here the mock broker answers the first
    /// produce request with `DUPLICATE_SEQUENCE_NUMBER` having written nothing.
    #[test]
    fn a_spooled_round_acknowledged_without_an_offset_is_sent_again() {
        use rdkafka::mocking::MockCluster;
        use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

        let mock = MockCluster::new(1).unwrap();
        mock.create_topic("spooled", 1, 1).unwrap();
        let brokers = mock.bootstrap_servers();
        let dir = std::env::temp_dir().join(format!("ringtrace-ship-spooling-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let state_path = dir.join("agent.state");
        let mut state = State { host: "h".into(), ..State::default() };
        let mut stats = ShipStats::default();
        let timeout = Duration::from_secs(10);
        let mut spooling =
            Spooling::open(&dir.join("spool"), 1 << 20, timeout, &mut state, &state_path, &mut stats).unwrap();
        let mut w = BatchWriter::new("h", "s", 0, TimeSource::Drained, 0).unwrap();
        for seq in 0..4 {
            w.push(seq, b"record").unwrap();
        }
        let part = SpoolPart { source: "s".into(), records: 4, messages: vec![w.finish()] };
        state.spool_tail = spooling.keep(vec![part]).unwrap() + 1;
        let mut sender = Sender::new(&brokers, "spooled", crate::agent::Compression::None, timeout, 1 << 20).unwrap();
        mock.request_errors(RDKafkaApiKey::Produce, &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_DUPLICATE_SEQUENCE_NUMBER]);
        // The first attempt: sent, then answered for.
        let deadline = Instant::now() + Duration::from_secs(30);
        spooling.pump(&mut sender, timeout, &mut state, &state_path, &mut stats).unwrap();
        assert!(spooling.in_flight.is_some(), "the spooled round was sent");
        while spooling.in_flight.is_some() {
            assert!(Instant::now() < deadline, "the first attempt answered for within 30 s");
            std::thread::sleep(Duration::from_millis(5));
            spooling.pump(&mut sender, timeout, &mut state, &state_path, &mut stats).unwrap();
        }
        assert_eq!(held(&brokers, "spooled"), 0, "the broker wrote nothing of the first attempt");
        assert_eq!(stats.unspooled, 0, "a round acknowledged without an offset is not delivered");
        assert!(spooling.backlog(), "the round stays in the spool");
        assert_eq!((state.spool_head, state.spool_tail), (0, 1));
        // The next attempt delivers it for real.
        while spooling.backlog() {
            assert!(Instant::now() < deadline, "the round delivered within 30 s");
            std::thread::sleep(Duration::from_millis(5));
            spooling.pump(&mut sender, timeout, &mut state, &state_path, &mut stats).unwrap();
        }
        assert_eq!(stats.unspooled, 4);
        assert_eq!(held(&brokers, "spooled"), 1, "the round's one message is in the topic");
        assert_eq!(state.spool_head, 1);
        drop(spooling);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
