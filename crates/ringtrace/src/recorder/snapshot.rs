//! [`Snapshot`]: a checked copy of an overwrite ring's records, walked both ways, read as
//! often as wanted, and written to and read back from a file.
//!
//! The file format is [`crate::format::snapshot`]'s.

use std::fmt;
use std::io::{self, Read, Write};

use crate::callback::{Held, Iter};
use crate::error::{ConsumeError, FormatError};
use crate::format::snapshot::{format_err, read_some, FileHeader, HEADER_LEN};
use crate::protocol::capture::{parse, Capture, Parse, Walk, CHUNK};
use crate::shared::Shared;
use crate::wait::Patience;

/// How long a snapshot waits for a producer to write the header of space it claimed,
/// when newer records lie past it ([`Snapshot::take_into`]): a preempted producer runs
/// again within a few scheduler periods on a loaded machine; one stopped for longer (by
/// a debugger, or a dead process whose claim the next retire repairs) costs each
/// snapshot this long.
const CLAIM_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// The records an overwrite ring held at one moment, oldest to newest, copied out and
/// checked: none is torn or half-overwritten. Made by
/// [`RingBuf::snapshot`](crate::RingBuf::snapshot), by [`Paused::snapshot`](crate::recorder::Paused::snapshot), or read
/// from a file with [`Snapshot::read_from`].
///
/// A snapshot holds the ring's bytes and an index of 16 bytes per record: for 64-byte
/// records, about 1.25 times the ring's capacity. A new snapshot of a large ring writes
/// all of that into fresh memory, which the kernel faults in page by page: measured,
/// [`RingBuf::snapshot`](crate::RingBuf::snapshot) costs 3.8 times what
/// [`RingBuf::snapshot_into`](crate::RingBuf::snapshot_into) costs into a snapshot that
/// held a ring before. Keep one snapshot and refill it with `snapshot_into`.
///
/// ```
/// use ringtrace::{FlightRecorder, Snapshot, Wakeup};
///
/// let ring = FlightRecorder::new(4096)?;
/// let mut p = ring.producer()?;
/// for i in 0..10u8 {
///     p.output(&[i; 3], Wakeup::Default)?;
/// }
/// let snap = ring.snapshot()?;
/// assert_eq!(snap.len(), 10);
/// assert_eq!(snap.iter().next_back(), Some(&[9u8; 3][..]));   // newest
/// assert_eq!(snap.iter().rev().nth(9), Some(&[0u8; 3][..]));   // oldest
///
/// let mut file = Vec::new();
/// snap.write_to(&mut file)?;
/// let back = Snapshot::read_from(&file[..])?;
/// assert!(back.iter().eq(snap.iter()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct Snapshot {
    pub(crate) cap: Capture,
    pub(crate) capacity: u64,
    pub(crate) retired_before: u64,
    pub(crate) missed: u64,
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("oldest_position", &self.oldest_position())
            .field("end_position", &self.end_position())
            .field("records", &self.len())
            .field("missed", &self.missed)
            .finish()
    }
}

impl Snapshot {
    /// The records the ring `shared` holds now, copied and checked
    /// ([`RingBuf::snapshot`](crate::RingBuf::snapshot)).
    pub(crate) fn take(shared: &Shared) -> Result<Snapshot, ConsumeError> {
        let mut snap = Snapshot::new();
        Snapshot::take_into(shared, &mut snap)?;
        Ok(snap)
    }

    /// [`take`](Self::take) into `snap`, reusing its memory.
    ///
    /// A copy whose walk meets a header still zero with records written after it (a
    /// producer between claiming its space and marking it BUSY, a window of a few
    /// instructions unless that producer is preempted there) is taken again until the
    /// header is written, for at most [`CLAIM_WAIT`]: otherwise the newer records, and
    /// when the claim is the oldest record all of them, would be left out of a snapshot
    /// that says nothing of them. Past that wait, a copy that still holds records is
    /// returned; one that holds none is [`ConsumeError::Busy`].
    pub(crate) fn take_into(shared: &Shared, snap: &mut Snapshot) -> Result<(), ConsumeError> {
        let core = &shared.core;
        let mut patience = Patience::new(CLAIM_WAIT);
        loop {
            if core.capture_newest(CHUNK, &mut snap.cap).is_none() {
                // Producers overwrote every copy, or a retirer died inside its seqlock
                // write (then readers stay `Busy` until someone ends it): end it, if so,
                // and try once more.
                let recovered = core.recover_lock(shared.writable);
                if !recovered || core.capture_newest(CHUNK, &mut snap.cap).is_none() {
                    return Err(ConsumeError::Busy);
                }
            }
            if let Parse::Corrupt { pos, header } = snap.cap.stop {
                return Err(ConsumeError::Corrupt { pos, header });
            }
            if !snap.cap.hides_records() {
                break;
            }
            if !patience.wait() {
                if snap.cap.found.is_empty() {
                    return Err(ConsumeError::Busy);
                }
                break;
            }
        }
        snap.capacity = core.capacity();
        snap.retired_before = snap.cap.retired_at_first.unwrap_or(0);
        Snapshot::settle(shared, snap);
        Ok(())
    }

