//! An agent's state as one JSON object: what `ringtrace-ship stat --format json` and
//! `ringtrace stat --format json` (the command with its `kafka` feature) print.

use serde_json::{json, Value};

use super::State;

impl State {
    /// The state as JSON: `host`; `updated_ns` (when it was last stored, wall-clock ns
    /// as a decimal string, 0: never); `failed_rounds`; `spool_rounds` (rounds waiting
    /// in the spool directory); and `sources`, each with `source`, its counters
    /// (`shipped`, `too_large`, `ring_lost`, `overwritten`, `spooled`, `spool_lost`: see
    /// [`SourceCounts`](super::SourceCounts)), `next_seq` and `position`.
    pub fn to_json(&self) -> Value {
        let sources: Vec<Value> = (self.sources.iter())
            .map(|s| {
                let c = &s.counts;
                json!({
                    "source": s.source,
                    "shipped": c.shipped,
                    "too_large": c.too_large,
                    "ring_lost": c.ring_lost,
                    "overwritten": c.overwritten,
                    "spooled": c.spooled,
                    "spool_lost": c.spool_lost,
                    "next_seq": s.next_seq,
                    "position": s.position,
                })
            })
            .collect();
        json!({
            "host": self.host,
            "updated_ns": self.updated_ns.to_string(),
            "failed_rounds": self.failed_rounds,
            "spool_rounds": self.spool_tail.saturating_sub(self.spool_head),
            "sources": sources,
        })
    }
}
