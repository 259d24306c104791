//! The binaries' log: the library's `tracing` events (a round failed, Kafka back, the
//! spool delivered) printed on stderr as `ringtrace-ship: MESSAGE`, one line each, no
//! time or level: what the agent has always printed.

use std::fmt::{self, Write as _};
use std::io::Write as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Prints every event at INFO or above on stderr, its message after `prefix` (and any
/// other fields as ` name=value`).
#[derive(Debug)]
pub struct StderrLines {
    prefix: &'static str,
}

impl StderrLines {
    /// The line of `event`, newline included; `None` below INFO.
    fn line(&self, event: &Event<'_>) -> Option<String> {
        if *event.metadata().level() > tracing::Level::INFO {
            return None;
        }
        let mut line = Line(format!("{}: ", self.prefix), false);
        event.record(&mut line);
        line.0.push('\n');
        Some(line.0)
    }
}

impl<S: Subscriber> Layer<S> for StderrLines {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        if let Some(line) = self.line(event) {
            // One write of the whole line; a closed stderr is no reason to fail.
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }
}

/// The line being written, and whether a message is in it yet.
struct Line(String, bool);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" && !self.1 {
            let _ = write!(self.0, "{value:?}");
            self.1 = true;
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" && !self.1 {
            self.0.push_str(value);
            self.1 = true;
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

/// Makes [`StderrLines`] with the prefix `ringtrace-ship` the process's subscriber, if
/// it has none yet (a second call, or a program with its own, keeps the one it has).
pub fn log_to_stderr() {
    let subscriber = tracing_subscriber::registry().with(StderrLines { prefix: "ringtrace-ship" });
    let _ = tracing::subscriber::set_global_default(subscriber);
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Keeps the lines [`StderrLines`] would print.
    struct Capture(StderrLines, Arc<Mutex<Vec<String>>>);

    impl<S: Subscriber> Layer<S> for Capture {
        fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
            self.1.lock().unwrap().extend(self.0.line(event));
        }
    }

    #[test]
    fn an_event_is_printed_as_the_agent_always_printed_it() {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let capture = Capture(StderrLines { prefix: "ringtrace-ship" }, lines.clone());
        tracing::subscriber::with_default(tracing_subscriber::registry().with(capture), || {
            let why = "1 message(s) failed: x";
            tracing::warn!("a round failed ({why}); its records stay in the rings, retry in {:?}", 10);
            tracing::info!("delivering again");
            tracing::info!(source = "a", "stepped over");
            tracing::debug!("not printed");
        });
        assert_eq!(
            *lines.lock().unwrap(),
            [
                "ringtrace-ship: a round failed (1 message(s) failed: x); its records stay in the rings, retry in 10\n",
                "ringtrace-ship: delivering again\n",
                "ringtrace-ship: stepped over source=\"a\"\n",
            ]
        );
    }
}
