//! Where the next attempt goes: per-request endpoint resolution with its discovery metadata
//! (SPEC.md §11.5, §17.13).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use futures_core::Stream;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::contract::ServerDiscovery;
use crate::mapping::Mapping;
use crate::mapping::sse::SseParser;

/// A boxed `Send` future, as `Resolve::resolve` returns.
pub(crate) type ResolveFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Resolution, ResolveError>> + Send + 'a>>;

/// One resolution: the endpoint to send the next attempt to, and what its discovery said (the
/// framing contract, re-checked against the client's policy before every attempt).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Resolution {
    /// The endpoint URL.
    pub(crate) endpoint: String,
    /// Its discovery metadata.
    pub(crate) discovery: ServerDiscovery,
}

/// Why an endpoint could not be resolved.
///
/// # Examples
///
/// ```
/// use mcp_framing::client::{CallError, DiscoveringResolver, RetryingClient};
///
/// # tokio_test::block_on(async {
/// // Nothing listens on port 1: the endpoint cannot be discovered, no request is sent.
/// let resolver = DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"]);
/// let client = RetryingClient::new(reqwest::Client::new(), resolver);
/// let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
///     "params": {"name": "send_email", "arguments": {}}});
/// let Err(CallError::Resolve(err)) = client.call(request).await else { panic!("resolved") };
/// assert!(err.to_string().starts_with("endpoint resolution failed: "));
/// # });
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("endpoint resolution failed: {reason}")]
pub struct ResolveError {
    reason: String,
}

impl ResolveError {
    /// An error with this reason (callers read it in `CallError::Resolve`).
    #[must_use]
    pub(crate) fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

/// Resolves the endpoint of the next attempt. Called before **every** attempt, retries
/// included: under stateless per-request discovery a retry may land elsewhere, and its contract
/// is re-checked there (a downgrade fails closed, SPEC.md §11.5).
///
/// [`DiscoveringResolver`] is its one implementation: it runs `server/discover` on each
/// candidate as 2026-07-28 requires, which is what makes a resolution's contract trustworthy.
/// The trait is sealed: a resolver that handed the client a contract nobody discovered would
/// turn off the checks that make retries safe. A fleet behind one address (a load balancer, a
/// gateway) is one endpoint to it, discovered before every attempt like a list of instances.
///
/// # Examples
///
/// ```
/// use mcp_framing::client::{DiscoveringResolver, EndpointResolver, RetryingClient};
///
/// // A client over whichever resolver the deployment configures.
/// fn client_over(resolver: impl EndpointResolver) -> RetryingClient {
///     RetryingClient::new(reqwest::Client::new(), resolver)
/// }
/// let fleet = DiscoveringResolver::new(reqwest::Client::new(), ["http://10.0.0.1/mcp", "http://10.0.0.2/mcp"]);
/// let client = client_over(fleet);
/// # let _ = client;
/// ```
///
/// Sealed: another implementation does not compile.
///
/// ```compile_fail,E0277
/// #[derive(Debug)]
/// struct Fixed;
/// impl mcp_framing::client::EndpointResolver for Fixed {}
/// ```
#[expect(
    private_bounds,
    reason = "sealed: the resolution protocol is the crate's own, DiscoveringResolver its one implementation"
)]
pub trait EndpointResolver: Resolve + std::fmt::Debug + Send + Sync + 'static {}

/// The resolution protocol behind [`EndpointResolver`], crate-private so that the trait is
/// sealed.
pub(crate) trait Resolve {
    /// The endpoint for the next attempt, with its discovery metadata.
    fn resolve(&self) -> ResolveFuture<'_>;
}

/// An [`EndpointResolver`] over a list of endpoints, taken in turn (round robin), that runs
/// `server/discover` (MCP 2026-07-28) on the chosen endpoint at every resolution: per-request
/// discovery, as a stateless fleet behind an autoscaler needs. The request carries its protocol
/// version and capabilities as 2026-07-28 requires (in `_meta`, with the framing capability
/// declared, and in the `MCP-Protocol-Version` and `Mcp-Method` headers); the answer may be a
/// JSON body or an event stream (as rmcp answers), at most 1 MiB.
///
/// # Examples
///
/// ```
/// use mcp_framing::client::DiscoveringResolver;
/// use mcp_framing::client::RetryingClient;
/// let resolver = DiscoveringResolver::new(reqwest::Client::new(),
///     ["http://10.0.0.1/mcp", "http://10.0.0.2/mcp"]);
/// // Each attempt, retries included, goes to the next endpoint, discovered there first.
/// let client = RetryingClient::new(reqwest::Client::new(), resolver);
/// # let _ = client;
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
    /// ```
    /// use mcp_framing::client::{CallError, DiscoveringResolver, RetryingClient};
    ///
    /// // The fleet's endpoints, e.g. from configuration; each attempt is resolved on the next one.
    /// let endpoints: Vec<String> = vec!["http://127.0.0.1:1/mcp".into()];
    /// let http = reqwest::Client::new();
    /// let resolver = DiscoveringResolver::new(http.clone(), endpoints);
    /// let client = RetryingClient::new(http, resolver);
    /// # tokio_test::block_on(async {
    /// // Nothing listens there: `server/discover` fails, and no request is sent.
    /// let err = client
    ///     .call(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    ///     .await
    ///     .unwrap_err();
    /// assert!(matches!(err, CallError::Resolve(_)));
    /// # });
    /// ```
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
    // Hidden: the list the caller gave `new`, read back by the tests.
    #[doc(hidden)]
    #[must_use]
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }
}

