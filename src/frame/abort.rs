//! The ABORT frame (SPEC.md §3): the sender gave up, with a reason code and text.

use std::fmt;

use bytes::BytesMut;

use super::header::write_frame;
use super::kind::{FrameKind, PayloadError};
use super::layout::{MAX_ABORT_PAYLOAD_LEN, MAX_ABORT_REASON_LEN};

/// A reason code of an ABORT frame (SPEC.md §3, registry §3.1). The code decides whether a
/// client retries ([`RetryDecision`](crate::client::RetryDecision), SPEC.md §11.6).
///
/// # Examples
///
/// ```
/// use mcp_framing::AbortCode;
/// assert_eq!(AbortCode::from(2), AbortCode::Cancelled);
/// assert_eq!(AbortCode::from(700), AbortCode::Other(700));
/// assert_eq!(u16::from(AbortCode::UpstreamFailed), 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AbortCode {
    /// `0`: no reason given. Surfaced to the caller.
    Unspecified,
    /// `1`: the server failed while producing the response. Deterministic: not retried.
    InternalError,
    /// `2`: the request was cancelled. Not retried.
    Cancelled,
    /// `3`: the server is overloaded or shutting down. Transient: retried when safe.
    Overloaded,
    /// `4`: something the server depends on failed. Transient: retried when safe.
    UpstreamFailed,
    /// `5`: a message would exceed the sender's limit or the receiver's (SPEC.md §6).
    /// Deterministic: not retried.
    MessageTooLarge,
    /// A reserved code, reported as received. Surfaced to the caller.
    Other(u16),
}

impl From<u16> for AbortCode {
    fn from(code: u16) -> Self {
        match code {
            0 => Self::Unspecified,
            1 => Self::InternalError,
            2 => Self::Cancelled,
            3 => Self::Overloaded,
            4 => Self::UpstreamFailed,
            5 => Self::MessageTooLarge,
            other => Self::Other(other),
        }
    }
}

impl From<AbortCode> for u16 {
    fn from(code: AbortCode) -> Self {
        match code {
            AbortCode::Unspecified => 0,
            AbortCode::InternalError => 1,
            AbortCode::Cancelled => 2,
            AbortCode::Overloaded => 3,
            AbortCode::UpstreamFailed => 4,
            AbortCode::MessageTooLarge => 5,
            AbortCode::Other(other) => other,
        }
    }
}

impl fmt::Display for AbortCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::Unspecified => "unspecified",
            Self::InternalError => "internal error",
            Self::Cancelled => "cancelled",
            Self::Overloaded => "overloaded",
            Self::UpstreamFailed => "upstream failed",
            Self::MessageTooLarge => "message too large",
            Self::Other(code) => return write!(f, "code {code}"),
        };
        f.write_str(name)
    }
}

/// The content of an ABORT frame: the sender gave up on the stream (SPEC.md §3).
///
/// # Examples
///
/// ```
/// use mcp_framing::{Abort, AbortCode};
/// let abort = Abort::new(AbortCode::UpstreamFailed, "model backend timed out");
/// assert_eq!(abort.to_string(), "upstream failed: model backend timed out");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Abort {
    /// Why the sender gave up.
    pub code: AbortCode,
    /// Human-readable reason (at most 1024 bytes of UTF-8 on the wire), as received. The peer
    /// chose it: display it through the `Display` of [`Abort`], which escapes control
    /// characters.
    pub reason: String,
}

