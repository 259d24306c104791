//! [`RingSet`]: several BPF ring buffer maps behind one epoll instance, consuming only
//! the maps that are ready (libbpf's `ring_buffer__add` and `ring_buffer__poll`, with
//! edge-triggered epoll).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::event::epoll;

use super::ringbuf::{BpfRingBuf, DEFAULT_LINGER};
use crate::callback::Outcome;
use crate::error::{ConsumeError, KernelError};
use crate::wait::epoll::wait_epoll;
use crate::wait::poll::{poll, Poll};

/// Several BPF ring buffer maps polled together. The callback is told which map each
/// record came from (its index, in the order the maps were added).
///
/// Every map is registered edge-triggered. The set keeps the invariant that makes that
/// safe: a map is either on the set's ready list, or was drained and
/// [armed](BpfRingBuf::arm) (position published, then a full fence, then found empty),
/// so the kernel's next commit into it wakes the epoll instance.
///
/// ```
/// use ringtrace::kernel::bpf::{BpfRingBuf, RingSet};
/// use std::time::Duration;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let (Ok(a), Ok(b)) = (ringtrace_fixtures::RingMap::create(1 << 16), ringtrace_fixtures::RingMap::create(1 << 16)) else { return Ok(()) };
/// # let pb = ringtrace_fixtures::SeqProgram::load(std::os::fd::AsFd::as_fd(&b), Default::default())?;
/// # pb.run(2)?;
/// # let (a, b): (std::os::fd::OwnedFd, std::os::fd::OwnedFd) = (a.into(), b.into());
/// let mut set = RingSet::new()?;
/// set.add(BpfRingBuf::from_fd(a)?)?;
/// set.add(BpfRingBuf::from_fd(b)?)?;
/// let mut from = Vec::new();
/// set.poll(Some(Duration::from_secs(1)), |ring, _rec: &[u8]| {
///     from.push(ring);
///     Ok::<(), std::convert::Infallible>(())
/// })?;
/// assert_eq!(from, [1, 1]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RingSet {
    rings: Vec<BpfRingBuf>,
    /// Indices of maps that may hold records: reported by epoll, or not drained.
    ready: Vec<usize>,
    epoll: OwnedFd,
    linger: Duration,
}

