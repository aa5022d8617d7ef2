//! Where the next attempt goes: per-request endpoint resolution with its discovery metadata
//! (SPEC.md §11.5, §17.13).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::contract::ServerDiscovery;

/// A boxed `Send` future, as [`EndpointResolver::resolve`] returns.
pub type ResolveFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Resolution, ResolveError>> + Send + 'a>>;

/// One resolution: the endpoint to send the next attempt to, and what its discovery said (the
/// framing contract, re-checked against the client's policy before every attempt).
///
/// # Examples
///
/// ```
/// use mcp_framing::ServerDiscovery;
/// use mcp_framing::client::Resolution;
/// let discovery = ServerDiscovery::from_discover(&serde_json::json!({"capabilities": {}}))?;
/// let resolution = Resolution::new("http://127.0.0.1:8080/mcp", discovery);
/// assert_eq!(resolution.endpoint, "http://127.0.0.1:8080/mcp");
/// # Ok::<(), mcp_framing::ContractError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resolution {
    /// The endpoint URL.
    pub endpoint: String,
    /// Its discovery metadata.
    pub discovery: ServerDiscovery,
}

impl Resolution {
    /// A resolution of `endpoint` with `discovery`.
    ///
    /// # Examples
    ///
    /// See [`Resolution`].
    #[must_use]
    pub fn new(endpoint: impl Into<String>, discovery: ServerDiscovery) -> Self {
        Self {
            endpoint: endpoint.into(),
            discovery,
        }
    }
}

/// Why an endpoint could not be resolved.
///
/// # Examples
///
/// ```
/// let err = mcp_framing::client::ResolveError::new("no healthy backend");
/// assert_eq!(err.to_string(), "endpoint resolution failed: no healthy backend");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("endpoint resolution failed: {reason}")]
pub struct ResolveError {
    reason: String,
}

impl ResolveError {
    /// An error with this reason.
    ///
    /// # Examples
    ///
    /// See [`ResolveError`].
    #[must_use]
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

/// Resolves the endpoint of the next attempt (user supplied: a service registry, DNS, a load
/// balancer's view, `server/discover` on each candidate). Called before **every** attempt,
/// retries included: under stateless per-request discovery a retry may land elsewhere, and its
/// contract is re-checked there (a downgrade fails closed, SPEC.md §11.5).
///
/// # Examples
///
/// ```
/// use mcp_framing::client::{EndpointResolver, Resolution, ResolveFuture};
///
/// #[derive(Debug)]
/// struct Fixed(Resolution);
/// impl EndpointResolver for Fixed {
///     fn resolve(&self) -> ResolveFuture<'_> {
///         let resolution = self.0.clone();
///         Box::pin(async move { Ok(resolution) })
///     }
/// }
/// # let _ = Fixed;
/// ```
pub trait EndpointResolver: std::fmt::Debug + Send + Sync + 'static {
    /// The endpoint for the next attempt, with its discovery metadata.
    fn resolve(&self) -> ResolveFuture<'_>;
}

/// An [`EndpointResolver`] over a list of endpoints, taken in turn (round robin), that runs
/// `server/discover` (MCP 2026-07-28) on the chosen endpoint at every resolution: per-request
/// discovery, as a stateless fleet behind an autoscaler needs.
///
/// # Examples
///
/// ```
/// use mcp_framing::client::DiscoveringResolver;
/// let resolver = DiscoveringResolver::new(reqwest::Client::new(),
///     ["http://10.0.0.1/mcp", "http://10.0.0.2/mcp"]);
/// assert_eq!(resolver.endpoints().len(), 2);
/// ```
#[derive(Debug)]
pub struct DiscoveringResolver {
    http: reqwest::Client,
    endpoints: Vec<String>,
    next: AtomicUsize,
}

impl DiscoveringResolver {
    /// A resolver over `endpoints`, using `http` for the discovery requests.
    ///
    /// # Panics
    ///
    /// If `endpoints` is empty.
    ///
    /// # Examples
    ///
    /// See [`DiscoveringResolver`].
    #[must_use]
    pub fn new<I, S>(http: reqwest::Client, endpoints: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let endpoints: Vec<String> = endpoints.into_iter().map(Into::into).collect();
        assert!(!endpoints.is_empty(), "at least one endpoint");
        Self {
            http,
            endpoints,
            next: AtomicUsize::new(0),
        }
    }

    /// The endpoints.
    ///
    /// # Examples
    ///
    /// See [`DiscoveringResolver`].
    #[must_use]
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }
}

impl EndpointResolver for DiscoveringResolver {
    fn resolve(&self) -> ResolveFuture<'_> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.endpoints.len();
        let endpoint = self.endpoints[i].clone();
        Box::pin(async move {
            let fail = |what: &str, err: &dyn std::fmt::Display| {
                ResolveError::new(format!("server/discover at {endpoint}: {what}: {err}"))
            };
            // MCP 2026-07-28: the version and the client's capabilities in `_meta`, the version
            // and the method in headers too (rmcp refuses the request without them).
            let request = json!({"jsonrpc": "2.0", "id": "discover", "method": "server/discover",
                                 "params": {"_meta": {crate::http::META_PROTOCOL_VERSION: "2026-07-28",
                                                      crate::http::META_CLIENT_CAPABILITIES: {}}}});
            let response = self
                .http
                .post(&endpoint)
                .header(http::header::ACCEPT, "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "server/discover")
                .json(&request)
                .send()
                .await
                .map_err(|e| fail("request", &e))?;
            let sse = response
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| {
                    crate::mapping::Mapping::from_content_type(Some(v))
                        == Some(crate::mapping::Mapping::Sse)
                });
            let body = response.bytes().await.map_err(|e| fail("response", &e))?;
            let response: Value = if sse {
                // A server answering in SSE: the response is its message event that is one.
                let mut events = Vec::new();
                crate::sse::SseParser::with_max_event_data(
                    crate::DEFAULT_MAX_MESSAGE_SIZE as usize,
                )
                .feed(&body, &mut events)
                .map_err(|e| fail("response", &e))?;
                let message = events
                    .into_iter()
                    .find(|e| {
                        crate::sse::is_message_event(e.event.as_deref())
                            && crate::jsonrpc::is_response(&e.data)
                    })
                    .ok_or_else(|| fail("response", &"no JSON-RPC response in the event stream"))?;
                serde_json::from_str(&message.data)
            } else {
                serde_json::from_slice(&body)
            }
            .map_err(|e| fail("response", &e))?;
            let discovery =
                ServerDiscovery::from_discover(&response).map_err(|e| fail("result", &e))?;
            Ok(Resolution::new(endpoint.clone(), discovery))
        })
    }
}
