//! `ringtrace demo`: the flight recorder across processes. Producer processes (this
//! program run again as `ringtrace __demo-producer`) write text events into an
//! overwrite ring file for a few seconds while a live display shows each producer's
//! rate; then the newest events, newest first (producer, sequence number, age), and
//! a table of what each producer wrote and lost, and what the ring overwrote.
//!
//! Each event is one text record: `p<producer> #<sequence> t=<CLOCK_MONOTONIC ns>
//! <event>`, so `ringtrace snapshot PATH` of a kept demo ring (`demo PATH`) is readable too.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ringtrace::clock::monotonic_ns;
use ringtrace::inspect::RingFile;
use ringtrace::{FlightRecorder, ReserveError, Wakeup};

use crate::cleanup;
use crate::failure::{chain, Failure};
use crate::output::stdout_err;
use crate::units::{bytes, decimal_prefix, duration_ns, rate};

fn fail(what: &str) -> impl FnOnce(ringtrace::Error) -> Failure + '_ {
    move |e| Failure::msg(format!("{what}: {}", chain(&e)))
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

/// The first argument of a producer process (`ringtrace __demo-producer FILE ID
/// MILLIS`), which `main` parses apart from the public command line.
pub const PRODUCER_ARG: &str = "__demo-producer";

/// Producer columns the live display shows one by one (more are summed only).
const SHOWN: usize = 4;

/// The body of a producer process: events for `millis`, then `RESULT <written>
/// <lost> <elapsed ns>` on stdout.
pub fn producer(file: &Path, id: u32, millis: u64) -> Result<(), Failure> {
    let ring = FlightRecorder::open(file).map_err(fail("opening the demo ring"))?;
    let mut p = ring.producer().map_err(fail("attaching a producer"))?;
    let run = Duration::from_millis(millis);
    let (mut written, mut lost, mut seq) = (0u64, 0u64, 0u64);
    let mut buf = Vec::with_capacity(128);
    let t = Instant::now();
    while t.elapsed() < run {
        for _ in 0..256 {
            buf.clear();
            let event = EVENTS[(seq % EVENTS.len() as u64) as usize];
            let _ = write!(buf, "p{id} #{seq} t={} {event}", monotonic_ns());
            seq += 1;
            match p.output(&buf, Wakeup::NoWakeup) {
                Ok(()) => written += 1,
                Err(ReserveError::Pending { .. } | ReserveError::Paused { .. }) => lost += 1,
                Err(e) => return Err(Failure::msg(format!("writing an event: {e}"))),
            }
        }
    }
    let elapsed = t.elapsed().as_nanos();
    let mut out = std::io::stdout().lock();
    writeln!(out, "RESULT {written} {lost} {elapsed}").map_err(stdout_err)
}

/// An event record taken apart: producer, sequence number, timestamp, event.
fn parse_event(rec: &[u8]) -> Option<(&str, u64, u64, &str)> {
    let s = std::str::from_utf8(rec).ok()?;
    let (producer, rest) = s.split_once(' ')?;
    let (seq, rest) = rest.strip_prefix('#')?.split_once(' ')?;
    let (t, event) = rest.strip_prefix("t=")?.split_once(' ')?;
    Some((producer, seq.parse().ok()?, t.parse().ok()?, event))
}

/// One producer's report.
struct Report {
    written: u64,
    lost: u64,
    elapsed_ns: u64,
}

fn report(child: Child, id: usize) -> Result<Report, Failure> {
    let out = child.wait_with_output().map_err(|e| Failure::msg(format!("waiting for producer {id}: {e}")))?;
    if !out.status.success() {
        return Err(Failure::msg(format!("producer {id} failed: {}", out.status)));
    }
    let nums: Vec<u64> = BufReader::new(&out.stdout[..])
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("RESULT ").map(|r| r.split(' ').filter_map(|w| w.parse().ok()).collect()))
        .unwrap_or_default();
    match nums[..] {
        [written, lost, elapsed_ns] => Ok(Report { written, lost, elapsed_ns }),
        _ => Err(Failure::msg(format!("producer {id} reported nothing"))),
    }
}

