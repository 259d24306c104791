//! [`RingFile`]: a ring file (or a byte image of one) opened for reading.

use std::fs::File;
use std::path::Path;

use super::header::{Header, RingMode};
use super::records::{AtUnfinished, Records};
use super::source::{At, Source};
use super::state::State;
use crate::error::FormatError;
use crate::format::control::CONTROL_SIZE;
use crate::format::offsets as fields;
use crate::wait::Patience;

/// How long [`RingFile::records`] reads a live ring again when producers lapped it
/// while it was copied, before it gives up with [`FormatError::Overwritten`].
const READ_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// A ring file (or a byte image of one) opened for reading, its header checked.
///
/// Cheap to keep open: every [`state`](Self::state) or [`records`](Self::records) call
/// reads the file again.
#[derive(Debug)]
pub struct RingFile<S> {
    source: S,
    header: Header,
    /// The meta line as it was when opened: a later read that finds it changed fails
    /// with [`FormatError::HeaderChanged`] instead of using a stale capacity.
    meta: Vec<u8>,
}

impl RingFile<File> {
    /// Opens the ring file at `path` read-only and checks its header.
    ///
    /// Refuses anything but a regular file (symbolic links are followed) before reading
    /// it: a FIFO, a directory, a device such as `/dev/zero`. The file is opened with
    /// `O_NONBLOCK`, so a path swapped for a FIFO after the check cannot block either.
    ///
    /// ```no_run
    /// use ringtrace::inspect::RingFile;
    ///
    /// let ring = RingFile::open("/dev/shm/app.ring")?;
    /// println!("{} bytes, {} mode", ring.header().capacity, ring.header().mode);
    /// # Ok::<(), ringtrace::inspect::FormatError>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<RingFile<File>, FormatError> {
        RingFile::from_source(open_regular(path.as_ref())?)
    }
}

impl RingFile<At<File>> {
    /// Opens the ring image at `offset` in the file at `path` (one of several rings in
    /// one file), with [`open`](RingFile::open)'s checks of the file and
    /// [`from_source_at`](RingFile::from_source_at)'s of the offset.
    pub fn open_at(path: impl AsRef<Path>, offset: u64) -> Result<RingFile<At<File>>, FormatError> {
        RingFile::from_source_at(open_regular(path.as_ref())?, offset)
    }
}

/// Opens `path` read-only and nonblocking, refusing anything but a regular file.
pub(super) fn open_regular(path: &Path) -> Result<File, FormatError> {
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(FormatError::io(format!("cannot open {shown}")))?;
    check_regular(&meta, &shown)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(FormatError::io(format!("cannot open {shown}")))?;
    let meta = file.metadata().map_err(FormatError::io(format!("cannot stat {shown}")))?;
    check_regular(&meta, &shown)?;
    Ok(file)
}

fn check_regular(meta: &std::fs::Metadata, path: &str) -> Result<(), FormatError> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let kind = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    };
    Err(FormatError::NotRegular { path: path.to_owned(), kind })
}

impl<S: Source> RingFile<S> {
    /// Reads and checks the header of a ring held by `source` (a [`File`], a
    /// `Vec<u8>`, a `&[u8]`, or your own [`Source`]).
    pub fn from_source(source: S) -> Result<RingFile<S>, FormatError> {
        let len = source.size().map_err(FormatError::io("cannot get the ring file's size"))?;
        if len < CONTROL_SIZE as u64 {
            return Err(FormatError::TooSmall { len, need: CONTROL_SIZE as u64 });
        }
        let mut meta = vec![0u8; fields::META_LEN];
        source.read_at(0, &mut meta).map_err(FormatError::io("cannot read the ring header"))?;
        let header = Header::parse(&meta, len)?;
        Ok(RingFile { source, header, meta })
    }

