//! Errors of the frame layer (decoding and encoding).

use std::fmt;

use crate::event::Hex;
use crate::frame::{Abort, FrameKind, HeaderError, PayloadError};
use crate::ids::RequestKey;

/// Where in the stream the decoder was when a frame arrived that the state does not allow.
///
/// # Examples
///
/// ```
/// use mcp_framing::StreamState;
/// assert_eq!(StreamState::InMessage.to_string(), "inside a message");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamState {
    /// Nothing decoded yet: only HEAD may come.
    AwaitingHead,
    /// After HEAD or a MESSAGE_END.
    BetweenMessages,
    /// After a DATA frame, before its MESSAGE_END.
    InMessage,
    /// After STREAM_END or ABORT.
    Finished,
}

impl fmt::Display for StreamState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::AwaitingHead => "awaiting the stream head",
            Self::BetweenMessages => "between messages",
            Self::InMessage => "inside a message",
            Self::Finished => "after the end of the stream",
        })
    }
}

/// Where a stream stopped when its input ended without the STREAM_END sentinel (SPEC.md §7).
///
/// # Examples
///
/// ```
/// use mcp_framing::Truncation;
/// let t = Truncation::InPayload { kind: mcp_framing::FrameKind::Data, received: 3, declared: 10 };
/// assert_eq!(t.to_string(), "inside the payload of a DATA frame (3 of 10 bytes)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Truncation {
    /// Not a single byte arrived.
    NoFrame,
    /// Inside a frame header.
    InHeader {
        /// Header bytes received (1..20).
        received: usize,
    },
    /// After a valid header, inside its payload.
    InPayload {
        /// Kind of the frame.
        kind: FrameKind,
        /// Payload bytes received.
        received: usize,
        /// Payload bytes the header declared.
        declared: u32,
    },
    /// At a frame boundary inside a message (DATA frames without MESSAGE_END).
    InMessage {
        /// Bytes of the open message received.
        message_bytes: u64,
    },
    /// At a frame boundary between messages (no STREAM_END).
    BetweenMessages {
        /// Messages completed and verified before the end.
        messages: u64,
    },
}

impl Truncation {
    /// The truncation point as named in SPEC.md §7 and in the conformance manifest (the variant
    /// name).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::Truncation;
    /// assert_eq!(Truncation::BetweenMessages { messages: 2 }.kind(), "BetweenMessages");
    /// ```
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NoFrame => "NoFrame",
            Self::InHeader { .. } => "InHeader",
            Self::InPayload { .. } => "InPayload",
            Self::InMessage { .. } => "InMessage",
            Self::BetweenMessages { .. } => "BetweenMessages",
        }
    }
}

impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoFrame => f.write_str("before any frame"),
            Self::InHeader { received } => {
                write!(f, "inside a frame header ({received} of 20 bytes)")
            }
            Self::InPayload {
                kind,
                received,
                declared,
            } => write!(
                f,
                "inside the payload of a {kind} frame ({received} of {declared} bytes)"
            ),
            Self::InMessage { message_bytes } => {
                write!(f, "inside a message ({message_bytes} bytes received)")
            }
            Self::BetweenMessages { messages } => {
                write!(f, "between messages ({messages} complete)")
            }
        }
    }
}

/// What a decoder had received when the stream stopped.
///
/// # Examples
///
/// ```
/// use mcp_framing::{DecodeError, StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = bytes::BytesMut::new();
/// enc.push(b"{\"argum", &mut wire)?; // the response is cut mid-message
/// let err = StreamDecoder::new().decode_all(&wire).unwrap_err();
/// let DecodeError::Truncated { progress, .. } = err else { panic!() };
/// assert_eq!((progress.frames, progress.open_message_bytes), (2, 7));
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Progress {
    /// Complete frames decoded.
    pub frames: u64,
    /// Bytes received, a partial frame included.
    pub bytes: u64,
    /// Sequence number of the last complete frame.
    pub last_sequence: Option<u32>,
    /// Messages completed and verified.
    pub messages: u64,
    /// Bytes of the message that was open (0 between messages).
    pub open_message_bytes: u64,
}

