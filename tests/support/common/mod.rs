//! Helpers shared by the integration tests: fixed ids, a raw frame writer for streams the encoder
//! refuses to write, decoding drivers (one shot, in pieces, through `FramedRead` over a reader
//! that returns `Pending`), and the conformance vector generator.
//!
//! Every test binary uses a different part of this module.
#![allow(dead_code)] // each test binary uses only some of the helpers

pub(crate) mod vectors;

use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::TryStreamExt;
use mcp_framing::internals::frame::{FrameHeader, HEADER_LEN};
use mcp_framing::{
    AttemptId, DecodeError, DecoderBuilder, Event, RequestKey, StreamDecoder, StreamHead,
};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::codec::FramedRead;

/// The request key of SPEC.md §13.
pub(crate) const KEY: RequestKey = RequestKey::from_bytes([
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
]);
/// Another request's key.
pub(crate) const OTHER_KEY: RequestKey = RequestKey::from_bytes([
    0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00,
]);
/// The attempt id of SPEC.md §13 (first sequence number 0xA1A2A3A4).
pub(crate) const ATTEMPT: AttemptId = AttemptId::from_bytes([
    0xa1, 0xa2, 0xa3, 0xa4, 0xb1, 0xb2, 0xb3, 0xb4, 0xc1, 0xc2, 0xc3, 0xc4, 0xd1, 0xd2, 0xd3, 0xd4,
]);
/// A retry of the same request on another backend (first sequence number 0x3C4D5E6F).
pub(crate) const RETRY: AttemptId = AttemptId::from_bytes([
    0x3c, 0x4d, 0x5e, 0x6f, 0x70, 0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7, 0xf8, 0x09, 0x1a, 0x2b,
]);
/// A retry whose attempt id shares its first four bytes with [`ATTEMPT`]: same sequence numbers.
pub(crate) const RETRY_SAME_PREFIX: AttemptId = AttemptId::from_bytes([
    0xa1, 0xa2, 0xa3, 0xa4, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
]);

/// The §13 message.
pub(crate) const OK_MESSAGE: &[u8] = br#"{"ok":true}"#;

pub(crate) fn head(key: Option<RequestKey>, attempt: AttemptId) -> StreamHead {
    StreamHead {
        request_key: key,
        attempt_id: attempt,
    }
}

pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Writes frames byte by byte, with any kind, sequence number, length or payload: for streams
/// that [`mcp_framing::StreamEncoder`] refuses to write.
#[derive(Clone, Debug)]
pub(crate) struct Raw {
    pub(crate) bytes: Vec<u8>,
    /// Sequence number of the next frame.
    pub(crate) seq: u32,
}

impl Raw {
    /// A stream starting with a correct HEAD frame.
    pub(crate) fn head(key: Option<RequestKey>, attempt: AttemptId) -> Self {
        let mut raw = Self {
            bytes: Vec::new(),
            seq: attempt.initial_sequence(),
        };
        raw.frame(0x01, &head_payload(key, attempt));
        raw
    }

    /// No frame yet; the next frame gets sequence number `seq`.
    pub(crate) fn empty(seq: u32) -> Self {
        Self {
            bytes: Vec::new(),
            seq,
        }
    }

    /// A frame with the next sequence number and correct CRCs.
    pub(crate) fn frame(&mut self, kind: u8, payload: &[u8]) -> &mut Self {
        let seq = self.seq;
        self.frame_with_seq(kind, seq, payload)
    }

    /// A frame with the given sequence number; the next frame follows it.
    pub(crate) fn frame_with_seq(&mut self, kind: u8, seq: u32, payload: &[u8]) -> &mut Self {
        self.bytes
            .extend_from_slice(&FrameHeader::for_payload(kind, seq, payload).to_bytes());
        self.bytes.extend_from_slice(payload);
        self.seq = seq.wrapping_add(1);
        self
    }

    /// A header (correct header CRC) declaring `len` bytes, followed by `payload` (which may be
    /// shorter or longer than `len`).
    pub(crate) fn header_claiming(&mut self, kind: u8, len: u32, payload: &[u8]) -> &mut Self {
        let header = FrameHeader {
            kind,
            sequence: self.seq,
            len,
            payload_crc: crc32fast::hash(payload),
        };
        self.bytes.extend_from_slice(&header.to_bytes());
        self.bytes.extend_from_slice(payload);
        self.seq = self.seq.wrapping_add(1);
        self
    }

    pub(crate) fn data(&mut self, payload: &[u8]) -> &mut Self {
        self.frame(0x02, payload)
    }

    /// MESSAGE_END with the true length and digest of `message`.
    pub(crate) fn message_end(&mut self, message: &[u8]) -> &mut Self {
        self.message_end_raw(message.len() as u64, sha256(message))
    }

