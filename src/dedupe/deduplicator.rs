//! The engine: claim, wait, replay or refuse, and record the result (SPEC.md §17).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::fingerprint::{Fingerprint, FingerprintRules};
use super::refusal::Refusal;
use super::scope::{Principal, Scope, StoreKey};
use super::store::{
    ClaimOutcome, ClaimRequest, Completed, DedupeStore, FencingToken, LeaseExpiry, StoreError,
    StoredResponse,
};
use super::telemetry::{self, Ended};
use crate::ids::RequestKey;

/// Default retention of a record: 24 hours, as Stripe keeps idempotency keys.
pub(crate) const DEFAULT_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// Default lease of a claim: 30 seconds, renewed every third of it while the call runs, so only
/// a holder that stopped (crashed, hung, cancelled) loses it.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// Default time a duplicate waits for the attempt in flight: 5 seconds, well inside MCP
/// clients' request timeouts (60 s in the TypeScript SDK).
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(5);
/// Default bound on a stored result: 1 MiB of JSON text. Larger results complete normally and
/// are recorded as "completed, not stored".
pub(crate) const DEFAULT_MAX_RESULT_BYTES: usize = 1024 * 1024;
/// Default time allowed for one store operation: 2 seconds.
pub(crate) const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// Longest pause between two looks at a record in flight while waiting for it.
const MAX_POLL_INTERVAL: Duration = Duration::from_millis(200);
/// First pause between two looks.
const FIRST_POLL_INTERVAL: Duration = Duration::from_millis(5);

/// One store operation, bounded by `timeout` (past it the store counts as unavailable), its
/// latency recorded as `operation` (SPEC.md §17.15).
async fn timed<T>(
    operation: &'static str,
    timeout: Duration,
    future: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let started = Instant::now();
    let result = tokio::time::timeout(timeout, future)
        .await
        .unwrap_or(Err(StoreError::Timeout { after: timeout }));
    telemetry::store_operation(operation, started.elapsed(), result.as_ref().map(|_| ()));
    result
}

/// What to do with a keyed call when the store cannot be reached (SPEC.md §17.8).
///
/// # Examples
///
/// ```
/// use mcp_framing::dedupe::{Deduplicator, MemoryStore, StoreFailure};
/// assert_eq!(StoreFailure::default(), StoreFailure::Refuse);
/// let unsafe_dedup = Deduplicator::new(MemoryStore::new()).on_store_failure(StoreFailure::ExecuteUnprotected);
/// # let _ = unsafe_dedup;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreFailure {
    /// Refuse the call (the refusal `store_unavailable`, retryable): fail closed. The default.
    #[default]
    Refuse,
    /// Execute it without protection (the call runs as if no layer deduplicated it). **Unsafe**: while the store is
    /// down, every retry executes again, on every backend; choose it only for tools whose
    /// duplicates are harmless, where availability matters more.
    ExecuteUnprotected,
}

/// One keyed call, identified for deduplication: its scope (principal, method, tool), its request
/// key and the fingerprint of its parameters.
///
/// # Examples
///
/// ```
/// use mcp_framing::RequestKey;
/// use mcp_framing::internals::dedupe::KeyedCall;
/// use mcp_framing::dedupe::{FingerprintRules, Principal};
/// use serde_json::json;
///
/// let key = RequestKey::random();
/// let mut request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
///                          "params": {"name": "send_email", "arguments": {"to": "a@example.com"}}});
/// mcp_framing::request::set_request_key(&mut request, key).unwrap();
/// let call = KeyedCall::from_request(Principal::anonymous(), None, &request, &FingerprintRules::default())?
///     .expect("the request carries a key");
/// assert_eq!(call.request_key(), key);
/// assert_eq!(call.scope().tool(), Some("send_email"));
/// # Ok::<(), mcp_framing::internals::dedupe::KeyedCallError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyedCall {
    scope: Scope,
    request_key: RequestKey,
    fingerprint: Fingerprint,
}

/// Why a request could not be identified for deduplication.
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::dedupe::{KeyedCall, KeyedCallError};
/// use mcp_framing::dedupe::{FingerprintRules, Principal};
/// let err = KeyedCall::from_request(Principal::anonymous(), None, &serde_json::json!([1]),
///                                   &FingerprintRules::default()).unwrap_err();
/// assert_eq!(err, KeyedCallError::NotARequest);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyedCallError {
    /// Not a JSON-RPC request (not an object, or no string `method`).
    #[error("not a JSON-RPC request")]
    NotARequest,
    /// The request key in `params._meta` is malformed.
    #[error("the request key in params._meta is malformed")]
    InvalidKey,
    /// The header's request key and the `_meta` one differ (SPEC.md §16).
    #[error("the request key in params._meta differs from the Mcp-Framing-Request-Key header")]
    KeyMismatch,
}

impl KeyedCall {
    /// A call from its parts.
    #[cfg(test)]
    #[must_use]
    pub(crate) fn new(scope: Scope, request_key: RequestKey, fingerprint: Fingerprint) -> Self {
        Self {
            scope,
            request_key,
            fingerprint,
        }
    }

