//! The header names of the HTTP mapping (SPEC.md §10, §11.3, §18.8), and the mapping a response's
//! headers name (SPEC.md §16, §18.8).

use http::{HeaderName, HeaderValue};

use crate::mapping::Mapping;

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
pub(crate) const MAPPING_HEADER: HeaderName = HeaderName::from_static("mcp-framing-mapping");
/// The framing version this crate speaks ([`frame::VERSION`](crate::frame::VERSION)), as it
/// appears in [`OPT_IN_HEADER`].
pub(crate) const VERSION_TOKEN: &str = match crate::frame::VERSION {
    1 => "1",
    _ => panic!("VERSION_TOKEN must spell frame::VERSION"),
};
/// Request header carrying the limits the client decodes with (SPEC.md §11.3, §16):
/// `Mcp-Framing-Limits: frame=65536, message=16777216`, in bytes. A server frames within the
/// smaller of these and its own ([`OptIn::encoder`](super::OptIn::encoder)).
pub const LIMITS_HEADER: HeaderName = HeaderName::from_static("mcp-framing-limits");

/// A response's mapping, decided from the header lines above and its `Content-Type` (the `http`
/// crate's types, hence here and not in [`mapping`](crate::mapping)).
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
