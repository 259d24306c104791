//! OTLP/gRPC: each batch a unary `Export` call on one HTTP/2 channel (tonic's, which
//! connects on first use and again after the connection is lost), its body the bytes
//! the batch was encoded to.

use std::marker::PhantomData;

use bytes::{Buf, BufMut, Bytes};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap};
use tonic::{Code, Status};

use super::model::{Batch, Delivery, Endpoint, Outcome};
use super::rpc;
use super::sane::Sane;

/// A codec of messages already encoded: sends a batch's bytes as they are, and hands
/// back the answer's bytes for [`super::Signal::partial`] to read.
#[derive(Clone, Copy, Default)]
struct Raw(PhantomData<()>);

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Raw {
        *self
    }

    fn decoder(&mut self) -> Raw {
        *self
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// The gRPC client of one endpoint.
pub struct Grpc {
    client: tonic::client::Grpc<Sane>,
    metadata: MetadataMap,
}

impl Grpc {
    /// A client of `endpoint`; it connects at its first call.
    pub fn new(endpoint: &Endpoint, opts: &Delivery) -> Result<Grpc, String> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", endpoint.authority))
            .map_err(|e| format!("{endpoint}: {e}"))?
            .connect_timeout(opts.timeout)
            .timeout(opts.timeout)
            .tcp_nodelay(true)
            .connect_lazy();
        let mut metadata = MetadataMap::new();
        for (k, v) in &opts.headers {
            let key = AsciiMetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes())
                .map_err(|_| format!("header {k:?}: not a gRPC metadata key"))?;
            let value = AsciiMetadataValue::try_from(v.as_str()).map_err(|_| format!("header {k}: not ASCII text"))?;
            metadata.append(key, value);
        }
        // The answers are small (a partial success); the requests are bounded by the
        // batches' limits, which the client does not police a second time.
        let client = tonic::client::Grpc::new(Sane(channel)).max_encoding_message_size(usize::MAX);
        Ok(Grpc { client, metadata })
    }

    /// Sends one batch and reads the answer.
    pub async fn send(&mut self, b: &Batch) -> Outcome {
        if let Err(e) = self.client.ready().await {
            return Outcome::Retry { why: format!("cannot connect: {}", super::http::chain(&e)), after: None };
        }
        let mut request = tonic::Request::new(b.body.clone());
        *request.metadata_mut() = self.metadata.clone();
        let path = http::uri::PathAndQuery::from_static(b.signal.grpc_path());
        match self.client.unary(request, path, Raw::default()).await {
            Ok(answer) => match b.signal.partial(answer.get_ref()) {
                Ok((rejected, message)) => Outcome::Accepted { rejected, message },
                // Not an OTLP answer (another gRPC service): nothing is known to be
                // delivered, and the batches after it would be answered alike.
                Err(why) => Outcome::Refused {
                    why: format!("the endpoint's answer is {why}: nothing is known to be delivered"),
                    unsupported: true,
                },
            },
            Err(status) => classify(&status),
        }
    }
}

/// What a gRPC error means for the batch, as the OTLP specification's table of
/// retryable codes has it.
fn classify(status: &Status) -> Outcome {
    // The message, then its causes (a connection's: "tcp connect error", then
    // "Connection refused").
    let why = match std::error::Error::source(status) {
        Some(cause) => format!("{:?}: {}: {}", status.code(), status.message(), super::http::chain(cause)),
        None if status.message().is_empty() => format!("{:?}", status.code()),
        None => format!("{:?}: {}", status.code(), status.message()),
    };
    let delay = rpc::status(status.details()).and_then(|s| s.retry_delay());
    // A status tonic made of a transport error (a connection lost, reset, refused) has
    // that error as its cause: the endpoint did not answer, so the batch is retried,
    // whatever code tonic gave it (`Unknown` for a connection lost mid-call).
    let transport = std::error::Error::source(status).is_some();
    match status.code() {
        _ if transport => Outcome::Retry { why, after: delay },
        Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::OutOfRange
        | Code::Unavailable
        | Code::DataLoss => Outcome::Retry { why, after: delay },
        // Retried only where the server says when (the specification's rule: without
        // RetryInfo, the server is not going to recover).
        Code::ResourceExhausted if delay.is_some() => Outcome::Retry { why, after: delay },
        Code::Unimplemented => Outcome::Refused { why, unsupported: true },
        _ => Outcome::Refused { why, unsupported: false },
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn codes_are_retried_as_the_specification_says() {
        let retry = |s: Status| matches!(classify(&s), Outcome::Retry { .. });
        assert!(retry(Status::unavailable("down")));
        assert!(retry(Status::deadline_exceeded("slow")));
        assert!(!retry(Status::invalid_argument("bad")));
        assert!(!retry(Status::resource_exhausted("full")));
        assert!(!retry(Status::unknown("said by the endpoint")));
        let lost = Status::from_error(Box::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe)));
        assert!(retry(lost), "a connection lost is retried");
        assert!(matches!(classify(&Status::unimplemented("no logs")), Outcome::Refused { unsupported: true, .. }));
        let info = rpc::RetryInfo { retry_delay: Some(rpc::ProtoDuration { seconds: 1, nanos: 0 }) };
        let details = rpc::Status {
            code: Code::ResourceExhausted as i32,
            message: "full".into(),
            details: vec![rpc::Any {
                type_url: "type.googleapis.com/google.rpc.RetryInfo".into(),
                value: info.encode_to_vec(),
            }],
        };
        let s = Status::with_details(Code::ResourceExhausted, "full", details.encode_to_vec().into());
        match classify(&s) {
            Outcome::Retry { after, .. } => assert_eq!(after, Some(std::time::Duration::from_secs(1))),
            other => panic!("{other:?}"),
        }
    }
}
