//! Why a call ended without its final response, and the one JSON-RPC error shape every client
//! hands its caller for it (SPEC.md §11.7).

use http::StatusCode;
use serde_json::{Map, Value, json};

use super::resolver::ResolveError;
use crate::contract::ContractError;
use crate::http::ReceiveError;
use crate::ids::RequestKey;
use crate::outcome::Outcome;
use crate::retry::RetryDecision;

/// What an observer ([`RetryingClient::observe`](super::RetryingClient::observe)) learns about each attempt that ended: its
/// number, endpoint and classification, and the retry decision taken on it (`None` for a clean
/// attempt that delivered the final response).
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use mcp_framing::client::{AttemptReport, DiscoveringResolver, RetryingClient};
///
/// // A log line per attempt that ended: which attempt, where, how, and what was decided.
/// let log = Arc::new(Mutex::new(Vec::<String>::new()));
/// let lines = log.clone();
/// let http = reqwest::Client::new();
/// let resolver = DiscoveringResolver::new(http.clone(), ["http://127.0.0.1:1/mcp"]);
/// let client = RetryingClient::new(http, resolver).observe(move |report: &AttemptReport<'_>| {
///     let decision = report.decision.map_or("delivered", |d| d.name());
///     lines.lock().unwrap().push(format!(
///         "{} attempt {} at {}: {} ({decision})",
///         report.request_key, report.attempt, report.endpoint, report.outcome.verdict.name(),
///     ));
/// });
/// assert!(log.lock().unwrap().is_empty()); // no call made yet
/// # let _ = client;
/// ```
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

/// Key under a JSON-RPC error's `data` where a client puts the outcome report of a request that
/// failed (SPEC.md §11.7): the same members whichever client produced it.
///
/// # Examples
///
/// ```
/// use mcp_framing::client::OUTCOME_DATA_KEY;
/// use serde_json::json;
///
/// /// How the framing client classified a failed request, if the error is its report and not
/// /// the server's own JSON-RPC error.
/// fn framing_failure(error: &serde_json::Value) -> Option<&str> {
///     error.get("data")?.get(OUTCOME_DATA_KEY)?.get("classification")?.as_str()
/// }
/// // The error a client answers in place of a response cut before its final message:
/// let cut = json!({"code": -32603, "message": "mcp-framing: response abandoned",
///     "data": {OUTCOME_DATA_KEY: {"classification": "abandoned", "kind": "Truncated", "attempts": 1}}});
/// assert_eq!(framing_failure(&cut), Some("abandoned"));
/// assert_eq!(framing_failure(&json!({"code": -32602, "message": "unknown tool"})), None);
/// ```
pub const OUTCOME_DATA_KEY: &str = "io.github.mcp-framing/outcome";

/// Why one attempt did not deliver a final response (what
/// [`CallError::Incomplete`] carries beside the attempt's classification).
///
/// # Examples
///
/// ```
/// use mcp_framing::client::AttemptError;
/// assert_eq!(AttemptError::NoFinalResponse.kind(), "NoFinalResponse");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttemptError {
    /// The request could not be sent, or its response headers did not arrive: it may or may not
    /// have reached the server.
    #[error("request failed: {0}")]
    Send(#[source] reqwest::Error),
    /// The server answered an HTTP server error (5xx) before any framed byte.
    #[error("HTTP {status}: {text}")]
    Status {
        /// The status.
        status: StatusCode,
        /// The start of the response body, as diagnostic text (control characters escaped).
        text: String,
    },
    /// The response stopped, failed verification, was aborted or was not framed.
    #[error(transparent)]
    Receive(ReceiveError<reqwest::Error>),
    /// The response stream ended complete without a final JSON-RPC response.
    #[error("the response stream ended without a final response")]
    NoFinalResponse,
    /// A message followed the final response in a complete stream (SPEC.md §1): the stream
    /// answers nothing.
    #[error("a message followed the final response: the stream answers nothing")]
    AfterFinalResponse,
}

