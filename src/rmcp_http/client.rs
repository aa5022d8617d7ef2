//! The client side: [`FramingHttpClient`], rmcp's `StreamableHttpClient` that sends every request
//! through the attempt engine of [`client`](crate::client) and hands rmcp only verified messages.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use super::SseItem;
use super::error::FramingClientError;
use crate::client::{
    Call, CallError, ClientStats, Config, EndpointResolver, Item, RetrySchedule, RetryStats, Route,
    SESSION_HEADER, State, TransportLimits, error_text, post,
};
use crate::mapping::Mapping;

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<FramingClientError>>;

/// rmcp's `StreamableHttpClient` over reqwest that opts in to framing and hands rmcp only
/// verified messages (client side).
///
/// Every request goes through the attempt engine that [`RetryingClient`](crate::client::RetryingClient)
/// uses: one attempt, or bounded retries with [`auto_retry`](Self::auto_retry). Every option
/// (the mapping, the idle timeout, accepting ambiguity, rmcp's response limits, custom headers,
/// authorization, the session) means the same with and without retries, whatever the order of
/// the builder calls.
///
/// - **The contract.** The client reads the framing contract from the `initialize` or
///   `server/discover` result the server answers (SPEC.md §11.2) and builds its policy there: a
///   server that declares none (Regime C) fails the handshake with a configuration error, before
///   any tool call, unless [`accept_ambiguity`](Self::accept_ambiguity); a later
///   re-initialization that weakens it fails closed (§11.5). Every later request is decoded with
///   the negotiated limits and announces them.
/// - **Limits.** Those configured in rmcp's `StreamableHttpClientTransportConfig` hold too. Each
///   framed message is bounded by both `max_sse_event_size` and `max_json_response_size` (it
///   stands for an SSE event or a JSON body), §15-mapped frames are kept small enough for their
///   events to fit `max_sse_event_size`, and these limits travel with every request
///   (`Mcp-Framing-Limits`, SPEC.md §11.3) so that the server frames within them and aborts a
///   message that cannot fit (code 5) rather than send it. Each response also has an
///   [idle timeout](Self::idle_timeout) between frames (default 60 s).
/// - **What rmcp gets.** Verified messages only, byte for byte (a verified message that is not
///   UTF-8 fails the request; nothing is replaced); a response that is abandoned, aborted,
///   corrupt or unframed reaches the caller as a JSON-RPC error for the pending request whose
///   `data` holds the outcome report under [`OUTCOME_DATA_KEY`](crate::client::OUTCOME_DATA_KEY)
///   (SPEC.md §11.7), never as a parse error. An HTTP error status is a transport error, as
///   rmcp's own client makes it (`404` on a session: the session expired).
/// - **Mapping.** The compatible SSE mapping by default (SPEC.md §18), in which the messages
///   stay plain MCP events; [`binary`](Self::binary) and [`mapping`](Self::mapping) ask for
///   another.
/// - The standalone GET stream is not framed; a JSON-RPC response on it is refused
///   ([`FramingClientError::ResponseOnGetStream`]).
///
/// # Examples
///
/// ```no_run
/// use mcp_framing::rmcp_http::FramingHttpClient;
/// use rmcp::transport::StreamableHttpClientTransport;
/// use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
///
/// let client = FramingHttpClient::new(reqwest::Client::new());
/// let transport = StreamableHttpClientTransport::with_client(
///     client.clone(),
///     StreamableHttpClientTransportConfig::with_uri("http://127.0.0.1:8080/mcp"),
/// );
/// # let _ = transport;
/// ```
#[derive(Clone, Debug)]
pub struct FramingHttpClient {
    config: Arc<Config>,
    state: Arc<State>,
    /// Set by [`auto_retry`](Self::auto_retry): every request without a known session is
    /// resolved through it.
    resolver: Option<Arc<dyn EndpointResolver>>,
    /// The endpoint that issued each session, when requests are resolved: the session's
    /// requests, notifications and streams go there (SPEC.md §17.13).
    sessions: Arc<Mutex<HashMap<String, String>>>,
}

