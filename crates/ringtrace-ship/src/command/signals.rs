//! The signals that stop a command: SIGINT, SIGTERM and SIGHUP, taken on a thread of
//! their own ([`on_stop_signals`]), so that what a signal starts runs as ordinary code,
//! not in a signal handler. `ship`'s ([`stop_signals`]): the first ends the round in
//! flight. The `ringtrace` command's signal thread (its cleanup of temporary files) is
//! [`on_stop_signals`] too.

use std::sync::atomic::{AtomicI32, Ordering::Relaxed};
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// Takes SIGINT, SIGTERM and SIGHUP on a thread named `thread`, which calls `handle`
/// with each signal's number as it arrives. A signal the process was started with
/// ignored (`nohup` ignores SIGHUP, a shell's `&` SIGINT) stays ignored: the command
/// is not stopped by what its caller meant it to survive. Returns false, the default
/// actions left, if the signals cannot be taken or the thread not started (not an
/// error: the command runs as before).
pub fn on_stop_signals(thread: &str, mut handle: impl FnMut(i32) + Send + 'static) -> bool {
    let ignored = ignored_signals();
    let wanted = [SIGINT, SIGTERM, SIGHUP].into_iter().filter(|&s| ignored & (1 << (s - 1)) == 0);
    let Ok(mut signals) = signal_hook::iterator::Signals::new(wanted) else { return false };
    std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || {
            for signal in signals.forever() {
                handle(signal);
            }
        })
        .is_ok()
}

/// Ends the process as `signal` would have without a handler (status 128 + `signal`
/// where its default action does not end it).
pub fn die_of(signal: i32) -> ! {
    let _ = signal_hook::low_level::emulate_default_handler(signal);
    std::process::exit(128 + signal);
}

/// Takes SIGINT, SIGTERM and SIGHUP ([`on_stop_signals`]): the first asks the agent to
/// stop after its round (the returned function gives its number from then on), a second
/// kills the process as that signal does ([`die_of`]). If the signals cannot be taken,
/// the default actions stay (stopping at once is safe too).
pub fn stop_signals() -> impl Fn() -> Option<i32> {
    let stop = Arc::new(AtomicI32::new(0));
    let first = stop.clone();
    on_stop_signals("ringtrace-ship-signals", move |signal| {
        if first.load(Relaxed) != 0 {
            die_of(signal);
        }
        first.store(signal, Relaxed);
    });
    move || match stop.load(Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// The signals this process ignores (bit `n - 1` for signal `n`), from the `SigIgn`
/// mask of `/proc/self/status` (see proc(5)); none if it cannot be read.
fn ignored_signals() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return 0 };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .unwrap_or(0)
}
