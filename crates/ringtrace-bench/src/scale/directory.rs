//! `scale-directory`: the memory `ringtrace decode` needs for a recorder directory of
//! many threads, against the same events in a trace file.
//!
//! For T = 1, 8, 64 and 256 threads, each writing E = 10,000 `tracing` events (quick
//! mode: 1,000) in spans of 100, as the `export` bench's trace does (an event with a
//! `u64`, another `u64` and a short `&str`): once into a flight recorder directory
//! (`Builder::flight_recorder().directory(..)`, 1 MiB a thread, which holds all of a
//! thread's events), once into a stream's trace file. The T threads run at once. The
//! files are written in the first round and kept until the last that measures them.
//!
//! Decoding formats every event as text, a few microseconds each: the rows of all four
//! T take about 23 s a round (quick mode: 2.3 s), so they run in the first 3 rounds
//! only (quick mode: 2), each still pairing the directory and the file in the round.
//!
//! Each decode runs in a child process, this program run again (`__decode-child
//! PATH`), doing what `ringtrace decode PATH > /dev/null` does with the same library
//! calls (`Trace::open`, `text::summary`, `text::write` in text format to a buffered
//! `/dev/null`), so that the bench needs no `ringtrace` binary. `peak_mib` is the
//! child's `VmHWM` (its resident set's high-water mark) read by the child as it ends;
//! the parent reaps it with `wait4` for its CPU time (`CPUns/rec`: user and system
//! time per event, the process's start included); `Mrec/s` counts events decoded per
//! second of the child's own wall time (the process's start left out). Not `wait4`'s
//! `ru_maxrss`: Linux folds into it the high-water mark of the memory the child had
//! before its `exec`, the bench's own (the spawn shares it), 110 MiB or more here. The bench fails if a
//! decode does not give T x E events. The target: the directory's peak within 2x of
//! the trace file's, per T.

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use tracing_subscriber::layer::SubscriberExt;

use crate::harness::Measured;
use crate::{Progress, Row};

pub(super) const BENCH: &str = "scale-directory";
const THREADS: [usize; 4] = [1, 8, 64, 256];
/// Rounds that measure the rows (the first ones; quick mode: 2).
const ROUNDS: usize = 3;
/// Events a thread writes (quick mode: a tenth).
const EVENTS: u64 = 10_000;
/// Each thread's ring, in both recorders: room for all its events and spans.
const PER_THREAD: u64 = 1 << 20;

/// What a child reports on stdout.
#[derive(serde::Serialize, serde::Deserialize)]
struct Report {
    events: u64,
    wall_ns: u64,
    /// `VmHWM` at the end, KiB.
    peak_kib: u64,
}

/// The child: decodes `path` as `ringtrace decode PATH > /dev/null` does and prints a
/// [`Report`].
pub fn child_main(path: &Path) -> std::io::Result<()> {
    use ringtrace_tracing::decode::{text, Trace};
    let t0 = Instant::now();
    let trace = Trace::open(path).map_err(std::io::Error::other)?;
    let summary = text::summary(&trace);
    if !summary.is_empty() {
        eprintln!("{summary}");
    }
    let mut w = BufWriter::new(std::fs::OpenOptions::new().write(true).open("/dev/null")?);
    let events = text::write(&trace, text::Format::Text, &mut w)?;
    w.flush()?;
    let wall_ns = t0.elapsed().as_nanos() as u64;
    let status = std::fs::read_to_string("/proc/self/status")?;
    let peak_kib = vm_hwm_kib(&status).ok_or_else(|| std::io::Error::other("no VmHWM in /proc/self/status"))?;
    let r = Report { events, wall_ns, peak_kib };
    println!("{}", serde_json::to_string(&r)?);
    Ok(())
}

/// The `VmHWM` line's KiB of a `/proc/PID/status`.
fn vm_hwm_kib(status: &str) -> Option<u64> {
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
}

/// The bench's files: a directory of this process's own, kept from the first round to
/// the last.
fn root() -> PathBuf {
    std::env::temp_dir().join(format!("ringtrace-bench-{}-scale", std::process::id()))
}

/// `threads` threads, all alive at once, each writing `events` events under `d`.
fn write_events(d: &tracing::Dispatch, threads: usize, events: u64) {
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        for t in 0..threads as u64 {
            let (d, barrier) = (d.clone(), &barrier);
            s.spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    barrier.wait();
                    for batch in 0..events.div_ceil(100) {
                        let _s = tracing::info_span!("batch", batch).entered();
                        for seq in batch * 100..(batch * 100 + 100).min(events) {
                            tracing::info!(t, seq, s = "short", "event");
                        }
                    }
                    // Every thread holds its ring until all have written: a recorder
                    // directory's ring is free for another thread once its thread exits.
                    barrier.wait();
                })
            });
        }
    });
}