    /// Reads and checks the header of the ring image at `offset` in `source` (one of
    /// several rings in one file): the ring is read through [`At`], so every offset and
    /// length the reader checks is relative to the image. An offset at or past the end
    /// of the source is [`FormatError::OffsetPastEnd`]; the image may be followed by
    /// other bytes.
    ///
    /// ```
    /// use ringtrace::inspect::{image::ImageBuilder, FormatError, RingFile, RingMode};
    ///
    /// let mut file = vec![0u8; 4096]; // a header page of the file's own
    /// file.extend(ImageBuilder::new(4096, RingMode::Overwrite).record(b"x").build());
    /// let ring = RingFile::from_source_at(&file, 4096)?;
    /// assert_eq!(ring.state()?.committed, 1);
    /// let past = RingFile::from_source_at(&file, 1 << 20).unwrap_err();
    /// assert!(matches!(past, FormatError::OffsetPastEnd { .. }));
    /// # Ok::<(), FormatError>(())
    /// ```
    pub fn from_source_at(source: S, offset: u64) -> Result<RingFile<At<S>>, FormatError> {
        let len = source.size().map_err(FormatError::io("cannot get the ring file's size"))?;
        if offset >= len {
            return Err(FormatError::OffsetPastEnd { offset, len });
        }
        RingFile::from_source(At::new(source, offset))
    }

    /// The header, as checked when the file was opened.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The source the ring is read from.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// Reads the control block again and checks that its header is the one opened.
    fn read_control(&self) -> Result<Vec<u8>, FormatError> {
        let mut block = vec![0u8; CONTROL_SIZE];
        self.source.read_at(0, &mut block).map_err(FormatError::io("cannot read the ring's control block"))?;
        if block[..fields::META_LEN] != self.meta[..] {
            return Err(FormatError::HeaderChanged);
        }
        Ok(block)
    }

    /// Reads the ring's positions and counters, and checks the positions.
    ///
    /// A live ring moves between the reads; positions that disagree are read again a
    /// few times before the call gives up with [`FormatError::Positions`].
    ///
    /// ```
    /// use ringtrace::inspect::{image::ImageBuilder, RingFile, RingMode};
    ///
    /// let image = ImageBuilder::new(4096, RingMode::Discard).record(b"abc").build();
    /// let state = RingFile::from_source(image)?.state()?;
    /// assert_eq!((state.consumer_read, state.producer_pos), (0, 16));
    /// # Ok::<(), ringtrace::inspect::FormatError>(())
    /// ```
    pub fn state(&self) -> Result<State, FormatError> {
        let mode = self.header.mode;
        // A live ring's words move between the reads: read again while they move, and
        // report an inconsistency that stays put (`wait::settle`).
        crate::wait::settle(|| {
            let block = self.read_control()?;
            // The producer line again, after the consumer and overwrite lines: positions
            // only grow, so the producer position read last is at or past the others.
            let mut line = vec![0u8; fields::PRODUCER_LINE_LEN];
            self.source
                .read_at(fields::PRODUCER_LINE_AT as u64, &mut line)
                .map_err(FormatError::io("cannot read the ring's producer position"))?;
            let s = State::from_block(&block, &line, mode);
            let why = s.check(mode, self.header.capacity).err().map(FormatError::Positions);
            Ok((s, why))
        })
    }