impl FramingHttpClient {
    /// A client over `http`: one attempt per request, the compatible SSE mapping asked for.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use mcp_framing::{client::OUTCOME_DATA_KEY, rmcp_http::FramingHttpClient};
    /// use rmcp::ServiceExt;
    /// use rmcp::model::CallToolRequestParams;
    /// use rmcp::transport::StreamableHttpClientTransport;
    /// use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = FramingHttpClient::new(reqwest::Client::new());
    /// let transport = StreamableHttpClientTransport::with_client(
    ///     client,
    ///     StreamableHttpClientTransportConfig::with_uri("http://127.0.0.1:8080/mcp"),
    /// );
    /// // `initialize` fails here if the server declares no framing contract (Regime C).
    /// let peer = ().serve(transport).await?;
    /// match peer.call_tool(CallToolRequestParams::new("render_report")).await {
    ///     Ok(result) => println!("verified result: {:?}", result.content),
    ///     // A response cut on the way: a JSON-RPC error with the outcome report, never a parse error.
    ///     Err(rmcp::ServiceError::McpError(error)) => {
    ///         println!("outcome: {:?}", error.data.as_ref().map(|data| &data[OUTCOME_DATA_KEY]));
    ///     }
    ///     Err(err) => return Err(err.into()),
    /// }
    /// # Ok(()) }
    /// # let _ = run;
    /// ```
    #[must_use]
    pub fn new(http: reqwest::Client) -> Self {
        let mut config = Config::new(http);
        config.schedule = RetrySchedule::default().max_attempts(1);
        Self {
            config: Arc::new(config),
            state: Arc::default(),
            resolver: None,
            sessions: Arc::default(),
        }
    }