    /// Identifies a JSON-RPC request: its key from `header_key` (the `Mcp-Framing-Request-Key`
    /// header, if the transport has one) and/or `params._meta` (they must agree), its method and
    /// tool name (`params.name` of a `tools/call`), and its fingerprint under `rules`.
    /// `Ok(None)` when the request carries no key (it is not deduplicated).
    ///
    /// # Errors
    ///
    /// [`KeyedCallError`]: not a request, a malformed `_meta` key, or two keys that differ.
    ///
    /// # Examples
    ///
    /// See [`KeyedCall`].
    pub fn from_request(
        principal: Principal,
        header_key: Option<RequestKey>,
        request: &Value,
        rules: &FingerprintRules,
    ) -> Result<Option<Self>, KeyedCallError> {
        let method = request
            .get("method")
            .and_then(Value::as_str)
            .ok_or(KeyedCallError::NotARequest)?;
        let meta_key =
            crate::request::request_key(request).map_err(|_| KeyedCallError::InvalidKey)?;
        let request_key = match (header_key, meta_key) {
            (Some(header), Some(meta)) if header != meta => {
                return Err(KeyedCallError::KeyMismatch);
            }
            (Some(key), _) | (None, Some(key)) => key,
            (None, None) => return Ok(None),
        };
        let params = request.get("params").unwrap_or(&Value::Null);
        let tool = if method == "tools/call" {
            params.get("name").and_then(Value::as_str)
        } else {
            None
        };
        Ok(Some(Self {
            scope: Scope::new(principal, method, tool),
            request_key,
            fingerprint: rules.fingerprint(params),
        }))
    }

    /// The scope.
    ///
    /// # Examples
    ///
    /// See [`KeyedCall`].
    #[must_use]
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The request key.
    ///
    /// # Examples
    ///
    /// See [`KeyedCall`].
    #[must_use]
    pub fn request_key(&self) -> RequestKey {
        self.request_key
    }

    /// The fingerprint (of `params` under the rules the call was identified with).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{FingerprintRules, Principal};
    /// use mcp_framing::internals::dedupe::KeyedCall;
    /// let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"a": 1}});
    /// let rules = FingerprintRules::default();
    /// let key = mcp_framing::RequestKey::random();
    /// let call = KeyedCall::from_request(Principal::anonymous(), Some(key), &request, &rules)?
    ///     .expect("keyed by the header");
    /// assert_eq!(call.fingerprint(), rules.fingerprint(&request["params"]));
    /// # Ok::<(), mcp_framing::internals::dedupe::KeyedCallError>(())
    /// ```
    #[must_use]
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// The record's key in the store ([`Scope::store_key`]).
    #[must_use]
    pub(crate) fn store_key(&self) -> StoreKey {
        self.scope.store_key(self.request_key)
    }
}

/// What to do with a keyed call ([`Deduplicator::begin`]): the HTTP layers' (the unit tests
/// below show one call's decisions).
#[derive(Debug)]
#[must_use]
// `Execute` is the common decision and is moved once or twice: boxing the guard would cost an
// allocation per call to save a copy of ~250 bytes.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Decision {
    /// Execute the call, then complete the guard (`ExecutionGuard::complete`) with its final
    /// response.
    Execute(ExecutionGuard),
    /// The call completed earlier: answer with this stored member under the attempt's own id;
    /// execute nothing.
    Replay(StoredResponse),
    /// Execute nothing; answer with the refusal's JSON-RPC error.
    Refused(Refusal),
    /// The store could not be reached (logged when it is decided) and
    /// [`StoreFailure::ExecuteUnprotected`] is configured: execute without deduplication.
    Unprotected,
}

impl Decision {
    /// A stable snake_case name for telemetry: `execute`, `replay`, `unprotected`, or the
    /// refusal's wire reason (`in_progress`, `result_not_stored`, `store_unavailable`, ...).
    #[must_use]
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Execute(_) => "execute",
            Self::Replay(_) => "replay",
            Self::Refused(refusal) => refusal.reason(),
            Self::Unprotected => "unprotected",
        }
    }

    /// The `decision` and `reason` labels of the decisions counter (`refused` and the refusal's
    /// reason, or [`name`](Self::name) and nothing).
    fn labels(&self) -> (&'static str, &'static str) {
        match self {
            Self::Refused(refusal) => ("refused", refusal.reason()),
            other => (other.name(), ""),
        }
    }
}

/// Counters of a [`Deduplicator`] (shared by its clones).
///
/// # Examples
///
/// ```
/// let dedup = mcp_framing::dedupe::Deduplicator::new(mcp_framing::dedupe::MemoryStore::new());
/// assert_eq!(dedup.stats().snapshot().executed, 0);
/// ```
#[derive(Debug, Default)]
pub struct DedupeStats {
    executed: AtomicU64,
    replayed: AtomicU64,
    waited: AtomicU64,
    conflicts: AtomicU64,
    in_progress: AtomicU64,
    not_stored: AtomicU64,
    outcome_unknown: AtomicU64,
    store_unavailable: AtomicU64,
    unprotected: AtomicU64,
    completed: AtomicU64,
    lease_lost: AtomicU64,
}

/// A copy of the [`DedupeStats`] counters.
///
/// # Examples
///
/// ```
/// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
/// let stats = Deduplicator::new(MemoryStore::new()).stats();
/// let snapshot = stats.snapshot();
/// assert_eq!(snapshot.executed + snapshot.replayed + snapshot.conflicts, 0); // nothing decided yet
/// assert_eq!(snapshot, stats.snapshot());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DedupeSnapshot {
    /// Claims won: calls executed under a guard.
    pub executed: u64,
    /// Retries answered from a stored result.
    pub replayed: u64,
    /// Decisions that waited for an attempt in flight.
    pub waited: u64,
    /// Refusals: same key, other parameters.
    pub conflicts: u64,
    /// Refusals: still in flight after the wait.
    pub in_progress: u64,
    /// Refusals: completed, result not stored.
    pub not_stored: u64,
    /// Refusals: outcome unknown after an expired lease.
    pub outcome_unknown: u64,
    /// Refusals: store unreachable.
    pub store_unavailable: u64,
    /// Calls executed unprotected (fail-open).
    pub unprotected: u64,
    /// Results recorded.
    pub completed: u64,
    /// Completions rejected because the lease had been taken over.
    pub lease_lost: u64,
}

