//! Where a command writes a file: never over its own input, never half-written.
//!
//! * An output that is one of the command's sources (the same device and inode,
//!   through symbolic and hard links), or a file inside a source directory, is refused
//!   before anything is read or written.
//! * A regular file (or a name not taken yet) is written to a temporary file in the
//!   same directory (`.NAME.ringtrace-PID-N`, created exclusively), synced, and renamed
//!   over NAME: an interrupted or failed command leaves the old file whole. Trace data
//!   is private: the new file is mode 0600 whatever the old one's was (man pages,
//!   which are not, follow the umask).
//! * A symbolic link is followed: the file it names is replaced, the link stays. As
//!   the kernel does with `fs.protected_symlinks`, a link in a sticky directory that
//!   others may write (/tmp) is followed only if it is the caller's or the directory
//!   owner's: another user cannot point root's output at a file of root's choosing.
//! * `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` and `/proc/self/fd/N` are the open
//!   descriptor: written where it stands (a `>>` redirection keeps its content), never
//!   replaced.
//! * Anything else that can be written (a character device such as /dev/null, a FIFO,
//!   a socket) is opened and written in place: no temporary file, no fsync (which a
//!   character device refuses).
//! * A directory output (a CTF trace) is built beside its name and renamed into place;
//!   an existing directory is replaced only if it holds a CTF trace and nothing else
//!   (swapped atomically, checked again once swapped, then the old one removed).
//! * A file system without `renameat2` flags (some network file systems) gets the same
//!   guarantees another way: a new file is linked to its name (`link` fails on a name
//!   taken), a new directory renamed to a name checked free, and an existing CTF trace
//!   is refused with a message (no atomic swap there).

mod links;
mod paths;
mod place;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::cleanup;
use crate::failure::Failure;

pub use paths::directory_of;
use paths::{real_parent, sync_parent, temp_beside};
pub use place::{create_file, write_dir};

/// Refuses `output` when it is any of `sources` (same device and inode), lies inside a
/// source that is a directory, or is a directory holding a source.
pub fn refuse_source(output: &Path, sources: &[&Path]) -> Result<(), Failure> {
    let Ok(out) = std::fs::metadata(output) else {
        // A new name: it can only be a source's if it is inside a source directory.
        return inside_source_dir(output, sources);
    };
    for source in sources {
        let Ok(src) = std::fs::metadata(source) else { continue };
        if (src.dev(), src.ino()) == (out.dev(), out.ino()) {
            return Err(Failure::msg(format!(
                "the output {} is the source {} (the same file): a command never writes over what it reads",
                output.display(),
                source.display()
            )));
        }
    }
    inside_source_dir(output, sources)
}

fn inside_source_dir(output: &Path, sources: &[&Path]) -> Result<(), Failure> {
    // Where the output lands: the file a link names (the file it replaces), else the
    // name in its real directory.
    let place = std::fs::canonicalize(output).ok().or_else(|| real_parent(output));
    for source in sources.iter().filter(|s| s.is_dir()) {
        let (Some(place), Ok(dir)) = (&place, std::fs::canonicalize(source)) else { continue };
        if place.starts_with(&dir) {
            return Err(Failure::msg(format!(
                "the output {} is inside the source directory {}: a command never writes into what it reads",
                output.display(),
                source.display()
            )));
        }
    }
    Ok(())
}

/// An output file being written: a temporary file renamed into place by
/// [`commit`](Self::commit), or a device, FIFO or socket written in place.
#[derive(Debug)]
pub struct Output {
    file: File,
    /// Temporary file and the name it replaces; `None` when written in place.
    replace: Option<(PathBuf, PathBuf)>,
    _cleanup: Option<cleanup::Registered>,
}

impl Output {
    /// Opens `path` for a new content, private to the caller (mode 0600).
    pub fn create(path: &Path) -> io::Result<Output> {
        Self::create_mode(path, 0o600)
    }

    /// Opens `path` for a new content anyone may read (mode 0666 less the umask): for
    /// documentation, not trace data.
    pub fn create_public(path: &Path) -> io::Result<Output> {
        Self::create_mode(path, 0o666)
    }

    fn create_mode(path: &Path, mode: u32) -> io::Result<Output> {
        if let Some(fd) = links::descriptor(path) {
            return Ok(Output { file: links::open_descriptor(fd)?, replace: None, _cleanup: None });
        }
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => Err(io::Error::other("it is a directory")),
            Ok(m) if special(&m.file_type()) => {
                let file = OpenOptions::new().write(true).open(path)?;
                Ok(Output { file, replace: None, _cleanup: None })
            }
            _ => {
                let target = links::resolve(path)?;
                let (tmp, file) =
                    temp_beside(&target, |p| OpenOptions::new().write(true).create_new(true).mode(mode).open(p))?;
                let guard = cleanup::remove_on_signal(&tmp);
                Ok(Output { file, replace: Some((tmp, target)), _cleanup: Some(guard) })
            }
        }
    }

    /// The file to write.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Makes the content the output's: synced and renamed over the old file.
    pub fn commit(mut self) -> io::Result<()> {
        let Some((tmp, target)) = self.replace.take() else { return Ok(()) };
        let done = self.file.sync_all().and_then(|()| std::fs::rename(&tmp, &target));
        if done.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        done?;
        sync_parent(&target);
        Ok(())
    }
}

impl Drop for Output {
    /// Not committed (an error on the way): the temporary file goes, the old file stays.
    fn drop(&mut self) {
        if let Some((tmp, _)) = &self.replace {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Whether a file of this type is written in place (not replaced).
fn special(t: &std::fs::FileType) -> bool {
    t.is_char_device() || t.is_block_device() || t.is_fifo() || t.is_socket()
}
