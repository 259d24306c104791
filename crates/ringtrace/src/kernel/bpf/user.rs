//! [`UserRingBuf`]: a BPF user ring buffer map (`BPF_MAP_TYPE_USER_RINGBUF`, Linux
//! 6.1) attached for producing: user space writes samples, a BPF program drains them
//! with `bpf_user_ringbuf_drain`.

use std::io;
use std::ops::{Deref, DerefMut};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::event::epoll;

use super::error::{is_permission, map_type_name};
use super::lock::{ReaderLock, Role};
use super::open;
use super::sys;
use super::user_map::UserMap;
use super::user_producer::{Producer, Refused, UserMem, UserStats};
use crate::error::KernelError;
use crate::wait::epoll::wait_epoll;

/// How long a blocking reserve waits for the kernel's wakeup before it looks again:
/// a program that drains with `BPF_RB_NO_WAKEUP` wakes no producer.
const LOOK_AGAIN: Duration = Duration::from_millis(10);

/// Why a sample was not reserved (counted in [`UserStats`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UserReserveError {
    /// No room now: the BPF program has not drained enough yet.
    #[error("user ring buffer full: a sample of {len} bytes does not fit until the BPF program drains more")]
    Full {
        /// The payload length asked for.
        len: usize,
    },
    /// [`UserRingBuf::reserve_blocking`] found no room before its timeout.
    #[error("no room came for a sample of {len} bytes before the timeout: the BPF program did not drain enough")]
    Timeout {
        /// The payload length asked for.
        len: usize,
    },
    /// The sample could never fit.
    #[error("a sample of {len} bytes is too large: this map takes samples of at most {max} bytes")]
    TooLarge {
        /// The payload length asked for.
        len: usize,
        /// The largest payload this map takes ([`UserRingBuf::max_sample`]).
        max: usize,
    },
    /// A sample of no bytes.
    #[error("a sample of 0 bytes: the BPF program would be handed an empty dynptr; a sample has at least 1 byte")]
    Empty,
    /// Waiting for the kernel's wakeup failed (`epoll`).
    #[error("waiting for the BPF program to drain the map")]
    Wait(#[source] io::Error),
}

/// A pointer handed to [`UserRingBuf::commit_raw`] or
/// [`UserRingBuf::discard_raw`] that is not a reserved sample's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a sample reserved in this user ring buffer (committed, discarded, or never reserved)")]
pub struct UserRawError;

/// One BPF user ring buffer map, attached for producing (libbpf's `user_ring_buffer`):
/// samples are reserved in place, written, and committed (or discarded), and a BPF
/// program drains them in order with `bpf_user_ringbuf_drain`, which sees each sample
/// once it is committed and skips discarded ones.
///
/// The handle is `Sync`: the threads of a process share it, their reservations
/// serialized by a lock held for a few instructions, their commits lock-free (see
/// `user_producer.rs` for why a lock-free reservation is not possible with the
/// kernel's protocol). One process produces into a map at a time: the handle holds the
/// map's producer lock (an abstract Unix socket, `@ringtrace-bpf-user-map-ID`) until it
/// is dropped or its process dies; another handle, in this or another process, is
/// refused with [`KernelError::ProducerBusy`]. A producer outside ringtrace (libbpf's)
/// is not kept out.
///
/// A sample the process never committed (it died mid-sample) would stop the kernel's
/// drain for good: the kernel ends every drain at a BUSY sample. Attaching discards
/// such samples ([`UserStats::recovered`]); a [`UserSample`] dropped uncommitted is
/// discarded too.
///
/// Lengths are checked before anything is written: the kernel fails a drain (and every
/// later one) on a sample longer than the data area or than a `bpf_dynptr` holds, so
/// such samples are refused here ([`max_sample`](Self::max_sample)).
///
/// For an event loop: the kernel wakes the map's descriptor ([`as_fd`](AsFd::as_fd),
/// `EPOLLOUT`, edge-triggered is fine) after a drain that took samples, unless the
/// program drained with `BPF_RB_NO_WAKEUP`; reserve again then.
///
/// ```
/// use ringtrace::kernel::bpf::UserRingBuf;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let Some(map) = ringtrace_fixtures::UserRingMap::create(1 << 16).ok() else { return Ok(()) };
/// # let map_fd: std::os::fd::OwnedFd = map.into();
/// // `map_fd`: a user ring buffer map's descriptor, from the program's loader.
/// let ring = UserRingBuf::from_fd(map_fd)?;
/// let mut sample = ring.reserve(16)?;
/// sample.copy_from_slice(b"config: level=3\n");
/// sample.commit();
/// ring.write(b"another sample")?;
/// assert_eq!(ring.stats().committed, 2);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct UserRingBuf {
    producer: Producer<UserMap>,
    fd: OwnedFd,
    id: u32,
    name: String,
    /// The samples [`UserSample::into_raw`] left reserved: header position and length.
    raw: Mutex<Vec<(u64, usize)>>,
    /// The epoll instances of blocking reserves, kept between them ([`Self::waiting`]).
    epolls: Mutex<Vec<OwnedFd>>,
    _lock: ReaderLock,
}

