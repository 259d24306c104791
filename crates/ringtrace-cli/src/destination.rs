//! Where a command writes a file: never over its own input, never half-written.
//!
//! * An output that is one of the command's sources (the same device and inode,
//!   through symbolic and hard links), or a file inside a source directory, is refused
//!   before anything is read or written.
//! * A regular file (or a name not taken yet) is written to a temporary file in the
//!   same directory (`.NAME.ringtrace-PID-N`, mode 0600, created exclusively), synced,
//!   and renamed over NAME: an interrupted or failed command leaves the old file whole.
//!   A symbolic link is followed: the file it names is replaced, the link stays.
//! * Anything else that can be written (a character device such as /dev/null, a FIFO,
//!   a socket) is opened and written in place: no temporary file, no fsync (which a
//!   character device refuses).
//! * A directory output (a CTF trace) is built beside its name and renamed into place;
//!   an existing directory is replaced only if it holds a CTF trace and nothing else
//!   (swapped atomically, then the old one removed).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::fs::{renameat_with, RenameFlags, CWD};

use crate::cleanup;
use crate::failure::Failure;

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
    let parent = real_parent(output);
    for source in sources.iter().filter(|s| s.is_dir()) {
        let (Some(parent), Ok(dir)) = (&parent, std::fs::canonicalize(source)) else { continue };
        if parent.starts_with(&dir) {
            return Err(Failure::msg(format!(
                "the output {} is inside the source directory {}: a command never writes into what it reads",
                output.display(),
                source.display()
            )));
        }
    }
    Ok(())
}

/// The canonical directory `path` would be created in.
fn real_parent(path: &Path) -> Option<PathBuf> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::canonicalize(parent).ok()
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
    /// Opens `path` for a new content.
    pub fn create(path: &Path) -> io::Result<Output> {
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => Err(io::Error::other("it is a directory")),
            Ok(m) if special(&m.file_type()) => {
                let file = OpenOptions::new().write(true).open(path)?;
                Ok(Output { file, replace: None, _cleanup: None })
            }
            _ => {
                let target = resolve(path)?;
                let (tmp, file) =
                    temp_beside(&target, |p| OpenOptions::new().write(true).create_new(true).mode(0o600).open(p))?;
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

/// The name that is replaced: `path`, or the file a symbolic link at `path` names.
fn resolve(path: &Path) -> io::Result<PathBuf> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).map_err(|e| {
            io::Error::new(e.kind(), format!("it is a symbolic link to a file that cannot be reached ({e})"))
        }),
        _ => Ok(path.to_path_buf()),
    }
}

/// Creates a fresh temporary name beside `target` with `make`, retrying names taken.
fn temp_beside<T>(target: &Path, mut make: impl FnMut(&Path) -> io::Result<T>) -> io::Result<(PathBuf, T)> {
    static N: AtomicU32 = AtomicU32::new(0);
    let name = target.file_name().ok_or_else(|| io::Error::other("it names no file"))?;
    let dir = target.parent().unwrap_or(Path::new(""));
    for _ in 0..100 {
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".ringtrace-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let tmp = dir.join(tmp_name);
        match make(&tmp) {
            Ok(t) => return Ok((tmp, t)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free temporary name beside it"))
}

/// Syncs the directory holding `path`, so that the rename survives a crash.
fn sync_parent(path: &Path) {
    if let Some(dir) = real_parent(path) {
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
}

/// Creates a ring (or any file `make` creates exclusively at the path it is given)
/// under a temporary name and renames it to `path`: over a regular file when
/// `replace`, else only if the name is still free (`RENAME_NOREPLACE`).
pub fn create_file<T>(
    path: &Path,
    replace: bool,
    make: impl FnOnce(&Path) -> Result<T, Failure>,
) -> Result<T, Failure> {
    let err = |e: io::Error| Failure::msg(format!("cannot create {}: {e}", path.display()));
    let (tmp, ()) = temp_beside(path, |p| match std::fs::symlink_metadata(p) {
        Ok(_) => Err(io::ErrorKind::AlreadyExists.into()),
        Err(_) => Ok(()),
    })
    .map_err(err)?;
    let guard = cleanup::remove_on_signal(&tmp);
    let value = make(&tmp).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    let flags = if replace { RenameFlags::empty() } else { RenameFlags::NOREPLACE };
    if let Err(e) = renameat_with(CWD, &tmp, CWD, path, flags) {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(e.into()));
    }
    drop(guard);
    sync_parent(path);
    Ok(value)
}

/// Writes a directory output (a CTF trace) with `write` into a fresh directory beside
/// `dir`, then puts it in place: renamed to a free name, or swapped with an existing
/// directory that holds a CTF trace and nothing else, which is then removed.
pub fn write_dir<T>(dir: &Path, write: impl FnOnce(&Path) -> io::Result<T>) -> Result<T, Failure> {
    let err = |e: io::Error| Failure::msg(format!("cannot write {}: {e}", dir.display()));
    let old = match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {
            if !is_ctf_dir(dir) {
                return Err(Failure::msg(format!(
                    "{} exists and is not a CTF trace: a CTF export replaces only a directory holding a CTF trace (metadata and stream files)",
                    dir.display()
                )));
            }
            true
        }
        Ok(_) => {
            return Err(Failure::msg(format!(
                "{} exists and is not a directory: a CTF trace is a directory",
                dir.display()
            )))
        }
        Err(_) => false,
    };
    let (tmp, ()) = temp_beside(dir, |p| std::fs::create_dir(p)).map_err(err)?;
    let guard = cleanup::remove_on_signal(&tmp);
    let result = write(&tmp).and_then(|v| {
        let flags = if old { RenameFlags::EXCHANGE } else { RenameFlags::NOREPLACE };
        renameat_with(CWD, &tmp, CWD, dir, flags)?;
        Ok(v)
    });
    // After an exchange the old trace sits at the temporary name; after a failure the
    // half-written one does: either way it goes.
    let _ = std::fs::remove_dir_all(&tmp);
    drop(guard);
    let value = result.map_err(err)?;
    sync_parent(dir);
    Ok(value)
}

/// Whether `dir` holds a CTF trace written by `export` and nothing else: a `metadata`
/// file starting with the TSDL signature and files named `stream-*`.
fn is_ctf_dir(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    let mut metadata = false;
    for entry in entries {
        let Ok(entry) = entry else { return false };
        let name = entry.file_name();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        match name.to_str() {
            Some("metadata") if is_file => {
                let mut head = [0u8; 10];
                use std::io::Read;
                metadata = File::open(entry.path()).and_then(|mut f| f.read_exact(&mut head)).is_ok()
                    && head == *b"/* CTF 1.8";
            }
            Some(n) if n.starts_with("stream-") && is_file => {}
            _ => return false,
        }
    }
    metadata
}
