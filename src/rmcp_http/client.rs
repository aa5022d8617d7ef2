//! The client side: [`FramingHttpClient`], rmcp's `StreamableHttpClient` that opts in and hands
//! rmcp only verified messages.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_core::Stream;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde_json::{Value, json};

use super::{OUTCOME_DATA_KEY, SseItem, is_final_response};
use crate::decoder::StreamDecoder;
use crate::frame::HEADER_LEN;
use crate::http::{
    DEFAULT_IDLE_TIMEOUT, Delivery, Mapping, ReceiveError, VerifiedResponse, opt_in_headers_with,
};
use crate::ids::RequestKey;
use crate::limits::{DEFAULT_MAX_FRAME_PAYLOAD, MIN_MAX_FRAME_PAYLOAD};
use crate::outcome::Outcome;
use crate::retry::{RequestTraits, RetryDecision, RetryPolicy};
use crate::sse::event_data_limit;
use crate::telemetry::{self, AttemptContext};

/// Counters a [`FramingHttpClient`] keeps (shared by its clones).
///
/// # Examples
///
/// ```
/// let client = mcp_framing::rmcp_http::FramingHttpClient::new(reqwest::Client::new());
/// assert_eq!(client.stats().abandoned(), 0);
/// ```
#[derive(Debug, Default)]
pub struct ClientStats {
    verified_messages: AtomicU64,
    complete: AtomicU64,
    abandoned: AtomicU64,
    failed: AtomicU64,
}

impl ClientStats {
    /// Messages verified and handed to rmcp.
    ///
    /// # Examples
    ///
    /// See [`ClientStats`].
    #[must_use]
    pub fn verified_messages(&self) -> u64 {
        self.verified_messages.load(Ordering::Relaxed)
    }
    /// Responses that ended with their sentinel.
    ///
    /// # Examples
    ///
    /// See [`ClientStats`].
    #[must_use]
    pub fn complete(&self) -> u64 {
        self.complete.load(Ordering::Relaxed)
    }
    /// Responses cut before their sentinel (truncated, or the body failed).
    ///
    /// # Examples
    ///
    /// See [`ClientStats`].
    #[must_use]
    pub fn abandoned(&self) -> u64 {
        self.abandoned.load(Ordering::Relaxed)
    }
    /// Responses that failed otherwise (aborted by the server, corrupt, unframed, or carrying a
    /// verified message that is not UTF-8).
    ///
    /// # Examples
    ///
    /// See [`ClientStats`].
    #[must_use]
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// Errors of [`FramingHttpClient`] that rmcp reports as transport errors.
///
/// # Examples
///
/// ```
/// use mcp_framing::rmcp_http::FramingClientError;
/// let err = FramingClientError::from(serde_json::from_str::<u8>("x").unwrap_err());
/// assert!(err.to_string().starts_with("serialize request: "));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FramingClientError {
    /// The HTTP request failed.
    #[error("http: {0}")]
    Http(#[from] reqwest::Error),
    /// The request could not be serialized.
    #[error("serialize request: {0}")]
    Serialize(#[from] serde_json::Error),
    /// The request key could not be written into `params._meta`.
    #[error("request key: {0}")]
    RequestKey(#[from] crate::request::RequestKeyError),
    /// A JSON-RPC response arrived on the standalone GET stream. Responses are framed and
    /// verified on the POST that asked for them; one on the GET stream (a replay after a
    /// reconnection, a misbehaving server) cannot be verified, so the stream ends there.
    #[error(
        "a JSON-RPC response on the GET stream cannot be verified (responses are framed on the POST that asked for them)"
    )]
    ResponseOnGetStream,
}

/// rmcp's `StreamableHttpClient` over reqwest that opts in to framing and hands rmcp only
/// verified messages (client side).
///
/// Limits: the ones configured in rmcp's `StreamableHttpClientTransportConfig` hold. Each framed
/// message is bounded by both `max_sse_event_size` and `max_json_response_size` (it stands for an
/// SSE event or a JSON body), SSE-mapped frames are kept small enough for their events to fit
/// `max_sse_event_size`, and these limits travel with every request (`Mcp-Framing-Limits`,
/// SPEC.md §11.3) so that the server frames within them and aborts a message that cannot fit
/// (code 5) rather than send it. Each response also has an [idle timeout](Self::idle_timeout)
/// between frames (default 60 s). The standalone GET stream is not framed; a JSON-RPC response on
/// it is refused ([`FramingClientError::ResponseOnGetStream`]).
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
    pub(super) http: reqwest::Client,
    /// The mapping asked for (the response may declare another one the client also reads).
    pub(super) mapping: Mapping,
    idle_timeout: Option<Duration>,
    stats: Arc<ClientStats>,
    /// Set by `auto_retry` (rmcp_http/retrying.rs): requests go through it.
    pub(super) retrying: Option<crate::client::RetryingClient>,
}

