//! The header names of the HTTP mapping (SPEC.md §10, §11.3, §18.8).

use http::HeaderName;

/// Request header by which a client opts in: the framing versions it accepts, comma separated
/// (`Mcp-Framing: 1`). A server echoes the version it used in the response (SPEC.md §10).
///
/// # Examples
///
/// ```
/// use mcp_framing::http::{OPT_IN_HEADER, opt_in_headers, response_headers};
/// use mcp_framing::{RequestKey, mapping::Mapping};
///
/// // A gateway that must not strip the opt-in checks for it by name:
/// let request = opt_in_headers(RequestKey::random(), false);
/// assert_eq!(request[OPT_IN_HEADER], "1");
/// assert!(!http::HeaderMap::new().contains_key(OPT_IN_HEADER)); // a plain MCP request
/// // and a client sees in the response that the server framed it:
/// assert!(response_headers(Mapping::Sse)[OPT_IN_HEADER].to_str().unwrap().starts_with('1'));
/// ```
pub const OPT_IN_HEADER: HeaderName = HeaderName::from_static("mcp-framing");
/// Request header carrying the request key, 32 lowercase hex digits (SPEC.md §10).
///
/// # Examples
///
/// ```
/// use mcp_framing::http::{REQUEST_KEY_HEADER, opt_in_headers};
/// use mcp_framing::RequestKey;
///
/// let key = RequestKey::random();
/// let headers = opt_in_headers(key, false);
/// // A server (or its access log) reads the key a request was sent with:
/// let sent: RequestKey = headers[REQUEST_KEY_HEADER].to_str().unwrap().parse().unwrap();
/// assert_eq!(sent, key);
/// assert_eq!(sent.fingerprint(), key.fingerprint()); // what to log instead of the key
/// ```
pub const REQUEST_KEY_HEADER: HeaderName = HeaderName::from_static("mcp-framing-request-key");
/// Request header listing the mappings a client takes besides the §15 and binary ones, in order
/// of preference, comma separated: `Mcp-Framing-Mapping: compat` (SPEC.md §18.8).
pub const MAPPING_HEADER: HeaderName = HeaderName::from_static("mcp-framing-mapping");
/// The framing version this crate speaks ([`frame::VERSION`](crate::frame::VERSION)), as it
/// appears in [`OPT_IN_HEADER`].
pub const VERSION_TOKEN: &str = match crate::frame::VERSION {
    1 => "1",
    _ => panic!("VERSION_TOKEN must spell frame::VERSION"),
};
/// Request header carrying the limits the client decodes with (SPEC.md §11.3, §16):
/// `Mcp-Framing-Limits: frame=65536, message=16777216`, in bytes. A server frames within the
/// smaller of these and its own ([`OptIn::encoder`](super::OptIn::encoder)).
pub const LIMITS_HEADER: HeaderName = HeaderName::from_static("mcp-framing-limits");

