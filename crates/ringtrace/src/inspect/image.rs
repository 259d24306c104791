//! Byte images of ring files for tests (of this crate, its fuzz target and the
//! `ringtrace` command): a header, positions and records laid out as a ring would have
//! them, which tests then break on purpose. Not a way to make rings: use the ring API.
//!
//! For tests only, and not part of the public API (hidden from the docs): it is public
//! so that doctests and integration tests can use it, and it may change without notice.

use super::{RingKind, RingMode};
use crate::format::control::{CONTROL_SIZE, LAYOUT_VERSION, MAGIC};
use crate::format::offsets as f;
use crate::format::record::{footprint, pack, BUSY_BIT, DISCARD_BIT, HDR_SIZE};

pub use crate::format::offsets::{
    CAPACITY_AT, CONSUMER_POS_AT, CONSUMER_READ_AT, DATA_OFFSET_AT, FLAGS_AT, KIND_AT, MAGIC_AT, MODE_AT, OVER_POS_AT,
    PRODUCER_POS_AT, RETIRED_AT, VERSION_AT, ZEROED_AT,
};
/// Offset of the data area in the images built here.
pub const DATA_AT: usize = CONTROL_SIZE;
/// Offsets of every `u64` position field, for tests that set them to extreme values.
pub const POSITION_FIELDS: [usize; 5] = [PRODUCER_POS_AT, CONSUMER_POS_AT, CONSUMER_READ_AT, OVER_POS_AT, ZEROED_AT];

/// Writes a native-endian `u64` at `at` (nothing if out of range).
pub fn set_u64(image: &mut [u8], at: usize, value: u64) {
    if let Some(b) = image.get_mut(at..at.saturating_add(8)) {
        b.copy_from_slice(&value.to_ne_bytes());
    }
}

/// Writes a native-endian `u32` at `at` (nothing if out of range).
pub fn set_u32(image: &mut [u8], at: usize, value: u32) {
    if let Some(b) = image.get_mut(at..at.saturating_add(4)) {
        b.copy_from_slice(&value.to_ne_bytes());
    }
}

#[derive(Clone, Debug)]
enum Entry {
    Committed(Vec<u8>),
    Discarded(Vec<u8>),
    Busy(u32),
    Zero(u32),
}

/// Builds the bytes of a ring file: control block, positions, counters, records.
///
/// ```
/// use ringtrace::inspect::{image::ImageBuilder, RingFile, RingMode};
///
/// let image = ImageBuilder::new(4096, RingMode::Discard).pid(7).record(b"x").build();
/// assert_eq!(image.len(), 8192 + 4096);
/// let records = RingFile::from_source(image)?.records()?;
/// assert_eq!(records.iter().next().unwrap().pid, 7);
/// # Ok::<(), ringtrace::inspect::FormatError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ImageBuilder {
    capacity: u64,
    mode: RingMode,
    kind: RingKind,
    start: u64,
    pid: u32,
    entries: Vec<(u32, Entry)>,
}

impl ImageBuilder {
    /// An empty ring of `capacity` bytes (a power of two of at least 4096 for a valid
    /// image) in `mode`, multi-producer, positions at 0, records by pid 4242.
    pub fn new(capacity: u64, mode: RingMode) -> Self {
        ImageBuilder { capacity, mode, kind: RingKind::Mpsc, start: 0, pid: 4242, entries: Vec::new() }
    }

    /// The producer kind.
    pub fn kind(mut self, kind: RingKind) -> Self {
        self.kind = kind;
        self
    }

    /// Position of the first record (a multiple of 8): the consumer's position, or the
    /// overwrite position. Records wrap around the end of the data area from there.
    pub fn start(mut self, pos: u64) -> Self {
        self.start = pos;
        self
    }

    /// The pid written in the following records' headers (and the creator's pid).
    pub fn pid(mut self, pid: u32) -> Self {
        self.pid = pid;
        self
    }

