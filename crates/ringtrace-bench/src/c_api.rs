//! `c-api`: the cost of one trace record written from C through ringtrace's C API
//! (`ringtrace_channel_producer_output` on a flight-recorder channel with TSC timestamps: one
//! ring per writer thread, overwrite mode, no reader), next to an LTTng-UST 2.13
//! tracepoint of the same payload recorded into a flight-recorder session, and next to
//! the same channel operation called from Rust (`ChannelProducer::output`).
//!
//! Rows (`variant` `8B` and `64B`, 1 and 2 writer threads; the metric is
//! `channel-scaling`'s: **`ns_per_rec` is writer-thread CPU time per record**,
//! `CLOCK_THREAD_CPUTIME_ID` summed over writers divided by their records; `mrec_per_s`
//! and `wall_ns_per_rec` are wall-clock):
//!
//! * `ringtrace-rust`: measured here, `Channel::<Overwrite, Tsc>::builder(1 MiB)` with
//!   the builder's defaults, every writer calling `producer.output(record,
//!   Wakeup::NoWakeup)` on a producer handle of its own (as the C writers hold a
//!   `ringtrace_channel_producer`);
//! * `ringtrace-rust-layer` (variant `event4`): a typed event of 4 fields (u64, i64,
//!   f64, a 9-byte `&str`) and its message through `ringtrace-tracing`'s layer
//!   (`tracing::info!` under `registry().with(layer)`, the thread's default), into a
//!   flight recorder of 1 MiB a thread: what a Rust program pays for the event the C
//!   program records with `RINGTRACE_INFO`;
//! * `ringtrace-c` and `lttng-ust`: the C program `lttng_vs_ringtrace`
//!   (crates/ringtrace-bench/c, built by scripts/build-c-bench.sh next to this binary;
//!   `RINGTRACE_C_BENCH` names another path), run for one round (`--round k`) with the
//!   same windows; it prints its rows as JSON lines in [`Row`]'s shape. The LTTng rows
//!   run inside a session made for the round and destroyed after it: snapshot mode
//!   (`lttng create --snapshot`), one user-space channel in overwrite mode with 4
//!   sub-buffers of 256 KiB (per CPU), the `ringtrace_bench:*` events enabled.
//!
//! Where the C program is not built the C rows are left out, and where LTTng cannot
//! record (no `lttng` command, no session daemon and none can be started, not root or
//! in the `tracing` group) the LTTng rows are, each with one line on stderr. In each
//! round the Rust rows and the C program run back to back, in an order that alternates
//! from round to round; inside the C program, each ringtrace row and its LTTng row run
//! back to back, alternating too.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use ringtrace::clock::Tsc;
use ringtrace::config::Overwrite;
use ringtrace::{Channel, Wakeup};

use crate::channel::{run_writers, CpuMeasured};
use crate::{Progress, Row, RunCfg, Selection};

const BENCH: &str = "c-api";
/// Each writer's ring: the C program's `RING_BYTES`.
const RING: u64 = 1 << 20;
/// Record sizes and writer counts of the rows.
const BYTES: [usize; 2] = [8, 64];
const WRITERS: [usize; 2] = [1, 2];
/// The C program's file name, next to this binary.
const PROGRAM: &str = "lttng_vs_ringtrace";

/// The windows of the rows: `channel-scaling`'s quick windows in quick mode.
fn window(cfg: &RunCfg, quick: bool) -> RunCfg {
    if quick {
        RunCfg {
            warmup: cfg.warmup.min(Duration::from_millis(20)),
            duration: cfg.duration.min(Duration::from_millis(60)),
        }
    } else {
        RunCfg {
            warmup: cfg.warmup.min(Duration::from_millis(50)),
            duration: cfg.duration.min(Duration::from_millis(200)),
        }
    }
}

/// `writers` threads writing `bytes`-byte records, each through a producer handle of
/// its own (`ChannelProducer::output`), as the C program's writers do through
/// `ringtrace_channel_producer_output`.
fn rust_rows(cfg: &RunCfg, tsc: Tsc, bytes: usize, writers: usize) -> CpuMeasured {
    let channel = Channel::<Overwrite, Tsc>::builder(RING).build(tsc).expect("valid channel");
    let make = |_| {
        let mut producer = channel.producer().expect("a free producer slot");
        let mut buf = [0x5au8; 64];
        move |v: u64| {
            buf[..8].copy_from_slice(&v.to_le_bytes());
            producer.output(&buf[..bytes], Wakeup::NoWakeup).is_ok()
        }
    };
    run_writers(cfg, writers, make, None::<fn()>)
}

