//! The client that retries a cut, keyed request by itself (SPEC.md §17.13).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::Value;

use super::resolver::EndpointResolver;
use super::schedule::RetrySchedule;
use crate::contract::{ClientPolicy, ContractError};
use crate::decoder::StreamDecoder;
use crate::http::{Delivery, Mapping, VerifiedResponse, opt_in_headers_with};
use crate::ids::RequestKey;
use crate::outcome::Outcome;
use crate::retry::{RequestTraits, RetryDecision, RetryPolicy, RetryReason};
use crate::telemetry::{self, AttemptContext};

/// Methods treated as idempotent (retried even without deduplication): MCP's reads and lists.
pub const IDEMPOTENT_METHODS: &[&str] = &[
    "ping",
    "server/discover",
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
];

/// Counters of a [`RetryingClient`] (shared by its clones).
///
/// # Examples
///
/// ```
/// # use mcp_framing::client::*;
/// let client = RetryingClient::new(reqwest::Client::new(),
///     DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"]));
/// assert_eq!(client.stats().snapshot().attempts, 0);
/// ```
#[derive(Debug, Default)]
pub struct RetryStats {
    calls: AtomicU64,
    attempts: AtomicU64,
    retries: AtomicU64,
    refusals_retried: AtomicU64,
    gave_up: AtomicU64,
}

/// A copy of the [`RetryStats`] counters.
///
/// # Examples
///
/// See [`RetryStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetrySnapshot {
    /// Logical calls started.
    pub calls: u64,
    /// Attempts sent (the first ones and the retries).
    pub attempts: u64,
    /// Retries sent.
    pub retries: u64,
    /// Retries after a retryable deduplication refusal (`in_progress`, `store_unavailable`).
    pub refusals_retried: u64,
    /// Calls that ended in an error after their last attempt.
    pub gave_up: u64,
}

impl RetryStats {
    /// The current counts.
    ///
    /// # Examples
    ///
    /// See [`RetryStats`].
    #[must_use]
    pub fn snapshot(&self) -> RetrySnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RetrySnapshot {
            calls: get(&self.calls),
            attempts: get(&self.attempts),
            retries: get(&self.retries),
            refusals_retried: get(&self.refusals_retried),
            gave_up: get(&self.gave_up),
        }
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Why a call ended without a final response.
///
/// # Examples
///
/// ```
/// use mcp_framing::client::CallError;
/// let err = CallError::NotARequest;
/// assert_eq!(err.to_string(), "not a JSON-RPC request (no method or no id)");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The value sent is not a JSON-RPC request with an id.
    #[error("not a JSON-RPC request (no method or no id)")]
    NotARequest,
    /// The request key could not be written.
    #[error("request key: {0}")]
    RequestKey(#[from] crate::request::RequestKeyError),
    /// The endpoint could not be resolved.
    #[error(transparent)]
    Resolve(#[from] super::resolver::ResolveError),
    /// The resolution's contract: Regime C (no framing contract) when the policy is first
    /// built, or a downgrade on a later resolution (SPEC.md §11.5): fail closed.
    #[error("contract: {0}")]
    Contract(#[from] ContractError),
    /// The last attempt did not complete, and was not retried (the decision says why).
    #[error("attempt {attempts}: response {}, {decision}", outcome.verdict)]
    Incomplete {
        /// The last attempt's classification.
        outcome: Box<Outcome>,
        /// The retry decision taken on it.
        decision: RetryDecision,
        /// Attempts made.
        attempts: u32,
    },
    /// The server answered an HTTP error status (4xx: final).
    #[error("attempt {attempts}: HTTP {status}")]
    Status {
        /// The status.
        status: StatusCode,
        /// Attempts made.
        attempts: u32,
    },
}

impl CallError {
    /// The JSON-RPC error response under `id` that a caller (rmcp) gets for it, with
    /// `data[OUTCOME_DATA_KEY]` holding the classification, the retry decision and the attempts.
    #[cfg_attr(not(feature = "rmcp"), allow(dead_code))] // used by rmcp_http's auto_retry
    pub(crate) fn to_error_response(&self, id: &Value, key: RequestKey) -> String {
        let mut data = serde_json::json!({
            "detail": self.to_string(),
            "requestKey": key.to_string(),
        });
        if let Self::Incomplete {
            outcome,
            decision,
            attempts,
        } = self
        {
            data["classification"] = outcome.verdict.name().into();
            data["regime"] = format!("{:?}", outcome.regime).into();
            data["retryDecision"] = decision.name().into();
            data["retryReason"] = decision.reason().to_string().into();
            data["attempts"] = (*attempts).into();
            data["bytesReceived"] = outcome.received.bytes.into();
        }
        serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32603, "message": format!("mcp-framing: {self}"),
            "data": {crate::client::OUTCOME_DATA_KEY: data}}})
        .to_string()
    }
}

