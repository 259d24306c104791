//! The errors a reader rides through: what a Kafka client hears while one broker of a
//! replicated topic is down or a partition's leadership moves, and which Kafka itself
//! rides through (replication 3, `min.insync.replicas=2`: one node down loses nothing).
//!
//! librdkafka reports a broker's connection refused or dropped
//! (`RD_KAFKA_RESP_ERR__TRANSPORT`), all brokers unreachable for a moment
//! (`__ALL_BROKERS_DOWN`), a broker handle it dropped while a request waited on it
//! (`__DESTROY_BROKER`, from a metadata request), and a request that timed out; the
//! brokers answer `LEADER_NOT_AVAILABLE`, `NOT_LEADER_OR_FOLLOWER`,
//! `UNKNOWN_TOPIC_OR_PARTITION` (a broker just made leader that has not loaded the
//! partition yet), `REQUEST_TIMED_OUT` and the like while the controller moves a
//! partition's leadership (after the dead broker's session timeout,
//! `broker.session.timeout.ms`, 9 s by default). librdkafka's consumer recovers from
//! all of these by itself (its documentation calls consumer errors "informational");
//! a request that failed is made again. Each is counted
//! ([`FleetStats::transient`](super::FleetStats::transient)), and retried only until
//! the reader's deadline: an error that lasts past it fails the read.

use std::time::{Duration, Instant};

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode as C;

/// The pause before a request that failed transiently is made again.
const AGAIN: Duration = Duration::from_millis(250);
/// The longest one request waits before it is made again (a request sent to a broker
/// that just died may wait for its connection to time out).
pub(super) const REQUEST: Duration = Duration::from_secs(10);

/// Whether `e` is one a reader rides through (see the module's documentation).
pub(super) fn is_transient(e: &KafkaError) -> bool {
    if matches!(e, KafkaError::MessageConsumptionFatal(_)) {
        return false;
    }
    matches!(
        e.rdkafka_error_code(),
        Some(
            C::BrokerTransportFailure
                | C::AllBrokersDown
                | C::DestroyBroker
                | C::BrokerDestroy
                | C::Resolve
                | C::OperationTimedOut
                | C::TimedOutQueue
                | C::NodeUpdate
                | C::UnknownPartition
                | C::UnknownTopicOrPartition
                | C::LeaderNotAvailable
                | C::NotLeaderForPartition
                | C::RequestTimedOut
                | C::BrokerNotAvailable
                | C::ReplicaNotAvailable
                | C::NetworkException
                | C::NotEnoughReplicas
                | C::NotController
                | C::KafkaStorageError
                | C::FencedLeaderEpoch
                | C::UnknownLeaderEpoch
                | C::OffsetNotAvailable
                | C::PreferredLeaderNotAvailable
        )
    )
}

/// Makes `request` (given how long it may wait) again while it fails with a transient
/// error and `deadline` has not passed, [`AGAIN`] apart; counts each such failure in
/// `ridden` and tells it to `note`. Returns the first answer that is not a transient
/// error, or the last error at the deadline.
pub(super) fn retried<T>(
    deadline: Instant,
    ridden: &mut u64,
    note: &mut dyn FnMut(&KafkaError),
    mut request: impl FnMut(Duration) -> Result<T, KafkaError>,
) -> Result<T, KafkaError> {
    loop {
        let wait = deadline.saturating_duration_since(Instant::now()).clamp(Duration::from_millis(100), REQUEST);
        match request(wait) {
            Err(e) if is_transient(&e) && Instant::now() + AGAIN < deadline => {
                *ridden += 1;
                note(&e);
                std::thread::sleep(AGAIN);
            }
            answer => return answer,
        }
    }
}

/// The warning of a read's first transient error: what it is, and how long the read
/// goes on trying.
pub(super) fn first_transient(topic: &str, e: &KafkaError, left: Duration) -> String {
    format!("{topic}: {e}: a transient Kafka error (a broker down, a leader moving): retrying for up to {left:.0?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_and_leadership_errors_are_transient_and_others_fatal() {
        for code in [C::BrokerTransportFailure, C::AllBrokersDown, C::DestroyBroker, C::NotLeaderForPartition] {
            assert!(is_transient(&KafkaError::MessageConsumption(code)), "{code:?}");
            assert!(is_transient(&KafkaError::MetadataFetch(code)), "{code:?}");
        }
        for code in [C::TopicAuthorizationFailed, C::SaslAuthenticationFailed, C::InvalidConfig] {
            assert!(!is_transient(&KafkaError::MessageConsumption(code)), "{code:?}");
        }
        assert!(!is_transient(&KafkaError::MessageConsumptionFatal(C::BrokerTransportFailure)));
    }

    #[test]
    fn retries_stop_at_the_first_answer_or_a_fatal_error_or_the_deadline() {
        let deadline = Instant::now() + Duration::from_secs(30);
        let (mut ridden, mut calls) = (0, 0);
        let answer = retried(deadline, &mut ridden, &mut |_| {}, |_| {
            calls += 1;
            if calls < 3 {
                Err(KafkaError::MetadataFetch(C::DestroyBroker))
            } else {
                Ok(calls)
            }
        });
        assert_eq!((answer.ok(), ridden), (Some(3), 2));

        let mut ridden = 0;
        let fatal = retried(deadline, &mut ridden, &mut |_| {}, |_| {
            Err::<(), _>(KafkaError::MetadataFetch(C::TopicAuthorizationFailed))
        });
        assert_eq!((fatal.is_err(), ridden), (true, 0));

        let (start, mut ridden) = (Instant::now(), 0);
        let short = start + Duration::from_millis(600);
        let gave_up =
            retried(short, &mut ridden, &mut |_| {}, |_| Err::<(), _>(KafkaError::MetadataFetch(C::AllBrokersDown)));
        assert!(gave_up.is_err() && ridden >= 1, "{ridden}");
        assert!(start.elapsed() < Duration::from_secs(5), "gave up at the deadline");
    }
}
