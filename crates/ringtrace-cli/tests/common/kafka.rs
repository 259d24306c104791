//! The Kafka cluster of the test command (`scripts/kafka.sh`, named by
//! `RINGTRACE_KAFKA_BROKERS`) for the tests of `kafka://` sources and `ship`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

#[allow(unused_imports)] // each test binary uses its own part
pub use ringtrace_fixtures::kafka_brokers as brokers;

/// Wall-clock ns since the Unix epoch.
pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// A topic of its own, `partitions` wide, replicated 3 times.
pub fn create_topic(brokers: &str, what: &str, partitions: i32) -> String {
    let name = format!("ringtrace-cli-{what}-{}-{}", std::process::id(), now_ns());
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", brokers).create().expect("admin client");
    let topic = NewTopic::new(&name, partitions, TopicReplication::Fixed(3));
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for r in futures_executor::block_on(admin.create_topics([&topic], &opts)).expect("create_topics") {
        r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
    }
    name
}
