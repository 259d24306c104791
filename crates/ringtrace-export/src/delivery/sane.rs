//! tonic's channel with the answers' `grpc-status-details-bin` checked first: tonic
//! 0.14 decodes that header (in the headers of a trailers-only answer, or in the
//! trailers) with an `expect`, so an endpoint sending one that is not base64 would make
//! the command panic. Here a header that does not decode is taken out (its status stays:
//! code and message), before tonic sees it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine as _};
use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use tonic::transport::Channel;

/// The decoding tonic's `Status::from_header_map` does (standard alphabet, padding
/// optional).
const DETAILS: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Takes a `grpc-status-details-bin` that does not decode out of `headers`.
pub fn check(headers: &mut HeaderMap) {
    const NAME: &str = "grpc-status-details-bin";
    if headers.get_all(NAME).iter().any(|v| DETAILS.decode(v.as_bytes()).is_err()) {
        headers.remove(NAME);
    }
}

/// The channel, its answers checked.
#[derive(Clone, Debug)]
pub struct Sane(pub Channel);

type Answer = http::Response<SaneBody>;

impl tower_service::Service<http::Request<tonic::body::Body>> for Sane {
    type Response = Answer;
    type Error = tonic::transport::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, tonic::transport::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let answer = self.0.call(request);
        Box::pin(async move {
            let mut a = answer.await?;
            check(a.headers_mut());
            Ok(a.map(SaneBody))
        })
    }
}

/// An answer's body, its trailers checked.
#[derive(Debug)]
pub struct SaneBody(tonic::body::Body);

impl Body for SaneBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        Pin::new(&mut self.0).poll_frame(cx).map(|f| {
            f.map(|f| {
                f.map(|frame| match frame.into_trailers() {
                    Ok(mut trailers) => {
                        check(&mut trailers);
                        Frame::trailers(trailers)
                    }
                    Err(frame) => frame,
                })
            })
        })
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_that_do_not_decode_are_taken_out() {
        let mut h = HeaderMap::new();
        h.insert("grpc-status", "14".parse().unwrap());
        h.insert("grpc-status-details-bin", "!!!not base64!!!".parse().unwrap());
        check(&mut h);
        assert!(h.get("grpc-status-details-bin").is_none());
        assert_eq!(h.get("grpc-status").unwrap(), "14");
        // tonic reads what is left without panicking.
        assert_eq!(tonic::Status::from_header_map(&h).unwrap().code(), tonic::Code::Unavailable);
        let mut ok = HeaderMap::new();
        ok.insert("grpc-status-details-bin", "CAgSBGZ1bGw".parse().unwrap());
        check(&mut ok);
        assert!(ok.get("grpc-status-details-bin").is_some());
    }
}