impl UserRingBuf {
    /// Attaches to the user ring buffer map `fd` (which the handle keeps), takes its
    /// producer lock, and discards the samples a dead producer left BUSY.
    pub fn from_fd(fd: OwnedFd) -> Result<UserRingBuf, KernelError> {
        let info = open::info(&fd)?;
        if info.map_type != sys::MAP_TYPE_USER_RINGBUF {
            let hint = if info.map_type == sys::MAP_TYPE_RINGBUF {
                ": the kernel produces into a ring buffer map and user space reads it \
                 (ringtrace::kernel::bpf::BpfRingBuf)"
            } else {
                ""
            };
            return Err(KernelError::NotUserRingBuf {
                name: info.name,
                id: info.id,
                map_type: info.map_type,
                kind: map_type_name(info.map_type),
                hint,
            });
        }
        let size = info.max_entries;
        open::check_size(size)?;
        let lock = ReaderLock::take_as(Role::Producer, info.id)?;
        let mem = UserMap::new(fd.as_fd(), size as u64).map_err(|source| {
            if is_permission(&source) {
                KernelError::Permission { what: "mapping the user ring buffer".into(), needs: "CAP_BPF", source }
            } else {
                KernelError::Io { what: "mapping the user ring buffer (mmap)", source }
            }
        })?;
        let bad = |(consumer, producer)| KernelError::BadPositions { consumer, producer };
        let producer = Producer::new(mem).map_err(bad)?;
        producer.recover().map_err(bad)?;
        Ok(UserRingBuf {
            producer,
            fd,
            id: info.id,
            name: info.name,
            raw: Mutex::new(Vec::new()),
            epolls: Mutex::new(Vec::new()),
            _lock: lock,
        })
    }

    /// Attaches to the user ring buffer map pinned at `path` in a bpffs.
    pub fn open_pinned(path: impl AsRef<Path>) -> Result<UserRingBuf, KernelError> {
        Self::from_fd(open::pinned(path.as_ref())?)
    }

    /// Attaches to the user ring buffer map with id `id` (as `bpftool map` lists them).
    pub fn open_id(id: u32) -> Result<UserRingBuf, KernelError> {
        Self::from_fd(open::by_id(id)?)
    }

