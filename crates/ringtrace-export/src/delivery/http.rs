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
        let url = format!("{}{}", self.base, b.signal.http_path());
        let mut request =
            match Request::post(url.as_str()).header(CONTENT_TYPE, PROTOBUF).body(Full::new(b.body.clone())) {
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
        let head = Head {
            url: &url,
            status: answer.status(),
            content_type: answer.headers().get(CONTENT_TYPE).map(|v| String::from_utf8_lossy(v.as_bytes()).into()),
            retry_after: answer
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs),
        };
        let body = tokio::time::timeout(timeout, Limited::new(answer.into_body(), ANSWER_MAX).collect()).await;
        let body = match body {
            Ok(Ok(b)) => b.to_bytes(),
            // Taken (2xx) by an endpoint that answers in OTLP's protobuf (or does not
            // say): not to be sent again, whatever became of the answer's body.
            Err(_) if head.taken_unread() => {
                return Outcome::Accepted {
                    rejected: 0,
                    message: format!("the answer's body did not come within {timeout:?}: a partial success unknown"),
                }
            }
            Ok(Err(e)) if head.taken_unread() => {
                return Outcome::Accepted {
                    rejected: 0,
                    message: format!("the answer's body could not be read ({e}): a partial success unknown"),
                }
            }
            _ => Bytes::new(),
        };
        classify(b.signal, &head, &body)
    }
}

/// What `application/x-protobuf` is sent as, and what an OTLP/HTTP answer to it is.
const PROTOBUF: &str = "application/x-protobuf";

/// What an answer says before its body.
struct Head<'a> {
    /// What was asked: `http://HOST:PORT/PREFIX/v1/...`.
    url: &'a str,
    status: StatusCode,
    content_type: Option<String>,
    retry_after: Option<Duration>,
}

impl Head<'_> {
    /// Whether the answer says its body is OTLP's protobuf (the media type, in any
    /// case, parameters after it allowed).
    fn protobuf(&self) -> bool {
        self.content_type.as_deref().is_some_and(|t| {
            let essence = t.split(';').next().unwrap_or("").trim();
            essence.eq_ignore_ascii_case(PROTOBUF)
        })
    }

    /// Whether a 2xx whose body could not be read counts as taken: where its
    /// Content-Type is OTLP's, or absent (a body of another type is not an OTLP answer).
    fn taken_unread(&self) -> bool {
        self.status.is_success() && (self.content_type.is_none() || self.protobuf())
    }

    /// A 2xx that is not an OTLP answer (another server on the port: a web UI, a
    /// proxy's page): nothing is known to be taken, and the batches after it would be
    /// answered alike.
    fn not_otlp(&self, why: &str) -> Outcome {
        Outcome::Refused {
            why: format!(
                "POST {} answered {} {why}, which is not an OTLP/HTTP answer (an ExportServiceResponse \
                 in {PROTOBUF}): nothing is known to be delivered; is this an OTLP/HTTP endpoint?",
                self.url, self.status
            ),
            unsupported: true,
        }
    }
}

/// What an HTTP answer means for the batch, as the OTLP/HTTP specification has it.
fn classify(signal: Signal, head: &Head<'_>, body: &[u8]) -> Outcome {
    let status = head.status;
    if status.is_success() {
        // A success is an `Export*ServiceResponse` in protobuf, as the request was
        // (the specification: the server answers in the request's Content-Type); an
        // empty one (no partial success) may come without a Content-Type.
        return match &head.content_type {
            Some(t) if !head.protobuf() => head.not_otlp(&format!("with Content-Type {t}")),
            None if !body.is_empty() => head.not_otlp("with a body and no Content-Type"),
            _ => match signal.partial(body) {
                Ok((rejected, message)) => Outcome::Accepted { rejected, message },
                Err(why) => head.not_otlp(&format!("with a body that is {why}")),
            },
        };
    }
    // The body of an error is a google.rpc.Status; a proxy's may be text.
    let detail = match rpc::status(body) {
        Some(s) if !s.message.is_empty() => s.message,
        _ => String::from_utf8_lossy(&body[..body.len().min(200)]).split_whitespace().collect::<Vec<_>>().join(" "),
    };
    let why = if detail.is_empty() { format!("HTTP {status}") } else { format!("HTTP {status}: {detail}") };
    match status.as_u16() {
        429 | 502 | 503 | 504 => Outcome::Retry { why, after: head.retry_after },
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

    /// An answer's head: `status`, with `content_type`.
    fn head(status: u16, content_type: Option<&str>) -> Head<'static> {
        Head {
            url: "http://127.0.0.1:9/v1/traces",
            status: StatusCode::from_u16(status).unwrap(),
            content_type: content_type.map(str::to_owned),
            retry_after: None,
        }
    }

    #[test]
    fn answers_are_read_as_the_specification_says() {
        let retry = |code: u16| matches!(classify(Signal::Traces, &head(code, None), b""), Outcome::Retry { .. });
        assert!(retry(429) && retry(502) && retry(503) && retry(504));
        assert!(!retry(400) && !retry(500) && !retry(401));
        assert!(matches!(
            classify(Signal::Logs, &head(404, Some("text/plain")), b"404 page not found"),
            Outcome::Refused { unsupported: true, ref why } if why.contains("page not found")
        ));
        let mut h = head(429, None);
        h.retry_after = Some(Duration::from_secs(3));
        match classify(Signal::Traces, &h, b"") {
            Outcome::Retry { after, .. } => assert_eq!(after, Some(Duration::from_secs(3))),
            other => panic!("{other:?}"),
        }
        use prost::Message;
        let st = rpc::Status { code: 3, message: "bad span".into(), details: vec![] };
        match classify(Signal::Traces, &head(400, Some(PROTOBUF)), &st.encode_to_vec()) {
            Outcome::Refused { why, unsupported: false } => assert!(why.ends_with("bad span"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_success_is_taken_only_as_an_otlp_answer() {
        use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse};
        use prost::Message;
        let taken = |h: Head<'_>, body: &[u8]| matches!(classify(Signal::Traces, &h, body), Outcome::Accepted { .. });
        // An empty answer is a full success, with OTLP's media type or none.
        assert!(taken(head(200, Some(PROTOBUF)), b""));
        assert!(taken(head(200, Some("Application/X-Protobuf; charset=binary")), b""));
        assert!(taken(head(200, None), b""));
        let partial = ExportTraceServiceResponse {
            partial_success: Some(ExportTracePartialSuccess { rejected_spans: 2, error_message: "old".into() }),
        };
        match classify(Signal::Traces, &head(200, Some(PROTOBUF)), &partial.encode_to_vec()) {
            Outcome::Accepted { rejected: 2, message } => assert_eq!(message, "old"),
            other => panic!("{other:?}"),
        }
        // Anything else is not an OTLP answer: refused, naming what was asked.
        for (h, body) in [
            (head(200, Some("text/html; charset=utf-8")), &b"<!doctype html><html></html>"[..]),
            (head(200, Some("text/html")), b""),
            (head(200, Some("application/json")), b"{}"),
            (head(204, None), b"hello"),
            (head(200, Some(PROTOBUF)), &[0x0a, 0xff]),
        ] {
            match classify(Signal::Traces, &h, body) {
                Outcome::Refused { why, unsupported: true } => {
                    assert!(why.contains("http://127.0.0.1:9/v1/traces") && why.contains("not an OTLP"), "{why}")
                }
                other => panic!("{:?} {body:?}: {other:?}", h.content_type),
            }
        }
    }
}
