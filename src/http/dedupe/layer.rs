//! [`DedupeLayer`]: what it deduplicates, how it finds the principal, how much it reads.

use std::fmt;
use std::sync::Arc;

use super::identify::Config;
use super::service::DedupeService;
use crate::dedupe::{AuthorizationPrincipal, Deduplicator, PrincipalExtractor};
use crate::limits::DEFAULT_MAX_MESSAGE_SIZE;

/// Default bound on a request body the layer reads to identify a call: 16 MiB, the default
/// maximum message size (SPEC.md §6). A larger body is answered `413`.
pub(crate) const DEFAULT_MAX_REQUEST_BYTES: usize = DEFAULT_MAX_MESSAGE_SIZE as usize;

/// A tower layer that deduplicates keyed calls (SPEC.md §17.10) in front of any MCP server that
/// answers Streamable HTTP POSTs (rmcp's `StreamableHttpService`, an axum or hyper handler).
///
/// For every POST carrying a JSON-RPC request of a deduplicated method (default `tools/call`)
/// with a request key (header `Mcp-Framing-Request-Key` and/or `params._meta`), it reads the
/// body (bounded), identifies the call (principal, method, tool, key, fingerprint) and asks the
/// [`Deduplicator`]:
/// - **execute**: the request goes to the inner service; the inner response body is driven to
///   its end by a task of its own, independently of the client connection, its final JSON-RPC
///   response captured and recorded, and its bytes relayed to the client while it listens;
/// - **replay**: answered with the stored result under this attempt's id, `application/json`;
/// - **refused**: answered with the refusal's JSON-RPC error, `application/json`.
///
/// Everything else passes through. Put [`FramingLayer`](crate::rmcp_http::FramingLayer) *outside*
/// this layer (or use `FramingLayer::dedupe`), so that replays and refusals are framed afresh for
/// clients that opted in.
///
/// # Examples
///
/// ```
/// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
/// use mcp_framing::http::DedupeLayer;
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
/// # fn main() {
/// # tokio_test::block_on(async {
/// // Any inner service: here `Tool`, an MCP server whose tool counts its executions.
/// let tool = Tool::new(r#"{"sent":true}"#);
/// let mut service = DedupeLayer::new(Deduplicator::new(MemoryStore::new())).layer(tool.clone());
/// let key = RequestKey::random();
/// for id in [1, 2] {
///     let request = http::Request::post("/mcp")
///         .header("mcp-framing-request-key", key.to_string())
///         .body(Full::new(Bytes::from(format!(
///             r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"t","arguments":{{}}}}}}"#))))
///         .unwrap();
///     let response = service.call(request).await.unwrap();
///     let body = response.into_body().collect().await.unwrap().to_bytes();
///     let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
///     // Each attempt is answered under its own id; the retry from the record.
///     assert_eq!((value["id"].as_i64(), value["result"]["sent"].as_bool()), (Some(id), Some(true)));
/// }
/// assert_eq!(tool.executions(), 1); // the retry was replayed
/// # });
/// # }
/// ```
#[derive(Clone)]
pub struct DedupeLayer {
    shared: Arc<Config>,
}

impl fmt::Debug for DedupeLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DedupeLayer")
            .field("dedup", &self.shared.dedup)
            .field("methods", &self.shared.methods)
            .field("max_request_bytes", &self.shared.max_request_bytes)
            .finish_non_exhaustive()
    }
}

impl DedupeLayer {
    /// A layer deduplicating `tools/call` with `dedup`, principals from the `Authorization`
    /// header ([`AuthorizationPrincipal`]), request bodies up to `DEFAULT_MAX_REQUEST_BYTES`.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # tokio_test::block_on(async {
    /// // In front of the MCP service (`Tool` here: any HTTP service answering MCP POSTs).
    /// let mut service = DedupeLayer::new(Deduplicator::new(MemoryStore::new())).layer(Tool::new("{}"));
    /// let key = RequestKey::random();
    /// assert_eq!(attempt(&mut service, key, "t").await, "execute");
    /// assert_eq!(attempt(&mut service, key, "t").await, "replay"); // answered from the record
    /// # });
    /// # }
    /// ```
    #[must_use]
    pub fn new(dedup: Deduplicator) -> Self {
        Self {
            shared: Arc::new(Config {
                dedup,
                principal: Box::new(AuthorizationPrincipal),
                methods: vec!["tools/call".to_owned()],
                max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            }),
        }
    }

    fn shared_mut(&mut self) -> &mut Config {
        Arc::get_mut(&mut self.shared).expect("configured before it is cloned")
    }

