//! Async forms of the readers on a [tokio](https://tokio.rs) runtime (feature `tokio`).
//!
//! One small API over every reader, as crossbeam-channel puts one API over several
//! channel flavours: [`AsyncReader<S>`](AsyncReader) takes any [`Source`] (the
//! user-space ring's [`Consumer`](crate::Consumer), a
//! [`ChannelReader`](crate::ChannelReader), a BPF ring buffer map
//! ([`BpfRingBuf`](crate::kernel::bpf::BpfRingBuf)) or a set of them
//! ([`RingSet`](crate::kernel::bpf::RingSet)), a perf ring
//! ([`ForwardRing`](crate::kernel::perf::ForwardRing),
//! [`BackwardRing`](crate::kernel::perf::BackwardRing))) and waits for its records
//! without a thread of its own:
//!
//! * [`AsyncReader::readable`] waits until records may be ready; read them in place
//!   with [`get_mut`](AsyncReader::get_mut) and the reader's own API.
//! * [`AsyncReader::consume`] waits and reads them in place (zero-copy), as the reader's
//!   `poll` does on a thread.
//! * [`AsyncReader::stream`] and [`into_stream`](AsyncReader::into_stream) hand records
//!   out copied, as a [`Stream`](futures_core::Stream) (for `StreamExt` from
//!   tokio-stream or futures), cancel safe: a record leaves the reader only when the
//!   stream hands it out.
//!
//! Waiting follows each reader's arming protocol (see [`Source::arm`]) on its doorbell
//! descriptor registered with the runtime's reactor through tokio's
//! [`AsyncFd`](::tokio::io::unix::AsyncFd). The reactor registers descriptors
//! edge-triggered and remembers a readiness until it is cleared; the readers clear it
//! before arming again, so a wakeup between arming and waiting is never lost. That is
//! the loop of tokio's `AsyncFd` docs (`clear_ready` clears only the readiness seen
//! before its guard was made:
//! <https://docs.rs/tokio/latest/tokio/io/unix/struct.AsyncFdReadyGuard.html#method.clear_ready>),
//! and the one aya documents for its BPF `RingBuf` under tokio (drain, then clear:
//! <https://docs.rs/aya/latest/aya/maps/ring_buf/struct.RingBuf.html>), with the
//! reader's re-check after arming in place of aya's drain.
//!
//! ```
//! use ringtrace::tokio::AsyncReader;
//! use ringtrace::{MpscRing, Wakeup};
//! use tokio_stream::StreamExt;
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let ring = MpscRing::new(1 << 16)?;
//!     let mut producer = ring.producer()?;
//!     let mut reader = AsyncReader::new(ring.consumer()?)?;
//!     let writer = std::thread::spawn(move || {
//!         for i in 0..1000u32 {
//!             producer.output(&i.to_le_bytes(), Wakeup::Default).unwrap();
//!         }
//!     });
//!     // Zero-copy: wait, then read every record there in place.
//!     let mut sum = 0u64;
//!     let mut seen = reader
//!         .consume(|rec: &[u8]| sum += u64::from(u32::from_le_bytes(rec.try_into().unwrap())))
//!         .await?;
//!     // Copied out, one at a time, as a stream.
//!     let mut records = reader.stream();
//!     while seen < 1000 {
//!         let rec = records.next().await.unwrap()?;
//!         sum += u64::from(u32::from_le_bytes(rec[..].try_into()?));
//!         seen += 1;
//!     }
//!     assert_eq!(sum, 999 * 1000 / 2);
//!     writer.join().unwrap();
//!     Ok(())
//! }
//! ```
//!
//! A ring shared between processes (a ring file, a sealed memfd) wakes a consumer that
//! waits here through a socket doorbell ([`Consumer::arm`](crate::Consumer::arm) names
//! it), and such a reader also looks every 200 ms whether a producer process died.
//!
//! [`AsyncProducer`] is the writing side: a producer that waits for room without
//! blocking its thread, woken by the consumer through the same kind of doorbell.
//! [`AsyncUserRingBuf`] is the same for a BPF user ring buffer map, woken by the
//! kernel after the BPF program drains it.

mod channel;
mod perf;
mod producer;
mod reader;
mod rings;
mod source;
mod stream;
mod user;
mod wait;

#[cfg(test)]
mod tests;

pub use crate::source::{ChannelItem, PerfItem};
pub use producer::AsyncProducer;
pub use reader::{AsyncReader, IntoRecords, Records};
pub use source::Source;
pub use stream::{Item, YIELD_EVERY};
pub use user::AsyncUserRingBuf;