impl Abort {
    /// Builds an abort.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{Abort, AbortCode, Event, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let abort = Abort::new(AbortCode::Cancelled, "client went away");
    /// assert_eq!((abort.code, abort.reason.as_str()), (AbortCode::Cancelled, "client went away"));
    ///
    /// // What a decoder reports when the server sends that abort:
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.abort(AbortCode::Cancelled, "client went away", &mut wire)?;
    /// let mut decoder = StreamDecoder::new();
    /// let mut received = None;
    /// while let Some(event) = decoder.decode(&mut wire).unwrap() {
    ///     if let Event::Aborted(a) = event {
    ///         received = Some(a);
    ///     }
    /// }
    /// assert_eq!(received, Some(abort));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn new(code: AbortCode, reason: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.into(),
        }
    }

    /// Reads an ABORT payload: the reason code (u16) and the reason text.
    ///
    /// # Errors
    ///
    /// [`PayloadError::InvalidLength`] for a payload shorter than 2 or longer than
    /// [`MAX_ABORT_PAYLOAD_LEN`](super::MAX_ABORT_PAYLOAD_LEN) bytes,
    /// [`PayloadError::AbortReasonNotUtf8`] for a reason that is not UTF-8 (SPEC.md §3).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::internals::frame::PayloadError;
    /// use mcp_framing::{Abort, AbortCode};
    ///
    /// assert_eq!(Abort::load(b"\x00\x03draining"), Ok(Abort::new(AbortCode::Overloaded, "draining")));
    /// assert_eq!(Abort::load(b"\x00\x01\xff"), Err(PayloadError::AbortReasonNotUtf8));
    /// ```
    // Hidden: frame-level parsing (SPEC.md §8), for the CLI and the fuzz targets; the decoder yields `Event::Aborted`.
    #[doc(hidden)]
    pub fn load(payload: &[u8]) -> Result<Self, PayloadError> {
        if !FrameKind::Abort.allows_len(payload.len().try_into().unwrap_or(u32::MAX)) {
            return Err(PayloadError::invalid_length(FrameKind::Abort, payload));
        }
        let (code, reason) = payload.split_at(2);
        let reason = std::str::from_utf8(reason).map_err(|_| PayloadError::AbortReasonNotUtf8)?;
        Ok(Self::new(
            AbortCode::from(u16::from_be_bytes([code[0], code[1]])),
            reason,
        ))
    }

    /// Writes this ABORT frame (header and payload) into `dst` with sequence number `sequence`.
    ///
    /// # Panics
    ///
    /// If the reason is longer than [`MAX_ABORT_REASON_LEN`] bytes (an encoder checks it first:
    /// [`EncodeError::AbortReasonTooLong`](crate::EncodeError::AbortReasonTooLong)).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{Abort, AbortCode};
    /// let mut frame = bytes::BytesMut::new();
    /// Abort::new(AbortCode::Cancelled, "bye").encode(7, &mut frame);
    /// assert_eq!(&frame[20..], b"\x00\x02bye");
    /// ```
    // Hidden: frame-level writing, for the CLI and the fuzz targets; encoders write ABORT frames themselves.
    #[doc(hidden)]
    pub fn encode(&self, sequence: u32, dst: &mut BytesMut) {
        assert!(
            self.reason.len() <= MAX_ABORT_REASON_LEN,
            "abort reason longer than {MAX_ABORT_REASON_LEN} bytes"
        );
        let mut payload = [0u8; MAX_ABORT_PAYLOAD_LEN as usize];
        payload[..2].copy_from_slice(&u16::from(self.code).to_be_bytes());
        payload[2..2 + self.reason.len()].copy_from_slice(self.reason.as_bytes());
        write_frame(
            FrameKind::Abort,
            sequence,
            &payload[..2 + self.reason.len()],
            dst,
        );
    }
}

impl fmt::Display for Abort {
    /// `code: reason`, the reason with its control characters escaped: the peer chose it, and
    /// printed raw it could rewrite a terminal or forge a log line (SPEC.md §3.1).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reason.is_empty() {
            write!(f, "{}", self.code)
        } else {
            write!(f, "{}: {}", self.code, Escaped(&self.reason))
        }
    }
}

/// Displays peer-chosen text with control characters (C0, DEL, C1) and the invisible format
/// characters that reorder or hide text (bidirectional overrides and isolates, zero-width
/// characters, the BOM) escaped as Rust escapes them (`\n`, `\u{1b}`, `\u{202e}`); everything
/// else, non-ASCII text included, is shown as is.
pub(crate) struct Escaped<'a>(pub(crate) &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hazardous = |c: char| {
            c.is_control()
                || matches!(c, '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
                    | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
        };
        let mut rest = self.0;
        while let Some(at) = rest.find(hazardous) {
            f.write_str(&rest[..at])?;
            let c = rest[at..].chars().next().expect("found a char at `at`");
            match c {
                '\0' => f.write_str("\\0")?,
                _ => write!(f, "{}", c.escape_default())?,
            }
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}