impl AttemptError {
    /// The stable name of the error (the `kind` of the outcome report, SPEC.md §11.7): `Send`,
    /// `HttpStatus`, `NoFinalResponse`, `MessageAfterFinalResponse`, or [`ReceiveError::kind`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::client::AttemptError;
    ///
    /// let err = AttemptError::Status {
    ///     status: http::StatusCode::SERVICE_UNAVAILABLE,
    ///     text: "try later".into(),
    /// };
    /// assert_eq!(err.kind(), "HttpStatus");
    /// assert_eq!(AttemptError::AfterFinalResponse.kind(), "MessageAfterFinalResponse");
    /// ```
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Send(_) => "Send",
            Self::Status { .. } => "HttpStatus",
            Self::Receive(err) => err.kind(),
            Self::NoFinalResponse => "NoFinalResponse",
            Self::AfterFinalResponse => "MessageAfterFinalResponse",
        }
    }
}

/// Why a call ended without a final response.
///
/// # Examples
///
/// ```
/// use mcp_framing::client::CallError;
/// let err = CallError::NotARequest;
/// assert_eq!(err.to_string(), "not a JSON-RPC request (no method or no id)");
/// assert_eq!(err.kind(), "NotARequest");
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
    Resolve(#[from] ResolveError),
    /// The contract: Regime C (no framing contract) or no common ground when the policy is
    /// first built, or a downgrade on a later resolution (SPEC.md §11.3, §11.5): fail closed.
    #[error("contract: {0}")]
    Contract(#[from] ContractError),
    /// A request other than `initialize` or `server/discover` came before the endpoint's
    /// framing contract was learned from one of them (and ambiguity is not accepted).
    #[error(
        "no framing contract is known for this endpoint yet: {method} came before initialize or server/discover"
    )]
    NotDiscovered {
        /// The request's method.
        method: String,
    },
    /// A verified message is not UTF-8. JSON-RPC text is UTF-8 (RFC 8259), and replacing bytes
    /// would alter a message whose digest was verified, so the call fails; a retry would get the
    /// same bytes.
    #[error(
        "attempt {attempts}: verified message {index} is not valid UTF-8 (invalid byte at offset {valid_up_to})"
    )]
    InvalidUtf8 {
        /// Attempts made.
        attempts: u32,
        /// The message's index in its stream (0 for the first).
        index: u64,
        /// The length of its valid UTF-8 prefix.
        valid_up_to: usize,
    },
    /// The final response of a retry has several top-level `id` members: the caller's id cannot
    /// be put back by editing one of them (which one a reader takes is not defined).
    #[error("attempt {attempts}: the final response has several id members")]
    DuplicateId {
        /// Attempts made.
        attempts: u32,
    },
    /// The server answered an HTTP client error (4xx): final.
    #[error("attempt {attempts}: HTTP {status}: {text}")]
    Status {
        /// The status.
        status: StatusCode,
        /// The start of the response body, as diagnostic text (control characters escaped).
        text: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The last attempt did not complete, and was not retried (the decision says why).
    #[error("attempt {attempts}: response {}, {decision}", outcome.verdict)]
    Incomplete {
        /// The last attempt's classification.
        outcome: Box<Outcome>,
        /// The retry decision taken on it.
        decision: RetryDecision,
        /// Attempts made.
        attempts: u32,
        /// What went wrong in the last attempt.
        #[source]
        cause: AttemptError,
    },
}