    pub(crate) fn message_end_raw(&mut self, len: u64, digest: [u8; 32]) -> &mut Self {
        let mut payload = Vec::with_capacity(40);
        payload.extend_from_slice(&len.to_be_bytes());
        payload.extend_from_slice(&digest);
        self.frame(0x03, &payload)
    }

    /// One DATA frame and its MESSAGE_END.
    pub(crate) fn message(&mut self, message: &[u8]) -> &mut Self {
        if !message.is_empty() {
            self.data(message);
        }
        self.message_end(message)
    }

    pub(crate) fn stream_end(&mut self, count: u64) -> &mut Self {
        self.frame(0x04, &count.to_be_bytes())
    }

    pub(crate) fn abort(&mut self, code: u16, reason: &[u8]) -> &mut Self {
        let mut payload = code.to_be_bytes().to_vec();
        payload.extend_from_slice(reason);
        self.frame(0x05, &payload)
    }

    pub(crate) fn keep_alive(&mut self) -> &mut Self {
        self.frame(0x06, &[])
    }

    pub(crate) fn build(&self) -> Vec<u8> {
        self.bytes.clone()
    }
}

pub(crate) fn head_payload(key: Option<RequestKey>, attempt: AttemptId) -> [u8; 32] {
    let mut payload = [0u8; 32];
    if let Some(key) = key {
        payload[..16].copy_from_slice(key.as_bytes());
    }
    payload[16..].copy_from_slice(attempt.as_bytes());
    payload
}

/// A framed stream of `messages` (no request key), written by the encoder in DATA frames of
/// `frame_size` bytes, ended by its sentinel.
pub(crate) fn encode_messages(messages: &[Vec<u8>], frame_size: usize) -> BytesMut {
    let mut wire = BytesMut::new();
    let mut enc = mcp_framing::StreamEncoder::builder()
        .frame_size(frame_size)
        .build(StreamHead::for_request(None));
    for message in messages {
        enc.message(message, &mut wire).unwrap();
    }
    enc.end(&mut wire).unwrap();
    wire
}

/// Rewrites the header CRC of the frame header at `at` after its bytes were edited.
pub(crate) fn fix_header_crc(bytes: &mut [u8], at: usize) {
    let crc = crc32fast::hash(&bytes[at..at + 16]);
    bytes[at + 16..at + HEADER_LEN].copy_from_slice(&crc.to_be_bytes());
}

/// The byte ranges of the frames of a well-formed stream (a partial last frame included).
pub(crate) fn frame_spans(bytes: &[u8]) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    let mut at = 0;
    while at + HEADER_LEN <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let end = (at + HEADER_LEN).saturating_add(len).min(bytes.len());
        spans.push(at..end);
        at = end;
    }
    if at < bytes.len() {
        spans.push(at..bytes.len());
    }
    spans
}

/// Offsets at which a new frame starts, plus the end of the stream.
pub(crate) fn frame_boundaries(bytes: &[u8]) -> Vec<usize> {
    let mut cuts: Vec<usize> = frame_spans(bytes).iter().map(|s| s.start).collect();
    cuts.push(bytes.len());
    cuts
}

/// What a decoder made of a whole input: every event, then the end-of-input verdict
/// (`Ok(())`: clean end after the sentinel).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) events: Vec<Event>,
    pub(crate) end: Result<(), DecodeError>,
}

impl Outcome {
    /// The bytes of every verified message.
    pub(crate) fn messages(&self) -> Vec<Bytes> {
        self.events
            .iter()
            .filter_map(|event| match event {
                Event::Message(m) => Some(m.bytes().clone()),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn is_clean(&self) -> bool {
        self.end.is_ok()
    }

    /// The error's kind name, `"clean"` for a clean end.
    pub(crate) fn verdict(&self) -> &'static str {
        match &self.end {
            Ok(()) => "clean",
            Err(err) => err.kind(),
        }
    }

    /// For comparing decodings of one input split differently: `TrailingData` counts the bytes
    /// present in the read that found them, which depends on the split.
    pub(crate) fn split_independent(mut self) -> Self {
        if let Err(DecodeError::TrailingData { .. }) = self.end {
            self.end = Err(DecodeError::TrailingData { len: 0 });
        }
        self
    }
}

/// Feeds `pieces` one after the other, draining events after each, then ends the input.
pub(crate) fn decode_pieces<'a>(
    mut decoder: StreamDecoder,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> Outcome {
    let mut buf = BytesMut::new();
    let mut events = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(event)) => events.push(event),
                Ok(None) => break,
                Err(err) => {
                    // Errors are final: the decoder must repeat it, also at end of input.
                    assert_eq!(decoder.decode(&mut buf), Err(err.clone()));
                    assert_eq!(decoder.decode_eof(&mut buf), Err(err.clone()));
                    return Outcome {
                        events,
                        end: Err(err),
                    };
                }
            }
        }
    }
    loop {
        match decoder.decode_eof(&mut buf) {
            Ok(Some(event)) => events.push(event),
            Ok(None) => {
                // A clean end: with the sentinel (complete), or a final response delivered
                // without it (SPEC.md §7 row 4), which the outcome records.
                let outcome = decoder.outcome();
                assert!(outcome.is_clean(), "clean end but {:?}", outcome.verdict);
                assert_eq!(
                    decoder.is_complete(),
                    outcome.sentinel_seen,
                    "complete exactly when the sentinel arrived"
                );
                return Outcome {
                    events,
                    end: Ok(()),
                };
            }
            Err(err) => {
                assert!(!decoder.is_complete(), "error {err} but complete");
                return Outcome {
                    events,
                    end: Err(err),
                };
            }
        }
    }
}

