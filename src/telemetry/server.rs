//! The deduplication engine's metric names and their descriptions (the second table of the
//! [`telemetry`](super) module); `dedupe/telemetry.rs` records them.

use metrics::{Unit, describe_counter, describe_histogram};

/// `mcp_framing.dedupe.decisions`: counter of keyed calls decided, by `decision` and `reason`.
pub(crate) const DECISIONS: &str = "mcp_framing.dedupe.decisions";
/// `mcp_framing.dedupe.waits`: counter of duplicates that waited for an attempt in flight, by
/// what the wait ended in (`decision`).
pub(crate) const WAITS: &str = "mcp_framing.dedupe.waits";
/// `mcp_framing.dedupe.wait.duration`: histogram (seconds) of those waits, by `decision`.
pub(crate) const WAIT_DURATION: &str = "mcp_framing.dedupe.wait.duration";
/// `mcp_framing.dedupe.completions`: counter of executed calls' results, by `recorded`.
pub(crate) const COMPLETIONS: &str = "mcp_framing.dedupe.completions";
/// `mcp_framing.dedupe.leases_lost`: counter of claims taken over while their holder ran, by
/// where it was `detected`.
pub(crate) const LEASES_LOST: &str = "mcp_framing.dedupe.leases_lost";
/// `mcp_framing.dedupe.evictions`: counter of records a bounded store removed before their
/// retention, by `record`.
pub(crate) const EVICTIONS: &str = "mcp_framing.dedupe.evictions";
/// `mcp_framing.dedupe.store.duration`: histogram (seconds) of store operations, by
/// `operation` and `outcome`.
pub(crate) const STORE_DURATION: &str = "mcp_framing.dedupe.store.duration";
/// `mcp.server.operation.duration`: histogram (seconds, OpenTelemetry semantic conventions for
/// MCP) of keyed calls, from their decision until their final result.
pub(crate) const SERVER_OPERATION_DURATION: &str = "mcp.server.operation.duration";

/// Registers the unit and description of every metric above with the installed recorder (call
/// once after installing it).
///
pub(crate) fn describe() {
    describe_counter!(
        DECISIONS,
        Unit::Count,
        "Keyed calls decided, by decision and reason"
    );
    describe_counter!(
        WAITS,
        Unit::Count,
        "Duplicates that waited for an attempt in flight, by what the wait ended in"
    );
    describe_histogram!(
        WAIT_DURATION,
        Unit::Seconds,
        "Time duplicates waited for an attempt in flight"
    );
    describe_counter!(
        COMPLETIONS,
        Unit::Count,
        "Results of executed keyed calls, by whether they were recorded"
    );
    describe_counter!(
        LEASES_LOST,
        Unit::Count,
        "Claims taken over while their holder still ran (the call may have executed twice)"
    );
    describe_counter!(
        EVICTIONS,
        Unit::Count,
        "Records removed before their retention to make room (their retries execute again)"
    );
    describe_histogram!(
        STORE_DURATION,
        Unit::Seconds,
        "Deduplication store operations, by operation and outcome"
    );
    describe_histogram!(
        SERVER_OPERATION_DURATION,
        Unit::Seconds,
        "Duration of a keyed MCP request on the server, from its deduplication decision until its result"
    );
}
