//! Whether a process named in a ring file is still alive.

/// Whether process `pid` still runs (the library's test, the one ringtrace uses to
/// take over the roles of dead processes).
pub fn alive(pid: impl Into<u64>) -> bool {
    u32::try_from(pid.into()).is_ok_and(ringtrace::inspect::process_alive)
}

/// `1234`, or `1234 (exited)` for a process that is gone; `none` for 0.
pub fn pid_text(pid: u32) -> String {
    match pid {
        0 => "none".into(),
        p if alive(p) => p.to_string(),
        p => format!("{p} (exited)"),
    }
}
