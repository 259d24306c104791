//! A private bpffs instance for pinning tests.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::mount::{mount, unmount, MountFlags, UnmountFlags};

/// A private bpffs mounted at a fresh directory under [`std::env::temp_dir`] (named after
/// the pid and a per-process counter), unmounted (`MNT_DETACH`) and removed on drop.
///
/// Every bpffs mount is its own instance, so pins here are invisible at `/sys/fs/bpf` and
/// vanish with the mount. Mounting needs `CAP_SYS_ADMIN`.
#[derive(Debug)]
pub struct BpfFs {
    dir: PathBuf,
}

impl BpfFs {
    /// Creates the directory and mounts a bpffs on it.
    pub fn mount() -> io::Result<BpfFs> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ringtrace-bpffs-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir)?;
        if let Err(err) = mount("bpf", &dir, "bpf", MountFlags::empty(), None) {
            let _ = std::fs::remove_dir(&dir);
            return Err(io::Error::new(
                io::Error::from(err).kind(),
                format!("mount -t bpf at {}: {err}", dir.display()),
            ));
        }
        Ok(BpfFs { dir })
    }

    /// The mount point.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `name` inside the mount, e.g. a path for [`crate::RingMap::pin`].
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for BpfFs {
    fn drop(&mut self) {
        // Detached, the instance goes away with its last pin and open file; the directory
        // underneath is empty again.
        let _ = unmount(&self.dir, UnmountFlags::DETACH);
        let _ = std::fs::remove_dir(&self.dir);
    }
}
