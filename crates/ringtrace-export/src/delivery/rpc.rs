//! The parts of googleapis' `google.rpc` messages an OTLP endpoint answers a refused
//! request with: `Status` (google/rpc/status.proto, the body of an OTLP/HTTP error
//! response and the `grpc-status-details-bin` of a gRPC one) and `RetryInfo`
//! (google/rpc/error_details.proto, the delay a server asks for before a retry).
//! Declared here from those protos, field numbers included, rather than built from them.

use std::time::Duration;

use prost::Message;

/// `google.rpc.Status`.
#[derive(Clone, PartialEq, Message)]
pub struct Status {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<Any>,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `google.rpc.RetryInfo`.
#[derive(Clone, PartialEq, Message)]
pub struct RetryInfo {
    #[prost(message, optional, tag = "1")]
    pub retry_delay: Option<ProtoDuration>,
}

/// `google.protobuf.Duration`.
#[derive(Clone, PartialEq, Message)]
pub struct ProtoDuration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// The type URL of `RetryInfo` in a `Status`'s details.
const RETRY_INFO: &str = "type.googleapis.com/google.rpc.RetryInfo";

/// A `Status` read from `bytes`, or `None` where they are not one.
pub fn status(bytes: &[u8]) -> Option<Status> {
    Status::decode(bytes).ok()
}

impl Status {
    /// The delay its `RetryInfo` asks for, if it has one (negative parts read as 0).
    pub fn retry_delay(&self) -> Option<Duration> {
        let any = self.details.iter().find(|d| d.type_url == RETRY_INFO)?;
        let d = RetryInfo::decode(any.value.as_slice()).ok()?.retry_delay?;
        let secs = u64::try_from(d.seconds).unwrap_or(0);
        let nanos = u32::try_from(d.nanos).unwrap_or(0).min(999_999_999);
        Some(Duration::new(secs, nanos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_delay_is_read_from_the_details() {
        let info = RetryInfo { retry_delay: Some(ProtoDuration { seconds: 2, nanos: 500_000_000 }) };
        let s = Status {
            code: 8,
            message: "slow down".into(),
            details: vec![Any { type_url: RETRY_INFO.into(), value: info.encode_to_vec() }],
        };
        let back = status(&s.encode_to_vec()).unwrap();
        assert_eq!(back.message, "slow down");
        assert_eq!(back.retry_delay(), Some(Duration::from_millis(2500)));
        let other = Status { details: vec![Any { type_url: "x".into(), value: vec![1] }], ..s };
        assert_eq!(other.retry_delay(), None);
        // A negative delay is no delay, not a panic.
        let info = RetryInfo { retry_delay: Some(ProtoDuration { seconds: -5, nanos: -1 }) };
        let neg = Status { details: vec![Any { type_url: RETRY_INFO.into(), value: info.encode_to_vec() }], ..other };
        assert_eq!(neg.retry_delay(), Some(Duration::ZERO));
        assert!(status(&[0xff, 0xff, 0xff]).is_none());
    }
}
