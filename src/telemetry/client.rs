//! The client's metric names and the functions that record an attempt's outcome, its retry
//! decision and its operation: what the client engine calls. The table of metrics is in the
//! [`telemetry`](super) module; the tests are beside it (`telemetry/tests.rs`).

use std::time::Duration;

use metrics::{Unit, counter, describe_counter, describe_histogram, histogram};

use crate::error::Truncation;
use crate::ids::RequestKey;
use crate::outcome::{Outcome, Verdict};
use crate::retry::RetryDecision;

/// `mcp.client.operation.duration`: histogram, seconds (OpenTelemetry semantic conventions for
/// MCP): a logical request from sending until its final result, retries included.
pub(crate) const CLIENT_OPERATION_DURATION: &str = "mcp.client.operation.duration";
/// `mcp_framing.client.responses`: counter of response streams (attempts), by `outcome`.
pub(crate) const CLIENT_RESPONSES: &str = "mcp_framing.client.responses";
/// `mcp_framing.client.sentinel_missing`: counter of final responses delivered without their
/// STREAM_END sentinel (clean in Regime B, SPEC.md §7 row 4), by `mcp.method.name`.
pub(crate) const CLIENT_SENTINEL_MISSING: &str = "mcp_framing.client.sentinel_missing";
/// `mcp_framing.client.truncations`: counter of abandoned streams, by where they stopped (`at`).
pub(crate) const CLIENT_TRUNCATIONS: &str = "mcp_framing.client.truncations";
/// `mcp_framing.client.incomplete_bytes`: counter of bytes received by streams that did not
/// complete.
pub(crate) const CLIENT_INCOMPLETE_BYTES: &str = "mcp_framing.client.incomplete_bytes";
/// `mcp_framing.client.open_message_bytes`: counter of the bytes of messages left open by
/// streams that did not complete (received, never delivered).
pub(crate) const CLIENT_OPEN_MESSAGE_BYTES: &str = "mcp_framing.client.open_message_bytes";
/// `mcp_framing.client.retry_decisions`: counter of retry decisions, by `decision` and `reason`.
pub(crate) const CLIENT_RETRY_DECISIONS: &str = "mcp_framing.client.retry_decisions";
/// `mcp_framing.client.retries`: counter of requests sent again, by `reason`.
pub(crate) const CLIENT_RETRIES: &str = "mcp_framing.client.retries";

/// Registers the unit and description of every metric above with the installed recorder (call
/// once after installing it; exporters use them for `# HELP` lines and units).
///
pub(crate) fn describe() {
    describe_histogram!(
        CLIENT_OPERATION_DURATION,
        Unit::Seconds,
        "Duration of an MCP request from sending until its final result, retries included"
    );
    describe_counter!(
        CLIENT_RESPONSES,
        Unit::Count,
        "Framed response streams received, by verdict"
    );
    describe_counter!(
        CLIENT_SENTINEL_MISSING,
        Unit::Count,
        "Final responses delivered although the stream's sentinel was cut (clean, Regime B)"
    );
    describe_counter!(
        CLIENT_TRUNCATIONS,
        Unit::Count,
        "Response streams abandoned before their sentinel, by where they stopped"
    );
    describe_counter!(
        CLIENT_INCOMPLETE_BYTES,
        Unit::Bytes,
        "Bytes received by response streams that did not complete"
    );
    describe_counter!(
        CLIENT_OPEN_MESSAGE_BYTES,
        Unit::Bytes,
        "Bytes of messages left open by response streams that did not complete"
    );
    describe_counter!(
        CLIENT_RETRY_DECISIONS,
        Unit::Count,
        "Retry decisions after a response stream ended, by decision and reason"
    );
    describe_counter!(
        CLIENT_RETRIES,
        Unit::Count,
        "Requests sent again after a response that did not complete"
    );
}

/// What the telemetry knows of one attempt besides its outcome. The attempt id comes from the
/// outcome's stream head.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) struct AttemptContext<'a> {
    /// The request key the request carried (else the one the stream head echoed is used).
    pub(crate) request_key: Option<RequestKey>,
    /// The endpoint the attempt was sent to, if known.
    pub(crate) endpoint: Option<&'a str>,
    /// The JSON-RPC method (`mcp.method.name`), if known.
    pub(crate) method: Option<&'a str>,
    /// The tool name of a `tools/call` (`gen_ai.tool.name`), if known.
    pub(crate) tool: Option<&'a str>,
    /// Which attempt of the logical request this was (1 for the first).
    pub(crate) attempt: u32,
}