impl DedupeStats {
    /// The current counts.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// let stats = Deduplicator::new(MemoryStore::new()).stats();
    /// let (before, after) = (stats.snapshot(), stats.snapshot());
    /// assert_eq!(before, after); // a copy: later decisions do not change it
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> DedupeSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DedupeSnapshot {
            executed: get(&self.executed),
            replayed: get(&self.replayed),
            waited: get(&self.waited),
            conflicts: get(&self.conflicts),
            in_progress: get(&self.in_progress),
            not_stored: get(&self.not_stored),
            outcome_unknown: get(&self.outcome_unknown),
            store_unavailable: get(&self.store_unavailable),
            unprotected: get(&self.unprotected),
            completed: get(&self.completed),
            lease_lost: get(&self.lease_lost),
        }
    }

    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn count(&self, decision: &Decision) {
        let counter = match decision {
            Decision::Execute(_) => &self.executed,
            Decision::Replay(_) => &self.replayed,
            Decision::Unprotected => &self.unprotected,
            Decision::Refused(Refusal::Conflict) => &self.conflicts,
            Decision::Refused(Refusal::InProgress { .. }) => &self.in_progress,
            Decision::Refused(Refusal::ResultNotStored { .. }) => &self.not_stored,
            Decision::Refused(Refusal::OutcomeUnknown) => &self.outcome_unknown,
            Decision::Refused(Refusal::StoreUnavailable(_)) => &self.store_unavailable,
            // Not a decision `begin` makes (a server's answer after a lost lease).
            Decision::Refused(Refusal::LeaseLost) => return,
        };
        Self::bump(counter);
    }
}

#[derive(Clone, Copy, Debug)]
struct Config {
    window: Duration,
    lease: Duration,
    wait: Duration,
    max_result_bytes: usize,
    store_timeout: Duration,
    on_store_failure: StoreFailure,
    on_expired_lease: LeaseExpiry,
}

/// The deduplication engine (SPEC.md §17): a keyed call executes at most once per
/// (principal, method and tool, key) within the window, on whichever instance sharing the store
/// it lands.
///
/// Cheap to clone (clones share the store and the counters). Every setter documents its default.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
///
/// let dedup = Deduplicator::new(MemoryStore::new())
///     .window(Duration::from_secs(3600))
///     .lease(Duration::from_secs(10))
///     .wait(Duration::from_secs(2))
///     .max_result_bytes(256 * 1024);
/// # let _ = dedup;
/// ```
#[derive(Clone)]
pub struct Deduplicator {
    store: Arc<dyn DedupeStore>,
    config: Config,
    rules: Arc<FingerprintRules>,
    stats: Arc<DedupeStats>,
}

impl fmt::Debug for Deduplicator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deduplicator")
            .field("store", &self.store)
            .field("config", &self.config)
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

impl Deduplicator {
    /// An engine over `store` with the defaults: `DEFAULT_WINDOW`, `DEFAULT_LEASE`,
    /// `DEFAULT_WAIT`, `DEFAULT_MAX_RESULT_BYTES`, `DEFAULT_STORE_TIMEOUT`, fail closed,
    /// re-execute after an expired lease, `_meta` left out of fingerprints.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # paused_runtime().block_on(async {
    /// // The engine, mounted in front of the MCP service.
    /// let dedup = Deduplicator::new(MemoryStore::new());
    /// let mut service = DedupeLayer::new(dedup).layer(Tool::new(r#"{"sent":true}"#));
    /// let key = RequestKey::random(); // one logical call, its retries carry the same key
    /// assert_eq!(attempt(&mut service, key, "send_email").await, "execute");
    /// assert_eq!(attempt(&mut service, key, "send_email").await, "replay"); // its retry runs nothing
    /// # });
    /// # }
    /// ```
    #[must_use]
    pub fn new(store: impl DedupeStore) -> Self {
        Self::with_shared_store(Arc::new(store))
    }

    /// An engine over a shared store (several engines, or a store kept for inspection).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # paused_runtime().block_on(async {
    /// // Two instances of the server, one store: a retry that lands on the other instance is replayed.
    /// let store = Arc::new(MemoryStore::new());
    /// let mut first = DedupeLayer::new(Deduplicator::with_shared_store(store.clone())).layer(Tool::new("{}"));
    /// let mut second = DedupeLayer::new(Deduplicator::with_shared_store(store)).layer(Tool::new("{}"));
    /// let key = RequestKey::random();
    /// assert_eq!(attempt(&mut first, key, "send_email").await, "execute");
    /// assert_eq!(attempt(&mut second, key, "send_email").await, "replay");
    /// # });
    /// # }
    /// ```
    #[must_use]
    pub fn with_shared_store(store: Arc<dyn DedupeStore>) -> Self {
        Self {
            store,
            config: Config {
                window: DEFAULT_WINDOW,
                lease: DEFAULT_LEASE,
                wait: DEFAULT_WAIT,
                max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
                store_timeout: DEFAULT_STORE_TIMEOUT,
                on_store_failure: StoreFailure::Refuse,
                on_expired_lease: LeaseExpiry::Reexecute,
            },
            rules: Arc::default(),
            stats: Arc::default(),
        }
    }

    /// How long a record is kept after its call completed (default `DEFAULT_WINDOW`, 24 h).
    /// A retry after the window executes again. Published in the discovery contract.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # paused_runtime().block_on(async {
    /// let dedup = Deduplicator::new(MemoryStore::new()).window(Duration::from_secs(60));
    /// let mut service = DedupeLayer::new(dedup).layer(Tool::new("{}"));
    /// let key = RequestKey::random();
    /// assert_eq!(attempt(&mut service, key, "send_email").await, "execute");
    /// assert_eq!(attempt(&mut service, key, "send_email").await, "replay"); // a retry within the window
    /// tokio::time::advance(Duration::from_secs(61)).await;
    /// assert_eq!(attempt(&mut service, key, "send_email").await, "execute"); // after it: a new call
    /// # });
    /// # }
    /// ```
    #[must_use]
    pub fn window(mut self, window: Duration) -> Self {
        self.config.window = window.max(Duration::from_millis(1));
        self
    }

