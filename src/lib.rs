//! Self-delimiting, self-verifying framing for streamed MCP payloads.
//!
//! An MCP response body can close at any chunk boundary with a perfectly normal HTTP ending, and a
//! retry may land on another stateless backend. "The body closed" therefore does not mean "the
//! response is complete". This crate frames a response so that the bytes alone decide:
//!
//! - payload bytes travel in length-prefixed DATA frames, each with a CRC-32;
//! - every message ends with a MESSAGE_END frame carrying its length and SHA-256;
//! - the stream ends with an explicit STREAM_END sentinel (or an explicit ABORT);
//! - the HEAD frame echoes the client's request key and names the server's attempt, whose random
//!   id also seeds the sequence numbers, so a stream spliced from two attempts is caught at the
//!   first foreign frame.
//!
//! Nothing partial is ever handed out as complete, and a stream cut anywhere is a precise
//! [`DecodeError::Truncated`], never a clean end. The normative format is `SPEC.md`.
//!
//! # Wire layout
//!
//! ```text
//!  0       2     3      4          8          12          16          20
//!  +-------+-----+------+----------+----------+-----------+-----------+----------------+
//!  | 9F 4D | 01  | kind | sequence |  length  | payload   | header    | payload ...    |
//!  | magic | ver |  u8  |  u32 BE  |  u32 BE  | CRC32 BE  | CRC32 BE  | (length bytes) |
//!  +-------+-----+------+----------+----------+-----------+-----------+----------------+
//!
//!  stream = HEAD { DATA* MESSAGE_END | KEEPALIVE }* (STREAM_END | ABORT)
//! ```
//!
//! A KEEPALIVE frame with sequence number 7 is these 20 bytes (empty payload, payload CRC 0):
//!
//! ```
//! use mcp_framing::internals::frame::FrameHeader;
//! let bytes = FrameHeader::for_payload(0x06, 7, &[]).to_bytes();
//! assert_eq!(&bytes[..16], &[0x9f, 0x4d, 0x01, 0x06, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0]);
//! assert_eq!(&bytes[16..], &crc32fast::hash(&bytes[..16]).to_be_bytes());
//! ```
//!
//! # Server side
//!
//! ```
//! use bytes::BytesMut;
//! use mcp_framing::{RequestKey, StreamEncoder, StreamHead};
//!
//! # let key = RequestKey::random();
//! // `key` came with the request (Mcp-Framing-Request-Key header).
//! let mut enc = StreamEncoder::new(StreamHead::for_request(Some(key)));
//! let mut body = BytesMut::new();
//! enc.json(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress",
//!                             "params": {"progressToken": 1, "progress": 0.5}}), &mut body)?;
//! for token in ["{\"jsonrpc\":\"2.0\",\"id\":1,", "\"result\":{\"content\":[]}}"] {
//!     enc.push(token.as_bytes(), &mut body)?; // as an LLM produces it
//! }
//! enc.finish_message(&mut body)?;
//! enc.end(&mut body)?;
//! # Ok::<(), mcp_framing::EncodeError>(())
//! ```
//!
//! # Client side
//!
//! ```
//! use futures::TryStreamExt;
//! use mcp_framing::{Event, RequestKey, StreamDecoder};
//! use tokio_util::codec::FramedRead;
//! # use mcp_framing::{StreamEncoder, StreamHead};
//! # let key = RequestKey::random();
//! # let mut enc = StreamEncoder::new(StreamHead::for_request(Some(key)));
//! # let mut body = bytes::BytesMut::new();
//! # enc.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut body).unwrap();
//! # let cut = body[..body.len() - 10].to_vec(); // inside the response's MESSAGE_END
//! # enc.end(&mut body).unwrap();
//!
//! # tokio_test::block_on(async {
//! // `body` is any AsyncRead: a response body, a pipe, a socket.
//! let decoder = StreamDecoder::builder().expect_request_key(key).build();
//! let mut frames = FramedRead::new(&body[..], decoder);
//! while let Some(event) = frames.try_next().await? {
//!     if let Event::Message(message) = event {
//!         let value: serde_json::Value = message.deserialize().unwrap(); // verified bytes
//!         assert_eq!(value["id"], 1);
//!     }
//! }
//! // Reaching here means the response is complete: the STREAM_END sentinel arrived (or the
//! // body ended right after the verified final response: delivered, SPEC.md §7 row 4).
//!
//! // The same response cut before its MESSAGE_END is an error, never a clean end:
//! let decoder = StreamDecoder::builder().expect_request_key(key).build();
//! let frames = FramedRead::new(&cut[..], decoder);
//! let result: Result<Vec<Event>, _> = frames.try_collect().await;
//! assert!(result.unwrap_err().to_string().starts_with("stream truncated inside the payload"));
//! # Ok::<(), mcp_framing::CodecError>(())
//! # }).unwrap();
//! ```
//!
//! # Exactly-once tool calls
//!
//! The request key makes a retry identifiable; `dedupe` (feature `dedupe`, Redis with feature
//! `redis`) makes it safe on the server: a keyed `tools/call` executes at most once per
//! principal, tool and key, on whichever backend of a fleet it lands, and retries get its
//! result (SPEC.md §17). `client` (feature `client`) retries a cut, keyed request by itself
//! where the server's contract declares that deduplication.
#![forbid(unsafe_code)]
#![doc(test(attr(deny(warnings))))]
// docs.rs builds the docs on nightly with `--cfg docsrs`: every item then says which features it
// needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The modules below the public API: private, re-exported whole by [`internals`] (feature
/// `internals`) for the CLI, the fuzz targets and the tests. Without that feature, what only they
/// use is unused, which is not a defect of these modules.
macro_rules! below_the_api {
    ($($(#[$attr:meta])* $vis:vis mod $name:ident;)*) => {$(
        $(#[$attr])*
        #[cfg_attr(
            not(feature = "internals"),
            allow(dead_code, unused_imports, unreachable_pub, clippy::wrong_self_convention)
        )]
        $vis mod $name;
    )*};
}

