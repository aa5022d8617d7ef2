//! [`RetryingClient`]: send a JSON-RPC request, get its verified final response, the cut ones
//! retried by the client itself (SPEC.md §17.13). Every attempt goes through the attempt engine
//! (`engine.rs`), as those of [`FramingHttpClient`](crate::rmcp_http::FramingHttpClient) do.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::HeaderMap;
use serde_json::Value;

use super::config::{Config, State};
use super::engine::{Call, Item, Route, TransportLimits};
use super::error::{AttemptReport, CallError};
use super::resolver::EndpointResolver;
use super::schedule::RetrySchedule;
use super::stats::{ClientStats, RetryStats};
use crate::contract::ClientPolicy;
use crate::ids::RequestKey;

/// A verified call: the final response (under the caller's original id), the messages verified
/// before it, and how many attempts it took. The bytes are the verified bytes, valid UTF-8,
/// unchanged (after a retry, the id member alone is edited back to the caller's id).
///
/// # Examples
///
/// ```
/// use mcp_framing::client::CallOutcome;
///
/// /// What a caller keeps of a verified call: the result, and whether the call was cut and retried.
/// fn result_of(call: &CallOutcome) -> Result<(serde_json::Value, bool), serde_json::Error> {
///     let response: serde_json::Value = serde_json::from_slice(&call.response)?;
///     for notification in &call.notifications {
///         println!("before the response: {}", String::from_utf8_lossy(notification));
///     }
///     Ok((response["result"].clone(), call.attempts > 1))
/// }
/// # let _ = result_of;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallOutcome {
    /// The final JSON-RPC response (a result, or a JSON-RPC error: a final refusal included).
    pub response: Bytes,
    /// The messages verified before it (notifications, server requests), from every attempt.
    pub notifications: Vec<Bytes>,
    /// Attempts sent (1 when the first one completed).
    pub attempts: u32,
    /// The request key every attempt carried.
    pub request_key: RequestKey,
}

impl CallOutcome {
    /// Deserializes the final response into any `serde` type (e.g. a `serde_json::Value`).
    ///
    /// # Errors
    ///
    /// The `serde_json` error if the response is not that type.
    ///
    /// # Examples
    ///
    /// See [`RetryingClient`].
    // Hidden: `serde_json::from_slice(&outcome.response)` says the same; the examples and the tests use it.
    #[doc(hidden)]
    pub fn deserialize<'a, T: serde::Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.response)
    }
}

/// One item of a [`RetryingClient::stream`]: a verified message (those before the final response
/// first, the final response last, under the caller's id), or the error that ended the call.
///
/// # Examples
///
/// ```
/// use futures::{Stream, StreamExt, stream};
/// use mcp_framing::client::{CallError, CallItem};
///
/// /// Relays the notifications as they verify; returns the final response (the last item).
/// async fn relay(mut items: impl Stream<Item = CallItem> + Unpin) -> Result<bytes::Bytes, CallError> {
///     let mut last = None;
///     while let Some(item) = items.next().await {
///         if let Some(notification) = last.replace(item?) {
///             println!("progress: {}", String::from_utf8_lossy(&notification));
///         }
///     }
///     Ok(last.expect("a call's stream ends with its final response or an error"))
/// }
/// # tokio_test::block_on(async {
/// // What `RetryingClient::stream` yields for a call with one notification:
/// let items = stream::iter([
///     Ok(bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#)),
///     Ok(bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#)),
/// ]);
/// assert_eq!(relay(items).await.unwrap(), &br#"{"jsonrpc":"2.0","id":1,"result":{}}"#[..]);
/// // and for one that failed:
/// let failed = stream::iter([Err::<bytes::Bytes, _>(CallError::NotDiscovered { method: "tools/call".into() })]);
/// assert_eq!(relay(failed).await.unwrap_err().kind(), "NotDiscovered");
/// # });
/// ```
pub type CallItem = Result<Bytes, CallError>;