/// A fresh name in /dev/shm (or the temporary directory) that nobody can guess,
/// `ringtrace-demo-PID-RANDOM.ring`: another user cannot plant a file or a link there
/// first (the ring is created exclusively, so a planted name would stop the demo).
fn default_path() -> PathBuf {
    use std::hash::{BuildHasher, Hasher};
    // std seeds each `RandomState` from the operating system's random source.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    dir.join(format!("ringtrace-demo-{}-{:016x}.ring", std::process::id(), h.finish()))
}

pub fn run(file: Option<PathBuf>, seconds: u64, producers: u32, capacity: u64) -> Result<(), Failure> {
    let keep = file.is_some();
    let path = file.unwrap_or_else(default_path);
    crate::destination::directory_of(&path)
        .map_err(|e| Failure::msg(format!("cannot create the demo ring {}: {e}", path.display())))?;
    let ring = FlightRecorder::builder(capacity).create(&path).map_err(fail("creating the demo ring"))?;
    // Ctrl-C (or SIGTERM) removes the ring file it made and stops the producers.
    let _cleanup = (!keep).then(|| cleanup::remove_on_signal(&path));
    let result = run_with(&ring, &path, seconds, producers);
    if !keep {
        let _ = std::fs::remove_file(&path);
    }
    result
}

/// The live table's header: the time, each shown producer's rate of records written,
/// the ring's (written, overwritten), then its running counts (records lost so far,
/// records it holds). Every column says its unit.
fn live_header(shown: usize) -> String {
    let mut header = format!("{:>7}", "time");
    for id in 0..shown {
        header += &format!(" {:>11}", format!("p{id} rec/s"));
    }
    header + &format!(" {:>11} {:>19} {:>14} {:>14}", "all rec/s", "overwritten rec/s", "lost records", "held records")
}

/// Records each producer process committed, from the ring file's counter slots (by
/// owner pid); `pids[i]` is producer i's process. `None` for a producer that owns no
/// slot: it has exited (and its slot no longer says whose it was).
fn committed_by(path: &Path, pids: &[u32]) -> Vec<Option<u64>> {
    let mut by_pid: HashMap<u64, u64> = HashMap::new();
    if let Ok(state) = RingFile::open(path).and_then(|f| f.state()) {
        for slot in &state.producers {
            *by_pid.entry(slot.owner).or_default() += slot.committed;
        }
    }
    pids.iter().map(|p| by_pid.get(&u64::from(*p)).copied()).collect()
}

