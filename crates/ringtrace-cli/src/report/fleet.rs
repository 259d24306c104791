//! `stat` of a fleet's records in Kafka (`kafka://BROKERS/TOPIC`): what they hold, as
//! text or one JSON object.

use ringtrace_tracing::decode::text::rfc3339;
use serde::Serialize;

use crate::escape::escape_text;
use crate::failure::Failure;
use std::collections::BTreeMap;

use crate::fleet::Topic;
use crate::output::{print, print_json, ReportFormat};

/// What a topic holds in a window, read back: the reader's counts, and each source's
/// records in the window and their first and last sequence numbers.
pub struct TopicStat<'a> {
    pub topic: &'a Topic,
    pub stats: ringtrace_ship::fleet::FleetStats,
    pub sources: BTreeMap<(String, String), SourceStat>,
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
}

/// One source's records in the window.
#[derive(Debug, Clone, Copy)]
pub struct SourceStat {
    pub records: u64,
    pub first_seq: u64,
    pub last_seq: u64,
}

/// One source in `stat --format json`.
#[derive(Serialize)]
struct JsonSource<'a> {
    host: &'a str,
    source: &'a str,
    records: u64,
    first_seq: u64,
    last_seq: u64,
}

/// `stat --format json` of a topic.
#[derive(Serialize)]
struct JsonStat<'a> {
    brokers: &'a str,
    topic: &'a str,
    hosts: usize,
    batches: u64,
    records: u64,
    duplicates: u64,
    missing: u64,
    damaged: u64,
    too_large: u64,
    expired: u64,
    vanished: u64,
    unread: u64,
    #[serde(serialize_with = "decimal_opt")]
    first_ns: Option<u64>,
    #[serde(serialize_with = "decimal_opt")]
    last_ns: Option<u64>,
    sources: Vec<JsonSource<'a>>,
}

fn decimal_opt<S: serde::Serializer>(x: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(x) => s.collect_str(x),
        None => s.serialize_none(),
    }
}

pub fn stat(t: &TopicStat<'_>, format: ReportFormat) -> Result<(), Failure> {
    let topic = t.topic;
    let sources: Vec<JsonSource<'_>> = (t.sources.iter())
        .map(|((host, source), s)| JsonSource {
            host,
            source,
            records: s.records,
            first_seq: s.first_seq,
            last_seq: s.last_seq,
        })
        .collect();
    let (first, last) = (t.first_ns, t.last_ns);
    let st = t.stats;
    let mut hosts: Vec<&str> = sources.iter().map(|s| s.host).collect();
    hosts.dedup();
    let j = JsonStat {
        brokers: &topic.brokers,
        topic: &topic.topic,
        hosts: hosts.len(),
        batches: st.batches,
        records: sources.iter().map(|s| s.records).sum(),
        duplicates: st.duplicates,
        missing: st.missing,
        damaged: st.damaged,
        too_large: st.too_large,
        expired: st.expired,
        vanished: st.vanished,
        unread: st.unread,
        first_ns: first,
        last_ns: last,
        sources,
    };
    if format == ReportFormat::Json {
        return print_json(&j);
    }
    let time = |t: Option<u64>| t.map_or_else(|| "-".to_string(), rfc3339);
    let mut s = format!(
        "kafka://{}/{}: a fleet's records in Kafka\n  hosts            {}\n  sources          {}\n  records          {}\n  \
         batches          {}\n  duplicates       {}\n  missing          {}\n  damaged          {}\n  too large        {}\n  \
         expired          {}\n  vanished         {}\n  unread           {}\n  first            {}\n  last             {}\n",
        j.brokers,
        j.topic,
        j.hosts,
        j.sources.len(),
        j.records,
        j.batches,
        j.duplicates,
        j.missing,
        j.damaged,
        j.too_large,
        j.expired,
        j.vanished,
        j.unread,
        time(j.first_ns),
        time(j.last_ns)
    );
    for src in &j.sources {
        let mut name = String::new();
        escape_text(&mut name, src.source.as_bytes());
        s.push_str(&format!(
            "  {} {name}: {} records, sequence {} to {}\n",
            src.host, src.records, src.first_seq, src.last_seq
        ));
    }
    print(&s)
}
