//! A kernel BPF ring buffer map's one reader: `tail` and `consume` of `bpf-pin:` and
//! `bpf-id:` sources.
//!
//! The kernel keeps one consumer position per map and does not know who advances it:
//! two readers would each print some records and hand back the other's. So a reader
//! holds an exclusive `flock` on `bpf-map-ID.lock` in `/run/ringtrace` (a directory
//! only root writes; another user's directory is `$TMPDIR/ringtrace-UID`), released by
//! the kernel when the reader exits or dies, and a second ringtrace reader is refused.
//! A reader outside ringtrace (libbpf's `ring_buffer__poll`) takes no such lock and
//! cannot be seen.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ringtrace::inspect::Record;
use ringtrace::kernel::bpf::BpfRingBuf;
use rustix::fs::{flock, FlockOperation};

use crate::cleanup;
use crate::failure::Failure;
use crate::output::stdout_err;
use crate::records::{write_record, Format};

/// The directory of the readers' lock files, made if missing (mode 0755, owned by
/// this user, not a link).
fn lock_dir() -> Result<PathBuf, Failure> {
    let uid = rustix::process::geteuid();
    let dir = if uid.is_root() {
        PathBuf::from("/run/ringtrace")
    } else {
        std::env::temp_dir().join(format!("ringtrace-{}", uid.as_raw()))
    };
    let err =
        |e: std::io::Error| Failure::msg(format!("cannot make the map readers' lock directory {}: {e}", dir.display()));
    match std::fs::DirBuilder::new().mode(0o755).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(err(e)),
    }
    let m = std::fs::symlink_metadata(&dir).map_err(err)?;
    if !m.is_dir() || m.uid() != uid.as_raw() || m.mode() & 0o022 != 0 {
        return Err(Failure::msg(format!(
            "{} is not a directory of this user that only it can write: the map readers' locks are not kept there",
            dir.display()
        )));
    }
    Ok(dir)
}

/// A map with its reader's lock held.
pub struct Reader {
    pub map: BpfRingBuf,
    _lock: File,
}

/// Takes the map's reader lock, or says who holds it.
pub fn take(map: BpfRingBuf) -> Result<Reader, Failure> {
    let path = lock_dir()?.join(format!("bpf-map-{}.lock", map.map_id()));
    let err = |e: std::io::Error| Failure::msg(format!("cannot open the map's reader lock {}: {e}", path.display()));
    let mut lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)
        .map_err(err)?;
    if !lock.metadata().map_err(err)?.is_file() {
        return Err(Failure::msg(format!("{} is not a regular file", path.display())));
    }
    if flock(&lock, FlockOperation::NonBlockingLockExclusive).is_err() {
        let mut holder = String::new();
        let _ = lock.read_to_string(&mut holder);
        let holder = holder.trim();
        let who = if holder.is_empty() { String::new() } else { format!(" (pid {holder})") };
        return Err(Failure::msg(format!(
            "map {} already has a reader{who}: a BPF ring buffer has one consumer position, and two readers would each miss records",
            map.map_id()
        )));
    }
    let _ = lock.set_len(0).and_then(|()| lock.rewind()).and_then(|()| write!(lock, "{}", std::process::id()));
    Ok(Reader { map, _lock: lock })
}

/// Consumes and prints records until `limit` were printed, `idle` passed without one,
/// or a signal asked to stop (then [`Failure::Interrupted`]). Each batch is flushed to
/// stdout before the next is read. Returns how many were printed.
pub fn drain(r: &mut Reader, limit: Option<u64>, idle: Option<Duration>, format: Format) -> Result<u64, Failure> {
    cleanup::stop_gracefully();
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut left = limit.unwrap_or(u64::MAX);
    let mut last = Instant::now();
    let mut printed = 0;
    while left > 0 {
        if let Some(signal) = cleanup::stop_requested() {
            out.flush().map_err(stdout_err)?;
            return Err(Failure::Interrupted(signal));
        }
        let max = usize::try_from(left).unwrap_or(usize::MAX);
        let n = r
            .map
            .consume_at(max, |pos, payload| {
                write_record(&mut out, format, &Record { pos, pid: 0, payload }).map_err(stdout_err)
            })
            .map_err(|e| match e {
                ringtrace::ConsumeError::Callback(f) => f,
                e => Failure::msg(format!("reading the map: {e}")),
            })? as u64;
        out.flush().map_err(stdout_err)?;
        (left, printed) = (left - n.min(left), printed + n);
        if n > 0 {
            last = Instant::now();
            continue;
        }
        let waited = last.elapsed();
        if idle.is_some_and(|t| waited >= t) {
            break;
        }
        // Short naps: a signal that asks to stop is seen within 100 ms.
        let nap = idle.map_or(Duration::from_millis(100), |t| (t - waited).min(Duration::from_millis(100)));
        r.map.wait(Some(nap)).map_err(|e| Failure::msg(format!("waiting for records: {e}")))?;
    }
    Ok(printed)
}