impl<'a> AttemptContext<'a> {
    /// Sets the request key.
    #[must_use]
    pub(crate) fn request_key(mut self, key: RequestKey) -> Self {
        self.request_key = Some(key);
        self
    }

    /// Sets the endpoint.
    #[must_use]
    pub(crate) fn endpoint(mut self, endpoint: &'a str) -> Self {
        self.endpoint = Some(endpoint);
        self
    }

    /// Sets the JSON-RPC method.
    #[must_use]
    pub(crate) fn method(mut self, method: &'a str) -> Self {
        self.method = Some(method);
        self
    }

    /// Sets the tool name (for a `tools/call`).
    #[must_use]
    pub(crate) fn tool(mut self, tool: &'a str) -> Self {
        self.tool = Some(tool);
        self
    }

    /// Sets the attempt number (1 for the first).
    #[must_use]
    pub(crate) fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }
}

/// Records one response stream: its `tracing` event (`WARN` for every outcome that is not clean
/// and for a final response delivered without its sentinel, `DEBUG` for a clean one with it,
/// target `mcp_framing`, with the structured fields `outcome`, `regime`, `sentinel_seen`,
/// `frames`, `bytes`, `messages`, `message_bytes`, `last_sequence`, `request_key`, `attempt_id`,
/// `endpoint`, `method`, `attempt` and `detail`; `request_key` is the key's
/// [fingerprint](crate::RequestKey::fingerprint), never the key) and its metrics
/// ([`CLIENT_RESPONSES`]; for a response delivered without its sentinel
/// [`CLIENT_SENTINEL_MISSING`]; for a stream that did not complete [`CLIENT_TRUNCATIONS`],
/// [`CLIENT_INCOMPLETE_BYTES`], [`CLIENT_OPEN_MESSAGE_BYTES`]).
pub(crate) fn record_outcome(outcome: &Outcome, ctx: &AttemptContext<'_>) {
    let name = outcome.verdict.name();
    let method = ctx.method.unwrap_or("");
    counter!(CLIENT_RESPONSES, "outcome" => name, "regime" => regime_label(outcome), "mcp.method.name" => method.to_owned())
        .increment(1);
    if outcome.is_clean() && !outcome.sentinel_seen {
        // SPEC.md §7 row 4, §11.6: delivered, not retried, but the sentinel was cut.
        counter!(CLIENT_SENTINEL_MISSING, "mcp.method.name" => method.to_owned()).increment(1);
    }
    if !outcome.is_clean() {
        if let Verdict::Abandoned { at } = &outcome.verdict {
            counter!(CLIENT_TRUNCATIONS, "at" => truncation_label(at.as_ref()), "mcp.method.name" => method.to_owned())
                .increment(1);
        }
        counter!(CLIENT_INCOMPLETE_BYTES, "outcome" => name).increment(outcome.received.bytes);
        counter!(CLIENT_OPEN_MESSAGE_BYTES, "outcome" => name)
            .increment(outcome.received.open_message_bytes);
    }
    emit(outcome, ctx);
}

/// Records a retry decision ([`CLIENT_RETRY_DECISIONS`]) and its `tracing` event. Whoever then
/// sends the request again also calls [`record_retry`].
pub(crate) fn record_decision(decision: &RetryDecision, ctx: &AttemptContext<'_>) {
    let reason = reason_label(decision);
    counter!(CLIENT_RETRY_DECISIONS, "decision" => decision.name(), "reason" => reason)
        .increment(1);
    tracing::event!(
        target: "mcp_framing",
        tracing::Level::INFO,
        decision = decision.name(),
        reason = reason,
        request_key = ctx.request_key.map(|key| tracing::field::display(key.fingerprint())),
        endpoint = ctx.endpoint,
        method = ctx.method,
        attempt = ctx.attempt,
        detail = %decision,
        "retry decision"
    );
}

/// Records that a request is sent again after `decision` ([`CLIENT_RETRIES`]); `ctx.attempt`
/// is the number of the attempt about to be sent (2 for the first retry).
pub(crate) fn record_retry(decision: &RetryDecision, ctx: &AttemptContext<'_>) {
    let method = ctx.method.unwrap_or("").to_owned();
    counter!(CLIENT_RETRIES, "reason" => reason_label(decision), "mcp.method.name" => method)
        .increment(1);
    tracing::event!(
        target: "mcp_framing",
        tracing::Level::INFO,
        reason = reason_label(decision),
        request_key = ctx.request_key.map(|key| tracing::field::display(key.fingerprint())),
        endpoint = ctx.endpoint,
        method = ctx.method,
        attempt = ctx.attempt,
        "sending the request again"
    );
}