/// A verified call: the final response (under the caller's original id), the notifications
/// verified on the way, and how many attempts it took.
///
/// # Examples
///
/// See [`RetryingClient`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CallOutcome {
    /// The final JSON-RPC response (a result, or a JSON-RPC error: a final refusal included).
    pub response: Value,
    /// The notifications verified before it, from every attempt.
    pub notifications: Vec<Value>,
    /// Attempts sent (1 when the first one completed).
    pub attempts: u32,
    /// The request key every attempt carried.
    pub request_key: RequestKey,
}

/// What an observer ([`RetryingClient::observe`]) learns about each attempt that ended: its
/// number, endpoint and classification, and the retry decision taken on it (`None` for a clean
/// attempt that delivered the final response).
///
/// # Examples
///
/// See [`RetryingClient::observe`].
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct AttemptReport<'a> {
    /// The request key.
    pub request_key: RequestKey,
    /// The attempt (1 for the first).
    pub attempt: u32,
    /// Where it was sent.
    pub endpoint: &'a str,
    /// How its response ended.
    pub outcome: &'a Outcome,
    /// The decision taken on it, if it did not deliver the final response.
    pub decision: Option<RetryDecision>,
}

type Observer = Arc<dyn Fn(&AttemptReport<'_>) + Send + Sync>;

/// One item of a [`RetryingClient::stream`]: a verified message (notifications first, the
/// final response last, under the caller's id), or the error that ended the call.
pub type CallItem = Result<String, CallError>;

struct Inner {
    http: reqwest::Client,
    resolver: Arc<dyn EndpointResolver>,
    schedule: RetrySchedule,
    /// The mapping asked for (a response in another one the client reads is taken too).
    mapping: Mapping,
    stats: Arc<RetryStats>,
    policy: Mutex<Option<ClientPolicy>>,
    idempotent: Vec<String>,
    observer: Option<Observer>,
}

/// A client for MCP over Streamable HTTP that opts every request in to framing, verifies every
/// response, and **retries a cut, keyed request by itself** (SPEC.md §17.13): the same request
/// key, a new JSON-RPC id, bounded attempts with exponential backoff and full jitter
/// ([`RetrySchedule`]), the endpoint re-resolved and its contract re-checked before each
/// attempt ([`EndpointResolver`]; a downgrade fails closed).
///
/// It retries only what [`RetryPolicy`] allows for the server's declared contract: an
/// idempotent request (reads and lists, [`IDEMPOTENT_METHODS`]), or a keyed one whose method the
/// server declares deduplicated (SPEC.md §17.11); never an ambiguous close (Regime C: the policy
/// cannot even be built without the contract), never a contract violation. Retryable
/// deduplication refusals (`in_progress`, `store_unavailable`) are retried too, after at least
/// their `retryAfterMs`. Every attempt's outcome, every decision and every retry is recorded
/// through [`telemetry`](crate::telemetry) (the `metrics` facade and `tracing` events, with the
/// attempt number, endpoint, method and tool), and each logical request's duration as
/// `mcp.client.operation.duration`.
///
/// [`FramingHttpClient::auto_retry`](crate::rmcp_http::FramingHttpClient::auto_retry) uses it
/// under rmcp.
///
/// # Examples
///
/// ```no_run
/// use mcp_framing::client::{DiscoveringResolver, RetryingClient, RetrySchedule};
/// # async fn run() -> Result<(), mcp_framing::client::CallError> {
/// let http = reqwest::Client::new();
/// let resolver = DiscoveringResolver::new(http.clone(), ["http://10.0.0.1/mcp", "http://10.0.0.2/mcp"]);
/// let client = RetryingClient::new(http, resolver).schedule(RetrySchedule::default().max_attempts(5));
/// let call = client.call(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
///     "params": {"name": "send_email", "arguments": {"to": "bob@example.com"}}})).await?;
/// println!("{} after {} attempt(s)", call.response["result"], call.attempts);
/// # Ok(()) }
/// # let _ = run;
/// ```
#[derive(Clone)]
pub struct RetryingClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RetryingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryingClient")
            .field("resolver", &self.inner.resolver)
            .field("schedule", &self.inner.schedule)
            .field("mapping", &self.inner.mapping)
            .finish_non_exhaustive()
    }
}