    /// The records the ring holds now, oldest first: those not consumed yet (discard
    /// mode) or not overwritten (overwrite mode). Unfinished and discarded records are
    /// stepped over and counted; a header no producer could have written ends the walk
    /// ([`Records::corrupt`]).
    ///
    /// A live overwrite ring whose producers lap it while it is copied, leaving no
    /// committed record intact, is read again for up to 200 ms, then
    /// [`FormatError::Overwritten`]: a ring that holds committed records is never read
    /// back empty.
    ///
    /// ```
    /// use ringtrace::inspect::{image::ImageBuilder, RingFile, RingMode};
    ///
    /// // Wrapped: the third record starts 8 bytes before the end of the data area.
    /// let image = ImageBuilder::new(4096, RingMode::Overwrite)
    ///     .start(4096 - 40)
    ///     .record(b"one")
    ///     .discarded(b"two")
    ///     .record(b"three, wrapped")
    ///     .busy(5)
    ///     .build();
    /// let records = RingFile::from_source(image)?.records()?;
    /// let payloads: Vec<&[u8]> = records.iter().map(|r| r.payload).collect();
    /// assert_eq!(payloads, [&b"one"[..], &b"three, wrapped"[..]]);
    /// assert_eq!((records.discarded(), records.unfinished_count()), (1, 1));
    /// # Ok::<(), ringtrace::inspect::FormatError>(())
    /// ```
    pub fn records(&self) -> Result<Records, FormatError> {
        self.read_records(None, AtUnfinished::Skip)
    }

    /// The records at or after position `from` (a record boundary: 0, or the
    /// [`Records::resume_at`] of a previous call), for a follower such as
    /// `ringtrace tail --follow`. Stops at the first unfinished record (read it again
    /// later) if `stop_at_unfinished`. If records between `from` and the oldest one
    /// held are gone, [`Records::missed_bytes`] says how many bytes of them.
    ///
    /// ```
    /// use ringtrace::inspect::{image::ImageBuilder, RingFile, RingMode};
    ///
    /// let image = ImageBuilder::new(4096, RingMode::Discard).record(b"a").record(b"b").build();
    /// let ring = RingFile::from_source(image)?;
    /// let all = ring.records()?;
    /// let first_end = all.iter().next().unwrap().end();
    /// let rest = ring.records_from(first_end, true)?;
    /// assert_eq!(rest.iter().map(|r| r.payload).collect::<Vec<_>>(), [b"b"]);
    /// assert_eq!(rest.resume_at(), all.end());
    /// # Ok::<(), ringtrace::inspect::FormatError>(())
    /// ```
    pub fn records_from(&self, from: u64, stop_at_unfinished: bool) -> Result<Records, FormatError> {
        if from % 8 != 0 {
            return Err(FormatError::Unaligned(from));
        }
        let at = if stop_at_unfinished { AtUnfinished::Stop } else { AtUnfinished::Skip };
        self.read_records(Some(from), at)
    }

    /// `from`: `None` for the whole window.
    ///
    /// Copy, then read the positions again, then walk: the window's start as read after
    /// the copy (`lo2`: the overwrite position, or the consumer's) is a record boundary,
    /// and every byte copied at or past it is as the producers left it (space is
    /// reclaimed only after that position has passed it), so the walk starts there. A
    /// walk from the start read before the copy could meet the middle of a record
    /// written over the reclaimed space, take it for a damaged header and stop, leaving
    /// the intact records after it unread. When the copy of an overwrite ring holds no
    /// intact committed record (the producers lapped the ring while it was copied), the
    /// ring is read again, for at most [`READ_WAIT`], then [`FormatError::Overwritten`]:
    /// never no records for a ring that holds some.
    fn read_records(&self, from: Option<u64>, at_unfinished: AtUnfinished) -> Result<Records, FormatError> {
        let h = &self.header;
        let mut patience = Patience::new(READ_WAIT);
        let began = std::time::Instant::now();
        loop {
            let s1 = self.state()?;
            let (lo, hi) = s1.window(h.mode);
            if let Some(from) = from.filter(|&f| f > hi) {
                return Err(FormatError::PastEnd { from, end: hi });
            }
            let start = lo.max(from.unwrap_or(0));
            let bytes = self.read_data(start, hi)?;
            let s2 = self.state()?;
            let (lo2, _) = s2.window(h.mode);
            // Overwrite mode only (in discard mode the space was consumed, and a ring
            // emptied by its consumer is empty), and only when committed records were
            // given up during the copy (discarded ones prove nothing).
            let lapped = h.mode == RingMode::Overwrite && lo2 > start && s2.overwritten > s1.overwritten;
            if lapped && lo2 >= hi && hi > start {
                // Everything copied was reclaimed, and perhaps rewritten, meanwhile.
                if !patience.wait() {
                    return Err(FormatError::Overwritten { waited: began.elapsed() });
                }
                continue;
            }
            let walk_from = start.max(lo2).min(hi);
            let mut out = Records::walk_copy(h, &s1, from, start, walk_from, bytes, at_unfinished);
            out.drop_reclaimed(h.mode, &s1, &s2, from);
            if lapped && out.is_empty() && out.corrupt().is_none() {
                // Lapped but for records still being written: the ring holds committed
                // records again by now.
                if !patience.wait() {
                    return Err(FormatError::Overwritten { waited: began.elapsed() });
                }
                continue;
            }
            return Ok(out);
        }
    }

