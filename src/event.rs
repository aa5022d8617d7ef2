//! What a decoder reports: stream head, unverified chunks, verified messages, the end.

use bytes::Bytes;
use std::fmt;

use crate::ids::{AttemptId, RequestKey};

/// The metadata of a stream's HEAD frame (SPEC.md §3).
///
/// # Examples
///
/// ```
/// use mcp_framing::{RequestKey, StreamHead};
///
/// let key = RequestKey::random();
/// let head = StreamHead::for_request(Some(key)); // draws a random attempt id
/// assert_eq!(head.request_key, Some(key));
/// assert_eq!(head.initial_sequence(), head.attempt_id.initial_sequence());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamHead {
    /// The client's request key echoed by the server; `None` when the request carried none.
    pub request_key: Option<RequestKey>,
    /// The server's random id for this response attempt.
    pub attempt_id: AttemptId,
}

impl StreamHead {
    /// A head for a new response to a request with the given key, with a fresh random attempt id.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::StreamHead;
    /// let a = StreamHead::for_request(None);
    /// let b = StreamHead::for_request(None);
    /// assert_ne!(a.attempt_id, b.attempt_id);
    /// ```
    #[must_use]
    pub fn for_request(request_key: Option<RequestKey>) -> Self {
        Self {
            request_key,
            attempt_id: AttemptId::random(),
        }
    }

    /// The sequence number of the HEAD frame (SPEC.md §4).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{AttemptId, StreamHead};
    /// let head = StreamHead { request_key: None, attempt_id: AttemptId::from_bytes([0xff; 16]) };
    /// assert_eq!(head.initial_sequence(), u32::MAX);
    /// ```
    #[must_use]
    pub const fn initial_sequence(&self) -> u32 {
        self.attempt_id.initial_sequence()
    }
}

/// DATA payload bytes handed out as they arrive: **not yet verified**.
///
/// The bytes are a zero-copy slice of the decoder's read buffer. They passed the frame's CRC-32,
/// but the message they belong to is not verified until its MESSAGE_END frame checks the length and
/// SHA-256 (SPEC.md §5). Use them for progress, never as a complete value.
///
/// # Examples
///
/// ```
/// use mcp_framing::{decode_all_events, Event, StreamEncoder, StreamHead};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = bytes::BytesMut::new();
/// enc.push(b"{\"partial\":", &mut wire)?;
/// let events = decode_all_events(&wire);
/// let chunk = events.iter().find_map(|e| match e {
///     Ok(Event::Chunk(c)) => Some(c.clone()),
///     _ => None,
/// });
/// assert_eq!(chunk.unwrap().unverified_bytes().as_ref(), b"{\"partial\":");
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct UnverifiedChunk {
    pub(crate) message_index: u64,
    pub(crate) offset: u64,
    pub(crate) bytes: Bytes,
}

impl UnverifiedChunk {
    /// The chunk's bytes. Named so that code using them reads as what it is.
    ///
    /// # Examples
    ///
    /// See [`UnverifiedChunk`].
    #[must_use]
    pub fn unverified_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Index (0-based) of the message this chunk belongs to.
    ///
    /// # Examples
    ///
    /// See [`UnverifiedChunk`].
    #[must_use]
    pub fn message_index(&self) -> u64 {
        self.message_index
    }

    /// Offset of the chunk's first byte within its message.
    ///
    /// # Examples
    ///
    /// See [`UnverifiedChunk`].
    #[must_use]
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

impl fmt::Debug for UnverifiedChunk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnverifiedChunk")
            .field("message_index", &self.message_index)
            .field("offset", &self.offset)
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// The length and SHA-256 of a message whose MESSAGE_END frame checked out.
///
/// # Examples
///
/// ```
/// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = bytes::BytesMut::new();
/// enc.message(b"hello", &mut wire)?;
/// enc.end(&mut wire)?;
/// let stream = StreamDecoder::new().decode_all(&wire).unwrap();
/// let summary = stream.messages[0].summary();
/// assert_eq!((summary.index, summary.len), (0, 5));
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MessageSummary {
    /// Index (0-based) of the message in its stream.
    pub index: u64,
    /// Length of the message in bytes.
    pub len: u64,
    /// SHA-256 of the message.
    pub sha256: [u8; 32],
}

impl fmt::Debug for MessageSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageSummary")
            .field("index", &self.index)
            .field("len", &self.len)
            .field("sha256", &Hex(&self.sha256))
            .finish()
    }
}

