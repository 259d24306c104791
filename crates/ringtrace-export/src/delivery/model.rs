//! What the OTLP delivery is about: the endpoint, the options, the batches, an
//! endpoint's answer to a try, and what a delivery did.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use bytes::Bytes;

/// How a batch is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/gRPC: `opentelemetry.proto.collector.*.v1.*Service/Export` over HTTP/2.
    Grpc,
    /// OTLP/HTTP: `POST /v1/traces` and `/v1/logs` with `application/x-protobuf` bodies.
    Http,
}

/// Where batches are sent: `otlp://HOST[:PORT]` (gRPC, port 4317 by default) or
/// `otlp+http://HOST[:PORT][/PREFIX]` (HTTP, port 4318 by default, paths under PREFIX).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// gRPC or HTTP.
    pub protocol: Protocol,
    /// `HOST:PORT`.
    pub authority: String,
    /// The HTTP paths' prefix (empty, or starting with `/` and not ending with one).
    pub prefix: String,
}

impl Endpoint {
    /// Reads `otlp://HOST[:PORT]` or `otlp+http://HOST[:PORT][/PREFIX]` (an IPv6 address
    /// in brackets); `Err` says what an endpoint is, naming `s`.
    ///
    /// ```
    /// use ringtrace_export::delivery::{Endpoint, Protocol};
    /// let e = Endpoint::parse("otlp://collector")?;
    /// assert_eq!((e.protocol, e.authority.as_str()), (Protocol::Grpc, "collector:4317"));
    /// assert!(Endpoint::parse("otlps://collector").unwrap_err().to_string().contains("TLS"));
    /// # Ok::<(), ringtrace_export::delivery::EndpointError>(())
    /// ```
    pub fn parse(s: &str) -> Result<Endpoint, EndpointError> {
        s.parse()
    }
}

impl FromStr for Endpoint {
    type Err = EndpointError;

    fn from_str(s: &str) -> Result<Self, EndpointError> {
        let fail = |problem| EndpointError { endpoint: s.to_owned(), problem };
        let (protocol, rest, port) = if let Some(r) = s.strip_prefix("otlp://") {
            (Protocol::Grpc, r, 4317)
        } else if let Some(r) = s.strip_prefix("otlp+http://") {
            (Protocol::Http, r, 4318)
        } else if s.starts_with("otlps://") || s.starts_with("otlp+https://") || s.starts_with("https://") {
            return Err(fail(EndpointProblem::Tls));
        } else {
            return Err(fail(EndpointProblem::NotOtlp));
        };
        let (authority, prefix) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        let prefix = prefix.trim_end_matches('/');
        if prefix.contains(['?', '#']) || authority.contains('@') {
            return Err(fail(EndpointProblem::Extras));
        }
        if protocol == Protocol::Grpc && !prefix.is_empty() {
            return Err(fail(EndpointProblem::GrpcPath));
        }
        // An IPv6 address is written in brackets, its port after them.
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !p.contains(']') => {
                let p: u16 =
                    p.parse().ok().filter(|&p| p != 0).ok_or_else(|| fail(EndpointProblem::Port(p.to_owned())))?;
                (h, p)
            }
            _ => (authority, port),
        };
        let bracketed = host.starts_with('[') && host.ends_with(']') && host.len() > 2;
        if host.is_empty() || (host.contains(':') && !bracketed) {
            return Err(fail(EndpointProblem::NoHost));
        }
        let prefix = if prefix.is_empty() { String::new() } else { format!("/{prefix}") };
        let e = Endpoint { protocol, authority: format!("{host}:{port}"), prefix };
        // What the clients will make of it: a URI, or refused now rather than at the
        // first batch.
        format!("http://{}{}/v1/traces", e.authority, e.prefix)
            .parse::<::http::Uri>()
            .map_err(|err| fail(EndpointProblem::NotUri(err)))?;
        Ok(e)
    }
}

/// The forms of an endpoint, as errors say them.
const FORMS: &str = "otlp://HOST:PORT (OTLP/gRPC) or otlp+http://HOST:PORT (OTLP/HTTP)";

/// Why a text is not an [`Endpoint`]: the text, and what is wrong with it.
#[derive(Debug)]
pub struct EndpointError {
    /// The text.
    pub endpoint: String,
    /// What is wrong with it.
    pub problem: EndpointProblem,
}

/// What is wrong with an endpoint's text; each says what an endpoint is.
#[derive(Debug)]
#[non_exhaustive]
pub enum EndpointProblem {
    /// `otlps://` and the like: TLS is not built in.
    Tls,
    /// Not `otlp://` nor `otlp+http://`.
    NotOtlp,
    /// A user, query or fragment.
    Extras,
    /// A path after an OTLP/gRPC endpoint.
    GrpcPath,
    /// A port that is not a number from 1 to 65535.
    Port(String),
    /// No host, or an IPv6 address without brackets.
    NoHost,
    /// What the HTTP clients would refuse as a URI.
    NotUri(::http::uri::InvalidUri),
}

