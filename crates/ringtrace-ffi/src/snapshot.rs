//! Flight recorder: snapshots of overwrite rings, and pausing them.

use std::ffi::{c_char, c_int, c_void};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ringtrace::Snapshot;

use crate::consumer::{count, deliver, ringtrace_record_fn};
use crate::error::Fail;
use crate::guard::{self, call, call_or, handle};
use crate::pause::{Hold, PauseHold};
use crate::ring::{path_arg, ringtrace_ring, AnyRing};

/// A snapshot handle: a copy of an overwrite ring's records.
#[derive(Debug)]
pub struct ringtrace_snapshot {
    snap: Snapshot,
}
handle!(ringtrace_snapshot, 0x5254_534e_4150_0004, "snapshot");

fn not_overwrite() -> Fail {
    Fail::inval("snapshots and pauses need an overwrite ring (RINGTRACE_OVERWRITE)")
}

/// Copies the records of an overwrite ring (producers go on writing meanwhile) into a
/// new snapshot; free it with `ringtrace_snapshot_free`.
///
/// Returns 0, or -EINVAL (null argument, or a discard ring), -EBUSY (overwritten faster
/// than it could be copied, or its oldest record's producer stopped inside its claim
/// for 100 ms; retry), -EBADMSG. A snapshot of a ring that holds records is never
/// returned empty.
///
/// Threads: any thread, concurrently with producers, a consumer and other snapshots.
///
/// # Safety
///
/// `ring` is NULL or a ring handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_snapshot_take(
    ring: *mut ringtrace_ring,
    out: *mut *mut ringtrace_snapshot,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `ring`.
        let h = unsafe { guard::get(ring) }?;
        let out = guard::out_ptr(out)?;
        let snap = match &h.ring {
            AnyRing::MpscOverwrite(r) => r.snapshot()?,
            AnyRing::SpscOverwrite(r) => r.snapshot()?,
            _ => return Err(not_overwrite()),
        };
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_snapshot { snap }) }
    })
}

/// Reads a snapshot file (written by `ringtrace_snapshot_write`, `Snapshot::write_to`
/// or `ringtrace snapshot -o`) back into a new snapshot; free it with
/// `ringtrace_snapshot_free`. The file is untrusted input: its checksums are checked,
/// and a damaged or cut file is refused with a message naming the part and its bytes.
///
/// Returns 0, or -EINVAL (null argument), -EBADMSG (not a snapshot file, or damaged),
/// or the -errno of opening or reading it; the message names the file.
///
/// Threads: any thread.
///
/// # Safety
///
/// `path` is a NUL-terminated string; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_snapshot_read(path: *const c_char, out: *mut *mut ringtrace_snapshot) -> c_int {
    call(|| {
        let out = guard::out_ptr(out)?;
        // SAFETY: the caller's promise about `path`.
        let path = unsafe { path_arg(path) }?;
        // Non-blocking, so that a FIFO does not hang the open; only a regular file is read.
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| Fail::from(e).about(path))?;
        if !file.metadata().map_err(|e| Fail::from(e).about(path))?.is_file() {
            return Err(Fail::inval("not a regular file").about(path));
        }
        let snap = Snapshot::read_from(io::BufReader::new(file)).map_err(|e| Fail::from(e).about(path))?;
        // SAFETY: `out` is valid for a write (caller).
        unsafe { guard::put(out, ringtrace_snapshot { snap }) }
    })
}

/// The number of records in the snapshot (0 for a NULL or invalid handle).
///
/// Threads: any thread (a snapshot is immutable).
///
/// # Safety
///
/// `s` is NULL or a snapshot handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_snapshot_len(s: *const ringtrace_snapshot) -> usize {
    // SAFETY: the caller's promise about `s`.
    call_or(0, || unsafe { guard::get(s) }.map_or(0, |h| h.snap.len()))
}

/// Calls `fn(ctx, data, len)` for each record of the snapshot, oldest first (newest
/// first if `newest_first` is nonzero).
///
/// Returns the number of records delivered, or -EINVAL, -ECANCELED (`fn` returned
/// nonzero).
///
/// Threads: any thread (a snapshot is immutable).
///
/// # Safety
///
/// `s` is NULL or a snapshot handle; `fn` is NULL or a function callable with `ctx`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_snapshot_foreach(
    s: *const ringtrace_snapshot,
    newest_first: c_int,
    r#fn: ringtrace_record_fn,
    ctx: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `s`.
        let h = unsafe { guard::get(s) }?;
        if newest_first != 0 {
            each(h.snap.iter().rev(), r#fn, ctx)
        } else {
            each(h.snap.iter(), r#fn, ctx)
        }
    })
}

