//! Request-key deduplication (feature `dedupe`, SPEC.md §17): a keyed call executes at most once
//! per (principal, method and tool, request key) within a window, on whichever backend of a
//! stateless fleet it lands, and every retry gets the first execution's result.
//!
//! The engine knows nothing of rmcp or of any HTTP framework: it takes a [`KeyedCall`] (who
//! calls, what, with which key and parameters) and answers a [`Decision`]:
//!
//! ```text
//!   attempt ──► Deduplicator::begin ──► store.claim(key, fingerprint, token, lease)
//!                  │
//!                  ├─ Execute(guard)  no record: run the tool, guard.complete(final response)
//!                  ├─ Replay(stored)  completed: answer the stored result under this id
//!                  ├─ Refused(..)     other params (conflict), still running after the wait
//!                  │                  (in progress), result too large to store, outcome
//!                  │                  unknown, store unreachable (fail closed)
//!                  └─ Unprotected     store unreachable and fail-open configured
//! ```
//!
//! Stores: [`MemoryStore`] (embedded, bounded, one process) and `RedisStore` (feature `redis`,
//! Redis or Valkey shared by a fleet); [`DedupeStore`] is the interface for others.
//!
//! ```
//! use mcp_framing::RequestKey;
//! use mcp_framing::dedupe::{Decision, Deduplicator, KeyedCall, MemoryStore, Principal};
//! use serde_json::json;
//!
//! # tokio_test::block_on(async {
//! let dedup = Deduplicator::new(MemoryStore::new());
//! let key = RequestKey::random();
//! let attempt = |id: u64, to: &str| {
//!     let mut request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
//!         "params": {"name": "send_email", "arguments": {"to": to},
//!                    "_meta": {"progressToken": id}}});
//!     mcp_framing::request::set_request_key(&mut request, key).unwrap();
//!     KeyedCall::from_request(Principal::from_id("alice"), Some(key), &request, dedup.rules())
//!         .unwrap().unwrap()
//! };
//!
//! // First attempt: executes; its final response is recorded.
//! let Decision::Execute(guard) = dedup.begin(&attempt(1, "bob@example.com")).await else { panic!() };
//! guard.complete(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"sent"}]}}"#).await?;
//!
//! // The retry (new JSON-RPC id, new progress token, same key): replayed, not executed.
//! let Decision::Replay(stored) = dedup.begin(&attempt(2, "bob@example.com")).await else { panic!() };
//! assert!(stored.to_response(&2.into()).starts_with(r#"{"jsonrpc":"2.0","id":2,"result""#));
//!
//! // The same key with other arguments: a conflict, final.
//! let Decision::Refused(refusal) = dedup.begin(&attempt(3, "eve@example.com")).await else { panic!() };
//! assert_eq!((refusal.reason(), refusal.is_retryable()), ("key_conflict", false));
//! assert_eq!(dedup.stats().snapshot().executed, 1);
//! # Ok::<(), mcp_framing::dedupe::CompleteError>(())
//! # }).unwrap();
//! ```

mod deduplicator;
mod fingerprint;
mod memory;
#[cfg(feature = "redis")]
mod redis;
mod refusal;
mod request_json;
mod scope;
mod store;
pub mod telemetry;

pub use deduplicator::{
    CompleteError, DEFAULT_LEASE, DEFAULT_MAX_RESULT_BYTES, DEFAULT_STORE_TIMEOUT, DEFAULT_WAIT,
    DEFAULT_WINDOW, Decision, DedupeSnapshot, DedupeStats, Deduplicator, ExecutionGuard, KeyedCall,
    KeyedCallError, Recorded, StoreFailure,
};
pub use fingerprint::{Fingerprint, FingerprintRules, canonical_json};
pub use memory::{DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES, MemoryStore, RECORD_OVERHEAD};
#[cfg(feature = "redis")]
pub use redis::{DEFAULT_PREFIX, RedisStore, RedisStoreBuilder};
pub use refusal::{
    CODE_CONFLICT, CODE_IN_PROGRESS, CODE_LEASE_LOST, CODE_OUTCOME_UNKNOWN, CODE_RESULT_NOT_STORED,
    CODE_STORE_UNAVAILABLE, Refusal,
};
pub use request_json::{MAX_JSON_DEPTH, RequestJsonError, parse_request_json};
pub use scope::{AuthorizationPrincipal, Principal, PrincipalExtractor, Scope, StoreKey};
pub use store::{
    ClaimOutcome, ClaimRequest, Completed, DedupeStore, FencingToken, LeaseExpiry, StoreError,
    StoreFuture, StoredResponse,
};
