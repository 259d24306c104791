//! A small private tmpfs, for tests of what happens when a filesystem fills up.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::mount::{mount, unmount, MountFlags, UnmountFlags};

/// A tmpfs of a given size mounted at a fresh directory under [`std::env::temp_dir`]
/// (named after the pid and a per-process counter), unmounted (`MNT_DETACH`) and removed
/// on drop, so a test that fails still leaves no mount behind. Mounting needs
/// `CAP_SYS_ADMIN`: call [`crate::have_root`] first.
///
/// ```no_run
/// let fs = ringtrace_fixtures::Tmpfs::mount(64 << 10)?;
/// let left = fs.fill()?; // a file that takes every byte the tmpfs has left
/// assert_eq!(std::fs::write(fs.path("more"), b"x").unwrap_err().raw_os_error(), Some(28)); // ENOSPC
/// std::fs::remove_file(left)?; // room again
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Creates the directory and mounts a tmpfs of `bytes` (rounded up to the page size
    /// by the kernel) on it, mode 0700.
    pub fn mount(bytes: u64) -> io::Result<Tmpfs> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ringtrace-tmpfs-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir)?;
        let options = format!("size={bytes},mode=0700");
        let data = std::ffi::CString::new(options.as_str()).expect("no NUL in the options");
        if let Err(err) = mount("tmpfs", &dir, "tmpfs", MountFlags::NOSUID | MountFlags::NODEV, Some(data.as_c_str())) {
            let _ = std::fs::remove_dir(&dir);
            return Err(io::Error::new(
                io::Error::from(err).kind(),
                format!("mount -t tmpfs -o {options} at {}: {err}", dir.display()),
            ));
        }
        Ok(Tmpfs { dir })
    }

    /// The mount point.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `name` inside the mount.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Fills the tmpfs: writes a new file (`filler-PID-N`) a page at a time until the
    /// filesystem says `ENOSPC`, and returns its path (remove it to make room again).
    /// Any other write error is returned.
    pub fn fill(&self) -> io::Result<PathBuf> {
        Self::fill_dir(&self.dir)
    }

    /// [`fill`](Self::fill) for the filesystem of `dir`, from a process that did not
    /// mount it (a child of the test).
    pub fn fill_dir(dir: &Path) -> io::Result<PathBuf> {
        static FILLERS: AtomicU32 = AtomicU32::new(0);
        let path = dir.join(format!("filler-{}-{}", std::process::id(), FILLERS.fetch_add(1, Ordering::Relaxed)));
        let mut file = std::fs::File::create_new(&path)?;
        let page = vec![0x5a_u8; rustix::param::page_size()];
        loop {
            match file.write(&page) {
                Ok(n) if n == page.len() => {}
                // A short write: the last bytes there were; the next one fails.
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => return Ok(path),
                Err(e) => return Err(io::Error::new(e.kind(), format!("filling {}: {e}", path.display()))),
            }
        }
    }

    /// Bytes the filesystem has free (`statvfs`: free blocks times the block size).
    pub fn free(&self) -> io::Result<u64> {
        let st = rustix::fs::statvfs(&self.dir)?;
        Ok(st.f_bfree * st.f_frsize)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Detached, the mount goes away once nothing holds a file in it any more (a
        // child process the test left running, a mapping); the directory underneath is
        // empty again.
        let _ = unmount(&self.dir, UnmountFlags::DETACH);
        let _ = std::fs::remove_dir(&self.dir);
    }
}
