//! A heap region for loom models and unit tests: one atomic per 8-byte word for headers
//! and a separate race-checked cell per word for payload, so loom checks that payload
//! writes happen-before the consumer's reads, and the zeroing (a producer's, ahead of
//! the claims: under the zeroing lock, or a single producer's own) happens-before the
//! next writes and reads there.
//! Headers are atomics here while the real region zeroes them with plain writes, so
//! races on header words are checked by reasoning, not by loom. No double mapping: payload word `i` of a record at `pos`
//! is `(pos / 8 + 1 + i) % words`.

use super::Region;
use crate::format::control::Control;
use crate::sync::{AtomicU64, Condvar, Mutex, Ordering::Relaxed, UnsafeCell};

pub(crate) struct HeapRegion {
    control: Box<Control>,
    headers: Box<[AtomicU64]>,
    payload: Box<[UnsafeCell<u64>]>,
    bell: Mutex<u64>,
    ring: Condvar,
    /// The producers' doorbell (`room_futex`), as a futex: `room_wait` and `notify_room`
    /// serialize on this mutex, as the kernel serializes `FUTEX_WAIT` and `FUTEX_WAKE`.
    room_bell: Mutex<()>,
    room_ring: Condvar,
    /// The doorbell is the futex word in the control block, as in a ring shared
    /// between processes (`futex_token`, `futex_wait`), besides the counter.
    futex: bool,
    /// Stands for a ring only this process produces into ([`Self::private`]).
    private: bool,
}

// SAFETY: the payload cells are shared between threads only as the protocol allows (one
// owner at a time: the reserving (or zeroing-ahead) producer, then the consumer); under loom that claim is
// exactly what the models check.
unsafe impl Sync for HeapRegion {}
// SAFETY: as above; nothing in it is tied to a thread.
unsafe impl Send for HeapRegion {}

impl HeapRegion {
    pub(crate) fn new(capacity: u64) -> Self {
        assert!(capacity.is_power_of_two() && capacity >= 16);
        let words = (capacity / 8) as usize;
        HeapRegion {
            control: Control::new_boxed(),
            headers: (0..words).map(|_| AtomicU64::new(0)).collect(),
            payload: (0..words).map(|_| UnsafeCell::new(0)).collect(),
            bell: Mutex::new(0),
            ring: Condvar::new(),
            room_bell: Mutex::new(()),
            room_ring: Condvar::new(),
            futex: false,
            private: false,
        }
    }

    /// A region that stands for a ring only this process produces into: no producer
    /// of it can die while a reader runs.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn private(capacity: u64) -> Self {
        HeapRegion { private: true, ..Self::new(capacity) }
    }

    /// A region whose doorbell also works as the futex of a shared ring.
    #[cfg_attr(not(loom), allow(dead_code))] // the loom models' futex doorbell
    pub(crate) fn with_futex(capacity: u64) -> Self {
        HeapRegion { futex: true, ..Self::new(capacity) }
    }

    /// `MmapView::prepare_sleep` of a futex ring: the futex word's value.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn futex_token(&self) -> u32 {
        // Acquire: as in `MmapView::prepare_sleep` (pairs with the Release fetch_add in
        // `notify`).
        self.control.wait.0.futex.load(crate::sync::Ordering::Acquire)
    }

    /// `FUTEX_WAIT`: sleeps while the futex word holds `token`. The check and the
    /// sleep are atomic with respect to `notify` (the mutex), as the kernel makes them.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn futex_wait(&self, token: u32) {
        let mut g = self.bell.lock().unwrap();
        // Relaxed: under the mutex, which orders it with `notify`'s add.
        while self.control.wait.0.futex.load(Relaxed) == token {
            g = self.ring.wait(g).unwrap();
        }
    }

    /// `FUTEX_WAIT` on the producers' doorbell: sleeps while `room_futex` holds
    /// `token`.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn room_wait(&self, token: u32) {
        let mut g = self.room_bell.lock().unwrap();
        // Relaxed: under the mutex, which orders it with `notify_room`'s add.
        while self.control.wait.0.room_futex.load(Relaxed) == token {
            g = self.room_ring.wait(g).unwrap();
        }
    }

    fn word(&self, pos: u64) -> usize {
        ((pos / 8) as usize) % self.headers.len()
    }

    /// Writes payload word `i` of the record at `pos`.
    ///
    /// # Safety
    ///
    /// The caller holds the reservation at `pos` and `i` is within it.
    pub(crate) unsafe fn write_payload(&self, pos: u64, i: usize, v: u64) {
        let w = (self.word(pos) + 1 + i) % self.payload.len();
        // SAFETY: the caller owns the reservation, so no other thread accesses this word
        // (loom checks exactly this claim).
        self.payload[w].with_mut(|p| unsafe { *p = v });
    }

    /// Reads payload word `i` of the committed record at `pos`.
    ///
    /// # Safety
    ///
    /// The caller is the consumer, the record is committed and `i` is within it.
    pub(crate) unsafe fn read_payload(&self, pos: u64, i: usize) -> u64 {
        let w = (self.word(pos) + 1 + i) % self.payload.len();
        // SAFETY: the record is committed and not yet released: only the consumer reads it.
        self.payload[w].with(|p| unsafe { *p })
    }

    /// Blocks until `notify` has been called since the last `wait` returned.
    #[cfg_attr(not(loom), allow(dead_code))] // the loom models' doorbell
    pub(crate) fn wait(&self) {
        let mut rung = self.bell.lock().unwrap();
        while *rung == 0 {
            rung = self.ring.wait(rung).unwrap();
        }
        *rung = 0;
    }
}

// SAFETY: `capacity` is fixed at construction and checked to be a power of two >= 16;
// `header` indexes the same atomic for the same offset; `zero` clears header and payload
// views of every word in the range.
unsafe impl Region for HeapRegion {
    const MIN_CAPACITY: u64 = 16;
    fn control(&self) -> &Control {
        &self.control
    }
    fn capacity(&self) -> u64 {
        (self.headers.len() * 8) as u64
    }
    fn header(&self, pos: u64) -> &AtomicU64 {
        &self.headers[self.word(pos)]
    }
    unsafe fn zero(&self, pos: u64, len: u64) {
        for k in 0..(len / 8) {
            let w = self.word(pos + 8 * k);
            // Relaxed: published by the consumer's Release store of its position (or, for
            // a single producer's zeroing, by its next commit's Release header store).
            self.headers[w].store(0, Relaxed);
            // SAFETY: the caller owns this range exclusively (the trait's contract).
            self.payload[w].with_mut(|p| unsafe { *p = 0 });
        }
    }
    fn notify_room(&self) {
        let _g = self.room_bell.lock().unwrap();
        // Release: as in `MmapView::notify_room`.
        self.control.wait.0.room_futex.fetch_add(1, crate::sync::Ordering::Release);
        self.room_ring.notify_all();
    }
    fn notify(&self) {
        if self.futex {
            // Release: as in `MmapView::notify`.
            self.control.wait.0.futex.fetch_add(1, crate::sync::Ordering::Release);
        }
        *self.bell.lock().unwrap() += 1;
        self.ring.notify_one();
    }
    /// Unless made [`private`](Self::private), the models stand for a ring other
    /// processes produce into, whose producers may die: claims are marked and repaired,
    /// as `repair` and its models check.
    fn producers_may_die(&self) -> bool {
        !self.private
    }
}
