//! Names beside an output: the real directory a new name would be made in, fresh
//! temporary names, and syncing the directory once a name is in place.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The canonical directory `path` would be created in.
pub(super) fn real_parent(path: &Path) -> Option<PathBuf> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::canonicalize(parent).ok()
}

/// Refuses a name whose directory is missing: `the directory DIR does not exist`, or
/// `DIR is not a directory`, rather than the bare ENOENT or ENOTDIR of the first file
/// made there (a temporary name the caller never gave). Any other trouble with the
/// directory is left to that file's creation to say.
pub fn directory_of(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => return Ok(()),
    };
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            Err(io::Error::new(io::ErrorKind::NotADirectory, format!("{} is not a directory", dir.display())))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err(io::Error::new(e.kind(), format!("the directory {} does not exist", dir.display())))
        }
        Err(e) if e.kind() == io::ErrorKind::NotADirectory => Err(io::Error::new(
            e.kind(),
            format!("the directory {} does not exist (a part of its path is not a directory)", dir.display()),
        )),
        _ => Ok(()),
    }
}

/// Creates a fresh temporary name beside `target` with `make`, retrying names taken.
pub(super) fn temp_beside<T>(target: &Path, mut make: impl FnMut(&Path) -> io::Result<T>) -> io::Result<(PathBuf, T)> {
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
pub(super) fn sync_parent(path: &Path) {
    if let Some(dir) = real_parent(path) {
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
}