    /// How long a claim stays valid without renewal (default `DEFAULT_LEASE`, 30 s). While the
    /// guard lives, a heartbeat renews it every third of the lease; a holder that dies frees
    /// the key only when it expires (SPEC.md §17.5).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # paused_runtime().block_on(async {
    /// let dedup = Deduplicator::new(MemoryStore::new())
    ///     .lease(Duration::from_secs(6))
    ///     .wait(Duration::ZERO);
    /// let mut service = DedupeLayer::new(dedup).layer(Tool::new("{}"));
    /// let key = RequestKey::random();
    /// // The handler failed without a final response: whether it acted is unknown, the claim stays.
    /// assert_eq!(attempt(&mut service, key, "crash").await, "execute");
    /// assert_eq!(attempt(&mut service, key, "crash").await, "in_progress"); // the lease still holds the key
    /// tokio::time::advance(Duration::from_secs(7)).await;
    /// assert_eq!(attempt(&mut service, key, "crash").await, "execute"); // expired: the key is free again
    /// # });
    /// # }
    /// ```
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease.max(Duration::from_millis(3));
        self
    }

    /// How long a duplicate waits for the attempt in flight before it is refused as "in
    /// progress" (`in_progress`, retryable; default `DEFAULT_WAIT`, 5 s; zero refuses at once,
    /// as SEP-3182 proposed).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # paused_runtime().block_on(async {
    /// let dedup = Deduplicator::new(MemoryStore::new()).wait(Duration::ZERO);
    /// let mut service = DedupeLayer::new(dedup).layer(Tool::new("{}"));
    /// let key = RequestKey::random();
    /// tokio::spawn(service.call(tools_call(key, "slow"))); // the first attempt, still executing
    /// tokio::time::sleep(Duration::from_millis(1)).await;
    /// // A duplicate arriving meanwhile is refused at once (retryable), never executed:
    /// assert_eq!(attempt(&mut service, key, "slow").await, "in_progress");
    /// # });
    /// # }
    /// ```
    #[must_use]
    pub fn wait(mut self, wait: Duration) -> Self {
        self.config.wait = wait;
        self
    }

    /// The largest result (JSON text of the `result` or `error` member) that is stored
    /// (default `DEFAULT_MAX_RESULT_BYTES`, 1 MiB). A larger one is recorded as "completed, not
    /// stored": its retries get the refusal `result_not_stored`, never a second execution.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # paused_runtime().block_on(async {
    /// let dedup = Deduplicator::new(MemoryStore::new()).max_result_bytes(16);
    /// let mut service = DedupeLayer::new(dedup).layer(Tool::new(r#"{"content":["more than sixteen bytes"]}"#));
    /// let key = RequestKey::random();
    /// assert_eq!(attempt(&mut service, key, "render_report").await, "execute");
    /// // Completed but too large to keep: the retry is refused, the tool does not run twice.
    /// assert_eq!(attempt(&mut service, key, "render_report").await, "result_not_stored");
    /// # });
    /// # }
    /// ```
    #[must_use]
    pub fn max_result_bytes(mut self, max: usize) -> Self {
        self.config.max_result_bytes = max;
        self
    }

    /// Time allowed for each store operation (default `DEFAULT_STORE_TIMEOUT`, 2 s); past it
    /// the store counts as unavailable.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// let dedup = Deduplicator::new(MemoryStore::new()).store_timeout(Duration::from_millis(500));
    /// # let _ = dedup;
    /// ```
    #[must_use]
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.config.store_timeout = timeout;
        self
    }

    /// What to do when the store cannot be reached (default [`StoreFailure::Refuse`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore, StoreFailure};
    /// use mcp_framing::http::DedupeLayer;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # paused_runtime().block_on(async {
    /// // A store with room for one record, taken by a call in flight: the next claim finds it full.
    /// let strict = Deduplicator::new(MemoryStore::new().max_entries(1));
    /// let mut service = DedupeLayer::new(strict).layer(Tool::new("{}"));
    /// tokio::spawn(service.call(tools_call(RequestKey::random(), "slow")));
    /// tokio::time::sleep(Duration::from_millis(1)).await;
    /// assert_eq!(attempt(&mut service, RequestKey::random(), "send_email").await, "store_unavailable"); // the default: refuse
    ///
    /// let open = Deduplicator::new(MemoryStore::new().max_entries(1))
    ///     .on_store_failure(StoreFailure::ExecuteUnprotected);
    /// let mut service = DedupeLayer::new(open).layer(Tool::new("{}"));
    /// tokio::spawn(service.call(tools_call(RequestKey::random(), "slow")));
    /// tokio::time::sleep(Duration::from_millis(1)).await;
    /// assert_eq!(attempt(&mut service, RequestKey::random(), "send_email").await, "unprotected"); // runs, without protection
    /// # });
    /// # }
    /// ```
    #[must_use]
    pub fn on_store_failure(mut self, policy: StoreFailure) -> Self {
        self.config.on_store_failure = policy;
        self
    }

    /// What a claim whose lease expired becomes (default [`LeaseExpiry::Reexecute`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, LeaseExpiry, MemoryStore};
    /// let at_most_once = Deduplicator::new(MemoryStore::new()).on_expired_lease(LeaseExpiry::Refuse);
    /// # let _ = at_most_once;
    /// ```
    #[must_use]
    pub fn on_expired_lease(mut self, policy: LeaseExpiry) -> Self {
        self.config.on_expired_lease = policy;
        self
    }

    /// Which `params._meta` entries fingerprints cover (default: none).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, FingerprintRules, MemoryStore};
    /// let dedup = Deduplicator::new(MemoryStore::new())
    ///     .fingerprint_rules(FingerprintRules::default().include_meta(["com.example/tenant"]));
    /// # let _ = dedup;
    /// ```
    #[must_use]
    pub fn fingerprint_rules(mut self, rules: FingerprintRules) -> Self {
        self.rules = Arc::new(rules);
        self
    }

    /// The fingerprint rules in force.
    #[must_use]
    pub(crate) fn rules(&self) -> &FingerprintRules {
        &self.rules
    }

    /// The retention window in force.
    #[must_use]
    pub(crate) fn window_duration(&self) -> Duration {
        self.config.window
    }

    /// The counters (shared by clones).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// let dedup = Deduplicator::new(MemoryStore::new());
    /// let stats = dedup.stats(); // a handle to read while the layer owns the engine
    /// let layer = DedupeLayer::new(dedup);
    /// assert_eq!(stats.snapshot(), layer.deduplicator().stats().snapshot());
    /// ```
    // Hidden: the metrics (`telemetry`, `mcp_framing.dedupe.*`) are the one way to watch the engine;
    // these counters are the tests', the fuzz oracle's and the benches' view (read through this
    // accessor; the types have no path).
    #[doc(hidden)]
    #[must_use]
    pub fn stats(&self) -> Arc<DedupeStats> {
        self.stats.clone()
    }

    /// Decides what to do with one attempt of `call` (SPEC.md §17.4–§17.8): claim the key and
    /// [`Decision::Execute`]; or, if the key is known, [`Decision::Replay`] its stored result,
    /// refuse a conflict, wait (bounded) for an attempt in flight; or refuse when the store is
    /// unreachable.
    ///
    /// Needs a tokio runtime (the wait sleeps, and the guard's heartbeat is a task).
    ///
    // The HTTP layers' entry (a user mounts `http::DedupeLayer`); the unit tests drive it too.
    pub(crate) async fn begin(&self, call: &KeyedCall) -> Decision {
        let key = call.store_key();
        let request = ClaimRequest {
            fingerprint: call.fingerprint,
            token: FencingToken::random(),
            lease: self.config.lease,
            retention: self.config.window,
            on_expired_lease: self.config.on_expired_lease,
        };
        let started = Instant::now();
        let deadline = started + self.config.wait;
        let mut pause = FIRST_POLL_INTERVAL;
        let mut waited = false;
        let decision = loop {
            let claim = self.store.claim(&key, &request);
            let outcome = match timed("claim", self.config.store_timeout, claim).await {
                Ok(outcome) => outcome,
                Err(err) => break self.store_failed(err),
            };
            match outcome {
                ClaimOutcome::Claimed { generation } => {
                    break Decision::Execute(ExecutionGuard::start(
                        self, call, key, &request, generation, started,
                    ));
                }
                ClaimOutcome::Conflict { .. } => break Decision::Refused(Refusal::Conflict),
                ClaimOutcome::Completed(Completed::Stored(stored)) => {
                    break Decision::Replay(stored);
                }
                ClaimOutcome::Completed(Completed::NotStored { size }) => {
                    break Decision::Refused(Refusal::ResultNotStored { size });
                }
                ClaimOutcome::Abandoned => break Decision::Refused(Refusal::OutcomeUnknown),
                ClaimOutcome::InFlight { lease_remaining } => {
                    if !waited {
                        waited = true;
                        DedupeStats::bump(&self.stats.waited);
                    }
                    let now = Instant::now();
                    if now >= deadline {
                        break Decision::Refused(Refusal::InProgress {
                            waited: now - started,
                            retry_after: lease_remaining.min(Duration::from_secs(1)),
                        });
                    }
                    // Poll with exponential backoff, never past the wait's end, and look again
                    // as soon as the other lease could have expired.
                    let nap = pause
                        .min(deadline - now)
                        .min(lease_remaining + Duration::from_millis(1));
                    tokio::time::sleep(nap).await;
                    pause = (pause * 2).min(MAX_POLL_INTERVAL);
                }
                // A store implementing a newer outcome: fail closed.
                #[allow(unreachable_patterns)] // `ClaimOutcome` is non_exhaustive
                _ => {
                    break self.store_failed(StoreError::Corrupt {
                        reason: "unknown claim outcome".to_owned(),
                    });
                }
            }
        };
        let elapsed = started.elapsed();
        self.stats.count(&decision);
        telemetry::decision(
            decision.labels(),
            decision.name(),
            call.scope.method(),
            waited.then_some(elapsed),
        );
        match &decision {
            Decision::Replay(stored) => {
                telemetry::operation(call.scope.method(), "replay", elapsed, ended(stored))
            }
            Decision::Refused(refusal) => telemetry::operation(
                call.scope.method(),
                "refused",
                elapsed,
                Ended::JsonRpcError(refusal.code()),
            ),
            Decision::Execute(_) | Decision::Unprotected => {}
        }
        tracing::event!(
            target: "mcp_framing::dedupe",
            tracing::Level::DEBUG,
            decision = decision.name(),
            request_key = %call.request_key.fingerprint(),
            method = call.scope.method(),
            tool = call.scope.tool().unwrap_or(""),
            waited_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            "deduplication decision"
        );
        decision
    }

    fn store_failed(&self, err: StoreError) -> Decision {
        tracing::event!(
            target: "mcp_framing::dedupe",
            tracing::Level::WARN,
            error = %err,
            policy = ?self.config.on_store_failure,
            "deduplication store unavailable"
        );
        match self.config.on_store_failure {
            StoreFailure::ExecuteUnprotected => Decision::Unprotected,
            _ => Decision::Refused(Refusal::StoreUnavailable(err)),
        }
    }
}

