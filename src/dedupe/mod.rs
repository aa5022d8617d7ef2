//! Request-key deduplication (feature `dedupe`, SPEC.md §17): a keyed call executes at most once
//! per (principal, method and tool, request key) within a window, on whichever backend of a
//! stateless fleet it lands, and every retry gets the first execution's result.
//!
//! Mount it on an HTTP MCP server with [`DedupeLayer`](crate::http::DedupeLayer) (any tower
//! stack) or [`FramingLayer::dedupe`](crate::rmcp_http::FramingLayer::dedupe) (rmcp's
//! streamable HTTP server): the layer identifies each keyed `tools/call`, asks the
//! [`Deduplicator`] whether to run it, records its final response, and answers a retry with the
//! recorded result under the retry's JSON-RPC id.
//!
//! ```text
//!   attempt ──► DedupeLayer ──► Deduplicator ──► store.claim(key, fingerprint, token, lease)
//!                  │
//!                  ├─ no record: run the tool, record its final response
//!                  ├─ completed: answer the stored result under this id
//!                  ├─ refused:   other params (conflict), still running after the wait
//!                  │             (in progress), result too large to store, outcome
//!                  │             unknown, store unreachable (fail closed)
//!                  └─ unprotected: store unreachable and fail-open configured
//! ```
//!
//! Stores: [`MemoryStore`] (embedded, bounded, one process) and `RedisStore` (feature `redis`,
//! Redis or Valkey shared by a fleet); [`DedupeStore`] is the interface for others. The metrics
//! the engine records are listed in [`telemetry`](crate::telemetry).
//!
//! ```
//! use std::time::Duration;
//! use mcp_framing::dedupe::{Deduplicator, MemoryStore};
//! use mcp_framing::http::DedupeLayer;
//! # use bytes::Bytes;
//! # use http_body_util::{BodyExt, Full};
//! # use mcp_framing::RequestKey;
//! # use tower_layer::Layer;
//! # use tower_service::Service;
//! # // The MCP service behind the layer: answers each call with `self.0` as its result; a call of
//! # // the tool `slow` never answers (it is still running), one of `crash` fails without an answer.
//! # #[derive(Clone)]
//! # struct Tool(String);
//! # impl Service<http::Request<Full<Bytes>>> for Tool {
//! #     type Response = http::Response<Full<Bytes>>;
//! #     type Error = std::convert::Infallible;
//! #     type Future = std::pin::Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;
//! #     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
//! #         std::task::Poll::Ready(Ok(()))
//! #     }
//! #     fn call(&mut self, request: http::Request<Full<Bytes>>) -> Self::Future {
//! #         let result = self.0.clone();
//! #         Box::pin(async move {
//! #             let call = request.into_body().collect().await.unwrap().to_bytes();
//! #             let named = |tool: &[u8]| call.windows(tool.len()).any(|w| w == tool);
//! #             if named(br#""name":"slow""#) {
//! #                 std::future::pending::<()>().await;
//! #             }
//! #             if named(br#""name":"crash""#) {
//! #                 return Ok(http::Response::builder().status(500).body(Full::new(Bytes::new())).unwrap());
//! #             }
//! #             let body = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#);
//! #             Ok(http::Response::builder().header("content-type", "application/json")
//! #                 .body(Full::new(Bytes::from(body))).unwrap())
//! #         })
//! #     }
//! # }
//! # // An attempt of a keyed `tools/call` with these `params`, as a client sends it.
//! # #[allow(dead_code)] // not every example calls it
//! # fn request(key: RequestKey, params: serde_json::Value) -> http::Request<Full<Bytes>> {
//! #     let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
//! #     http::Request::post("/mcp").header("mcp-framing-request-key", key.to_string())
//! #         .body(Full::new(Bytes::from(call.to_string()))).unwrap()
//! # }
//! # #[allow(dead_code)] // not every example calls it
//! # fn tools_call(key: RequestKey, tool: &str) -> http::Request<Full<Bytes>> {
//! #     request(key, serde_json::json!({"name": tool, "arguments": {}}))
//! # }
//! # // Sends the attempt, reads the answer to its end and returns what the layer decided
//! # // (its `mcp-framing-dedupe` response header).
//! # #[allow(dead_code)] // not every example calls it
//! # async fn send<S: Service<http::Request<Full<Bytes>>, Response = http::Response<B>>, B: http_body::Body>(
//! #     service: &mut S, request: http::Request<Full<Bytes>>,
//! # ) -> String where S::Error: std::fmt::Debug, B::Error: std::fmt::Debug {
//! #     let response = service.call(request).await.unwrap();
//! #     let decision = response.headers()["mcp-framing-dedupe"].to_str().unwrap().to_owned();
//! #     response.into_body().collect().await.unwrap();
//! #     decision
//! # }
//! # #[allow(dead_code)] // not every example calls it
//! # async fn attempt<S: Service<http::Request<Full<Bytes>>, Response = http::Response<B>>, B: http_body::Body>(
//! #     service: &mut S, key: RequestKey, tool: &str,
//! # ) -> String where S::Error: std::fmt::Debug, B::Error: std::fmt::Debug {
//! #     send(service, tools_call(key, tool)).await
//! # }
//! # let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
//! # runtime.block_on(async {
//! // One store per process here; a fleet shares a RedisStore.
//! let dedup = Deduplicator::new(MemoryStore::new()).window(Duration::from_secs(600));
//! let layer = DedupeLayer::new(dedup); // or `tower::ServiceBuilder::new().layer(layer)`
//! let mut service = layer.layer(Tool(r#"{"sent":true}"#.into())); // in front of the MCP service
//! let key = RequestKey::random();
//! assert_eq!(attempt(&mut service, key, "send_email").await, "execute");
//! assert_eq!(attempt(&mut service, key, "send_email").await, "replay"); // the retry ran nothing
//! # });
//! ```

// What only the HTTP layer, the tests and the fuzz targets use lives in these modules, reached
// through `internals::dedupe` (feature `internals`): a user mounts `http::DedupeLayer` (or
// `FramingLayer::dedupe`) rather than driving the engine call by call.
below_the_api! {
    pub(crate) mod deduplicator;
    pub(crate) mod fingerprint;
    pub(crate) mod memory;
    #[cfg(feature = "redis")]
    pub(crate) mod redis;
    pub(crate) mod refusal;
    pub(crate) mod request_json;
    pub(crate) mod scope;
    pub(crate) mod store;
    pub(crate) mod telemetry;
}

#[cfg(feature = "redis")]
pub use self::redis::{RedisStore, RedisStoreBuilder};
pub(crate) use deduplicator::{Decision, ExecutionGuard, KeyedCall};
pub use deduplicator::{Deduplicator, StoreFailure};
pub use fingerprint::FingerprintRules;
pub use memory::MemoryStore;
pub(crate) use request_json::{RequestJsonError, parse_request_json};
pub use scope::{AuthorizationPrincipal, Principal, PrincipalExtractor};
pub use store::{DedupeStore, LeaseExpiry, StoreError};