    /// Reserves a sample of `len` payload bytes, to be written in place and committed
    /// (libbpf's `user_ring_buffer__reserve`). Its bytes are what the map held there:
    /// write them all.
    pub fn reserve(&self, len: usize) -> Result<UserSample<'_>, UserReserveError> {
        match self.producer.reserve(len) {
            Ok(pos) => Ok(self.sample(pos, len)),
            Err(Refused::Full) => Err(UserReserveError::Full { len }),
            Err(Refused::TooLarge) => Err(UserReserveError::TooLarge { len, max: self.max_sample() }),
            Err(Refused::Empty) => Err(UserReserveError::Empty),
        }
    }

    /// [`reserve`](Self::reserve), waiting up to `timeout` for the BPF program to drain
    /// room (libbpf's `user_ring_buffer__reserve_blocking`): the kernel wakes the map's
    /// descriptor after a drain that took samples; a program that drains with
    /// `BPF_RB_NO_WAKEUP` wakes nobody, and the wait then looks again every 10 ms.
    pub fn reserve_blocking(&self, len: usize, timeout: Duration) -> Result<UserSample<'_>, UserReserveError> {
        let deadline = Instant::now() + timeout;
        let mut ep: Option<Waiting<'_>> = None;
        loop {
            match self.reserve(len) {
                Err(UserReserveError::Full { .. }) => {}
                other => return other,
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(UserReserveError::Timeout { len });
            }
            // Registered before the next attempt: a drain after it queues an event
            // (edge-triggered: the first wait returns at once if there is any room).
            let ep = match &ep {
                Some(ep) => ep,
                None => ep.insert(self.waiting().map_err(UserReserveError::Wait)?),
            };
            wait_epoll(ep.as_fd(), Some(left.min(LOOK_AGAIN)), |_| {}).map_err(UserReserveError::Wait)?;
        }
    }

    /// An epoll instance watching the map's descriptor, edge-triggered, for one
    /// blocking reserve: one a waiter gave back, or a new one. Each waiter has its own
    /// (an edge-triggered event wakes one waiter of an instance); they are kept for the
    /// next waiters, since making one costs a few microseconds. An event left queued
    /// in one given back makes its next wait return at once: one more look, no harm.
    fn waiting(&self) -> io::Result<Waiting<'_>> {
        let kept = self.epolls.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let fd = match kept {
            Some(fd) => fd,
            None => {
                let fd = epoll::create(epoll::CreateFlags::CLOEXEC)?;
                epoll::add(
                    &fd,
                    &self.fd,
                    epoll::EventData::new_u64(0),
                    epoll::EventFlags::OUT | epoll::EventFlags::ET,
                )?;
                fd
            }
        };
        Ok(Waiting { ring: self, fd: Some(fd) })
    }

    /// Copies `data` into a sample and commits it.
    pub fn write(&self, data: &[u8]) -> Result<(), UserReserveError> {
        let mut s = self.reserve(data.len())?;
        s.copy_from_slice(data);
        s.commit();
        Ok(())
    }

    /// The longest sample this map takes: its data area less an 8-byte header, and at
    /// most 2^24 − 1 bytes (`DYNPTR_MAX_SIZE`, what a `bpf_dynptr` holds).
    pub fn max_sample(&self) -> usize {
        self.producer.max_sample()
    }

    /// The map's data area in bytes (its `max_entries`).
    pub fn capacity(&self) -> u64 {
        self.producer.mem().size()
    }

    /// Bytes the BPF program has not drained yet (headers and padding included).
    pub fn pending(&self) -> u64 {
        self.producer.pending()
    }

    /// This handle's counters.
    pub fn stats(&self) -> UserStats {
        self.producer.stats()
    }

    /// The map's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The map's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Commits the sample whose payload starts at `sample`, as
    /// [`UserSample::into_raw`] gave it (libbpf's `user_ring_buffer__submit`, for a C
    /// API). `Err`, with nothing done, where `sample` is not the start of a sample of
    /// this map that is reserved and neither committed nor discarded.
    pub fn commit_raw(&self, sample: *mut u8) -> Result<(), UserRawError> {
        let (pos, len) = self.raw_sample(sample)?;
        self.producer.commit(pos, len);
        Ok(())
    }

    /// Discards the sample whose payload starts at `sample` (libbpf's
    /// `user_ring_buffer__discard`); `Err` as [`commit_raw`](Self::commit_raw).
    pub fn discard_raw(&self, sample: *mut u8) -> Result<(), UserRawError> {
        let (pos, len) = self.raw_sample(sample)?;
        self.producer.discard(pos, len);
        Ok(())
    }

    /// The header position and length of the sample at `sample` that
    /// [`UserSample::into_raw`] left reserved, which it no longer is once this returns.
    /// Only the address is used: compared with the mapping's, never dereferenced.
    fn raw_sample(&self, sample: *mut u8) -> Result<(u64, usize), UserRawError> {
        let size = self.capacity();
        let base = self.producer.mem().payload(size - 8, 0) as usize;
        let at = (sample as usize).wrapping_sub(base) as u64;
        if at >= 2 * size {
            return Err(UserRawError);
        }
        // The header is 8 bytes before the payload, in the ring's terms (libbpf's
        // `user_ringbuf_commit`: the payload may start the second mapping of the data).
        let offset = (at + size - 8) & (size - 1);
        let mut raw = self.raw.lock().unwrap_or_else(|e| e.into_inner());
        let i = raw.iter().position(|&(pos, _)| pos & (size - 1) == offset).ok_or(UserRawError)?;
        Ok(raw.swap_remove(i))
    }

    fn sample(&self, pos: u64, len: usize) -> UserSample<'_> {
        let ptr = self.producer.mem().payload(pos, len);
        // SAFETY: `ptr` points at `len` bytes inside the live mapping (`payload`), which
        // the returned sample's borrow of `self` keeps mapped; the reservation just
        // made owns them: no other sample covers them until the kernel drained this
        // one, which it does only after the commit (or skips after the discard) that
        // ends this borrow. The kernel reads them only after that commit.
        let data = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
        UserSample { ring: self, pos, data, done: false }
    }
}