/// A client for MCP over Streamable HTTP that opts every request in to framing, verifies every
/// response, and **retries a cut, keyed request by itself** (SPEC.md §17.13): the same request
/// key, a new JSON-RPC id, bounded attempts with exponential backoff and full jitter
/// ([`RetrySchedule`]), the endpoint re-resolved and its contract re-checked before each
/// attempt ([`EndpointResolver`]; a downgrade fails closed).
///
/// It retries only what the retry policy ([`RetryDecision`](crate::client::RetryDecision)) allows for the server's declared
/// contract: an idempotent request (reads and lists: `ping`, `server/discover`, `tools/list`,
/// `resources/list`, ..., SPEC.md §11.6), or a keyed one whose method the server
/// declares deduplicated (SPEC.md §17.11); never an ambiguous close (Regime C: the policy cannot
/// even be built without the contract, unless [ambiguity is accepted](Self::accept_ambiguity)),
/// never a contract violation. Retryable deduplication refusals (`in_progress`,
/// `store_unavailable`) are retried too, after at least their `retryAfterMs`. Every attempt's
/// outcome, every decision and every retry is recorded through
/// [`telemetry`](crate::telemetry) (the `metrics` facade and `tracing` events, with the attempt
/// number, endpoint, method and tool), and each logical request's duration as
/// `mcp.client.operation.duration`.
///
/// The verified bytes reach the caller unchanged: a message that is not UTF-8 fails the call
/// ([`CallError::InvalidUtf8`]), and a retried final response gets the caller's id back by an
/// edit of its `id` member alone. Responses are asked for in the compatible SSE mapping (SPEC.md
/// §18) unless [`mapping`](Self::mapping) says otherwise.
///
/// It speaks MCP 2026-07-28 (stateless), as [`DiscoveringResolver`](crate::client::DiscoveringResolver)'s
/// `server/discover` does: a request that names no revision in its `_meta` gets
/// `io.modelcontextprotocol/protocolVersion` `2026-07-28` (and empty client capabilities, where
/// the framing capability is then declared), and every attempt carries the headers that
/// revision asks for, read from the request (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`;
/// headers given to [`stream`](Self::stream) win).
///
/// [`FramingHttpClient`](crate::rmcp_http::FramingHttpClient) sends rmcp's requests through the
/// same attempt engine, with the same options.
///
/// # Examples
///
/// ```no_run
/// use mcp_framing::client::{DiscoveringResolver, RetryingClient, RetrySchedule};
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let http = reqwest::Client::new();
/// let resolver = DiscoveringResolver::new(http.clone(), ["http://10.0.0.1/mcp", "http://10.0.0.2/mcp"]);
/// let client = RetryingClient::new(http, resolver).schedule(RetrySchedule::default().max_attempts(5));
/// let call = client.call(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
///     "params": {"name": "send_email", "arguments": {"to": "bob@example.com"}}})).await?;
/// let response: serde_json::Value = serde_json::from_slice(&call.response)?; // the verified bytes
/// println!("{} after {} attempt(s)", response["result"], call.attempts);
/// # Ok(()) }
/// # let _ = run;
/// ```
#[derive(Clone)]
pub struct RetryingClient {
    config: Arc<Config>,
    state: Arc<State>,
    resolver: Arc<dyn EndpointResolver>,
}

