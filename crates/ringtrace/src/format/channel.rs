//! Channel files: a header page, then one ring image per producer slot.
//!
//! ```text
//!   0      header page: magic "RTCHAN\0\x01", version, mode, clock, slots, capacity,
//!          image length, first ring offset, TSC calibration, creator pid, created_ns
//!   page   ring image of slot 0 (a whole ring file's bytes: control block, data area)
//!   page + image_len       slot 1
//!   ...
//! ```
//!
//! Every field is native-endian, like a ring file's header. The header is written once,
//! before the file gets its name (or, where `O_TMPFILE` is missing, last: its magic is
//! 0 until then), and never changes; each slot's ring says itself which process
//! produces into it.

/// The first 8 bytes of a channel file.
pub const CHANNEL_MAGIC: u64 = u64::from_le_bytes(*b"RTCHAN\0\x01");
/// The channel header's layout version.
pub const CHANNEL_VERSION: u32 = 1;
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
/// Bytes of the header that mean something (the rest of the page is zero).
pub(crate) const HEADER_LEN: usize = 88;

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