pub(crate) fn decode_one_shot(decoder: StreamDecoder, input: &[u8]) -> Outcome {
    decode_pieces(decoder, [input])
}

/// Splits `input` at the given sorted offsets.
pub(crate) fn split_at_offsets<'a>(input: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for &cut in cuts {
        pieces.push(&input[start..cut]);
        start = cut;
    }
    pieces.push(&input[start..]);
    pieces
}

/// One step of a [`ScriptedReader`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum ReadStep {
    /// Return at most this many bytes (at least 1).
    Bytes(usize),
    /// Return `Poll::Pending` once (after waking the task).
    Pending,
}

/// An `AsyncRead` that hands out its data in the sizes of a script, interleaving `Pending`, then
/// repeats the script's last size until the data is out, then reports end of input.
#[derive(Debug)]
pub(crate) struct ScriptedReader {
    data: Vec<u8>,
    at: usize,
    script: Vec<ReadStep>,
    step: usize,
}

impl ScriptedReader {
    pub(crate) fn new(data: Vec<u8>, script: Vec<ReadStep>) -> Self {
        Self {
            data,
            at: 0,
            script,
            step: 0,
        }
    }
}

impl AsyncRead for ScriptedReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let step = self.script.get(self.step).copied();
        self.step += 1;
        let size = match step {
            Some(ReadStep::Pending) => {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Some(ReadStep::Bytes(n)) => n.max(1),
            None => match self.script.iter().rev().find_map(|s| match s {
                ReadStep::Bytes(n) => Some(*n),
                ReadStep::Pending => None,
            }) {
                Some(n) => n.max(1),
                None => usize::MAX,
            },
        };
        let n = size.min(buf.remaining()).min(self.data.len() - self.at);
        let at = self.at;
        buf.put_slice(&self.data[at..at + n]);
        self.at += n;
        Poll::Ready(Ok(()))
    }
}

/// Drives `FramedRead` with the decoder over `reader` to the end.
pub(crate) fn decode_framed<R: AsyncRead + Unpin>(decoder: StreamDecoder, reader: R) -> Outcome {
    let mut frames = FramedRead::new(reader, decoder);
    let mut events = Vec::new();
    futures::executor::block_on(async {
        loop {
            match frames.try_next().await {
                Ok(Some(event)) => events.push(event),
                Ok(None) => {
                    return Outcome {
                        events,
                        end: Ok(()),
                    };
                }
                Err(err) => {
                    let err = err
                        .as_decode()
                        .cloned()
                        .unwrap_or_else(|| panic!("not a decode error: {err}"));
                    return Outcome {
                        events,
                        end: Err(err),
                    };
                }
            }
        }
    })
}

/// A decoder built from a builder that tests reuse.
pub(crate) fn build(builder: &DecoderBuilder) -> StreamDecoder {
    builder.clone().build()
}

/// Name of a `Truncation` variant (`"InPayload"`, ...).
pub(crate) fn truncation_name(err: &DecodeError) -> Option<String> {
    match err {
        DecodeError::Truncated { at, .. } => Some(at.kind().to_owned()),
        _ => None,
    }
}

/// Proptest settings for this suite: `cases` cases, no failure files in the source tree.
pub(crate) fn proptest_config(cases: u32) -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

/// Offsets at which to cut or split a vector: every offset up to 8 KiB; for the large vectors
/// (16 KiB and 64 KiB DATA frames), every offset within 64 bytes of a frame boundary and every
/// 61st offset inside payloads. Every offset would cost tens of thousands of decodes hashing up
/// to 64 KiB each (minutes in a debug build), and inside one payload the decoder only waits.
pub(crate) fn cut_points(bytes: &[u8]) -> Vec<usize> {
    if bytes.len() <= 8 * 1024 {
        return (1..bytes.len()).collect();
    }
    let boundaries = frame_boundaries(bytes);
    (1..bytes.len())
        .filter(|&at| at % 61 == 0 || boundaries.iter().any(|&b| at.abs_diff(b) <= 64))
        .collect()
}
