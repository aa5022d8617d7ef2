//! [`FramingHttpClient::auto_retry`]: rmcp's requests sent through a [`RetryingClient`]
//! (SPEC.md §17.13).

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue};
use rmcp::transport::streamable_http_client::{StreamableHttpError, StreamableHttpPostResponse};
use serde_json::Value;

use super::client::{FramingClientError, FramingHttpClient, message_event};
use crate::client::{EndpointResolver, RetrySchedule, RetryingClient};
use crate::ids::RequestKey;

impl FramingHttpClient {
    /// Sends every request through a [`RetryingClient`] over this client's reqwest client and
    /// mapping: each attempt goes where `resolver` says (the transport's URI is not used), and a cut, keyed request is retried by itself, with the same request key, where
    /// the server's contract declares deduplication (or the request is idempotent), under
    /// `schedule`. rmcp sees one response per request: the verified final response, or one
    /// JSON-RPC error with the last attempt's classification and the attempts made; every
    /// attempt and decision is recorded through [`telemetry`](crate::telemetry). Call it after
    /// [`binary`](Self::binary) or [`compat`](Self::compat).
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
    /// assert_eq!(client.retry_stats().unwrap().snapshot().retries, 0);
    /// ```
    #[must_use]
    pub fn auto_retry(mut self, resolver: impl EndpointResolver, schedule: RetrySchedule) -> Self {
        let client = RetryingClient::with_shared_resolver(self.http.clone(), Arc::new(resolver))
            .schedule(schedule)
            .mapping(self.mapping);
        self.retrying = Some(client);
        self
    }

    /// The retry counters, when [`auto_retry`](Self::auto_retry) is on.
    ///
    /// # Examples
    ///
    /// See [`auto_retry`](Self::auto_retry).
    #[must_use]
    pub fn retry_stats(&self) -> Option<Arc<crate::client::RetryStats>> {
        self.retrying.as_ref().map(RetryingClient::stats)
    }
}

/// Sends one rmcp request (with an id) through `retrying`.
pub(super) fn post_request(
    retrying: &RetryingClient,
    mut request: Value,
    auth_header: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
) -> Result<StreamableHttpPostResponse, StreamableHttpError<FramingClientError>> {
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let key = RequestKey::random();
    crate::request::set_request_key(&mut request, key)
        .map_err(|e| StreamableHttpError::Client(e.into()))?;
    let mut headers: HeaderMap = custom_headers.into_iter().collect();
    if let Some(auth) = auth_header {
        if let Ok(value) = HeaderValue::from_str(&format!("Bearer {auth}")) {
            headers.insert(http::header::AUTHORIZATION, value);
        }
    }
    let messages = retrying
        .stream(request, headers)
        .map_err(|e| StreamableHttpError::UnexpectedServerResponse(e.to_string().into()))?;
    let events = messages
        .map(move |item| {
            Ok(message_event(match item {
                Ok(text) => text,
                Err(err) => err.to_error_response(&id, key),
            }))
        })
        .boxed();
    Ok(StreamableHttpPostResponse::Sse(events, None))
}