/// A complete message whose length and SHA-256 were checked against its MESSAGE_END frame.
///
/// This is the only type through which the decoder hands out a message as complete.
///
/// # Examples
///
/// ```
/// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
///
/// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
/// struct Reply { ok: bool }
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = bytes::BytesMut::new();
/// enc.json(&Reply { ok: true }, &mut wire)?;
/// enc.end(&mut wire)?;
///
/// let stream = StreamDecoder::new().decode_all(&wire).unwrap();
/// let reply: Reply = stream.messages[0].deserialize().unwrap();
/// assert_eq!(reply, Reply { ok: true });
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct VerifiedMessage {
    pub(crate) summary: MessageSummary,
    pub(crate) bytes: Bytes,
}

impl VerifiedMessage {
    /// The verified bytes of the message.
    ///
    /// # Examples
    ///
    /// See [`VerifiedMessage`].
    #[must_use]
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Takes the verified bytes.
    ///
    /// # Examples
    ///
    /// See [`VerifiedMessage`].
    #[must_use]
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// Index, length and digest of the message.
    ///
    /// # Examples
    ///
    /// See [`MessageSummary`].
    #[must_use]
    pub fn summary(&self) -> MessageSummary {
        self.summary
    }

    /// Deserializes the message as JSON into any `serde` type (e.g. an MCP JSON-RPC message).
    ///
    /// # Errors
    ///
    /// The `serde_json` error if the verified bytes are not valid JSON for `T`. (The bytes are
    /// what the server sent: a parse error here is the server's, never a truncation.)
    ///
    /// # Examples
    ///
    /// See [`VerifiedMessage`].
    pub fn deserialize<'a, T: serde::Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.bytes)
    }
}

impl fmt::Debug for VerifiedMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifiedMessage")
            .field("summary", &self.summary)
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// Totals of a stream that ended with its STREAM_END sentinel.
///
/// # Examples
///
/// ```
/// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = bytes::BytesMut::new();
/// enc.message(b"[]", &mut wire)?;
/// enc.end(&mut wire)?;
/// let stream = StreamDecoder::new().decode_all(&wire).unwrap();
/// assert_eq!(stream.summary.messages, 1);
/// assert_eq!(stream.summary.frames, 4); // HEAD, DATA, MESSAGE_END, STREAM_END
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamSummary {
    /// Messages the stream carried (checked against the sentinel's count).
    pub messages: u64,
    /// Frames received, the sentinel included.
    pub frames: u64,
    /// Bytes received, the sentinel included.
    pub bytes: u64,
}

/// A reason code of an ABORT frame (SPEC.md §3, registry §3.1). The code decides whether a
/// client retries ([`RetryPolicy`](crate::RetryPolicy), SPEC.md §11.6).
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
    /// See [`Abort`].
    #[must_use]
    pub fn new(code: AbortCode, reason: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.into(),
        }
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

/// What the decoder reports as a stream arrives.
///
/// A stream yields `Opened`, then any number of `Chunk`, `Message` (or `MessageVerified` when the
/// decoder does not assemble messages) and `KeepAlive`, then exactly one of `End` or `Aborted`.
/// Only `Message`/`MessageVerified` say a message is complete, and only `End` says the stream is.
///
/// # Examples
///
/// ```
/// use mcp_framing::{decode_all_events, Event, StreamEncoder, StreamHead};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = bytes::BytesMut::new();
/// enc.message(b"{}", &mut wire)?;
/// enc.end(&mut wire)?;
/// let kinds: Vec<&str> = decode_all_events(&wire)
///     .iter()
///     .map(|e| match e.as_ref().unwrap() {
///         Event::Opened(_) => "opened",
///         Event::Chunk(_) => "chunk",
///         Event::Message(_) => "message",
///         Event::End(_) => "end",
///         _ => "other",
///     })
///     .collect();
/// assert_eq!(kinds, ["opened", "chunk", "message", "end"]);
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The HEAD frame arrived (and its request key matched, if one was expected).
    Opened(StreamHead),
    /// DATA bytes of the current message, not yet verified.
    Chunk(UnverifiedChunk),
    /// A complete, verified message (when the decoder assembles messages, the default).
    Message(VerifiedMessage),
    /// The current message's length and digest checked out; its bytes were the chunks handed
    /// out since the previous message (when the decoder does not assemble messages).
    MessageVerified(MessageSummary),
    /// A KEEPALIVE frame: the server is alive. Useful to reset idle timers.
    KeepAlive,
    /// The STREAM_END sentinel: the stream is complete.
    End(StreamSummary),
    /// The peer aborted the stream; no further message will come, the open one is discarded.
    /// End of input after this reports [`DecodeError::PeerAbort`](crate::DecodeError::PeerAbort).
    Aborted(Abort),
}

pub(crate) struct Hex<'a>(pub(crate) &'a [u8]);

impl fmt::Debug for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}
