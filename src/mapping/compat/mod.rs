//! The compatible SSE mapping (SPEC.md §18): every JSON-RPC message stays a standard MCP
//! `message` event, the frames ride alongside in SSE comment lines.
//!
//! The SSE mapping of §15 ([`super::sse`]) wraps every frame in base64 inside `mcp-frame`
//! events: only a client that opted in can read it. In this mapping a stock MCP client (the
//! Python or TypeScript SDK, rmcp, a gateway) sees an ordinary MCP stream, because every SSE
//! parser drops comment lines silently, while a framing client rebuilds from the comments and the
//! events exactly the binary stream of §2–§7 and hands it to a [`StreamDecoder`](crate::StreamDecoder), so every check
//! and every verdict is the frame layer's own.
//!
//! ```text
//! :mcp-framing n00BAaGio6QAAAAgkwbbBv6U81YAESIz...   <- a record: base64 of whole frames (HEAD,
//!                                                       the DATA header, MESSAGE_END, STREAM_END);
//!                                                       a DATA frame is its header alone
//! data: {"ok":true}                                  <- the message event: the DATA payload
//!                                                    <- blank line: the event is dispatched
//! ```
//!
//! A record precedes the event it describes. The receiver moves the record's frames into the
//! binary stream up to the first DATA header, which then *waits* for its event; when the event is
//! dispatched, its data becomes that DATA frame's payload (and the payloads of the DATA headers
//! right after it), and the frames queued behind them (MESSAGE_END, STREAM_END) follow. So a
//! message is verified only once its whole event arrived, a body cut anywhere before the end of
//! the last event is a [`Truncated`](crate::DecodeError::Truncated) stream, and a gateway that
//! strips the comments turns the first event into [`CompatError::UnframedEvent`].
//!
//! Both halves are sans-I/O: [`CompatEncoder`] writes records and events into a `BytesMut`,
//! [`CompatDecoder`] takes body bytes as they arrive (any chunking) and returns the binary frame
//! bytes they carry.
//!
//! # Examples
//!
//! ```
//! use bytes::BytesMut;
//! use mcp_framing::internals::sse_compat::{CompatDecoder, CompatEncoder};
//! use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
//!
//! let mut enc = CompatEncoder::new(StreamEncoder::new(StreamHead::for_request(None)));
//! let mut body = BytesMut::new();
//! enc.message(br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#, &mut body)?;
//! enc.final_message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut body)?;
//! // What a stock client parses: two ordinary `message` events.
//! let text = std::str::from_utf8(&body).unwrap();
//! assert!(text.contains("\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"));
//!
//! // A framing client, reading the body in 5-byte pieces:
//! let mut dec = CompatDecoder::new();
//! let mut frames = BytesMut::new();
//! for piece in body.chunks(5) {
//!     dec.feed(piece, &mut frames).unwrap();
//! }
//! dec.finish();
//! let stream = StreamDecoder::new().decode_all(&frames).unwrap(); // the sentinel arrived
//! assert_eq!(stream.messages.len(), 2);
//!
//! // The same body cut one byte before its end (the final blank line) is never complete:
//! let mut dec = CompatDecoder::new();
//! let mut frames = BytesMut::new();
//! dec.feed(&body[..body.len() - 1], &mut frames).unwrap();
//! dec.finish();
//! assert!(StreamDecoder::new().decode_all(&frames).is_err());
//! # Ok::<(), mcp_framing::internals::sse_compat::CompatEncodeError>(())
//! ```


mod decoder;
mod encoder;
mod record;

pub use decoder::CompatDecoder;
pub use encoder::{CompatEncodeError, CompatEncoder};
#[cfg(feature = "rmcp-server")]
pub(crate) use encoder::OpenRecord;
pub use record::RECORD_PREFIX;
