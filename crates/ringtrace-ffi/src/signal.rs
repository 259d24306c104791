//! A flight recorder dumped on a signal, the self-pipe way: the handler does only what
//! is async-signal-safe (one `write(2)` of one byte to a pipe, errno kept), and a
//! thread of the library, blocked reading the pipe, writes the dump. A dump itself
//! allocates and takes the catalog's lock, neither of which a handler may do.
//!
//! One signal dump at a time in a process (a handler is per process). The pipe is made
//! once and never closed, so the handler never writes to a descriptor that was closed
//! and reused. Its write end never blocks: a full pipe refuses the byte, which is not
//! needed (a pipe with bytes in it wakes the thread anyway), and the thread reads every
//! byte there before it dumps, so that a burst of signals makes one dump. Stopping sets
//! a flag and wakes the thread the same way. A child process made by `fork` inherits
//! the handler and the pipe but not the thread: the handler does nothing in a process
//! other than the one that installed it, undoing it there only restores the action
//! before it, and a child that installs one makes a pipe of its own.

use std::ffi::c_int;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use ringtrace_tracing::Recorder;

use crate::error::Fail;

/// The pipe's ends: the handler writes, the dumping thread reads.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

/// The pipe, and the process that made it: a child made by `fork` shares its parent's
/// pipe, and makes one of its own (the parent's thread reads the parent's).
static PIPE: Mutex<Option<(i32, &'static Pipe)>> = Mutex::new(None);
/// The descriptor the handler writes to, -1 while no dump is armed.
static ARMED_FD: AtomicI32 = AtomicI32::new(-1);
/// A signal dump is installed in the process.
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The process that installed it (the one whose thread dumps).
static OWNER: AtomicI32 = AtomicI32::new(0);
/// The thread is to stop (set before its wake-up byte is written).
static STOPPING: AtomicBool = AtomicBool::new(false);

/// What the handler writes (any byte wakes the thread).
static WAKE: u8 = b'd';

extern "C" fn on_signal(_: c_int) {
    // Relaxed: the descriptor is a number; the pipe it names lives for the process.
    let fd = ARMED_FD.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    // SAFETY: errno is this thread's, saved and restored around getpid(2) and
    // write(2), both async-signal-safe; `fd` is the pipe's write end, never closed. A
    // full pipe (dumps already asked for) refuses the byte: it is not needed.
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        // Relaxed: a number, set before the handler was installed.
        if libc::getpid() == OWNER.load(Ordering::Relaxed) {
            libc::write(fd, (&raw const WAKE).cast(), 1);
        }
        *errno = saved;
    }
}

/// A signal dump in place: undone (the handler before it restored, the thread joined)
/// when dropped.
pub(crate) struct SignalDump {
    signo: c_int,
    /// The action before this one (`None`: none was installed).
    previous: Option<libc::sigaction>,
    /// The pipe its thread reads.
    pipe: &'static Pipe,
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
        // In a child made by fork, the thread is the parent's: it is neither woken
        // (the pipe is shared with the parent) nor joined (it is not in this process).
        // Relaxed: a number.
        let forked = pid() != OWNER.load(Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            if forked {
                // Not this process's thread: its handle is forgotten, neither joined
                // nor detached (its id may name another thread here).
                std::mem::forget(t);
            } else {
                // Release: pairs with the Acquire load in `serve`, which reads the
                // flag after the byte below woke it.
                STOPPING.store(true, Ordering::Release);
                // SAFETY: one byte from a static to the pipe's write end, open for the
                // process's life. EAGAIN (a full pipe) is harmless: a pipe with bytes in
                // it wakes the thread as well.
                unsafe { libc::write(self.pipe.write.as_raw_fd(), (&raw const WAKE).cast(), 1) };
                let _ = t.join();
            }
        }
        // Release: pairs with the Acquire compare-exchange in `install`: the next
        // install sees this one fully undone.
        INSTALLED.store(false, Ordering::Release);
    }
}

/// This process's id.
fn pid() -> i32 {
    rustix::process::getpid().as_raw_nonzero().get()
}

/// This process's pipe: made once per process and never closed (leaked, so that the
/// handler never writes to a descriptor closed and reused).
fn pipe() -> Result<&'static Pipe, Fail> {
    let mut slot = PIPE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, p)) = *slot {
        if owner == pid() {
            return Ok(p);
        }
    }
    let fail = |e: rustix::io::Errno| Fail::new(e.raw_os_error(), format!("making the signal dump's pipe: {e}"));
    let (read, write) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK).map_err(fail)?;
    // The read end blocks (the thread waits on it); the write end never does.
    rustix::fs::fcntl_setfl(&read, rustix::fs::OFlags::empty()).map_err(fail)?;
    let p: &'static Pipe = Box::leak(Box::new(Pipe { read, write }));
    *slot = Some((pid(), p));
    Ok(p)
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

