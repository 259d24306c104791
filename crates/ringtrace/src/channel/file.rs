//! Channels in shared memory: a channel file holds a header page and one ring image per
//! producer slot ([`crate::inspect::channel`] has the layout and its one parser). Every
//! slot's ring is made when the file is (its data pages reserved when a producer first
//! takes the slot: [`Builder::create`]); a producer, in any process, takes a slot whose
//! ring has no live producer (the ring's own producer ownership, by pid, so a slot of a
//! process that died is taken over, its unfinished record stepped over), preferring
//! the slot with the fewest unread bytes, so an empty slot before one whose producer
//! left records in it.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use super::bell::ChannelBell;
use super::handle::{Builder, Channel};
use super::inner::{realtime_ns, ring_builder, short, Inner};
use super::lane::Lane;
use crate::attach::{image_len, Owners};
use crate::clock::Clock;
use crate::config::Mode;
use crate::config::Spsc;
use crate::error::Error;
use crate::inspect::channel::{ChannelFile, ChannelHeader};
use crate::inspect::RingMode;
use crate::region::file::{self, Backing};
use crate::region::reserve::{reserve_existing, slot_head, Name};
use crate::ring::RingBuf;

impl<M: Mode, C: Clock> Builder<M, C> {
    /// Shared channels: how many producers (slots, each a ring of the channel's
    /// capacity) the file holds, from 1 to 4096. Default [`crate::channel::DEFAULT_MAX_PRODUCERS`].
    pub fn max_producers(mut self, n: u32) -> Self {
        self.max_producers = n;
        self
    }

    /// Creates the channel in a new file at `path` (mode 0600; never replacing a file
    /// that exists), for producers and readers in any process
    /// ([`Channel::open`]). The file is a page plus
    /// [`max_producers`](Self::max_producers) rings long; `ringtrace stat|tail|snapshot`
    /// read it.
    ///
    /// Its space is reserved (`fallocate`) in parts: at once the header page and each
    /// slot's head (its ring's control block and first data page, which readers look
    /// at), and a slot's data pages when a producer first takes the slot
    /// ([`Channel::producer`]): so a file of 256 slots of 1 MiB takes a little over
    /// 3 MiB plus 1 MiB per slot in use, not 256 MiB. A filesystem without room for the
    /// first part is [`Error::NoSpace`] here (and no file is left), for a slot's ring
    /// at its claim.
    ///
    /// ```
    /// use ringtrace::{Channel, Wakeup};
    /// use ringtrace::clock::Monotonic;
    /// use ringtrace::config::Discard;
    ///
    /// let path = std::env::temp_dir().join(format!("chan-doc-{}.chan", std::process::id()));
    /// let channel = Channel::<Discard, Monotonic>::builder(4096).max_producers(4).create(&path, Monotonic)?;
    /// channel.output(b"made here", Wakeup::Default)?;
    ///
    /// // In another process:
    /// let theirs = Channel::<Discard, Monotonic>::open(&path)?;
    /// let mut seen = Vec::new();
    /// theirs.reader()?.drain(|r| {
    ///     seen.push(r.data.to_vec());
    ///     Ok::<_, std::convert::Infallible>(())
    /// })?;
    /// assert_eq!(seen, [b"made here".to_vec()]);
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create(self, path: impl AsRef<Path>, clock: C) -> Result<Channel<M, C>, Error> {
        let path = path.as_ref();
        let slots = self.max_producers;
        if slots == 0 || slots > crate::format::channel::MAX_SLOTS {
            return Err(Error::invalid(format!("a channel file holds 1 to 4096 producers, not {slots}")));
        }
        let ring = || ring_builder::<M>(self.capacity, self.retire_ahead);
        ring().settings()?;
        let page = rustix::param::page_size() as u64;
        let image = image_len(self.capacity);
        let header = ChannelHeader {
            version: crate::format::channel::CHANNEL_VERSION,
            mode: if M::OVERWRITE { RingMode::Overwrite } else { RingMode::Discard },
            clock: C::CODE,
            slots,
            capacity: self.capacity,
            image_len: image,
            first: page,
            calibration: clock.calibration(),
            creator_pid: crate::owner::my_pid(),
            created_ns: realtime_ns(),
        };
        // Reserved now: the header page and each slot's head (what every process
        // touches); a slot's data pages when a producer takes it (`claim_slot`), so a
        // file of 256 slots takes the space of the slots its producers use.
        let head = slot_head(file::data_offset(), image);
        let reserve: Vec<(u64, u64)> =
            std::iter::once((0, page)).chain((0..slots).map(|i| (header.ring_offset(i), head))).collect();
        let new = file::create_len(header.file_len(), &reserve, Backing::Path(path))?;
        let mut lanes = Vec::with_capacity(slots as usize);
        for i in 0..slots {
            let r = ring().init_slot_at(new.fd.as_fd(), header.ring_offset(i), path)?;
            lanes.push(Arc::new(Lane::slot(i, r)));
        }
        // The header last: where the file already has its name (no O_TMPFILE), its
        // magic tells attachers it is ready.
        let bytes = header.encode();
        let n = rustix::io::pwrite(&new.fd, &bytes, 0).map_err(Error::file("writing the channel header", path))?;
        if n != bytes.len() {
            return Err(Error::File { what: "writing the channel header", path: path.into(), source: short() });
        }
        let bell = ChannelBell::file(new.fd.as_fd()).map_err(bell_err(path))?;
        if let Some(p) = &new.link {
            file::link(new.fd.as_fd(), p)?;
        }
        Ok(self.finish(clock, lanes, Some(bell)))
    }
}

