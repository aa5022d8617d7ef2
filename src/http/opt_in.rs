//! The per-request opt-in (SPEC.md §10): request headers read by a server, written by a client,
//! and the headers of a framed response.

use http::{HeaderMap, HeaderName, HeaderValue};

use super::{LIMITS_HEADER, MAPPING_HEADER, OPT_IN_HEADER, REQUEST_KEY_HEADER, VERSION_TOKEN};
use crate::decoder::StreamDecoder;
use crate::encoder::{EncoderBuilder, StreamEncoder};
use crate::event::StreamHead;
use crate::ids::RequestKey;
use crate::limits::MIN_MAX_FRAME_PAYLOAD;
use crate::mapping::Mapping;

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
    /// The limits header is malformed (SPEC.md §16): not `name=value` pairs separated by
    /// commas, a value that is not a decimal number in range, `frame` below 1026, or a
    /// parameter given twice.
    #[error("the Mcp-Framing-Limits header is malformed")]
    InvalidLimits,
    /// The request key in `params._meta` is malformed or differs from the header's.
    #[error(
        "the request key in params._meta is malformed or differs from the Mcp-Framing-Request-Key header"
    )]
    // Hidden: only `check_meta` (hidden: `http::DedupeLayer` checks `_meta` itself) answers it.
    #[doc(hidden)]
    MetaMismatch,
}

/// Whether one element of an `Accept` header names `mapping`'s media type with a q-value above
/// 0 (SPEC.md §16, RFC 9110 §12.5.1): `q=0` means "not acceptable", and the order of the
/// elements means nothing. An unreadable q-value is not acceptable either.
fn accepts(range: &str, mapping: Mapping) -> bool {
    let mut parts = range.split(';');
    Mapping::from_content_type(parts.next()) == Some(mapping)
        && parts.all(|param| match param.split_once('=') {
            Some((name, q)) if name.trim().eq_ignore_ascii_case("q") => {
                q.trim().parse::<f32>().is_ok_and(|q| q > 0.0)
            }
            _ => true,
        })
}

/// A request's opt-in to framing (SPEC.md §10), as a server reads it: the mapping to answer in
/// ([`mapping`](Self::mapping)) and the encoder for the answer, with the request's key and the
/// client's limits ([`encoder`](Self::encoder)).
///
/// # Examples
///
/// ```
/// use mcp_framing::RequestKey;
/// use mcp_framing::{http::{opt_in_headers, OptIn}, mapping::Mapping};
///
/// let key = RequestKey::random();
/// let headers = opt_in_headers(key, true);
/// let opt_in = OptIn::from_headers(&headers).unwrap().expect("opted in");
/// assert_eq!(opt_in.mapping(), Mapping::Binary);
/// // The encoder for the answer carries the request's key in its HEAD.
/// let encoder = opt_in.encoder(mcp_framing::StreamEncoder::builder());
/// # let _ = encoder;
///
/// // A request without the header is answered exactly as before:
/// assert_eq!(OptIn::from_headers(&http::HeaderMap::new()).unwrap(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptIn {
    /// The request key, if the request carried one.
    #[doc(hidden)] // what `mapping` and `encoder` answer from; the fuzz oracle reads it
    pub request_key: Option<RequestKey>,
    /// Whether the client accepts the binary mapping: `Accept` lists
    /// the binary mapping's media type (`application/vnd.mcp-framing`) with a q-value above 0
    /// (SPEC.md §16).
    ///
    /// ```
    /// use mcp_framing::http::OptIn;
    /// let opt_in = |accept: &str| {
    ///     let mut headers = http::HeaderMap::new();
    ///     headers.insert("mcp-framing", "1".parse().unwrap());
    ///     headers.insert("accept", accept.parse().unwrap());
    ///     OptIn::from_headers(&headers).unwrap().unwrap().accepts_binary
    /// };
    /// assert!(opt_in("text/event-stream, application/vnd.mcp-framing")); // order means nothing
    /// assert!(opt_in("application/vnd.mcp-framing;q=0.5, text/event-stream"));
    /// assert!(!opt_in("application/vnd.mcp-framing;q=0, text/event-stream")); // not acceptable
    /// assert!(!opt_in("application/json, text/event-stream"));
    /// ```
    #[doc(hidden)] // what `mapping` and `encoder` answer from; the fuzz oracle reads it
    pub accepts_binary: bool,
    /// Whether the client takes the compatible SSE mapping (`MAPPING_HEADER` lists `compat`,
    /// SPEC.md §18.8).
    #[doc(hidden)] // what `mapping` and `encoder` answer from; the fuzz oracle reads it
    pub accepts_compat: bool,
    /// The largest frame payload the client decodes (`frame` in `LIMITS_HEADER`), if it said.
    #[doc(hidden)] // what `mapping` and `encoder` answer from; the fuzz oracle reads it
    pub max_frame_payload: Option<u32>,
    /// The largest message the client decodes (`message` in `LIMITS_HEADER`), if it said.
    #[doc(hidden)] // what `mapping` and `encoder` answer from; the fuzz oracle reads it
    pub max_message_size: Option<u64>,
}