/// Writes the recorder directory and the trace file of `threads` x `events` events.
fn write_pair(dir: &Path, file: &Path, threads: usize, events: u64) {
    {
        let (layer, recorder) = ringtrace_tracing::Builder::flight_recorder()
            .per_thread_bytes(PER_THREAD)
            .max_threads(threads.max(1) as u32)
            .directory(dir)
            .replace_existing(true)
            .build()
            .expect("a recorder directory");
        write_events(&tracing::Dispatch::new(tracing_subscriber::registry().with(layer)), threads, events);
        let stats = recorder.finish().expect("the flight recorder finished");
        assert_eq!(stats.overwritten + stats.lost + stats.no_ring, 0, "{BENCH}: the directory lost events: {stats:?}");
    }
    let _ = std::fs::remove_file(file);
    let (layer, recorder) =
        ringtrace_tracing::Builder::stream(file).per_thread_bytes(PER_THREAD).build().expect("a stream recorder");
    write_events(&tracing::Dispatch::new(tracing_subscriber::registry().with(layer)), threads, events);
    let stats = recorder.finish().expect("the stream finished");
    assert_eq!(stats.lost + stats.no_ring, 0, "{BENCH}: the stream lost events: {stats:?}");
}

/// Decodes `path` in a child; its report and resource usage.
// The child is reaped by `wait4`, which gives its resource usage; `Child::wait` cannot.
#[allow(clippy::zombie_processes)]
fn decode(path: &Path) -> (Report, libc::rusage) {
    let exe = std::env::current_exe().expect("this program's path");
    let mut child = Command::new(exe)
        .arg("__decode-child")
        .arg(path)
        .stdout(Stdio::piped())
        .spawn()
        .expect("the decode child starts");
    let mut stdout = Vec::new();
    child.stdout.take().expect("piped").read_to_end(&mut stdout).expect("the child's report");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: all-zero bytes are a valid `rusage` (integers and `timeval`s).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for (`Child` waits only when asked),
    // and both pointers are to live locals of the right types.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "{BENCH}: wait4: {}", std::io::Error::last_os_error());
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    match serde_json::from_slice::<Report>(&stdout) {
        Ok(report) if ok => (report, usage),
        _ => panic!("{BENCH}: the decode child of {} failed (status {status:#x})", path.display()),
    }
}

fn timeval(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

/// One decode's row.
fn row(variant: &str, path: &Path, threads: usize, events: u64) -> Row {
    let (r, usage) = decode(path);
    let want = threads as u64 * events;
    assert_eq!(r.events, want, "{BENCH}: {} decoded {} events, {want} were written", path.display(), r.events);
    let m = Measured {
        delivered: r.events,
        committed: r.events,
        drops: 0,
        elapsed: Duration::from_nanos(r.wall_ns),
        cpu: Some(timeval(usage.ru_utime) + timeval(usage.ru_stime)),
    };
    let mut row = Row::new(BENCH, "ringtrace-tracing", variant, threads, &m);
    row.peak_mib = Some(r.peak_kib as f64 / 1024.0);
    row
}

/// The rows: for each T, the directory and the trace file decoded back to back, which
/// first alternating from round to round.
pub(super) fn rows(quick: bool, round: usize, rounds: usize, progress: &mut Progress) -> Vec<Row> {
    let measuring = if quick { 2 } else { ROUNDS }.min(rounds);
    if round >= measuring {
        return Vec::new();
    }
    let events = if quick { EVENTS / 10 } else { EVENTS };
    let root = root();
    let mut out = Vec::new();
    for threads in THREADS {
        let dir = root.join(format!("dir-{threads}"));
        let file = root.join(format!("trace-{threads}.rtt"));
        if !file.exists() {
            progress.step(&format!("{BENCH}: writing {threads} threads x {events} events"));
            std::fs::create_dir_all(&root).expect("a temp directory");
            write_pair(&dir, &file, threads, events);
        }
        for first_dir in super::alternate(&[true, false], round) {
            let (variant, path) = if first_dir { ("recorder-dir", &dir) } else { ("trace-file", &file) };
            progress.step(&format!("{BENCH} {variant} threads={threads}"));
            out.push(row(variant, path, threads, events));
        }
    }
    if round + 1 >= measuring {
        let _ = std::fs::remove_dir_all(&root);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_hwm_is_read_from_a_status_file() {
        let status = "Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t   1234 kB\nVmRSS:\t  1000 kB\n";
        assert_eq!(vm_hwm_kib(status), Some(1234));
        assert_eq!(vm_hwm_kib("Name:\tx\n"), None);
    }
}