impl RetryingClient {
    /// A client over `http` sending each attempt where `resolver` says.
    ///
    /// # Examples
    ///
    /// See [`RetryingClient`].
    #[must_use]
    pub fn new(http: reqwest::Client, resolver: impl EndpointResolver) -> Self {
        Self::with_shared_resolver(http, Arc::new(resolver))
    }

    /// As [`new`](Self::new), with a resolver shared with other code.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mcp_framing::client::{DiscoveringResolver, RetryingClient};
    /// let resolver = Arc::new(DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"]));
    /// let client = RetryingClient::with_shared_resolver(reqwest::Client::new(), resolver);
    /// # let _ = client;
    /// ```
    #[must_use]
    pub fn with_shared_resolver(
        http: reqwest::Client,
        resolver: Arc<dyn EndpointResolver>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                http,
                resolver,
                schedule: RetrySchedule::default(),
                mapping: Mapping::Sse,
                stats: Arc::default(),
                policy: Mutex::new(None),
                idempotent: IDEMPOTENT_METHODS.iter().map(|&m| m.to_owned()).collect(),
                observer: None,
            }),
        }
    }

    fn inner_mut(&mut self) -> &mut Inner {
        Arc::get_mut(&mut self.inner).expect("configured before it is cloned")
    }

    /// Sets the attempts and backoff (default [`RetrySchedule::default`]).
    ///
    /// # Panics
    ///
    /// If the client was cloned before (configure it first).
    ///
    /// # Examples
    ///
    /// See [`RetryingClient`].
    #[must_use]
    pub fn schedule(mut self, schedule: RetrySchedule) -> Self {
        self.inner_mut().schedule = schedule;
        self
    }

    /// Asks for the binary mapping instead of SSE (default `false`).
    ///
    /// # Panics
    ///
    /// If the client was cloned before.
    ///
    /// # Examples
    ///
    /// ```
    /// # use mcp_framing::client::*;
    /// let client = RetryingClient::new(reqwest::Client::new(),
    ///     DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"])).binary(true);
    /// # let _ = client;
    /// ```
    #[must_use]
    pub fn binary(mut self, binary: bool) -> Self {
        self.inner_mut().mapping = if binary {
            Mapping::Binary
        } else {
            Mapping::Sse
        };
        self
    }

    /// Asks for `mapping` (default the SSE mapping of SPEC.md §15): [`Mapping::Compat`] asks for
    /// the compatible SSE mapping (§18.8); a response in another mapping the client reads is
    /// taken too.
    ///
    /// # Panics
    ///
    /// If the client was cloned before.
    ///
    /// # Examples
    ///
    /// ```
    /// # use mcp_framing::client::*;
    /// use mcp_framing::http::Mapping;
    /// let client = RetryingClient::new(reqwest::Client::new(),
    ///     DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"]))
    ///     .mapping(Mapping::Compat);
    /// # let _ = client;
    /// ```
    #[must_use]
    pub fn mapping(mut self, mapping: Mapping) -> Self {
        self.inner_mut().mapping = mapping;
        self
    }

    /// Starts from an established policy instead of building one from the first resolution.
    ///
    /// # Panics
    ///
    /// If the client was cloned before.
    ///
    /// # Examples
    ///
    /// ```
    /// # use mcp_framing::client::*;
    /// # use mcp_framing::{ClientPolicy, FramingContract, ServerDiscovery, DiscoverySource};
    /// let mut result = serde_json::json!({"capabilities": {}});
    /// FramingContract::v1().declare_in(&mut result, DiscoverySource::Discover)?;
    /// let policy = ClientPolicy::new(&ServerDiscovery::from_discover(&result)?)?;
    /// let client = RetryingClient::new(reqwest::Client::new(),
    ///     DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"])).policy(policy);
    /// # let _ = client;
    /// # Ok::<(), mcp_framing::ContractError>(())
    /// ```
    #[must_use]
    pub fn policy(mut self, policy: ClientPolicy) -> Self {
        *self
            .inner_mut()
            .policy
            .get_mut()
            .unwrap_or_else(|p| p.into_inner()) = Some(policy);
        self
    }

    /// Calls `observer` with every attempt that ended (besides the telemetry): for logs that
    /// tell the story of each call.
    ///
    /// # Panics
    ///
    /// If the client was cloned before.
    ///
    /// # Examples
    ///
    /// ```
    /// # use mcp_framing::client::*;
    /// let client = RetryingClient::new(reqwest::Client::new(),
    ///     DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"]))
    ///     .observe(|report: &AttemptReport<'_>| {
    ///         println!("attempt {} via {}: {}", report.attempt, report.endpoint, report.outcome.verdict);
    ///     });
    /// # let _ = client;
    /// ```
    #[must_use]
    pub fn observe(
        mut self,
        observer: impl Fn(&AttemptReport<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.inner_mut().observer = Some(Arc::new(observer));
        self
    }

    /// The counters (shared by clones).
    ///
    /// # Examples
    ///
    /// See [`RetryStats`].
    #[must_use]
    pub fn stats(&self) -> Arc<RetryStats> {
        self.inner.stats.clone()
    }

    /// Sends `request` (a JSON-RPC request with an `id`; a request key is drawn and written into
    /// its `_meta` unless it carries one) and collects the verified result, retrying as the
    /// type's docs say.
    ///
    /// # Errors
    ///
    /// [`CallError`]: the call ended without a final response after its last attempt, or could
    /// not be sent (resolution, contract).
    ///
    /// # Examples
    ///
    /// See [`RetryingClient`].
    pub async fn call(&self, request: Value) -> Result<CallOutcome, CallError> {
        let mut stream = self.start(request, HeaderMap::new())?;
        let mut notifications = Vec::new();
        while let Some(item) = stream.next_item().await {
            let text = item?;
            let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            if value.get("id").is_some() {
                return Ok(CallOutcome {
                    response: value,
                    notifications,
                    attempts: stream.attempt,
                    request_key: stream.key,
                });
            }
            notifications.push(value);
        }
        unreachable!("a call stream ends with its final response or an error")
    }

    /// As [`call`](Self::call), as a stream of verified messages (for a caller that acts on
    /// notifications as they arrive), with extra HTTP headers on every attempt.
    ///
    /// # Errors
    ///
    /// [`CallError::NotARequest`] or [`CallError::RequestKey`] at once; the others as the
    /// stream's last item.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use mcp_framing::client::*;
    /// use futures::StreamExt;
    /// # async fn run(client: RetryingClient) -> Result<(), CallError> {
    /// let mut messages = client.stream(serde_json::json!({"jsonrpc": "2.0", "id": 1,
    ///     "method": "tools/call", "params": {"name": "t"}}), http::HeaderMap::new())?;
    /// while let Some(message) = messages.next().await {
    ///     println!("{}", message?);
    /// }
    /// # Ok(()) }
    /// # let _ = run;
    /// ```
    pub fn stream(
        &self,
        request: Value,
        headers: HeaderMap,
    ) -> Result<BoxStream<'static, CallItem>, CallError> {
        let state = self.start(request, headers)?;
        Ok(futures_util::stream::unfold(state, |mut state| async move {
            let item = state.next_item().await?;
            Some((item, state))
        })
        .boxed())
    }

    fn start(&self, mut request: Value, headers: HeaderMap) -> Result<CallState, CallError> {
        let (Some(id), Some(method)) = (
            request.get("id").cloned(),
            request
                .get("method")
                .and_then(Value::as_str)
                .map(str::to_owned),
        ) else {
            return Err(CallError::NotARequest);
        };
        let key = match crate::request::request_key(&request)? {
            Some(key) => key,
            None => {
                let key = RequestKey::random();
                crate::request::set_request_key(&mut request, key)?;
                key
            }
        };
        crate::http::declare_framing_capability(&mut request);
        bump(&self.inner.stats.calls);
        let traits = RequestTraits {
            is_idempotent: self.inner.idempotent.contains(&method),
            request_key: Some(key),
        };
        let tool = (method == "tools/call")
            .then(|| request["params"]["name"].as_str().map(str::to_owned))
            .flatten();
        Ok(CallState {
            inner: self.inner.clone(),
            request,
            id,
            tool,
            started: std::time::Instant::now(),
            method,
            key,
            traits,
            headers,
            attempt: 0,
            current: None,
            retry_after: Duration::ZERO,
            done: false,
        })
    }
}

