//! [`Source`]: where a ring file's bytes are read from.

use std::fs::File;
use std::io;

/// Positioned reads of a ring file's bytes: a [`File`] (with `pread`, never a mapping),
/// a byte image (`[u8]`, `Vec<u8>`), or a wrapper of your own (to count or fake reads).
///
/// ```
/// use ringtrace::inspect::Source;
///
/// let bytes = vec![1u8, 2, 3, 4];
/// let mut buf = [0u8; 2];
/// bytes.read_at(1, &mut buf)?;
/// assert_eq!(buf, [2, 3]);
/// assert_eq!(bytes.size()?, 4);
/// assert!(bytes.read_at(3, &mut buf).is_err()); // past the end
/// # Ok::<(), std::io::Error>(())
/// ```
pub trait Source {
    /// The source's length in bytes (a file's current size).
    fn size(&self) -> io::Result<u64>;
    /// Fills `buf` with the bytes at `offset`; an error (`UnexpectedEof`) if the source
    /// ends before.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// The first offset at or after `offset` that may hold a byte other than zero:
    /// where a sparse file's next data begins (`lseek(SEEK_DATA)`), `u64::MAX` if none
    /// does. Readers skip what lies before it. Provided: `offset` (no holes known).
    fn next_data(&self, offset: u64) -> u64 {
        offset
    }
}

impl Source for File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    /// `lseek(SEEK_DATA)` (which moves the file's offset; reads here never use it).
    fn next_data(&self, offset: u64) -> u64 {
        match rustix::fs::seek(self, rustix::fs::SeekFrom::Data(offset)) {
            Ok(at) => at,
            // No data at or after `offset`: holes up to the end.
            Err(rustix::io::Errno::NXIO) => u64::MAX,
            // A file system that cannot tell: read everything.
            Err(_) => offset,
        }
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the file ended early (it was truncated while being read?)",
                )
            } else {
                e
            }
        })
    }
}

impl Source for [u8] {
    fn size(&self) -> io::Result<u64> {
        Ok(self.len() as u64)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let range = usize::try_from(offset)
            .ok()
            .and_then(|from| Some(from..from.checked_add(buf.len())?))
            .and_then(|range| self.get(range));
        match range {
            Some(bytes) => {
                buf.copy_from_slice(bytes);
                Ok(())
            }
            None => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the image")),
        }
    }
}

impl Source for Vec<u8> {
    fn size(&self) -> io::Result<u64> {
        self.as_slice().size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.as_slice().read_at(offset, buf)
    }
}

impl<S: Source + ?Sized> Source for &S {
    fn size(&self) -> io::Result<u64> {
        (**self).size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_at(offset, buf)
    }
    fn next_data(&self, offset: u64) -> u64 {
        (**self).next_data(offset)
    }
}

/// A ring image at an offset inside a larger source (one of several rings in one
/// file): every read is shifted by `base`, and the length is what follows `base`, so
/// every check of the reader (the header, the file's size, the data area's bounds)
/// applies to the image as if it were a file of its own.
/// [`RingFile::from_source_at`](super::RingFile::from_source_at) and
/// [`RingFile::open_at`](super::RingFile::open_at) wrap their source in one.
///
/// A `base` past the end leaves an empty window (its reads fail), and a read whose
/// offset plus `base` overflows fails: neither panics.
///
/// ```
/// use ringtrace::inspect::{image::ImageBuilder, At, RingFile, RingMode, Source};
///
/// let image = ImageBuilder::new(4096, RingMode::Discard).record(b"second ring").build();
/// let mut file = vec![0xa5u8; 8192]; // whatever comes before the ring image
/// file.extend_from_slice(&image);
///
/// let window = At::new(&file, 8192);
/// assert_eq!(window.size()?, image.len() as u64);
/// let ring = RingFile::from_source(window).expect("a ring image at 8192");
/// let records = ring.records().expect("its records");
/// assert_eq!(records.iter().next().unwrap().payload, b"second ring");
///
/// assert_eq!(At::new(&file, 1 << 40).size()?, 0); // past the end: empty
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At<S> {
    /// The whole source (the file holding the ring image).
    pub source: S,
    /// Where the ring image starts in `source`.
    pub base: u64,
}

impl<S> At<S> {
    /// The ring image at `base` in `source`.
    pub fn new(source: S, base: u64) -> Self {
        At { source, base }
    }
}

impl<S: Source> Source for At<S> {
    fn size(&self) -> io::Result<u64> {
        Ok(self.source.size()?.saturating_sub(self.base))
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let at = self.base.checked_add(offset).ok_or_else(|| {
            io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the source (offset overflows)")
        })?;
        self.source.read_at(at, buf)
    }
    fn next_data(&self, offset: u64) -> u64 {
        match self.base.checked_add(offset) {
            Some(at) => self.source.next_data(at).saturating_sub(self.base).max(offset),
            None => offset,
        }
    }
}