impl<M: Mode, C: Clock> Channel<M, C> {
    /// Attaches to the channel file at `path` made by [`Builder::create`] (in this or
    /// another process). The file is checked as untrusted input first: its header with
    /// [`inspect`](crate::inspect::channel)'s parser, then every slot's ring as
    /// [`RingBuf::open`] checks a ring file. Its mode and clock must be `M` and `C`, and
    /// a TSC clock's calibration usable here (else [`Error::NoInvariantTsc`]): every process
    /// stamps with the creator's calibration, so their timestamps compare exactly.
    ///
    /// The file must be this user's and writable by no other ([`Owners::Mine`]).
    ///
    /// Attaching reserves the header page, each slot's head and the whole ring of each
    /// slot ever written (a file of an older version, made sparse, is covered); a slot
    /// never written is reserved by its first producer. A filesystem without room for
    /// them is [`Error::NoSpace`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_owned_by(path, Owners::Mine)
    }

    /// [`open`](Self::open), attaching also to a file of another user when `owners` is
    /// [`Owners::Any`] (read its risks there).
    pub fn open_owned_by(path: impl AsRef<Path>, owners: Owners) -> Result<Self, Error> {
        let path = path.as_ref();
        let fd: OwnedFd = file::open_path(path)?;
        let file = File::from(fd);
        let header = *ChannelFile::from_source(&file)
            .map_err(|e| Error::invalid(format!("{}: {}", path.display(), crate::error::with_causes(&e))))?
            .header();
        let mode = if M::OVERWRITE { RingMode::Overwrite } else { RingMode::Discard };
        if header.mode != mode || header.clock != C::CODE {
            return Err(Error::invalid(format!(
                "{} holds a {} channel stamped by the {} clock, not the {} {} channel asked for",
                path.display(),
                header.mode,
                header.clock_name(),
                M::NAME,
                C::NAME
            )));
        }
        if header.image_len != image_len(header.capacity) || header.first % rustix::param::page_size() as u64 != 0 {
            return Err(Error::invalid(format!(
                "{}: ring images of {} bytes from offset {} do not fit this machine's rings of {} bytes (image {})",
                path.display(),
                header.image_len,
                header.first,
                header.capacity,
                image_len(header.capacity)
            )));
        }
        let clock = C::from_calibration(header.calibration).ok_or(Error::NoInvariantTsc)?;
        let mut lanes = Vec::with_capacity(header.slots as usize);
        for i in 0..header.slots {
            let r = RingBuf::<Spsc, M>::open_slot_at(file.as_fd(), header.ring_offset(i), owners, path)?;
            if r.capacity() != header.capacity {
                return Err(Error::invalid(format!("slot {i}'s ring is not of the channel's capacity")));
            }
            lanes.push(Arc::new(Lane::slot(i, r)));
        }
        // The header page is mapped for the bell line: backed first, as the rings were.
        reserve_existing(file.as_fd(), 0, header.first, Name::Path(path))?;
        // Version 1: no bell line (its writers never ring): the reader polls.
        let bell = match header.has_bell() {
            true => Some(ChannelBell::file(file.as_fd()).map_err(bell_err(path))?),
            false => None,
        };
        let b = Channel::<M, C>::builder(header.capacity).max_producers(header.slots);
        Ok(b.finish(clock, lanes, bell))
    }

    /// Whether the channel lives in a file shared with other processes.
    pub fn is_shared(&self) -> bool {
        self.inner.shared
    }

    /// A channel file's producer slots (its [`Builder::max_producers`]); 0 for a
    /// private channel, which has no slots.
    pub fn slots(&self) -> u32 {
        if self.inner.shared {
            self.inner.max_producers
        } else {
            0
        }
    }

    /// Slot `slot`'s ring, to read that producer's records one by one as a ring file's
    /// are: its [`consumer`](RingBuf::consumer) (in discard mode a
    /// [`Consumer`](crate::Consumer), with `iter`, `release`, `unread`, `position`,
    /// `available`, `ready`, `wait`, `is_disconnected`) and [`stats`](RingBuf::stats).
    /// For a reader that needs one producer's records in order rather than the whole
    /// channel merged by time, such as an agent that hands space back only once its
    /// records are safely elsewhere. The records keep their stamp:
    /// [`split_stamp`](Self::split_stamp) takes it off.
    ///
    /// The ring's consumer role is the one [`reader`](Self::reader) takes for the slot:
    /// a channel file's live reader attaches every slot's consumer when it is made. So
    /// while a slot's consumer is held (in any process), `reader()` fails with
    /// [`Error::ReaderAttached`] naming its holder, and while a live reader exists,
    /// every slot's `consumer()` does. As for ring files, a role held by a process that
    /// died is taken over by the next to ask; a consumer of a slot starts at the last
    /// position its previous consumer handed back. A live reader hands a ring's space
    /// back as it copies records out, before it delivers them: records it copied and
    /// did not deliver are not in the ring for a slot's consumer made after it. Records
    /// read through a slot's consumer are not counted in
    /// [`LaneStats::read`](crate::channel::LaneStats::read).
    ///
    /// [`Consumer::is_disconnected`](crate::Consumer::is_disconnected) tells, per slot,
    /// whether the slot's producer left; a slot no producer ever took is never
    /// disconnected. Attach producers with [`producer`](Self::producer) or
    /// [`output`](Channel::output), not through this ring: a producer attached to it
    /// writes records without the channel's stamp, which readers would misread.
    ///
    /// Errors: a private channel, or `slot >= slots()` ([`Error::InvalidRing`]).
    ///
    /// ```
    /// use ringtrace::{Channel, Wakeup};
    /// use ringtrace::clock::{monotonic_ns, Monotonic};
    /// use ringtrace::config::Discard;
    ///
    /// let path = std::env::temp_dir().join(format!("chan-slot-doc-{}.chan", std::process::id()));
    /// let channel = Channel::<Discard, Monotonic>::builder(4096).max_producers(2).create(&path, Monotonic)?;
    /// let before = monotonic_ns();
    /// channel.output(b"one", Wakeup::Default)?; // this thread's producer takes slot 0
    /// channel.output(b"two", Wakeup::Default)?;
    ///
    /// let ring = Channel::<Discard, Monotonic>::open(&path)?.slot_ring(0)?;
    /// let mut consumer = ring.consumer()?;
    /// let read: Vec<(Option<u64>, Vec<u8>)> = consumer
    ///     .iter()
    ///     .map(|rec| {
    ///         let (ns, payload) = channel.split_stamp(rec);
    ///         (ns, payload.to_vec())
    ///     })
    ///     .collect();
    /// assert_eq!(read.len(), 2);
    /// assert_eq!(read[1].1, b"two");
    /// assert!(read[0].0.is_some_and(|ns| ns >= before && ns <= monotonic_ns()));
    /// consumer.unread(); // not passed on: the next iter delivers them again
    /// assert_eq!(consumer.iter().count(), 2);
    /// consumer.release(); // passed on: their space goes back to the producer
    ///
    /// // The slot's consumer role is the live reader's too.
    /// assert!(matches!(channel.reader(), Err(ringtrace::Error::ReaderAttached { .. })));
    /// drop(consumer);
    /// assert!(channel.reader().is_ok());
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn slot_ring(&self, slot: u32) -> Result<RingBuf<Spsc, M>, Error> {
        if !self.inner.shared {
            return Err(Error::invalid(
                "a private channel has no slots: only a channel file's rings can be read alone",
            ));
        }
        // A channel file's lanes are its slots, made with the channel and never freed
        // (`trim_exited` and the live reader free no slot), slot `i` with id `i`.
        let reg = self.inner.registry();
        match reg.lanes.iter().find(|l| l.id == slot) {
            Some(lane) if lane.slot => Ok(lane.ring.clone()),
            _ => Err(Error::invalid(format!("slot {slot}: the channel file has {} slots", self.inner.max_producers))),
        }
    }

    /// A record of this channel read from a slot's ring ([`slot_ring`](Self::slot_ring)):
    /// its stamp in nanoseconds, `CLOCK_MONOTONIC` time base (TSC ticks converted with
    /// the channel's calibration, as readers deliver [`ChannelRecord::timestamp`]), and
    /// its payload. `None` and the whole record for a channel whose clock stamps
    /// nothing ([`NoClock`](crate::clock::NoClock)), and for a record shorter than a
    /// stamp (not written by a channel producer).
    ///
    /// [`ChannelRecord::timestamp`]: crate::channel::ChannelRecord::timestamp
    pub fn split_stamp<'a>(&self, rec: &'a [u8]) -> (Option<u64>, &'a [u8]) {
        match rec.split_first_chunk::<8>() {
            Some((stamp, payload)) if C::STAMPED => {
                (Some(self.inner.clock.raw_to_ns(u64::from_ne_bytes(*stamp))), payload)
            }
            _ => (None, rec),
        }
    }
}

