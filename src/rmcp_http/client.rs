//! The client side: [`FramingHttpClient`], rmcp's `StreamableHttpClient` that opts in and hands
//! rmcp only verified messages.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures_core::Stream;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use serde_json::{Value, json};

use super::{OUTCOME_DATA_KEY, is_final_response};
use crate::decoder::StreamDecoder;
use crate::http::{Delivery, Mapping, ReceiveError, VerifiedResponse, opt_in_headers};
use crate::ids::RequestKey;
use crate::outcome::Outcome;
use crate::telemetry::{AttemptContext, FramingMetrics};

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
    /// Responses that failed otherwise (aborted by the server, corrupt, unframed).
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
/// let err = FramingClientError::NotFramed { content_type: None };
/// assert!(err.to_string().contains("not framed"));
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
    /// A request's response was not framed although the client opted in (fail closed).
    #[error(
        "response is not framed (content-type {content_type:?}) although framing was requested"
    )]
    NotFramed {
        /// The response's content type.
        content_type: Option<String>,
    },
}

/// rmcp's `StreamableHttpClient` over reqwest that opts in to framing and hands rmcp only
/// verified messages (client side).
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
    pub(super) binary: bool,
    stats: Arc<ClientStats>,
    pub(super) metrics: Option<Arc<FramingMetrics>>,
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
            binary: false,
            stats: Arc::default(),
            metrics: None,
            retrying: None,
        }
    }

    /// Records every response's [`Outcome`] in `metrics` (issue 3's counters and `tracing`
    /// events), with the request key and the endpoint.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mcp_framing::FramingMetrics;
    /// use mcp_framing::rmcp_http::FramingHttpClient;
    /// let metrics = Arc::new(FramingMetrics::new());
    /// let client = FramingHttpClient::new(reqwest::Client::new()).metrics(metrics.clone());
    /// assert_eq!(metrics.snapshot().abandoned, 0);
    /// # let _ = client;
    /// ```
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<FramingMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Asks for the binary mapping (`application/vnd.mcp-framing`) instead of SSE.
    ///
    /// # Examples
    ///
    /// ```
    /// let client = mcp_framing::rmcp_http::FramingHttpClient::new(reqwest::Client::new()).binary(true);
    /// # let _ = client;
    /// ```
    #[must_use]
    pub fn binary(mut self, binary: bool) -> Self {
        self.binary = binary;
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

/// The JSON-RPC error a caller gets for a response that did not complete: code `-32603`,
/// a message naming the classification, and `data[OUTCOME_DATA_KEY]` with its fields.
fn outcome_error<E: std::error::Error>(
    id: &Value,
    key: RequestKey,
    err: &ReceiveError<E>,
) -> String {
    let outcome = err.outcome();
    let classification = outcome
        .as_ref()
        .map_or("contract_violation", |o| o.verdict.name());
    // Issue 3's retry decision for this request, which carried a key.
    let retry = outcome.as_ref().map(|o| {
        crate::retry::RetryPolicy::default().decide(o, &crate::retry::RequestTraits::keyed(key))
    });
    let mut data = json!({
        "classification": classification,
        "kind": err.kind(),
        "detail": err.to_string(),
        "requestKey": key.to_string(),
        "retryDecision": retry.as_ref().map_or("do_not_retry", |r| r.name()),
    });
    if let Some(outcome) = &outcome {
        data["regime"] = format!("{:?}", outcome.regime).into();
        data["framesReceived"] = outcome.received.frames.into();
        data["bytesReceived"] = outcome.received.bytes.into();
        data["messagesVerified"] = outcome.received.messages.into();
        data["openMessageBytes"] = outcome.received.open_message_bytes.into();
    }
    let message = match &outcome {
        Some(outcome) => format!("mcp-framing: response {}", outcome.verdict),
        None => format!("mcp-framing: response failed: {err}"),
    };
    json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": -32603, "message": message, "data": {OUTCOME_DATA_KEY: data}}})
    .to_string()
}

type SseItem = Result<sse_stream::Sse, sse_stream::Error>;

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
    metrics: Option<Arc<FramingMetrics>>,
    endpoint: Arc<str>,
}

impl<S> Pending<S>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Unpin,
{
    fn record(&self, outcome: Option<&Outcome>) {
        if let (Some(metrics), Some(outcome)) = (&self.metrics, outcome) {
            let ctx = AttemptContext::default()
                .request_key(self.key)
                .endpoint(&self.endpoint);
            metrics.record(outcome, &ctx);
        }
    }

    /// The next message for rmcp, and whether more may follow.
    async fn next_event(&mut self) -> Option<(String, bool)> {
        loop {
            match self.verified.next().await? {
                Ok(Delivery::Message(message)) => {
                    self.stats.verified_messages.fetch_add(1, Ordering::Relaxed);
                    let text = String::from_utf8_lossy(message.bytes()).into_owned();
                    if !is_final_response(&text) {
                        return Some((text, true));
                    }
                    self.held = Some(text);
                }
                Ok(_) => {
                    // Delivery::Complete: the sentinel arrived.
                    self.stats.complete.fetch_add(1, Ordering::Relaxed);
                    self.record(self.verified.outcome());
                    return self.held.take().map(|text| (text, false));
                }
                Err(err) => {
                    let counter = if err.is_abandoned() {
                        &self.stats.abandoned
                    } else {
                        &self.stats.failed
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    self.record(
                        self.verified
                            .outcome()
                            .cloned()
                            .or_else(|| err.outcome())
                            .as_ref(),
                    );
                    self.held = None;
                    return Some((outcome_error(&self.id, self.key, &err), false));
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
        if let (Some(retrying), ClientJsonRpcMessage::Request(_)) = (&self.retrying, &message) {
            let request = serde_json::to_value(&message)
                .map_err(|e| StreamableHttpError::Client(e.into()))?;
            return super::retrying::post_request(retrying, request, auth_header, custom_headers);
        }
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
        headers.extend(opt_in_headers(key, self.binary));
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
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if !status.is_success() {
            return Err(StreamableHttpError::UnexpectedServerResponse(
                format!("HTTP {status}").into(),
            ));
        }
        let Some(id) = request_id else {
            // A notification or a response: nothing is awaited, the body is ignored.
            return Ok(StreamableHttpPostResponse::Accepted);
        };
        let Some(mapping) = Mapping::from_content_type(content_type.as_deref()) else {
            self.stats.failed.fetch_add(1, Ordering::Relaxed);
            return Err(StreamableHttpError::Client(FramingClientError::NotFramed {
                content_type,
            }));
        };
        let decoder = StreamDecoder::builder().expect_request_key(key).build();
        let verified = VerifiedResponse::new(response.bytes_stream(), mapping, decoder);
        let state = Pending {
            verified,
            held: None,
            id,
            key,
            stats: self.stats.clone(),
            metrics: self.metrics.clone(),
            endpoint: uri,
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
        _uri: Arc<str>,
        _session_id: Option<Arc<str>>,
        _last_event_id: Option<String>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<
        futures_util::stream::BoxStream<'static, SseItem>,
        StreamableHttpError<FramingClientError>,
    > {
        // The standalone GET stream carries no response to a request; it is not framed, and a
        // stateless server offers none.
        Err(StreamableHttpError::ServerDoesNotSupportSse)
    }
}
