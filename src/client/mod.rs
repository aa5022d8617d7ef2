//! A framed MCP client over reqwest that retries a cut, keyed request by itself (feature
//! `client`, SPEC.md §17.13).
//!
//! - [`RetryingClient`]: send a JSON-RPC request, get its verified final response; cut
//!   responses are retried with the same request key where the server's contract makes it
//!   safe, with every attempt and decision in telemetry.
//! - [`EndpointResolver`]: where each attempt goes (per-request discovery); [`DiscoveringResolver`]
//!   runs `server/discover` on endpoints taken in turn.
//! - [`RetrySchedule`]: bounded attempts, exponential backoff with full jitter.

mod resolver;
mod retrying;
mod schedule;

pub use resolver::{
    DiscoveringResolver, EndpointResolver, Resolution, ResolveError, ResolveFuture,
};
pub use retrying::{
    AttemptReport, CallError, CallItem, CallOutcome, IDEMPOTENT_METHODS, RetrySnapshot, RetryStats,
    RetryingClient,
};
pub use schedule::RetrySchedule;

/// Key under a JSON-RPC error's `data` where a client puts the classification of a response that
/// did not complete (shared with [`rmcp_http`](crate::rmcp_http)).
pub const OUTCOME_DATA_KEY: &str = "io.github.mcp-framing/outcome";

/// Whether a JSON-RPC message is a response (it has an `id` and a `result` or an `error`): the
/// last message of a request's response stream. Read without building a JSON tree.
pub(crate) fn is_final_response(data: &str) -> bool {
    crate::jsonrpc::is_response(data)
}
