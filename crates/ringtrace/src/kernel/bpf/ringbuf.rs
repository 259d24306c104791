//! [`BpfRingBuf`]: one BPF ring buffer map attached for consuming.

use std::convert::Infallible;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use rustix::event::epoll;

use crate::error::ConsumeError;
use crate::recorder::snapshot::Snapshot;

use super::error::{is_permission, map_type_name};
use super::lock::ReaderLock;
use super::map::KernelMap;
use super::open;
use super::reader::{BpfStats, Reader, RingMem};
use super::sys::{self, BPF_F_RB_OVERWRITE};
use crate::callback::{BatchBuf, Iter, Outcome};
use crate::error::KernelError;
use crate::wait::epoll::wait_epoll;
use crate::wait::poll::byte_reader_poll;

/// One BPF ring buffer map, attached for reading. One reader per map at a time: the
/// consumer position is the map's, shared with any other process that reads it.
///
/// So a handle consumes only while it holds the map's reader lock (an abstract Unix
/// socket, `@ringtrace-bpf-map-ID`, released when the handle is dropped or its process
/// dies). Whichever way the handle was made ([`open_pinned`](Self::open_pinned),
/// [`open_id`](Self::open_id), [`from_fd`](Self::from_fd)), its first consuming call
/// (`consume`, `consume_n`, `consume_at`, `iter`, `poll`, and a [`RingSet`]'s reads of
/// it) takes the lock, or [`lock_reader`](Self::lock_reader) takes it at once; while
/// another reader holds it, these fail with [`KernelError::MapBusy`], naming the
/// holder's pid and uid. Another handle of the same map in the same process is refused
/// too. What does not move the consumer position takes no lock: a handle used only for
/// [`snapshot`](Self::snapshot), [`stats`](Self::stats) or the positions reads beside
/// the map's reader. Readers in other network namespaces, and readers other than
/// ringtrace's (libbpf's), are not kept out.
///
/// [`RingSet`]: super::RingSet
///
/// ```
/// use ringtrace::kernel::bpf::BpfRingBuf;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let Some(map) = ringtrace_fixtures::RingMap::create(1 << 16).ok() else { return Ok(()) };
/// # let prog = ringtrace_fixtures::SeqProgram::load(std::os::fd::AsFd::as_fd(&map), Default::default())?;
/// # prog.run(3)?;
/// # let map_fd: std::os::fd::OwnedFd = map.into();
/// // `map_fd`: a ring buffer map's descriptor, from the program's loader.
/// let mut ring = BpfRingBuf::from_fd(map_fd)?;
/// let mut seqs = Vec::new();
/// ring.consume(|rec: &[u8]| {
///     seqs.push(u64::from_ne_bytes(rec[..8].try_into().unwrap()));
///     Ok::<(), std::convert::Infallible>(())
/// })?;
/// assert_eq!(seqs, [0, 1, 2]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct BpfRingBuf {
    reader: Reader<KernelMap>,
    fd: OwnedFd,
    id: u32,
    name: String,
    /// An epoll instance watching `fd` edge-triggered, made on the first wait.
    epoll: Option<OwnedFd>,
    /// How long `poll` waits, without arming a wakeup, for more records once it has
    /// caught up (see [`BpfRingBuf::set_linger`]).
    linger: Duration,
    /// The records of the last [`iter`](Self::iter) call.
    batch: BatchBuf,
    /// The map's reader lock, taken by the first consuming call.
    lock: Option<ReaderLock>,
}

/// The default [`BpfRingBuf::set_linger`].
pub const DEFAULT_LINGER: Duration = Duration::from_micros(50);

