//! Channel files: a header page, then one ring image per producer slot.
//!
//! ```text
//!   0      header page: magic "RTCHAN\0\x01", version, mode, clock, slots, capacity,
//!          image length, first ring offset, TSC calibration, creator pid, created_ns
//!   128    version 2: the bell line (the reader's wait flag, the futex word)
//!   page   ring image of slot 0 (a whole ring file's bytes: control block, data area)
//!   page + image_len       slot 1
//!   ...
//! ```
//!
//! Every field is native-endian, like a ring file's header. The header (its first 88
//! bytes) is written once, before the file gets its name (or, where
//! `O_TMPFILE` is missing, last: its magic is 0 until then), and never changes; each
//! slot's ring says itself which process produces into it.
//!
//! # The bell line (version 2)
//!
//! The one mutable part of the header page: a line of its own at [`BELL_LINE`], past
//! the header, holding the live reader's wait flag ([`BELL_FLAG`], the protocol of
//! `wait::flag`) and the doorbell's futex word ([`BELL_FUTEX`]). Writers in any process
//! that commit while the flag says the reader sleeps clear it and wake the futex
//! (futex(2) `FUTEX_WAKE`; not `FUTEX_PRIVATE_FLAG`, since the word is shared between
//! processes), so an idle reader sleeps instead of looking every millisecond. It is
//! zero when the file is made (the page past the header is), which is the idle state.
//!
//! Compatibility: version 1 files have no bell line (their writers never ring it), so
//! the layout version went to 2 with it. Readers of this version read both: a version
//! 1 file's reader looks every millisecond, as before; writers ring only a version 2
//! file's bell. Code that knows only version 1 refuses a version 2 file (its parser
//! requires version 1), so a writer that would never ring cannot attach to a file whose
//! reader sleeps on the bell, and its tools say which version they found.
//!
//! Every byte format of the project, with this one, is laid out in one page:
//! `docs/formats.md` in the repository.

/// The first 8 bytes of a channel file.
pub const CHANNEL_MAGIC: u64 = u64::from_le_bytes(*b"RTCHAN\0\x01");
/// The channel header's layout version that files are made with: 2, with the bell
/// line (module docs).
pub const CHANNEL_VERSION: u32 = 2;
/// The first layout version, without the bell line: still read (its reader looks every
/// millisecond).
pub const CHANNEL_VERSION_1: u32 = 1;
/// Most producer slots a channel file may have.
pub const MAX_SLOTS: u32 = 4096;

// Byte offsets of the header's fields.
pub(crate) const MAGIC: usize = 0;
pub(crate) const VERSION: usize = 8;
pub(crate) const MODE: usize = 12;
pub(crate) const CLOCK: usize = 16;
pub(crate) const SLOTS: usize = 20;
pub(crate) const CAPACITY: usize = 24;
pub(crate) const IMAGE_LEN: usize = 32;
pub(crate) const FIRST: usize = 40;
pub(crate) const CALIBRATION: usize = 48;
pub(crate) const CREATOR_PID: usize = 72;
pub(crate) const CREATED_NS: usize = 80;
/// Bytes of the header that mean something (the rest of the page is zero but for the
/// bell line).
pub(crate) const HEADER_LEN: usize = 88;

/// Version 2: offset of the bell line in the header page, a 128-byte line of its own
/// (two 64-byte cache lines: x86's spatial prefetcher pulls pairs), away from the
/// header that readers and writers only read.
pub const BELL_LINE: usize = 128;
/// Version 2: the live reader's wait flag (`u32`): 1 while it sleeps or is about to,
/// else 0. Other values are another process's writes, read as "not asleep".
pub const BELL_FLAG: usize = BELL_LINE;
/// Version 2: the doorbell's futex word (`u32`): writers add one and wake it; the
/// reader sleeps in `FUTEX_WAIT` on the value it read before it set its flag.
pub const BELL_FUTEX: usize = BELL_LINE + 4;

const _: () = assert!(BELL_LINE >= HEADER_LEN && BELL_LINE % 64 == 0 && BELL_FUTEX + 4 <= BELL_LINE + 128);

/// The clock codes of [`ChannelHeader::clock`](crate::inspect::channel::ChannelHeader::clock). Records of TSC channels carry raw TSC
/// ticks: convert them with [`ChannelHeader::to_ns`](crate::inspect::channel::ChannelHeader::to_ns).
pub mod clock_code {
    /// No timestamps.
    pub const NONE: u32 = 0;
    /// `CLOCK_MONOTONIC`.
    pub const MONOTONIC: u32 = 1;
    /// The invariant TSC, converted with the header's calibration.
    pub const TSC: u32 = 2;
    /// The TSC where invariant, else `CLOCK_MONOTONIC` (calibration all zero).
    pub const BEST: u32 = 3;
}
