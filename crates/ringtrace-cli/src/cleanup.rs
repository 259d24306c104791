//! What an interrupted command leaves behind: nothing. Files registered here (a
//! temporary output, the demo's ring file) are removed, and child processes registered
//! here are killed, when SIGINT, SIGTERM or SIGHUP arrives; then the command dies of
//! that signal as it would have without a handler (the shell sees 130 for Ctrl-C).
//!
//! The signals are taken by a thread of their own (ringtrace-ship's
//! `command::on_stop_signals`, as `ship` takes them), so that the removal runs as
//! ordinary code, not in a signal handler. A signal the parent left ignored (`nohup`
//! ignores SIGHUP, a shell's `&` SIGINT) stays ignored: the command is not stopped by
//! what its caller meant it to survive.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use ringtrace_ship::command::{die_of, on_stop_signals};

#[derive(Default)]
struct Registry {
    files: Vec<(u64, PathBuf)>,
    children: Vec<(u64, u32)>,
}

fn registry() -> MutexGuard<'static, Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    // A panic while holding the lock leaves a list that is still whole: go on with it.
    REGISTRY.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Starts the thread that cleans up on SIGINT, SIGTERM and SIGHUP (ringtrace-ship's
/// [`on_stop_signals`], the thread `ship` takes its signals on). Once per process; a
/// failure to install it leaves the default actions (and is not an error: the command
/// runs as before).
pub fn install() {
    on_stop_signals("ringtrace-signals", |signal| {
        // A command that stops cleanly is told, once; a second signal kills it.
        if GRACEFUL.load(Ordering::Relaxed) && STOP.load(Ordering::Relaxed) == 0 {
            STOP.store(signal as u8, Ordering::Relaxed);
            return;
        }
        // A command that reports what it did says it, then exits as a command that
        // stopped cleanly does.
        let report = REPORT.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(report) = report {
            report(signal as u8);
            run_cleanup();
            std::process::exit(128 + signal);
        }
        run_cleanup();
        die_of(signal);
    });
}

/// Whether the command polls [`stop_requested`] (and the first signal only asks).
static GRACEFUL: AtomicBool = AtomicBool::new(false);
/// The signal that asked the command to stop, or 0.
static STOP: AtomicU8 = AtomicU8::new(0);

/// From now on the first SIGINT/SIGTERM/SIGHUP does not kill the command: it asks it
/// to stop, and the command polls [`stop_requested`] (a second signal kills it). For
/// `consume`, which must not hand back the space of a record it has not printed.
pub fn stop_gracefully() {
    GRACEFUL.store(true, Ordering::Relaxed);
}

/// The signal that asked the command to stop, if one did.
pub fn stop_requested() -> Option<u8> {
    match STOP.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// What a command says when a signal stops it ([`report_on_signal`]).
type Report = Box<dyn FnOnce(u8) + Send>;
static REPORT: Mutex<Option<Report>> = Mutex::new(None);

/// From now on SIGINT, SIGTERM and SIGHUP run `report` (on the signal thread, with the
/// signal), remove what is registered and exit with status 128 + the signal (130 for
/// Ctrl-C), instead of dying of it: for `write`, which says what it wrote however it
/// stops, even while it waits for input or for room. `report` runs while the command
/// goes on: what it says, it takes under the command's own lock.
pub fn report_on_signal(report: impl FnOnce(u8) + Send + 'static) {
    *REPORT.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(report));
}

fn run_cleanup() {
    let r = registry();
    for (_, pid) in &r.children {
        if let Some(pid) = rustix::process::Pid::from_raw(*pid as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
    for (_, path) in &r.files {
        let _ = std::fs::remove_file(path).or_else(|_| std::fs::remove_dir_all(path));
    }
}

/// A file or child registered for cleanup; unregistered when dropped.
#[derive(Debug)]
pub struct Registered(u64);

impl Drop for Registered {
    fn drop(&mut self) {
        let mut r = registry();
        r.files.retain(|(id, _)| *id != self.0);
        r.children.retain(|(id, _)| *id != self.0);
    }
}

/// Removes `path` (a file, or a directory and what it holds) if the command is
/// interrupted while the returned guard lives.
#[must_use = "the path is unregistered when the guard is dropped"]
pub fn remove_on_signal(path: &Path) -> Registered {
    let id = next_id();
    registry().files.push((id, path.to_path_buf()));
    Registered(id)
}

/// Starts `cmd`, and sends SIGTERM to it if the command is interrupted while the guard
/// lives. The start and the registration happen under the lock the cleanup takes, so a
/// signal between them cannot leave the child running.
pub fn spawn_killed_on_signal(cmd: &mut std::process::Command) -> std::io::Result<(std::process::Child, Registered)> {
    let mut r = registry();
    let child = cmd.spawn()?;
    let id = next_id();
    r.children.push((id, child.id()));
    Ok((child, Registered(id)))
}
