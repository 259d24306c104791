//! A million events from four threads, exported to each format and counted back by a
//! reader of that format. Release builds only (the test command's): a debug build
//! takes minutes.

mod common;

use common::{dispatch, TempDir};
use ringtrace_export::{chrome, ctf, perfetto};
use ringtrace_tracing::decode::Trace;
use ringtrace_tracing::Builder;

#[derive(serde::Deserialize)]
struct ChromeFile {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<ChromeEvent>,
}

#[derive(serde::Deserialize)]
struct ChromeEvent {
    ph: String,
    cat: String,
}

#[test]
#[cfg_attr(debug_assertions, ignore = "a million events: run in release (the test command does)")]
fn a_million_events_from_four_threads_count_the_same_in_every_format() {
    use prost::Message;

    let dir = TempDir::new("scale");
    let (layer, recorder) = Builder::stream(dir.join("s.rtt")).per_thread_bytes(32 << 20).build().unwrap();
    let d = dispatch(layer);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let d = d.clone();
            s.spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    for batch in 0..2500u64 {
                        let _s = tracing::info_span!("batch", batch).entered();
                        for seq in 0..100u64 {
                            tracing::info!(t, seq, s = "short", "event");
                        }
                    }
                })
            });
        }
    });
    let stats = recorder.finish().unwrap();
    let trace = Trace::open(dir.join("s.rtt")).unwrap();
    let events = trace.events().len() as u64;
    assert_eq!(events + trace.lost(), 1_000_000, "{stats:?}");

    let mut json = Vec::new();
    let x = chrome::write(&trace, &mut json).unwrap();
    assert_eq!(x.events, events);
    let parsed: ChromeFile = serde_json::from_slice(&json).unwrap();
    drop(json);
    let instants = parsed.trace_events.iter().filter(|e| e.ph == "i" && e.cat != "ringtrace").count() as u64;
    assert_eq!(instants, events);

    let mut pb = Vec::new();
    let x = perfetto::write(&trace, &mut pb).unwrap();
    assert_eq!(x.events, events);
    let t = perfetto::proto::Trace::decode(pb.as_slice()).unwrap();
    let instants = t
        .packet
        .iter()
        .filter_map(|p| match &p.data {
            Some(perfetto::proto::trace_packet::Data::TrackEvent(e)) => Some(e),
            _ => None,
        })
        .filter(|e| e.r#type() == perfetto::proto::track_event::Type::Instant)
        .count() as u64;
    // Lost-event markers are instants too.
    assert_eq!(instants, events + x.lost_markers);

    let out = dir.join("ctf");
    let x = ctf::write(&trace, &out).unwrap();
    assert_eq!(x.events, events);
    if ringtrace_fixtures::have_babeltrace2() {
        let o = std::process::Command::new("babeltrace2").arg(&out).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let read = o.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count() as u64;
        assert_eq!(read, events + 2 * x.slices, "events, and each span's enter and exit");
    }
}