/// Reads every byte the pipe holds now (it never blocks: only what FIONREAD counts).
fn drain(read: &OwnedFd) {
    let mut buf = [0u8; 4096];
    let mut left = rustix::io::ioctl_fionread(read).unwrap_or(0) as usize;
    // Bounded: each pass reads at least one of the `left` bytes counted, or stops.
    while left > 0 {
        match rustix::io::read(read, &mut buf[..left.min(4096)]) {
            Ok(n) if n > 0 => left -= n,
            _ => break,
        }
    }
}

/// The thread's loop: one dump to a new file for each wake-up (however many signals
/// it counts), until stopped.
fn serve(recorder: Arc<Recorder>, path: PathBuf, read: &'static OwnedFd) {
    let mut one = [0u8; 1];
    loop {
        match rustix::io::read(read, &mut one) {
            Ok(0) => return,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return eprintln!("ringtrace: the signal dump stops: reading its pipe: {e}"),
        }
        drain(read);
        // Acquire: pairs with the Release store in `SignalDump::drop`.
        if STOPPING.load(Ordering::Acquire) {
            return;
        }
        match recorder.dump_new(&path) {
            Ok((p, d)) => eprintln!("ringtrace: flight recorder dumped to {} ({} records)", p.display(), d.records),
            Err(e) => {
                eprintln!("ringtrace: the flight recorder could not be dumped: {}", ringtrace::error::with_causes(&e))
            }
        }
    }
}

/// Installs the signal dump of `recorder` (a flight recorder) on `signo`: undone when the
/// value returned is dropped.
pub(crate) fn install(recorder: &Arc<Recorder>, signo: c_int, path: PathBuf) -> Result<SignalDump, Fail> {
    if let Some(why) = refused(signo) {
        return Err(Fail::inval(format!("signal {signo} {why}")));
    }
    if !(1..=libc::SIGRTMAX()).contains(&signo) {
        return Err(Fail::inval(format!("{signo} is not a signal number")));
    }
    let p = pipe()?;
    // Acquire: pairs with the Release store in `SignalDump::drop`.
    if INSTALLED.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        return Err(Fail::new(libc::EBUSY, "a signal dump is already installed in this process (one at a time)"));
    }
    // Drained of any byte left by an earlier install.
    drain(&p.read);
    // Relaxed: both are published to the new thread by its spawn, and to the handler
    // by sigaction below.
    STOPPING.store(false, Ordering::Relaxed);
    OWNER.store(pid(), Ordering::Relaxed);
    let recorder = recorder.clone();
    let thread = std::thread::Builder::new()
        .name("ringtrace-dump".into())
        .spawn(move || serve(recorder, path, &p.read))
        .map_err(|e| {
            // Release: pairs with the Acquire compare-exchange above, as in
            // `SignalDump::drop`: nothing was installed.
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
    let mut dump = SignalDump { signo, previous: Some(previous), pipe: p, thread: Some(thread) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        // Nothing was installed: dropping stops the thread and clears the flag.
        dump.previous = None;
        drop(dump);
        return Err(Fail::new(crate::error::io_errno(&e), format!("installing the handler of signal {signo}: {e}")));
    }
    Ok(dump)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The thread stops even when the pipe is full when it is told to (its wake-up
    /// byte refused): the flag is read after every wake-up.
    #[test]
    fn a_full_pipe_does_not_lose_the_stop() {
        let dir = std::env::temp_dir().join(format!("ringtrace-signal-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (_layer, recorder) =
            ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(64 << 10).build().unwrap();
        let dump = install(&Arc::new(recorder), libc::SIGUSR2, dir.join("d.rtt")).unwrap();
        // Fill the pipe until it refuses more (the thread drains it as it can).
        let mut refused = 0;
        while refused < 3 {
            match rustix::io::write(&dump.pipe.write, &[WAKE; 4096]) {
                Ok(_) => {}
                Err(rustix::io::Errno::AGAIN) => refused += 1,
                Err(e) => panic!("writing the pipe: {e}"),
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(dump);
            let _ = tx.send(());
        });
        let stopped = rx.recv_timeout(Duration::from_secs(60));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(stopped.is_ok(), "the signal dump's thread did not stop in 60 s");
        assert!(!INSTALLED.load(Ordering::Acquire));
    }
}