// The retry policy and its decisions: the clients' (feature `client`, which makes the decisions
// public); without it only the deduplication refusal's data key is used.
#[cfg_attr(
    not(feature = "client"),
    allow(dead_code, unused_imports, unreachable_pub)
)]
mod retry;
below_the_api! {
    mod frame;
    mod jsonrpc;
    mod limits;
}

#[cfg(feature = "client")]
pub mod client;
#[cfg(feature = "codec")]
mod codec;
pub mod contract;
mod decoder;
#[cfg(feature = "dedupe")]
pub mod dedupe;
mod encoder;
mod error;
mod event;
#[cfg(feature = "http")]
pub mod http;
mod ids;
#[cfg(feature = "rmcp-server")]
mod json_text;
pub mod mapping;
pub mod outcome;
mod outgoing;
pub mod request;
#[cfg(any(feature = "rmcp-server", feature = "rmcp-client"))]
pub mod rmcp_http;
pub mod telemetry;

// The unit tests' shared helpers; they name the crate as the tests outside it do, so that the
// helpers tests/support shares with them compile in both (src/test_support/mod.rs).
#[cfg(test)]
extern crate self as mcp_framing;
#[cfg(test)]
mod test_support;

#[cfg(feature = "codec")]
pub use codec::CodecError;
pub use decoder::{DecodedStream, DecoderBuilder, StreamDecoder};
pub use encoder::{EncoderBuilder, StreamEncoder};
pub use error::{DecodeError, EncodeError, Progress, StreamState, Truncation};
pub use event::{Event, MessageSummary, StreamSummary, UnverifiedChunk, VerifiedMessage};
pub use frame::{Abort, AbortCode, FrameKind, StreamHead};
pub use ids::{AttemptId, KeyFingerprint, ParseIdError, RequestKey};
pub use limits::Limits;
#[cfg(feature = "sse")]
pub use mapping::decoder::{BodyDecoder, BodyError};
pub use outgoing::Outgoing;