impl fmt::Display for EndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.endpoint)?;
        match &self.problem {
            EndpointProblem::Tls => write!(
                f,
                "TLS is not built into ringtrace: send to a collector on this host or its network, as {FORMS}"
            ),
            EndpointProblem::NotOtlp => write!(f, "an OTLP endpoint is {FORMS}"),
            EndpointProblem::Extras => write!(f, "an OTLP endpoint is {FORMS} (no user, query or fragment)"),
            EndpointProblem::GrpcPath => f.write_str("an OTLP/gRPC endpoint has no path: otlp://HOST:PORT"),
            EndpointProblem::Port(p) => write!(f, "{p:?} is not a port"),
            EndpointProblem::NoHost => write!(f, "no host (an IPv6 address in brackets: otlp://[::1]:4317): {FORMS}"),
            EndpointProblem::NotUri(err) => write!(f, "not an endpoint ({err}): {FORMS}"),
        }
    }
}

impl std::error::Error for EndpointError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.problem {
            EndpointProblem::NotUri(err) => Some(err),
            _ => None,
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.protocol {
            Protocol::Grpc => write!(f, "otlp://{}", self.authority),
            Protocol::Http => write!(f, "otlp+http://{}{}", self.authority, self.prefix),
        }
    }
}

/// How batches are delivered.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// The longest wait for one answer.
    pub timeout: Duration,
    /// How long a batch is retried after its first try.
    pub retry_for: Duration,
    /// Headers sent with every request (gRPC metadata): `(name, value)`.
    pub headers: Vec<(String, String)>,
}

impl Default for Delivery {
    /// What `ringtrace export --to` uses unless told otherwise: an answer awaited 10 s,
    /// a batch retried for 60 s, no headers.
    fn default() -> Self {
        Delivery { timeout: Duration::from_secs(10), retry_for: Duration::from_secs(60), headers: Vec::new() }
    }
}

/// What a batch holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Spans (`ExportTraceServiceRequest`).
    Traces,
    /// Log records (`ExportLogsServiceRequest`).
    Logs,
}

impl Signal {
    /// The gRPC method.
    pub(super) fn grpc_path(self) -> &'static str {
        match self {
            Signal::Traces => "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            Signal::Logs => "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
        }
    }

    /// The HTTP path, after the endpoint's prefix.
    pub(super) fn http_path(self) -> &'static str {
        match self {
            Signal::Traces => "/v1/traces",
            Signal::Logs => "/v1/logs",
        }
    }

    /// What its items are called.
    pub fn items(self) -> &'static str {
        match self {
            Signal::Traces => "spans",
            Signal::Logs => "log records",
        }
    }

    /// The items a partial-success answer says were rejected, and its message.
    pub(super) fn partial(self, answer: &[u8]) -> Result<(u64, String), String> {
        use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceResponse;
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
        use prost::Message;
        let bad = |e: prost::DecodeError| format!("not an OTLP export response ({e})");
        Ok(match self {
            Signal::Traces => ExportTraceServiceResponse::decode(answer)
                .map_err(bad)?
                .partial_success
                .map_or((0, String::new()), |p| (u64::try_from(p.rejected_spans).unwrap_or(0), p.error_message)),
            Signal::Logs => ExportLogsServiceResponse::decode(answer)
                .map_err(bad)?
                .partial_success
                .map_or((0, String::new()), |p| (u64::try_from(p.rejected_log_records).unwrap_or(0), p.error_message)),
        })
    }
}

/// One request: its items encoded once.
#[derive(Clone, Debug)]
pub struct Batch {
    /// What it holds.
    pub signal: Signal,
    /// The encoded `Export*ServiceRequest`.
    pub body: Bytes,
    /// The spans or log records it holds.
    pub items: u64,
}

/// An endpoint's answer to one try.
#[derive(Debug)]
pub(super) enum Outcome {
    /// Taken, but for `rejected` items (a partial success), with the endpoint's message.
    Accepted { rejected: u64, message: String },
    /// Not taken now: try again (after the pause the endpoint asks for, if it does).
    Retry { why: String, after: Option<Duration> },
    /// Refused: not to be sent again. `unsupported`: the endpoint takes no such signal.
    Refused { why: String, unsupported: bool },
}

/// What was delivered of one signal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Items in the source.
    pub items: u64,
    /// Items the endpoint acknowledged and did not reject.
    pub delivered: u64,
    /// Items the endpoint acknowledged as rejected (partial success).
    pub rejected: u64,
    /// Items in batches refused, given up, or not tried.
    pub failed: u64,
    /// Of those, items in batches refused (not to be sent again).
    pub refused: u64,
    /// Batches acknowledged.
    pub batches: u64,
    /// Tries that were retried.
    pub retries: u64,
    /// The endpoint's messages (partial successes, refusals), each once, in order.
    pub messages: Vec<String>,
}

