//! The layer declares what it does (SPEC.md §11.2): it finds the discovery requests in the
//! request bodies passing through it, and writes its framing contract into their results.

use std::fmt;
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, OnceLock};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use memchr::memmem;

use crate::contract::{DiscoverySource, FramingContract, TextDeclaration};
use crate::jsonrpc::Carried;

/// The largest request body read to find out whether it is a discovery request: an `initialize`
/// or `server/discover` request is a few hundred bytes; a larger body is another request.
const MAX_DISCOVERY_REQUEST: usize = 64 * 1024;

/// What the discovery methods' names hold as written (`initialize`, `server/discover`), or the
/// `\u` escape a name may be spelled with: searched for in every request body, so built once
/// (a `memmem::find` builds its searcher each call, about a microsecond).
static METHOD_NEEDLES: LazyLock<[memmem::Finder<'static>; 3]> = LazyLock::new(|| {
    ["initialize", "discover", "\\u"].map(|needle| memmem::Finder::new(needle).into_owned())
});

/// The request body [`FramingService`](super::FramingService) hands its inner service: the
/// client's body, unchanged, read as it passes (up to 64 KiB, without a copy) to find out whether
/// the request is `initialize` or `server/discover`, whose result the layer declares its framing
/// contract in (SPEC.md §11.2).
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::future::Future;
/// use std::pin::Pin;
/// use std::task::{Context, Poll};
/// use bytes::Bytes;
/// use http_body_util::{BodyExt, Full};
/// use mcp_framing::rmcp_http::{FramingLayer, RequestBody};
/// use tower_layer::Layer;
/// use tower_service::Service;
///
/// // An inner service that reads the request body, as rmcp does, and echoes it.
/// struct Echo;
/// impl Service<http::Request<RequestBody<String>>> for Echo {
///     type Response = http::Response<Full<Bytes>>;
///     type Error = Infallible;
///     type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;
///     fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
///         Poll::Ready(Ok(()))
///     }
///     fn call(&mut self, request: http::Request<RequestBody<String>>) -> Self::Future {
///         Box::pin(async move {
///             let body = request.into_body().collect().await?.to_bytes();
///             Ok(http::Response::new(Full::new(body)))
///         })
///     }
/// }
///
/// # tokio_test::block_on(async {
/// let mut service = FramingLayer::new().layer(Echo);
/// let response = service.call(http::Request::new("ping".to_owned())).await.unwrap();
/// assert_eq!(response.into_body().collect().await.unwrap().to_bytes(), "ping");
/// # });
/// ```
pub struct RequestBody<B> {
    body: Pin<Box<B>>,
    /// The body's pieces so far, while they are few enough to be a discovery request.
    seen: Vec<Bytes>,
    seen_len: usize,
    /// Whether the request's id is wanted (a response the layer frames must answer it).
    wants_id: bool,
    /// Set once the body ended: what the layer read of it.
    probe: Arc<OnceLock<RequestRead>>,
}

impl<B> fmt::Debug for RequestBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestBody")
            .field("seen", &self.seen_len)
            .finish_non_exhaustive()
    }
}

impl<B> RequestBody<B> {
    /// `body`, and where what it is (a discovery request, and its id when `wants_id`: only a
    /// response the layer frames needs it) will be told once it ended.
    pub(super) fn new(body: B, wants_id: bool) -> (Self, Arc<OnceLock<RequestRead>>) {
        let probe = Arc::new(OnceLock::new());
        let body = Self {
            body: Box::pin(body),
            seen: Vec::new(),
            seen_len: 0,
            wants_id,
            probe: probe.clone(),
        };
        (body, probe)
    }

    fn see(&mut self, data: &Bytes) {
        self.seen_len = self.seen_len.saturating_add(data.len());
        if self.seen_len > MAX_DISCOVERY_REQUEST {
            self.seen = Vec::new();
        } else {
            self.seen.push(data.clone());
        }
    }

    /// The body ended: which discovery request it is, if one, and its id (once; later calls do
    /// nothing).
    fn finish(&mut self) {
        if self.seen_len > MAX_DISCOVERY_REQUEST || self.probe.get().is_some() {
            return;
        }
        let seen = std::mem::take(&mut self.seen);
        let whole = match <[Bytes; 1]>::try_from(seen) {
            Ok([one]) => one,
            Err(pieces) => pieces
                .iter()
                .fold(BytesMut::with_capacity(self.seen_len), |mut all, piece| {
                    all.extend_from_slice(piece);
                    all
                })
                .freeze(),
        };
        // The request's id, which its final response must answer (one `id` member, a string or
        // a number: anything else is not a request a response answers). Read only when wanted:
        // finding it scans the whole request.
        let text = self.wants_id.then(|| std::str::from_utf8(&whole).ok());
        let id = text.flatten().and_then(|text| {
            let members = crate::jsonrpc::top_level(text)?;
            let range = members.id.filter(|_| members.ids == 1)?;
            let id: serde_json::Value = serde_json::from_str(&text[range]).ok()?;
            (id.is_string() || id.is_number()).then_some(id)
        });
        // Most requests are tool calls: a scan for what the method names hold spares them the
        // parse. A JSON string equal to `initialize` or `server/discover` holds `initialize` or
        // `discover` as written, or a `\u` escape.
        let named = METHOD_NEEDLES
            .iter()
            .any(|needle| needle.find(&whole).is_some());
        let discovery = if named {
            match crate::jsonrpc::request_method(&whole).as_deref() {
                Some("initialize") => Some(DiscoverySource::Initialize),
                Some("server/discover") => Some(DiscoverySource::Discover),
                _ => None,
            }
        } else {
            None
        };
        let _ = self.probe.set(RequestRead { discovery, id });
    }
}