    /// Copies the data of positions `[from, to)` (`to - from <= capacity`, checked by
    /// [`State`]) in one or two ranges (the second when the range wraps around the end of
    /// the data area).
    ///
    /// Memory follows what the file holds, not what its header declares: the copy is
    /// zeroed memory the allocator maps lazily (`vec![0; n]` asks for zeroed pages),
    /// and only the pages that hold a byte other than zero are written, so a sparse file
    /// declaring a ring of 4 GiB over a few pages of data takes a few pages of memory.
    /// Its holes are not even read (`Source::next_data`).
    fn read_data(&self, from: u64, to: u64) -> Result<Vec<u8>, FormatError> {
        let cap = self.header.capacity;
        let len = to.saturating_sub(from).min(cap);
        let n = usize::try_from(len).map_err(|_| FormatError::OutOfMemory(len))?;
        // A fallible look first: `vec!` aborts the process where memory is refused.
        Vec::<u8>::new().try_reserve_exact(n).map_err(|_| FormatError::OutOfMemory(len))?;
        let mut bytes = vec![0u8; n];
        let first_at = from & (cap - 1);
        let first_len = (cap - first_at).min(len) as usize;
        let (a, b) = bytes.split_at_mut(first_len);
        let what = "cannot read the ring's data area";
        self.read_sparse(self.header.data_offset + first_at, a).map_err(FormatError::io(what))?;
        if !b.is_empty() {
            self.read_sparse(self.header.data_offset, b).map_err(FormatError::io(what))?;
        }
        Ok(bytes)
    }

    /// Reads `dst.len()` bytes at `offset` into `dst` (zeroed), writing only its pages
    /// that get a byte other than zero, and reading none of the source's holes.
    fn read_sparse(&self, offset: u64, dst: &mut [u8]) -> std::io::Result<()> {
        const CHUNK: usize = 1 << 20;
        const PAGE: usize = 4096;
        // What is skipped must lie inside the file: a file shorter than the range is
        // an error, as a read past its end would be.
        if self.source.size()? < offset.saturating_add(dst.len() as u64) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the file ended early (it was truncated while being read?)",
            ));
        }
        let mut scratch = vec![0u8; CHUNK.min(dst.len())];
        let mut at = 0usize;
        // Each pass moves `at` forward by a chunk, or to the next data (or the end).
        while at < dst.len() {
            let data = self.source.next_data(offset + at as u64).saturating_sub(offset);
            let data = usize::try_from(data).unwrap_or(usize::MAX).min(dst.len());
            at = at.max(data / PAGE * PAGE);
            if at >= dst.len() {
                break;
            }
            let end = (at + CHUNK).min(dst.len());
            let buf = &mut scratch[..end - at];
            self.source.read_at(offset + at as u64, buf)?;
            for (out, page) in dst[at..end].chunks_mut(PAGE).zip(buf.chunks(PAGE)) {
                if page.iter().any(|&b| b != 0) {
                    out.copy_from_slice(page);
                }
            }
            at = end;
        }
        Ok(())
    }
}