impl FramingHttpClient {
    /// A client over `http` that asks for the SSE mapping.
    ///
    /// # Examples
    ///
    /// See [`FramingHttpClient`].
    #[must_use]
    pub fn new(http: reqwest::Client) -> Self {
        Self {
            http,
            mapping: Mapping::Sse,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            stats: Arc::default(),
            retrying: None,
        }
    }

    /// Sets the idle timeout of every response: the longest time between two frames before the
    /// response is abandoned (default [`DEFAULT_IDLE_TIMEOUT`], 60 s; `None`: wait for ever). The
    /// pending request then gets a JSON-RPC error with the classification `abandoned` and the
    /// kind `IdleTimeout`, retried like any abandoned response. See
    /// [`VerifiedResponse::idle_timeout`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let client = mcp_framing::rmcp_http::FramingHttpClient::new(reqwest::Client::new())
    ///     .idle_timeout(Some(Duration::from_secs(300)));
    /// # let _ = client;
    /// ```
    #[must_use]
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Asks for the binary mapping (`application/vnd.mcp-framing`) instead of SSE; `false` goes
    /// back to the SSE mapping of §15 if binary was asked for.
    ///
    /// # Examples
    ///
    /// ```
    /// let client = mcp_framing::rmcp_http::FramingHttpClient::new(reqwest::Client::new()).binary(true);
    /// # let _ = client;
    /// ```
    #[must_use]
    pub fn binary(self, binary: bool) -> Self {
        self.ask_for(Mapping::Binary, binary)
    }

    /// Asks for the compatible SSE mapping (SPEC.md §18: `Mcp-Framing-Mapping: compat`), in
    /// which the messages stay plain MCP events that gateways and tools can read; `false` goes
    /// back to the SSE mapping of §15 if compat was asked for. Whatever it asks for, the client
    /// reads the mapping the response declares (a server without the compatible mapping answers
    /// in §15's).
    ///
    /// # Examples
    ///
    /// ```
    /// let client = mcp_framing::rmcp_http::FramingHttpClient::new(reqwest::Client::new()).compat(true);
    /// # let _ = client;
    /// ```
    #[must_use]
    pub fn compat(self, compat: bool) -> Self {
        self.ask_for(Mapping::Compat, compat)
    }

    /// Asks for `mapping` if `ask`; otherwise back to the SSE mapping of §15 if `mapping` was
    /// asked for.
    fn ask_for(mut self, mapping: Mapping, ask: bool) -> Self {
        if ask {
            self.mapping = mapping;
        } else if self.mapping == mapping {
            self.mapping = Mapping::Sse;
        }
        self
    }

    /// The counters (shared by clones of this client).
    ///
    /// # Examples
    ///
    /// See [`ClientStats`].
    #[must_use]
    pub fn stats(&self) -> Arc<ClientStats> {
        self.stats.clone()
    }
}

