//! OTLP/HTTP: each batch a `POST` of its protobuf bytes (`application/x-protobuf`) on
//! hyper's HTTP/1.1 client, which keeps the connection for the next.

use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::model::{Batch, Delivery, Endpoint, Outcome, Signal};
use super::rpc;

/// The most of an answer read: a partial success or an error status is a few hundred
/// bytes; a proxy's error page may be more, and is cut.
const ANSWER_MAX: usize = 64 << 10;

/// The HTTP client of one endpoint.
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
    /// `http://HOST:PORT/PREFIX`.
    base: String,
    headers: HeaderMap,
}

impl Http {
    pub fn new(endpoint: &Endpoint, opts: &Delivery) -> Result<Http, String> {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(opts.timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new()).build(connector);
        let mut headers = HeaderMap::new();
        for (k, v) in &opts.headers {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| format!("header {k:?}: not a header name"))?;
            let value = HeaderValue::from_str(v).map_err(|_| format!("header {k}: not a header value"))?;
            headers.append(name, value);
        }
        Ok(Http { client, base: format!("http://{}{}", endpoint.authority, endpoint.prefix), headers })
    }

    /// Sends one batch and reads the answer, each awaited at most `timeout`.
    pub async fn send(&mut self, b: &Batch, timeout: Duration) -> Outcome {
        let mut request = match Request::post(format!("{}{}", self.base, b.signal.http_path()))
            .header(CONTENT_TYPE, "application/x-protobuf")
            .body(Full::new(b.body.clone()))
        {
            Ok(r) => r,
            Err(e) => return Outcome::Refused { why: format!("cannot make the request: {e}"), unsupported: false },
        };
        for (k, v) in &self.headers {
            request.headers_mut().append(k, v.clone());
        }
        let answer = match tokio::time::timeout(timeout, self.client.request(request)).await {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => return Outcome::Retry { why: chain(&e), after: None },
            Err(_) => return Outcome::Retry { why: format!("no answer within {timeout:?}"), after: None },
        };
        let status = answer.status();
        let retry_after = answer
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = tokio::time::timeout(timeout, Limited::new(answer.into_body(), ANSWER_MAX).collect()).await;
        let body = match body {
            Ok(Ok(b)) => b.to_bytes(),
            // Taken (2xx): not to be sent again, whatever became of the answer's body.
            Err(_) if status.is_success() => {
                return Outcome::Accepted {
                    rejected: 0,
                    message: format!("the answer's body did not come within {timeout:?}: a partial success unknown"),
                }
            }
            Ok(Err(e)) if status.is_success() => {
                return Outcome::Accepted {
                    rejected: 0,
                    message: format!("the answer's body could not be read ({e}): a partial success unknown"),
                }
            }
            _ => Bytes::new(),
        };
        classify(b.signal, status, &body, retry_after)
    }
}

/// What an HTTP answer means for the batch, as the OTLP/HTTP specification has it.
fn classify(signal: Signal, status: StatusCode, body: &[u8], retry_after: Option<Duration>) -> Outcome {
    if status.is_success() {
        // Taken: an answer that does not read as an OTLP response does not make it
        // sent again.
        return match signal.partial(body) {
            Ok((rejected, message)) => Outcome::Accepted { rejected, message },
            Err(why) => Outcome::Accepted { rejected: 0, message: format!("{why}: a partial success unknown") },
        };
    }
    // The body of an error is a google.rpc.Status; a proxy's may be text.
    let detail = match rpc::status(body) {
        Some(s) if !s.message.is_empty() => s.message,
        _ => String::from_utf8_lossy(&body[..body.len().min(200)]).split_whitespace().collect::<Vec<_>>().join(" "),
    };
    let why = if detail.is_empty() { format!("HTTP {status}") } else { format!("HTTP {status}: {detail}") };
    match status.as_u16() {
        429 | 502 | 503 | 504 => Outcome::Retry { why, after: retry_after },
        404 | 405 => Outcome::Refused { why, unsupported: true },
        _ => Outcome::Refused { why, unsupported: false },
    }
}

/// An error's message followed by its causes' (hyper's say "client error (Connect)",
/// their causes what went wrong).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cause = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_as_the_specification_says() {
        let retry = |code: u16| {
            matches!(classify(Signal::Traces, StatusCode::from_u16(code).unwrap(), b"", None), Outcome::Retry { .. })
        };
        assert!(retry(429) && retry(502) && retry(503) && retry(504));
        assert!(!retry(400) && !retry(500) && !retry(401));
        assert!(matches!(
            classify(Signal::Logs, StatusCode::NOT_FOUND, b"404 page not found", None),
            Outcome::Refused { unsupported: true, ref why } if why.contains("page not found")
        ));
        assert!(matches!(classify(Signal::Traces, StatusCode::OK, b"", None), Outcome::Accepted { rejected: 0, .. }));
        match classify(Signal::Traces, StatusCode::TOO_MANY_REQUESTS, b"", Some(Duration::from_secs(3))) {
            Outcome::Retry { after, .. } => assert_eq!(after, Some(Duration::from_secs(3))),
            other => panic!("{other:?}"),
        }
        use prost::Message;
        let st = rpc::Status { code: 3, message: "bad span".into(), details: vec![] };
        match classify(Signal::Traces, StatusCode::BAD_REQUEST, &st.encode_to_vec(), None) {
            Outcome::Refused { why, unsupported: false } => assert!(why.ends_with("bad span"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