fn run_with(ring: &FlightRecorder, path: &Path, seconds: u64, producers: u32) -> Result<(), Failure> {
    let mut out = std::io::LineWriter::new(crate::output::stdout()?);
    let tty = out.get_ref().is_terminal();
    let exe = std::env::current_exe().map_err(|e| Failure::msg(format!("finding this program: {e}")))?;
    let cap = bytes(ring.capacity());
    writeln!(
        out,
        "ringtrace demo: {producers} producer processes write events into {} for {seconds} s",
        path.display()
    )
    .map_err(stdout_err)?;
    writeln!(out, "the ring: overwrite mode, {cap}; when full, the oldest events make room\n").map_err(stdout_err)?;
    let millis = seconds * 1000;
    let mut children = Vec::new();
    let mut guards = Vec::new();
    for id in 0..producers {
        let mut cmd = Command::new(&exe);
        cmd.arg(PRODUCER_ARG).arg(path).arg(id.to_string()).arg(millis.to_string()).stdout(Stdio::piped());
        let (child, guard) = cleanup::spawn_killed_on_signal(&mut cmd)
            .map_err(|e| Failure::msg(format!("starting producer {id}: {e}")))?;
        guards.push(guard);
        children.push(child);
    }
    let pids: Vec<u32> = children.iter().map(Child::id).collect();

    // The live display: rates per second since the last tick, and running counts.
    let shown = pids.len().min(SHOWN);
    writeln!(out, "{}", live_header(shown)).map_err(stdout_err)?;
    let t0 = Instant::now();
    let (mut last, mut last_by, mut last_t, mut last_line) = (ring.stats(), committed_by(path, &pids), t0, t0);
    while children.iter_mut().any(|c| matches!(c.try_wait(), Ok(None))) {
        std::thread::sleep(Duration::from_millis(250));
        let (now, now_by, t) = (ring.stats(), committed_by(path, &pids), Instant::now());
        let dt = (t - last_t).as_secs_f64();
        let per_sec = |a: u64, b: u64| decimal_prefix(a.saturating_sub(b) as f64 / dt);
        let held = ring.snapshot().map(|s| s.len()).unwrap_or(0);
        let mut line = format!("{:>5.1} s", t0.elapsed().as_secs_f64());
        for id in 0..shown {
            let r = match (now_by[id], last_by[id]) {
                (Some(n), Some(l)) => per_sec(n, l),
                (Some(_), None) => "starting".into(),
                (None, _) => "done".into(),
            };
            line += &format!(" {r:>11}");
        }
        let (all, overwritten) = (per_sec(now.committed, last.committed), per_sec(now.overwritten, last.overwritten));
        line += &format!(" {all:>11} {overwritten:>19} {:>14} {held:>14}", now.lost);
        if tty {
            write!(out, "\r\x1b[2K{line}").map_err(stdout_err)?;
            out.flush().map_err(stdout_err)?;
        } else if t - last_line >= Duration::from_secs(1) {
            writeln!(out, "{line}").map_err(stdout_err)?;
            last_line = t;
        }
        (last, last_by, last_t) = (now, now_by, t);
    }
    if tty {
        writeln!(out).map_err(stdout_err)?;
    }
    let reports = children.into_iter().enumerate().map(|(id, c)| report(c, id)).collect::<Result<Vec<_>, _>>()?;

    // The flight recorder's contents: the newest events first.
    let snap = ring.snapshot().map_err(|e| Failure::msg(format!("snapshot: {e}")))?;
    let taken = monotonic_ns();
    writeln!(out, "\nthe newest events (10 of the {} the ring holds), newest first:", snap.len())
        .map_err(stdout_err)?;
    writeln!(out, "{:<9} {:>12} {:>12}  event", "producer", "sequence", "age").map_err(stdout_err)?;
    for rec in snap.iter().rev().take(10) {
        match parse_event(rec) {
            Some((p, seq, t, event)) => {
                let age = duration_ns(taken.saturating_sub(t));
                writeln!(out, "{p:<9} {seq:>12} {age:>12}  {event}")
            }
            None => writeln!(out, "{}", String::from_utf8_lossy(rec)),
        }
        .map_err(stdout_err)?;
    }

    let s = ring.stats();
    writeln!(out, "\n{:<9} {:>14} {:>10} {:>12} {:>12}", "producer", "written", "lost", "rate", "ns/record")
        .map_err(stdout_err)?;
    for (id, r) in reports.iter().enumerate() {
        let secs = (r.elapsed_ns as f64 / 1e9).max(1e-9);
        let ns = r.elapsed_ns as f64 / (r.written + r.lost).max(1) as f64;
        let rt = rate(r.written as f64 / secs);
        writeln!(out, "{:<9} {:>14} {:>10} {rt:>12} {ns:>12.1}", format!("p{id}"), r.written, r.lost)
            .map_err(stdout_err)?;
    }
    let written: u64 = reports.iter().map(|r| r.written).sum();
    let lost: u64 = reports.iter().map(|r| r.lost).sum();
    let all = rate(written as f64 / seconds.max(1) as f64);
    writeln!(out, "{:<9} {written:>14} {lost:>10} {all:>12}", "all").map_err(stdout_err)?;
    let held = snap.len() as u64;
    let balanced = s.committed == written && s.committed == s.overwritten + held;
    writeln!(
        out,
        "\nthe ring: {} written = {} overwritten (to make room) + {held} held at the end: {}",
        s.committed,
        s.overwritten,
        if balanced { "every event accounted for" } else { "MISMATCH" },
    )
    .map_err(stdout_err)?;
    writeln!(
        out,
        "lost (refused at a record still being written): {lost}, as the file counts: {}; dead: {}",
        s.lost, s.dead
    )
    .map_err(stdout_err)?;
    if !balanced || s.lost != lost {
        return Err(Failure::msg("the counts do not add up (see above)"));
    }
    Ok(())
}