    /// A committed record.
    pub fn record(mut self, payload: &[u8]) -> Self {
        self.entries.push((self.pid, Entry::Committed(payload.to_vec())));
        self
    }

    /// A discarded record.
    pub fn discarded(mut self, payload: &[u8]) -> Self {
        self.entries.push((self.pid, Entry::Discarded(payload.to_vec())));
        self
    }

    /// A record of `len` bytes still being written (BUSY header, zero payload).
    pub fn busy(mut self, len: u32) -> Self {
        self.entries.push((self.pid, Entry::Busy(len)));
        self
    }

    /// Space claimed for a record of `len` bytes whose header is not written (zero).
    pub fn zero_claim(mut self, len: u32) -> Self {
        self.entries.push((self.pid, Entry::Zero(len)));
        self
    }

    /// The file's bytes: `8192 + capacity` (records past a capacity overwrite the
    /// oldest bytes: keep them within it for a valid image).
    pub fn build(&self) -> Vec<u8> {
        let cap = self.capacity;
        let data_len = usize::try_from(cap).unwrap_or(0);
        let mut img = vec![0u8; CONTROL_SIZE + data_len];
        let put = |img: &mut Vec<u8>, pos: u64, bytes: &[u8]| {
            for (i, &b) in bytes.iter().enumerate() {
                let at = (pos + i as u64) & cap.wrapping_sub(1);
                if let Some(slot) = img.get_mut(CONTROL_SIZE + at as usize) {
                    *slot = b;
                }
            }
        };
        let (mut pos, mut committed, mut discarded) = (self.start, 0u64, 0u64);
        for (pid, e) in &self.entries {
            let (word, payload): (u32, &[u8]) = match e {
                Entry::Committed(p) => {
                    committed += 1;
                    (p.len() as u32, p)
                }
                Entry::Discarded(p) => {
                    discarded += 1;
                    (p.len() as u32 | DISCARD_BIT, p)
                }
                Entry::Busy(len) => (len | BUSY_BIT, &[]),
                Entry::Zero(len) => {
                    pos += footprint(*len);
                    continue;
                }
            };
            put(&mut img, pos, &pack(word, *pid).to_ne_bytes());
            put(&mut img, pos + HDR_SIZE, payload);
            pos += footprint(word & crate::format::record::LEN_MASK);
        }
        let (m, s) = (&mut img, self.start);
        set_u64(m, f::MAGIC_AT, MAGIC);
        set_u32(m, f::VERSION_AT, LAYOUT_VERSION);
        set_u32(m, f::KIND_AT, self.kind.code());
        set_u32(m, f::MODE_AT, self.mode.code());
        set_u32(m, f::CREATOR_PID_AT, self.pid);
        set_u64(m, f::CAPACITY_AT, cap);
        set_u64(m, f::DATA_OFFSET_AT, CONTROL_SIZE as u64);
        set_u32(m, f::FLAGS_AT, crate::format::control::FLAG_FUTEX);
        set_u64(m, f::CREATED_NS_AT, 1_700_000_000_000_000_000);
        set_u64(m, f::PRODUCER_POS_AT, pos);
        set_u64(m, f::CONSUMER_POS_AT, s);
        set_u64(m, f::CONSUMER_READ_AT, s);
        // The zeroed frontier as its producers leave it: a capacity past the oldest
        // byte kept (the consumer position, or overwrite mode's `O`).
        set_u64(m, f::ZEROED_AT, s + cap);
        if self.mode == RingMode::Overwrite {
            set_u64(m, f::OVER_POS_AT, s);
            set_u64(m, f::RETIRED_AT, s / 64);
        }
        set_u64(m, f::SLOTS_AT + f::OWNER_AT, self.pid.into());
        set_u64(m, f::SLOTS_AT + f::COMMITTED_AT, committed);
        set_u64(m, f::SLOTS_AT + f::DISCARDED_AT, discarded);
        img
    }
}
