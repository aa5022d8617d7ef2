//! Telemetry: a `tracing` event per outcome, and counters and histograms through the
//! [`metrics`] facade.
//!
//! The crate installs nothing: any `tracing` subscriber receives the events, and any `metrics`
//! recorder (a Prometheus or OpenTelemetry exporter, or `metrics-util`'s debugging recorder in
//! tests) collects the metrics, with no glue. Without a recorder a metric costs an atomic load.
//!
//! The `request_key` field of every event is the key's fingerprint
//! ([`RequestKey::fingerprint`](crate::RequestKey::fingerprint)), never the key: with
//! deduplication a key can replay a stored result, and logs travel further than requests.
//!
//! [`FramingHttpClient`](crate::rmcp_http::FramingHttpClient) and
//! [`RetryingClient`](crate::client::RetryingClient) record every attempt, the failed ones before
//! retrying (a truncation then shows in dashboards even when the retry succeeds), and the
//! deduplication engine records its decisions (feature `dedupe`, second table).
//!
//! | metric | kind | labels | what |
//! |---|---|---|---|
//! | `mcp.client.operation.duration` | histogram, seconds | `mcp.method.name`, `gen_ai.tool.name`, `error.type` (only when it failed), `server.address`, `server.port`, `network.transport`, `network.protocol.name` | a logical request, from sending to its final result, retries included (OpenTelemetry's MCP semantic conventions) |
//! | `mcp_framing.client.responses` | counter | `outcome`, `regime`, `mcp.method.name` | every response stream (attempt), by verdict (`outcome="clean", regime="B"`: a final response delivered without its sentinel) |
//! | `mcp_framing.client.sentinel_missing` | counter | `mcp.method.name` | final responses delivered although their STREAM_END sentinel was cut (SPEC.md §7 row 4): clean, not retried, but a cut all the same |
//! | `mcp_framing.client.truncations` | counter | `at`, `mcp.method.name` | abandoned streams, by where they stopped |
//! | `mcp_framing.client.incomplete_bytes` | counter, bytes | `outcome` | bytes received by streams that did not complete |
//! | `mcp_framing.client.open_message_bytes` | counter, bytes | `outcome` | bytes of messages left open (never delivered) |
//! | `mcp_framing.client.retry_decisions` | counter | `decision`, `reason` | every retry decision |
//! | `mcp_framing.client.retries` | counter | `reason`, `mcp.method.name` | requests sent again (the client's retry) |
//!
//! The `outcome` label takes the [`Verdict::name`](crate::outcome::Verdict::name) values (`clean`, `abandoned`, `aborted`,
//! `corrupt`, `spliced`, `cross_wired`, `contract_violation`, `ambiguous`), which are also the
//! `error.type` of a failed operation, with the other classifications of a client's outcome
//! report (SPEC.md §11.7: `invalid_message`, `configuration_error`, `http_error`,
//! `resolve_error`, `invalid_request`); an operation answered with a JSON-RPC error has its code.
//! A clean outcome without its sentinel ([`Outcome::sentinel_seen`](crate::outcome::Outcome::sentinel_seen) `false`: the final response
//! verified, the input ended before STREAM_END) counts as `clean` in Regime `B`, in
//! `mcp_framing.client.sentinel_missing` too, and its `tracing` event is a warning naming the request key's
//! fingerprint and the attempt id.
//! [`describe`] registers the units and descriptions with the installed recorder.
//!
//! Server side, the deduplication engine (feature `dedupe`, SPEC.md §17.15):
//!
//! | metric | kind | labels | what |
//! |---|---|---|---|
//! | `mcp_framing.dedupe.decisions` | counter | `decision` (`execute`, `replay`, `refused`, `unprotected`), `reason` (a refusal's reason, e.g. `key_conflict`, else empty), `mcp.method.name` | every keyed call decided |
//! | `mcp_framing.dedupe.waits` | counter | `decision` (what the wait ended in) | duplicates that found their key in flight and waited |
//! | `mcp_framing.dedupe.wait.duration` | histogram, seconds | `decision` | how long those duplicates waited |
//! | `mcp_framing.dedupe.completions` | counter | `recorded` (`stored`, `not_stored`, `lease_lost`, `store_error`) | results recorded, or not |
//! | `mcp_framing.dedupe.leases_lost` | counter | `detected` (`heartbeat`, `completion`) | claims taken over while their holder still ran: the call may have executed twice |
//! | `mcp_framing.dedupe.evictions` | counter | `record` (`completed`, `expired_claim`) | records a bounded store removed before their retention to make room |
//! | `mcp_framing.dedupe.store.duration` | histogram, seconds | `operation` (`claim`, `renew`, `complete`, `release`), `outcome` (`ok` or the [`StoreError::kind`](crate::dedupe::StoreError::kind)) | every store operation |
//! | `mcp.server.operation.duration` | histogram, seconds | `mcp.method.name`, `error.type`, `rpc.response.status_code`, `mcp_framing.dedupe.decision` | a keyed call from its decision until its final result (OpenTelemetry's MCP semantic conventions) |
//!
//! [`describe`] registers the units and descriptions of both tables with the installed recorder.

// The recording functions and metric-name constants: the client engine's (feature `client`) and
// the deduplication engine's (feature `dedupe`).
#[cfg_attr(not(feature = "client"), allow(dead_code))]
pub(crate) mod client;
#[cfg(feature = "dedupe")]
pub(crate) mod server;
#[cfg_attr(not(feature = "client"), allow(unused_imports))] // the clients' (feature `client`)
pub(crate) use client::*;

/// Registers the unit and description of every metric in the tables above (the deduplication
/// engine's with feature `dedupe`) with the installed recorder: call once after installing it;
/// exporters use them for `# HELP` lines and units.
///
/// # Examples
///
/// ```
/// use metrics_util::debugging::DebuggingRecorder;
///
/// let recorder = DebuggingRecorder::new();
/// let snapshotter = recorder.snapshotter();
/// metrics::with_local_recorder(&recorder, || {
///     mcp_framing::telemetry::describe();
///     metrics::counter!("mcp_framing.client.responses", "outcome" => "clean").increment(1);
/// });
/// let (_, unit, description, _) = snapshotter.snapshot().into_vec().pop().unwrap();
/// assert_eq!(unit, Some(metrics::Unit::Count));
/// assert_eq!(description.unwrap().to_string(), "Framed response streams received, by verdict");
/// ```
pub fn describe() {
    client::describe();
    #[cfg(feature = "dedupe")]
    server::describe();
}

#[cfg(test)]
mod tests;
