//! Server-side metrics of the deduplication engine, through the [`metrics`] facade (SPEC.md
//! §17.15): any installed recorder (a Prometheus or OpenTelemetry exporter, or `metrics-util`'s
//! debugging recorder in tests) collects them; without one each costs an atomic load.
//!
//! | metric | kind | labels | what |
//! |---|---|---|---|
//! | [`DECISIONS`] (`mcp_framing.dedupe.decisions`) | counter | `decision` (`execute`, `replay`, `refused`, `unprotected`), `reason` (a refusal's [`reason`](super::Refusal::reason), else empty), `mcp.method.name` | every keyed call decided |
//! | [`WAITS`] (`mcp_framing.dedupe.waits`) | counter | `decision` (what the wait ended in: the [`Decision::name`](super::Decision::name) values) | duplicates that found their key in flight and waited |
//! | [`WAIT_DURATION`] (`mcp_framing.dedupe.wait.duration`) | histogram, seconds | `decision` | how long those duplicates waited |
//! | [`COMPLETIONS`] (`mcp_framing.dedupe.completions`) | counter | `recorded` (`stored`, `not_stored`, `lease_lost`, `store_error`) | results recorded, or not |
//! | [`LEASES_LOST`] (`mcp_framing.dedupe.leases_lost`) | counter | `detected` (`heartbeat`, `completion`) | claims taken over while their holder still ran: the call may have executed twice |
//! | [`EVICTIONS`] (`mcp_framing.dedupe.evictions`) | counter | `record` (`completed`, `expired_claim`) | records a bounded store removed before their retention to make room: each is a key whose retry executes again |
//! | [`STORE_DURATION`] (`mcp_framing.dedupe.store.duration`) | histogram, seconds | `operation` (`claim`, `renew`, `complete`, `release`), `outcome` (`ok` or the [`StoreError::kind`]) | every store operation, as the engine waited for it |
//! | [`SERVER_OPERATION_DURATION`] (`mcp.server.operation.duration`) | histogram, seconds | `mcp.method.name`, `error.type` (only when it failed), `rpc.response.status_code` (a JSON-RPC error's code), `mcp_framing.dedupe.decision` | a keyed call from its decision until its final result (OpenTelemetry's MCP semantic conventions) |
//!
//! `mcp.server.operation.duration` is recorded for the keyed calls the engine decides: from the
//! start of [`Deduplicator::begin`](super::Deduplicator::begin) until the refusal or the replay
//! (answered at once), or until an executed call's result is recorded. `error.type` is the
//! JSON-RPC error code of a refusal or of a stored error result (as a string, with
//! `rpc.response.status_code`), `tool_error` for a result with `isError: true`, and
//! `no_final_response` for an execution that ended without one. `gen_ai.tool.name` is left
//! out on purpose: the engine sees the tool name before the server validated it, and a peer
//! would mint one series per name it makes up. Unprotected executions (fail open) are counted
//! in [`DECISIONS`] but not timed: the engine does not see their end.
//!
//! [`StoreError::kind`]: super::StoreError::kind

use std::time::Duration;

use metrics::{counter, histogram};

use super::store::StoreError;
pub(crate) use crate::telemetry::server::*;


/// One keyed call decided: `decided` and `reason` label [`DECISIONS`] (`refused` and the
/// refusal's reason, or the decision's name and nothing), `name`
/// ([`Decision::name`](super::Decision::name)) labels [`WAITS`] and [`WAIT_DURATION`]. The
/// deduplicator reads them off its decision, so this file does not import it.
pub(crate) fn decision(
    (decided, reason): (&'static str, &'static str),
    name: &'static str,
    method: &str,
    waited: Option<Duration>,
) {
    counter!(DECISIONS, "decision" => decided, "reason" => reason, "mcp.method.name" => method.to_owned())
        .increment(1);
    if let Some(waited) = waited {
        counter!(WAITS, "decision" => name).increment(1);
        histogram!(WAIT_DURATION, "decision" => name).record(waited.as_secs_f64());
    }
}

pub(crate) fn store_operation(
    operation: &'static str,
    elapsed: Duration,
    outcome: Result<(), &StoreError>,
) {
    let outcome = match outcome {
        Ok(()) => "ok",
        Err(err) => err.kind(),
    };
    histogram!(STORE_DURATION, "operation" => operation, "outcome" => outcome)
        .record(elapsed.as_secs_f64());
}

pub(crate) fn completion(recorded: &'static str) {
    counter!(COMPLETIONS, "recorded" => recorded).increment(1);
}

pub(crate) fn lease_lost(detected: &'static str) {
    counter!(LEASES_LOST, "detected" => detected).increment(1);
}

pub(crate) fn evicted(record: &'static str) {
    counter!(EVICTIONS, "record" => record).increment(1);
}

/// How a keyed call ended, for `mcp.server.operation.duration`.
pub(crate) enum Ended {
    /// A result without `isError: true`.
    Ok,
    /// A result with `isError: true` (MCP's tool error).
    ToolError,
    /// A JSON-RPC error (a refusal, or a stored error result), with its code.
    JsonRpcError(i64),
    /// Something else went wrong (the `error.type`).
    Other(&'static str),
}

pub(crate) fn operation(method: &str, decision: &'static str, elapsed: Duration, ended: Ended) {
    let mut labels = vec![
        ("mcp.method.name", method.to_owned()),
        ("mcp_framing.dedupe.decision", decision.to_owned()),
    ];
    match ended {
        Ended::Ok => {}
        Ended::ToolError => labels.push(("error.type", "tool_error".to_owned())),
        Ended::JsonRpcError(code) => {
            labels.push(("error.type", code.to_string()));
            labels.push(("rpc.response.status_code", code.to_string()));
        }
        Ended::Other(error) => labels.push(("error.type", error.to_owned())),
    }
    histogram!(SERVER_OPERATION_DURATION, &labels).record(elapsed.as_secs_f64());
}

#[cfg(test)]
mod tests;
