//! `ship`'s signals: the first SIGINT, SIGTERM or SIGHUP ends the round in flight.

use std::sync::atomic::{AtomicI32, Ordering::Relaxed};
use std::sync::Arc;

/// Takes SIGINT, SIGTERM and SIGHUP on a thread of its own: the first asks the agent to
/// stop after its round (the returned function gives its number from then on), a second
/// kills the process as that signal does. A signal the process was started with ignored
/// (`nohup` ignores SIGHUP) stays ignored. If the signals cannot be taken, the default
/// actions stay (stopping at once is safe too).
pub fn stop_signals() -> impl Fn() -> Option<i32> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let stop = Arc::new(AtomicI32::new(0));
    let ignored = ignored_signals();
    let wanted = [SIGINT, SIGTERM, SIGHUP].into_iter().filter(|&s| ignored & (1 << (s - 1)) == 0);
    if let Ok(mut signals) = signal_hook::iterator::Signals::new(wanted) {
        let first = stop.clone();
        let _ = std::thread::Builder::new().name("ringtrace-ship-signals".into()).spawn(move || {
            for signal in signals.forever() {
                if first.load(Relaxed) == 0 {
                    first.store(signal, Relaxed);
                    continue;
                }
                // Dies of the signal, as without the handler.
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                std::process::exit(128 + signal);
            }
        });
    }
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