/// How a stored response ends an operation, for `mcp.server.operation.duration`.
fn ended(stored: &StoredResponse) -> Ended {
    #[derive(serde::Deserialize)]
    struct Code {
        code: Option<i64>,
    }
    #[derive(serde::Deserialize)]
    struct ToolResult {
        #[serde(rename = "isError")]
        is_error: Option<bool>,
    }
    match stored {
        StoredResponse::Error(json) => match serde_json::from_slice::<Code>(json) {
            Ok(Code { code: Some(code) }) => Ended::JsonRpcError(code),
            _ => Ended::Other("invalid_error"),
        },
        StoredResponse::Result(json) => match serde_json::from_slice::<ToolResult>(json) {
            Ok(ToolResult {
                is_error: Some(true),
            }) => Ended::ToolError,
            _ => Ended::Ok,
        },
    }
}

/// What [`ExecutionGuard::complete`] recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum Recorded {
    /// The result is stored and will be replayed.
    Stored {
        /// Bytes of JSON text stored.
        bytes: usize,
    },
    /// The call is recorded as completed, without its result (over the bound).
    NotStored {
        /// Bytes of the result that was not stored.
        size: u64,
    },
}

/// Why a result could not be recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CompleteError {
    /// The bytes are not a final JSON-RPC response (no `result` or `error` member). The claim
    /// stays until its lease expires, as for a holder that stopped.
    #[error("not a final JSON-RPC response (no result or error member)")]
    NotAFinalResponse,
    /// Another attempt took the key over (this one outlived its lease): nothing was recorded.
    #[error("the lease was taken over by another attempt before the result was recorded")]
    LeaseLost,
    /// The store failed: nothing was recorded, the claim stays until its lease expires.
    #[error("recording the result failed: {0}")]
    Store(#[from] StoreError),
}

