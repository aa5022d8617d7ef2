//! What a decoder reports: stream head, unverified chunks, verified messages, the end.

use bytes::Bytes;
use std::fmt;

// The HEAD and ABORT payloads are frame types (`crate::frame`); the integrations import them here.
pub(crate) use crate::frame::{Abort, AbortCode, StreamHead};

/// DATA payload bytes handed out as they arrive: **not yet verified**.
///
/// The bytes are a zero-copy slice of the decoder's read buffer. They passed the frame's CRC-32,
/// but the message they belong to is not verified until its MESSAGE_END frame checks the length and
/// SHA-256 (SPEC.md §5). Use them for progress, never as a complete value.
///
/// # Examples
///
/// ```
/// use mcp_framing::{Event, StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = bytes::BytesMut::new();
/// enc.push(b"{\"partial\":", &mut wire)?;
/// let mut decoder = StreamDecoder::new();
/// let mut events = Vec::new();
/// while let Some(event) = decoder.decode(&mut wire)? {
///     events.push(event); // `None`: the rest of the message has not arrived
/// }
/// let chunk = events.iter().find_map(|e| match e {
///     Event::Chunk(c) => Some(c.clone()),
///     _ => None,
/// });
/// assert_eq!(chunk.unwrap().unverified_bytes().as_ref(), b"{\"partial\":");
/// # Ok::<(), Box<dyn std::error::Error>>(())
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
    /// ```
    /// use mcp_framing::{Event, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.push(b"[1,2", &mut wire)?;
    /// let mut decoder = StreamDecoder::new();
    /// let mut seen = Vec::new();
    /// while let Some(event) = decoder.decode(&mut wire).unwrap() {
    ///     if let Event::Chunk(chunk) = event {
    ///         seen.extend_from_slice(chunk.unverified_bytes()); // progress only, not a value yet
    ///     }
    /// }
    /// assert_eq!(seen, b"[1,2");
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn unverified_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Index (0-based) of the message this chunk belongs to.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{Event, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(b"{}", &mut wire)?;
    /// enc.push(b"[", &mut wire)?; // the second message, still open
    /// let mut decoder = StreamDecoder::new();
    /// let mut indexes = Vec::new();
    /// while let Some(event) = decoder.decode(&mut wire).unwrap() {
    ///     if let Event::Chunk(chunk) = event {
    ///         indexes.push(chunk.message_index());
    ///     }
    /// }
    /// assert_eq!(indexes, [0, 1]);
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn message_index(&self) -> u64 {
        self.message_index
    }

    /// Offset of the chunk's first byte within its message.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{Event, StreamDecoder, StreamEncoder};
    ///
    /// // Frames of 4 bytes: each chunk starts 4 bytes further into the message.
    /// let mut enc = StreamEncoder::builder()
    ///     .frame_size(4)
    ///     .build(mcp_framing::StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.push(b"0123456789", &mut wire)?;
    /// let mut decoder = StreamDecoder::new();
    /// let mut offsets = Vec::new();
    /// while let Some(event) = decoder.decode(&mut wire).unwrap() {
    ///     if let Event::Chunk(chunk) = event {
    ///         offsets.push(chunk.offset());
    ///     }
    /// }
    /// assert_eq!(offsets, [0, 4, 8]);
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
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
    /// The stream's final JSON-RPC response (SPEC.md §1), as the decoder recognized it.
    pub(crate) final_response: bool,
}

impl VerifiedMessage {
    /// The verified bytes of the message.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.push(b"{\"a\":", &mut wire)?;
    /// enc.push(b"1}", &mut wire)?;
    /// enc.finish_message(&mut wire)?;
    /// enc.end(&mut wire)?;
    /// let stream = StreamDecoder::new().decode_all(&wire).unwrap();
    /// assert_eq!(stream.messages[0].bytes().as_ref(), b"{\"a\":1}"); // the pieces, joined and checked
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Takes the verified bytes.
    ///
    /// # Examples
    ///
    /// See [`VerifiedMessage`].
    // Hidden: `bytes()` is a `Bytes` (a clone shares the buffer); the CLI and the tests use it.
    #[doc(hidden)]
    #[must_use]
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// Index, length and digest of the message.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// let sent = enc.message(b"{}", &mut wire)?; // the sender's summary
    /// enc.end(&mut wire)?;
    /// let stream = StreamDecoder::new().decode_all(&wire).unwrap();
    /// assert_eq!(stream.messages[0].summary(), sent);
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn summary(&self) -> MessageSummary {
        self.summary
    }

