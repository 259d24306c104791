//! The spool file's layout: its magic, version, header and part sizes and limits (see
//! docs/formats.md).

/// The first 8 bytes of a spool file.
pub const MAGIC: [u8; 8] = *b"RTSPOOL\x01";
pub(super) const VERSION: u32 = 1;
pub(super) const MAX_HOST: usize = 255;
pub(super) const MAX_NAME: usize = 4096;
/// The largest message a part holds (the agent's largest `max_message`).
pub(super) const MAX_MESSAGE: usize = 999_000_000;
pub(super) const HEADER: usize = 28;
pub(super) const PART: usize = 16;
pub(super) const CRC: usize = 4;
/// The suffix of a spool file's name.
pub(super) const SUFFIX: &str = ".spool";

/// The most rounds a state may say are pending: a bound on the work of opening a spool
/// whatever a damaged state says (a round a second for 115 days).
pub(super) const MAX_PENDING: u64 = 10_000_000;
