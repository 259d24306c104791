//! Ring files: creating them (memfd, or a named file created exclusively, mode 0600,
//! never through a symlink, its space reserved ([`super::reserve`]), and visible only
//! once initialized), checking a file another process made before mapping it, and
//! handing a memfd to another process.
//!
//! Everything read here comes from a file some other process wrote, so every field is
//! checked against what this build can map before anything is mapped: a bad file is an
//! [`Error::InvalidRing`] saying what is wrong, never a fault.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use rustix::fs::{
    fcntl_add_seals, fstat, ftruncate, linkat, memfd_create, open, AtFlags, FileType, MemfdFlags, Mode, OFlags,
    SealFlags, CWD,
};
use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags,
};

use super::reserve::{reserve_new, Name};
use crate::error::Error;
use crate::format::control::CONTROL_SIZE;
use crate::format::control::FD_HELLO;

/// Where a new ring lives.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Backing<'a> {
    /// A memfd used by this process only; eventfd doorbell.
    Private,
    /// A memfd to hand to other processes; futex doorbell.
    Memfd,
    /// A named file; futex doorbell.
    Path(&'a Path),
}

/// A new ring's file, sized, not yet initialized.
pub(crate) struct NewFile {
    pub(crate) fd: OwnedFd,
    /// A named ring made as an unnamed `O_TMPFILE` in its directory: it gets its name
    /// (`link`) only after it is initialized, so no process ever opens half a ring.
    pub(crate) link: Option<PathBuf>,
}

/// The data area's offset in a ring file of this build: the control block rounded up
/// to the page size.
pub(crate) fn data_offset() -> u64 {
    CONTROL_SIZE.next_multiple_of(rustix::param::page_size()) as u64
}

/// Bytes a ring image of `capacity` data bytes takes in a file (its control block
/// rounded up to a page, then its data area), rounded up to the page size: where the
/// next image can start. Saturates for capacities no ring has.
pub(crate) fn image_len(capacity: u64) -> u64 {
    let page = rustix::param::page_size() as u64;
    let len = data_offset().saturating_add(capacity);
    len.checked_next_multiple_of(page).unwrap_or(len & !(page - 1))
}

/// Creates the file of a ring of `capacity` data bytes.
pub(crate) fn create(capacity: u64, backing: Backing<'_>) -> Result<NewFile, Error> {
    let len = image_len(capacity);
    create_len(len, &[(0, len)], backing)
}

/// Creates a file of `len` bytes (a ring file, or a channel file holding several ring
/// images), zero-filled, the way [`create`] describes, the `(offset, len)` ranges of
/// `reserve` reserved ([`reserve_new`]: a ring file's whole, a channel file's header
/// and slot heads): a filesystem without room for them is [`Error::NoSpace`], and no
/// file is left.
pub(crate) fn create_len(len: u64, reserve: &[(u64, u64)], backing: Backing<'_>) -> Result<NewFile, Error> {
    let path = match backing {
        Backing::Private | Backing::Memfd => {
            let fd = memfd_create("ringtrace", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
                .map_err(Error::io("memfd_create"))?;
            ftruncate(&fd, len).map_err(Error::io("ftruncate of the ring's memfd"))?;
            // Its pages too: a memfd counts against tmpfs and memory limits like a file.
            reserve_new(fd.as_fd(), len, reserve, Name::Memfd)?;
            // No process that gets this memfd can shrink it under a mapping (SIGBUS) or
            // grow it; receivers check these seals (`check_file_at`).
            fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
                .map_err(Error::io("sealing the ring's memfd"))?;
            return Ok(NewFile { fd, link: None });
        }
        Backing::Path(path) => path,
    };
    let mode = Mode::RUSR | Mode::WUSR;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // An unnamed file in the target directory, linked under its name once initialized.
    match open(dir, OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC, mode) {
        Ok(fd) => {
            ftruncate(&fd, len).map_err(Error::file("sizing ring file", path))?;
            // Unnamed, the file goes away with its descriptor if this fails.
            reserve_new(fd.as_fd(), len, reserve, Name::Path(path))?;
            // Fail early, before the caller initializes it, if the name is taken.
            if std::fs::symlink_metadata(path).is_ok() {
                return Err(Error::File { what: "creating ring file", path: path.into(), source: exists() });
            }
            Ok(NewFile { fd, link: Some(path.to_path_buf()) })
        }
        // Filesystems without O_TMPFILE: create the name exclusively (never through a
        // symlink); attachers refuse it until its magic is stored.
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::ISDIR | rustix::io::Errno::INVAL) => {
            let flags = OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::RDWR | OFlags::CLOEXEC;
            let fd = open(path, flags, mode).map_err(Error::file("creating ring file", path))?;
            let sized = ftruncate(&fd, len)
                .map_err(Error::file("sizing ring file", path))
                .and_then(|()| reserve_new(fd.as_fd(), len, reserve, Name::Path(path)));
            if let Err(e) = sized {
                let _ = std::fs::remove_file(path);
                return Err(e);
            }
            Ok(NewFile { fd, link: None })
        }
        Err(e) => Err(Error::file("creating ring file in the directory of", path)(e)),
    }
}

