//! The HTTP binding (SPEC.md §10, §15, §16): per-request opt-in, and body adapters.
//!
//! One file a job:
//!
//! - The opt-in — [`OptIn`] reads a request's `Mcp-Framing` / `Mcp-Framing-Request-Key` /
//!   `Mcp-Framing-Limits` headers (server side) and builds an encoder within the client's limits;
//!   [`opt_in_headers`] writes them and [`response_headers`] are a
//!   framed response's headers.
//! - `_meta` edits — [`set_request_key`](crate::request::set_request_key) writes a request's key
//!   into its `_meta` (client side); the clients declare the framing capability in the `_meta`
//!   of a stateless request themselves.
//! - The server body — [`FramedBody`] turns a stream of [`Outgoing`](crate::Outgoing) items into a
//!   response body (axum's `Body::from_stream`, hyper via `http_body_util::StreamBody`): HEAD
//!   first, ABORT if the source fails, the STREAM_END sentinel when it ends.
//! - The client body — [`VerifiedResponse`] turns any `Stream<Item = Result<Bytes, E>>`
//!   (reqwest's `bytes_stream()`, an http-body `BodyDataStream`) into verified messages, ending in
//!   [`Delivery::Complete`] or a [`ReceiveError`] that says whether the response was abandoned.
//!
//! # Opt-in
//!
//! A framed response uses one of three mappings ([`Mapping`](crate::mapping::Mapping)): the binary body
//! (`application/vnd.mcp-framing`, only if the client listed it in `Accept`), SSE events named
//! `mcp-frame` inside `text/event-stream` (what MCP infrastructure expects), or the compatible
//! SSE mapping (plain `message` events, the frames in comments, SPEC.md §18), which a client asks
//! for with `MAPPING_HEADER` and which a server may use for every response.

// What only the clients, the layers, the tests and the fuzz targets use (the other header names,
// the per-message delivery, the capability declaration in `_meta`, the opt-in headers of a
// mapping or of a decoder's limits) lives in these modules; the fuzz targets reach theirs through
// `internals::http`.
below_the_api! {
    pub(crate) mod client_body;
    #[cfg(feature = "dedupe")]
    pub(crate) mod dedupe;
    pub(crate) mod headers;
    pub(crate) mod meta;
    pub(crate) mod opt_in;
    pub(crate) mod server_body;
}
#[cfg(feature = "client")]
mod request_headers;

#[cfg_attr(not(feature = "client"), allow(unused_imports))] // the clients' (feature `client`)
pub(crate) use client_body::DEFAULT_IDLE_TIMEOUT;
pub use client_body::{Delivery, ReceiveError, VerifiedResponse};
#[cfg(feature = "dedupe")]
pub use dedupe::{DedupeBody, DedupeBodyError, DedupeLayer, DedupeService};
pub(crate) use headers::{LIMITS_HEADER, MAPPING_HEADER, VERSION_TOKEN};
pub use headers::{OPT_IN_HEADER, REQUEST_KEY_HEADER};
#[cfg_attr(not(feature = "client"), allow(unused_imports))] // the clients' (feature `client`)
pub(crate) use meta::declare_framing_capability;
#[cfg(feature = "client")]
pub(crate) use meta::make_stateless;
#[cfg_attr(not(feature = "client"), allow(unused_imports))] // the clients' (feature `client`)
pub(crate) use opt_in::opt_in_headers_with;
pub use opt_in::{OptIn, OptInError, opt_in_headers, response_headers};
#[cfg(feature = "client")]
pub(crate) use request_headers::add_request_headers;
pub use server_body::FramedBody;