/// `writers` threads recording the typed event of 4 fields through the
/// `ringtrace-tracing` layer into an in-memory flight recorder of `RING` bytes a thread.
fn layer_rows(cfg: &RunCfg, writers: usize) -> CpuMeasured {
    use tracing_subscriber::layer::SubscriberExt;
    let (layer, _recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(RING).build().expect("a recorder");
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let make = |_| {
        // `make` runs on the writer's thread: the subscriber is that thread's default.
        let guard = tracing::dispatcher::set_default(&dispatch);
        move |v: u64| {
            let _in = &guard;
            tracing::info!(seq = v, delta = -(v as i64), ratio = v as f64 * 0.5, path = "GET /item", "tick");
            true
        }
    };
    run_writers(cfg, writers, make, None::<fn()>)
}

/// The C program, if built.
fn program() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RINGTRACE_C_BENCH") {
        return Some(PathBuf::from(p));
    }
    let p = std::env::current_exe().ok()?.with_file_name(PROGRAM);
    p.exists().then_some(p)
}

/// An LTTng flight-recorder session, destroyed (with its output directory) on drop.
struct Session {
    name: String,
    dir: PathBuf,
}

fn lttng(args: &[&str]) -> Result<(), String> {
    let out = Command::new("lttng")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("lttng {}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!("lttng {}: {}", args[0], err.trim().replace('\n', " ")))
    }
}

