//! The HTTP binding (SPEC.md §10, §15, §16): per-request opt-in, and body adapters.
//!
//! One file a job:
//!
//! - The opt-in — [`OptIn`] reads a request's `Mcp-Framing` / `Mcp-Framing-Request-Key` /
//!   `Mcp-Framing-Limits` headers (server side) and builds an encoder within the client's limits;
//!   [`opt_in_headers`] writes them and [`response_headers`] are a
//!   framed response's headers.
//! - `_meta` edits — [`declare_framing_capability`] and
//!   [`set_request_key`](crate::request::set_request_key) write the `_meta` entries of a request (client
//!   side).
//! - The server body — [`FramedBody`] turns a stream of [`Outgoing`](crate::Outgoing) items into a
//!   response body (axum's `Body::from_stream`, hyper via `http_body_util::StreamBody`): HEAD
//!   first, ABORT if the source fails, the STREAM_END sentinel when it ends.
//! - The client body — [`VerifiedResponse`] turns any `Stream<Item = Result<Bytes, E>>`
//!   (reqwest's `bytes_stream()`, an http-body `BodyDataStream`) into verified messages, ending in
//!   [`Delivery::Complete`] or a [`ReceiveError`] that says whether the response was abandoned.
//!
//! # Opt-in
//!
//! A framed response uses one of three mappings ([`Mapping`]): the binary body
//! (`application/vnd.mcp-framing`, only if the client listed it in `Accept`), SSE events named
//! `mcp-frame` inside `text/event-stream` (what MCP infrastructure expects), or the compatible
//! SSE mapping (plain `message` events, the frames in comments, SPEC.md §18), which a client asks
//! for with `MAPPING_HEADER` and which a server may use for every response.

use http::HeaderValue;

// What only the clients, the layers, the tests and the fuzz targets use (the other header names,
// the per-message delivery, the capability declaration in `_meta`, hand-written opt-in headers)
// lives in these modules, reached through `internals::http`.
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

use crate::mapping::Mapping;

/// A response's mapping, decided from its headers (the `http` crate's types, hence here).
impl Mapping {
    /// The mapping of a response to a request that opted in, decided from its headers alone,
    /// before any byte of the body (SPEC.md §16): `Some` only if its `Content-Type` is one of the
    /// mappings' **and** its [`OPT_IN_HEADER`] (`Mcp-Framing`) names the version this crate
    /// speaks. A `mapping` parameter names the mapping (SPEC.md §18.8): `Mcp-Framing: 1;
    /// mapping=compat` with `text/event-stream` is [`Mapping::Compat`]; without it, §15. A
    /// parameter naming a mapping this crate does not know, or contradicting the content type,
    /// is not framed. Anything else is not framed, whatever its body holds (a JSON result, an SSE
    /// body with only a priming event or comments, an empty body): a backend that ignored the
    /// opt-in, never a truncation.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{http::response_headers, mapping::Mapping};
    /// assert_eq!(Mapping::from_response_headers(&response_headers(Mapping::Sse)), Some(Mapping::Sse));
    ///
    /// // A server that ignored the opt-in answers plain SSE: not framed.
    /// let mut plain = http::HeaderMap::new();
    /// plain.insert("content-type", "text/event-stream".parse().unwrap());
    /// assert_eq!(Mapping::from_response_headers(&plain), None);
    ///
    /// // The compatible mapping names itself.
    /// let compat = response_headers(Mapping::Compat);
    /// assert_eq!(compat["mcp-framing"], "1; mapping=compat");
    /// assert_eq!(Mapping::from_response_headers(&compat), Some(Mapping::Compat));
    /// ```
    ///
    /// A response whose field lines disagree (two `Content-Type` lines, two `Mcp-Framing` lines
    /// naming other mappings) is not framed: what is accepted is what every pairing of one
    /// `Mcp-Framing` line with one `Content-Type` line reads as, so a response is never read as
    /// two mappings.
    ///
    /// ```
    /// # use mcp_framing::{http::response_headers, mapping::Mapping};
    /// let mut two = response_headers(Mapping::Sse);
    /// two.append("content-type", "application/vnd.mcp-framing".parse().unwrap());
    /// assert_eq!(Mapping::from_response_headers(&two), None);
    /// ```
    // Hidden: the check `http::VerifiedResponse::from_headers` makes; the clients and the tests call it.
    #[doc(hidden)]
    #[must_use]
    pub fn from_response_headers(headers: &http::HeaderMap) -> Option<Self> {
        let mut reading = None;
        for opt_in in headers.get_all(OPT_IN_HEADER) {
            for content_type in headers.get_all(http::header::CONTENT_TYPE) {
                let this = Self::from_header_values(opt_in, content_type);
                if *reading.get_or_insert(this) != this {
                    return None;
                }
            }
        }
        reading.flatten()
    }

    /// The mapping one `Mcp-Framing` line and one `Content-Type` line name together.
    fn from_header_values(opt_in: &HeaderValue, content_type: &HeaderValue) -> Option<Self> {
        let value = opt_in.to_str().ok()?;
        let mut parts = value.split(';');
        if parts.next()?.trim() != VERSION_TOKEN {
            return None;
        }
        let mut named = None;
        for parameter in parts {
            let (name, token) = parameter.split_once('=')?;
            if name.trim().eq_ignore_ascii_case("mapping") {
                if named.is_some() {
                    return None;
                }
                named = Some(token.trim().trim_matches('"').to_ascii_lowercase());
            }
        }
        let carried = Self::from_content_type(content_type.to_str().ok())?;
        match named.as_deref() {
            None => Some(carried),
            Some(name) => Self::ALL
                .into_iter()
                .find(|m| m.name() == name && m.content_type() == carried.content_type()),
        }
    }
}
