//! `ringtrace-ship ship --to otlp://` and `otlp+http://`: a recorder directory followed
//! into the test command's Jaeger (started by `scripts/jaeger.sh`) and read back
//! through its query API, as `ringtrace ship --to` delivers it (one code path:
//! `command::OtlpShip::run_until_signalled`).

#![cfg(feature = "otlp")]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use ringtrace_fixtures::{unique_name, Jaeger};
use tracing_subscriber::layer::SubscriberExt;

/// Root spans recorded, each with children; spans in all.
const ROOTS: u64 = 200;
const CHILDREN: u64 = 4;
const SPANS: u64 = ROOTS * (CHILDREN + 1);

/// A recorder directory holding `ROOTS` root spans of `CHILDREN` children each (an
/// event in every child); the recorder, kept while the directory is read.
fn recorded(dir: &PathBuf) -> ringtrace_tracing::Recorder {
    let (layer, recorder) =
        ringtrace_tracing::Builder::flight_recorder().per_thread_bytes(8 << 20).directory(dir).build().unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || {
        for r in 0..ROOTS {
            let root = tracing::info_span!("request", r);
            let _e = root.enter();
            for c in 0..CHILDREN {
                let child = tracing::debug_span!("step", c);
                let _e = child.enter();
                tracing::info!(n = c, "working");
            }
        }
    });
    recorder
}

/// Jaeger's traces of `service` (see [`Jaeger::traces`]): their spans, and the
/// `host.name` tags of their processes.
fn jaeger(j: &Jaeger, service: &str, expect: u64) -> (u64, Vec<String>) {
    let traces = j.traces(service, expect as usize);
    let spans = ringtrace_fixtures::jaeger_spans(&traces).count() as u64;
    let mut hosts: Vec<String> = traces
        .iter()
        .flat_map(|t| t["processes"].as_object().cloned().unwrap_or_default().into_values())
        .flat_map(|p| p["tags"].as_array().cloned().unwrap_or_default())
        .filter(|tag| tag["key"] == "host.name")
        .map(|tag| tag["value"].as_str().unwrap_or_default().to_owned())
        .collect();
    hosts.sort();
    hosts.dedup();
    (spans, hosts)
}

#[test]
fn ship_to_an_otlp_endpoint_follows_recorders_under_the_host_name() {
    let Some(j) = ringtrace_fixtures::jaeger() else { return };
    let dir = std::env::temp_dir().join(unique_name("rec"));
    let _recorder = recorded(&dir);
    for (to, what) in [(format!("otlp://{}", j.grpc), "grpc"), (format!("otlp+http://{}", j.http), "http")] {
        let service = unique_name(what);
        let o = Command::new(env!("CARGO_BIN_EXE_ringtrace-ship"))
            .args(["ship", "--to", &to, "--service", &service, "--host-name", "h1", "--signals", "traces"])
            .args(["--duration", "300ms", "--interval", "100ms"])
            .arg(&dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{to}: {stderr}");
        assert!(stderr.contains(&format!("delivered {SPANS} spans and 0 log records")), "{to}: {stderr}");
        let (spans, hosts) = jaeger(&j, &service, SPANS);
        assert_eq!(spans, SPANS, "{to}: every span once");
        assert_eq!(hosts, ["h1"], "{to}");
    }
    // A source that is not there: named, exit 1.
    let missing = dir.join("missing");
    let o = Command::new(env!("CARGO_BIN_EXE_ringtrace-ship"))
        .args(["ship", "--to", &format!("otlp://{}", j.grpc), "--duration", "100ms"])
        .arg(&missing)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(missing.to_str().unwrap()), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A first SIGTERM ends the follower as `ringtrace ship` ends it: a last round, what
/// was delivered on stderr, exit 143.
#[test]
fn a_first_sigterm_ends_the_follower_with_what_it_delivered() {
    use rustix::process::{kill_process, Pid, Signal};
    let Some(j) = ringtrace_fixtures::jaeger() else { return };
    let dir = std::env::temp_dir().join(unique_name("rec-term"));
    let _recorder = recorded(&dir);
    let service = unique_name("term");
    let to = format!("otlp://{}", j.grpc);
    let err = std::env::temp_dir().join(unique_name("term-stderr"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringtrace-ship"))
        .args(["ship", "--to", &to, "--service", &service, "--signals", "traces", "--interval", "100ms"])
        .arg(&dir)
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    // Jaeger holds the spans once a round delivered them: the signals are taken by then.
    let (spans, _) = jaeger(&j, &service, SPANS);
    assert_eq!(spans, SPANS, "every span once");
    kill_process(Pid::from_child(&child), Signal::TERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the follower did not end within 60 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(stderr.contains(&format!("{to}: delivered {SPANS} spans and 0 log records")), "{stderr}");
    let _ = std::fs::remove_file(&err);
    let _ = std::fs::remove_dir_all(&dir);
}
