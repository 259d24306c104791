//! The files and directories the CTF export writes, private to the user that exports
//! (as the tracing layer's own files are).
//!
//! An export may run as root and write where another user can write too: `/tmp`, or a
//! directory that user owns. So a file is always created new and never opened through a
//! name that exists: `O_CREAT | O_EXCL` fails on any existing name, and with it "symbolic
//! links are not followed" (POSIX `open()`); `O_NOFOLLOW` refuses a symlink as well.
//! Files are mode 0600 and directories 0700 (the umask may clear bits, never add them).
//! A file ([`Partial`]) is written beside its name under a fresh one, then renamed over
//! it: `rename(2)` replaces a symlink at the target, it does not follow it.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The mode of every file the export creates.
const FILE_MODE: u32 = 0o600;
/// The mode of every directory the export creates.
const DIR_MODE: u32 = 0o700;
/// Temporary names [`Partial::create`] tries before it gives up.
const PARTIAL_TRIES: u32 = 100;

/// Creates the file at `path` for writing: new (`AlreadyExists` if anything, a symlink
/// included, has the name), mode 0600.
pub(crate) fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

/// Makes the directory `dir`, mode 0700, unless it exists (its missing parents are
/// made as `create_dir_all` makes them, with the umask's mode).
pub(crate) fn make_dir(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        r => r,
    }
}

/// A new file written beside the name it will replace, then renamed over it by
/// [`commit`](Self::commit); removed if dropped before.
#[derive(Debug)]
pub(crate) struct Partial {
    file: File,
    tmp: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl Partial {
    /// Creates the temporary file `TARGET.partial.PID.N` ([`create_new`]: mode 0600,
    /// never through an existing name), where PID is this process's id and N the next
    /// value of a counter of this process; names taken are skipped, up to
    /// [`PARTIAL_TRIES`] of them.
    pub fn create(target: &Path) -> io::Result<Partial> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let pid = std::process::id();
        for _ in 0..PARTIAL_TRIES {
            let mut name = target.as_os_str().to_owned();
            name.push(format!(".partial.{pid}.{}", NEXT.fetch_add(1, Ordering::Relaxed)));
            let tmp = PathBuf::from(name);
            match create_new(&tmp) {
                Ok(file) => return Ok(Partial { file, tmp, target: target.into(), committed: false }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("the {PARTIAL_TRIES} temporary names tried beside it exist"),
        ))
    }

    /// Renames the file to its target, replacing what has that name.
    pub fn commit(mut self) -> io::Result<()> {
        std::fs::rename(&self.tmp, &self.target)?;
        self.committed = true;
        Ok(())
    }
}

impl Write for Partial {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
