//! [`FramingLayer::dedupe`]: framing and request-key deduplication in one layer (SPEC.md §17.10).

use crate::contract::FramingContract;
use crate::http::{DedupeLayer, DedupeService};

use super::layer::{FramingLayer, FramingService};

impl FramingLayer {
    /// Deduplicates keyed calls (SPEC.md §17) behind the framing: every `tools/call` carrying a
    /// request key executes at most once per (principal, tool, key) within the window, on
    /// whichever backend sharing the store it lands; retries get the stored result, framed
    /// afresh (a new attempt id, the key echoed) under their own JSON-RPC id. Takes a
    /// [`Deduplicator`](crate::dedupe::Deduplicator) (defaults) or a configured [`DedupeLayer`] (principal extractor,
    /// methods). The layer declares it in the discovery results that pass through it, in its
    /// contract's `deduplication` member (the methods it protects, its window and its scope:
    /// SPEC.md §17.11).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::rmcp_http::FramingLayer;
    /// use rmcp::transport::streamable_http_server::{
    ///     StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
    /// };
    /// use tower_layer::Layer;
    /// # #[derive(Clone)] struct MyServer;
    /// # impl rmcp::ServerHandler for MyServer {}
    ///
    /// let dedup = Deduplicator::new(MemoryStore::new()); // RedisStore for a fleet
    /// let service = StreamableHttpService::new(
    ///     || Ok(MyServer),
    ///     Arc::new(NeverSessionManager::default()),
    ///     StreamableHttpServerConfig::default(),
    /// );
    /// let framed = FramingLayer::new().dedupe(dedup).layer(service);
    /// # let _ = framed;
    /// ```
    #[must_use]
    pub fn dedupe(self, dedupe: impl Into<DedupeLayer>) -> DedupingFramingLayer {
        DedupingFramingLayer {
            framing: self,
            dedupe: dedupe.into(),
        }
    }
}

/// [`FramingLayer`] with deduplication inside it ([`FramingLayer::dedupe`]).
///
/// # Examples
///
/// ```
/// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
/// use mcp_framing::http::opt_in_headers;
/// use mcp_framing::rmcp_http::{DedupingFramingLayer, FramingLayer};
/// use mcp_framing::StreamDecoder;
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
/// # fn main() {
/// # tokio_test::block_on(async {
/// let tool = Tool::new("{}"); // an MCP server whose tool counts its executions
/// let layer: DedupingFramingLayer = FramingLayer::new().dedupe(Deduplicator::new(MemoryStore::new()));
/// let mut service = layer.layer(tool.clone());
/// let key = RequestKey::random();
/// for _attempt in 0..2 {
///     let mut request = tools_call(key, "t");
///     *request.headers_mut() = opt_in_headers(key, true); // opted in, keyed
///     let response = service.call(request).await.unwrap();
///     let body = response.into_body().collect().await.unwrap().to_bytes();
///     // Each attempt gets a framed answer under the request's key, the retry's from the record.
///     let stream = StreamDecoder::builder().expect_request_key(key).build().decode_all(&body).unwrap();
///     assert_eq!(stream.messages.len(), 1);
/// }
/// assert_eq!(tool.executions(), 1);
/// # });
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct DedupingFramingLayer {
    framing: FramingLayer,
    dedupe: DedupeLayer,
}

impl DedupingFramingLayer {
    /// The deduplication layer (its engine's counters, its contract declaration).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::rmcp_http::FramingLayer;
    /// let layer = FramingLayer::new().dedupe(Deduplicator::new(MemoryStore::new()));
    /// assert!(layer.dedupe_layer().declaration().covers("tools/call"));
    /// ```
    // Hidden: what the layer holds, read back by the tests.
    #[doc(hidden)]
    #[must_use]
    pub fn dedupe_layer(&self) -> &DedupeLayer {
        &self.dedupe
    }

    /// The framing contract the layer declares ([`FramingLayer::contract`]) with its
    /// deduplication (SPEC.md §17.11).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::rmcp_http::FramingLayer;
    /// let layer = FramingLayer::new().dedupe(Deduplicator::new(MemoryStore::new()));
    /// let deduplication = layer.contract().deduplication.expect("declared");
    /// assert_eq!(deduplication, layer.dedupe_layer().declaration());
    /// ```
    // Hidden: the layer writes it into the `initialize` and `server/discover` results it frames (SPEC.md §11.2), where clients read it; the tests read it back here.
    #[doc(hidden)]
    #[must_use]
    pub fn contract(&self) -> FramingContract {
        self.framing.contract_with(Some(self.dedupe.declaration()))
    }
}

impl<S> tower_layer::Layer<S> for DedupingFramingLayer {
    type Service = FramingService<DedupeService<S>>;

    fn layer(&self, inner: S) -> Self::Service {
        self.framing
            .service(self.dedupe.layer(inner), self.contract())
    }
}