/// Delivers records to a C callback; -ECANCELED when it says stop.
fn each<'a>(records: impl Iterator<Item = &'a [u8]>, f: ringtrace_record_fn, ctx: *mut c_void) -> Result<c_int, Fail> {
    let mut n = 0usize;
    for rec in records {
        n += 1;
        if let Err(stop) = deliver(f, ctx, rec) {
            return Err(Fail::new(libc::ECANCELED, format!("the record callback returned {}", stop.0)));
        }
    }
    Ok(count(n))
}

/// Writes the snapshot to a new file at `path` (replacing one that exists), in the
/// snapshot file format that `ringtrace snapshot` reads. The file is mode 0600: it is
/// written beside `path` as `PATH.partial.PID.N` (PID this process's id, N a counter's
/// next value; a name that exists is skipped, up to 100), created with `O_CREAT |
/// O_EXCL | O_NOFOLLOW`, synced, then renamed over `path`. No file or symlink at either
/// name is written through or truncated: a symlink at `path` is replaced, not followed.
///
/// Returns 0, or -EINVAL, or the -errno of creating, writing or renaming the file
/// (-EEXIST: every temporary name tried exists).
///
/// Threads: any thread (a snapshot is immutable).
///
/// # Safety
///
/// `s` is NULL or a snapshot handle; `path` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_snapshot_write(s: *const ringtrace_snapshot, path: *const c_char) -> c_int {
    call(|| {
        // SAFETY: the caller's promises about `s` and `path`.
        let (h, path) = unsafe { (guard::get(s)?, path_arg(path)?) };
        let (tmp, file) = create_beside(path).map_err(|e| Fail::from(e).about(path))?;
        let written = (|| {
            let mut w = BufWriter::new(&file);
            h.snap.write_to(&mut w)?;
            w.flush()?;
            drop(w);
            file.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(|e| Fail::from(e).about(path))?;
        Ok(0)
    })
}

/// Creates the temporary file for `path`: `PATH.partial.PID.N`, new (`O_CREAT |
/// O_EXCL`, and `O_NOFOLLOW`: an existing name, a symlink included, is never opened),
/// mode 0600; names taken are skipped.
fn create_beside(path: &Path) -> io::Result<(PathBuf, File)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    for _ in 0..100 {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".partial.{}.{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        let tmp = PathBuf::from(name);
        match OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "every temporary name tried beside the snapshot file exists"))
}

/// Frees a snapshot (NULL is ignored).
///
/// Threads: no other thread may be using this handle.
///
/// # Safety
///
/// `s` is NULL or a snapshot handle not used after this call.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_snapshot_free(s: *mut ringtrace_snapshot) {
    // SAFETY: the caller's promise about `s`.
    call_or((), || unsafe { guard::free(s) })
}

/// Pauses an overwrite ring: producers' reservations are refused (counted as lost and
/// paused) until `ringtrace_resume`, so its records can be read in place with
/// `ringtrace_paused_foreach`. Waits up to `timeout_ms` (-1: the library's default of
/// one second) for records being written to finish.
///
/// Returns 0, or -EINVAL (a discard ring), -EALREADY (already paused), -EBUSY (a record
/// was still being written at the timeout; the ring keeps running).
///
/// Threads: any thread; the pause belongs to this ring handle.
///
/// # Safety
///
/// `ring` is NULL or a ring handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_pause(ring: *mut ringtrace_ring, timeout_ms: c_int) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `ring`.
        let h = unsafe { guard::get(ring) }?;
        let mut slot = h.pause.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return Err(Fail::new(libc::EALREADY, "this ring handle already holds a pause"));
        }
        *slot = Some(match &h.ring {
            AnyRing::MpscOverwrite(r) => PauseHold::Mpsc(Hold::pause(r, timeout_ms)?),
            AnyRing::SpscOverwrite(r) => PauseHold::Spsc(Hold::pause(r, timeout_ms)?),
            _ => return Err(not_overwrite()),
        });
        Ok(0)
    })
}

/// Calls `fn(ctx, data, len)` for each record of the paused ring, in place, oldest
/// first (newest first if `newest_first` is nonzero).
///
/// Returns the number of records delivered, or -EINVAL (null argument, or this handle
/// holds no pause), -ECANCELED (`fn` returned nonzero).
///
/// Threads: any thread; calls on one ring handle are serialized.
///
/// # Safety
///
/// `ring` is NULL or a ring handle; `fn` is NULL or a function callable with `ctx`.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_paused_foreach(
    ring: *mut ringtrace_ring,
    newest_first: c_int,
    r#fn: ringtrace_record_fn,
    ctx: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `ring`.
        let h = unsafe { guard::get(ring) }?;
        let slot = h.pause.lock().unwrap_or_else(|e| e.into_inner());
        let no_pause = || Fail::inval("this ring handle holds no pause (call ringtrace_pause first)");
        macro_rules! walk {
            ($hold:expr) => {{
                let paused = $hold.paused().ok_or_else(no_pause)?;
                if newest_first != 0 {
                    each(paused.iter().rev(), r#fn, ctx)
                } else {
                    each(paused.iter(), r#fn, ctx)
                }
            }};
        }
        match slot.as_ref().ok_or_else(no_pause)? {
            PauseHold::Mpsc(hold) => walk!(hold),
            PauseHold::Spsc(hold) => walk!(hold),
        }
    })
}

