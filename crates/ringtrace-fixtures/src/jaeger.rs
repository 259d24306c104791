//! Reading back what a test delivered to the test command's [`Jaeger`], through its
//! query service's HTTP API (`/api/traces`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::Jaeger;

/// How long [`Jaeger::traces`] waits for what it expects: Jaeger's ingest is
/// asynchronous.
pub const JAEGER_WAIT: Duration = Duration::from_secs(60);

/// A service (or file) name no other test or run uses, `ringtrace-test-WHAT-PID-NANOS`:
/// Jaeger keeps what every test sent.
pub fn unique_name(what: &str) -> String {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("ringtrace-test-{what}-{}-{t}", std::process::id())
}

/// A GET of `url` (`http://HOST:PORT/PATH`) over HTTP/1.0, reading for 30 s at most:
/// the body. Panics unless the answer is a 200.
pub fn http_get(url: &str) -> String {
    let Some(rest) = url.strip_prefix("http://") else { panic!("{url}: not an http:// URL") };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut s = TcpStream::connect(authority).unwrap_or_else(|e| panic!("connecting to {authority}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {authority}\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap_or_else(|e| panic!("reading {url}: {e}"));
    let Some((head, body)) = answer.split_once("\r\n\r\n") else { panic!("{url}: no HTTP head in {answer:?}") };
    assert!(head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"), "{url}: {head}");
    body.to_owned()
}

/// The spans of `traces` (each a trace of [`Jaeger::traces`]).
pub fn jaeger_spans(traces: &[serde_json::Value]) -> impl Iterator<Item = &serde_json::Value> {
    traces.iter().flat_map(|t| t["spans"].as_array().into_iter().flatten())
}

impl Jaeger {
    /// The traces Jaeger holds for `service` (its query API's `data`: each with its
    /// `spans` and `processes`), once they hold `expect` spans, or what they hold at a
    /// [`JAEGER_WAIT`] deadline.
    pub fn traces(&self, service: &str, expect: usize) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + JAEGER_WAIT;
        // Every trace holds a span: `expect` traces hold every span expected.
        let url = format!("{}/api/traces?service={service}&limit={}", self.query, expect.max(1));
        loop {
            let body = http_get(&url);
            let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{url}: {e}: {body}"));
            let traces = v["data"].as_array().cloned().unwrap_or_default();
            if jaeger_spans(&traces).count() >= expect || Instant::now() > deadline {
                return traces;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
