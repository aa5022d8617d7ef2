//! The per-request opt-in (SPEC.md §10): request headers read by a server, written by a client,
//! and the headers of a framed response.

use http::{HeaderMap, HeaderName, HeaderValue};

use super::{MAPPING_HEADER, Mapping, OPT_IN_HEADER, REQUEST_KEY_HEADER, VERSION_TOKEN};
use crate::ids::RequestKey;

/// A malformed opt-in.
///
/// # Examples
///
/// ```
/// use mcp_framing::http::{OptIn, OptInError};
/// let mut headers = http::HeaderMap::new();
/// headers.insert("mcp-framing", "1".parse().unwrap());
/// headers.insert("mcp-framing-request-key", "not-hex".parse().unwrap());
/// assert_eq!(OptIn::from_headers(&headers), Err(OptInError::InvalidRequestKey));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptInError {
    /// The request key header is not 32 hex digits.
    #[error("the Mcp-Framing-Request-Key header is not 32 hex digits")]
    InvalidRequestKey,
    /// The request key in `params._meta` is malformed or differs from the header's.
    #[error(
        "the request key in params._meta is malformed or differs from the Mcp-Framing-Request-Key header"
    )]
    MetaMismatch,
}

/// A request's opt-in to framing (SPEC.md §10), as a server reads it.
///
/// # Examples
///
/// ```
/// use mcp_framing::RequestKey;
/// use mcp_framing::http::{Mapping, OptIn, opt_in_headers};
///
/// let key = RequestKey::random();
/// let headers = opt_in_headers(key, true);
/// let opt_in = OptIn::from_headers(&headers).unwrap().expect("opted in");
/// assert_eq!(opt_in.request_key, Some(key));
/// assert_eq!(opt_in.mapping(), Mapping::Binary);
///
/// // A request without the header is answered exactly as before:
/// assert_eq!(OptIn::from_headers(&http::HeaderMap::new()).unwrap(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptIn {
    /// The request key, if the request carried one.
    pub request_key: Option<RequestKey>,
    /// Whether the client accepts the binary mapping (`Accept` lists [`MEDIA_TYPE`](super::MEDIA_TYPE)).
    pub accepts_binary: bool,
    /// Whether the client takes the compatible SSE mapping ([`MAPPING_HEADER`] lists `compat`,
    /// SPEC.md §17.8).
    pub accepts_compat: bool,
}

impl OptIn {
    /// Reads the opt-in from request headers: `Ok(None)` when the request did not opt in, or
    /// listed no version this crate speaks (answer it unframed).
    ///
    /// # Errors
    ///
    /// [`OptInError::InvalidRequestKey`] when the key header is malformed.
    ///
    /// # Examples
    ///
    /// See [`OptIn`].
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Self>, OptInError> {
        let speaks_ours = headers.get_all(OPT_IN_HEADER).iter().any(|value| {
            value
                .to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim() == VERSION_TOKEN))
        });
        if !speaks_ours {
            return Ok(None);
        }
        let request_key = match headers.get(REQUEST_KEY_HEADER) {
            Some(value) => Some(
                value
                    .to_str()
                    .ok()
                    .and_then(|v| v.trim().parse::<RequestKey>().ok())
                    .ok_or(OptInError::InvalidRequestKey)?,
            ),
            None => None,
        };
        let accepts_binary = headers.get_all(http::header::ACCEPT).iter().any(|value| {
            value.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|t| Mapping::from_content_type(Some(t)) == Some(Mapping::Binary))
            })
        });
        let accepts_compat = headers.get_all(MAPPING_HEADER).iter().any(|value| {
            value.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case(Mapping::Compat.token()))
            })
        });
        Ok(Some(Self {
            request_key,
            accepts_binary,
            accepts_compat,
        }))
    }

    /// Checks the JSON-RPC request's `params._meta` key against the header's (SPEC.md §10):
    /// a missing `_meta` key is accepted, a different one is not.
    ///
    /// # Errors
    ///
    /// [`OptInError::MetaMismatch`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{RequestKey, set_request_key};
    /// use mcp_framing::http::OptIn;
    /// let key = RequestKey::random();
    /// let opt_in = OptIn { request_key: Some(key), accepts_binary: false, accepts_compat: false };
    /// let mut request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}});
    /// set_request_key(&mut request, key).unwrap();
    /// assert!(opt_in.check_meta(&request).is_ok());
    /// set_request_key(&mut request, RequestKey::random()).unwrap();
    /// assert!(opt_in.check_meta(&request).is_err());
    /// ```
    pub fn check_meta(&self, request: &serde_json::Value) -> Result<(), OptInError> {
        let meta = crate::request::request_key(request).map_err(|_| OptInError::MetaMismatch)?;
        match (meta, self.request_key) {
            (Some(meta), Some(header)) if meta != header => Err(OptInError::MetaMismatch),
            (Some(_), None) => Err(OptInError::MetaMismatch),
            _ => Ok(()),
        }
    }

    /// The mapping to answer with (SPEC.md §17.8): binary if the client accepts it, else the
    /// compatible SSE mapping if it asked for it, else the SSE mapping of §15.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::RequestKey;
    /// use mcp_framing::http::{Mapping, OptIn, opt_in_headers_for};
    /// let headers = opt_in_headers_for(RequestKey::random(), Mapping::Compat);
    /// assert_eq!(OptIn::from_headers(&headers).unwrap().unwrap().mapping(), Mapping::Compat);
    /// ```
    #[must_use]
    pub fn mapping(&self) -> Mapping {
        if self.accepts_binary {
            Mapping::Binary
        } else if self.accepts_compat {
            Mapping::Compat
        } else {
            Mapping::Sse
        }
    }
}