type Body = BoxStream<'static, Result<Bytes, reqwest::Error>>;

struct Attempt {
    verified: VerifiedResponse<Body>,
    held: Option<String>,
    endpoint: String,
    retry_policy: RetryPolicy,
}

/// What ended an attempt early, before a verified final response.
enum AttemptFailure {
    /// No retry can help.
    Final(CallError),
    /// The attempt did not complete: decide on its outcome.
    Incomplete(Outcome, String, RetryPolicy),
}

struct CallState {
    inner: Arc<Inner>,
    request: Value,
    id: Value,
    /// `params.name` of a `tools/call`, for telemetry.
    tool: Option<String>,
    /// When the logical request started (the operation's duration).
    started: std::time::Instant,
    method: String,
    key: RequestKey,
    traits: RequestTraits,
    headers: HeaderMap,
    attempt: u32,
    current: Option<Attempt>,
    retry_after: Duration,
    done: bool,
}

impl CallState {
    fn report(&self, outcome: &Outcome, endpoint: &str, decision: Option<RetryDecision>) {
        if let Some(observer) = &self.inner.observer {
            observer(&AttemptReport {
                request_key: self.key,
                attempt: self.attempt,
                endpoint,
                outcome,
                decision,
            });
        }
    }

    fn context<'a>(&'a self, endpoint: &'a str) -> AttemptContext<'a> {
        let mut ctx = AttemptContext::default()
            .request_key(self.key)
            .endpoint(endpoint)
            .method(&self.method)
            .attempt(self.attempt);
        if let Some(tool) = self.tool.as_deref() {
            ctx = ctx.tool(tool);
        }
        ctx
    }