/// Everything that can be wrong with a framed stream (SPEC.md §2–§7).
///
/// Every variant is fatal for the stream: the decoder stops and returns the same error again if
/// called after it. The names match the error kinds of SPEC.md and of `tests/vectors/manifest.json`
/// (see [`DecodeError::kind`]).
///
/// # Examples
///
/// ```
/// use mcp_framing::{DecodeError, StreamDecoder};
///
/// // An unframed JSON body where a framed one was promised:
/// let err = StreamDecoder::new().decode_all(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap_err();
/// assert!(matches!(err, DecodeError::BadMagic { .. }));
/// assert_eq!(err.kind(), "BadMagic");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The first bytes of a frame are not the magic (SPEC.md §2).
    #[error("bad magic bytes {found:02x?} at offset {offset}, not an mcp-framing stream")]
    BadMagic {
        /// The two bytes found.
        found: [u8; 2],
        /// Stream offset of the frame.
        offset: u64,
    },
    /// The version byte is not one this crate implements (SPEC.md §8).
    #[error("unsupported format version {version} at offset {offset}")]
    UnsupportedVersion {
        /// The version found.
        version: u8,
        /// Stream offset of the frame.
        offset: u64,
    },
    /// The header CRC does not match the header (SPEC.md §2).
    #[error(
        "header checksum mismatch at offset {offset}: header says {stored:#010x}, bytes give {computed:#010x}"
    )]
    HeaderChecksumMismatch {
        /// CRC carried in the header.
        stored: u32,
        /// CRC of the bytes received.
        computed: u32,
        /// Stream offset of the frame.
        offset: u64,
    },
    /// The payload CRC does not match the payload (SPEC.md §2).
    #[error(
        "payload checksum mismatch in {kind} frame at offset {offset}: header says {stored:#010x}, payload gives {computed:#010x}"
    )]
    PayloadChecksumMismatch {
        /// Kind of the frame.
        kind: FrameKind,
        /// CRC carried in the header.
        stored: u32,
        /// CRC of the payload received.
        computed: u32,
        /// Stream offset of the frame.
        offset: u64,
    },
    /// The kind byte is not defined and not ignorable (SPEC.md §3).
    #[error("unknown frame kind {kind:#04x} at offset {offset}")]
    UnknownFrameKind {
        /// The kind byte.
        kind: u8,
        /// Stream offset of the frame.
        offset: u64,
    },
    /// The payload length breaks the kind's rule (SPEC.md §3).
    #[error("invalid payload length {len} for a {kind} frame")]
    InvalidFrameLength {
        /// Kind of the frame.
        kind: FrameKind,
        /// Declared payload length.
        len: u32,
    },
    /// The declared payload length exceeds the receiver's frame limit (SPEC.md §6).
    #[error("frame payload of {len} bytes exceeds the limit of {max}")]
    FrameTooLarge {
        /// Declared payload length.
        len: u32,
        /// Configured maximum.
        max: u32,
    },
    /// The message would exceed the receiver's message limit (SPEC.md §5, §6).
    #[error("message of at least {len} bytes exceeds the limit of {max}")]
    MessageTooLarge {
        /// Message bytes received plus the declared DATA payload.
        len: u64,
        /// Configured maximum.
        max: u64,
    },
    /// The stream would carry more bytes than the receiver's per-stream bound (SPEC.md §6.1).
    #[error("stream of at least {len} bytes exceeds the limit of {max}")]
    StreamTooLarge {
        /// Bytes of the stream up to the end of the frame whose header was refused.
        len: u64,
        /// Configured maximum.
        max: u64,
    },
    /// The stream would carry more messages than the receiver's per-stream bound (SPEC.md §6.1).
    #[error("stream carries more than {max} messages")]
    TooManyMessages {
        /// Configured maximum.
        max: u64,
    },
    /// More KEEPALIVE frames in a row than the receiver's bound, with no DATA or MESSAGE_END
    /// between them: a peer holding the stream open (SPEC.md §6.1).
    #[error("more than {max} KEEPALIVE frames in a row")]
    TooManyKeepAlives {
        /// Configured maximum.
        max: u32,
    },
    /// More ignorable frames in a row than the receiver's bound, with no DATA or MESSAGE_END
    /// between them (SPEC.md §6.1).
    #[error("more than {max} ignorable frames in a row")]
    TooManyIgnorableFrames {
        /// Configured maximum.
        max: u32,
    },
    /// A frame's sequence number is ahead of the expected one: frames dropped or reordered
    /// (SPEC.md §4).
    #[error("sequence gap: expected frame {expected}, found {found}")]
    SequenceGap {
        /// Expected sequence number.
        expected: u32,
        /// Sequence number found.
        found: u32,
    },
    /// A frame's sequence number is behind the expected one: a duplicated or replayed frame
    /// (SPEC.md §4).
    #[error("sequence replay: expected frame {expected}, found {found} again")]
    SequenceReplay {
        /// Expected sequence number.
        expected: u32,
        /// Sequence number found.
        found: u32,
    },
    /// A frame's sequence number is far from the expected one: a frame of another attempt's
    /// stream spliced in (SPEC.md §4). The HEAD frame's own sequence number not matching its
    /// attempt id is reported this way too.
    #[error(
        "foreign frame (splice of another attempt?): expected sequence {expected}, found {found}"
    )]
    ForeignFrame {
        /// Expected sequence number.
        expected: u32,
        /// Sequence number found.
        found: u32,
    },
    /// A frame kind that the stream state does not allow (SPEC.md §1, §3).
    #[error("unexpected {kind} frame {state}")]
    UnexpectedFrame {
        /// Kind of the frame.
        kind: FrameKind,
        /// Where the stream was.
        state: StreamState,
    },
    /// MESSAGE_END declared another length than the DATA bytes received (SPEC.md §3).
    #[error("message {index}: end frame declares {declared} bytes, {received} received")]
    LengthMismatch {
        /// Index of the message.
        index: u64,
        /// Length declared by MESSAGE_END.
        declared: u64,
        /// DATA bytes received.
        received: u64,
    },
    /// MESSAGE_END declared another SHA-256 than the bytes received (SPEC.md §3, §5).
    #[error("message {index}: SHA-256 mismatch (declared {:?}, received {:?})", Hex(&declared[..4]), Hex(&computed[..4]))]
    DigestMismatch {
        /// Index of the message.
        index: u64,
        /// Digest declared by MESSAGE_END.
        declared: [u8; 32],
        /// Digest of the bytes received.
        computed: [u8; 32],
    },
    /// STREAM_END declared another message count than the messages received (SPEC.md §3).
    #[error("stream end declares {declared} messages, {received} received")]
    MessageCountMismatch {
        /// Count declared by STREAM_END.
        declared: u64,
        /// Messages received.
        received: u64,
    },
    /// The stream answers another request than the one the decoder expects (SPEC.md §3, §10).
    /// The message shows the keys' fingerprints ([`RequestKey::fingerprint`]), never the keys.
    #[error("request key mismatch: expected {}, stream is for {}", expected.fingerprint(), found.map_or_else(|| "no key".to_owned(), |k| k.fingerprint().to_string()))]
    RequestKeyMismatch {
        /// Key the client sent.
        expected: RequestKey,
        /// Key echoed by the stream head (`None`: the head carried none).
        found: Option<RequestKey>,
    },
    /// An ABORT frame's reason is not UTF-8 (SPEC.md §3).
    #[error("abort frame reason is not valid UTF-8")]
    InvalidAbort,
    /// Bytes after the terminal frame (SPEC.md §3).
    #[error("{len} bytes of trailing data after the end of the stream")]
    TrailingData {
        /// Bytes found after the terminal frame (in this read).
        len: usize,
    },
    /// Input ended before the STREAM_END sentinel (SPEC.md §7).
    #[error("stream truncated {at}: {} frames, {} bytes received", progress.frames, progress.bytes)]
    Truncated {
        /// Where the stream stopped.
        at: Truncation,
        /// What had been received.
        progress: Progress,
    },
    /// The peer aborted the stream with an ABORT frame (SPEC.md §3, §7).
    #[error("stream aborted by the peer: {0}")]
    PeerAbort(Abort),
}