impl Tally {
    /// Keeps the endpoint's message `m` (each once, the first few; none if empty).
    pub fn note(&mut self, m: String) {
        if !m.is_empty() && !self.messages.contains(&m) && self.messages.len() < 8 {
            self.messages.push(m);
        }
    }
}

/// What a delivery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The spans'.
    pub spans: Tally,
    /// The log records'.
    pub logs: Tally,
    /// Why the delivery stopped early: a batch given up.
    pub stopped: Option<String>,
    /// The batches the endpoint settled, acknowledged or refused (their positions in
    /// the order given): not to be sent again.
    pub settled: Vec<usize>,
}

impl Report {
    /// The tally of signal `s`.
    pub fn tally(&mut self, s: Signal) -> &mut Tally {
        match s {
            Signal::Traces => &mut self.spans,
            Signal::Logs => &mut self.logs,
        }
    }

    /// Whether every item was delivered.
    pub fn complete(&self) -> bool {
        self.spans.delivered == self.spans.items && self.logs.delivered == self.logs.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_with_their_default_ports() {
        let e: Endpoint = "otlp://collector".parse().unwrap();
        assert_eq!((e.protocol, e.authority.as_str(), e.prefix.as_str()), (Protocol::Grpc, "collector:4317", ""));
        let e: Endpoint = "otlp+http://127.0.0.1:9000/otlp/".parse().unwrap();
        assert_eq!((e.protocol, e.authority.as_str(), e.prefix.as_str()), (Protocol::Http, "127.0.0.1:9000", "/otlp"));
        assert_eq!(e.to_string(), "otlp+http://127.0.0.1:9000/otlp");
        let e: Endpoint = "otlp://[::1]:4000".parse().unwrap();
        assert_eq!(e.authority, "[::1]:4000");
        let e: Endpoint = "otlp://[::1]".parse().unwrap();
        assert_eq!(e.authority, "[::1]:4317");
        for bad in [
            "http://x:4318",
            "otlp://",
            "otlp://:4317",
            "otlp://x:0",
            "otlp://x:99999",
            "otlp://u@x",
            "x",
            "otlp://::1:4317",
            "otlp://[::1",
            "otlp://x:4317/path",
            "otlp+http://x/a b",
            "otlp+http://x/a?b",
        ] {
            assert!(bad.parse::<Endpoint>().is_err(), "{bad}");
        }
        assert!("otlps://x".parse::<Endpoint>().unwrap_err().to_string().contains("TLS"));
    }

    #[test]
    fn endpoint_errors_name_the_text_and_say_what_an_endpoint_is() {
        let why = |s: &str| s.parse::<Endpoint>().unwrap_err().to_string();
        let forms = "otlp://HOST:PORT (OTLP/gRPC) or otlp+http://HOST:PORT (OTLP/HTTP)";
        assert_eq!(
            why("otlps://x"),
            format!("otlps://x: TLS is not built into ringtrace: send to a collector on this host or its network, as {forms}")
        );
        assert_eq!(why("x"), format!("x: an OTLP endpoint is {forms}"));
        assert_eq!(why("otlp://u@x"), format!("otlp://u@x: an OTLP endpoint is {forms} (no user, query or fragment)"));
        assert_eq!(why("otlp://x/p"), "otlp://x/p: an OTLP/gRPC endpoint has no path: otlp://HOST:PORT");
        assert_eq!(why("otlp://x:0"), "otlp://x:0: \"0\" is not a port");
        assert_eq!(
            why("otlp://::1"),
            format!("otlp://::1: no host (an IPv6 address in brackets: otlp://[::1]:4317): {forms}")
        );
        let uri = why("otlp+http://x/a b");
        assert!(
            uri.starts_with("otlp+http://x/a b: not an endpoint (") && uri.ends_with(&format!("): {forms}")),
            "{uri}"
        );
        let e = "otlp+http://x/a b".parse::<Endpoint>().unwrap_err();
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn partial_success_is_read_from_either_answer() {
        use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsPartialSuccess, ExportLogsServiceResponse};
        use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse};
        use prost::Message;
        let t = ExportTraceServiceResponse {
            partial_success: Some(ExportTracePartialSuccess { rejected_spans: 3, error_message: "too old".into() }),
        };
        assert_eq!(Signal::Traces.partial(&t.encode_to_vec()), Ok((3, "too old".into())));
        let l = ExportLogsServiceResponse {
            partial_success: Some(ExportLogsPartialSuccess { rejected_log_records: -1, error_message: String::new() }),
        };
        assert_eq!(Signal::Logs.partial(&l.encode_to_vec()), Ok((0, String::new())));
        assert_eq!(Signal::Traces.partial(&[]), Ok((0, String::new())));
        assert!(Signal::Traces.partial(&[0x0a, 0xff]).is_err());
    }
}