fn exists() -> std::io::Error {
    std::io::Error::from(std::io::ErrorKind::AlreadyExists)
}

/// Gives an initialized `O_TMPFILE` ring its name: atomically, and only if the name is
/// free (`linkat` never replaces an existing name, symlink or not), so of two processes
/// racing to create one ring file exactly one succeeds.
pub(crate) fn link(fd: BorrowedFd<'_>, path: &Path) -> Result<(), Error> {
    let proc_path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
    linkat(CWD, proc_path.as_str(), CWD, path, AtFlags::SYMLINK_FOLLOW).map_err(Error::file("naming ring file", path))
}

/// Opens a named ring file for attaching: read-write (a consumer writes its position
/// into the control block), refusing anything but a regular file.
pub(crate) fn open_path(path: &Path) -> Result<OwnedFd, Error> {
    // NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
    let fd = open(path, OFlags::RDWR | OFlags::CLOEXEC | OFlags::NONBLOCK, Mode::empty())
        .map_err(Error::file("opening ring file", path))?;
    Ok(fd)
}

/// Reads `buf.len()` bytes of `fd` at `offset` (retrying short and interrupted reads).
pub(crate) fn pread_exact(fd: BorrowedFd<'_>, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pread(fd, &mut buf[done..], offset + done as u64) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Checks that a ring image may start at `offset` of a file of `len` bytes: a multiple
/// of the page size (it is mapped from there), before the end of the file (at offset 0,
/// the header check says how much too short the file is).
pub(crate) fn check_offset(offset: u64, len: u64) -> Result<(), Error> {
    let page = rustix::param::page_size() as u64;
    if offset % page != 0 {
        return Err(Error::invalid(format!("ring image offset {offset} is not a multiple of the page size ({page})")));
    }
    if offset != 0 && offset >= len {
        return Err(Error::invalid(format!(
            "ring image offset {offset} is at or past the end of the file ({len} bytes)"
        )));
    }
    Ok(())
}

/// Checks, before a fresh ring image of `capacity` bytes is initialized at `offset` of
/// `fd`: a regular file, a page-aligned offset, room for the whole image before the end
/// of the file, and a control block of zeroes there (not a ring already, nor anything
/// else: the image is initialized in place, over the zeroes a new file is made of).
pub(crate) fn check_room(fd: BorrowedFd<'_>, offset: u64, capacity: u64) -> Result<(), Error> {
    let st = fstat(fd).map_err(Error::io("fstat of the ring file"))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Error::invalid("not a regular file"));
    }
    let len = u64::try_from(st.st_size).unwrap_or(0);
    check_offset(offset, len)?;
    let need = image_len(capacity);
    if offset.checked_add(need).is_none_or(|end| end > len) {
        return Err(Error::invalid(format!(
            "a ring image of {need} bytes at offset {offset} does not fit in the file ({len} bytes)"
        )));
    }
    let mut block = vec![0u8; CONTROL_SIZE];
    pread_exact(fd, offset, &mut block).map_err(|e| Error::Io { what: "reading the ring file", source: e })?;
    if block.iter().any(|&b| b != 0) {
        return Err(Error::invalid(format!(
            "the file is not zero-filled at offset {offset}: a ring image is only initialized over zeroes"
        )));
    }
    Ok(())
}

/// Sends `fd` over `sock` (`SCM_RIGHTS`).
pub(crate) fn send_fd(sock: &UnixStream, fd: BorrowedFd<'_>) -> Result<(), Error> {
    let fds = [fd];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    if !cmsg.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(Error::io("preparing SCM_RIGHTS")(rustix::io::Errno::NOBUFS));
    }
    let n = sendmsg(sock.as_fd(), &[IoSlice::new(&FD_HELLO)], &mut cmsg, SendFlags::NOSIGNAL)
        .map_err(Error::io("sending the ring's memfd"))?;
    if n != FD_HELLO.len() {
        return Err(Error::io("sending the ring's memfd")(rustix::io::Errno::MSGSIZE));
    }
    Ok(())
}

/// Receives a descriptor sent with [`send_fd`].
pub(crate) fn recv_fd(sock: &UnixStream) -> Result<OwnedFd, Error> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = RecvAncillaryBuffer::new(&mut space);
    let mut buf = [0u8; 8];
    let msg = recvmsg(sock.as_fd(), &mut [IoSliceMut::new(&mut buf)], &mut cmsg, RecvFlags::CMSG_CLOEXEC)
        .map_err(Error::io("receiving a ring's memfd"))?;
    let mut got = None;
    for m in cmsg.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = m {
            for fd in fds {
                got.get_or_insert(fd); // extra descriptors are closed as they drop
            }
        }
    }
    match got {
        Some(fd) if msg.bytes == FD_HELLO.len() && buf == FD_HELLO => Ok(fd),
        Some(_) => Err(Error::invalid("the message with the descriptor is not a ringtrace hand-over")),
        None => Err(Error::invalid("no descriptor received (the peer closed, or sent none)")),
    }
}