/// The right to execute one keyed call, held while it runs (from [`Decision::Execute`]).
///
/// A heartbeat task renews the lease every third of it while the guard lives. Complete the guard
/// with the call's final response ([`complete`](Self::complete)); or
/// [`release`](Self::release) it if nothing was executed. **Dropping it** (a crash, a cancelled
/// handler, a response that never came) stops the heartbeat and leaves the claim to expire: the
/// key is free again only after the lease (SPEC.md §17.5).
pub(crate) struct ExecutionGuard {
    store: Arc<dyn DedupeStore>,
    stats: Arc<DedupeStats>,
    key: StoreKey,
    token: FencingToken,
    generation: u64,
    config: Config,
    method: String,
    /// When the decision began (for `mcp.server.operation.duration`).
    started: Instant,
    /// When the claim was granted.
    claimed: Instant,
    /// Milliseconds after `claimed` of the last renewal the store accepted: the lease holds
    /// until then plus the lease.
    renewed_ms: Arc<AtomicU64>,
    // What the heartbeat found, read by the tests (`lease_lost`); outside them the completion
    // finds a lost lease itself (the store refuses the token) and it is counted in telemetry.
    #[cfg_attr(not(test), allow(dead_code))]
    lease_lost: Arc<AtomicBool>,
    heartbeat: Option<tokio::task::JoinHandle<()>>,
    /// Whether the guard was completed or released (else dropping it ends the operation
    /// without a final response).
    finished: bool,
}

impl fmt::Debug for ExecutionGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecutionGuard")
            .field("key", &self.key)
            .field("token", &self.token)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Drop for ExecutionGuard {
    fn drop(&mut self) {
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.abort();
        }
        if !self.finished {
            telemetry::operation(
                &self.method,
                "execute",
                self.started.elapsed(),
                Ended::Other("no_final_response"),
            );
        }
    }
}

/// First pause before a completion is tried again after the store failed.
const FIRST_COMPLETION_RETRY: Duration = Duration::from_millis(20);
/// Longest pause between two tries of a completion.
const MAX_COMPLETION_RETRY: Duration = Duration::from_millis(500);

impl ExecutionGuard {
    fn start(
        dedup: &Deduplicator,
        call: &KeyedCall,
        key: StoreKey,
        claim: &ClaimRequest,
        generation: u64,
        started: Instant,
    ) -> Self {
        let claimed = Instant::now();
        let lease_lost = Arc::new(AtomicBool::new(false));
        let renewed_ms = Arc::new(AtomicU64::new(0));
        let heartbeat = tokio::runtime::Handle::try_current().ok().map(|runtime| {
            let store = dedup.store.clone();
            let (token, lease, timeout) = (claim.token, claim.lease, dedup.config.store_timeout);
            let (lost, renewed) = (lease_lost.clone(), renewed_ms.clone());
            runtime.spawn(async move {
                let every = lease / 3;
                loop {
                    tokio::time::sleep(every).await;
                    let asked = Instant::now();
                    match timed("renew", timeout, store.renew(&key, token, lease)).await {
                        Ok(true) => {
                            let at = u64::try_from((asked - claimed).as_millis());
                            renewed.store(at.unwrap_or(u64::MAX), Ordering::Relaxed);
                        }
                        Ok(false) => {
                            lost.store(true, Ordering::Relaxed);
                            telemetry::lease_lost("heartbeat");
                            tracing::event!(target: "mcp_framing::dedupe", tracing::Level::WARN,
                                store_key = %key, "lease lost while the call runs");
                            return;
                        }
                        // The store is unreachable: keep trying while the lease may still hold.
                        Err(_) => {}
                    }
                }
            })
        });
        Self {
            store: dedup.store.clone(),
            stats: dedup.stats.clone(),
            key,
            token: claim.token,
            generation,
            config: dedup.config,
            method: call.scope.method().to_owned(),
            started,
            claimed,
            renewed_ms,
            lease_lost,
            heartbeat,
            finished: false,
        }
    }