/// How a framed response is bounded under rmcp's transport limits (rmcp 3.11
/// `StreamableHttpResponseLimits`): each framed message is one JSON-RPC message, which rmcp would
/// otherwise have received as an SSE event or a JSON body, so it is bounded by both limits; in the
/// SSE mapping the frames are also kept small enough for their events to fit the SSE limit; in the
/// compatible mapping an event carries a whole message, bounded by the SSE limit as rmcp would.
#[derive(Clone, Copy, Debug)]
struct ReceiveLimits {
    max_frame_payload: u32,
    max_message_size: u64,
}

impl ReceiveLimits {
    fn new(limits: &StreamableHttpResponseLimits, mapping: Mapping) -> Self {
        let max_message_size = limits.max_sse_event_size.min(limits.max_json_response_size) as u64;
        // The largest frame whose event data, 4 * ceil((20 + payload) / 3), fits the SSE limit.
        let fitting = (limits.max_sse_event_size / 4 * 3).saturating_sub(HEADER_LEN);
        let max_frame_payload = if mapping == Mapping::Sse {
            u32::try_from(fitting)
                .unwrap_or(u32::MAX)
                .clamp(MIN_MAX_FRAME_PAYLOAD, DEFAULT_MAX_FRAME_PAYLOAD)
        } else {
            DEFAULT_MAX_FRAME_PAYLOAD
        };
        Self {
            max_frame_payload,
            max_message_size,
        }
    }

    /// The bound on one SSE event of a response in `mapping`: one frame (§15) or one message
    /// (the compatible mapping, §18.7), within rmcp's SSE event limit.
    fn event_bound(&self, limits: &StreamableHttpResponseLimits, mapping: Mapping) -> usize {
        let bound = if mapping == Mapping::Compat {
            crate::limits::compat_event_data_limit(self.max_message_size)
        } else {
            event_data_limit(self.max_frame_payload)
        };
        bound.min(limits.max_sse_event_size)
    }

    fn decoder(&self, key: RequestKey) -> StreamDecoder {
        StreamDecoder::builder()
            .max_frame_payload(self.max_frame_payload)
            .max_message_size(self.max_message_size)
            .expect_request_key(key)
            .build()
    }
}

