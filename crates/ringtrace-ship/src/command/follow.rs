//! `ship --to otlp://HOST:PORT RECORDER...`: the recorder directories and stream trace
//! files followed into an OpenTelemetry endpoint by
//! `ringtrace_export::delivery::follow_recorders` (its docs have the rules), until a
//! signal or `--duration`. What happens on the way is logged (`tracing` warnings, which
//! the binaries print on stderr); what was delivered, and what went wrong, is returned
//! for the command to print.

use std::time::Duration;

use ringtrace_export::delivery::{self, Delivery, Endpoint, Followed, Note};
use ringtrace_export::otlp::Options;

use super::error::CommandError;
use super::otlp::{OtlpShip, Signals};

/// How the follower ended.
#[derive(Debug)]
#[non_exhaustive]
pub struct Delivered {
    /// The line that says what was delivered ([`Followed::summary`]): `ship` prints it on
    /// stderr.
    pub summary: String,
    /// What went wrong, in one line naming the endpoint ([`Followed::failure`]), if
    /// anything did: `ship` then exits 1 with it.
    pub failure: Option<String>,
    /// The signal that stopped it, if one did: after a clean end the command exits 128 +
    /// its number.
    pub signal: Option<i32>,
    /// What it did.
    pub followed: Followed,
}

impl OtlpShip {
    /// Follows the sources until `signalled` returns the number of a signal (or
    /// `--duration` has passed), delivering to the endpoint: the one code path of
    /// `ringtrace-ship ship --to otlp://` and `ringtrace ship --to otlp://`. Fails where
    /// the endpoint is not one, a source cannot be read the first time, or no client can
    /// be set up for the endpoint.
    pub fn run_until_signalled(self, signalled: impl Fn() -> Option<i32>) -> Result<Delivered, CommandError> {
        let endpoint = Endpoint::parse(&self.endpoint).map_err(CommandError::Endpoint)?;
        let o = self.options;
        let follow = delivery::Follow {
            sources: self.sources,
            interval: o.interval.unwrap_or(Duration::from_secs(1)),
            duration: self.duration,
            signals: match o.signals.unwrap_or(Signals::All) {
                Signals::All => delivery::Signals::All,
                Signals::Traces => delivery::Signals::Traces,
                Signals::Logs => delivery::Signals::Logs,
            },
        };
        let opts = Delivery {
            timeout: o.timeout.unwrap_or(Duration::from_secs(10)),
            retry_for: o.retry_for.unwrap_or(Duration::from_secs(60)),
            headers: o.header,
        };
        let names = Options { service: o.service, host: o.host_name };
        let stop = || signalled().is_some();
        let mut note = |n: Note<'_>| match n {
            Note::Unreadable { path, error } => {
                tracing::warn!("{}: {error}", path.display());
            }
            Note::NoLogs => {
                tracing::warn!("{endpoint} takes no log records: spans only from now on (--signals traces)");
            }
            Note::GaveUp { path, why } => {
                tracing::warn!("{}: {endpoint}: {why}; what was not delivered is sent again", path.display());
            }
            _ => {}
        };
        let followed = delivery::follow_recorders(&follow, &endpoint, &opts, &names, &stop, &mut note)?;
        Ok(Delivered {
            summary: followed.summary(&endpoint),
            failure: followed.failure(&endpoint),
            signal: signalled(),
            followed,
        })
    }
}