    /// Sets how the caller's principal is found (default [`AuthorizationPrincipal`]).
    ///
    /// # Panics
    ///
    /// If the layer was cloned before (configure it first).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore, Principal};
    /// use mcp_framing::http::DedupeLayer;
    /// let layer = DedupeLayer::new(Deduplicator::new(MemoryStore::new()))
    ///     .principal(|headers: &http::HeaderMap| match headers.get("x-user") {
    ///         Some(user) => Principal::from_id(user.as_bytes()),
    ///         None => Principal::anonymous(),
    ///     });
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn principal(mut self, extractor: impl PrincipalExtractor) -> Self {
        self.shared_mut().principal = Box::new(extractor);
        self
    }

    /// Sets the deduplicated methods (default `["tools/call"]`). Declare the same in the
    /// discovery contract ([`Deduplication`](crate::contract::Deduplication)).
    ///
    /// # Panics
    ///
    /// If the layer was cloned before.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # paused_runtime().block_on(async {
    /// let layer = DedupeLayer::new(Deduplicator::new(MemoryStore::new()))
    ///     .methods(["tools/call", "prompts/get"]);
    /// let mut service = layer.layer(Tool::new("{}"));
    /// let key = RequestKey::random();
    /// let get = || http::Request::post("/mcp").header("mcp-framing-request-key", key.to_string())
    ///     .body(Full::new(Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}"#)))
    ///     .unwrap();
    /// assert_eq!(send(&mut service, get()).await, "execute");
    /// assert_eq!(send(&mut service, get()).await, "replay"); // a keyed prompts/get is deduplicated too
    /// # });
    /// # }
    /// ```
    #[must_use]
    pub fn methods<I, M>(mut self, methods: I) -> Self
    where
        I: IntoIterator<Item = M>,
        M: Into<String>,
    {
        self.shared_mut().methods = methods.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the bound on a request body read to identify a call (default
    /// `DEFAULT_MAX_REQUEST_BYTES`); a larger one is answered `413 Payload Too Large`.
    ///
    /// # Panics
    ///
    /// If the layer was cloned before.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// let layer = mcp_framing::http::DedupeLayer::new(Deduplicator::new(MemoryStore::new()))
    ///     .max_request_bytes(1 << 20);
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn max_request_bytes(mut self, max: usize) -> Self {
        self.shared_mut().max_request_bytes = max;
        self
    }

    /// The deduplicated methods.
    ///
    /// # Examples
    ///
    /// See [`methods`](Self::methods).
    // Hidden: what `FramingLayer::dedupe` declares, read by it and the tests.
    #[doc(hidden)]
    #[must_use]
    pub fn deduplicated_methods(&self) -> &[String] {
        &self.shared.methods
    }

    /// The engine (its counters: [`Deduplicator::stats`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// let layer = mcp_framing::http::DedupeLayer::new(Deduplicator::new(MemoryStore::new()));
    /// assert_eq!(layer.deduplicator().stats().snapshot().executed, 0);
    /// ```
    // Hidden: the engine the caller gave `new`, read back by the tests.
    #[doc(hidden)]
    #[must_use]
    pub fn deduplicator(&self) -> &Deduplicator {
        &self.shared.dedup
    }

    /// The contract member declaring what this layer does (SPEC.md §17.11), for
    /// [`FramingContract::with_deduplication`](crate::contract::FramingContract::with_deduplication).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// let layer = mcp_framing::http::DedupeLayer::new(Deduplicator::new(MemoryStore::new()));
    /// assert_eq!(layer.declaration().window_ms, 24 * 3600 * 1000);
    /// ```
    // Hidden: what `FramingLayer::dedupe` declares in discovery, read by it and the tests.
    #[doc(hidden)]
    #[must_use]
    pub fn declaration(&self) -> crate::contract::Deduplication {
        let mut declaration =
            crate::contract::Deduplication::new(self.shared.dedup.window_duration());
        declaration.methods = self.shared.methods.clone();
        declaration
    }
}

/// [`DedupeLayer::new`]: what [`FramingLayer::dedupe`](crate::rmcp_http::FramingLayer::dedupe)
/// takes.
impl From<Deduplicator> for DedupeLayer {
    fn from(dedup: Deduplicator) -> Self {
        Self::new(dedup)
    }
}

impl<S> tower_layer::Layer<S> for DedupeLayer {
    type Service = DedupeService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DedupeService::new(inner, self.shared.clone())
    }
}