/// Ends the pause this ring handle holds: producers write again.
///
/// Returns 0, or -EINVAL (null handle, or no pause held).
///
/// Threads: any thread.
///
/// # Safety
///
/// `ring` is NULL or a ring handle.
#[no_mangle]
pub unsafe extern "C" fn ringtrace_resume(ring: *mut ringtrace_ring) -> c_int {
    call(|| {
        // SAFETY: the caller's promise about `ring`.
        let h = unsafe { guard::get(ring) }?;
        let hold = h.pause.lock().unwrap_or_else(|e| e.into_inner()).take();
        match hold {
            Some(hold) => {
                drop(hold);
                Ok(0)
            }
            None => Err(Fail::inval("this ring handle holds no pause")),
        }
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{lchown, symlink, MetadataExt, PermissionsExt};

    use ringtrace::config::{Mpsc, Overwrite};
    use ringtrace::{RingBuf, Wakeup};

    use super::*;

    const CANARY: &[u8] = b"a file of root's that no snapshot may touch\n";

    /// A fresh directory for one test.
    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ringtrace-ffi-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// `ringtrace_snapshot_write` of a snapshot holding one record, to `path`.
    fn write_snapshot(path: &Path) -> c_int {
        let ring = RingBuf::<Mpsc, Overwrite>::builder(4096).build().unwrap();
        ring.producer().unwrap().output(b"root's record", Wakeup::Default).unwrap();
        let mut s = std::ptr::null_mut();
        // SAFETY: `s` is valid for a write.
        unsafe { guard::put(&mut s, ringtrace_snapshot { snap: ring.snapshot().unwrap() }) }.unwrap();
        let path = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `s` is a live snapshot handle; `path` is NUL-terminated.
        let rc = unsafe { ringtrace_snapshot_write(s, path.as_ptr()) };
        // SAFETY: `s` is a snapshot handle, not used after this.
        unsafe { ringtrace_snapshot_free(s) };
        rc
    }

    /// `path` is a regular file of this process's user, mode 0600.
    fn assert_private(path: &Path) {
        let m = std::fs::symlink_metadata(path).unwrap();
        assert!(m.file_type().is_file());
        assert_eq!(m.mode() & 0o7777, 0o600);
        assert_eq!(m.uid(), std::fs::metadata("/proc/self").unwrap().uid());
    }

    #[test]
    fn a_snapshot_file_is_private_and_never_written_through_a_planted_name() {
        let dir = temp("snapshot-write");
        let out = dir.join("snap.rts");
        assert_eq!(write_snapshot(&out), 0);
        assert_private(&out);

        // The attacker's symlink at the name, and at the fixed temporary name.
        let canary = dir.join("canary");
        std::fs::write(&canary, CANARY).unwrap();
        let (linked, partial) = (dir.join("linked.rts"), dir.join("linked.rts.partial"));
        symlink(&canary, &linked).unwrap();
        symlink(&canary, &partial).unwrap();
        assert_eq!(write_snapshot(&linked), 0);
        assert!(std::fs::read(&canary).unwrap() == CANARY, "the snapshot was written through a symlink");
        assert_private(&linked);

        // The attacker's own file, readable and writable by anyone, at the name: it is
        // replaced by the caller's private file, not written into.
        let planted = dir.join("planted.rts");
        std::fs::write(&planted, "the attacker's\n").unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o666)).unwrap();
        if lchown(&planted, Some(65534), Some(65534)).is_err() {
            eprintln!("not root: the planted file stays this user's (its mode is still checked)");
        }
        assert_eq!(write_snapshot(&planted), 0);
        assert_private(&planted);

        // Symlinks at every temporary name this process could use: no write at all.
        let taken = dir.join("taken.rts");
        for n in 0..1000 {
            symlink(&canary, dir.join(format!("taken.rts.partial.{}.{n}", std::process::id()))).unwrap();
        }
        assert_eq!(write_snapshot(&taken), -libc::EEXIST);
        assert!(std::fs::read(&canary).unwrap() == CANARY, "the snapshot was written through a symlink");
        assert!(std::fs::symlink_metadata(&taken).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
