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
/// # use bytes::Bytes;
/// # use http_body_util::{BodyExt, Full};
/// # use mcp_framing::RequestKey;
/// # use tower_layer::Layer;
/// # use tower_service::Service;
/// # // The MCP service behind the layer: answers each call with `self.0` as its result; a call of
/// # // the tool `slow` never answers (it is still running), one of `crash` fails without an answer.
/// # #[derive(Clone)]
/// # struct Tool(String);
/// # impl Service<http::Request<Full<Bytes>>> for Tool {
/// #     type Response = http::Response<Full<Bytes>>;
/// #     type Error = std::convert::Infallible;
/// #     type Future = std::pin::Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;
/// #     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
/// #         std::task::Poll::Ready(Ok(()))
/// #     }
/// #     fn call(&mut self, request: http::Request<Full<Bytes>>) -> Self::Future {
/// #         let result = self.0.clone();
/// #         Box::pin(async move {
/// #             let call = request.into_body().collect().await.unwrap().to_bytes();
/// #             let named = |tool: &[u8]| call.windows(tool.len()).any(|w| w == tool);
/// #             if named(br#""name":"slow""#) {
/// #                 std::future::pending::<()>().await;
/// #             }
/// #             if named(br#""name":"crash""#) {
/// #                 return Ok(http::Response::builder().status(500).body(Full::new(Bytes::new())).unwrap());
/// #             }
/// #             let body = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#);
/// #             Ok(http::Response::builder().header("content-type", "application/json")
/// #                 .body(Full::new(Bytes::from(body))).unwrap())
/// #         })
/// #     }
/// # }
/// # // An attempt of a keyed `tools/call` with these `params`, as a client sends it.
/// # #[allow(dead_code)] // not every example calls it
/// # fn request(key: RequestKey, params: serde_json::Value) -> http::Request<Full<Bytes>> {
/// #     let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
/// #     http::Request::post("/mcp").header("mcp-framing-request-key", key.to_string())
/// #         .body(Full::new(Bytes::from(call.to_string()))).unwrap()
/// # }
/// # #[allow(dead_code)] // not every example calls it
/// # fn tools_call(key: RequestKey, tool: &str) -> http::Request<Full<Bytes>> {
/// #     request(key, serde_json::json!({"name": tool, "arguments": {}}))
/// # }
/// # // Sends the attempt, reads the answer to its end and returns what the layer decided
/// # // (its `mcp-framing-dedupe` response header).
/// # #[allow(dead_code)] // not every example calls it
/// # async fn send<S: Service<http::Request<Full<Bytes>>, Response = http::Response<B>>, B: http_body::Body>(
/// #     service: &mut S, request: http::Request<Full<Bytes>>,
/// # ) -> String where S::Error: std::fmt::Debug, B::Error: std::fmt::Debug {
/// #     let response = service.call(request).await.unwrap();
/// #     let decision = response.headers()["mcp-framing-dedupe"].to_str().unwrap().to_owned();
/// #     response.into_body().collect().await.unwrap();
/// #     decision
/// # }
/// # #[allow(dead_code)] // not every example calls it
/// # async fn attempt<S: Service<http::Request<Full<Bytes>>, Response = http::Response<B>>, B: http_body::Body>(
/// #     service: &mut S, key: RequestKey, tool: &str,
/// # ) -> String where S::Error: std::fmt::Debug, B::Error: std::fmt::Debug {
/// #     send(service, tools_call(key, tool)).await
/// # }
/// # let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
/// # runtime.block_on(async {
/// let mut service = DedupeLayer::new(Deduplicator::new(MemoryStore::new())).layer(Tool("{}".into()));
/// // The layer's responses, whatever it decided, have this body type.
/// let response: http::Response<DedupeBody> = service.call(tools_call(RequestKey::random(), "t")).await.unwrap();
/// let body = response.into_body().collect().await.unwrap().to_bytes();
/// assert_eq!(&body[..], br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
/// # });
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
