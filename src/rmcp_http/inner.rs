//! The inner response body `FramingLayer` frames, and what becomes of it after its final
//! response (read to its end, bounded, so that an HTTP connection under it is kept).

use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http_body::Body;
use http_body_util::BodyExt;

use crate::event::{Abort, AbortCode};
use crate::mapping::encoder::{fit_reason, too_large};

/// An inner response body the layer can frame.
pub(super) trait InnerBody:
    Body<Data = Bytes, Error: fmt::Display + Send + 'static> + Send + 'static
{
}

impl<B> InnerBody for B where
    B: Body<Data = Bytes, Error: fmt::Display + Send + 'static> + Send + 'static
{
}

/// The most bytes [`drain_rest`] reads of what follows an inner body's final response: the
/// end of an SSE stream (the chunked encoding's last chunk, a closing comment), not more.
const DRAIN_BYTES: usize = 64 * 1024;

/// How long [`drain_rest`] waits for the end of an inner body after its final response.
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// Reads what is left of an inner response body once its final response went out, in a task of
/// its own, rather than dropping it: the framed body has ended (the client has the sentinel and
/// the end of the HTTP body at once), and an inner body that comes over HTTP (a proxy's upstream
/// client, as `mcp-frame proxy`'s) reaches its end, so that its connection goes back to the
/// client's pool. Dropped before its end, the connection is closed: every framed call would pay
/// a new connection, whose first segments wait on the receive window and on delayed ACKs of a
/// server with Nagle's algorithm on. Bounded: at most [`DRAIN_BYTES`] for at most
/// [`DRAIN_WAIT`], then dropped; dropped at once when it ended already or outside a tokio
/// runtime. Only after the final response: a body dropped before it is how the inner server
/// learns that the client went away (the request is cancelled).
pub(super) fn drain_rest<B: InnerBody>(mut body: Pin<Box<B>>) {
    if body.is_end_stream() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let rest = async {
            let mut left = DRAIN_BYTES;
            while let Some(Ok(frame)) = body.frame().await {
                let len = frame.data_ref().map_or(0, Bytes::len);
                match left.checked_sub(len) {
                    Some(still) => left = still,
                    None => break,
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_WAIT, rest).await;
    });
}

/// Why the layer cannot go on framing an inner body: the ABORT the stream ends with in its
/// place.
pub(super) enum Failure {
    /// A message (or what is held for an event) over the limit (code 5, message too large).
    TooLarge { len: u64, max: u64 },
    /// The inner body failed, or ended before its final response (code 4, upstream failed,
    /// SPEC.md §3.1: the same request may succeed when sent again).
    Upstream(String),
    /// Anything else (code 1, an invalid inner response): its description.
    Internal(String),
}

impl Failure {
    /// The inner body failed with `err`.
    pub(super) fn failed(err: impl fmt::Display) -> Self {
        Self::Upstream(format!("upstream body failed: {err}"))
    }

    /// The inner body ended, cleanly or not, before its final response.
    pub(super) fn ended() -> Self {
        let reason = "the upstream response stream ended before its final response";
        Self::Upstream(reason.to_owned())
    }

    /// The ABORT the stream ends with.
    pub(super) fn abort(self) -> Abort {
        match self {
            Self::TooLarge { len, max } => too_large(len, max),
            Self::Upstream(reason) => abort_for(&reason),
            Self::Internal(reason) => Abort::new(AbortCode::InternalError, reason),
        }
    }
}

/// An [`Abort`] for a server-side failure, with a reason cut to the frame's limit.
#[must_use]
fn abort_for(reason: &str) -> Abort {
    Abort::new(AbortCode::UpstreamFailed, fit_reason(reason))
}

#[cfg(test)]
mod tests {
    use super::abort_for;
    use crate::frame::MAX_ABORT_REASON_LEN;
    use crate::{AbortCode, DecodeError, StreamDecoder, StreamEncoder, StreamHead};

    #[test]
    fn a_server_failure_aborts_as_upstream_failed_with_its_reason() {
        let abort = abort_for("upstream timed out");
        assert_eq!(abort.code, AbortCode::UpstreamFailed);
        assert_eq!(abort.reason, "upstream timed out");
    }

    #[test]
    fn a_reason_longer_than_the_frame_holds_is_cut_at_a_character_boundary_and_still_decodes() {
        let long = "é".repeat(MAX_ABORT_REASON_LEN); // two bytes each
        let abort = abort_for(&long);
        assert_eq!(abort.reason.len(), MAX_ABORT_REASON_LEN);
        assert!(long.starts_with(abort.reason.as_str()));
        let mut wire = bytes::BytesMut::new();
        let mut encoder = StreamEncoder::new(StreamHead::for_request(None));
        encoder.abort_with(&abort, &mut wire).unwrap();
        let err = StreamDecoder::new().decode_all(&wire).unwrap_err();
        assert_eq!(err, DecodeError::PeerAbort(abort));
    }
}
