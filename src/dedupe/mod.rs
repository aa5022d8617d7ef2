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
//! # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
//! # fn main() {
//! # paused_runtime().block_on(async {
//! // One store per process here; a fleet shares a RedisStore.
//! let dedup = Deduplicator::new(MemoryStore::new()).window(Duration::from_secs(600));
//! let layer = DedupeLayer::new(dedup); // or `tower::ServiceBuilder::new().layer(layer)`
//! let mut service = layer.layer(Tool::new(r#"{"sent":true}"#)); // in front of the MCP service
//! let key = RequestKey::random();
//! assert_eq!(attempt(&mut service, key, "send_email").await, "execute");
//! assert_eq!(attempt(&mut service, key, "send_email").await, "replay"); // the retry ran nothing
//! # });
//! # }
//! ```

// What only the HTTP layers, the crate's tests and the fuzz targets use lives in these modules (the
// fuzz targets reach the request reading through `internals::dedupe`, feature `internals`): a user
// mounts `http::DedupeLayer` (or `FramingLayer::dedupe`) rather than driving the engine call by
// call.
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

// The record-format vectors that need no Redis, as unit tests beside the derivations.
#[cfg(test)]
mod vectors;

#[cfg(feature = "redis")]
pub use self::redis::{RedisStore, RedisStoreBuilder};
pub(crate) use deduplicator::{Decision, ExecutionGuard, KeyedCall};
pub use deduplicator::{Deduplicator, StoreFailure};
pub use fingerprint::FingerprintRules;
pub use memory::MemoryStore;
pub(crate) use request_json::{RequestJsonError, parse_request_json};
pub use scope::{AuthorizationPrincipal, Principal, PrincipalExtractor};
pub use store::{DedupeStore, LeaseExpiry, StoreError};