    /// Sets `snap.overwritten` from the previous snapshot's end and records this one's:
    /// committed records before this snapshot's oldest, less those before the previous
    /// one's newest end (which that snapshot held, or counted).
    pub(crate) fn settle(shared: &Shared, snap: &mut Snapshot) {
        let held = snap.retired_before.saturating_add(snap.len() as u64);
        let mut last = shared.last_snapshot.lock().unwrap_or_else(|e| e.into_inner());
        snap.missed = snap.retired_before.saturating_sub(*last);
        *last = (*last).max(held);
    }

    /// An empty snapshot, to fill with
    /// [`RingBuf::snapshot_into`](crate::RingBuf::snapshot_into) (which reuses its memory).
    pub fn new() -> Self {
        Self::default()
    }

    /// A snapshot of records copied and parsed by another reader (a kernel ring's),
    /// which knows no counts of overwritten records.
    pub(crate) fn from_capture(cap: Capture, capacity: u64) -> Snapshot {
        Snapshot { cap, capacity, retired_before: 0, missed: 0 }
    }

    /// Committed records held.
    pub fn len(&self) -> usize {
        self.cap.found.len()
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.cap.found.is_empty()
    }

    /// The records' payloads, oldest first; `.rev()` walks newest to oldest.
    pub fn iter(&self) -> Iter<'_> {
        Iter::new(self)
    }

    /// The records with their positions and their producers' process ids (the header's
    /// second word), oldest first.
    pub fn records(&self) -> impl DoubleEndedIterator<Item = crate::inspect::Record<'_>> + ExactSizeIterator + '_ {
        self.cap.found.iter().map(move |&f| {
            let at = (f.pos - self.cap.start) as usize;
            let header = u64::from_ne_bytes(self.cap.bytes[at..at + 8].try_into().expect("a whole header"));
            crate::inspect::Record { pos: f.pos, pid: crate::format::record::aux(header), payload: self.cap.payload(f) }
        })
    }

    /// The records with their positions in the ring (bytes since it was created),
    /// oldest first.
    pub fn entries(&self) -> impl DoubleEndedIterator<Item = (u64, &[u8])> + ExactSizeIterator + '_ {
        self.cap.found.iter().map(move |&f| (f.pos, self.cap.payload(f)))
    }

    /// Position of the oldest record (the ring's `overwrite_pos` when it was taken).
    pub fn oldest_position(&self) -> u64 {
        self.cap.first
    }

    /// Position just past the newest record.
    pub fn end_position(&self) -> u64 {
        self.cap.end
    }

    /// Committed records the ring had overwritten before the oldest one held here: the
    /// ring's [`Stats::overwritten`](crate::Stats::overwritten) when the snapshot was
    /// taken. `overwritten_before() + len()` is every record committed before the
    /// snapshot's end (records still being written, [`unfinished`](Self::unfinished),
    /// aside).
    pub fn overwritten_before(&self) -> u64 {
        self.retired_before
    }

    /// Committed records that no snapshot of this ring held: overwritten after the
    /// previous snapshot's newest record and before this one's oldest (for the first
    /// snapshot: since the ring was created). Over a series of snapshots, the records
    /// they held (each counted once) plus their `missed()` add up to
    /// `overwritten_before() + len()` of the last. Exact when the previous snapshot
    /// had no [`unfinished`](Self::unfinished) records; otherwise a lower bound, short
    /// by at most that many (a record still being written then, and committed and
    /// overwritten since, cannot be told from one that was discarded).
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// Records that were still being written when the snapshot was taken (skipped).
    ///
    /// A record whose header was not yet written at all (its producer between claiming
    /// the space and marking it BUSY, a window of a few instructions unless it is
    /// preempted there) has no known length, so no record after it can be found: the
    /// snapshot is taken again until that header is written (for at most 100 ms; then
    /// the records before it are returned, or, if there are none,
    /// [`ConsumeError::Busy`]). Only such claims at the newest end, with nothing
    /// written after them, are left out without a wait, and not counted here.
    pub fn unfinished(&self) -> u64 {
        self.cap.unfinished
    }

    /// The ring's capacity.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The ring bytes from the oldest record to the end of the newest.
    fn ring_bytes(&self) -> &[u8] {
        let from = (self.cap.first - self.cap.start) as usize;
        let to = (self.cap.end - self.cap.start) as usize;
        &self.cap.bytes[from..to]
    }

    /// Bytes [`write_to`](Self::write_to) writes.
    pub fn file_len(&self) -> u64 {
        HEADER_LEN as u64 + (self.cap.end - self.cap.first)
    }

    /// Writes the snapshot in the file format (module docs); returns the bytes written.
    /// Go's `FlightRecorder.WriteTo`, in ring format.
    pub fn write_to<W: Write>(&self, mut w: W) -> io::Result<u64> {
        let data = self.ring_bytes();
        let header = FileHeader {
            capacity: self.capacity,
            first: self.cap.first,
            end: self.cap.end,
            count: self.len() as u64,
            retired_before: self.retired_before,
            missed: self.missed,
            unfinished: self.cap.unfinished,
            data_len: data.len() as u64,
        };
        w.write_all(&header.encode(crc32c::crc32c(data)))?;
        w.write_all(data)?;
        Ok(self.file_len())
    }

    /// Reads a snapshot written by [`write_to`](Self::write_to), checking it whole
    /// (checksums, fields, records: see the module docs), to the end of `r`: bytes
    /// after the records are an error too.
    pub fn read_from<R: Read>(mut r: R) -> Result<Snapshot, FormatError> {
        let (h, data_crc) = FileHeader::read(&mut r)?;
        let FileHeader { capacity, first, end, count, retired_before, missed, unfinished, data_len } = h;
        // Read through `take`, so a header that claims gigabytes costs memory only for
        // the bytes the file really holds.
        let mut bytes = Vec::new();
        (&mut r).take(data_len).read_to_end(&mut bytes).map_err(FormatError::io("snapshot file"))?;
        if bytes.len() as u64 != data_len {
            return Err(format_err(format!("truncated in the records ({} of {data_len} bytes)", bytes.len())));
        }
        let (stored, computed) = (data_crc, crc32c::crc32c(&bytes));
        if stored != computed {
            let (start, end) = (HEADER_LEN as u64, HEADER_LEN as u64 + data_len);
            return Err(FormatError::Checksum { part: "ring bytes", start, end, stored, computed });
        }
        let mut extra = [0u8; 1];
        if read_some(&mut r, &mut extra)? != 0 {
            return Err(format_err(format!(
                "bytes follow the records at offset {} (the header says the file ends there)",
                HEADER_LEN as u64 + data_len
            )));
        }
        let mut cap = Capture { bytes, start: first, first, end, ..Capture::default() };
        parse(Walk::Snapshot, capacity, end, false, &mut cap);
        match cap.stop {
            Parse::End if cap.end == end => {}
            Parse::Corrupt { pos, header } => {
                return Err(format_err(format!("record header {header:#018x} at position {pos} runs past the data")));
            }
            _ => return Err(format_err(format!("records end at position {}, not {end}", cap.end))),
        }
        if cap.found.len() as u64 != count || cap.unfinished != unfinished {
            return Err(format_err(format!(
                "the header says {count} records and {unfinished} unfinished; the data holds {} and {}",
                cap.found.len(),
                cap.unfinished
            )));
        }
        Ok(Snapshot { cap, capacity, retired_before, missed })
    }
}

impl Held for Snapshot {
    fn count(&self) -> usize {
        self.cap.found.len()
    }
    fn record(&self, i: usize) -> &[u8] {
        self.cap.payload(self.cap.found[i])
    }
}