impl DecodeError {
    /// The error kind as named in SPEC.md and in the conformance manifest (the variant name).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::DecodeError;
    /// assert_eq!(DecodeError::InvalidAbort.kind(), "InvalidAbort");
    /// ```
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::BadMagic { .. } => "BadMagic",
            Self::UnsupportedVersion { .. } => "UnsupportedVersion",
            Self::HeaderChecksumMismatch { .. } => "HeaderChecksumMismatch",
            Self::PayloadChecksumMismatch { .. } => "PayloadChecksumMismatch",
            Self::UnknownFrameKind { .. } => "UnknownFrameKind",
            Self::InvalidFrameLength { .. } => "InvalidFrameLength",
            Self::FrameTooLarge { .. } => "FrameTooLarge",
            Self::MessageTooLarge { .. } => "MessageTooLarge",
            Self::StreamTooLarge { .. } => "StreamTooLarge",
            Self::TooManyMessages { .. } => "TooManyMessages",
            Self::TooManyKeepAlives { .. } => "TooManyKeepAlives",
            Self::TooManyIgnorableFrames { .. } => "TooManyIgnorableFrames",
            Self::SequenceGap { .. } => "SequenceGap",
            Self::SequenceReplay { .. } => "SequenceReplay",
            Self::ForeignFrame { .. } => "ForeignFrame",
            Self::UnexpectedFrame { .. } => "UnexpectedFrame",
            Self::LengthMismatch { .. } => "LengthMismatch",
            Self::DigestMismatch { .. } => "DigestMismatch",
            Self::MessageCountMismatch { .. } => "MessageCountMismatch",
            Self::RequestKeyMismatch { .. } => "RequestKeyMismatch",
            Self::InvalidAbort => "InvalidAbort",
            Self::TrailingData { .. } => "TrailingData",
            Self::Truncated { .. } => "Truncated",
            Self::PeerAbort(_) => "PeerAbort",
        }
    }

    #[cold]
    pub(crate) fn from_header(err: HeaderError, offset: u64) -> Self {
        match err {
            HeaderError::BadMagic { found } => Self::BadMagic { found, offset },
            HeaderError::UnsupportedVersion { version } => {
                Self::UnsupportedVersion { version, offset }
            }
            HeaderError::Checksum { stored, computed } => Self::HeaderChecksumMismatch {
                stored,
                computed,
                offset,
            },
        }
    }
}