    fn config_mut(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    crate::client::option_setters!(
        "mcp_framing::rmcp_http::FramingHttpClient::new(reqwest::Client::new())"
    );

    /// Asks for the compatible SSE mapping (SPEC.md §18: `Mcp-Framing-Mapping: compat`, the
    /// default), in which the messages stay plain MCP events that gateways and tools can read;
    /// `false` asks for the SSE mapping of §15 instead if compat was asked for. Whatever it asks
    /// for, the client reads the mapping the response declares (a server without the compatible
    /// mapping answers in §15's).
    ///
    /// # Examples
    ///
    /// ```
    /// let client = mcp_framing::rmcp_http::FramingHttpClient::new(reqwest::Client::new()).compat(false);
    /// # let _ = client;
    /// ```
    // Hidden: a shorthand for `mapping(Mapping::Compat)` the tests use; `mapping` is the one setter.
    #[doc(hidden)]
    #[must_use]
    pub fn compat(mut self, compat: bool) -> Self {
        self.config_mut()
            .ask_for(Mapping::Compat, compat, Mapping::Sse);
        self
    }

    /// Retries a cut request by itself (SPEC.md §17.13), as [`RetryingClient`](crate::client::RetryingClient)
    /// does, with this client's options: each attempt goes where `resolver` says (the transport's
    /// URI is not used for requests) and is checked against the contract of its resolution, and a
    /// cut, keyed request is retried with the same request key where the server's contract
    /// declares deduplication (or the request is idempotent), under `schedule`. A request that
    /// carries a session (`Mcp-Session-Id`, rmcp's legacy session mode) goes, with its retries,
    /// to the endpoint that issued the session, as do the session's notifications, its GET stream
    /// and its DELETE. rmcp sees one response per request: the verified final response, or one
    /// JSON-RPC error with the last attempt's outcome report; every attempt and decision is
    /// recorded through [`telemetry`](crate::telemetry).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::client::{DiscoveringResolver, RetrySchedule};
    /// use mcp_framing::rmcp_http::FramingHttpClient;
    ///
    /// let http = reqwest::Client::new();
    /// let resolver = DiscoveringResolver::new(http.clone(), ["http://10.0.0.1/mcp", "http://10.0.0.2/mcp"]);
    /// let client = FramingHttpClient::new(http).auto_retry(resolver, RetrySchedule::default());
    /// # let _ = client;
    /// ```
    #[must_use]
    pub fn auto_retry(mut self, resolver: impl EndpointResolver, schedule: RetrySchedule) -> Self {
        self.config_mut().schedule = schedule;
        self.resolver = Some(Arc::new(resolver));
        self
    }

    /// The response counters (shared by clones of this client).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::rmcp_http::FramingHttpClient;
    /// let client = FramingHttpClient::new(reqwest::Client::new());
    /// let stats = client.stats(); // keep it: the rmcp transport takes the client
    /// assert_eq!((stats.complete(), stats.abandoned(), stats.failed()), (0, 0, 0));
    /// ```
    // Hidden: the metrics (`telemetry`, `mcp_framing.client.*`) are the one way to watch a client;
    // these counters are the tests' view (read through this accessor; the types have no path).
    #[doc(hidden)]
    #[must_use]
    pub fn stats(&self) -> Arc<ClientStats> {
        self.state.responses.clone()
    }

    /// The call and retry counters, when [`auto_retry`](Self::auto_retry) is on.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::client::{DiscoveringResolver, RetrySchedule};
    /// use mcp_framing::rmcp_http::FramingHttpClient;
    /// let http = reqwest::Client::new();
    /// assert!(FramingHttpClient::new(http.clone()).retry_stats().is_none()); // one attempt
    /// let resolver = DiscoveringResolver::new(http.clone(), ["http://127.0.0.1:1/mcp"]);
    /// let client = FramingHttpClient::new(http).auto_retry(resolver, RetrySchedule::default());
    /// assert_eq!(client.retry_stats().unwrap().snapshot().retries, 0);
    /// ```
    // Hidden: the metrics (`telemetry`, `mcp_framing.client.*`) are the one way to watch a client;
    // these counters are the tests' view (read through this accessor; the types have no path).
    #[doc(hidden)]
    #[must_use]
    pub fn retry_stats(&self) -> Option<Arc<RetryStats>> {
        self.resolver.as_ref().map(|_| self.state.calls.clone())
    }

    /// The endpoint that issued `session`, when requests are resolved and the session was
    /// issued through them.
    fn session_endpoint(&self, session: Option<&str>) -> Option<String> {
        self.resolver.as_ref().and(session).and_then(|session| {
            self.sessions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(session)
                .cloned()
        })
    }

    /// Where a message of `session` goes: the endpoint that issued the session when requests are
    /// resolved, else the transport's URI.
    fn endpoint_for(&self, uri: &str, session: Option<&str>) -> String {
        self.session_endpoint(session)
            .unwrap_or_else(|| uri.to_owned())
    }

    /// Posts a message that awaits no response (a notification, or a response to the server).
    async fn post_unawaited(
        &self,
        endpoint: &str,
        message: &ClientJsonRpcMessage,
        mut headers: HeaderMap,
        session_attached: bool,
        max_error_text: usize,
    ) -> PostResult {
        headers.insert(
            http::header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        let body =
            serde_json::to_vec(message).map_err(|e| StreamableHttpError::Client(e.into()))?;
        let response = post(&self.config.http, endpoint, headers, body)
            .await
            .map_err(|e| StreamableHttpError::Client(e.into()))?;
        let status = response.status();
        if status.is_success() {
            // Nothing is awaited: the body is ignored.
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(status_error(status, session_attached, response, max_error_text).await)
    }
}

/// The transport error for an HTTP error status, as rmcp's own client reports it: `404` on a
/// session is an expired session (rmcp then re-initializes), any other status carries at most
/// `max` bytes of the body as diagnostic text.
async fn status_error(
    status: StatusCode,
    session_attached: bool,
    response: reqwest::Response,
    max: usize,
) -> StreamableHttpError<FramingClientError> {
    if status == StatusCode::NOT_FOUND && session_attached {
        return StreamableHttpError::SessionExpired;
    }
    let text = error_text(response.bytes_stream(), max).await;
    status_text_error(status, &text, session_attached)
}

fn status_text_error(
    status: StatusCode,
    text: &str,
    session_attached: bool,
) -> StreamableHttpError<FramingClientError> {
    if status == StatusCode::NOT_FOUND && session_attached {
        return StreamableHttpError::SessionExpired;
    }
    StreamableHttpError::UnexpectedServerResponse(format!("HTTP {status}: {text}").into())
}

/// A verified message (or the JSON-RPC error the engine built) as the SSE event rmcp reads.
fn message_event(data: String) -> sse_stream::Sse {
    sse_stream::Sse {
        event: Some("message".to_owned()),
        data: Some(data),
        id: None,
        retry: None,
    }
}

/// The headers every attempt of a request carries: rmcp's (protocol version, method, name),
/// the authorization, the session.
fn request_headers(
    custom_headers: HashMap<HeaderName, HeaderValue>,
    auth_header: Option<&str>,
    session_id: Option<&str>,
) -> HeaderMap {
    let mut headers: HeaderMap = custom_headers.into_iter().collect();
    if let Some(auth) = auth_header {
        if let Ok(value) = HeaderValue::from_str(&format!("Bearer {auth}")) {
            headers.insert(http::header::AUTHORIZATION, value);
        }
    }
    if let Some(session_id) = session_id {
        if let Ok(value) = HeaderValue::from_str(session_id) {
            headers.insert(SESSION_HEADER, value);
        }
    }
    headers
}

impl StreamableHttpClient for FramingHttpClient {
    type Error = FramingClientError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> PostResult {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> PostResult {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    /// Sends `message` through the attempt engine, opted in, and verifies the response within
    /// `limits` (rmcp 3.11): a framed message is bounded by both `max_sse_event_size` and
    /// `max_json_response_size`, a §15-mapped frame's event by `max_sse_event_size`, and the
    /// diagnostic text kept from an error response by `max_error_response_size`.
    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> PostResult {
        let session = session_id.as_deref();
        let headers = request_headers(custom_headers, auth_header.as_deref(), session);
        let known = self.session_endpoint(session);
        if !matches!(message, ClientJsonRpcMessage::Request(_)) {
            let endpoint = known.unwrap_or_else(|| uri.to_string());
            let max = limits.max_error_response_size;
            return self
                .post_unawaited(&endpoint, &message, headers, session.is_some(), max)
                .await;
        }
        let request =
            serde_json::to_value(&message).map_err(|e| StreamableHttpError::Client(e.into()))?;
        let route = match (&self.resolver, known) {
            // SPEC.md §17.13: a session lives on the instance that issued it.
            (Some(_), Some(endpoint)) => Route::Session(endpoint),
            (Some(resolver), None) => Route::Resolve(resolver.clone()),
            (None, _) => Route::Endpoint(uri.to_string()),
        };
        let transport = TransportLimits {
            max_message_size: Some(
                limits.max_sse_event_size.min(limits.max_json_response_size) as u64
            ),
            max_sse_event: Some(limits.max_sse_event_size),
            max_error_text: limits.max_error_response_size,
        };
        let call = Call::new(
            self.config.clone(),
            self.state.clone(),
            route,
            request,
            headers,
            transport,
        );
        let mut call = match call {
            Ok(call) => call,
            Err(CallError::RequestKey(err)) => {
                return Err(StreamableHttpError::Client(err.into()));
            }
            Err(err) => {
                return Err(StreamableHttpError::UnexpectedServerResponse(
                    err.to_string().into(),
                ));
            }
        };
        // The first attempt that gets a framed body (or the end of the call) before rmcp gets the
        // response: its session is the response's.
        if let Err(err) = call.open().await {
            if let Some((status, text)) = err.http_status() {
                return Err(status_text_error(status, text, session.is_some()));
            }
            let events = futures_util::stream::iter([Ok(message_event(call.error_response(&err)))]);
            return Ok(StreamableHttpPostResponse::Sse(
                events.boxed(),
                call.session().map(str::to_owned),
            ));
        }
        let issued = call.session().map(str::to_owned);
        if let (Some(_), Some(issued)) = (&self.resolver, &issued) {
            self.sessions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(issued.clone(), call.endpoint().to_owned());
        }
        let events = futures_util::stream::unfold(Some(call), |call| async move {
            let mut call = call?;
            let (data, more) = match call.next().await? {
                Ok(Item::Message(message)) => (message, true),
                Ok(Item::Response(response)) => (response, false),
                Err(err) => (call.error_response(&err), false),
            };
            Some((Ok(message_event(data)), more.then_some(call)))
        });
        let events: BoxStream<'static, SseItem> = events.boxed();
        Ok(StreamableHttpPostResponse::Sse(events, issued))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<FramingClientError>> {
        let endpoint = self.endpoint_for(&uri, Some(&session_id));
        let headers = request_headers(custom_headers, auth_header.as_deref(), Some(&session_id));
        self.config
            .http
            .delete(endpoint)
            .headers(headers)
            .send()
            .await
            .map_err(|e| StreamableHttpError::Client(e.into()))?;
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&*session_id);
        Ok(())
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, SseItem>, StreamableHttpError<FramingClientError>> {
        let max = StreamableHttpResponseLimits::default().max_sse_event_size;
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max,
        )
        .await
    }

    /// Opens the standalone GET stream (server-initiated requests and notifications of a
    /// session): not framed, since it answers no request, so every event is bounded by
    /// `max_sse_event_size` (rmcp 3.11) and a JSON-RPC response on it ends it with
    /// [`FramingClientError::ResponseOnGetStream`] (responses are only accepted framed, on
    /// their POST). A server without one (`405`) is `ServerDoesNotSupportSse`, which rmcp skips.
    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, SseItem>, StreamableHttpError<FramingClientError>> {
        let session = session_id.as_deref();
        let endpoint = self.endpoint_for(&uri, session);
        let mut headers = request_headers(custom_headers, auth_header.as_deref(), session);
        headers.insert(
            http::header::ACCEPT,
            HeaderValue::from_static(crate::mapping::EVENT_STREAM),
        );
        let mut request = self.config.http.get(endpoint).headers(headers);
        if let Some(last_event_id) = last_event_id {
            request = request.header("last-event-id", last_event_id);
        }
        let response = request
            .send()
            .await
            .map_err(|e| StreamableHttpError::Client(e.into()))?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !status.is_success() {
            let max = StreamableHttpResponseLimits::default().max_error_response_size;
            return Err(status_error(status, session.is_some(), response, max).await);
        }
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        if Mapping::from_content_type(content_type.as_deref()) != Some(Mapping::Sse) {
            return Err(StreamableHttpError::UnexpectedContentType(content_type));
        }
        Ok(super::standalone::events(response.bytes_stream(), max_sse_event_size).boxed())
    }
}