fn bell_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::File { what: "mapping the channel's bell line", path: path.into(), source }
}

/// A slot's ring producer role, and the slot.
pub(crate) type Claimed<M> = (crate::producer::Producer<Spsc, M>, Arc<Lane<M>>);

impl<M: Mode, C: Clock> Inner<M, C> {
    /// A shared channel's new producer: a slot whose ring has no live producer, the
    /// one holding the fewest unread bytes first (an empty slot before one a producer
    /// left records in; among equals, the lowest slot).
    ///
    /// A slot a producer left (its handle dropped, or its process died) keeps its
    /// records: readers still read them, and a new producer that takes the slot over
    /// writes after them. Taking an empty slot first means a new producer does not
    /// start on a ring that is already full of another's unread records (discard mode:
    /// refused as `Full` while other slots stood empty) or, in overwrite mode,
    /// overwrite another's history while an empty ring was free.
    ///
    /// A slot's ring is reserved whole before its role is taken (`RingBuf::producer`):
    /// a slot without room is passed over, and if no slot could be taken for want of
    /// room the claim is that [`Error::NoSpace`] (the slots stay free).
    pub(crate) fn claim_slot(&self) -> Result<Claimed<M>, Error> {
        let mut lanes: Vec<_> = self.registry().lanes.iter().map(|l| (l.ring.stats().available, l.clone())).collect();
        lanes.sort_by_key(|&(unread, _)| unread); // stable: slot order among equals
        let mut no_space = None;
        for (_, lane) in lanes {
            // Reserves the slot's data pages before it takes the role.
            match lane.ring.producer() {
                Ok(p) => {
                    lane.reopen();
                    return Ok((p, lane));
                }
                Err(Error::ProducerAttached { .. }) => continue,
                // No room for this slot's pages: a slot reserved before (one a producer
                // left) may still be taken.
                Err(e @ (Error::NoSpace { .. } | Error::Sparse { .. })) => {
                    no_space.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(no_space.unwrap_or(Error::ChannelFull { max: self.max_producers }))
    }
}
