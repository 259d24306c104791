//! A flight recorder dumped on a signal, the self-pipe way: the handler does only what
//! is async-signal-safe (one `write(2)` of one byte to a pipe, errno kept), and a
//! thread of the library, blocked reading the pipe, writes the dump. A dump itself
//! allocates and takes the catalog's lock, neither of which a handler may do.
//!
//! One signal dump at a time in a process (a handler is per process). The pipe is made
//! once and never closed, so the handler never writes to a descriptor that was closed
//! and reused.

use std::ffi::c_int;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use ringtrace_tracing::Recorder;

use crate::error::Fail;

/// The pipe's ends: the handler writes, the dumping thread reads.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

static PIPE: OnceLock<Pipe> = OnceLock::new();
/// The descriptor the handler writes to, -1 while no dump is armed.
static ARMED_FD: AtomicI32 = AtomicI32::new(-1);
/// A signal dump is installed in the process.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// What the handler writes: a dump is asked for.
static DUMP: u8 = b'd';
/// What stopping writes: the thread ends.
static STOP: u8 = b'q';

extern "C" fn on_signal(_: c_int) {
    // Relaxed: the descriptor is a number; the pipe it names lives for the process.
    let fd = ARMED_FD.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    // SAFETY: errno is this thread's, saved and restored around write(2), which is
    // async-signal-safe; `fd` is the pipe's write end, never closed. A full pipe
    // (dumps already asked for) refuses the byte: it is not needed.
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        libc::write(fd, (&raw const DUMP).cast(), 1);
        *errno = saved;
    }
}

/// A signal dump in place: undone (the handler before it restored, the thread joined)
/// when dropped.
pub(crate) struct SignalDump {
    signo: c_int,
    /// The action before this one (`None`: none was installed).
    previous: Option<libc::sigaction>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for SignalDump {
    fn drop(&mut self) {
        // Relaxed: see `on_signal`.
        ARMED_FD.store(-1, Ordering::Relaxed);
        if let Some(previous) = &self.previous {
            // SAFETY: restores the action saved when this one was installed.
            unsafe { libc::sigaction(self.signo, previous, std::ptr::null_mut()) };
        }
        if let Some(p) = PIPE.get() {
            // SAFETY: one byte from a static to the pipe's write end, open for the
            // process's life.
            unsafe { libc::write(p.write.as_raw_fd(), (&raw const STOP).cast(), 1) };
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Release: pairs with the Acquire compare-exchange in `install`: the next
        // install sees this one fully undone.
        INSTALLED.store(false, Ordering::Release);
    }
}

fn pipe() -> Result<&'static Pipe, Fail> {
    if let Some(p) = PIPE.get() {
        return Ok(p);
    }
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK)
        .map_err(|e| Fail::new(e.raw_os_error(), format!("making the signal dump's pipe: {e}")))?;
    // The read end blocks (the thread waits on it); the write end never does.
    rustix::fs::fcntl_setfl(&read, rustix::fs::OFlags::empty())
        .map_err(|e| Fail::new(e.raw_os_error(), format!("making the signal dump's pipe: {e}")))?;
    // Two installs racing (refused below but for one) may both make a pipe; one is kept.
    Ok(PIPE.get_or_init(|| Pipe { read, write }))
}

/// Signals a handler must not return from, or that cannot be caught.
fn refused(signo: c_int) -> Option<&'static str> {
    match signo {
        libc::SIGKILL | libc::SIGSTOP => Some("cannot be caught"),
        libc::SIGSEGV | libc::SIGBUS | libc::SIGFPE | libc::SIGILL | libc::SIGABRT | libc::SIGTRAP | libc::SIGSYS => {
            Some(
                "is a fault, whose handler must not return; for a dump after a crash, make the recorder in a \
                 directory and read it with `ringtrace decode DIR` after the process died",
            )
        }
        _ => None,
    }
}

/// The thread's loop: a dump to a new file for each byte asked, until stopped.
fn serve(recorder: Arc<Recorder>, path: PathBuf, read: &'static OwnedFd) {
    let mut buf = [0u8; 64];
    loop {
        let n = match rustix::io::read(read, &mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return eprintln!("ringtrace: the signal dump stops: reading its pipe: {e}"),
        };
        let bytes = &buf[..n];
        // Several signals before the thread ran make one dump.
        if bytes.contains(&DUMP) {
            match recorder.dump_new(&path) {
                Ok((p, d)) => eprintln!("ringtrace: flight recorder dumped to {} ({} records)", p.display(), d.records),
                Err(e) => eprintln!(
                    "ringtrace: the flight recorder could not be dumped: {}",
                    ringtrace::error::with_causes(&e)
                ),
            }
        }
        if bytes.contains(&STOP) {
            return;
        }
    }
}

/// Installs the signal dump of `recorder` (a flight recorder) on `signo`: undone when the
/// value returned is dropped.
pub(crate) fn install(recorder: &Arc<Recorder>, signo: c_int, path: PathBuf) -> Result<SignalDump, Fail> {
    if let Some(why) = refused(signo) {
        return Err(Fail::inval(format!("signal {signo} {why}")));
    }
    if !(1..libc::SIGRTMAX()).contains(&signo) {
        return Err(Fail::inval(format!("{signo} is not a signal number")));
    }
    let p = pipe()?;
    // Acquire: pairs with the Release store in `SignalDump::drop`.
    if INSTALLED.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        return Err(Fail::new(libc::EBUSY, "a signal dump is already installed in this process (one at a time)"));
    }
    // Drained of any byte left by an earlier install (the read end blocks: read only
    // what is there).
    let mut leftover = [0u8; 64];
    while rustix::io::ioctl_fionread(&p.read).unwrap_or(0) > 0 {
        if rustix::io::read(&p.read, &mut leftover).is_err() {
            break;
        }
    }
    let recorder = recorder.clone();
    let thread = std::thread::Builder::new()
        .name("ringtrace-dump".into())
        .spawn(move || serve(recorder, path, &p.read))
        .map_err(|e| {
            INSTALLED.store(false, Ordering::Release);
            Fail::new(crate::error::io_errno(&e), format!("starting the signal dump's thread: {e}"))
        })?;
    // Relaxed: see `on_signal`.
    ARMED_FD.store(p.write.as_raw_fd(), Ordering::Relaxed);
    // SAFETY: a zeroed sigaction is valid (no flags, empty mask, SIG_DFL).
    let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above. The handler only calls write(2). SA_RESTART: the program's
    // system calls interrupted by the signal are restarted rather than failing with
    // EINTR.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_signal as extern "C" fn(c_int) as usize;
    action.sa_flags = libc::SA_RESTART;
    // SAFETY: valid pointers to two sigaction structs.
    let rc = unsafe { libc::sigaction(signo, &action, &mut previous) };
    let mut dump = SignalDump { signo, previous: Some(previous), thread: Some(thread) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        // Nothing was installed: dropping stops the thread and clears the flag.
        dump.previous = None;
        drop(dump);
        return Err(Fail::new(crate::error::io_errno(&e), format!("installing the handler of signal {signo}: {e}")));
    }
    Ok(dump)
}
