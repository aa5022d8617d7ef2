//! A framed MCP client over reqwest that retries a cut, keyed request by itself (feature
//! `client`, SPEC.md §17.13), and the attempt engine that both clients send through.
//!
//! - [`RetryingClient`]: send a JSON-RPC request, get its verified final response; cut
//!   responses are retried with the same request key where the server's contract makes it
//!   safe, with every attempt and decision in telemetry.
//! - [`EndpointResolver`]: where each attempt goes (per-request discovery); [`DiscoveringResolver`]
//!   runs `server/discover` on endpoints taken in turn.
//! - [`RetrySchedule`]: bounded attempts, exponential backoff with full jitter.
//! - [`CallError`]: why a call failed; every client hands its caller the same JSON-RPC error
//!   for it, with the outcome report of SPEC.md §11.7 under [`OUTCOME_DATA_KEY`].
//!
//! One attempt engine (`engine.rs`) runs every attempt of both
//! [`RetryingClient`] and [`FramingHttpClient`](crate::rmcp_http::FramingHttpClient): resolve,
//! re-check the contract, send with the opt-in, verify as the body streams, hand on the messages
//! as they verify, hold the final response until the stream ends, decide on a retry, build the
//! error. The options live in one configuration (`config.rs`) that it reads when it sends.

below_the_api! {
    pub(crate) mod config;
    pub(crate) mod resolver;
    pub(crate) mod stats;
}
mod engine;
mod error;
mod retrying;
mod schedule;

pub use crate::retry::{RetryDecision, RetryReason};
pub use error::{AttemptError, AttemptReport, CallError, OUTCOME_DATA_KEY};
pub use resolver::{DiscoveringResolver, EndpointResolver, ResolveError};
pub use retrying::{CallItem, CallOutcome, RetryingClient};
pub use schedule::RetrySchedule;
#[cfg_attr(not(feature = "rmcp-client"), allow(unused_imports))] // `FramingHttpClient`'s
pub(crate) use stats::{ClientStats, RetryStats};

#[cfg_attr(not(feature = "rmcp-client"), allow(unused_imports))]
pub(crate) use config::{Config, State, option_setters};
#[cfg_attr(not(feature = "rmcp-client"), allow(unused_imports))]
pub(crate) use engine::{Call, Item, Route, SESSION_HEADER, TransportLimits, post};
#[cfg_attr(not(feature = "rmcp-client"), allow(unused_imports))]
pub(crate) use resolver::error_text;
