//! `export DIR --to ENDPOINT --follow` (`ship --to ENDPOINT DIR...` is ringtrace-ship's
//! `command::OtlpShip`): live recorders delivered as their spans close, by
//! `ringtrace_export::delivery::follow` (its docs have the rules), until SIGINT, SIGTERM
//! or `--duration`. This module says on stderr what happened and what was delivered,
//! and fails (exit 1) where anything was refused, rejected, overwritten unread, or left
//! undelivered.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ringtrace_export::delivery::{self, FollowError, Note};
use ringtrace_export::otlp as convert;

use super::{Delivery, Endpoint, Signals};
use crate::failure::Failure;
use crate::output::{eprint_line, warn};
use crate::pipeline::record::Timeline;

/// How a follower runs.
#[derive(Clone, Debug)]
pub struct Follow {
    /// The recorder directories or trace files followed.
    pub sources: Vec<PathBuf>,
    /// The pause between rounds.
    pub interval: Duration,
    /// Stop after this long (a last round first).
    pub duration: Option<Duration>,
}

/// Follows `f.sources` (each read by `read`) until a signal or `f.duration`, delivering
/// to `endpoint`. Fails at once where a source cannot be read the first time; at the end
/// where anything was refused, rejected, overwritten unread, or left undelivered.
pub fn run(
    f: &Follow,
    read: &mut dyn FnMut(&Path) -> Result<Timeline, Failure>,
    endpoint: &Endpoint,
    opts: &Delivery,
    names: &convert::Options,
    signals: Signals,
) -> Result<(), Failure> {
    crate::cleanup::stop_gracefully();
    let stopping = || crate::cleanup::stop_requested().is_some();
    let follow = delivery::Follow {
        sources: f.sources.clone(),
        interval: f.interval,
        duration: f.duration,
        signals: match signals {
            Signals::All => delivery::Signals::All,
            Signals::Traces => delivery::Signals::Traces,
            Signals::Logs => delivery::Signals::Logs,
        },
    };
    let mut read_trace = |p: &Path| match read(p)? {
        Timeline::Trace(trace) => Ok(*trace),
        #[cfg(feature = "kafka")]
        Timeline::Fleet(_) => {
            Err(Failure::msg("--follow reads recorder directories and trace files, not a Kafka topic"))
        }
    };
    let mut note = |n: Note<'_>| match n {
        Note::Unreadable { error, .. } => warn(error),
        Note::NoLogs => warn(&format!("{endpoint} takes no log records: spans only from now on (--signals traces)")),
        Note::GaveUp { path, why } => {
            warn(&format!("{}: {endpoint}: {why}; what was not delivered is sent again", path.display()))
        }
        _ => {}
    };
    let done = delivery::follow(&follow, &mut read_trace, endpoint, opts, names, &stopping, &mut note).map_err(
        |e| match e {
            FollowError::Read(_, e) => e,
            FollowError::Client(e) => Failure::msg(e),
        },
    )?;
    eprint_line(format_args!("{}", done.summary(endpoint)));
    if let Some(why) = done.failure(endpoint) {
        return Err(Failure::msg(why));
    }
    // Stopped by a signal after finishing cleanly: the shell sees it (130, 143).
    crate::cleanup::stop_requested().map_or(Ok(()), |s| Err(Failure::Interrupted(s)))
}
