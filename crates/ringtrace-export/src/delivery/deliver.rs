//! The delivery loop: each batch tried, retried with backoff while the endpoint cannot
//! take it, until it is settled or given up (the rules are in the module above's docs).

use std::time::{Duration, Instant};

use super::model::{Batch, Delivery, Endpoint, Outcome, Protocol, Report};
use super::{grpc, http};

/// The connection to an endpoint.
enum Transport {
    Grpc(grpc::Grpc),
    Http(http::Http),
}

impl Transport {
    /// One try, its answer awaited at most `timeout`.
    async fn send(&mut self, b: &Batch, timeout: Duration) -> Outcome {
        match self {
            Transport::Grpc(g) => match tokio::time::timeout(timeout, g.send(b)).await {
                Ok(o) => o,
                Err(_) => Outcome::Retry { why: format!("no answer within {timeout:?}"), after: None },
            },
            Transport::Http(h) => h.send(b, timeout).await,
        }
    }
}

/// The first pause between tries, and the longest.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Delivers `batches` to `endpoint`, one after the other (see the module's docs), and
/// says what was delivered. `cancel` is asked between tries: once it says so, a batch
/// being retried is given up. `Err` only where no client could be set up at all.
pub fn deliver(
    endpoint: &Endpoint,
    opts: &Delivery,
    batches: impl IntoIterator<Item = Batch>,
    cancel: &dyn Fn() -> bool,
) -> Result<Report, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the OTLP client's runtime: {e}"))?;
    let report = rt.block_on(async {
        let mut transport = match endpoint.protocol {
            Protocol::Grpc => Transport::Grpc(grpc::Grpc::new(endpoint, opts)?),
            Protocol::Http => Transport::Http(http::Http::new(endpoint, opts)?),
        };
        Ok::<_, String>(send_all(&mut transport, opts, batches, cancel).await)
    });
    // Not waiting for a name lookup still running on a blocking thread: `--timeout`
    // and `--retry-for` bound the delivery.
    rt.shutdown_background();
    report
}

/// [`deliver`]'s loop.
async fn send_all(
    transport: &mut Transport,
    opts: &Delivery,
    batches: impl IntoIterator<Item = Batch>,
    cancel: &dyn Fn() -> bool,
) -> Report {
    let mut report = Report::default();
    let mut unsupported = Vec::new();
    for (i, b) in batches.into_iter().enumerate() {
        report.tally(b.signal).items += b.items;
        if report.stopped.is_some() || unsupported.contains(&b.signal) {
            report.tally(b.signal).failed += b.items;
            continue;
        }
        let first = Instant::now();
        let deadline = first + opts.retry_for;
        let mut pause = FIRST_PAUSE;
        let mut tries = 0u64;
        loop {
            tries += 1;
            let outcome = transport.send(&b, opts.timeout).await;
            let t = report.tally(b.signal);
            match outcome {
                Outcome::Accepted { rejected, message } => {
                    let rejected = rejected.min(b.items);
                    t.batches += 1;
                    t.rejected += rejected;
                    t.delivered += b.items - rejected;
                    t.note(message);
                    report.settled.push(i);
                    break;
                }
                Outcome::Refused { why, unsupported: u } => {
                    t.failed += b.items;
                    t.refused += b.items;
                    t.note(why);
                    report.settled.push(i);
                    if u {
                        unsupported.push(b.signal);
                    }
                    break;
                }
                Outcome::Retry { why, after } => {
                    // What the endpoint asks for, but never less than the first pause
                    // (a `Retry-After: 0` must not make a busy loop).
                    let wait = after.map_or(pause, |a| a.max(FIRST_PAUSE));
                    let left = deadline.saturating_duration_since(Instant::now());
                    let give_up = if cancel() {
                        Some("stopped by a signal".to_owned())
                    } else if wait > left {
                        Some(match after {
                            Some(a) if a > left => format!("the endpoint asked for a pause of {a:?}, past --retry-for"),
                            _ => format!("not taken within --retry-for {:?}", opts.retry_for),
                        })
                    } else {
                        None
                    };
                    if let Some(g) = give_up {
                        t.failed += b.items;
                        report.stopped = Some(format!(
                            "{why}; {g} (a batch of {} {}, tried {tries} times over {:.1} s)",
                            b.items,
                            b.signal.items(),
                            first.elapsed().as_secs_f64()
                        ));
                        break;
                    }
                    t.retries += 1;
                    tokio::time::sleep(wait).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
            }
        }
    }
    report
}