/// The frame layer, the SSE parsers and the per-mapping codecs below the public API: what the
/// in-repo `mcp-frame` tool and the fuzz targets use, and the tests of this repository that drive
/// a piece below the API from outside the crate (feature `internals`). Names that are public
/// elsewhere are not repeated here: use their public paths.
///
/// Hidden from the documentation and outside the stability promise: applications decode bodies
/// with [`BodyDecoder`] and write them with `http::FramedBody` or `rmcp_http::FramingLayer`.
#[cfg(feature = "internals")]
#[doc(hidden)] // the CLI's, fuzz targets' and tests' view of the internals; not a public API
pub mod internals {
    /// The frame layer (SPEC.md §4-§8): headers, payloads, the magic and the lengths (the kinds
    /// are public: [`FrameKind`](crate::FrameKind)).
    pub mod frame {
        pub use crate::frame::{
            FrameHeader, HEADER_LEN, MAGIC, MAX_ABORT_REASON_LEN, MessageEnd, PayloadError,
            StreamEnd, VERSION,
        };
    }
    /// The request reading (the fuzz targets'), beside the public [`dedupe`](crate::dedupe)
    /// module. The engine driven call by call and its claim protocol are the crate's: its tests
    /// drive them as unit tests.
    #[cfg(feature = "dedupe")]
    pub mod dedupe {
        pub use crate::dedupe::deduplicator::{KeyedCall, KeyedCallError};
        pub use crate::dedupe::fingerprint::canonical_json;
        pub use crate::dedupe::request_json::{RequestJsonError, parse_request_json};
    }
    /// The client side of the contract (discovery parsing, the client policy) and its wire
    /// constants, beside the public [`contract`](crate::contract) module.
    pub mod contract {
        pub use crate::contract::declaration::{KNOWN_TRANSPORTS, SUPPORTED_VERSIONS};
        pub use crate::contract::discovery::ServerDiscovery;
        pub use crate::contract::policy::ClientPolicy;
    }
    /// The HTTP mapping's other header names and opt-in headers announcing a decoder's limits,
    /// beside the public [`http`](crate::http) module.
    #[cfg(feature = "http")]
    pub mod http {
        #[cfg(feature = "dedupe")]
        pub use crate::http::dedupe::DEDUPE_HEADER;
        pub use crate::http::headers::LIMITS_HEADER;
        pub use crate::http::opt_in::opt_in_headers_for;
    }
    /// The defaults of the frame, message and SSE event sizes, the SSE event bounds derived from
    /// them and the frame-level bounds ([`Limits`](crate::Limits) is public, and its fields hold
    /// the per-stream bounds' defaults).
    pub mod limits {
        pub use crate::limits::{
            DEFAULT_FRAME_SIZE, DEFAULT_MAX_COMPAT_EVENT_DATA, DEFAULT_MAX_EVENT_DATA,
            DEFAULT_MAX_FRAME_PAYLOAD, DEFAULT_MAX_MESSAGE_SIZE, MAX_ABORT_REASON_LEN,
            MIN_MAX_FRAME_PAYLOAD,
        };
    }
    /// The table of verdict kinds, beside the public [`outcome`](crate::outcome) module.
    pub mod outcome {
        pub use crate::outcome::verdict::VerdictKind;
    }
    /// JSON-RPC message rules shared by the decoders and the layers.
    pub mod jsonrpc {
        pub use crate::jsonrpc::is_response;
    }
    /// A body's two ends below [`BodyDecoder`](crate::BodyDecoder) and `http::FramedBody`: the mapping's decoder to
    /// frame bytes (the CLI's `inspect` counts its frames itself) and the mapping's encoder with
    /// its error (what `FramedBody`, `FramingLayer` and `mcp-frame encode` write with).
    #[cfg(feature = "sse")]
    pub mod body {
        pub use crate::mapping::compat::CompatEncodeError;
        pub use crate::mapping::decoder::MappingDecoder;
        pub use crate::mapping::encoder::MappingEncoder;
    }
    /// The base64 SSE mapping (SPEC.md §15): its parser, decoder and encoder.
    #[cfg(feature = "sse")]
    pub mod sse {
        pub use crate::mapping::sse::{SseEvent, SseFrameDecoder, SseFrameEncoder, SseParser};
    }
    /// The compatible SSE mapping (SPEC.md §18): its decoder and encoder.
    #[cfg(feature = "sse")]
    pub mod sse_compat {
        pub use crate::mapping::compat::{
            CompatDecoder, CompatEncodeError, CompatEncoder, RECORD_PREFIX,
        };
    }
}

// The README's examples use the integrations too: they are doctested with the features that
// `scripts/test` turns on (all of them).
#[cfg(all(doctest, feature = "rmcp"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// So are the Rust examples of the pages in docs/ that the README links to.
#[cfg(all(doctest, feature = "rmcp"))]
#[doc = include_str!("../docs/codec.md")]
struct DocsCodecDoctests;
#[cfg(all(doctest, feature = "rmcp"))]
#[doc = include_str!("../docs/http.md")]
struct DocsHttpDoctests;
#[cfg(all(doctest, feature = "rmcp"))]
#[doc = include_str!("../docs/deduplication.md")]
struct DocsDeduplicationDoctests;