impl OptIn {
    /// Reads the opt-in from request headers: `Ok(None)` when the request did not opt in, or
    /// listed no version this crate speaks (answer it unframed).
    ///
    /// # Errors
    ///
    /// [`OptInError::InvalidRequestKey`] when the key header is malformed (or all zero),
    /// [`OptInError::InvalidLimits`] when the limits header is (SPEC.md §16). Answer `400`.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::http::{OptIn, OptInError};
    /// use mcp_framing::mapping::Mapping;
    ///
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("mcp-framing", "1".parse().unwrap());
    /// headers.insert("accept", "application/json, application/vnd.mcp-framing".parse().unwrap());
    /// let opt_in = OptIn::from_headers(&headers).unwrap().expect("opted in");
    /// assert_eq!(opt_in.mapping(), Mapping::Binary);
    ///
    /// // Only versions this crate does not speak: not an opt-in, answer unframed.
    /// headers.insert("mcp-framing", "2".parse().unwrap());
    /// assert_eq!(OptIn::from_headers(&headers), Ok(None));
    ///
    /// // A malformed limits header is the client's error: answer 400.
    /// headers.insert("mcp-framing", "1".parse().unwrap());
    /// headers.insert("mcp-framing-limits", "frame=12".parse().unwrap());
    /// assert_eq!(OptIn::from_headers(&headers), Err(OptInError::InvalidLimits));
    /// ```
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
            value
                .to_str()
                .is_ok_and(|v| v.split(',').any(|range| accepts(range, Mapping::Binary)))
        });
        // Several field lines of the header are one comma-separated list (RFC 9110 §5.3).
        let mut limits = String::new();
        for value in headers.get_all(LIMITS_HEADER) {
            let value = value.to_str().map_err(|_| OptInError::InvalidLimits)?;
            if !limits.is_empty() {
                limits.push(',');
            }
            limits.push_str(value);
        }
        let (max_frame_payload, max_message_size) = if limits.is_empty() {
            (None, None)
        } else {
            parse_limits(&limits)?
        };
        let accepts_compat = headers.get_all(MAPPING_HEADER).iter().any(|value| {
            value.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case(Mapping::Compat.name()))
            })
        });
        Ok(Some(Self {
            request_key,
            accepts_binary,
            accepts_compat,
            max_frame_payload,
            max_message_size,
        }))
    }

    /// The encoder for the response: the request key echoed in HEAD, a fresh attempt id, and
    /// `builder`'s frame size and message limit lowered to the client's limits where it sent them
    /// (SPEC.md §11.3, §16). A message over the client's limit is then refused by the encoder
    /// (`EncodeError::MessageTooLarge`), which [`FramedBody`](super::FramedBody) turns into an
    /// ABORT with code 5, instead of reaching a client that would refuse it.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderValue;
    /// use mcp_framing::http::{OptIn, opt_in_headers};
    /// use mcp_framing::{Limits, RequestKey, StreamDecoder, StreamEncoder};
    ///
    /// let key = RequestKey::random();
    /// // A client that reads frames of at most 4 KiB says so in its opt-in (SPEC.md §16).
    /// let mut headers = opt_in_headers(key, false);
    /// headers.insert("mcp-framing-limits", HeaderValue::from_static("frame=4096, message=16777216"));
    /// let client = StreamDecoder::builder()
    ///     .limits(Limits::default().max_frame_payload(4096))
    ///     .expect_request_key(key)
    ///     .build();
    /// let opt_in = OptIn::from_headers(&headers).unwrap().unwrap();
    /// // The server's own frames are 16 KiB; this client's are at most 4 KiB.
    /// let mut encoder = opt_in.encoder(StreamEncoder::builder());
    /// let mut wire = bytes::BytesMut::new();
    /// encoder.message(&[b'x'; 10_000], &mut wire)?;
    /// encoder.end(&mut wire)?;
    /// assert_eq!(client.decode_all(&wire).unwrap().messages[0].bytes().len(), 10_000);
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn encoder(&self, builder: EncoderBuilder) -> StreamEncoder {
        builder
            .within(self.max_frame_payload, self.max_message_size)
            .build(StreamHead::for_request(self.request_key))
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
    /// use mcp_framing::{request::set_request_key, RequestKey};
    /// use mcp_framing::http::OptIn;
    /// let key = RequestKey::random();
    /// let opt_in = OptIn { request_key: Some(key), accepts_binary: false, accepts_compat: false, max_frame_payload: None, max_message_size: None };
    /// let mut request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}});
    /// set_request_key(&mut request, key).unwrap();
    /// assert!(opt_in.check_meta(&request).is_ok());
    /// set_request_key(&mut request, RequestKey::random()).unwrap();
    /// assert!(opt_in.check_meta(&request).is_err());
    /// ```
    // Hidden: `http::DedupeLayer` checks the header key against `_meta` itself; the layers and the tests call it.
    #[doc(hidden)]
    pub fn check_meta(&self, request: &serde_json::Value) -> Result<(), OptInError> {
        let meta = crate::request::request_key(request).map_err(|_| OptInError::MetaMismatch)?;
        match (meta, self.request_key) {
            (Some(meta), Some(header)) if meta != header => Err(OptInError::MetaMismatch),
            (Some(_), None) => Err(OptInError::MetaMismatch),
            _ => Ok(()),
        }
    }

    /// The mapping to answer with (SPEC.md §18.8): binary if the client accepts it, else the
    /// compatible SSE mapping if it asked for it, else the SSE mapping of §15.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::http::{OptIn, opt_in_headers};
    /// use mcp_framing::{RequestKey, mapping::Mapping};
    ///
    /// let mapping = |headers: &http::HeaderMap| OptIn::from_headers(headers).unwrap().unwrap().mapping();
    /// let key = RequestKey::random();
    /// assert_eq!(mapping(&opt_in_headers(key, true)), Mapping::Binary); // it accepts the binary type
    /// assert_eq!(mapping(&opt_in_headers(key, false)), Mapping::Sse);
    /// // A client that asks for the compatible mapping (SPEC.md §18.8):
    /// let mut compat = opt_in_headers(key, false);
    /// compat.insert("mcp-framing-mapping", http::HeaderValue::from_static("compat"));
    /// assert_eq!(mapping(&compat), Mapping::Compat);
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

/// The headers a client adds to opt in (SPEC.md §10, §16): `Mcp-Framing: 1`, the request key,
/// the limits of a default decoder (`LIMITS_HEADER`), and with `binary`, an `Accept` listing
/// the binary mapping's media type (`application/vnd.mcp-framing`, what
/// [`Mapping::Binary`](crate::mapping::Mapping::Binary)`.content_type()` answers) before MCP's two
/// types. A client that decodes with other limits sends the headers for its own decoder's limits.
///
/// # Examples
///
/// ```
/// let key = mcp_framing::RequestKey::random(); // once per logical request; reused on retries
/// let headers = mcp_framing::http::opt_in_headers(key, false);
/// assert_eq!(headers["mcp-framing"], "1");
/// assert_eq!(headers["mcp-framing-request-key"], key.to_string().as_str());
/// assert_eq!(headers["mcp-framing-limits"], "frame=65536, message=16777216");
/// ```
#[must_use]
pub fn opt_in_headers(key: RequestKey, binary: bool) -> HeaderMap {
    opt_in_headers_for(key, binary, &StreamDecoder::new())
}

/// [`opt_in_headers`] announcing the limits `decoder` decodes with (SPEC.md §11.3, §16): the
/// server then frames within them, so a frame or message over them is the server's contract
/// violation, and a message that cannot fit is the server's ABORT (code 5), not the client's
/// `MessageTooLarge`.
///
/// # Examples
///
/// ```
/// use mcp_framing::{RequestKey, StreamDecoder};
/// let decoder = StreamDecoder::builder().max_frame_payload(16384).max_message_size(1 << 20).build();
/// let headers = mcp_framing::internals::http::opt_in_headers_for(RequestKey::random(), true, &decoder);
/// assert_eq!(headers["mcp-framing-limits"], "frame=16384, message=1048576");
/// ```
#[must_use]
pub fn opt_in_headers_for(key: RequestKey, binary: bool, decoder: &StreamDecoder) -> HeaderMap {
    let mapping = if binary {
        Mapping::Binary
    } else {
        Mapping::Sse
    };
    opt_in_headers_with(key, mapping, decoder)
}

/// [`opt_in_headers_for`] asking for `mapping` (SPEC.md §10, §16, §18.8): for
/// [`Mapping::Binary`] the binary media type first in `Accept`, for [`Mapping::Compat`]
/// `Mcp-Framing-Mapping: compat`. The client then takes whichever mapping the response declares
/// ([`Mapping::from_response_headers`]): a server that does not know the compatible mapping
/// answers in the §15 one. The clients' (their configured mapping); a user writes the public
/// [`opt_in_headers`] and, for the compatible mapping, adds `Mcp-Framing-Mapping: compat`.
#[must_use]
pub(crate) fn opt_in_headers_with(
    key: RequestKey,
    mapping: Mapping,
    decoder: &StreamDecoder,
) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let limits = format!(
        "frame={}, message={}",
        decoder.max_frame_payload(),
        decoder.max_message_size()
    );
    headers.insert(
        LIMITS_HEADER,
        HeaderValue::from_str(&limits).expect("digits are a valid header value"),
    );
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
            HeaderValue::from_static(Mapping::Compat.name()),
        );
    }
    headers
}

