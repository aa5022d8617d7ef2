//! rmcp integration: frame rmcp's Streamable HTTP responses on the server, verify them on the
//! client.
//!
//! - [`FramingLayer`] is a tower layer for rmcp's `StreamableHttpService` (or any HTTP service
//!   answering MCP POSTs). For a request that opted in (SPEC.md §16) it re-frames the response:
//!   every JSON-RPC message of an SSE response (notifications, then the final result) or the
//!   single message of a JSON response becomes one framed message; the STREAM_END sentinel
//!   follows the final response, an ABORT of code 4 (upstream failed, SPEC.md §3.1) is sent if
//!   the inner body fails or ends before it, one of code 1 (an invalid inner response) instead
//!   of an event that is no JSON-RPC message or of a final response to another request, and
//!   rmcp's `:` keep-alive comments become KEEPALIVE frames.
//!   Requests that did not opt in pass through unchanged.
//! - [`FramingHttpClient`] implements rmcp's `StreamableHttpClient` over reqwest, sending every
//!   request through the attempt engine of [`client`](crate::client): it opts in every POST with
//!   a request key (header and `params._meta`), reads the framing contract from the
//!   `initialize` or `server/discover` result (refusing Regime C before any tool call), verifies
//!   the framed response and hands rmcp only verified messages, unchanged. A response that is
//!   abandoned, aborted, corrupt or unframed reaches the caller as a JSON-RPC error for the
//!   pending request whose `data` holds the outcome report under [`OUTCOME_DATA_KEY`](crate::client::OUTCOME_DATA_KEY) (SPEC.md
//!   §11.7), never as a parse error. It honours rmcp's response limits (and announces them to
//!   the server), bounds the time between frames, and retries by itself with
//!   [`auto_retry`](FramingHttpClient::auto_retry).
//!
//! The server half is feature `rmcp-server` (no HTTP client, no rmcp dependency: the layer works
//! on any HTTP service), the client half feature `rmcp-client`; `rmcp` is both.

#[cfg(feature = "rmcp-client")]
mod client;
#[cfg(feature = "rmcp-server")]
mod compat_body;
#[cfg(feature = "rmcp-server")]
mod declare;
#[cfg(all(feature = "rmcp-server", feature = "dedupe"))]
mod dedupe;
#[cfg(feature = "rmcp-client")]
mod error;
#[cfg(feature = "rmcp-server")]
mod inner;
#[cfg(feature = "rmcp-server")]
mod layer;
#[cfg(feature = "rmcp-client")]
mod standalone;
#[cfg(feature = "rmcp-server")]
mod streamed;

#[cfg(feature = "rmcp-client")]
pub use client::FramingHttpClient;
#[cfg(feature = "rmcp-server")]
pub use declare::RequestBody;
#[cfg(all(feature = "rmcp-server", feature = "dedupe"))]
pub use dedupe::DedupingFramingLayer;
#[cfg(feature = "rmcp-client")]
pub use error::FramingClientError;
#[cfg(feature = "rmcp-server")]
pub use layer::{FramingBody, FramingLayer, FramingService};

/// An SSE event as rmcp's `StreamableHttpClient` hands it over.
#[cfg(feature = "rmcp-client")]
pub(crate) type SseItem = Result<sse_stream::Sse, sse_stream::Error>;
