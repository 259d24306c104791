//! `ringtrace demo`: the flight recorder across processes. Producer processes (this
//! program run again as `ringtrace __demo-producer`) write text events into an
//! overwrite ring file for a few seconds while a live display shows rates; then the
//! newest events, newest first, from a snapshot, and a table of what was written, lost,
//! overwritten and read, with ns per record.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ringtrace::{FlightRecorder, ReserveError, Wakeup};

use crate::format::{stdout_err, Failure};

fn fail(what: &str) -> impl FnOnce(ringtrace::Error) -> Failure + '_ {
    move |e| Failure::Message(format!("{what}: {e}"))
}

/// The events a producer cycles through (a traced program's system calls, say).
const EVENTS: [&str; 6] = [
    "openat path=/var/log/app.log fd=7",
    "read fd=7 bytes=4096",
    "write fd=1 bytes=512",
    "futex op=WAKE uaddr=0x7f3a4c",
    "close fd=7",
    "sendto fd=9 bytes=1448",
];

/// Appends `n` in decimal.
fn push_u64(buf: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

/// The body of a producer process: `p<id> #<seq> <event>` records for `millis`, then
/// `RESULT <written> <lost> <elapsed ns>` on stdout.
pub fn producer(file: &Path, id: u32, millis: u64) -> Result<(), Failure> {
    let ring = FlightRecorder::open(file).map_err(fail("opening the demo ring"))?;
    let mut p = ring.producer().map_err(fail("attaching a producer"))?;
    let run = Duration::from_millis(millis);
    let (mut written, mut lost, mut seq) = (0u64, 0u64, 0u64);
    let mut buf = Vec::with_capacity(96);
    let t = Instant::now();
    while t.elapsed() < run {
        for _ in 0..256 {
            buf.clear();
            buf.push(b'p');
            push_u64(&mut buf, u64::from(id));
            buf.extend_from_slice(b" #");
            push_u64(&mut buf, seq);
            buf.push(b' ');
            buf.extend_from_slice(EVENTS[(seq % EVENTS.len() as u64) as usize].as_bytes());
            seq += 1;
            match p.output(&buf, Wakeup::NoWakeup) {
                Ok(()) => written += 1,
                Err(ReserveError::Pending { .. } | ReserveError::Paused { .. }) => lost += 1,
                Err(e) => return Err(Failure::Message(format!("writing an event: {e}"))),
            }
        }
    }
    let elapsed = t.elapsed().as_nanos();
    let mut out = std::io::stdout().lock();
    writeln!(out, "RESULT {written} {lost} {elapsed}").map_err(stdout_err)
}

/// One producer's report.
struct Report {
    written: u64,
    lost: u64,
    elapsed_ns: u64,
}

fn report(child: Child, id: u32) -> Result<Report, Failure> {
    let out = child.wait_with_output().map_err(|e| Failure::Message(format!("waiting for producer {id}: {e}")))?;
    if !out.status.success() {
        return Err(Failure::Message(format!("producer {id} failed: {}", out.status)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let nums: Vec<u64> = BufReader::new(text.as_bytes())
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("RESULT ").map(|r| r.split(' ').filter_map(|w| w.parse().ok()).collect()))
        .unwrap_or_default();
    match nums[..] {
        [written, lost, elapsed_ns] => Ok(Report { written, lost, elapsed_ns }),
        _ => Err(Failure::Message(format!("producer {id} reported nothing"))),
    }
}

fn default_path() -> PathBuf {
    let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    dir.join(format!("ringtrace-demo-{}.ring", std::process::id()))
}

/// Millions, with one decimal.
fn m(n: f64) -> String {
    format!("{:.1} M", n / 1e6)
}

pub fn run(file: Option<PathBuf>, seconds: u64, producers: u32, capacity: u64) -> Result<(), Failure> {
    let keep = file.is_some();
    let path = file.unwrap_or_else(default_path);
    let ring = FlightRecorder::builder(capacity).create(&path).map_err(fail("creating the demo ring"))?;
    let result = run_with(&ring, &path, seconds, producers);
    if !keep {
        let _ = std::fs::remove_file(&path);
    }
    result
}

fn run_with(ring: &FlightRecorder, path: &Path, seconds: u64, producers: u32) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    let tty = std::io::stdout().is_terminal();
    let exe = std::env::current_exe().map_err(|e| Failure::Message(format!("finding this program: {e}")))?;
    writeln!(
        out,
        "ringtrace demo: {producers} producer processes write events into {} ({} KiB overwrite ring) for {seconds} s",
        path.display(),
        ring.capacity() / 1024
    )
    .map_err(stdout_err)?;
    let millis = seconds * 1000;
    let mut children = Vec::new();
    for id in 0..producers {
        let child = Command::new(&exe)
            .arg("__demo-producer")
            .arg(path)
            .arg(id.to_string())
            .arg(millis.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| Failure::Message(format!("starting producer {id}: {e}")))?;
        children.push(child);
    }

    // The live display, from the ring file's counters and a snapshot per tick.
    let t0 = Instant::now();
    let (mut last, mut last_t, mut last_line) = (ring.stats(), t0, t0);
    while children.iter_mut().any(|c| matches!(c.try_wait(), Ok(None))) {
        std::thread::sleep(Duration::from_millis(250));
        let (now, t) = (ring.stats(), Instant::now());
        let dt = (t - last_t).as_secs_f64();
        let rate = |a: u64, b: u64| (a - b) as f64 / dt;
        let held = ring.snapshot().map(|s| s.len()).unwrap_or(0);
        let line = format!(
            "{:>5.1} s  written {:>8}/s  overwritten {:>8}/s  lost {:>6}  ring holds {held} events",
            t0.elapsed().as_secs_f64(),
            m(rate(now.committed, last.committed)),
            m(rate(now.overwritten, last.overwritten)),
            now.lost,
        );
        if tty {
            write!(out, "\r\x1b[2K{line}").map_err(stdout_err)?;
            out.flush().map_err(stdout_err)?;
        } else if t - last_line >= Duration::from_secs(1) {
            writeln!(out, "{line}").map_err(stdout_err)?;
            last_line = t;
        }
        (last, last_t) = (now, t);
    }
    if tty {
        writeln!(out).map_err(stdout_err)?;
    }
    let reports = children.into_iter().zip(0..).map(|(c, id)| report(c, id)).collect::<Result<Vec<_>, _>>()?;

    // The flight recorder's contents: the newest events first.
    let snap = ring.snapshot().map_err(|e| Failure::Message(format!("snapshot: {e}")))?;
    writeln!(out, "\nnewest events (of {} the ring holds), newest first:", snap.len()).map_err(stdout_err)?;
    for (pos, rec) in snap.entries().rev().take(10) {
        writeln!(out, "  @{pos:<12} {}", String::from_utf8_lossy(rec)).map_err(stdout_err)?;
    }

    let s = ring.stats();
    writeln!(out, "\n{:<10} {:>14} {:>10} {:>12}", "producer", "written", "lost", "ns/record").map_err(stdout_err)?;
    for (id, r) in reports.iter().enumerate() {
        let ns = r.elapsed_ns as f64 / (r.written + r.lost).max(1) as f64;
        writeln!(out, "{:<10} {:>14} {:>10} {ns:>12.1}", format!("p{id}"), r.written, r.lost).map_err(stdout_err)?;
    }
    let written: u64 = reports.iter().map(|r| r.written).sum();
    let lost: u64 = reports.iter().map(|r| r.lost).sum();
    let secs = seconds.max(1) as f64;
    writeln!(out, "{:<10} {:>14} {:>10} {:>12}", "total", written, lost, format!("{}/s", m(written as f64 / secs)))
        .map_err(stdout_err)?;
    let held = snap.len() as u64;
    let balanced = s.committed == written && s.committed == s.overwritten + held;
    writeln!(
        out,
        "\nring: written {} = overwritten {} + read by the snapshot {held}: {}; lost {} (counted in the file: {}), \
         dead {}",
        s.committed,
        s.overwritten,
        if balanced { "every record accounted for" } else { "MISMATCH" },
        lost,
        s.lost,
        s.dead,
    )
    .map_err(stdout_err)?;
    if !balanced || s.lost != lost {
        return Err(Failure::Message("the counts do not add up (see above)".into()));
    }
    Ok(())
}