/// At most `max` bytes of an error response's body, as diagnostic text (rmcp's
/// `max_error_response_size`): the body is not drained, and its bytes are shown, never trusted.
async fn error_text(
    mut body: impl Stream<Item = Result<Bytes, reqwest::Error>> + Unpin,
    max: usize,
) -> String {
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

/// The JSON-RPC error for the pending request `id`: code `-32603`, `message`, and
/// `data[OUTCOME_DATA_KEY]` = `data`.
fn request_error(id: &Value, message: &str, data: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": -32603, "message": message, "data": {OUTCOME_DATA_KEY: data}}})
    .to_string()
}

/// The JSON-RPC error a caller gets for a verified message that is not UTF-8. JSON-RPC text is
/// UTF-8 (RFC 8259), and replacing bytes would alter a message whose digest was verified, so
/// the request fails. The bytes are what the server sent: a retry would get them again.
fn invalid_utf8_error(id: &Value, key: RequestKey, index: u64, err: std::str::Utf8Error) -> String {
    let detail = format!(
        "verified message {index} is not valid UTF-8 (invalid byte at offset {})",
        err.valid_up_to()
    );
    let data = json!({
        "classification": "invalid_message",
        "kind": "InvalidUtf8",
        "detail": detail,
        "requestKeyFingerprint": key.fingerprint().to_string(),
        "retryDecision": "do_not_retry",
    });
    request_error(id, &format!("mcp-framing: {detail}"), data)
}

/// The JSON-RPC error a caller gets for a response that did not complete: code `-32603`,
/// a message naming the classification, and `data[OUTCOME_DATA_KEY]` with its fields.
fn outcome_error<E: std::error::Error>(
    id: &Value,
    key: RequestKey,
    err: &ReceiveError<E>,
    outcome: Option<&Outcome>,
    retry: Option<&RetryDecision>,
) -> String {
    let classification = outcome.map_or("contract_violation", |o| o.verdict.name());
    let mut data = json!({
        "classification": classification,
        "kind": err.kind(),
        "detail": err.to_string(),
        "requestKeyFingerprint": key.fingerprint().to_string(),
        "retryDecision": retry.map_or("do_not_retry", RetryDecision::name),
    });
    if let Some(outcome) = outcome {
        data["regime"] = format!("{:?}", outcome.regime).into();
        data["framesReceived"] = outcome.received.frames.into();
        data["bytesReceived"] = outcome.received.bytes.into();
        data["messagesVerified"] = outcome.received.messages.into();
        data["openMessageBytes"] = outcome.received.open_message_bytes.into();
    }
    let message = match outcome {
        Some(outcome) => format!("mcp-framing: response {}", outcome.verdict),
        None => format!("mcp-framing: response failed: {err}"),
    };
    request_error(id, &message, data)
}

pub(super) fn message_event(data: String) -> sse_stream::Sse {
    sse_stream::Sse {
        event: Some("message".to_owned()),
        data: Some(data),
        id: None,
        retry: None,
    }
}

/// One response being verified for rmcp.
struct Pending<S> {
    verified: VerifiedResponse<S>,
    /// The final response, held back until the sentinel: rmcp stops reading a POST stream once
    /// it has the response, so the stream's completion is decided here, before.
    held: Option<String>,
    id: Value,
    key: RequestKey,
    stats: Arc<ClientStats>,
    call: CallLabels,
}

/// What the telemetry records of a request besides its outcome.
struct CallLabels {
    endpoint: Arc<str>,
    method: String,
    tool: Option<String>,
    started: Instant,
}

impl CallLabels {
    fn new(endpoint: Arc<str>, request: &Value) -> Self {
        let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
        Self {
            endpoint,
            method: text(request.get("method")).unwrap_or_default(),
            tool: text(request.get("params").and_then(|p| p.get("name"))),
            started: Instant::now(),
        }
    }

    fn context(&self, key: RequestKey) -> AttemptContext<'_> {
        let ctx = AttemptContext::default()
            .request_key(key)
            .endpoint(&self.endpoint)
            .method(&self.method)
            .attempt(1);
        match &self.tool {
            Some(tool) => ctx.tool(tool),
            None => ctx,
        }
    }

    /// Records the request's outcome, the retry decision for it (a request carrying a key)
    /// and, since this is the request's last attempt, its duration.
    fn record(
        &self,
        key: RequestKey,
        outcome: &Outcome,
        error_type: Option<&str>,
    ) -> RetryDecision {
        let ctx = self.context(key);
        telemetry::record_outcome(outcome, &ctx);
        let decision = RetryPolicy::default().decide(outcome, &RequestTraits::keyed(key));
        if !outcome.is_clean() {
            telemetry::record_decision(&decision, &ctx);
        }
        telemetry::record_operation(&ctx, self.started.elapsed(), error_type);
        decision
    }
}

/// The JSON-RPC error code of a response message, if it is an error response.
fn error_code(response: &str) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Response {
        error: Option<ErrorObject>,
    }
    #[derive(serde::Deserialize)]
    struct ErrorObject {
        code: i64,
    }
    serde_json::from_str::<Response>(response)
        .ok()?
        .error
        .map(|e| e.code)
}

