//! What an output's name leads to: an open descriptor, or the file at the end of its
//! symbolic links, followed only as far as the kernel's own rules would.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::paths::{directory_of, real_parent};

/// The open descriptor a path names: `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`,
/// `/proc/self/fd/N` (or a link to one of them).
pub(super) fn descriptor(path: &Path) -> Option<u32> {
    let mut path = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let fd = match path.to_str()? {
            "/dev/stdout" => Some(1),
            "/dev/stderr" => Some(2),
            p => p
                .strip_prefix("/dev/fd/")
                .or_else(|| p.strip_prefix("/proc/self/fd/"))
                .or_else(|| p.strip_prefix(&format!("/proc/{}/fd/", std::process::id())))
                .and_then(|n| n.parse().ok()),
        };
        if fd.is_some() {
            return fd;
        }
        let next = std::fs::read_link(&path).ok()?;
        path = path.parent().unwrap_or(Path::new("/")).join(next);
    }
    None
}

/// A handle on descriptor `fd` to write at: stdout and stderr duplicated (sharing
/// their offset and flags), another reopened to append (never over what it holds).
pub(super) fn open_descriptor(fd: u32) -> io::Result<File> {
    use std::os::fd::AsFd;
    let owned = match fd {
        1 => io::stdout().as_fd().try_clone_to_owned()?,
        2 => io::stderr().as_fd().try_clone_to_owned()?,
        n => return OpenOptions::new().append(true).open(format!("/proc/self/fd/{n}")),
    };
    Ok(File::from(owned))
}

/// The most symbolic links followed in a row (the kernel's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// The name that is replaced: `path`, or the file a symbolic link at `path` names
/// (through a chain of links). A link that the kernel's `fs.protected_symlinks` rule
/// would not follow for this user is refused: one in a sticky directory others may
/// write, owned by neither the caller nor the directory's owner.
pub(super) fn resolve(path: &Path) -> io::Result<PathBuf> {
    let mut path = path.to_path_buf();
    for followed in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let dir = match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                if !may_follow(&m, &dir) {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!(
                            "{} is a symbolic link of another user (uid {}) in a sticky directory others may write: not followed",
                            path.display(),
                            m.uid()
                        ),
                    ));
                }
                let next = std::fs::read_link(&path)?;
                path = dir.join(next);
            }
            Ok(_) => return Ok(path),
            // A new name, given or where the last link points: the new file goes there,
            // in a directory that must exist.
            Err(e) if e.kind() == io::ErrorKind::NotFound && real_parent(&path).is_some() => return Ok(path),
            Err(e) if followed == 0 => return directory_of(&path).and(Err(e)),
            Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("it is a symbolic link to {}, whose directory does not exist", path.display()),
                ));
            }
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// The kernel's `fs.protected_symlinks` rule (`may_follow_link`): a link in a sticky
/// directory that others may write is followed only by its owner, or when the
/// directory's owner owns the link too.
fn may_follow(link: &std::fs::Metadata, dir: &Path) -> bool {
    let Ok(d) = std::fs::metadata(dir) else { return false };
    let sticky_shared = d.mode() & 0o1002 == 0o1002;
    let me = rustix::process::geteuid().as_raw();
    !sticky_shared || link.uid() == me || link.uid() == d.uid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_names_are_the_descriptors() {
        assert_eq!(descriptor(Path::new("/dev/stdout")), Some(1));
        assert_eq!(descriptor(Path::new("/dev/stderr")), Some(2));
        assert_eq!(descriptor(Path::new("/dev/fd/7")), Some(7));
        assert_eq!(descriptor(Path::new("/proc/self/fd/3")), Some(3));
        assert_eq!(descriptor(Path::new(&format!("/proc/{}/fd/4", std::process::id()))), Some(4));
        assert_eq!(descriptor(Path::new("/dev/fd/x")), None);
        assert_eq!(descriptor(Path::new("/tmp/stdout")), None);
        // A link to one is that descriptor too.
        let dir = std::env::temp_dir().join(format!("links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink("/dev/stdout", dir.join("out")).unwrap();
        assert_eq!(descriptor(&dir.join("out")), Some(1));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_loop_of_links_is_an_error_not_a_hang() {
        let dir = std::env::temp_dir().join(format!("loop-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink("b", dir.join("a")).unwrap();
        std::os::unix::fs::symlink("a", dir.join("b")).unwrap();
        assert!(resolve(&dir.join("a")).is_err());
        assert_eq!(descriptor(&dir.join("a")), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