impl CallError {
    /// The stable name of the error (the `kind` of the outcome report, SPEC.md §11.7).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::client::CallError;
    ///
    /// let err = CallError::NotDiscovered { method: "tools/call".into() };
    /// assert_eq!(err.kind(), "NotDiscovered");
    /// let err = CallError::Status {
    ///     status: http::StatusCode::UNAUTHORIZED,
    ///     text: String::new(),
    ///     attempts: 1,
    /// };
    /// assert_eq!(err.kind(), "HttpStatus"); // the kind of the outcome report (SPEC.md §11.7)
    /// ```
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotARequest => "NotARequest",
            Self::RequestKey(_) => "RequestKey",
            Self::Resolve(_) => "Resolve",
            Self::Contract(err) => err.kind(),
            Self::NotDiscovered { .. } => "NotDiscovered",
            Self::InvalidUtf8 { .. } => "InvalidUtf8",
            Self::DuplicateId { .. } => "DuplicateId",
            Self::Status { .. } => "HttpStatus",
            Self::Incomplete { cause, .. } => cause.kind(),
        }
    }

    /// The classification (SPEC.md §11.7): the verdict name of a response stream that ended
    /// (`abandoned`, `aborted`, ...), or `invalid_message`, `configuration_error`, `http_error`,
    /// `resolve_error`, `invalid_request`. It is also the `error.type` of the call's
    /// `mcp.client.operation.duration` (the [`telemetry`](crate::telemetry) table).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::client::CallError;
    /// assert_eq!(CallError::NotARequest.classification(), "invalid_request");
    /// ```
    #[must_use]
    pub fn classification(&self) -> &'static str {
        match self {
            Self::NotARequest | Self::RequestKey(_) => "invalid_request",
            Self::Resolve(_) => "resolve_error",
            Self::Contract(ContractError::Downgrade { .. }) => "contract_violation",
            Self::Contract(_) | Self::NotDiscovered { .. } => "configuration_error",
            Self::InvalidUtf8 { .. } | Self::DuplicateId { .. } => "invalid_message",
            Self::Status { .. } => "http_error",
            Self::Incomplete { outcome, .. } => outcome.verdict.name(),
        }
    }

    /// The HTTP status, for an error an HTTP error status caused.
    #[cfg_attr(not(feature = "rmcp-client"), allow(dead_code))] // used by rmcp_http
    pub(crate) fn http_status(&self) -> Option<(StatusCode, &str)> {
        match self {
            Self::Status { status, text, .. }
            | Self::Incomplete {
                cause: AttemptError::Status { status, text },
                ..
            } => Some((*status, text)),
            _ => None,
        }
    }

    /// The outcome report of SPEC.md §11.7 for this error of a request that carried `key` after
    /// `attempts` attempts.
    #[cfg_attr(not(feature = "rmcp-client"), allow(dead_code))] // used by rmcp_http
    fn report(&self, key: Option<RequestKey>, attempts: u32) -> Value {
        let mut report = Map::new();
        report.insert("classification".into(), self.classification().into());
        report.insert("kind".into(), self.kind().into());
        let detail = match self {
            // The precise error: the classification and the decision have members of their own.
            Self::Incomplete { cause, .. } => with_sources(cause),
            other => with_sources(other),
        };
        report.insert("detail".into(), detail.into());
        if let Some(key) = key {
            let fingerprint = key.fingerprint().to_string();
            report.insert("requestKeyFingerprint".into(), fingerprint.into());
        }
        report.insert("attempts".into(), attempts.into());
        let decision = match self {
            Self::Incomplete { decision, .. } => decision.name(),
            _ => RetryDecision::DoNotRetry(crate::retry::RetryReason::Complete).name(),
        };
        report.insert("retryDecision".into(), decision.into());
        if let Self::Incomplete {
            outcome, decision, ..
        } = self
        {
            let received = &outcome.received;
            report.insert("retryReason".into(), decision.reason().name().into());
            report.insert("regime".into(), outcome.regime.to_string().into());
            report.insert("framesReceived".into(), received.frames.into());
            report.insert("bytesReceived".into(), received.bytes.into());
            report.insert("messagesVerified".into(), received.messages.into());
            report.insert(
                "openMessageBytes".into(),
                received.open_message_bytes.into(),
            );
            if let Some(head) = &outcome.head {
                report.insert("attemptId".into(), head.attempt_id.to_string().into());
            }
        }
        if let Some((status, _)) = self.http_status() {
            report.insert("httpStatus".into(), status.as_u16().into());
        }
        Value::Object(report)
    }

    /// The JSON-RPC error response under the caller's `id` that stands for this error (SPEC.md
    /// §11.7): code `-32603`, a message naming what happened, and the outcome report under
    /// [`OUTCOME_DATA_KEY`].
    #[cfg_attr(not(feature = "rmcp-client"), allow(dead_code))] // used by rmcp_http
    pub(crate) fn error_response(
        &self,
        id: &Value,
        key: Option<RequestKey>,
        attempts: u32,
    ) -> String {
        let message = match self {
            Self::Incomplete { outcome, .. } => {
                format!("mcp-framing: response {}", outcome.verdict)
            }
            other => format!("mcp-framing: {other}"),
        };
        let response = json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32603, "message": message,
            "data": {OUTCOME_DATA_KEY: self.report(key, attempts)}}});
        response.to_string()
    }
}

/// `err`'s message followed by those of its sources that it does not already end with (a TLS
/// failure names the certificate only deep in the chain).
#[cfg_attr(not(feature = "rmcp-client"), allow(dead_code))] // used by rmcp_http
fn with_sources(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(err) = source {
        let more = err.to_string();
        if !text.ends_with(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = err.source();
    }
    text
}
