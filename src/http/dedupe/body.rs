//! The response body of a [`DedupeService`](super::DedupeService), and the channel that relays
//! an executed call's body to the client.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};

/// The response body of a [`DedupeService`](super::DedupeService).
///
/// # Examples
///
/// ```
/// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
/// use mcp_framing::http::{DedupeBody, DedupeLayer};
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
/// # fn main() {
/// # paused_runtime().block_on(async {
/// let mut service = DedupeLayer::new(Deduplicator::new(MemoryStore::new())).layer(Tool::new("{}"));
/// // The layer's responses, whatever it decided, have this body type.
/// let response: http::Response<DedupeBody> = service.call(tools_call(RequestKey::random(), "t")).await.unwrap();
/// let body = response.into_body().collect().await.unwrap().to_bytes();
/// assert_eq!(&body[..], br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
/// # });
/// # }
/// ```
pub type DedupeBody = UnsyncBoxBody<Bytes, DedupeBodyError>;

/// Why a [`DedupeBody`] failed.
///
/// # Examples
///
/// ```
/// use mcp_framing::http::DedupeBodyError;
///
/// // What a server logs when a deduplicated call's response fails on its way to the client:
/// fn log_line(err: &DedupeBodyError) -> String {
///     match err {
///         DedupeBodyError::Inner(cause) => format!("the handler's body failed: {cause}"),
///         other => other.to_string(),
///     }
/// }
/// assert_eq!(log_line(&DedupeBodyError::TaskStopped), "the response task stopped");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DedupeBodyError {
    /// The inner service's response body failed.
    #[error("the inner response body failed: {0}")]
    Inner(#[source] BoxError),
    /// The task that drives an executed call's response stopped before it answered (the runtime
    /// is shutting down).
    #[error("the response task stopped")]
    TaskStopped,
}

/// The error type of a body the layer wraps.
pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub(super) fn box_body<B>(body: B) -> DedupeBody
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    body.map_err(|err| DedupeBodyError::Inner(err.into()))
        .boxed_unsync()
}

pub(super) fn full(bytes: impl Into<Bytes>) -> DedupeBody {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

/// A body that fails at once with `err`.
pub(super) fn failing(err: DedupeBodyError) -> DedupeBody {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.try_send(Err(err)).expect("an empty channel has room");
    ChannelBody { rx }.boxed_unsync()
}

/// The client's side of the relay.
pub(super) struct ChannelBody {
    pub(super) rx: tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, DedupeBodyError>>,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = DedupeBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, DedupeBodyError>>> {
        self.rx.poll_recv(cx)
    }
}