    /// Until when the lease holds, as far as this holder knows (its last accepted renewal plus
    /// the lease; the store's clock decides, this one errs early by the round trip).
    fn lease_deadline(&self) -> Instant {
        let renewed = Duration::from_millis(self.renewed_ms.load(Ordering::Relaxed));
        self.claimed + renewed + self.config.lease
    }

    /// Which claim on the record this is: 1 for the first, 2 or more after expired leases
    /// were taken over (a re-execution after a holder stopped).
    #[cfg(test)]
    #[must_use]
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The fencing token of this claim.
    #[cfg(test)]
    #[must_use]
    pub(crate) fn token(&self) -> FencingToken {
        self.token
    }

    /// The record's store key.
    #[must_use]
    pub(crate) fn store_key(&self) -> StoreKey {
        self.key
    }

    /// Whether the heartbeat found the lease taken over by another attempt.
    #[cfg(test)]
    #[must_use]
    pub(crate) fn lease_lost(&self) -> bool {
        self.lease_lost.load(Ordering::Relaxed)
    }

    /// Records the call's final JSON-RPC response (the whole message as sent; its `result` or
    /// `error` member is what is stored, not its `id`). A member over the bound is recorded as
    /// "completed, not stored".
    ///
    /// # Errors
    ///
    /// [`CompleteError::NotAFinalResponse`] if the bytes are not a JSON object with a `result`
    /// or `error` member; [`CompleteError::LeaseLost`] if another attempt took the key over;
    /// [`CompleteError::Store`] if the store failed. In every case the claim is left to expire.
    pub(crate) async fn complete(self, response: &[u8]) -> Result<Recorded, CompleteError> {
        #[derive(serde::Deserialize)]
        struct Final<'a> {
            #[serde(borrow)]
            result: Option<&'a RawValue>,
            #[serde(borrow)]
            error: Option<&'a RawValue>,
        }
        let parsed: Final<'_> =
            serde_json::from_slice(response).map_err(|_| CompleteError::NotAFinalResponse)?;
        let stored = match (parsed.result, parsed.error) {
            (Some(result), None) => StoredResponse::Result(result.get().to_owned().into()),
            (None, Some(error)) => StoredResponse::Error(error.get().to_owned().into()),
            _ => return Err(CompleteError::NotAFinalResponse),
        };
        self.complete_with(stored).await
    }

    /// Records a final response member directly (for a server that has it apart from the
    /// message).
    ///
    /// # Errors
    ///
    /// As [`complete`](Self::complete), except `NotAFinalResponse`.
    pub(crate) async fn complete_with(self, stored: StoredResponse) -> Result<Recorded, CompleteError> {
        let (completed, recorded) = if stored.len() > self.config.max_result_bytes {
            let size = stored.len() as u64;
            (Completed::NotStored { size }, Recorded::NotStored { size })
        } else {
            let bytes = stored.len();
            (Completed::Stored(stored), Recorded::Stored { bytes })
        };
        self.record(completed, recorded).await
    }

    /// Records `completed`. A store that fails is tried again (backoff from 20 ms to 500 ms)
    /// while the lease holds: until then no other attempt can take the key over, and the
    /// completion is idempotent for its token, so a try whose answer was lost does no harm.
    async fn record(
        mut self,
        completed: Completed,
        recorded: Recorded,
    ) -> Result<Recorded, CompleteError> {
        let mut pause = FIRST_COMPLETION_RETRY;
        let result = loop {
            let complete =
                self.store
                    .complete(&self.key, self.token, &completed, self.config.window);
            match timed("complete", self.config.store_timeout, complete).await {
                Err(err) if retry_completion(&err) => {
                    let now = Instant::now();
                    let deadline = self.lease_deadline();
                    if now + pause >= deadline {
                        break Err(err);
                    }
                    tracing::event!(target: "mcp_framing::dedupe", tracing::Level::WARN,
                        store_key = %self.key, error = %err, "recording the result failed; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_COMPLETION_RETRY);
                }
                other => break other,
            }
        };
        self.finished = true;
        let ended = match &completed {
            Completed::Stored(stored) => ended(stored),
            Completed::NotStored { .. } => Ended::Ok,
        };
        telemetry::operation(&self.method, "execute", self.started.elapsed(), ended);
        match result {
            Ok(true) => {
                DedupeStats::bump(&self.stats.completed);
                telemetry::completion(match recorded {
                    Recorded::Stored { .. } => "stored",
                    Recorded::NotStored { .. } => "not_stored",
                });
                Ok(recorded)
            }
            Ok(false) => {
                DedupeStats::bump(&self.stats.lease_lost);
                telemetry::completion("lease_lost");
                telemetry::lease_lost("completion");
                tracing::event!(target: "mcp_framing::dedupe", tracing::Level::ERROR,
                    store_key = %self.key, generation = self.generation,
                    "result not recorded: the lease was taken over (the call may have executed twice)");
                Err(CompleteError::LeaseLost)
            }
            Err(err) => {
                telemetry::completion("store_error");
                Err(CompleteError::Store(err))
            }
        }
    }

    /// Records the call as completed without its result (it was too large even to read back):
    /// retries get the refusal `result_not_stored`, never a second execution.
    ///
    /// # Errors
    ///
    /// As [`complete_with`](Self::complete_with).
    pub(crate) async fn complete_not_stored(self, size: u64) -> Result<Recorded, CompleteError> {
        self.record(Completed::NotStored { size }, Recorded::NotStored { size })
            .await
    }

    /// Gives the key back: **only** when nothing was executed (e.g. the request was rejected
    /// before the tool ran), so that a retry may execute at once.
    ///
    /// # Errors
    ///
    /// [`CompleteError::LeaseLost`] if the claim is no longer this guard's;
    /// [`CompleteError::Store`] if the store failed (the claim then expires with its lease).
    pub(crate) async fn release(mut self) -> Result<(), CompleteError> {
        self.finished = true;
        telemetry::operation(
            &self.method,
            "execute",
            self.started.elapsed(),
            Ended::Other("released"),
        );
        let release = self.store.release(&self.key, self.token);
        let released = timed("release", self.config.store_timeout, release).await?;
        if released {
            Ok(())
        } else {
            Err(CompleteError::LeaseLost)
        }
    }
}

