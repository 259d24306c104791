//! Files for tests: a fresh temporary directory ([`TempDir`]), and what a test that
//! plays an unprivileged local user against a process running as root needs
//! ([`give_to_attacker`], [`plant_symlink`], [`Canary`]).

use std::os::unix::fs::{lchown, symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::have_root;

/// A fresh directory under the system's temporary directory, removed on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Makes `rtt-NAME-PID-N` under [`std::env::temp_dir`] (N a counter of this
    /// process), empty: a directory left at that name by an earlier run is removed.
    pub fn new(name: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("rtt-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("making {}: {e}", p.display()));
        TempDir(p)
    }

    /// `s` in the directory.
    pub fn join(&self, s: &str) -> PathBuf {
        self.0.join(s)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The local attacker's uid: `nobody` on most systems.
pub const ATTACKER: u32 = 65534;

/// This process's effective uid.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The mode bits of `p` itself (a symlink's own, not its target's).
pub fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).mode() & 0o7777
}

/// Gives `p` (not what it links to) to [`ATTACKER`], if this process may (else the
/// calling test goes on without that part, after [`have_root`] said so, or fails where
/// `RINGTRACE_REQUIRE` lists `root`).
pub fn give_to_attacker(p: &Path) {
    if have_root("give a file to another user (lchown)") {
        lchown(p, Some(ATTACKER), Some(ATTACKER)).unwrap_or_else(|e| panic!("lchown {}: {e}", p.display()));
    }
}

/// A directory the attacker writes in: theirs (root can write it too).
pub fn attacker_dir(name: &str) -> TempDir {
    let d = TempDir::new(name);
    give_to_attacker(&d.0);
    d
}

/// The attacker's symlink at `at` to `to`.
pub fn plant_symlink(to: &Path, at: &Path) {
    symlink(to, at).unwrap_or_else(|e| panic!("symlink {} -> {}: {e}", at.display(), to.display()));
    give_to_attacker(at);
}

/// A file of this process's user that the attacker wants overwritten: a test points
/// planted symlinks at it, then checks it still holds what it held.
#[derive(Debug)]
pub struct Canary(pub PathBuf);

impl Canary {
    /// What a canary holds.
    pub const TEXT: &'static str = "the canary: a file of root's that nothing under test may touch\n";

    /// Writes `dir/canary`.
    pub fn plant(dir: &Path) -> Canary {
        let c = dir.join("canary");
        std::fs::write(&c, Self::TEXT).unwrap_or_else(|e| panic!("writing {}: {e}", c.display()));
        Canary(c)
    }

    /// The canary's name.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Panics with `what` unless the canary still holds [`TEXT`](Self::TEXT).
    #[track_caller]
    pub fn assert_untouched(&self, what: &str) {
        assert!(std::fs::read(&self.0).ok().as_deref() == Some(Self::TEXT.as_bytes()), "{what}");
    }
}