/// Records a logical request's duration in [`CLIENT_OPERATION_DURATION`] with OpenTelemetry's
/// MCP attributes: `error_type` is the failure (a [`Verdict::name`], or a JSON-RPC error code)
/// or `None` when the request got its result.
pub(crate) fn record_operation(
    ctx: &AttemptContext<'_>,
    elapsed: Duration,
    error_type: Option<&str>,
) {
    let mut labels = vec![
        ("mcp.method.name", ctx.method.unwrap_or("").to_owned()),
        ("network.transport", "tcp".to_owned()),
        ("network.protocol.name", "http".to_owned()),
    ];
    if let Some(tool) = ctx.tool {
        labels.push(("gen_ai.tool.name", tool.to_owned()));
    }
    if let Some(error_type) = error_type {
        labels.push(("error.type", error_type.to_owned()));
    }
    if let Some((host, port)) = ctx.endpoint.and_then(server_address) {
        labels.push(("server.address", host.to_owned()));
        labels.push(("server.port", port.to_owned()));
    }
    histogram!(CLIENT_OPERATION_DURATION, &labels).record(elapsed.as_secs_f64());
}

/// Host and port of an `http(s)://host[:port]/...` endpoint (the default port when none).
fn server_address(endpoint: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = endpoint.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let default_port = if scheme.eq_ignore_ascii_case("https") {
        "443"
    } else {
        "80"
    };
    Some(match authority.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && !host.ends_with(':') => (host, port),
        _ => (authority, default_port),
    })
}

fn regime_label(outcome: &Outcome) -> &'static str {
    outcome.regime.name()
}

fn truncation_label(at: Option<&Truncation>) -> &'static str {
    match at {
        None => "transport",
        Some(Truncation::NoFrame) => "no_frame",
        Some(Truncation::InHeader { .. }) => "in_header",
        Some(Truncation::InPayload { .. }) => "in_payload",
        Some(Truncation::InMessage { .. }) => "in_message",
        Some(Truncation::BetweenMessages { .. }) => "between_messages",
    }
}

fn reason_label(decision: &RetryDecision) -> &'static str {
    decision.reason().name()
}

fn emit(outcome: &Outcome, ctx: &AttemptContext<'_>) {
    let request_key = ctx
        .request_key
        .or_else(|| outcome.head.and_then(|head| head.request_key));
    let attempt_id = outcome.head.map(|head| head.attempt_id);
    macro_rules! event {
        ($level:expr, $message:literal) => {
            tracing::event!(
                target: "mcp_framing",
                $level,
                outcome = outcome.verdict.name(),
                regime = %outcome.regime,
                sentinel_seen = outcome.sentinel_seen,
                frames = outcome.received.frames,
                bytes = outcome.received.bytes,
                messages = outcome.received.messages,
                message_bytes = outcome.received.open_message_bytes,
                last_sequence = outcome.received.last_sequence,
                request_key = request_key.map(|key| tracing::field::display(key.fingerprint())),
                attempt_id = attempt_id.map(tracing::field::display),
                endpoint = ctx.endpoint,
                method = ctx.method,
                attempt = ctx.attempt,
                detail = %outcome.verdict,
                $message
            )
        };
    }
    if outcome.is_clean() && outcome.sentinel_seen {
        event!(tracing::Level::DEBUG, "framed stream complete");
    } else if outcome.is_clean() {
        event!(
            tracing::Level::WARN,
            "final response delivered without its sentinel: the stream was cut after it"
        );
    } else {
        event!(
            tracing::Level::WARN,
            "response stream did not complete cleanly"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::server_address;

    #[test]
    fn server_address_reads_host_and_port_of_endpoints() {
        assert_eq!(
            server_address("http://127.0.0.1:8080/mcp"),
            Some(("127.0.0.1", "8080"))
        );
        assert_eq!(
            server_address("https://mcp.example.com/mcp?x=1"),
            Some(("mcp.example.com", "443"))
        );
        assert_eq!(
            server_address("http://user@[::1]:9/mcp"),
            Some(("[::1]", "9"))
        );
        assert_eq!(server_address("not a url"), None);
    }
}