/// Whether a completion that failed with `err` may be tried again: when the store could not be
/// reached (or did not answer). Not when the write reached the store and only its replication
/// fell short: trying again cannot make it more durable.
fn retry_completion(err: &StoreError) -> bool {
    match err {
        StoreError::Timeout { .. } => true,
        #[cfg(feature = "redis")]
        StoreError::Redis(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{CompleteError, Decision, Deduplicator, KeyedCall, Recorded};
    use crate::dedupe::fingerprint::Fingerprint;
    use crate::dedupe::scope::Scope;
    use crate::dedupe::store::StoredResponse;
    use crate::dedupe::{MemoryStore, Principal};
    use crate::ids::RequestKey;

    fn new_call() -> KeyedCall {
        let scope = Scope::new(Principal::anonymous(), "tools/call", Some("t"));
        KeyedCall::new(scope, RequestKey::random(), Fingerprint::from_bytes([1; 32]))
    }

    /// An engine over a memory store, a new call, and the guard of its first attempt.
    async fn first_attempt() -> (Deduplicator, KeyedCall, super::ExecutionGuard) {
        let dedup = Deduplicator::new(MemoryStore::new());
        let call = new_call();
        let Decision::Execute(guard) = dedup.begin(&call).await else {
            panic!("a new key executes")
        };
        (dedup, call, guard)
    }

    #[test]
    fn a_call_from_its_parts_keeps_them_and_its_store_key_is_its_scopes() {
        let scope = Scope::new(Principal::anonymous(), "tools/call", Some("t"));
        let key = RequestKey::random();
        let call = KeyedCall::new(scope.clone(), key, Fingerprint::from_bytes([3; 32]));
        assert_eq!(call.scope().method(), "tools/call");
        assert_eq!(call.fingerprint(), Fingerprint::from_bytes([3; 32]));
        assert_eq!(call.store_key(), scope.store_key(key));
    }

    #[tokio::test]
    async fn a_completed_call_is_replayed_to_a_retry_under_the_retrys_own_id() {
        let (dedup, call, guard) = first_attempt().await;
        guard
            .complete(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#)
            .await
            .unwrap();
        let Decision::Replay(stored) = dedup.begin(&call).await else {
            panic!("a retry")
        };
        assert_eq!(
            stored.to_response(&2.into()),
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[]}}"#
        );
    }

    #[tokio::test]
    async fn the_same_key_with_other_parameters_is_named_a_key_conflict() {
        let dedup = Deduplicator::new(MemoryStore::new());
        let scope = Scope::new(Principal::anonymous(), "tools/call", Some("t"));
        let key = RequestKey::random();
        let first = KeyedCall::new(scope.clone(), key, Fingerprint::from_bytes([1; 32]));
        let Decision::Execute(_guard) = dedup.begin(&first).await else {
            panic!("first attempt")
        };
        let other = KeyedCall::new(scope, key, Fingerprint::from_bytes([2; 32]));
        assert_eq!(dedup.begin(&other).await.name(), "key_conflict");
    }

    #[tokio::test]
    async fn a_released_key_executes_again_at_once() {
        let (dedup, call, guard) = first_attempt().await;
        guard.release().await.unwrap();
        assert!(matches!(dedup.begin(&call).await, Decision::Execute(_)));
    }

    #[tokio::test]
    async fn a_member_over_the_bound_is_recorded_completed_without_its_result() {
        let dedup = Deduplicator::new(MemoryStore::new()).max_result_bytes(4);
        let call = new_call();
        let Decision::Execute(guard) = dedup.begin(&call).await else {
            panic!("a new key executes")
        };
        let recorded = guard
            .complete_with(StoredResponse::Result("[1,2,3]".into()))
            .await
            .unwrap();
        assert_eq!(recorded, Recorded::NotStored { size: 7 });
        let Decision::Refused(refusal) = dedup.begin(&call).await else {
            panic!("a retry is refused")
        };
        assert_eq!(refusal.reason(), "result_not_stored");
    }

    #[tokio::test]
    async fn a_call_completed_not_stored_says_the_size_it_did_not_keep() {
        let dedup = Deduplicator::new(MemoryStore::new());
        let Decision::Execute(guard) = dedup.begin(&new_call()).await else {
            panic!("a new key executes")
        };
        assert_eq!(
            guard.complete_not_stored(1 << 30).await.unwrap(),
            Recorded::NotStored { size: 1 << 30 }
        );
        assert_ne!(
            Recorded::Stored { bytes: 2 },
            Recorded::NotStored { size: 2 }
        );
    }

    #[test]
    fn a_lost_lease_says_the_result_was_not_recorded() {
        assert_eq!(
            CompleteError::LeaseLost.to_string(),
            "the lease was taken over by another attempt before the result was recorded"
        );
    }
}
