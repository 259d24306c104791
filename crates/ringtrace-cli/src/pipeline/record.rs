//! What flows through the pipeline: a [`Record`] with what its source knows of it, and
//! a [`Timeline`], a source read whole for the trace exporters.

use ringtrace_tracing::decode::{Entry, EntryKind, Trace};

/// Which of the records a source holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// All of them, oldest first.
    All,
    /// All of them, newest first.
    Reversed,
    /// The newest N, oldest first.
    Last(usize),
}

/// One record, as its source has it.
#[derive(Debug)]
pub enum Record<'a> {
    /// A raw record: a ring's, a channel slot's, a snapshot's, a BPF map's.
    Raw(Raw<'a>),
    /// A `ringtrace-tracing` trace's entry, decoded: an event, or a count of events
    /// lost there (a marker: see [`Record::is_marker`]).
    Traced { trace: &'a Trace, entry: Entry<'a> },
    /// A fleet's record read back from Kafka.
    #[cfg(feature = "kafka")]
    Fleet(ringtrace_ship::fleet::Entry<'a>),
}

impl Record<'_> {
    /// Whether it stands for no record of its own (a trace's "events lost here"): a
    /// whole forward read prints it, the newest N and newest first leave it out.
    pub fn is_marker(&self) -> bool {
        matches!(self, Record::Traced { entry, .. } if !matches!(entry.kind, EntryKind::Event(_)))
    }
}

/// A raw record: its payload, and what its source knows of where it comes from.
#[derive(Debug, Clone, Copy)]
pub struct Raw<'a> {
    pub payload: &'a [u8],
    /// Its byte position in the ring and its producer's pid (0 where not known); `None`
    /// for a record consumed from a ring, printed as its payload alone.
    pub at: Option<(u64, u32)>,
    /// A channel's record: its slot and timestamp.
    pub origin: Option<Origin>,
}

impl<'a> Raw<'a> {
    /// A ring's record.
    pub fn of(r: &ringtrace::inspect::Record<'a>) -> Self {
        Raw { payload: r.payload, at: Some((r.pos, r.pid)), origin: None }
    }
}

/// Where a channel's record comes from: its slot, and its timestamp if the channel
/// stamps records (the payload is then the payload past the stamp).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    pub slot: u32,
    pub ts: Option<u64>,
}

/// What a source's records are, for an output to refuse what it cannot write before
/// it writes anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// [`Record::Raw`].
    Raw,
    /// [`Record::Traced`].
    Events,
    /// [`Record::Fleet`].
    #[cfg(feature = "kafka")]
    Fleet,
}

/// A source read whole, for the trace exporters (perfetto, chrome, ctf).
#[derive(Debug)]
pub enum Timeline {
    /// A `ringtrace-tracing` trace (a channel file reads as one of raw records).
    Trace(Box<Trace>),
    /// A fleet's records in a time window.
    #[cfg(feature = "kafka")]
    Fleet(crate::fleet::Read),
}
