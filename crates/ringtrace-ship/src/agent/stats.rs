//! The agent's counters.

/// The agent's counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ShipStats {
    /// Records delivered whole, acknowledged by Kafka: what fleet readers count as
    /// their `records` (the too-large markers are counted in `too_large` only).
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
    /// Records flight recorders' producers overwrote before the agent read them (as
    /// stored in the state file: of the sources' last rounds acknowledged), summed over
    /// the sources. Never shipped: the gaps in their sequences.
    pub overwritten: u64,
    /// Records too large for a message ([`Config::max_message`](super::Config::max_message)): shipped as markers
    /// that keep their place and length, their bytes dropped.
    pub too_large: u64,
    /// Records kept in the spool ([`Config::spool`](super::Config::spool)) because Kafka did not take their
    /// round in time.
    pub spooled: u64,
    /// Records sent from the spool and acknowledged (markers included; the records
    /// among them counted in `shipped` too).
    pub unspooled: u64,
    /// Records the spool lost: their file damaged or missing (said on stderr).
    pub spool_lost: u64,
}

/// The counters on one line, `name=value` each: what `ship` prints when it ends.
impl std::fmt::Display for ShipStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "shipped={} batches={} failed_rounds={} recovered={} ring_lost={} overwritten={} too_large={} \
             spooled={} unspooled={} spool_lost={}",
            self.shipped,
            self.batches,
            self.failed_rounds,
            self.recovered,
            self.ring_lost,
            self.overwritten,
            self.too_large,
            self.spooled,
            self.unspooled,
            self.spool_lost
        )
    }
}