impl Session {
    /// A snapshot-mode session recording `ringtrace_bench:*` into one overwrite channel.
    fn start() -> Result<Session, String> {
        if lttng(&["list"]).is_err() {
            // No session daemon reachable: start one (root: the root daemon).
            let ok = Command::new("lttng-sessiond")
                .arg("--daemonize")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|e| format!("lttng-sessiond: {e}"))?
                .success();
            if !ok {
                return Err("lttng-sessiond --daemonize failed".into());
            }
        }
        let name = format!("ringtrace-bench-{}", std::process::id());
        let dir = std::env::temp_dir().join(&name);
        let s = Session { name, dir };
        let out = format!("--output={}", s.dir.display());
        let sess = format!("--session={}", s.name);
        lttng(&["create", &s.name, "--snapshot", &out])?;
        lttng(&[
            "enable-channel",
            "--userspace",
            &sess,
            "--overwrite",
            "--subbuf-size=256K",
            "--num-subbuf=4",
            "rtbench",
        ])?;
        lttng(&["enable-event", "--userspace", &sess, "--channel=rtbench", "ringtrace_bench:*"])?;
        lttng(&["start", &s.name])?;
        Ok(s)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Err(e) = lttng(&["destroy", &self.name]) {
            eprintln!("ringtrace-bench: {BENCH}: {e}");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The C program for one round, inside an LTTng session when one can be made.
fn c_rows(prog: &PathBuf, cfg: &RunCfg, round: usize) -> Vec<Row> {
    let session = Session::start().map_err(|e| eprintln!("ringtrace-bench: {BENCH} lttng-ust rows skipped: {e}")).ok();
    let mut cmd = Command::new(prog);
    cmd.args(["--round", &round.to_string()])
        .args(["--warmup-ms", &cfg.warmup.as_millis().to_string()])
        .args(["--window-ms", &cfg.duration.as_millis().to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    if session.is_none() {
        cmd.args(["--only", "ringtrace"]);
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("ringtrace-bench: {BENCH} C rows skipped: {}: {e}", prog.display());
            return Vec::new();
        }
    };
    drop(session);
    if !out.status.success() {
        eprintln!("ringtrace-bench: {BENCH}: {} exited with {}", prog.display(), out.status);
    }
    parse(&String::from_utf8_lossy(&out.stdout))
}

/// The C program's JSON lines as rows (a line that is not a row is reported and left out).
fn parse(text: &str) -> Vec<Row> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| {
            serde_json::from_str::<Row>(l).map_err(|e| eprintln!("ringtrace-bench: {BENCH}: bad row {l}: {e}")).ok()
        })
        .collect()
}

/// The `c-api` rows of round `round` (0-based), if selected.
pub fn rows(cfg: &RunCfg, sel: &Selection, round: usize, progress: &mut Progress) -> Vec<Row> {
    let mut out = Vec::new();
    if !sel.wants(BENCH) {
        return out;
    }
    let cfg = &window(cfg, sel.quick);
    let prog = program();
    if prog.is_none() {
        eprintln!("ringtrace-bench: {BENCH} C rows skipped: {PROGRAM} not built (scripts/build-c-bench.sh)");
    }
    let rust = |out: &mut Vec<Row>, progress: &mut Progress| match Tsc::shared() {
        Ok(tsc) => {
            progress.step(&format!("{BENCH} ringtrace-rust"));
            for bytes in BYTES {
                for n in WRITERS {
                    let mut r = rust_rows(cfg, tsc, bytes, n).row_of(BENCH, "ringtrace-rust", &format!("{bytes}B"), n);
                    r.record_bytes = bytes;
                    out.push(r);
                }
            }
        }
        Err(e) => eprintln!("ringtrace-bench: {BENCH} ringtrace-rust rows skipped: {e}"),
    };
    let layer = |out: &mut Vec<Row>, progress: &mut Progress| {
        progress.step(&format!("{BENCH} ringtrace-rust-layer"));
        for n in WRITERS {
            let mut r = layer_rows(cfg, n).row_of(BENCH, "ringtrace-rust-layer", "event4", n);
            r.record_bytes = 0;
            out.push(r);
        }
    };
    let c = |out: &mut Vec<Row>, progress: &mut Progress| {
        if let Some(p) = &prog {
            progress.step(&format!("{BENCH} ringtrace-c and lttng-ust ({PROGRAM})"));
            out.extend(c_rows(p, cfg, round));
        }
    };
    if round % 2 == 0 {
        rust(&mut out, progress);
        layer(&mut out, progress);
        c(&mut out, progress);
    } else {
        c(&mut out, progress);
        layer(&mut out, progress);
        rust(&mut out, progress);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_c_programs_lines_read_back_as_rows() {
        let line = r#"{"bench":"c-api","impl":"lttng-ust","variant":"64B","producers":2,"record_bytes":64,"mrec_per_s":32.8663,"ns_per_rec":60.808,"drops_per_s":0.0,"round":3,"wall_ns_per_rec":30.426,"cpu_ns_per_rec":60.808,"peak_mib":null,"p50_ns":null,"p99_ns":null}"#;
        let rows = parse(&format!("{line}\nnot json\n\n{line}\n"));
        assert_eq!(rows.len(), 2);
        let r = &rows[0];
        assert_eq!((r.bench.as_str(), r.imp.as_str(), r.variant.as_str()), ("c-api", "lttng-ust", "64B"));
        assert_eq!((r.producers, r.record_bytes, r.round), (2, 64, 3));
        assert_eq!(r.cpu_ns_per_rec, Some(60.808));
        // And a row written by the Rust bench reads back the same.
        let again: Row = serde_json::from_str(&serde_json::to_string(r).unwrap()).unwrap();
        assert_eq!(again.wall_ns_per_rec, r.wall_ns_per_rec);
    }

    #[test]
    fn rust_rows_write_records_of_both_sizes() {
        let tsc = match Tsc::shared() {
            Ok(tsc) => tsc,
            Err(e) => {
                return ringtrace_fixtures::skip(ringtrace_fixtures::Feature::Tsc, format!("no invariant TSC: {e}"))
            }
        };
        let cfg = RunCfg { warmup: Duration::from_millis(5), duration: Duration::from_millis(20) };
        for bytes in BYTES {
            let r = rust_rows(&cfg, tsc, bytes, 1).row_of(BENCH, "ringtrace-rust", "x", 1);
            assert_eq!(r.drops_per_s, 0.0, "{bytes}B");
        }
    }
}

/// Where a `ringtrace-rust` record's CPU time goes, one thread, no harness (docs/benchmark.md
/// quotes it): `cargo test --release -p ringtrace-bench --lib c_api::breakdown -- --ignored
/// --nocapture`. `channel.output` (the thread-local lookup) against the thread's own
/// producer handle, TSC stamps against none, the builder's retire look-ahead against
/// 1 KiB, and the clock reads alone (LTTng-UST stamps with `CLOCK_MONOTONIC`).
#[cfg(test)]
mod breakdown {
    use super::*;
    use ringtrace::clock::{Clock, Monotonic, NoClock};

    /// `channel.output` behind a call the compiler cannot inline, with a length it
    /// cannot see: what a call through the C API adds before its own checks.
    #[inline(never)]
    fn out_of_line(ch: &Channel<Overwrite, Tsc>, data: &[u8]) -> i32 {
        match ch.output(data, Wakeup::NoWakeup) {
            Ok(()) => 0,
            Err(_) => -1,
        }
    }

    /// Thread CPU ns per call of `f` over `n` calls, after `n / 4` untimed ones.
    fn cpu_per<F: FnMut(u64)>(n: u64, mut f: F) -> f64 {
        for i in 0..n / 4 {
            f(i);
        }
        let a = crate::channel::thread_cpu_ns();
        for i in 0..n {
            f(i);
        }
        (crate::channel::thread_cpu_ns() - a) as f64 / n as f64
    }

    #[test]
    #[ignore]
    fn print_cost_breakdown() {
        let n = 20_000_000;
        let tsc = Tsc::shared().unwrap();
        let mut buf = [0x5au8; 64];
        for bytes in [8usize, 64] {
            let ch = Channel::<Overwrite, Tsc>::builder(RING).build(tsc).unwrap();
            let t = cpu_per(n, |v| {
                buf[..8].copy_from_slice(&v.to_le_bytes());
                ch.output(&buf[..bytes], Wakeup::NoWakeup).unwrap();
            });
            let ch1 = Channel::<Overwrite, Tsc>::builder(RING).retire_ahead(1024).build(tsc).unwrap();
            let ta = cpu_per(n, |v| {
                buf[..8].copy_from_slice(&v.to_le_bytes());
                ch1.output(&buf[..bytes], Wakeup::NoWakeup).unwrap();
            });
            let mut p = ch.producer().unwrap();
            let th = cpu_per(n, |v| {
                buf[..8].copy_from_slice(&v.to_le_bytes());
                p.output(&buf[..bytes], Wakeup::NoWakeup).unwrap();
            });
            let chn = Channel::<Overwrite, NoClock>::builder(RING).build(NoClock).unwrap();
            let tn = cpu_per(n, |v| {
                buf[..8].copy_from_slice(&v.to_le_bytes());
                chn.output(&buf[..bytes], Wakeup::NoWakeup).unwrap();
            });
            let mut pn = chn.producer().unwrap();
            let thn = cpu_per(n, |v| {
                buf[..8].copy_from_slice(&v.to_le_bytes());
                pn.output(&buf[..bytes], Wakeup::NoWakeup).unwrap();
            });
            let small = Channel::<Overwrite, Tsc>::builder(64 << 10).build(tsc).unwrap();
            let ts = cpu_per(n, |v| {
                buf[..8].copy_from_slice(&v.to_le_bytes());
                small.output(&buf[..bytes], Wakeup::NoWakeup).unwrap();
            });
            let len = std::hint::black_box(bytes);
            let to = cpu_per(n, |v| {
                buf[..8].copy_from_slice(&v.to_le_bytes());
                assert_eq!(out_of_line(&ch, std::hint::black_box(&buf[..len])), 0);
            });
            eprintln!(
                "{bytes}B: channel.output tsc {t:.2} | out of line {to:.2} | 64 KiB ring {ts:.2} | ahead=1KiB {ta:.2} | handle tsc {th:.2} | channel.output none {tn:.2} | handle none {thn:.2}"
            );
        }
        let mut acc = 0u64;
        let r = cpu_per(n, |_| acc = acc.wrapping_add(std::hint::black_box(tsc).raw()));
        let c = cpu_per(n, |_| acc = acc.wrapping_add(tsc.now()));
        let m = cpu_per(n / 4, |_| acc = acc.wrapping_add(Monotonic.now()));
        eprintln!("rdtsc {r:.2} ns, tsc.now() {c:.2} ns, clock_gettime(CLOCK_MONOTONIC) {m:.2} ns ({acc})");
    }
}
