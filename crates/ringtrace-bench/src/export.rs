//! `export`: a trace of a million `tracing` events (and one of two million) exported to
//! Perfetto's protobuf, CTF 1.8 and Chrome's JSON with `ringtrace-tracing`'s exporters,
//! as `ringtrace export` does: the trace file opened (read once and checked), then
//! written out format by format to a file.
//!
//! The trace: a stream written by four threads, each 100-event spans of events with
//! two fields (a `u64` and a short `&str`) and a message, as the `tracing` bench writes
//! them: 1,040,000 records for a million events. It is written once per round, before
//! the rows.
//!
//! Each export runs in a child process (this program run again), so that its peak
//! memory is its own: `peak MiB` is the child's `VmHWM` (resident set high-water mark),
//! which stays the same from the million-event trace to the two-million one, as the
//! exporters hold a few chunks of the trace and a few packets of the output, never the
//! trace. `Mrec/s`: events exported per second of wall time (opening included, the
//! process's start not); `CPUns/rec`: the child's CPU time per event (a Perfetto export
//! of a large trace runs on two threads).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tracing_subscriber::layer::SubscriberExt;

use crate::harness::{process_cpu, Measured};
use crate::{Progress, Row, Selection};

const FORMATS: [&str; 3] = ["perfetto", "ctf", "chrome"];

/// Writes a stream trace of `events` events from four threads to `path`.
fn write_trace(path: &Path, events: u64) {
    let _ = std::fs::remove_file(path);
    let (layer, recorder) =
        ringtrace_tracing::Builder::stream(path).per_thread_bytes(32 << 20).build().expect("a stream recorder");
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let spans = events / 4 / 100;
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let d = d.clone();
            s.spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    for batch in 0..spans {
                        let _s = tracing::info_span!("batch", batch).entered();
                        for seq in 0..100u64 {
                            tracing::info!(t, seq, s = "short", "event");
                        }
                    }
                })
            });
        }
    });
    recorder.finish().expect("the stream finished");
}

/// What a child reports: events exported, wall and CPU nanoseconds, peak KiB.
#[derive(serde::Serialize, serde::Deserialize)]
struct Report {
    events: u64,
    wall_ns: u64,
    cpu_ns: u64,
    peak_kib: u64,
}

/// The child: opens `trace`, exports it to `format` at `out`, prints a [`Report`].
pub fn child_main(format: &str, trace: &Path, out: &Path) -> std::io::Result<()> {
    use ringtrace_export::{chrome, ctf, perfetto};
    let (t0, c0) = (Instant::now(), process_cpu());
    let tr = ringtrace_tracing::decode::Trace::open(trace).map_err(std::io::Error::other)?;
    let x = match format {
        "ctf" => ctf::write(&tr, out)?,
        f => {
            let mut w = std::io::BufWriter::new(std::fs::File::create(out)?);
            let x = if f == "perfetto" { perfetto::write(&tr, &mut w)? } else { chrome::write(&tr, &mut w)? };
            std::io::Write::flush(&mut w)?;
            x
        }
    };
    let (wall, cpu) = (t0.elapsed(), process_cpu() - c0);
    let status = std::fs::read_to_string("/proc/self/status")?;
    let peak_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let r = Report { events: x.events, wall_ns: wall.as_nanos() as u64, cpu_ns: cpu.as_nanos() as u64, peak_kib };
    println!("{}", serde_json::to_string(&r)?);
    Ok(())
}

/// Runs one export in a child process.
fn measure(format: &str, trace: &Path, out: &Path, variant: String) -> Row {
    let exe = std::env::current_exe().expect("this program's path");
    let o =
        Command::new(exe).args(["__export-child", format]).arg(trace).arg(out).output().expect("the export child runs");
    let _ = std::fs::remove_file(out).or_else(|_| std::fs::remove_dir_all(out));
    let r: Report = match serde_json::from_slice(&o.stdout) {
        Ok(r) if o.status.success() => r,
        _ => panic!("export child failed: {}", String::from_utf8_lossy(&o.stderr)),
    };
    let m = Measured {
        delivered: r.events,
        committed: r.events,
        drops: 0,
        elapsed: Duration::from_nanos(r.wall_ns),
        cpu: Some(Duration::from_nanos(r.cpu_ns)),
    };
    let mut row = Row::new("export", "ringtrace-tracing", variant, 1, &m);
    row.peak_mib = Some(r.peak_kib as f64 / 1024.0);
    row
}

/// The `export` rows: each format for the million-event trace, then for the
/// two-million-event one (full mode only).
pub fn rows(sel: &Selection, progress: &mut Progress) -> Vec<Row> {
    if !sel.wants("export") {
        return Vec::new();
    }
    let dir = std::env::temp_dir().join(format!("ringtrace-bench-{}-export", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp directory");
    let sizes: &[u64] = if sel.quick { &[1_000_000] } else { &[1_000_000, 2_000_000] };
    let mut out = Vec::new();
    for &events in sizes {
        let trace: PathBuf = dir.join("trace.rtt");
        progress.step(&format!("export: writing a trace of {events} events"));
        write_trace(&trace, events);
        for format in FORMATS {
            progress.step(&format!("export {format} {}M", events / 1_000_000));
            out.push(measure(format, &trace, &dir.join(format), format!("{format}/{}M", events / 1_000_000)));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    out
}
