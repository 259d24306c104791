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
}

impl Source for File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
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
}