/// The headers of a framed response: `Content-Type` of the mapping, `Mcp-Framing: 1` (with
/// `; mapping=compat` for the compatible mapping, SPEC.md §18.8), `Cache-Control: no-cache` and
/// `X-Accel-Buffering: no` (so that proxies stream it).
///
/// # Examples
///
/// ```
/// use mcp_framing::{http::response_headers, mapping::Mapping};
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

/// Parses `Mcp-Framing-Limits` (SPEC.md §16): `name=value` pairs separated by commas, values in
/// decimal bytes; `frame` (at least 1026) and `message` are known, other names are ignored.
fn parse_limits(value: &str) -> Result<(Option<u32>, Option<u64>), OptInError> {
    let (mut frame, mut message) = (None, None);
    for param in value.split(',') {
        let (name, number) = param
            .trim()
            .split_once('=')
            .ok_or(OptInError::InvalidLimits)?;
        let number = number.trim();
        let decimal = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit());
        let slot = match name.trim().to_ascii_lowercase().as_str() {
            "frame" => {
                let max = decimal
                    .then(|| number.parse::<u32>().ok())
                    .flatten()
                    .filter(|max| *max >= MIN_MAX_FRAME_PAYLOAD)
                    .ok_or(OptInError::InvalidLimits)?;
                frame.replace(max).map(drop)
            }
            "message" => {
                let max = decimal
                    .then(|| number.parse::<u64>().ok())
                    .flatten()
                    .ok_or(OptInError::InvalidLimits)?;
                message.replace(max).map(drop)
            }
            // Another parameter: a later extension, ignored.
            _ => None,
        };
        if slot.is_some() {
            return Err(OptInError::InvalidLimits);
        }
    }
    Ok((frame, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opt_in_headers_asking_for_the_compatible_mapping_name_it_and_keep_mcps_accept() {
        let key = RequestKey::from_bytes([0xab; 16]);
        let headers = opt_in_headers_with(key, Mapping::Compat, &StreamDecoder::new());
        assert_eq!(headers["mcp-framing"], "1");
        assert_eq!(headers["mcp-framing-mapping"], "compat");
        assert_eq!(headers["accept"], "application/json, text/event-stream");
    }
}
