//! rmcp integration (feature `rmcp`): frame rmcp's Streamable HTTP responses on the server,
//! verify them on the client.
//!
//! - [`FramingLayer`] is a tower layer for rmcp's `StreamableHttpService` (or any HTTP service
//!   answering MCP POSTs). For a request that opted in (SPEC.md §16) it re-frames the response:
//!   every JSON-RPC message of an SSE response (notifications, then the final result) or the
//!   single message of a JSON response becomes one framed message; the STREAM_END sentinel
//!   follows the final response, an ABORT is sent if the inner body fails or ends before it,
//!   and rmcp's `:` keep-alive comments become KEEPALIVE frames.
//!   Requests that did not opt in pass through unchanged.
//! - [`FramingHttpClient`] implements rmcp's `StreamableHttpClient` over reqwest: it opts in
//!   every POST with a fresh request key (header and `params._meta`), verifies the framed
//!   response and hands rmcp only verified messages. A response that is abandoned, aborted,
//!   corrupt or unframed reaches the caller as a JSON-RPC error for the pending request whose
//!   `data` holds the classification under [`OUTCOME_DATA_KEY`], never as a parse error. It
//!   honours rmcp's response limits (and announces them to the server), and bounds the time
//!   between frames.

mod client;
mod compat_body;
mod declare;
#[cfg(feature = "dedupe")]
mod dedupe;
mod layer;
mod retrying;
mod standalone;

pub use client::{ClientStats, FramingClientError, FramingHttpClient};
pub use declare::RequestBody;
#[cfg(feature = "dedupe")]
pub use dedupe::DedupingFramingLayer;
pub use layer::{FramingBody, FramingLayer, FramingService};

pub use crate::client::OUTCOME_DATA_KEY;
pub(crate) use crate::client::is_final_response;

/// An SSE event as rmcp's `StreamableHttpClient` hands it over.
pub(crate) type SseItem = Result<sse_stream::Sse, sse_stream::Error>;