    /// Whether this message is the stream's **final JSON-RPC response** (SPEC.md §1): the first
    /// message of its stream that is a JSON-RPC response (one JSON object with an `id` and a
    /// `result` or an `error`, [`jsonrpc::is_response`](crate::jsonrpc::is_response)), which §1
    /// makes the stream's last message.
    ///
    /// The decoder decides it once, as it verifies the message, when it assembles messages and
    /// expects a request key ([`DecoderBuilder::expect_request_key`](crate::DecoderBuilder::expect_request_key):
    /// the key echoed in HEAD binds the stream to the request). Such a response is **delivered**
    /// even if the input ends before the STREAM_END sentinel, provided nothing but KEEPALIVE,
    /// ignorable frames or STREAM_END's own bytes followed it (clean in Regime B, SPEC.md §7).
    /// Always `false` from a decoder that expects no key, and for every message after the first
    /// response (a second response breaks §1). Callers hold or deliver a message by this flag and
    /// never scan its bytes again.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{RequestKey, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let key = RequestKey::random();
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(Some(key)));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#, &mut wire)?;
    /// enc.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut wire)?;
    /// enc.end(&mut wire)?;
    ///
    /// let stream = StreamDecoder::builder().expect_request_key(key).build().decode_all(&wire).unwrap();
    /// let finals: Vec<bool> = stream.messages.iter().map(|m| m.is_final_response()).collect();
    /// assert_eq!(finals, [false, true]);
    ///
    /// // A decoder that expects no key does not look:
    /// let stream = StreamDecoder::new().decode_all(&wire).unwrap();
    /// assert!(!stream.messages[1].is_final_response());
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn is_final_response(&self) -> bool {
        self.final_response
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
    /// ```
    /// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(br#"{"jsonrpc":"2.0","id":7,"result":{"n":3}}"#, &mut wire)?;
    /// enc.message(b"not json", &mut wire)?;
    /// enc.end(&mut wire)?;
    /// let stream = StreamDecoder::new().decode_all(&wire).unwrap();
    ///
    /// let value: serde_json::Value = stream.messages[0].deserialize().unwrap();
    /// assert_eq!(value["result"]["n"], 3);
    /// // Verified is not valid JSON: the server's bytes, reported as a serde_json error.
    /// assert!(stream.messages[1].deserialize::<serde_json::Value>().is_err());
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    pub fn deserialize<'a, T: serde::Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.bytes)
    }
}

impl fmt::Debug for VerifiedMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifiedMessage")
            .field("summary", &self.summary)
            .field("bytes", &self.bytes)
            .field("final_response", &self.final_response)
            .finish()
    }
}

/// Totals of a stream that ended: with its STREAM_END sentinel ([`sentinel_seen`](Self::sentinel_seen)),
/// or at the end of input right after its verified final response (SPEC.md §7: delivered, clean
/// in Regime B).
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
/// assert!(stream.summary.sentinel_seen);
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamSummary {
    /// Messages the stream carried (checked against the sentinel's count, when it arrived).
    pub messages: u64,
    /// Whole frames received, the sentinel included.
    pub frames: u64,
    /// Bytes received: the sentinel included, or, without it, every byte up to the end of input
    /// (a cut sentinel's bytes too).
    pub bytes: u64,
    /// Whether the STREAM_END sentinel arrived (Regime A). `false`: the input ended after the
    /// verified final response, before or inside STREAM_END (SPEC.md §7 row 9: the response is
    /// delivered, clean in Regime B; only a decoder that expects a request key and assembles
    /// messages ends a stream so).
    pub sentinel_seen: bool,
}

/// What the decoder reports as a stream arrives.
///
/// A stream yields `Opened`, then any number of `Chunk`, `Message` (or `MessageVerified` when the
/// decoder does not assemble messages) and `KeepAlive`, then at most one of `End` or `Aborted`.
/// Only `Message`/`MessageVerified` say a message is complete. `End` comes from `decode` when the
/// sentinel arrived (the stream is complete when the input ends right after it), or from
/// `decode_eof` when the input ended after the stream's verified final response without it
/// (delivered, SPEC.md §7; [`StreamSummary::sentinel_seen`] is then `false`);
/// [`StreamDecoder::outcome`](crate::StreamDecoder::outcome) tells which.
///
/// # Examples
///
/// ```
/// use mcp_framing::{Event, StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = bytes::BytesMut::new();
/// enc.message(b"{}", &mut wire)?;
/// enc.end(&mut wire)?;
/// let mut decoder = StreamDecoder::new();
/// let mut events = Vec::new();
/// while let Some(event) = decoder.decode(&mut wire)? {
///     events.push(event);
/// }
/// let kinds: Vec<&str> = events
///     .iter()
///     .map(|e| match e {
///         Event::Opened(_) => "opened",
///         Event::Chunk(_) => "chunk",
///         Event::Message(_) => "message",
///         Event::End(_) => "end",
///         _ => "other",
///     })
///     .collect();
/// assert_eq!(kinds, ["opened", "chunk", "message", "end"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
// A tag of its own for the variant: without it the compiler keeps the variant in the spare
// values of `VerifiedMessage`'s `final_response` flag, and telling it apart from there (and
// that of the `Result<Option<Event>, _>` around it) costs every decoded frame more (issue 18:
// the `tokens-16B` bench).
#[repr(u8)]
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
    /// The end of the stream. With [`StreamSummary::sentinel_seen`]: the STREAM_END sentinel
    /// arrived; nothing but the end of input may follow, then the stream is complete (Regime A,
    /// SPEC.md §3, §7). Without: reported by
    /// [`decode_eof`](crate::StreamDecoder::decode_eof) as its last event when the input ended
    /// after the verified final response ([`VerifiedMessage::is_final_response`]) and before
    /// the sentinel: the response is delivered (clean in Regime B, SPEC.md §7 row 9).
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
