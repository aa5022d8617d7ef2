//! Frame kinds and their payload length rules (SPEC.md §3).

use std::fmt;

use super::layout::{
    ABORT_MIN_PAYLOAD_LEN, HEAD_PAYLOAD_LEN, MAX_ABORT_PAYLOAD_LEN, MESSAGE_END_PAYLOAD_LEN,
    STREAM_END_PAYLOAD_LEN,
};

/// The kind of a frame (SPEC.md §3), as the decode errors that concern one frame name it
/// ([`DecodeError::UnexpectedFrame`](crate::DecodeError::UnexpectedFrame), a bad length or
/// checksum, [`Truncation::InPayload`](crate::Truncation::InPayload)).
///
/// # Examples
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::{DecodeError, FrameKind, StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut head = BytesMut::new();
/// enc.keep_alive(&mut head)?; // HEAD, then a KEEPALIVE
/// let mut rest = BytesMut::new();
/// enc.message(b"{}", &mut rest)?; // DATA, then MESSAGE_END
/// // A body that starts without its HEAD: the error names the frame's kind.
/// let err = StreamDecoder::new().decode_all(&rest).unwrap_err();
/// assert!(matches!(err, DecodeError::UnexpectedFrame { kind: FrameKind::Data, .. }));
/// assert_eq!(FrameKind::Data.to_string(), "DATA");
/// assert_eq!(FrameKind::MessageEnd.to_byte(), 0x03);
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FrameKind {
    /// `0x01`: opens the stream with the request key and attempt id.
    Head,
    /// `0x02`: the next bytes of the current message.
    Data,
    /// `0x03`: closes a message with its length and SHA-256.
    MessageEnd,
    /// `0x04`: the terminal sentinel with the message count.
    StreamEnd,
    /// `0x05`: the sender gave up; terminal.
    Abort,
    /// `0x06`: carries nothing; keeps idle transports alive.
    KeepAlive,
    /// `0x80..=0xFF`: reserved for extensions; checked, then skipped.
    Ignorable(u8),
}

impl FrameKind {
    /// Parses a kind byte; `None` for the unknown kinds `0x00` and `0x07..=0x7F`.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::FrameKind;
    /// assert_eq!(FrameKind::from_byte(0x04), Some(FrameKind::StreamEnd));
    /// assert_eq!(FrameKind::from_byte(0x00), None);
    /// ```
    // Hidden: the frame layer's parsing and length rules, for the decoder, the CLI and the fuzz
    // targets (`internals::frame`).
    #[doc(hidden)]
    #[must_use]
    pub const fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            0x01 => Self::Head,
            0x02 => Self::Data,
            0x03 => Self::MessageEnd,
            0x04 => Self::StreamEnd,
            0x05 => Self::Abort,
            0x06 => Self::KeepAlive,
            0x80..=0xFF => Self::Ignorable(byte),
            _ => return None,
        })
    }

    /// The byte this kind is written as.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::FrameKind;
    /// assert_eq!(FrameKind::Head.to_byte(), 0x01);
    /// ```
    #[must_use]
    pub const fn to_byte(self) -> u8 {
        match self {
            Self::Head => 0x01,
            Self::Data => 0x02,
            Self::MessageEnd => 0x03,
            Self::StreamEnd => 0x04,
            Self::Abort => 0x05,
            Self::KeepAlive => 0x06,
            Self::Ignorable(byte) => byte,
        }
    }

    /// The spec's name of this kind (`"HEAD"`, `"DATA"`, ...).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::FrameKind;
    /// assert_eq!(FrameKind::MessageEnd.name(), "MESSAGE_END");
    /// ```
    // Hidden: `Display` prints it; the decoder's messages and the CLI call it.
    #[doc(hidden)]
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Head => "HEAD",
            Self::Data => "DATA",
            Self::MessageEnd => "MESSAGE_END",
            Self::StreamEnd => "STREAM_END",
            Self::Abort => "ABORT",
            Self::KeepAlive => "KEEPALIVE",
            Self::Ignorable(_) => "IGNORABLE",
        }
    }

    /// Whether `len` is a valid payload length for this kind, given the receiver's frame limit
    /// (SPEC.md §3 length rules, the one place they are written). Limits are checked separately with
    /// [`FrameTooLarge`](crate::DecodeError::FrameTooLarge).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::FrameKind;
    /// assert!(FrameKind::Head.allows_len(32));
    /// assert!(!FrameKind::Data.allows_len(0)); // empty DATA frames are an error
    /// assert!(FrameKind::KeepAlive.allows_len(0));
    /// ```
    // Hidden: the frame layer's parsing and length rules, for the decoder, the CLI and the fuzz
    // targets (`internals::frame`).
    #[doc(hidden)]
    #[must_use]
    pub const fn allows_len(self, len: u32) -> bool {
        match self {
            Self::Head => len == HEAD_PAYLOAD_LEN,
            Self::Data => len >= 1,
            Self::MessageEnd => len == MESSAGE_END_PAYLOAD_LEN,
            Self::StreamEnd => len == STREAM_END_PAYLOAD_LEN,
            Self::Abort => len >= ABORT_MIN_PAYLOAD_LEN && len <= MAX_ABORT_PAYLOAD_LEN,
            Self::KeepAlive => len == 0,
            Self::Ignorable(_) => true,
        }
    }
}

impl fmt::Display for FrameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ignorable(byte) => write!(f, "IGNORABLE(0x{byte:02x})"),
            other => f.write_str(other.name()),
        }
    }
}

/// Why a payload does not have its kind's layout (the frame layer's error; the decoder checks
/// lengths from the header first and reports [`DecodeError`](crate::DecodeError) variants).
///
/// # Examples
///
/// ```
/// use mcp_framing::FrameKind;
/// use mcp_framing::internals::frame::{PayloadError, StreamEnd};
/// assert_eq!(
///     StreamEnd::load(&[1, 2, 3]),
///     Err(PayloadError::InvalidLength { kind: FrameKind::StreamEnd, len: 3 })
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    /// The payload length breaks the kind's rule (SPEC.md §3).
    #[error("invalid payload length {len} for a {kind} frame")]
    InvalidLength {
        /// Kind of the frame.
        kind: FrameKind,
        /// Length of the payload given.
        len: usize,
    },
    /// An ABORT frame's reason is not UTF-8 (SPEC.md §3).
    #[error("abort frame reason is not valid UTF-8")]
    AbortReasonNotUtf8,
}

impl PayloadError {
    #[cold]
    pub(super) fn invalid_length(kind: FrameKind, payload: &[u8]) -> Self {
        Self::InvalidLength {
            kind,
            len: payload.len(),
        }
    }
}