/// What [`RequestBody`] read of a request body that ended within 64 KiB.
#[derive(Debug)]
pub(super) struct RequestRead {
    /// The discovery request it is, if one.
    pub(super) discovery: Option<DiscoverySource>,
    /// Its JSON-RPC id, if it is one request with an id (and the id was wanted).
    pub(super) id: Option<serde_json::Value>,
}

/// Why an inner server's message cannot be framed on the response stream of the request whose
/// id is `request_id` (an invalid inner response, ABORT code 1, SPEC.md §3.1): it is no JSON-RPC
/// message, or it is a final response for another request. `id_text` gives the bytes of a range
/// of the message as [`message_text`](crate::jsonrpc::message_text) read it (its id's), with
/// what it `carried`.
pub(super) fn unframeable(
    carried: &Carried,
    id_text: impl FnOnce(Range<usize>) -> Vec<u8>,
    request_id: Option<&serde_json::Value>,
) -> Option<String> {
    match carried {
        Carried::NotJsonRpc => {
            Some("the upstream sent an event that is not a JSON-RPC message".to_owned())
        }
        Carried::Message => None,
        Carried::Response(members) => {
            let expected = request_id?;
            let id = id_text(members.id.clone()?);
            let answered: serde_json::Value = serde_json::from_slice(&id).ok()?;
            (&answered != expected).then(|| {
                let short = |text: &str| text.chars().take(64).collect::<String>();
                format!(
                    "the upstream's final response answers id {}, not the request's {}",
                    short(&String::from_utf8_lossy(&id)),
                    short(&expected.to_string())
                )
            })
        }
    }
}

impl<B: Body> Body for RequestBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        match this.body.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let frame = frame.map_data(|mut data| data.copy_to_bytes(data.remaining()));
                if let Some(data) = frame.data_ref() {
                    this.see(data);
                }
                // A reader that stops once the body says it ended (hyper's client sending it
                // upstream) never polls for the end: the body is whole now.
                if this.body.is_end_stream() {
                    this.finish();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(err))) => {
                this.seen = Vec::new();
                this.seen_len = usize::MAX;
                Poll::Ready(Some(Err(err)))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The contract a service declares in the result of one discovery request.
#[derive(Clone, Debug)]
pub(super) struct Declaration {
    contract: Arc<FramingContract>,
    source: DiscoverySource,
}

impl Declaration {
    pub(super) fn new(contract: Arc<FramingContract>, source: DiscoverySource) -> Self {
        Self { contract, source }
    }

    /// Logs why the contract could not be declared in the response.
    pub(super) fn not_declared(&self, reason: &str) {
        tracing::event!(target: "mcp_framing::contract", tracing::Level::WARN,
            source = %self.source, reason,
            "the framing contract could not be declared in the response");
    }

    /// [`apply`](Self::apply) to a response's bytes (which must be UTF-8, as JSON is).
    pub(super) fn apply_bytes(&self, response: &[u8]) -> Option<String> {
        match std::str::from_utf8(response) {
            Ok(text) => self.apply(text),
            Err(_) => {
                self.not_declared("the response is not UTF-8");
                None
            }
        }
    }

    /// `response`, the text of the JSON-RPC response to the discovery request, with the contract
    /// written in; `None` when it stays as it is (SPEC.md §11.2): it declares this very contract
    /// already, or it is no result the contract can be written into (logged).
    pub(super) fn apply(&self, response: &str) -> Option<String> {
        match self.contract.declare_in_text(response, self.source) {
            Ok(TextDeclaration::Written(text)) => Some(text),
            Ok(TextDeclaration::Unchanged) => None,
            Ok(TextDeclaration::Replaced { text, previous }) => {
                tracing::event!(target: "mcp_framing::contract", tracing::Level::WARN,
                    source = %self.source, handler = previous,
                    "the handler declared another framing contract; the layer's, which says what it does, replaces it");
                Some(text)
            }
            Err(err) => {
                self.not_declared(&err.to_string());
                None
            }
        }
    }
}
