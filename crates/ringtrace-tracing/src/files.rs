//! Files and directories private to the user that writes them: what the recorder
//! writes, and what `ringtrace-export` writes (a CTF directory), made one way.
//!
//! A recorder or an export may run as root and write where another user can write too:
//! `/tmp`, or a directory that user owns. So a file is always created new and never
//! opened through a name that exists: `O_CREAT | O_EXCL` fails on any existing name, and
//! with it "symbolic links are not followed" (POSIX `open()`); `O_NOFOLLOW` refuses a
//! symlink as well. A file or symlink planted at the name can neither receive the data
//! nor be truncated. Files are mode 0600 and directories 0700 (the umask may clear bits,
//! never add them).
//!
//! A file that replaces another ([`Partial`]) is written beside it under a fresh name,
//! then renamed over it: `rename(2)` replaces a symlink at the target, it does not
//! follow it. One dropped before [`Partial::commit`] is removed, so a failed write
//! leaves the old file, never half of a new one.
//!
//! ```
//! use std::io::Write;
//! use std::os::unix::fs::PermissionsExt;
//! use ringtrace_tracing::files::{self, Partial};
//!
//! let dir = std::env::temp_dir().join(format!("ringtrace-files-doc-{}", std::process::id()));
//! files::make_dir(&dir)?;
//! let path = dir.join("out.txt");
//!
//! let mut out = files::create_new(&path)?;
//! out.write_all(b"first")?;
//! assert_eq!(std::fs::metadata(&path)?.permissions().mode() & 0o077, 0);
//! // The name exists now: it is never opened again for writing.
//! assert_eq!(files::create_new(&path).unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
//!
//! // Replaced only once the new content is whole.
//! let mut next = Partial::create(&path)?;
//! next.write_all(b"second")?;
//! assert_eq!(std::fs::read(&path)?, b"first");
//! next.commit()?;
//! assert_eq!(std::fs::read(&path)?, b"second");
//!
//! // Dropped unfinished: removed, the old file kept.
//! let mut abandoned = Partial::create(&path)?;
//! abandoned.write_all(b"third")?;
//! let tmp = abandoned.path().to_owned();
//! drop(abandoned);
//! assert!(!tmp.exists());
//! assert_eq!(std::fs::read(&path)?, b"second");
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The mode of every file this module creates.
pub const FILE_MODE: u32 = 0o600;
/// The mode of every directory this module creates.
pub const DIR_MODE: u32 = 0o700;
/// Temporary names [`Partial::create`] tries before it gives up.
pub const PARTIAL_TRIES: u32 = 100;

/// Creates the file at `path` for writing: new (`AlreadyExists` if anything, a symlink
/// included, has the name), mode 0600.
pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

/// Makes the directory `dir`, mode 0700, unless it exists (its missing parents are
/// made as `create_dir_all` makes them, with the umask's mode).
pub fn make_dir(dir: &Path) -> io::Result<()> {
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
pub struct Partial {
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

    /// The temporary file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The temporary file's name.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Renames the file to its target, replacing what has that name.
    pub fn commit(mut self) -> io::Result<()> {
        std::fs::rename(&self.tmp, &self.target)?;
        self.committed = true;
        Ok(())
    }

    /// Renames the file to the first of `names` that names nothing, replacing nothing
    /// (`renameat2(RENAME_NOREPLACE)`; where the file system lacks it, a hard link made
    /// new, then the temporary name removed): a name taken meanwhile, even by a
    /// concurrent writer, is skipped. Returns the name.
    pub fn commit_new(mut self, names: impl IntoIterator<Item = PathBuf>) -> io::Result<PathBuf> {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        for name in names {
            let done = match renameat_with(CWD, &self.tmp, CWD, &name, RenameFlags::NOREPLACE) {
                Ok(()) => Ok(true),
                Err(rustix::io::Errno::EXIST) => Ok(false),
                Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
                    match std::fs::hard_link(&self.tmp, &name) {
                        Ok(()) => std::fs::remove_file(&self.tmp).map(|()| true),
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e.into()),
            };
            if done? {
                self.committed = true;
                return Ok(name);
            }
        }
        Err(io::Error::new(io::ErrorKind::AlreadyExists, "every name tried exists"))
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
