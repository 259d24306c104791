//! Putting a finished output in place: renamed over a regular file, to a name still
//! free, or swapped with the CTF trace it replaces; with fallbacks for file systems
//! without `renameat2` flags.

use std::fs::File;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use rustix::fs::{renameat_with, RenameFlags, CWD};

use super::paths::{directory_of, sync_parent, temp_beside};
use crate::cleanup;
use crate::failure::Failure;

/// Creates a ring (or any file `make` creates exclusively at the path it is given)
/// under a temporary name and renames it to `path`: over a regular file when
/// `replace`, else only if the name is still free (`RENAME_NOREPLACE`).
pub fn create_file<T>(
    path: &Path,
    replace: bool,
    make: impl FnOnce(&Path) -> Result<T, Failure>,
) -> Result<T, Failure> {
    let err = |e: io::Error| Failure::msg(format!("cannot create {}: {e}", path.display()));
    directory_of(path).map_err(err)?;
    let (tmp, ()) = temp_beside(path, |p| match std::fs::symlink_metadata(p) {
        Ok(_) => Err(io::ErrorKind::AlreadyExists.into()),
        Err(_) => Ok(()),
    })
    .map_err(err)?;
    let guard = cleanup::remove_on_signal(&tmp);
    let value = make(&tmp).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    let placed = if replace { std::fs::rename(&tmp, path) } else { rename_noreplace(&tmp, path, false) };
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(e));
    }
    drop(guard);
    sync_parent(path);
    Ok(value)
}

/// Writes a directory output (a CTF trace) with `write` into a fresh directory beside
/// `dir`, then puts it in place: renamed to a free name, or swapped with an existing
/// directory that holds a CTF trace and nothing else, which is then removed.
pub fn write_dir<T>(dir: &Path, write: impl FnOnce(&Path) -> io::Result<T>) -> Result<T, Failure> {
    let err = |e: io::Error| {
        Failure::from_io(e).unwrap_or_else(|e| Failure::msg(format!("cannot write {}: {e}", dir.display())))
    };
    directory_of(dir).map_err(err)?;
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
    let (tmp, ()) = temp_beside(dir, |p| std::fs::DirBuilder::new().mode(0o700).create(p)).map_err(err)?;
    let guard = cleanup::remove_on_signal(&tmp);
    let mut theirs = false;
    let result = write(&tmp).and_then(|v| {
        if old {
            swap_in(&tmp, dir, &mut theirs)?;
        } else {
            rename_noreplace(&tmp, dir, true)?;
        }
        Ok(v)
    });
    drop(guard);
    // After an exchange the old trace sits at the temporary name; after a failure the
    // half-written one does: either way it goes (unless what sits there is not ours).
    if !theirs {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    let value = result.map_err(err)?;
    sync_parent(dir);
    Ok(value)
}

/// Renames `from` to `to` only if `to` is free. Where the file system has no
/// `RENAME_NOREPLACE` (EINVAL), a file is hard-linked to the name (which fails on a
/// name taken) and its temporary name removed; a directory, which cannot be linked, is
/// renamed once the name is seen free (`rename` would replace an empty directory
/// created in between, nothing else).
fn rename_noreplace(from: &Path, to: &Path, dir: bool) -> io::Result<()> {
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Err(rustix::io::Errno::INVAL) => no_renameat2_noreplace(from, to, dir),
        r => r.map_err(Into::into),
    }
}

/// [`rename_noreplace`] without `renameat2`.
fn no_renameat2_noreplace(from: &Path, to: &Path, dir: bool) -> io::Result<()> {
    if dir {
        if std::fs::symlink_metadata(to).is_ok() {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        std::fs::rename(from, to)
    } else {
        std::fs::hard_link(from, to)?;
        std::fs::remove_file(from)
    }
}

/// Swaps the new CTF trace `tmp` with the one at `dir` (`RENAME_EXCHANGE`), then checks
/// that what came out is a CTF trace: if the directory was replaced by something else
/// between the first look and the swap, it is swapped back and refused.
fn swap_in(tmp: &Path, dir: &Path, theirs: &mut bool) -> io::Result<()> {
    match renameat_with(CWD, tmp, CWD, dir, RenameFlags::EXCHANGE) {
        Ok(()) => {}
        Err(rustix::io::Errno::INVAL) => {
            return Err(io::Error::other(
                "the file system cannot swap directories atomically (no RENAME_EXCHANGE): remove the old trace first, or export to a new name",
            ))
        }
        Err(e) => return Err(e.into()),
    }
    if is_ctf_dir(tmp) {
        return Ok(());
    }
    if let Err(e) = renameat_with(CWD, tmp, CWD, dir, RenameFlags::EXCHANGE) {
        *theirs = true;
        return Err(io::Error::other(format!(
            "it changed while the trace was written, and what replaced it (not a CTF trace) could not be put back ({e}): it is at {}",
            tmp.display()
        )));
    }
    Err(io::Error::other("it changed while the trace was written and no longer holds a CTF trace: left as it is"))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("place-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn ctf(dir: &Path, stream: &[u8]) {
        std::fs::create_dir(dir).unwrap();
        std::fs::write(dir.join("metadata"), b"/* CTF 1.8 */\n").unwrap();
        std::fs::write(dir.join("stream-0"), stream).unwrap();
    }

    #[test]
    fn a_directory_swapped_in_during_the_export_is_swapped_back() {
        let root = scratch("swap");
        let (new, dir) = (root.join("new"), root.join("trace"));
        ctf(&new, b"new");
        // What `write_dir` saw was a CTF trace; what is there at the swap is not.
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("thesis.tex"), b"years of work").unwrap();
        let mut theirs = false;
        let e = swap_in(&new, &dir, &mut theirs).unwrap_err();
        assert!(e.to_string().contains("no longer holds a CTF trace"), "{e}");
        assert!(!theirs);
        assert_eq!(std::fs::read(dir.join("thesis.tex")).unwrap(), b"years of work");
        assert_eq!(std::fs::read(new.join("stream-0")).unwrap(), b"new");
        // A CTF trace there is swapped out.
        std::fs::remove_dir_all(&dir).unwrap();
        ctf(&dir, b"old");
        swap_in(&new, &dir, &mut theirs).unwrap();
        assert_eq!(std::fs::read(dir.join("stream-0")).unwrap(), b"new");
        assert_eq!(std::fs::read(new.join("stream-0")).unwrap(), b"old");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn without_renameat2_a_taken_name_is_still_never_replaced() {
        let root = scratch("noreplace");
        let (tmp, name) = (root.join("tmp"), root.join("name"));
        std::fs::write(&tmp, b"new").unwrap();
        std::fs::write(&name, b"old").unwrap();
        let e = no_renameat2_noreplace(&tmp, &name, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&name).unwrap(), b"old");
        std::fs::remove_file(&name).unwrap();
        no_renameat2_noreplace(&tmp, &name, false).unwrap();
        assert_eq!(std::fs::read(&name).unwrap(), b"new");
        assert!(!tmp.exists());
        // Directories: refused over anything, renamed to a free name.
        let (tdir, ndir) = (root.join("tdir"), root.join("ndir"));
        std::fs::create_dir(&tdir).unwrap();
        std::fs::create_dir(&ndir).unwrap();
        assert_eq!(no_renameat2_noreplace(&tdir, &ndir, true).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        std::fs::remove_dir(&ndir).unwrap();
        no_renameat2_noreplace(&tdir, &ndir, true).unwrap();
        assert!(ndir.is_dir() && !tdir.exists());
        let _ = std::fs::remove_dir_all(&root);
    }
}
