//! Whether a process named in a ring file is still alive.

// The library's inspect API will expose this.
/// Whether process `pid` exists and has not exited (a zombie, exited and not yet
/// reaped, counts as exited); true if `/proc` is not mounted and it cannot be told. A
/// pid the kernel has since given to another process counts as alive: pids are what
/// ring files record.
pub fn alive(pid: impl Into<u64>) -> bool {
    let pid = pid.into();
    if pid == 0 || pid > u64::from(u32::MAX) {
        return false;
    }
    if !std::path::Path::new("/proc/self/stat").exists() {
        return true;
    }
    let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat")) else { return false };
    // "pid (comm) S ...": the state follows the last ')'.
    let state = stat.iter().rposition(|&b| b == b')').and_then(|i| stat.get(i + 2));
    !matches!(state, Some(b'Z' | b'X'))
}

/// `1234`, or `1234 (exited)` for a process that is gone; `none` for 0.
pub fn pid_text(pid: u32) -> String {
    match pid {
        0 => "none".into(),
        p if alive(p) => p.to_string(),
        p => format!("{p} (exited)"),
    }
}