impl std::fmt::Debug for RetryingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryingClient")
            .field("resolver", &self.resolver)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RetryingClient {
    /// A client over `http` sending each attempt where `resolver` says.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::client::{DiscoveringResolver, RetryingClient};
    ///
    /// let http = reqwest::Client::new(); // one connection pool for discovery and calls
    /// let resolver = DiscoveringResolver::new(http.clone(), ["http://10.0.0.1/mcp", "http://10.0.0.2/mcp"]);
    /// let client = RetryingClient::new(http, resolver);
    /// let copy = client.clone(); // clones share the configuration and the resolver
    /// # let _ = (client, copy);
    /// ```
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
    // Hidden: a clone of the client shares its resolver (and its configuration); the examples' and the tests' shortcut.
    #[doc(hidden)]
    #[must_use]
    pub fn with_shared_resolver(
        http: reqwest::Client,
        resolver: Arc<dyn EndpointResolver>,
    ) -> Self {
        Self {
            config: Arc::new(Config::new(http)),
            state: Arc::default(),
            resolver,
        }
    }

    fn config_mut(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    super::config::option_setters!(
        "mcp_framing::client::RetryingClient::new(reqwest::Client::new(), mcp_framing::client::DiscoveringResolver::new(reqwest::Client::new(), [\"http://127.0.0.1:1/mcp\"]))"
    );

    /// Sets the attempts and backoff (default [`RetrySchedule::default`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::client::{DiscoveringResolver, RetrySchedule, RetryingClient};
    ///
    /// let http = reqwest::Client::new();
    /// let resolver = DiscoveringResolver::new(http.clone(), ["http://127.0.0.1:1/mcp"]);
    /// // No retries at all: every cut response goes back to the caller.
    /// let client = RetryingClient::new(http, resolver).schedule(RetrySchedule::default().max_attempts(1));
    /// # let _ = client;
    /// ```
    #[must_use]
    pub fn schedule(mut self, schedule: RetrySchedule) -> Self {
        self.config_mut().schedule = schedule;
        self
    }

    /// Starts from an established policy instead of building one from the first resolution.
    ///
    /// # Examples
    ///
    /// ```
    /// # use mcp_framing::client::*;
    /// # use mcp_framing::internals::contract::{ClientPolicy, ServerDiscovery};
    /// # use mcp_framing::contract::{DiscoverySource, FramingContract};
    /// let mut result = serde_json::json!({"capabilities": {}});
    /// FramingContract::v1().declare_in(&mut result, DiscoverySource::Discover)?;
    /// let policy = ClientPolicy::builder().build(&ServerDiscovery::from_discover(&result)?)?;
    /// let client = RetryingClient::new(reqwest::Client::new(),
    ///     DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"])).policy(policy);
    /// # let _ = client;
    /// # Ok::<(), mcp_framing::contract::ContractError>(())
    /// ```
    // Hidden: the client builds its policy from the first resolution; a policy built ahead is for
    // the tests (`internals::contract::ClientPolicy`).
    #[doc(hidden)]
    #[must_use]
    pub fn policy(self, policy: ClientPolicy) -> Self {
        self.state.with_policy(policy);
        self
    }

    /// Calls `observer` with every attempt that ended (besides the telemetry): for logs that
    /// tell the story of each call.
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
        self.config_mut().observer = Some(Arc::new(observer));
        self
    }

    /// The call counters (shared by clones).
    ///
    /// # Examples
    ///
    /// ```
    /// # use mcp_framing::client::*;
    /// let client = RetryingClient::new(reqwest::Client::new(),
    ///     DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"]));
    /// let calls = client.stats().snapshot();
    /// assert_eq!((calls.calls, calls.attempts, calls.gave_up), (0, 0, 0));
    /// ```
    // Hidden: the metrics (`telemetry`, `mcp_framing.client.*`) are the one way to watch a client;
    // these counters are the tests' view (read through this accessor; the types have no path).
    #[doc(hidden)]
    #[must_use]
    pub fn stats(&self) -> Arc<RetryStats> {
        self.state.calls.clone()
    }

    /// The response counters, one count per attempt that got a response (shared by clones).
    ///
    /// # Examples
    ///
    /// ```
    /// # use mcp_framing::client::*;
    /// let client = RetryingClient::new(reqwest::Client::new(),
    ///     DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"]));
    /// assert_eq!(client.response_stats().complete(), 0);
    /// ```
    // Hidden: the metrics (`telemetry`, `mcp_framing.client.*`) are the one way to watch a client;
    // these counters are the tests' view (read through this accessor; the types have no path).
    #[doc(hidden)]
    #[must_use]
    pub fn response_stats(&self) -> Arc<ClientStats> {
        self.state.responses.clone()
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
    /// ```
    /// use mcp_framing::client::{CallError, DiscoveringResolver, RetryingClient};
    ///
    /// let http = reqwest::Client::new();
    /// let client = RetryingClient::new(http.clone(), DiscoveringResolver::new(http, ["http://127.0.0.1:1/mcp"]));
    /// # tokio_test::block_on(async {
    /// // A notification (no id) is not a call: refused before anything is sent.
    /// let err = client
    ///     .call(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    ///     .await
    ///     .unwrap_err();
    /// assert!(matches!(err, CallError::NotARequest));
    /// # });
    /// ```
    ///
    /// A call that gets its response (`no_run`: it needs a server):
    ///
    /// ```no_run
    /// # use mcp_framing::client::RetryingClient;
    /// # async fn run(client: RetryingClient) -> Result<(), Box<dyn std::error::Error>> {
    /// let call = client.call(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await?;
    /// let response: serde_json::Value = serde_json::from_slice(&call.response)?;
    /// assert_eq!(response["id"], 1); // the caller's id, even after a retry
    /// # Ok(()) }
    /// # let _ = run;
    /// ```
    pub async fn call(&self, request: Value) -> Result<CallOutcome, CallError> {
        let mut call = self.start(request, HeaderMap::new())?;
        let mut notifications = Vec::new();
        while let Some(item) = call.next().await {
            match item? {
                Item::Message(message) => notifications.push(Bytes::from(message)),
                Item::Response(response) => {
                    return Ok(CallOutcome {
                        response: Bytes::from(response),
                        notifications,
                        attempts: call.attempts(),
                        request_key: call.key(),
                    });
                }
            }
        }
        unreachable!("a call ends with its final response or an error")
    }

    /// As [`call`](Self::call), as a stream of verified messages (for a caller that acts on
    /// them as they arrive; the final response last), with extra HTTP headers on every attempt.
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
    ///     println!("{}", String::from_utf8_lossy(&message?));
    /// }
    /// # Ok(()) }
    /// # let _ = run;
    /// ```
    pub fn stream(
        &self,
        request: Value,
        headers: HeaderMap,
    ) -> Result<BoxStream<'static, CallItem>, CallError> {
        let call = self.start(request, headers)?;
        Ok(futures_util::stream::unfold(call, |mut call| async move {
            let item = match call.next().await? {
                Ok(Item::Message(text) | Item::Response(text)) => Ok(Bytes::from(text)),
                Err(err) => Err(err),
            };
            Some((item, call))
        })
        .boxed())
    }

    fn start(&self, mut request: Value, headers: HeaderMap) -> Result<Call, CallError> {
        // Without a session, every request names its revision (MCP 2026-07-28), as the
        // resolver's `server/discover` does: the engine then sends it in the headers too.
        crate::http::make_stateless(&mut request);
        Call::new(
            self.config.clone(),
            self.state.clone(),
            Route::Resolve(self.resolver.clone()),
            request,
            headers,
            TransportLimits::default(),
        )
    }
}