impl RingSet {
    /// An empty set.
    pub fn new() -> Result<RingSet, KernelError> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)
            .map_err(|e| KernelError::Io { what: "creating an epoll instance", source: e.into() })?;
        Ok(RingSet { rings: Vec::new(), ready: Vec::new(), epoll, linger: DEFAULT_LINGER })
    }

    /// Adds a map; returns its index.
    pub fn add(&mut self, ring: BpfRingBuf) -> Result<usize, KernelError> {
        let i = self.rings.len();
        epoll::add(
            &self.epoll,
            ring.as_fd(),
            epoll::EventData::new_u64(i as u64),
            epoll::EventFlags::IN | epoll::EventFlags::ET,
        )
        .map_err(|e| KernelError::Io { what: "adding a map to the epoll instance", source: e.into() })?;
        self.rings.push(ring);
        // Records written before it was added raise no edge: read it on the next call.
        self.ready.push(i);
        Ok(i)
    }

    /// The maps in the set.
    pub fn len(&self) -> usize {
        self.rings.len()
    }

    /// Whether the set has no map.
    pub fn is_empty(&self) -> bool {
        self.rings.is_empty()
    }

    /// The map at `index`, to read its counters or consume it alone.
    pub fn ring(&mut self, index: usize) -> Option<&mut BpfRingBuf> {
        self.rings.get_mut(index)
    }

    /// Consumes every map on the ready list, each fully; a map found empty and armed
    /// leaves the list. Returns the records seen. libbpf's `ring_buffer__consume`, but
    /// only over the maps that may hold records. Safe to follow with a wait on
    /// [`as_fd`](AsFd::as_fd) when it leaves the ready list empty.
    ///
    /// The callback gets each record's map index and bytes, and returns `()`, or a
    /// `Result` to stop early (see [`Outcome`]).
    pub fn consume<F, R>(&mut self, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(usize, &[u8]) -> R,
        R: Outcome,
    {
        self.pass(true, move |i, rec| f(i, rec).into_result())
    }

    /// One pass over the ready list. With `arm`, every map is armed after it is read,
    /// and leaves the list if that finds it empty; without, maps stay on the list
    /// unarmed, so that the kernel is not asked for wakeups while the set keeps
    /// reading them.
    fn pass<F, E>(&mut self, arm: bool, mut f: F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(usize, &[u8]) -> Result<(), E>,
    {
        let mut n = 0;
        let mut k = 0;
        // Bounded: each step either removes an entry or moves past it.
        while k < self.ready.len() {
            let i = self.ready[k];
            let ring = &mut self.rings[i];
            let got = ring.consume(|rec| f(i, rec))?; // on error the map stays on the list
            n += got;
            if arm && ring.arm_now() {
                self.ready.swap_remove(k);
            } else {
                k += 1; // read again on the next pass, without waiting
            }
        }
        Ok(n)
    }

    /// Consumes the maps that are ready; if none is, sleeps until one is or `timeout`
    /// passes (`None`: no timeout), then consumes those. Returns the records seen.
    /// libbpf's `ring_buffer__poll`.
    ///
    /// As [`BpfRingBuf::poll`], having caught up it first sleeps for the linger time
    /// of the set ([`set_linger`](Self::set_linger)) without asking for wakeups.
    pub fn poll<F, R>(&mut self, timeout: Option<Duration>, mut f: F) -> Result<usize, ConsumeError<R::Error>>
    where
        F: FnMut(usize, &[u8]) -> R,
        R: Outcome,
    {
        poll(self, timeout, move |(i, rec)| f(i, rec).into_result())
    }

    /// How long [`poll`](Self::poll) sleeps without asking for wakeups once the maps
    /// it was reading have nothing more (default [`DEFAULT_LINGER`]); see
    /// [`BpfRingBuf::set_linger`].
    pub fn set_linger(&mut self, linger: Duration) {
        self.linger = linger;
    }

    /// For an event loop waiting on [`as_fd`](AsFd::as_fd) (the set's epoll instance,
    /// which may itself be registered edge-triggered, as tokio's `AsyncFd` does): arms
    /// every map on the ready list (those found empty leave it), then takes, without
    /// waiting, the maps epoll reported since. `Ok(true)`: no map is ready and every one
    /// is armed, so the kernel's next commit into any of them makes the epoll instance
    /// readable: wait on it. `Ok(false)`: a map is ready: [`consume`](Self::consume)
    /// first. The contract of [`Consumer::arm`](crate::Consumer::arm).
    pub fn arm(&mut self) -> io::Result<bool> {
        Ok(!self.wait_ready(Some(Duration::ZERO))?)
    }

    /// Sleeps until a map is ready or `timeout` passes (at once if one is on the ready
    /// list); puts the maps epoll reported on the ready list. True if any is.
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        if !self.ready.is_empty() {
            return Ok(true);
        }
        let (rings, ready) = (self.rings.len(), &mut self.ready);
        wait_epoll(self.epoll.as_fd(), timeout, |i| {
            let i = i as usize;
            if i < rings && !ready.contains(&i) {
                ready.push(i);
            }
        })?;
        Ok(!self.ready.is_empty())
    }
}

impl Poll for RingSet {
    type Record<'a> = (usize, &'a [u8]);
    /// One pass over the ready list, without arming: the kernel is not asked for
    /// wakeups while the set keeps reading.
    fn read_now<F, E>(&mut self, f: &mut F) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut((usize, &[u8])) -> Result<(), E>,
    {
        self.pass(false, |i, rec| f((i, rec)))
    }
    /// Caught up: arms every map on the ready list (those found empty leave it), then
    /// sleeps on epoll if none is left.
    fn wait_ready(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        let mut k = 0;
        // Bounded: each step either removes an entry or moves past it.
        while k < self.ready.len() {
            if self.rings[self.ready[k]].arm_now() {
                self.ready.swap_remove(k);
            } else {
                k += 1;
            }
        }
        self.wait(timeout)
    }
    fn linger(&self) -> Duration {
        if self.ready.is_empty() {
            Duration::ZERO
        } else {
            self.linger
        }
    }
}

impl AsFd for RingSet {
    /// The epoll instance: readable when a map in the set is (nest it in an event loop;
    /// call [`poll`](RingSet::poll) with a zero timeout when it is).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }
}