impl<S> Pending<S>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Unpin,
{
    /// The next message for rmcp, and whether more may follow.
    async fn next_event(&mut self) -> Option<(String, bool)> {
        loop {
            match self.verified.next().await? {
                Ok(Delivery::Message(message)) => {
                    let text = match std::str::from_utf8(message.bytes()) {
                        Ok(text) => text.to_owned(),
                        Err(err) => {
                            // Never altered (no lossy replacement): the request fails.
                            self.stats.failed.fetch_add(1, Ordering::Relaxed);
                            self.held = None;
                            let ctx = self.call.context(self.key);
                            let elapsed = self.call.started.elapsed();
                            telemetry::record_operation(&ctx, elapsed, Some("invalid_message"));
                            let index = message.summary().index;
                            return Some((
                                invalid_utf8_error(&self.id, self.key, index, err),
                                false,
                            ));
                        }
                    };
                    self.stats.verified_messages.fetch_add(1, Ordering::Relaxed);
                    if !is_final_response(&text) {
                        return Some((text, true));
                    }
                    self.held = Some(text);
                }
                Ok(_) => {
                    // Delivery::Complete: the sentinel arrived.
                    self.stats.complete.fetch_add(1, Ordering::Relaxed);
                    if let Some(outcome) = self.verified.outcome() {
                        let code = self.held.as_deref().and_then(error_code);
                        let error_type = code.map(|c| c.to_string());
                        self.call.record(self.key, outcome, error_type.as_deref());
                    }
                    return self.held.take().map(|text| (text, false));
                }
                Err(err) => {
                    let counter = if err.is_abandoned() {
                        &self.stats.abandoned
                    } else {
                        &self.stats.failed
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    let outcome = self.verified.outcome().cloned().or_else(|| err.outcome());
                    let decision = outcome.as_ref().map(|outcome| {
                        self.call
                            .record(self.key, outcome, Some(outcome.verdict.name()))
                    });
                    self.held = None;
                    let error = outcome_error(
                        &self.id,
                        self.key,
                        &err,
                        outcome.as_ref(),
                        decision.as_ref(),
                    );
                    return Some((error, false));
                }
            }
        }
    }
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
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<FramingClientError>> {
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
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<FramingClientError>> {
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

    /// Sends `message`, opted in, and verifies the response within `limits` (rmcp 3.11): a
    /// framed message is bounded by both `max_sse_event_size` and `max_json_response_size`, an
    /// SSE-mapped frame's event by `max_sse_event_size`, and the diagnostic text kept from an
    /// error response by `max_error_response_size`.
    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<FramingClientError>> {
        if let (Some(retrying), ClientJsonRpcMessage::Request(_)) = (&self.retrying, &message) {
            // auto_retry: every attempt resolved, verified and retried by the RetryingClient
            // (its limits are the negotiated contract's).
            let request = serde_json::to_value(&message)
                .map_err(|e| StreamableHttpError::Client(e.into()))?;
            return super::retrying::post_request(retrying, request, auth_header, custom_headers);
        }
        let receive = ReceiveLimits::new(&limits, self.mapping);
        let key = RequestKey::random();
        let mut value =
            serde_json::to_value(&message).map_err(|e| StreamableHttpError::Client(e.into()))?;
        let request_id = match &message {
            ClientJsonRpcMessage::Request(_) => value.get("id").cloned(),
            _ => None,
        };
        if request_id.is_some() {
            crate::request::set_request_key(&mut value, key)
                .map_err(|e| StreamableHttpError::Client(e.into()))?;
            crate::http::declare_framing_capability(&mut value);
        }
        let mut headers = HeaderMap::new();
        for (name, value) in custom_headers {
            headers.insert(name, value);
        }
        // The limits it decodes with travel with the opt-in, so the server frames within them
        // (SPEC.md §11.3, §16).
        let decoder = receive.decoder(key);
        headers.extend(opt_in_headers_with(key, self.mapping, &decoder));
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(session_id) = session_id {
            if let Ok(value) = HeaderValue::from_str(&session_id) {
                headers.insert(HeaderName::from_static("mcp-session-id"), value);
            }
        }
        let mut request = self.http.post(uri.as_ref()).headers(headers);
        if let Some(auth) = auth_header {
            request = request.bearer_auth(auth);
        }
        let body = serde_json::to_vec(&value).map_err(|e| StreamableHttpError::Client(e.into()))?;
        let response = request
            .body(body)
            .send()
            .await
            .map_err(|e| StreamableHttpError::Client(e.into()))?;
        let status = response.status();
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if !status.is_success() {
            let text = error_text(response.bytes_stream(), limits.max_error_response_size).await;
            return Err(StreamableHttpError::UnexpectedServerResponse(
                format!("HTTP {status}: {text}").into(),
            ));
        }
        let Some(id) = request_id else {
            // A notification or a response: nothing is awaited, the body is ignored.
            return Ok(StreamableHttpPostResponse::Accepted);
        };
        let call = CallLabels::new(uri, &value);
        // Decided from the headers, before the body (SPEC.md §16): a response that is not
        // framed is a contract violation whatever its body holds, never a truncation.
        let headers = response.headers().clone();
        // The event bound follows the mapping the response declares (a server without the
        // compatible mapping answers in §15's); unframed, it fails below anyway.
        let declared = Mapping::from_response_headers(&headers).unwrap_or(self.mapping);
        let max_event_data = receive.event_bound(&limits, declared);
        let verified = VerifiedResponse::from_headers(response.bytes_stream(), &headers, decoder)
            .map(|verified| {
                verified
                    .max_event_data(max_event_data)
                    .idle_timeout(self.idle_timeout)
            });
        let verified = match verified {
            Ok(verified) => verified,
            Err(err) => {
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
                let outcome = err.outcome();
                let decision = outcome
                    .as_ref()
                    .map(|outcome| call.record(key, outcome, Some(outcome.verdict.name())));
                let error = outcome_error(&id, key, &err, outcome.as_ref(), decision.as_ref());
                let event = Ok(message_event(error));
                let events = futures_util::stream::iter([event]).boxed();
                return Ok(StreamableHttpPostResponse::Sse(events, session));
            }
        };
        let state = Pending {
            verified,
            held: None,
            id,
            key,
            stats: self.stats.clone(),
            call,
        };
        let events = futures_util::stream::unfold(Some(state), |state| async move {
            let mut state = state?;
            let (data, next) = state.next_event().await?;
            Some((Ok(message_event(data)), next.then_some(state)))
        })
        .boxed();
        let events: futures_util::stream::BoxStream<'static, SseItem> = events;
        Ok(StreamableHttpPostResponse::Sse(events, session))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<FramingClientError>> {
        let mut request = self
            .http
            .delete(uri.as_ref())
            .header("mcp-session-id", session_id.as_ref());
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        if let Some(auth) = auth_header {
            request = request.bearer_auth(auth);
        }
        request
            .send()
            .await
            .map_err(|e| StreamableHttpError::Client(e.into()))?;
        Ok(())
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<
        futures_util::stream::BoxStream<'static, SseItem>,
        StreamableHttpError<FramingClientError>,
    > {
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
    ) -> Result<
        futures_util::stream::BoxStream<'static, SseItem>,
        StreamableHttpError<FramingClientError>,
    > {
        let mut request = self
            .http
            .get(uri.as_ref())
            .header(http::header::ACCEPT, crate::http::EVENT_STREAM);
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        if let Some(session_id) = session_id {
            request = request.header("mcp-session-id", session_id.as_ref());
        }
        if let Some(last_event_id) = last_event_id {
            request = request.header("last-event-id", last_event_id);
        }
        if let Some(auth) = auth_header {
            request = request.bearer_auth(auth);
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
            let text = error_text(response.bytes_stream(), max).await;
            return Err(StreamableHttpError::UnexpectedServerResponse(
                format!("HTTP {status}: {text}").into(),
            ));
        }
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        if crate::http::Mapping::from_content_type(content_type.as_deref())
            != Some(crate::http::Mapping::Sse)
        {
            return Err(StreamableHttpError::UnexpectedContentType(content_type));
        }
        Ok(super::standalone::events(response.bytes_stream(), max_sse_event_size).boxed())
    }
}