impl From<PayloadError> for DecodeError {
    /// The frame layer's payload error as the stream's error (the decoder checked the length
    /// from the header already, so only an ABORT reason that is not UTF-8 reaches it).
    #[cold]
    fn from(err: PayloadError) -> Self {
        match err {
            PayloadError::InvalidLength { kind, len } => Self::InvalidFrameLength {
                kind,
                len: u32::try_from(len).unwrap_or(u32::MAX),
            },
            PayloadError::AbortReasonNotUtf8 => Self::InvalidAbort,
        }
    }
}

/// Why the encoder refused a call. The encoder writes nothing when it returns an error.
///
/// # Examples
///
/// ```
/// use mcp_framing::{EncodeError, StreamEncoder, StreamHead};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = bytes::BytesMut::new();
/// enc.end(&mut wire)?;
/// assert!(matches!(enc.push(b"late", &mut wire), Err(EncodeError::StreamFinished)));
/// # Ok::<(), EncodeError>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The stream already ended or was aborted.
    #[error("the stream already ended")]
    StreamFinished,
    /// `end` was called while a message was open; finish or abort it first.
    #[error("a message is still open: finish it before ending the stream")]
    MessageOpen,
    /// The message would exceed the encoder's message limit. Abort the stream with
    /// [`AbortCode::MessageTooLarge`](crate::frame::AbortCode::MessageTooLarge).
    #[error("message of at least {len} bytes exceeds the limit of {max}")]
    MessageTooLarge {
        /// Message length including the refused bytes.
        len: u64,
        /// Configured maximum.
        max: u64,
    },
    /// The abort reason is longer than
    /// `MAX_ABORT_REASON_LEN` (1024) bytes.
    #[error("abort reason of {len} bytes exceeds 1024")]
    AbortReasonTooLong {
        /// Length of the reason in bytes.
        len: usize,
    },
    /// The stream used all 2^32 sequence numbers (SPEC.md §4).
    #[error("the stream used all 2^32 sequence numbers")]
    SequenceExhausted,
    /// Serializing a value as JSON failed.
    #[error("serializing the message as JSON failed: {0}")]
    Json(#[source] serde_json::Error),
}
