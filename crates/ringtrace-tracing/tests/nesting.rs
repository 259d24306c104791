//! An event logged from inside a field's `Debug` impl, under a global default
//! dispatcher (which, unlike a scoped one, does not stop re-entry): both events are
//! recorded, the nested one first, and nothing is lost. Its own test binary: the global
//! default can be set once per process.

mod common;

use std::fmt;

use common::{dispatch, TempDir};
use ringtrace_tracing::decode::{Trace, Value};
use ringtrace_tracing::Builder;

struct Noisy(u64);

impl fmt::Debug for Noisy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        tracing::info!(inner = self.0, "from inside Debug");
        write!(f, "Noisy({})", self.0)
    }
}

#[test]
fn an_event_logged_while_a_value_is_formatted_is_recorded_too() {
    let dir = TempDir::new("nesting");
    let (layer, recorder) = Builder::flight_recorder().per_thread_bytes(64 << 10).build().unwrap();
    tracing::dispatcher::set_global_default(dispatch(layer)).unwrap();
    let span = tracing::info_span!("outer", v = ?Noisy(1));
    let _e = span.enter();
    for i in 0..3 {
        tracing::info!(value = ?Noisy(10 + i), "outer event");
    }
    recorder.dump(dir.join("d.rtt")).unwrap();
    let trace = Trace::open(dir.join("d.rtt")).unwrap();
    let events = trace.events();
    let names: Vec<_> = events.iter().map(|e| e.message().unwrap_or("")).collect();
    assert_eq!(
        names,
        [
            "from inside Debug",
            "from inside Debug",
            "outer event",
            "from inside Debug",
            "outer event",
            "from inside Debug",
            "outer event"
        ]
    );
    assert_eq!(events[0].field("inner"), Some(&Value::U64(1)), "the span's field formatted first");
    assert_eq!(events[2].field("value"), Some(&Value::Debug("Noisy(10)".into())));
    assert!(events[2].spans.iter().any(|s| s.name == "outer"));
    let s = recorder.stats();
    assert_eq!(s.busy + s.lost + s.teardown, 0, "{s:?}");
}