/// A blocking reserve's epoll instance, given back to its handle when dropped.
struct Waiting<'a> {
    ring: &'a UserRingBuf,
    /// Taken only when dropped.
    fd: Option<OwnedFd>,
}

impl AsFd for Waiting<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_ref().expect("the descriptor is taken only on drop").as_fd()
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(fd) = self.fd.take() {
            self.ring.epolls.lock().unwrap_or_else(|e| e.into_inner()).push(fd);
        }
    }
}

impl Drop for UserRingBuf {
    /// Discards the samples [`UserSample::into_raw`] left reserved: the kernel's drain
    /// would stop at them until the map's next producer attached.
    fn drop(&mut self) {
        for (pos, len) in self.raw.get_mut().unwrap_or_else(|e| e.into_inner()).drain(..) {
            self.producer.discard(pos, len);
        }
    }
}

impl AsFd for UserRingBuf {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A sample reserved in a [`UserRingBuf`]: its payload bytes, to be written, then
/// [`commit`](Self::commit)ted. Dropped uncommitted, it is discarded (the BPF program
/// never sees it).
#[derive(Debug)]
pub struct UserSample<'a> {
    ring: &'a UserRingBuf,
    pos: u64,
    data: &'a mut [u8],
    done: bool,
}

impl<'a> UserSample<'a> {
    /// The payload's address, the sample left reserved: for a C API, which commits it
    /// with [`UserRingBuf::commit_raw`] (or discards it with
    /// [`UserRingBuf::discard_raw`]). A sample never committed or discarded stops the
    /// kernel's drain at it until the map's next producer attaches.
    pub fn into_raw(self) -> *mut u8 {
        let mut s = std::mem::ManuallyDrop::new(self);
        s.ring.raw.lock().unwrap_or_else(|e| e.into_inner()).push((s.pos, s.data.len()));
        s.data.as_mut_ptr()
    }

    /// Hands the sample to the BPF program (libbpf's `user_ring_buffer__submit`).
    pub fn commit(mut self) {
        self.done = true;
        self.ring.producer.commit(self.pos, self.data.len());
    }

    /// Gives the sample up: the kernel's drain skips it (libbpf's
    /// `user_ring_buffer__discard`).
    pub fn discard(mut self) {
        self.done = true;
        self.ring.producer.discard(self.pos, self.data.len());
    }
}

impl Deref for UserSample<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.data
    }
}

impl DerefMut for UserSample<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.data
    }
}

impl Drop for UserSample<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.ring.producer.discard(self.pos, self.data.len());
        }
    }
}