impl BpfRingBuf {
    /// Attaches to the ring buffer map `fd` (which the reader keeps).
    pub fn from_fd(fd: OwnedFd) -> Result<BpfRingBuf, KernelError> {
        let info = open::info(&fd)?;
        if info.map_type != sys::MAP_TYPE_RINGBUF {
            let hint = if info.map_type == sys::MAP_TYPE_USER_RINGBUF {
                ": user space produces into a user ring buffer and the kernel consumes it (write into it with ringtrace::kernel::bpf::UserRingBuf)"
            } else if info.map_type == 4 {
                ": read a perf event array through its perf events (ringtrace::kernel::perf)"
            } else {
                ""
            };
            return Err(KernelError::NotRingBuf {
                name: info.name,
                id: info.id,
                map_type: info.map_type,
                kind: map_type_name(info.map_type),
                hint,
            });
        }
        let size = info.max_entries;
        open::check_size(size)?;
        let mem = KernelMap::new(fd.as_fd(), size as u64).map_err(|source| {
            if is_permission(&source) {
                KernelError::Permission { what: "mapping the ring buffer".into(), needs: "CAP_BPF", source }
            } else {
                KernelError::Io { what: "mapping the ring buffer (mmap)", source }
            }
        })?;
        let overwrite = info.map_flags & BPF_F_RB_OVERWRITE != 0;
        let reader = Reader::new(mem, overwrite)
            .map_err(|(consumer, producer)| KernelError::BadPositions { consumer, producer })?;
        Ok(BpfRingBuf {
            reader,
            fd,
            id: info.id,
            name: info.name,
            epoll: None,
            linger: DEFAULT_LINGER,
            batch: BatchBuf::default(),
            lock: None,
        })
    }

    /// Attaches to the ring buffer map pinned at `path` in a bpffs.
    pub fn open_pinned(path: impl AsRef<Path>) -> Result<BpfRingBuf, KernelError> {
        Self::from_fd(open::pinned(path.as_ref())?)
    }

    /// Attaches to the ring buffer map with id `id` (as `bpftool map` lists them).
    pub fn open_id(id: u32) -> Result<BpfRingBuf, KernelError> {
        Self::from_fd(open::by_id(id)?)
    }

    /// Takes the map's reader lock now, if this handle does not hold it yet (the first
    /// consuming call takes it otherwise), and holds it until the handle is dropped.
    /// Fails with [`KernelError::MapBusy`] while another reader, in this process or
    /// another, holds it.
    pub fn lock_reader(&mut self) -> Result<(), KernelError> {
        if self.lock.is_none() {
            self.lock = Some(ReaderLock::take(self.id)?);
            // Another reader may have consumed since this handle was made.
            self.reader.restart();
        }
        Ok(())
    }