/// The headers a client adds to opt in (SPEC.md §10): `Mcp-Framing: 1`, the request key, and
/// with `binary`, an `Accept` listing [`MEDIA_TYPE`](super::MEDIA_TYPE) before MCP's two types.
///
/// # Examples
///
/// ```
/// let headers = mcp_framing::http::opt_in_headers(mcp_framing::RequestKey::from_bytes([0xab; 16]), false);
/// assert_eq!(headers["mcp-framing"], "1");
/// assert_eq!(headers["mcp-framing-request-key"], "abababababababababababababababab");
/// ```
#[must_use]
pub fn opt_in_headers(key: RequestKey, binary: bool) -> HeaderMap {
    opt_in_headers_for(
        key,
        if binary {
            Mapping::Binary
        } else {
            Mapping::Sse
        },
    )
}

/// The headers a client adds to opt in asking for `mapping` (SPEC.md §10, §16, §17.8):
/// `Mcp-Framing: 1`, the request key, MCP's `Accept`, and for [`Mapping::Binary`] the binary
/// media type first in `Accept`, for [`Mapping::Compat`] `Mcp-Framing-Mapping: compat`. The
/// client then takes whichever mapping the response declares ([`Mapping::from_response_headers`]):
/// a server that does not know the compatible mapping answers in the §15 one.
///
/// # Examples
///
/// ```
/// use mcp_framing::RequestKey;
/// use mcp_framing::http::{Mapping, opt_in_headers_for};
/// let headers = opt_in_headers_for(RequestKey::from_bytes([0xab; 16]), Mapping::Compat);
/// assert_eq!(headers["mcp-framing"], "1");
/// assert_eq!(headers["mcp-framing-mapping"], "compat");
/// assert_eq!(headers["accept"], "application/json, text/event-stream");
/// ```
#[must_use]
pub fn opt_in_headers_for(key: RequestKey, mapping: Mapping) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(OPT_IN_HEADER, HeaderValue::from_static(VERSION_TOKEN));
    headers.insert(
        REQUEST_KEY_HEADER,
        HeaderValue::from_str(&key.to_string()).expect("hex digits are a valid header value"),
    );
    let accept = if mapping == Mapping::Binary {
        "application/vnd.mcp-framing, application/json, text/event-stream"
    } else {
        "application/json, text/event-stream"
    };
    headers.insert(http::header::ACCEPT, HeaderValue::from_static(accept));
    if mapping == Mapping::Compat {
        headers.insert(
            MAPPING_HEADER,
            HeaderValue::from_static(crate::sse_compat::MAPPING_TOKEN),
        );
    }
    headers
}

/// The headers of a framed response: `Content-Type` of the mapping, `Mcp-Framing: 1` (with
/// `; mapping=compat` for the compatible mapping, SPEC.md §17.8), `Cache-Control: no-cache` and
/// `X-Accel-Buffering: no` (so that proxies stream it).
///
/// # Examples
///
/// ```
/// use mcp_framing::http::{Mapping, response_headers};
/// assert_eq!(response_headers(Mapping::Sse)["content-type"], "text/event-stream");
/// assert_eq!(response_headers(Mapping::Sse)["mcp-framing"], "1");
/// assert_eq!(response_headers(Mapping::Compat)["mcp-framing"], "1; mapping=compat");
/// ```
#[must_use]
pub fn response_headers(mapping: Mapping) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(mapping.content_type()),
    );
    let version = match mapping {
        Mapping::Compat => "1; mapping=compat",
        _ => VERSION_TOKEN,
    };
    headers.insert(OPT_IN_HEADER, HeaderValue::from_static(version));
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    headers.insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    headers
}