    fn record(&self, outcome: &Outcome, endpoint: &str) {
        telemetry::record_outcome(outcome, &self.context(endpoint));
    }

    fn record_decision(&self, decision: &RetryDecision, endpoint: &str) {
        telemetry::record_decision(decision, &self.context(endpoint));
        if decision.is_retry() {
            telemetry::record_retry(decision, &self.context(endpoint));
        }
    }

    /// Resolves, re-checks the contract, sends attempt `self.attempt`.
    async fn send(&mut self) -> Result<Attempt, AttemptFailure> {
        let resolution = self
            .inner
            .resolver
            .resolve()
            .await
            .map_err(|e| AttemptFailure::Final(e.into()))?;
        let policy = {
            let mut slot = self.inner.policy.lock().unwrap_or_else(|p| p.into_inner());
            match &*slot {
                // SPEC.md §11.5: every resolution is checked before anything is sent.
                Some(policy) => policy
                    .recheck(&resolution.discovery)
                    .map(|()| policy.clone())
                    .map_err(|e| AttemptFailure::Final(e.into()))?,
                None => {
                    let policy = ClientPolicy::new(&resolution.discovery)
                        .map_err(|e| AttemptFailure::Final(e.into()))?;
                    *slot = Some(policy.clone());
                    policy
                }
            }
        };
        let retry_policy = RetryPolicy::for_method(&policy, &self.method);
        let endpoint = resolution.endpoint;
        let mut request = self.request.clone();
        if self.attempt > 1 {
            // A retry is a new JSON-RPC request with the same key (SPEC.md §10).
            request["id"] = retry_id(&self.id, self.attempt);
        }
        // The negotiated limits: decoded with, and announced with the opt-in (SPEC.md §11.3).
        let decoder = policy.decoder(self.key).unwrap_or_else(|| {
            StreamDecoder::builder()
                .expect_request_key(self.key)
                .build()
        });
        let mut headers = self.headers.clone();
        headers.extend(opt_in_headers_with(self.key, self.inner.mapping, &decoder));
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        bump(&self.inner.stats.attempts);
        let incomplete =
            |outcome| AttemptFailure::Incomplete(outcome, endpoint.clone(), retry_policy);
        let sent = self
            .inner
            .http
            .post(&endpoint)
            .headers(headers)
            .body(serde_json::to_vec(&request).expect("a JSON value serializes"))
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            // The request may or may not have reached the server: abandoned, nothing received.
            Err(_) => return Err(incomplete(nothing_received())),
        };
        let status = response.status();
        if status.is_server_error() {
            return Err(incomplete(nothing_received()));
        }
        if !status.is_success() {
            return Err(AttemptFailure::Final(CallError::Status {
                status,
                attempts: self.attempt,
            }));
        }
        // Decided from the headers, before the body (SPEC.md §16): a response that is not
        // framed is a contract violation whatever its body holds.
        let response_headers = response.headers().clone();
        let verified = match VerifiedResponse::from_headers(
            response.bytes_stream().boxed(),
            &response_headers,
            decoder,
        ) {
            Ok(verified) => verified,
            Err(err) => {
                return Err(incomplete(
                    err.outcome().expect("a mapping violation has an outcome"),
                ));
            }
        };
        Ok(Attempt {
            verified,
            held: None,
            endpoint,
            retry_policy,
        })
    }

    /// Decides on an incomplete attempt: `None` to retry, or the error ending the call.
    fn decide(
        &mut self,
        outcome: Outcome,
        endpoint: &str,
        retry_policy: RetryPolicy,
    ) -> Option<CallError> {
        self.record(&outcome, endpoint);
        let mut decision = retry_policy.decide(&outcome, &self.traits);
        if decision.is_retry() && self.attempt >= self.inner.schedule.attempts() {
            decision = RetryDecision::SurfaceToCaller(decision.reason());
        }
        self.record_decision(&decision, endpoint);
        self.report(&outcome, endpoint, Some(decision));
        if decision.is_retry() {
            return None;
        }
        Some(CallError::Incomplete {
            outcome: Box::new(outcome),
            decision,
            attempts: self.attempt,
        })
    }

    fn fail(&mut self, err: CallError) -> Option<CallItem> {
        self.done = true;
        bump(&self.inner.stats.gave_up);
        let error_type = match &err {
            CallError::Incomplete { outcome, .. } => outcome.verdict.name(),
            CallError::Contract(_) => "contract_violation",
            _ => "transport",
        };
        telemetry::record_operation(&self.context(""), self.started.elapsed(), Some(error_type));
        Some(Err(err))
    }

    async fn next_item(&mut self) -> Option<CallItem> {
        loop {
            if self.done {
                return None;
            }
            if self.current.is_none() {
                if self.attempt > 0 {
                    let delay = self.inner.schedule.delay(self.attempt, self.retry_after);
                    bump(&self.inner.stats.retries);
                    tracing::event!(target: "mcp_framing::client", tracing::Level::INFO,
                        request_key = %self.key.fingerprint(), next_attempt = self.attempt + 1,
                        delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        "retrying with the same request key");
                    tokio::time::sleep(delay).await;
                    self.retry_after = Duration::ZERO;
                }
                self.attempt += 1;
                match self.send().await {
                    Ok(attempt) => self.current = Some(attempt),
                    Err(AttemptFailure::Final(err)) => return self.fail(err),
                    Err(AttemptFailure::Incomplete(outcome, endpoint, policy)) => {
                        match self.decide(outcome, &endpoint, policy) {
                            None => continue,
                            Some(err) => return self.fail(err),
                        }
                    }
                }
            }
            let attempt = self.current.as_mut().expect("an attempt in progress");
            let item = attempt.verified.next().await;
            match item {
                Some(Ok(Delivery::Message(message))) => {
                    let text = String::from_utf8_lossy(message.bytes()).into_owned();
                    if !super::is_final_response(&text) {
                        return Some(Ok(text));
                    }
                    attempt.held = Some(text);
                }
                Some(Ok(Delivery::Complete(_))) => {
                    let attempt = self.current.take().expect("an attempt in progress");
                    let outcome = attempt.verified.outcome().cloned();
                    if let Some(outcome) = &outcome {
                        self.record(outcome, &attempt.endpoint);
                    }
                    let Some(text) = attempt.held.clone() else {
                        // The sentinel without a final response: nothing to hand out.
                        let outcome = Outcome::abandoned(
                            None,
                            attempt.verified.progress(),
                            attempt.verified.head(),
                        );
                        match self.decide(outcome, &attempt.endpoint, attempt.retry_policy) {
                            None => continue,
                            Some(err) => return self.fail(err),
                        }
                    };
                    let mut response: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                    if let Some(after) = self.retryable_refusal(&response, &attempt) {
                        self.retry_after = after;
                        bump(&self.inner.stats.refusals_retried);
                        continue;
                    }
                    if let Some(outcome) = &outcome {
                        self.report(outcome, &attempt.endpoint, None);
                    }
                    response["id"] = self.id.clone();
                    self.done = true;
                    telemetry::record_operation(
                        &self.context(&attempt.endpoint),
                        self.started.elapsed(),
                        None,
                    );
                    return Some(Ok(response.to_string()));
                }
                Some(Err(err)) => {
                    let attempt = self.current.take().expect("an attempt in progress");
                    let outcome = attempt
                        .verified
                        .outcome()
                        .cloned()
                        .or_else(|| err.outcome())
                        .unwrap_or_else(nothing_received);
                    match self.decide(outcome, &attempt.endpoint, attempt.retry_policy) {
                        None => continue,
                        Some(err) => return self.fail(err),
                    }
                }
                None => {
                    // Not reached: a verified response ends with Complete or an error.
                    let attempt = self.current.take().expect("an attempt in progress");
                    match self.decide(nothing_received(), &attempt.endpoint, attempt.retry_policy) {
                        None => continue,
                        Some(err) => return self.fail(err),
                    }
                }
            }
        }
    }

    /// A retryable deduplication refusal (SPEC.md §17.9) with attempts left and a request the
    /// policy may repeat: how long to wait at least before the retry.
    fn retryable_refusal(&self, response: &Value, attempt: &Attempt) -> Option<Duration> {
        let error = response.get("error")?;
        let (reason, retryable) = crate::retry::dedupe_refusal(error)?;
        let may_repeat = attempt
            .retry_policy
            .decide(&nothing_received(), &self.traits)
            .is_retry();
        let decision = if retryable && may_repeat && self.attempt < self.inner.schedule.attempts() {
            RetryDecision::Retry(RetryReason::Keyed)
        } else {
            RetryDecision::DoNotRetry(RetryReason::WouldRepeat)
        };
        self.record_decision(&decision, &attempt.endpoint);
        tracing::event!(target: "mcp_framing::client", tracing::Level::INFO,
            request_key = %self.key.fingerprint(), attempt = self.attempt, reason = reason,
            retryable = retryable, "deduplication refusal");
        if !decision.is_retry() {
            return None;
        }
        let after = error["data"][crate::retry::DEDUPE_DATA_KEY]["retryAfterMs"]
            .as_u64()
            .unwrap_or(0);
        Some(Duration::from_millis(after.min(10_000)))
    }
}

fn nothing_received() -> Outcome {
    Outcome::from_error(&StreamDecoder::new().decode_all(b"").unwrap_err())
}

/// The id of attempt `attempt` of a request whose id is `id`: a new id (SPEC.md §10), derived so
/// that it is readable in logs.
fn retry_id(id: &Value, attempt: u32) -> Value {
    let base = match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Value::String(format!("{base}~attempt-{attempt}"))
}