    /// Calls `f` with every record available now, in order, then hands the space back,
    /// all but the last record's if that one is small (at most a sixteenth of the map;
    /// see [`release`](Self::release)). Returns how many records `f` saw. Stops at the
    /// first error of `f` (that record counts as consumed, as in libbpf) and returns
    /// it.
    #[inline]
    ///
    /// The callback returns `()`, or a `Result` to stop early (see [`Outcome`]).
    pub fn consume<F, R>(&mut self, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(&[u8]) -> R,
        R: Outcome,
    {
        self.lock_reader()?;
        self.reader.consume(usize::MAX, move |_, d| f(d).into_result())
    }

    /// Like [`consume`](Self::consume), but at most `max` records (libbpf's
    /// `ring__consume_n`). The rest stay ready: call again before waiting.
    #[inline]
    pub fn consume_n<F, R>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(&[u8]) -> R,
        R: Outcome,
    {
        self.lock_reader()?;
        self.reader.consume(max, move |_, d| f(d).into_result())
    }

    /// Every record available now, for [`Poll`](crate::wait::poll::Poll).
    fn read_all<F, E>(&mut self, f: &mut F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(&[u8]) -> Result<(), E>,
    {
        self.lock_reader()?;
        self.reader.consume(usize::MAX, |_, d| f(d))
    }

    /// The records available now, in order, copied out (as [`consume`](Self::consume)
    /// delivers them): consumed when this returns, their space handed back to the
    /// kernel.
    pub fn iter(&mut self) -> Result<Iter<'_>, ConsumeError<Infallible>> {
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        let result = self.consume(|rec| batch.push(rec));
        self.batch = batch;
        result?;
        Ok(self.batch.iter())
    }

    /// Like [`consume_n`](Self::consume_n), with each record's position (of its
    /// header, in bytes since the map was created) before its payload.
    #[inline]
    pub fn consume_at<F, R>(&mut self, max: usize, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(u64, &[u8]) -> R,
        R: Outcome,
    {
        self.lock_reader()?;
        self.reader.consume(max, move |pos, d| f(pos, d).into_result())
    }

    /// Sleeps until a record is ready or `timeout` passes; true if one is ready.
    ///
    /// The kernel wakes waiters when it commits a record the reader has caught up with
    /// (flags 0), on every commit (`BPF_RB_FORCE_WAKEUP`) or never
    /// (`BPF_RB_NO_WAKEUP`: the program then wakes the reader some other way, or the
    /// reader polls with a timeout).
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        if !self.reader.arm() {
            return Ok(true);
        }
        let ep = match &self.epoll {
            Some(ep) => ep,
            None => {
                let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
                epoll::add(&ep, &self.fd, epoll::EventData::new_u64(0), epoll::EventFlags::IN | epoll::EventFlags::ET)?;
                self.epoll.insert(ep)
            }
        };
        wait_epoll(ep.as_fd(), timeout, |_| {})?;
        Ok(self.reader.ready())
    }

    /// For an event loop waiting on [`as_fd`](AsFd::as_fd) (edge-triggered `EPOLLET`
    /// is fine): publishes what was read and says whether it is safe to wait now.
    /// `true`: nothing is ready, and the kernel will wake the descriptor when a record
    /// is. `false`: records are ready; consume again first.
    ///
    /// Never fails (the map's words are memory); the `Result` is that of every
    /// reader's `arm`.
    pub fn arm(&mut self) -> io::Result<bool> {
        Ok(self.reader.arm())
    }

    /// [`arm`](Self::arm) for a ring set, which has no error to report.
    pub(crate) fn arm_now(&mut self) -> bool {
        self.reader.arm()
    }

    /// Hands back the space of every record read. A consume call keeps the last
    /// record's space if it is small, so that the kernel does not queue a wakeup for a
    /// reader that is about to read again ([`arm`](Self::arm), [`wait`](Self::wait),
    /// [`poll`](Self::poll) and drop hand it back). A reader that busy-polls
    /// `consume` and never waits may call this to hand it back too.
    pub fn release(&mut self) {
        self.reader.release();
    }

    /// Holds the space of every record read until [`release`](Self::release): consume
    /// calls, [`arm`](Self::arm), [`wait`](Self::wait) and drop no longer hand it back
    /// to the kernel, and [`unread`](Self::unread) reads the held records again. For a
    /// reader that passes records on and may have to send them again (an agent that
    /// ships them over a network releases what the far end acknowledged). While records
    /// are held the kernel cannot reuse their space, and it wakes a waiter only for a
    /// record committed at the released position: release or unread before waiting.
    ///
    /// ```no_run
    /// use ringtrace::kernel::bpf::BpfRingBuf;
    ///
    /// let mut rb = BpfRingBuf::open_pinned("/sys/fs/bpf/events")?;
    /// rb.hold(true);
    /// let mut batch = Vec::new();
    /// rb.consume(|rec| batch.push(rec.to_vec()))?;
    /// # let sent = true;
    /// if sent {
    ///     rb.release(); // the kernel may reuse their space
    /// } else {
    ///     rb.unread(); // the next consume delivers them again
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hold(&mut self, hold: bool) {
        self.reader.hold = hold;
    }

    /// Goes back to the released position: the records read since are delivered again
    /// by the next consume call (see [`hold`](Self::hold); without holding, at most the
    /// last small record a consume call kept).
    pub fn unread(&mut self) {
        self.reader.unread();
    }

    /// Whether a record (or a discarded one to step over) is ready to read.
    pub fn ready(&self) -> bool {
        self.reader.ready()
    }

    /// Bytes of records (headers included) between the read position and the kernel's
    /// producer position, at most the map's size. A momentary figure, as the kernel's
    /// `BPF_RB_AVAIL_DATA`.
    pub fn available(&self) -> u64 {
        self.reader.available()
    }

    /// The read position (bytes since the map was created).
    pub fn position(&self) -> u64 {
        self.reader.pos
    }

    /// The kernel's producer position now.
    pub fn producer_position(&self) -> u64 {
        // Relaxed: a figure for display, ordering nothing.
        self.reader.mem.producer_pos().load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The map's data size in bytes (its `max_entries`).
    pub fn capacity(&self) -> u64 {
        self.reader.mem.size()
    }

    /// The map's id.
    pub fn map_id(&self) -> u32 {
        self.id
    }

    /// The map's name (at most 15 bytes, as the kernel keeps it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the map overwrites its oldest records when full (`BPF_F_RB_OVERWRITE`).
    pub fn is_overwrite(&self) -> bool {
        self.reader.overwrite
    }

    /// The reader's counters.
    pub fn stats(&self) -> BpfStats {
        self.reader.stats
    }

    /// Publishes the consumer position once this many bytes were read (and at the end
    /// of every call). Default: a quarter of the map. A smaller batch hands space back
    /// to the kernel sooner, for programs that fill the map in bursts; `8` publishes
    /// after every record, as libbpf does. Clamped to `[8, size]`.
    pub fn set_batch(&mut self, bytes: u64) {
        self.reader.batch = bytes.clamp(8, self.capacity());
    }

    /// How long [`poll`](Self::poll), having caught up with the kernel, sleeps before
    /// it reads again, without asking the kernel for a wakeup (default
    /// [`DEFAULT_LINGER`], 50 µs). Zero: arm a wakeup at once, as libbpf does.
    ///
    /// With flags 0 the kernel wakes a caught-up reader on its next commit: an
    /// `irq_work` on the producing CPU and an IPI to the reader's, a few microseconds of
    /// the producer's time (more in a VM) spent on every record when the reader keeps
    /// up with a steady producer. Lingering turns those into one timer wakeup of the
    /// reader per linger period, and adds at most the linger to the latency of a record
    /// that arrives right after the reader caught up (none to one that arrives while it
    /// is asleep after that: that one wakes it).
    pub fn set_linger(&mut self, linger: Duration) {
        self.linger = linger;
    }

    /// The records the map holds now, from the read position (or, in overwrite mode,
    /// from the oldest record not overwritten) to the newest, copied and checked,
    /// without consuming them. Records still being written are skipped and counted in
    /// [`Snapshot::unfinished`]. Read it oldest to newest or, with `.rev()`, newest to
    /// oldest. The kernel does not count what it overwrote, so the snapshot's
    /// `overwritten` counts are zero; see [`BpfStats::overwritten_bytes`].
    pub fn snapshot(&self) -> Result<Snapshot, ConsumeError> {
        self.reader.snapshot()
    }
}

byte_reader_poll! {
    /// Consumes what is available; if nothing is, sleeps until the kernel wakes the
    /// map's waiters or `timeout` passes (`None`: no timeout), then consumes. Returns
    /// the records seen. libbpf's `ring_buffer__poll` for one map.
    ///
    /// Having caught up, it first sleeps for the [linger](Self::set_linger) time
    /// (bounded by `timeout`) without asking for a wakeup, and reads again; only if
    /// that finds nothing does it arm a wakeup and sleep until woken.
    impl[] BpfRingBuf { read: read_all, linger: linger }
}

impl AsFd for BpfRingBuf {
    /// The map's descriptor: readable (`EPOLLIN`) while records are available. See
    /// [`arm`](BpfRingBuf::arm).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for BpfRingBuf {
    fn drop(&mut self) {
        self.reader.publish();
    }
}