/// The most bytes of a `server/discover` response a [`DiscoveringResolver`] reads: a discovery
/// result is small, and the peer does not decide how much the client buffers.
const MAX_DISCOVERY_BYTES: usize = 1 << 20;

impl EndpointResolver for DiscoveringResolver {}

impl Resolve for DiscoveringResolver {
    fn resolve(&self) -> ResolveFuture<'_> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.endpoints.len();
        let endpoint = self.endpoints[i].clone();
        Box::pin(async move {
            let fail = |what: &str, err: &dyn std::fmt::Display| {
                ResolveError::new(format!("server/discover at {endpoint}: {what}: {err}"))
            };
            // A 2026-07-28 request carries its protocol version and capabilities in `_meta`, and
            // the version and the method in headers too (which servers check against the body).
            let mut request =
                json!({"jsonrpc": "2.0", "id": "discover", "method": "server/discover"});
            crate::http::make_stateless(&mut request);
            crate::http::declare_framing_capability(&mut request);
            let mut headers = http::HeaderMap::new();
            headers.insert(
                http::header::ACCEPT,
                http::HeaderValue::from_static("application/json, text/event-stream"),
            );
            crate::http::add_request_headers(&request, &mut headers);
            let response = self
                .http
                .post(&endpoint)
                .headers(headers)
                .json(&request)
                .send()
                .await
                .map_err(|e| fail("request", &e))?;
            let status = response.status();
            if !status.is_success() {
                let text = error_text(response.bytes_stream(), 1024).await;
                return Err(fail("response", &format_args!("HTTP {status}: {text}")));
            }
            let event_stream = response
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| Mapping::from_content_type(Some(v)) == Some(Mapping::Sse));
            let body = read_at_most(response, MAX_DISCOVERY_BYTES)
                .await
                .map_err(|e| fail("response", &e))?;
            let message = if event_stream {
                discover_event(&body).map_err(|e| fail("response", &e))?
            } else {
                body
            };
            let response: Value =
                serde_json::from_slice(&message).map_err(|e| fail("response", &e))?;
            let discovery =
                ServerDiscovery::from_discover(&response).map_err(|e| fail("result", &e))?;
            Ok(Resolution {
                endpoint: endpoint.clone(),
                discovery,
            })
        })
    }
}

/// The whole body of `response`, refused past `max` bytes.
async fn read_at_most(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > max {
            return Err(format!("the body is larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The data of the first `message` event of an SSE body that is a JSON-RPC response (a server
/// answering `server/discover` on an event stream, as rmcp does).
fn discover_event(body: &[u8]) -> Result<Vec<u8>, String> {
    let mut parser = SseParser::with_max_event_data(MAX_DISCOVERY_BYTES);
    let mut events = Vec::new();
    parser.feed(body, &mut events).map_err(|e| e.to_string())?;
    events
        .into_iter()
        .find(|event| {
            crate::mapping::sse::is_message_event(event.event.as_deref())
                && crate::jsonrpc::is_response(&event.data)
        })
        .map(|event| event.data.into_bytes())
        .ok_or_else(|| "no JSON-RPC response in the event stream".to_owned())
}

/// At most `max` bytes of an error response's body, as diagnostic text: the body is not drained,
/// and its bytes are shown, never trusted.
pub(crate) async fn error_text(
    body: impl Stream<Item = Result<Bytes, reqwest::Error>>,
    max: usize,
) -> String {
    let mut body = std::pin::pin!(body);
    let mut prefix = Vec::new();
    while prefix.len() < max {
        match body.next().await {
            Some(Ok(bytes)) => {
                let take = bytes.len().min(max - prefix.len());
                prefix.extend_from_slice(&bytes[..take]);
            }
            _ => break,
        }
    }
    // Diagnostics only, never a message: lossy is fine, and the peer-chosen text is shown with
    // its control characters escaped (SPEC.md §3.1).
    crate::frame::abort::Escaped(&String::from_utf8_lossy(&prefix)).to_string()
}

#[cfg(test)]
mod tests {
    use super::discover_event;

    #[test]
    fn a_discovery_on_an_event_stream_is_its_first_response_event_after_a_priming_event_and_a_notification()
     {
        let response = r#"{"jsonrpc":"2.0","id":"discover","result":{"capabilities":{}}}"#;
        let notification =
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"x"}}"#;
        let body = format!(
            "id: 0\r\ndata: \r\n\r\n: keep-alive\r\nevent: message\r\ndata: {notification}\r\n\r\n\
             data: {response}\r\n\r\n"
        );
        assert_eq!(discover_event(body.as_bytes()).unwrap(), response.as_bytes());
    }

    #[test]
    fn an_event_stream_without_a_response_is_no_discovery() {
        let body = b"id: 0\ndata: \n\n: keep-alive\n\nevent: other\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
        assert_eq!(
            discover_event(body).unwrap_err(),
            "no JSON-RPC response in the event stream"
        );
    }
}
