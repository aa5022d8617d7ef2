//! The conformance vectors of SPEC.md §14: a deterministic generator (fixed request keys and
//! attempt ids) of `tests/vectors/*.bin` and `tests/vectors/manifest.json`.
//!
//! Valid streams are written by [`StreamEncoder`]; streams it refuses to write are written frame by
//! frame with [`Raw`]. Every expected verdict is stated here by hand from SPEC.md, never computed
//! by the decoder under test. The test `committed_vectors_match_the_generator` regenerates them in
//! memory and compares with the committed files, and writes them when
//! `MCP_FRAMING_WRITE_VECTORS=1` is set.

use bytes::BytesMut;
use mcp_framing::{AbortCode, AttemptId, RequestKey, StreamEncoder};
use serde::Serialize;

use super::{
    ATTEMPT, KEY, OK_MESSAGE, OTHER_KEY, RETRY, RETRY_SAME_PREFIX, Raw, fix_header_crc, head,
    head_payload, sha256,
};

/// The manifest's `spec_version`.
pub(crate) const SPEC_VERSION: u32 = 1;
/// Defaults of SPEC.md §6, written out in every vector's `decoder` object.
pub(crate) const DEFAULT_FRAME: u32 = 65_536;
pub(crate) const DEFAULT_MESSAGE: u64 = 16_777_216;

/// One conformance vector: the bytes, the decoder configuration and the expected verdict.
#[derive(Clone, Debug)]
pub(crate) struct Vector {
    pub(crate) file: String,
    pub(crate) description: String,
    pub(crate) bytes: Vec<u8>,
    pub(crate) max_frame_payload: u32,
    pub(crate) max_message_size: u64,
    pub(crate) request_key: Option<RequestKey>,
    /// The per-stream bounds of SPEC.md §6.1 and §15 this vector sets (the defaults otherwise).
    pub(crate) bounds: Bounds,
    pub(crate) expect: Expect,
    /// `"binary"` (SPEC.md §2–§7), `"sse"` (§15: the body is a `text/event-stream`) or
    /// `"compat"` (§18).
    pub(crate) mapping: &'static str,
    /// The SSE event bound, when not the mapping's default (SPEC.md §15, §18.7).
    pub(crate) max_event_data: Option<usize>,
}

/// Per-stream bounds a vector sets (SPEC.md §6.1, §15); `None` keeps the default, and only the
/// bounds set appear in the manifest.
#[derive(Clone, Copy, Debug, Default, Serialize, serde::Deserialize)]
pub(crate) struct Bounds {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_stream_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_messages: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_keepalives_in_a_row: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_ignorable_in_a_row: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_sse_comments_in_a_row: Option<u32>,
}

impl Bounds {
    /// `limits` with these bounds applied.
    pub(crate) fn apply(&self, mut limits: mcp_framing::Limits) -> mcp_framing::Limits {
        if let Some(n) = self.max_stream_bytes {
            limits = limits.max_stream_bytes(n);
        }
        if let Some(n) = self.max_messages {
            limits = limits.max_messages(n);
        }
        if let Some(n) = self.max_keepalives_in_a_row {
            limits = limits.max_keepalives_in_a_row(n);
        }
        if let Some(n) = self.max_ignorable_in_a_row {
            limits = limits.max_ignorable_in_a_row(n);
        }
        if let Some(n) = self.max_sse_comments_in_a_row {
            limits = limits.max_sse_comments_in_a_row(n);
        }
        limits
    }
}

impl Vector {
    /// A decoder configured as the manifest says.
    pub(crate) fn decoder(&self) -> mcp_framing::StreamDecoder {
        let limits = mcp_framing::Limits::default()
            .max_frame_payload(self.max_frame_payload)
            .max_message_size(self.max_message_size);
        let mut builder = mcp_framing::StreamDecoder::builder().limits(self.bounds.apply(limits));
        if let Some(key) = self.request_key {
            builder = builder.expect_request_key(key);
        }
        builder.build()
    }

    pub(crate) fn is_valid(&self) -> bool {
        self.file.starts_with("valid_")
    }
}

/// The verdict a conforming decoder reaches.
#[derive(Clone, Debug)]
pub(crate) struct Expect {
    /// `"clean"`, `"aborted"` or `"error"`.
    pub(crate) verdict: &'static str,
    /// Whether a clean verdict rests on STREAM_END (SPEC.md §7 row 2); `false` for a final
    /// response delivered without it (row 4) and for every other verdict.
    pub(crate) sentinel_seen: bool,
    /// The regime that decided (SPEC.md §9, §11.4): `"A"` for the sentinel or ABORT, `"B"` for a
    /// delivered final response and every error.
    pub(crate) regime: &'static str,
    /// Verified messages delivered before the end.
    pub(crate) messages: Vec<Vec<u8>>,
    /// Code and reason of the ABORT frame, for aborted streams.
    pub(crate) abort: Option<(u16, String)>,
    /// `DecodeError::kind()` of the end-of-input result (`PeerAbort` for aborted streams).
    pub(crate) error: Option<&'static str>,
    /// `Truncation` variant when `error` is `Truncated`.
    pub(crate) truncation: Option<&'static str>,
}

impl Expect {
    fn clean(messages: &[&[u8]]) -> Self {
        Self {
            verdict: "clean",
            sentinel_seen: true,
            regime: "A",
            messages: messages.iter().map(|m| m.to_vec()).collect(),
            abort: None,
            error: None,
            truncation: None,
        }
    }

    /// The input ended after the verified final response, before STREAM_END (SPEC.md §7 row 4).
    fn delivered(messages: &[&[u8]]) -> Self {
        Self {
            sentinel_seen: false,
            regime: "B",
            ..Self::clean(messages)
        }
    }

    fn aborted(messages: &[&[u8]], code: u16, reason: &str) -> Self {
        Self {
            verdict: "aborted",
            sentinel_seen: false,
            abort: Some((code, reason.to_owned())),
            error: Some("PeerAbort"),
            ..Self::clean(messages)
        }
    }

    fn error(kind: &'static str, messages: &[&[u8]]) -> Self {
        Self {
            verdict: "error",
            sentinel_seen: false,
            regime: "B",
            error: Some(kind),
            ..Self::clean(messages)
        }
    }

    fn truncated(at: &'static str, messages: &[&[u8]]) -> Self {
        Self {
            truncation: Some(at),
            ..Self::error("Truncated", messages)
        }
    }
}

struct Set(Vec<Vector>);

impl Set {
    fn add(
        &mut self,
        file: &str,
        description: &str,
        bytes: Vec<u8>,
        expect: Expect,
    ) -> &mut Vector {
        self.0.push(Vector {
            file: file.to_owned(),
            description: description.to_owned(),
            bytes,
            max_frame_payload: DEFAULT_FRAME,
            max_message_size: DEFAULT_MESSAGE,
            request_key: Some(KEY),
            bounds: Bounds::default(),
            expect,
            mapping: "binary",
            max_event_data: None,
        });
        self.0.last_mut().expect("just pushed")
    }

    /// A vector of the SSE mapping (SPEC.md §15): `body` is the `text/event-stream` body.
    fn add_sse(
        &mut self,
        file: &str,
        description: &str,
        body: Vec<u8>,
        expect: Expect,
    ) -> &mut Vector {
        let vector = self.add(file, description, body, expect);
        vector.mapping = "sse";
        vector
    }

    /// A vector of the compatible SSE mapping (SPEC.md §18): `body` is the `text/event-stream`
    /// body.
    fn add_compat(
        &mut self,
        file: &str,
        description: &str,
        body: impl Into<Vec<u8>>,
        expect: Expect,
    ) -> &mut Vector {
        let vector = self.add(file, description, body.into(), expect);
        vector.mapping = "compat";
        vector
    }
}

fn encoder(attempt: AttemptId, frame_size: usize) -> StreamEncoder {
    StreamEncoder::builder()
        .frame_size(frame_size)
        .build(head(Some(KEY), attempt))
}

/// The second SPEC.md §13 worked example: HEAD, a KEEPALIVE (between messages), `{"ok":true}` in
/// two DATA frames and its MESSAGE_END, a DATA frame that opens another message, and an ABORT
/// (code 3, `draining`) that ends the stream and discards the open message.
pub(crate) fn aborted_worked_example() -> Vec<u8> {
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.keep_alive()
        .data(br#"{"ok":"#)
        .data(b"true}")
        .message_end(OK_MESSAGE)
        .data(br#"{"pa"#)
        .abort(3, b"draining");
    raw.build()
}

/// The SPEC.md §13 worked example: one message `{"ok":true}` in one DATA frame.
pub(crate) fn single_message() -> Vec<u8> {
    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.message(OK_MESSAGE, &mut wire).expect("message");
    enc.end(&mut wire).expect("end");
    wire.to_vec()
}

const PROGRESS: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t1","progress":0.5,"total":1}}"#;
const LOG: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"halfway"}}"#;
const RESULT: &[u8] = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}],"isError":false}}"#;

/// A response of three messages, each pushed in pieces of varying size, in DATA frames of at most
/// `frame_size` bytes.
pub(crate) fn multiple_messages(attempt: AttemptId, frame_size: usize) -> Vec<u8> {
    let mut enc = encoder(attempt, frame_size);
    let mut wire = BytesMut::new();
    for (i, message) in [PROGRESS, LOG, RESULT].iter().enumerate() {
        for piece in message.chunks(5 + 9 * i) {
            enc.push(piece, &mut wire).expect("push");
        }
        enc.finish_message(&mut wire).expect("finish");
    }
    enc.end(&mut wire).expect("end");
    wire.to_vec()
}

/// A message of exactly `len` bytes of JSON.
pub(crate) fn json_of_len(len: usize) -> Vec<u8> {
    let mut message = br#"{"data":""#.to_vec();
    let fill = len - message.len() - 2;
    message.extend((0..fill).map(|i| b'a' + (i % 26) as u8));
    message.extend_from_slice(br#""}"#);
    assert_eq!(message.len(), len);
    message
}

/// Every vector of the binary mapping (the bytes are the frame stream), in manifest order.
pub(crate) fn all() -> Vec<Vector> {
    binary().0
}

/// Every vector of every mapping, in manifest order: [`all`], then the SSE bodies (SPEC.md §15),
/// then the bodies of the compatible SSE mapping (§18).
pub(crate) fn all_mappings() -> Vec<Vector> {
    let mut set = binary();
    sse(&mut set);
    compat(&mut set);
    set.0
}

fn binary() -> Set {
    let mut set = Set(Vec::new());
    valid(&mut set);
    invalid_frames(&mut set);
    invalid_streams(&mut set);
    truncated(&mut set);
    final_response(&mut set);
    set
}

/// HEAD, the [`PROGRESS`] notification, then the final response [`RESULT`]; with `end`, a
/// KEEPALIVE and STREAM_END after it.
fn notification_then_response(end: bool) -> Vec<u8> {
    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.message(PROGRESS, &mut wire).expect("message");
    enc.message(RESULT, &mut wire).expect("message");
    if end {
        enc.keep_alive(&mut wire).expect("keep-alive");
        enc.end(&mut wire).expect("end");
    }
    wire.to_vec()
}

/// SPEC.md §7 row 4, §7.1: a final response delivered without its sentinel, and what ends that.
fn final_response(set: &mut Set) {
    set.add(
        "valid_final_response_cut_after_message_end.bin",
        "a notification, then the final JSON-RPC response; the body ends right after the response's MESSAGE_END, before STREAM_END: delivered (clean in Regime B, the sentinel not seen, §7 row 4)",
        notification_then_response(false),
        Expect::delivered(&[PROGRESS, RESULT]),
    );
    let whole = notification_then_response(true);
    set.add(
        "valid_final_response_then_keepalive.bin",
        "a notification, the final response, a KEEPALIVE and STREAM_END: clean (Regime A); every prefix from the response's MESSAGE_END on is delivered (§7 row 4)",
        whole.clone(),
        Expect::clean(&[PROGRESS, RESULT]),
    );
    set.add(
        "valid_final_response_cut_in_stream_end.bin",
        "valid_final_response_then_keepalive.bin cut inside the STREAM_END payload (5 of 8 bytes): delivered",
        whole[..whole.len() - 3].to_vec(),
        Expect::delivered(&[PROGRESS, RESULT]),
    );
    set.add(
        "valid_final_response_cut_in_stream_end_header.bin",
        "valid_final_response_then_keepalive.bin cut inside the STREAM_END header (10 of 20 bytes): delivered",
        whole[..whole.len() - 18].to_vec(),
        Expect::delivered(&[PROGRESS, RESULT]),
    );

    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.message(RESULT, &mut wire).expect("message");
    enc.message(PROGRESS, &mut wire).expect("message");
    enc.end(&mut wire).expect("end");
    set.add(
        "valid_message_after_final_response.bin",
        "the final response, then a notification, then STREAM_END: intact as frames (clean), although for an MCP client it answers nothing (§1); its prefixes are delivered from the response's MESSAGE_END until the notification's DATA header is whole (§7.1)",
        wire.to_vec(),
        Expect::clean(&[RESULT, PROGRESS]),
    );

    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.message(RESULT, &mut wire).expect("message");
    enc.push(&PROGRESS[..30], &mut wire).expect("push");
    set.add(
        "invalid_truncated_message_after_final_response.bin",
        "the final response, then a DATA frame that opens another message, then the end of input: a message opened after the final response is abandoned at a cut (§7.1)",
        wire.to_vec(),
        Expect::truncated("InMessage", &[RESULT]),
    );

    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.message(RESULT, &mut wire).expect("message");
    enc.finish_message(&mut wire).expect("empty message");
    enc.end(&mut wire).expect("end");
    set.add(
        "valid_empty_message_after_final_response.bin",
        "the final response, then an empty message (a MESSAGE_END alone), then STREAM_END: clean; its prefixes are delivered until that MESSAGE_END's header is whole (§7.1)",
        wire.to_vec(),
        Expect::clean(&[RESULT, b""]),
    );

    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.message(RESULT, &mut wire).expect("message");
    enc.abort(AbortCode::Overloaded, "draining", &mut wire)
        .expect("abort");
    set.add(
        "valid_aborted_after_final_response.bin",
        "the final response, then ABORT (code 3): aborted (§7 row 3); its prefixes are delivered until the ABORT header is whole, then truncated (§7.1)",
        wire.to_vec(),
        Expect::aborted(&[RESULT], 3, "draining"),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.message(RESULT).keep_alive();
    let mut bytes = raw.build();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    set.add(
        "invalid_bad_frame_after_final_response.bin",
        "the final response, then a KEEPALIVE whose header CRC is wrong: that error, whatever came before (§7 row 1)",
        bytes,
        Expect::error("HeaderChecksumMismatch", &[RESULT]),
    );

    let mut enc = StreamEncoder::new(head(None, ATTEMPT));
    let mut wire = BytesMut::new();
    enc.message(RESULT, &mut wire).expect("message");
    set.add(
        "invalid_final_response_cut_without_request_key.bin",
        "the final response cut after its MESSAGE_END, read by a decoder that expects no request key: §7 row 4 does not apply (§7.1), truncated",
        wire.to_vec(),
        Expect::truncated("BetweenMessages", &[RESULT]),
    )
    .request_key = None;
}

fn valid(set: &mut Set) {
    set.add(
        "valid_single_message.bin",
        "SPEC.md §13 worked example",
        single_message(),
        Expect::clean(&[OK_MESSAGE]),
    );
    set.add(
        "valid_aborted_worked_example.bin",
        "SPEC.md §13 second worked example: a KEEPALIVE between messages, {\"ok\":true} in two DATA frames, then an open message cut by ABORT (code 3, overloaded)",
        aborted_worked_example(),
        Expect::aborted(&[OK_MESSAGE], 3, "draining"),
    );

    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.end(&mut wire).expect("end");
    set.add(
        "valid_empty_stream.bin",
        "HEAD then STREAM_END with a message count of 0",
        wire.to_vec(),
        Expect::clean(&[]),
    );

    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.finish_message(&mut wire).expect("empty message");
    enc.end(&mut wire).expect("end");
    set.add(
        "valid_empty_message.bin",
        "one empty message: MESSAGE_END with length 0 and the SHA-256 of nothing, no DATA frame",
        wire.to_vec(),
        Expect::clean(&[b""]),
    );

    set.add(
        "valid_multiple_messages.bin",
        "two notifications then the response, each pushed in small pieces, DATA frames of at most 16 bytes",
        multiple_messages(ATTEMPT, 16),
        Expect::clean(&[PROGRESS, LOG, RESULT]),
    );

    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.keep_alive(&mut wire).expect("keep-alive");
    enc.push(&RESULT[..20], &mut wire).expect("push");
    enc.keep_alive(&mut wire).expect("keep-alive");
    enc.keep_alive(&mut wire).expect("keep-alive");
    enc.push(&RESULT[20..], &mut wire).expect("push");
    enc.keep_alive(&mut wire).expect("keep-alive");
    enc.finish_message(&mut wire).expect("finish");
    enc.keep_alive(&mut wire).expect("keep-alive");
    enc.message(OK_MESSAGE, &mut wire).expect("message");
    enc.keep_alive(&mut wire).expect("keep-alive");
    enc.end(&mut wire).expect("end");
    set.add(
        "valid_keepalives.bin",
        "KEEPALIVE frames after HEAD, between DATA frames, before MESSAGE_END, between messages and before STREAM_END",
        wire.to_vec(),
        Expect::clean(&[RESULT, OK_MESSAGE]),
    );

    let big = json_of_len(DEFAULT_FRAME as usize);
    let mut enc = encoder(ATTEMPT, DEFAULT_FRAME as usize);
    let mut wire = BytesMut::new();
    enc.message(&big, &mut wire).expect("message");
    enc.end(&mut wire).expect("end");
    set.add(
        "valid_frame_at_limit.bin",
        "one DATA frame of exactly 65536 bytes, the default max frame payload",
        wire.to_vec(),
        Expect::clean(&[&big]),
    );

    let large = json_of_len(40_000);
    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.message(&large, &mut wire).expect("message");
    enc.end(&mut wire).expect("end");
    set.add(
        "valid_multi_frame_message.bin",
        "a 40000-byte message in DATA frames of the default sender size 16384 (16384 + 16384 + 7232)",
        wire.to_vec(),
        Expect::clean(&[&large]),
    );

    let wrap = AttemptId::from_bytes([
        0xff, 0xff, 0xff, 0xfc, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0,
        0xc0,
    ]);
    let mut enc = encoder(wrap, 4);
    let mut wire = BytesMut::new();
    enc.message(&RESULT[..18], &mut wire).expect("message");
    enc.end(&mut wire).expect("end");
    set.add(
        "valid_sequence_wraparound.bin",
        "HEAD at sequence 0xFFFFFFFC; DATA frames cross 0xFFFFFFFF -> 0x00000000; STREAM_END at 0x00000003",
        wire.to_vec(),
        Expect::clean(&[&RESULT[..18]]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.frame(0x80, &[])
        .data(&RESULT[..30])
        .frame(0xff, b"an extension the receiver does not know")
        .data(&RESULT[30..])
        .message_end(RESULT)
        .frame(0xc0, &[0; 100])
        .stream_end(1);
    set.add(
        "valid_ignorable_frames.bin",
        "ignorable kinds 0x80 (empty), 0xFF (inside a message) and 0xC0 (between messages): checked, counted in the sequence, skipped",
        raw.build(),
        Expect::clean(&[RESULT]),
    );

    let mut enc = StreamEncoder::new(head(None, ATTEMPT));
    let mut wire = BytesMut::new();
    enc.message(OK_MESSAGE, &mut wire).expect("message");
    enc.end(&mut wire).expect("end");
    set.add(
        "valid_no_request_key.bin",
        "a request without a key: HEAD carries 16 zero bytes; the decoder checks no key",
        wire.to_vec(),
        Expect::clean(&[OK_MESSAGE]),
    )
    .request_key = None;

    let mut enc = encoder(ATTEMPT, 16);
    let mut wire = BytesMut::new();
    enc.message(PROGRESS, &mut wire).expect("message");
    enc.push(&RESULT[..40], &mut wire).expect("push");
    enc.abort(
        AbortCode::UpstreamFailed,
        "model backend timed out",
        &mut wire,
    )
    .expect("abort");
    set.add(
        "valid_aborted_mid_message.bin",
        "one message, then ABORT (code 4) inside the second message: the open message is discarded",
        wire.to_vec(),
        Expect::aborted(&[PROGRESS], 4, "model backend timed out"),
    );

    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    let reason = "überlastet: Wartung läuft";
    enc.abort(AbortCode::Other(700), reason, &mut wire)
        .expect("abort");
    set.add(
        "valid_aborted_reserved_code.bin",
        "ABORT right after HEAD with reserved code 700 (reported as-is) and a non-ASCII UTF-8 reason",
        wire.to_vec(),
        Expect::aborted(&[], 700, reason),
    );

    let reason = "x".repeat(1024);
    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.abort(AbortCode::Cancelled, &reason, &mut wire)
        .expect("abort");
    set.add(
        "valid_aborted_longest_reason.bin",
        "ABORT (code 2) with a reason of exactly 1024 bytes (payload length 1026)",
        wire.to_vec(),
        Expect::aborted(&[], 2, &reason),
    );
}

fn invalid_frames(set: &mut Set) {
    let unframed = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#.to_vec();
    set.add(
        "invalid_unframed_json.bin",
        "an unframed JSON-RPC body where a framed one was promised: bad magic at byte 0",
        unframed,
        Expect::error("BadMagic", &[]),
    );

    let mut bytes = single_message();
    bytes[52] = 0x4d;
    bytes[53] = 0x9f;
    fix_header_crc(&mut bytes, 52);
    set.add(
        "invalid_bad_magic_mid_stream.bin",
        "§13 example with the DATA frame's magic bytes swapped (header CRC recomputed)",
        bytes,
        Expect::error("BadMagic", &[]),
    );

    let mut bytes = single_message();
    bytes[2] = 0x02;
    fix_header_crc(&mut bytes, 0);
    set.add(
        "invalid_unsupported_version.bin",
        "§13 example with version 2 in the HEAD header (header CRC recomputed)",
        bytes,
        Expect::error("UnsupportedVersion", &[]),
    );

    let mut bytes = single_message();
    bytes[52 + 2] = 0x02;
    fix_header_crc(&mut bytes, 52);
    set.add(
        "invalid_version_change_mid_stream.bin",
        "§13 example with version 2 in the DATA header (header CRC recomputed): rejected mid-stream",
        bytes,
        Expect::error("UnsupportedVersion", &[]),
    );

    let mut bytes = single_message();
    bytes[52 + 19] ^= 0x01;
    set.add(
        "invalid_header_checksum.bin",
        "§13 example with one bit of the DATA frame's header CRC flipped",
        bytes,
        Expect::error("HeaderChecksumMismatch", &[]),
    );

    let mut bytes = single_message();
    bytes[72 + 5] = b'T';
    set.add(
        "invalid_payload_checksum.bin",
        "§13 example with the DATA payload changed to {\"ok\":True}, headers intact",
        bytes,
        Expect::error("PayloadChecksumMismatch", &[]),
    );

    for (kind, name) in [(0x07u8, "07"), (0x00, "00"), (0x7f, "7f")] {
        let mut raw = Raw::head(Some(KEY), ATTEMPT);
        raw.frame(kind, b"?").message(OK_MESSAGE).stream_end(1);
        set.add(
            &format!("invalid_unknown_kind_{name}.bin"),
            &format!("a frame of unknown kind 0x{name} after HEAD"),
            raw.build(),
            Expect::error("UnknownFrameKind", &[]),
        );
    }

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.data(&[]).message(OK_MESSAGE).stream_end(1);
    set.add(
        "invalid_empty_data.bin",
        "an empty DATA frame",
        raw.build(),
        Expect::error("InvalidFrameLength", &[]),
    );

    let mut raw = Raw::empty(ATTEMPT.initial_sequence());
    raw.frame(0x01, &head_payload(Some(KEY), ATTEMPT)[..31])
        .stream_end(0);
    set.add(
        "invalid_head_length.bin",
        "a HEAD frame of 31 bytes",
        raw.build(),
        Expect::error("InvalidFrameLength", &[]),
    );

    let mut end = 11u64.to_be_bytes().to_vec();
    end.extend_from_slice(&sha256(OK_MESSAGE));
    end.push(0);
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.data(OK_MESSAGE).frame(0x03, &end).stream_end(1);
    set.add(
        "invalid_message_end_length.bin",
        "a MESSAGE_END frame of 41 bytes",
        raw.build(),
        Expect::error("InvalidFrameLength", &[]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.message(OK_MESSAGE).frame(0x04, &[0, 0, 0, 1]);
    set.add(
        "invalid_stream_end_length.bin",
        "a STREAM_END frame of 4 bytes",
        raw.build(),
        Expect::error("InvalidFrameLength", &[OK_MESSAGE]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.frame(0x06, &[0]).message(OK_MESSAGE).stream_end(1);
    set.add(
        "invalid_keepalive_length.bin",
        "a KEEPALIVE frame of 1 byte",
        raw.build(),
        Expect::error("InvalidFrameLength", &[]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.frame(0x05, &[4]);
    set.add(
        "invalid_abort_too_short.bin",
        "an ABORT frame of 1 byte (no room for the reason code)",
        raw.build(),
        Expect::error("InvalidFrameLength", &[]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.abort(1, &[b'x'; 1025]);
    set.add(
        "invalid_abort_too_long.bin",
        "an ABORT frame whose reason is 1025 bytes (payload 1027)",
        raw.build(),
        Expect::error("InvalidFrameLength", &[]),
    );

    let over = json_of_len(DEFAULT_FRAME as usize + 1);
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.data(&over).message_end(&over).stream_end(1);
    set.add(
        "invalid_frame_over_limit.bin",
        "one DATA frame of 65537 bytes, one over the default max frame payload (payload present)",
        raw.build(),
        Expect::error("FrameTooLarge", &[]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.header_claiming(0x02, u32::MAX, b"{\"jsonrpc\":");
    set.add(
        "invalid_frame_claims_4gib.bin",
        "a DATA header claiming 4 GiB - 1 bytes, followed by 11 payload bytes: rejected at the header",
        raw.build(),
        Expect::error("FrameTooLarge", &[]),
    );

    let message = json_of_len(1200);
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.message(OK_MESSAGE)
        .data(&message[..600])
        .data(&message[600..])
        .message_end(&message)
        .stream_end(2);
    set.add(
        "invalid_message_over_limit.bin",
        "with max_message_size 1024: one small message, then a 1200-byte message whose second DATA header (600 + 600) goes over the limit",
        raw.build(),
        Expect::error("MessageTooLarge", &[OK_MESSAGE]),
    )
    .max_message_size = 1024;
    stream_bounds(set);
}

/// The per-stream bounds of SPEC.md §6.1, each set low so that a small vector passes it.
fn stream_bounds(set: &mut Set) {
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.keep_alive()
        .keep_alive()
        .message(OK_MESSAGE)
        .keep_alive()
        .keep_alive()
        .keep_alive();
    set.add(
        "invalid_too_many_keepalives.bin",
        "with max_keepalives_in_a_row 2: two KEEPALIVEs, a message (which starts the count again), then three KEEPALIVEs: the third is refused at its header",
        raw.build(),
        Expect::error("TooManyKeepAlives", &[OK_MESSAGE]),
    )
    .bounds
    .max_keepalives_in_a_row = Some(2);

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.frame(0x80, b"x")
        .keep_alive()
        .frame(0x81, b"")
        .frame(0x82, b"yz");
    set.add(
        "invalid_too_many_ignorable_frames.bin",
        "with max_ignorable_in_a_row 2: three ignorable frames with a KEEPALIVE between (which does not start the count again): the third is refused",
        raw.build(),
        Expect::error("TooManyIgnorableFrames", &[]),
    )
    .bounds
    .max_ignorable_in_a_row = Some(2);

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.message(OK_MESSAGE)
        .message(b"")
        .message(OK_MESSAGE)
        .stream_end(3);
    set.add(
        "invalid_too_many_messages.bin",
        "with max_messages 2: a third message, refused at its MESSAGE_END header",
        raw.build(),
        Expect::error("TooManyMessages", &[OK_MESSAGE, b""]),
    )
    .bounds
    .max_messages = Some(2);

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.message(OK_MESSAGE).stream_end(1);
    set.add(
        "invalid_stream_too_large.bin",
        "with max_stream_bytes 150: HEAD (52), DATA (31), MESSAGE_END (60) end at byte 143; STREAM_END would end at byte 171 and is refused at its header",
        raw.build(),
        Expect::error("StreamTooLarge", &[OK_MESSAGE]),
    )
    .bounds
    .max_stream_bytes = Some(150);
}

fn invalid_streams(set: &mut Set) {
    // Multi-frame streams of one message in 4 DATA frames, edited at the frame level.
    let message = &RESULT[..40];
    let frames = |edit: &dyn Fn(&mut Vec<Vec<u8>>)| -> Vec<u8> {
        let mut frames: Vec<Vec<u8>> = Vec::new();
        let mut raw = Raw::head(Some(KEY), ATTEMPT);
        frames.push(raw.bytes.split_off(0));
        for piece in message.chunks(10) {
            raw.data(piece);
            frames.push(raw.bytes.split_off(0));
        }
        raw.message_end(message);
        frames.push(raw.bytes.split_off(0));
        raw.stream_end(1);
        frames.push(raw.bytes.split_off(0));
        edit(&mut frames);
        frames.concat()
    };
    set.add(
        "invalid_frame_dropped.bin",
        "a message in 4 DATA frames with the second DATA frame dropped",
        frames(&|f| {
            f.remove(2);
        }),
        Expect::error("SequenceGap", &[]),
    );
    set.add(
        "invalid_frame_duplicated.bin",
        "a message in 4 DATA frames with the second DATA frame sent twice",
        frames(&|f| {
            let copy = f[2].clone();
            f.insert(3, copy);
        }),
        Expect::error("SequenceReplay", &[]),
    );
    set.add(
        "invalid_frames_reordered.bin",
        "a message in 4 DATA frames with the second and third DATA frames swapped",
        frames(&|f| f.swap(2, 3)),
        Expect::error("SequenceGap", &[]),
    );

    let first = multiple_messages(ATTEMPT, 16);
    let retry = multiple_messages_retry(RETRY);
    let cut_first = super::frame_boundaries(&first)[5];
    let cut_retry = super::frame_boundaries(&retry)[5];
    let mut spliced = first[..cut_first].to_vec();
    spliced.extend_from_slice(&retry[cut_retry..]);
    set.add(
        "invalid_splice_foreign_frame.bin",
        "the first 5 frames of one attempt, then the rest of a retry (other attempt id, other bytes): foreign sequence number",
        spliced,
        Expect::error("ForeignFrame", &[]),
    );

    let first = multiple_messages(ATTEMPT, 16);
    let retry = multiple_messages_retry(RETRY_SAME_PREFIX);
    let cut = super::frame_boundaries(&first)[5];
    assert_eq!(cut, super::frame_boundaries(&retry)[5]);
    let mut spliced = first[..cut].to_vec();
    spliced.extend_from_slice(&retry[cut..]);
    set.add(
        "invalid_splice_same_sequence.bin",
        "a splice of two attempts whose attempt ids share the first 4 bytes (sequence numbers agree): caught by the digest",
        spliced,
        Expect::error("DigestMismatch", &[]),
    );

    let mut bytes = single_message();
    bytes[7] ^= 0x01;
    fix_header_crc(&mut bytes, 0);
    set.add(
        "invalid_head_sequence.bin",
        "a HEAD whose sequence number is not its attempt id's first 4 bytes (header CRC recomputed)",
        bytes,
        Expect::error("ForeignFrame", &[]),
    );

    let mut raw = Raw::empty(ATTEMPT.initial_sequence());
    raw.data(OK_MESSAGE);
    set.add(
        "invalid_data_before_head.bin",
        "a DATA frame where HEAD must come first",
        raw.build(),
        Expect::error("UnexpectedFrame", &[]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.message(OK_MESSAGE)
        .frame(0x01, &head_payload(Some(KEY), ATTEMPT))
        .stream_end(1);
    set.add(
        "invalid_second_head.bin",
        "a second HEAD frame after a message",
        raw.build(),
        Expect::error("UnexpectedFrame", &[OK_MESSAGE]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.data(OK_MESSAGE).stream_end(0);
    set.add(
        "invalid_stream_end_in_message.bin",
        "STREAM_END after a DATA frame, before its MESSAGE_END",
        raw.build(),
        Expect::error("UnexpectedFrame", &[]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.data(OK_MESSAGE)
        .message_end_raw(12, sha256(OK_MESSAGE))
        .stream_end(1);
    set.add(
        "invalid_length_mismatch.bin",
        "MESSAGE_END declares 12 bytes for an 11-byte message",
        raw.build(),
        Expect::error("LengthMismatch", &[]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.data(OK_MESSAGE)
        .message_end_raw(11, sha256(br#"{"ok":fals}"#))
        .stream_end(1);
    set.add(
        "invalid_digest_mismatch.bin",
        "MESSAGE_END declares the SHA-256 of another 11-byte message",
        raw.build(),
        Expect::error("DigestMismatch", &[]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.message(OK_MESSAGE).stream_end(2);
    set.add(
        "invalid_message_count_mismatch.bin",
        "STREAM_END declares 2 messages after 1",
        raw.build(),
        Expect::error("MessageCountMismatch", &[OK_MESSAGE]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.message(OK_MESSAGE).stream_end(0);
    set.add(
        "invalid_message_count_too_small.bin",
        "STREAM_END declares 0 messages after 1",
        raw.build(),
        Expect::error("MessageCountMismatch", &[OK_MESSAGE]),
    );

    let mut raw = Raw::head(Some(OTHER_KEY), ATTEMPT);
    raw.message(OK_MESSAGE).stream_end(1);
    set.add(
        "invalid_request_key_mismatch.bin",
        "the decoder expects key 0011..eeff, the HEAD echoes ffee..1100: a cross-wired response",
        raw.build(),
        Expect::error("RequestKeyMismatch", &[]),
    );

    let mut raw = Raw::head(None, ATTEMPT);
    raw.message(OK_MESSAGE).stream_end(1);
    set.add(
        "invalid_request_key_missing.bin",
        "the decoder expects a key, the HEAD carries none (16 zero bytes)",
        raw.build(),
        Expect::error("RequestKeyMismatch", &[]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.message(OK_MESSAGE).abort(1, b"bad \xff\xfe utf-8");
    set.add(
        "invalid_abort_reason_not_utf8.bin",
        "an ABORT frame whose reason is not UTF-8",
        raw.build(),
        Expect::error("InvalidAbort", &[OK_MESSAGE]),
    );

    let mut bytes = single_message();
    bytes.extend_from_slice(b"\n");
    set.add(
        "invalid_trailing_after_stream_end.bin",
        "§13 example followed by one newline byte",
        bytes,
        Expect::error("TrailingData", &[OK_MESSAGE]),
    );

    let mut bytes = single_message();
    let mut extra = Raw::empty(ATTEMPT.initial_sequence().wrapping_add(4));
    extra.keep_alive();
    bytes.extend_from_slice(&extra.bytes);
    set.add(
        "invalid_frame_after_stream_end.bin",
        "§13 example followed by a well-formed KEEPALIVE frame with the next sequence number",
        bytes,
        Expect::error("TrailingData", &[OK_MESSAGE]),
    );

    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.message(OK_MESSAGE)
        .abort(3, b"shutting down")
        .message(b"{}");
    set.add(
        "invalid_trailing_after_abort.bin",
        "one message, ABORT, then another message: frames after the terminal ABORT",
        raw.build(),
        Expect::error("TrailingData", &[OK_MESSAGE]),
    );
}

/// [`multiple_messages`] as a retry would produce it: same request, same frame layout, but the
/// backend generated other bytes (same lengths).
pub(crate) fn multiple_messages_retry(attempt: AttemptId) -> Vec<u8> {
    let mut enc = encoder(attempt, 16);
    let mut wire = BytesMut::new();
    for (i, message) in [PROGRESS, LOG, RESULT].iter().enumerate() {
        let other: Vec<u8> = message
            .iter()
            .map(|&b| if b.is_ascii_digit() { b'7' } else { b })
            .collect();
        assert_ne!(&other[..], *message, "the retry's bytes must differ");
        for piece in other.chunks(5 + 9 * i) {
            enc.push(piece, &mut wire).expect("push");
        }
        enc.finish_message(&mut wire).expect("finish");
    }
    enc.end(&mut wire).expect("end");
    wire.to_vec()
}

fn truncated(set: &mut Set) {
    let full = single_message();
    set.add(
        "invalid_truncated_no_frame.bin",
        "an empty body",
        Vec::new(),
        Expect::truncated("NoFrame", &[]),
    );
    set.add(
        "invalid_truncated_in_header.bin",
        "§13 example cut inside the HEAD header (10 of 20 bytes)",
        full[..10].to_vec(),
        Expect::truncated("InHeader", &[]),
    );
    set.add(
        "invalid_truncated_after_head.bin",
        "§13 example cut right after the HEAD frame",
        full[..52].to_vec(),
        Expect::truncated("BetweenMessages", &[]),
    );
    set.add(
        "invalid_truncated_after_data_header.bin",
        "§13 example cut right after the complete DATA header (the cut LengthDelimitedCodec reports as a clean end)",
        full[..72].to_vec(),
        Expect::truncated("InPayload", &[]),
    );
    set.add(
        "invalid_truncated_in_data_payload.bin",
        "§13 example cut inside the DATA payload (5 of 11 bytes)",
        full[..77].to_vec(),
        Expect::truncated("InPayload", &[]),
    );
    set.add(
        "invalid_truncated_in_message.bin",
        "§13 example cut after the DATA frame, before MESSAGE_END",
        full[..83].to_vec(),
        Expect::truncated("InMessage", &[]),
    );
    set.add(
        "invalid_truncated_between_messages.bin",
        "§13 example cut after MESSAGE_END, before STREAM_END: the message is verified, the stream is not complete",
        full[..143].to_vec(),
        Expect::truncated("BetweenMessages", &[OK_MESSAGE]),
    );
    set.add(
        "invalid_truncated_in_stream_end.bin",
        "§13 example cut inside the STREAM_END payload (7 of 8 bytes)",
        full[..full.len() - 1].to_vec(),
        Expect::truncated("InPayload", &[OK_MESSAGE]),
    );
}

/// Standard padded base64 (RFC 4648 §4), written out here so the vectors depend neither on the
/// crate's `sse` feature nor on the encoder under test.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One `mcp-frame` event carrying `frames`, lines ended with `eol`.
fn sse_event(frames: &[u8], eol: &str) -> String {
    format!("event: mcp-frame{eol}data: {}{eol}{eol}", base64(frames))
}

/// The SSE body of a binary stream as this crate's sender writes it: one event per frame, `\n`
/// line endings.
pub(crate) fn sse_body(stream: &[u8]) -> String {
    sse_events(stream).concat()
}

/// One event per frame of `stream`.
fn sse_events(stream: &[u8]) -> Vec<String> {
    super::frame_spans(stream)
        .into_iter()
        .map(|span| sse_event(&stream[span], "\n"))
        .collect()
}

/// The bytes of an earlier vector of the set.
fn bytes_of(set: &Set, file: &str) -> Vec<u8> {
    set.0
        .iter()
        .find(|v| v.file == file)
        .expect("vector generated before")
        .bytes
        .clone()
}

/// The §13 example in the SSE mapping, one event per frame.
fn sse_single_message() -> Vec<String> {
    sse_events(&single_message())
}

fn sse(set: &mut Set) {
    set.add_sse(
        "valid_sse_single_message.sse",
        "SPEC.md §13 worked example in the SSE mapping: one mcp-frame event per frame, LF line endings (336 bytes)",
        sse_body(&single_message()).into_bytes(),
        Expect::clean(&[OK_MESSAGE]),
    );

    let frames = single_message();
    let mut body = String::from(": keep-alive\r\n\r\nid: 0\r\nretry: 1000\r\n\r\n");
    for (i, span) in super::frame_spans(&frames).into_iter().enumerate() {
        let data = base64(&frames[span]);
        body.push_str(&format!(
            "event: mcp-frame\r\n: comment inside event {i}\r\nid: {i}\r\ndata: {data}\r\n\r\n: keep-alive\r\n\r\n"
        ));
    }
    set.add_sse(
        "valid_sse_keepalive_comments_crlf.sse",
        "§13 example with CRLF line endings, an id-only priming event, `:` keep-alive comments between and inside events, and `id` fields: all skipped",
        body.into_bytes(),
        Expect::clean(&[OK_MESSAGE]),
    );

    let mut body = String::new();
    for span in super::frame_spans(&frames) {
        let data = base64(&frames[span]);
        body.push_str("event: mcp-frame\n");
        for line in data.as_bytes().chunks(16) {
            body.push_str("data: ");
            body.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            body.push('\n');
        }
        body.push('\n');
    }
    set.add_sse(
        "valid_sse_multi_line_data.sse",
        "§13 example with each event's base64 split over data lines of 16 characters (the LFs SSE inserts between them are dropped)",
        body.into_bytes(),
        Expect::clean(&[OK_MESSAGE]),
    );

    let stream = multiple_messages(ATTEMPT, 16);
    let spans = super::frame_spans(&stream);
    let body: String = spans
        .chunks(3)
        .map(|group| sse_event(&stream[group[0].start..group[group.len() - 1].end], "\n"))
        .collect();
    set.add_sse(
        "valid_sse_several_frames_per_event.sse",
        "valid_multiple_messages.bin with three whole frames per mcp-frame event (the last event holds the rest)",
        body.into_bytes(),
        Expect::clean(&[PROGRESS, LOG, RESULT]),
    );

    set.add_sse(
        "valid_sse_aborted_mid_message.sse",
        "valid_aborted_mid_message.bin in the SSE mapping: the ABORT frame travels as an mcp-frame event",
        sse_body(&bytes_of(set, "valid_aborted_mid_message.bin")).into_bytes(),
        Expect::aborted(&[PROGRESS], 4, "model backend timed out"),
    );

    set.add_sse(
        "invalid_sse_unexpected_event.sse",
        "a plain MCP SSE response (unframed JSON-RPC in an `event: message`) where a framed one was promised",
        b"id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n"
            .to_vec(),
        Expect::error("UnexpectedEvent", &[]),
    );

    let mut events = sse_single_message();
    events.insert(
        3,
        "data: {\"jsonrpc\":\"2.0\",\"method\":\"ping\"}\n\n".to_owned(),
    );
    set.add_sse(
        "invalid_sse_unnamed_event_after_message.sse",
        "§13 example in SSE with an unnamed event carrying data before the STREAM_END event: the message is verified, then UnexpectedEvent",
        events.concat().into_bytes(),
        Expect::error("UnexpectedEvent", &[OK_MESSAGE]),
    );

    let mut events = sse_single_message();
    events[1] = events[1].replacen("data: n00B", "data: n00*", 1);
    set.add_sse(
        "invalid_sse_invalid_base64.sse",
        "§13 example in SSE with a `*` (not in the base64 alphabet) in the DATA event",
        events.concat().into_bytes(),
        Expect::error("InvalidBase64", &[]),
    );

    // STREAM_END is 28 bytes: its base64 ends in `X?==`, where `?` carries 4 unused bits.
    let mut events = sse_single_message();
    let data = base64(&frames[frames.len() - 28..]);
    let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let last = data.len() - 3;
    let index = alphabet
        .find(&data[last..last + 1])
        .expect("base64 character");
    assert_eq!(index & 0x0f, 0, "canonical base64 has zero trailing bits");
    let mut noncanonical = data.clone();
    noncanonical.replace_range(last..last + 1, &alphabet[index | 1..(index | 1) + 1]);
    events[3] = events[3].replace(&data, &noncanonical);
    set.add_sse(
        "invalid_sse_noncanonical_base64.sse",
        "§13 example in SSE with nonzero trailing bits in the STREAM_END event's last base64 quantum (decodes to the same bytes when not checked)",
        events.concat().into_bytes(),
        Expect::error("InvalidBase64", &[OK_MESSAGE]),
    );

    let mut events = sse_single_message();
    events[3] = events[3].replace("==\n", "\n");
    set.add_sse(
        "invalid_sse_unpadded_base64.sse",
        "§13 example in SSE with the `==` padding of the STREAM_END event's base64 left out",
        events.concat().into_bytes(),
        Expect::error("InvalidBase64", &[OK_MESSAGE]),
    );

    // 256 KiB of base64 is the default bound of one event (SPEC.md §15).
    let large = json_of_len(200_000);
    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.message(&large, &mut wire).expect("message");
    enc.end(&mut wire).expect("end");
    let head_end = super::frame_boundaries(&wire)[1];
    let mut body = sse_event(&wire[..head_end], "\n");
    let data = base64(&wire[head_end..]);
    assert!(data.len() > 256 * 1024 + 16);
    body.push_str(&format!("event: mcp-frame\ndata: {data}\n\n"));
    set.add_sse(
        "invalid_sse_event_too_large.sse",
        &format!(
            "HEAD, then one mcp-frame event carrying a 200000-byte message and STREAM_END ({} base64 characters): over the default bound of 256 KiB per event",
            data.len()
        ),
        body.into_bytes(),
        Expect::error("EventTooLarge", &[]),
    );

    set.add_sse(
        "invalid_sse_digest_mismatch.sse",
        "invalid_digest_mismatch.bin in the SSE mapping: the frame-level error is the verdict",
        sse_body(&bytes_of(set, "invalid_digest_mismatch.bin")).into_bytes(),
        Expect::error("DigestMismatch", &[]),
    );

    let mut events = sse_events(&bytes_of(set, "invalid_digest_mismatch.bin"));
    events.insert(3, "event: message\ndata: {}\n\n".to_owned());
    set.add_sse(
        "invalid_sse_frame_error_before_sse_error.sse",
        "invalid_sse_digest_mismatch.sse with an `event: message` after the bad MESSAGE_END event: errors come in body order, the digest mismatch first",
        events.concat().into_bytes(),
        Expect::error("DigestMismatch", &[]),
    );

    let events = sse_single_message();
    let mut body = events[..3].concat();
    body.push_str(": keep-alive\n: keep-alive\n: keep-alive\n");
    body.push_str(&events[3]);
    set.add_sse(
        "invalid_sse_too_many_comments.sse",
        "with max_sse_comments_in_a_row 3: §13 example in SSE with three keep-alive comments before the STREAM_END event; with the blank line that ends the MESSAGE_END event they make four lines in a row without data",
        body.into_bytes(),
        Expect::error("TooManyComments", &[OK_MESSAGE]),
    )
    .bounds
    .max_sse_comments_in_a_row = Some(3);

    let events = sse_single_message();
    let mut body = events[..2].concat();
    body.push_str(&events[2][..17 + 6 + 40]);
    set.add_sse(
        "invalid_sse_truncated_in_event.sse",
        "§13 example in SSE cut in the middle of the MESSAGE_END event's base64: the open event is discarded",
        body.into_bytes(),
        Expect::truncated("InMessage", &[]),
    );

    let mut body = events[..3].concat();
    body.push_str(events[3].strip_suffix('\n').expect("blank line"));
    set.add_sse(
        "invalid_sse_truncated_before_blank_line.sse",
        "§13 example in SSE cut after the STREAM_END event's data line, before its blank line: the event is never dispatched",
        body.into_bytes(),
        Expect::truncated("BetweenMessages", &[OK_MESSAGE]),
    );

    set.add_sse(
        "invalid_sse_truncated_between_events.sse",
        "§13 example in SSE cut after the MESSAGE_END event, before the STREAM_END event",
        events[..3].concat().into_bytes(),
        Expect::truncated("BetweenMessages", &[OK_MESSAGE]),
    );

    set.add_sse(
        "invalid_sse_truncated_only_comments.sse",
        "a body of keep-alive comments only: no frame ever arrived",
        b": keep-alive\n\n: keep-alive\n\n".to_vec(),
        Expect::truncated("NoFrame", &[]),
    );

    set.add_sse(
        "valid_sse_final_response_cut_after_message_end.sse",
        "valid_final_response_cut_after_message_end.bin in the SSE mapping: the body ends after the final response's MESSAGE_END event: delivered (§7 row 4)",
        sse_body(&notification_then_response(false)).into_bytes(),
        Expect::delivered(&[PROGRESS, RESULT]),
    );
    let body = sse_body(&notification_then_response(true));
    set.add_sse(
        "valid_sse_final_response_cut_in_stream_end_event.sse",
        "valid_final_response_then_keepalive.bin in the SSE mapping, cut before the blank line of the STREAM_END event: the event is discarded, the final response delivered (§7 row 4)",
        body.strip_suffix('\n').expect("blank line").as_bytes().to_vec(),
        Expect::delivered(&[PROGRESS, RESULT]),
    );
    set.add_sse(
        "valid_sse_message_after_final_response.sse",
        "valid_message_after_final_response.bin in the SSE mapping: clean; delivered prefixes end with the event of the notification's DATA frame",
        sse_body(&bytes_of(set, "valid_message_after_final_response.bin")).into_bytes(),
        Expect::clean(&[RESULT, PROGRESS]),
    );
}

/// A record line of the compatible mapping carrying `frames` (SPEC.md §18.2), ended with `eol`.
fn record(frames: &[u8], eol: &str) -> String {
    format!(":mcp-framing {}{eol}", base64(frames))
}

/// A `message` event carrying `message` (SPEC.md §18.3): one `data: ` line per LF-separated piece.
fn message_event(message: &[u8], eol: &str) -> String {
    let text = std::str::from_utf8(message).expect("event data is UTF-8");
    let mut event: String = text
        .split('\n')
        .map(|line| format!("data: {line}{eol}"))
        .collect();
    event.push_str(eol);
    event
}

/// A binary stream in the compatible mapping as the SPEC.md §18.4 sender writes it, piece by
/// piece (a record or an event): each run of DATA frames becomes one record (the frames written
/// since the previous record, the run's DATA headers, the MESSAGE_END right after the run and the
/// STREAM_END right after that) and one event (the payloads). Frames after the last record make
/// one more record.
fn compat_pieces(stream: &[u8]) -> Vec<String> {
    let spans = super::frame_spans(stream);
    let kind = |i: usize| spans.get(i).map(|span| stream[span.start + 3]);
    let mut pieces = Vec::new();
    let mut frames = Vec::new();
    let mut i = 0;
    while i < spans.len() {
        if kind(i) != Some(0x02) {
            frames.extend_from_slice(&stream[spans[i].clone()]);
            i += 1;
            continue;
        }
        let mut message = Vec::new();
        while kind(i) == Some(0x02) {
            let span = spans[i].clone();
            frames.extend_from_slice(&stream[span.start..span.start + 20]);
            message.extend_from_slice(&stream[span.start + 20..span.end]);
            i += 1;
        }
        if kind(i) == Some(0x03) {
            frames.extend_from_slice(&stream[spans[i].clone()]);
            i += 1;
            if kind(i) == Some(0x04) {
                frames.extend_from_slice(&stream[spans[i].clone()]);
                i += 1;
            }
        }
        pieces.push(record(&frames, "\n"));
        pieces.push(message_event(&message, "\n"));
        frames.clear();
    }
    if !frames.is_empty() {
        pieces.push(record(&frames, "\n"));
    }
    pieces
}

/// The compatible-mapping body of a binary stream (SPEC.md §18.4).
pub(crate) fn compat_body(stream: &[u8]) -> String {
    compat_pieces(stream).concat()
}

const PRETTY: &[u8] =
    b"{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"result\": {\n    \"content\": []\n  }\n}";

fn compat(set: &mut Set) {
    let single = single_message();
    set.add_compat(
        "valid_compat_single_message.sse",
        "SPEC.md §13 worked example in the compatible mapping (§18.4): one record (HEAD, DATA header, MESSAGE_END, STREAM_END), then `data: {\"ok\":true}` (249 bytes)",
        compat_body(&single),
        Expect::clean(&[OK_MESSAGE]),
    );

    let multiple = multiple_messages(ATTEMPT, 16);
    set.add_compat(
        "valid_compat_multiple_messages.sse",
        "valid_multiple_messages.bin (16-byte DATA frames) in the compatible mapping: per message one record with several DATA headers, then one event",
        compat_body(&multiple),
        Expect::clean(&[PROGRESS, LOG, RESULT]),
    );

    let pieces = compat_pieces(&single);
    let data_line = pieces[1].trim_end_matches('\n');
    let body = format!(
        "\u{feff}:\r\n\r\ndata: \r\nid: 0\r\n\r\n: keep-alive\r\n{}: mcp-framing is only a comment with a space\r\n\r\n:\r\n\r\nevent: message\r\n: a comment inside the event\r\n{data_line}\r\nid: 1\r\nretry: 500\r\n\r\n:\r\n\r\n",
        pieces[0].replace('\n', "\r\n"),
    );
    set.add_compat(
        "valid_compat_keepalives_crlf.sse",
        "§13 example with a BOM, CRLF line endings, `:` and `: keep-alive` comments, `: mcp-framing` (a comment, not a record), an id-only priming event, `event: message`, `id` and `retry` fields: all as a stock MCP server may send them",
        body,
        Expect::clean(&[OK_MESSAGE]),
    );

    set.add_compat(
        "valid_compat_empty_event_field.sse",
        "§13 example whose message event has an empty `event` field (`event:`): SSE dispatches it as a `message` event (WHATWG: an empty event type is `message`), as rmcp and the SDKs read it",
        format!("{}event:\n{}", pieces[0], pieces[1]),
        Expect::clean(&[OK_MESSAGE]),
    );

    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.message(PRETTY, &mut wire).expect("message");
    enc.end(&mut wire).expect("end");
    set.add_compat(
        "valid_compat_multi_line_data.sse",
        "a pretty-printed message (LFs inside): one `data: ` line per line; the event's data as dispatched (lines joined with LF) is the message",
        compat_body(&wire),
        Expect::clean(&[PRETTY]),
    );

    let large = json_of_len(70_000);
    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.message(&large, &mut wire).expect("message");
    enc.end(&mut wire).expect("end");
    set.add_compat(
        "valid_compat_large_message.sse",
        "a 70000-byte message in five DATA frames of at most 16 KiB: one record of five DATA headers, one event",
        compat_body(&wire),
        Expect::clean(&[&large]),
    );

    let spans = super::frame_spans(&single);
    let frame = |i: usize| &single[spans[i].clone()];
    let body = format!(
        "{}{}{}{}",
        record(frame(0), "\n"),
        record(&frame(1)[..20], "\n"),
        message_event(OK_MESSAGE, "\n"),
        record(&[frame(2), frame(3)].concat(), "\n"),
    );
    set.add_compat(
        "valid_compat_end_record_after_event.sse",
        "§13 example with HEAD alone in a first record, the DATA header in a second, MESSAGE_END and STREAM_END in a record after the event (§18.5 allows records after their event)",
        body,
        Expect::clean(&[OK_MESSAGE]),
    );

    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.end(&mut wire).expect("end");
    set.add_compat(
        "valid_compat_no_messages.sse",
        "a stream without messages: one record holding HEAD and STREAM_END",
        compat_body(&wire),
        Expect::clean(&[]),
    );

    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.message(PROGRESS, &mut wire).expect("message");
    enc.abort(
        AbortCode::UpstreamFailed,
        "model backend timed out",
        &mut wire,
    )
    .expect("abort");
    set.add_compat(
        "valid_compat_final_response_cut_after_event.sse",
        "valid_final_response_cut_after_message_end.bin in the compatible mapping: the final response's record holds its MESSAGE_END and no STREAM_END, and the body ends after its event: delivered (§7 row 4)",
        compat_body(&notification_then_response(false)),
        Expect::delivered(&[PROGRESS, RESULT]),
    );
    set.add_compat(
        "valid_compat_final_response_then_keepalive.sse",
        "valid_final_response_then_keepalive.bin in the compatible mapping: KEEPALIVE and STREAM_END in a record after the final response's event; the prefixes before that record's line end are delivered",
        compat_body(&notification_then_response(true)),
        Expect::clean(&[PROGRESS, RESULT]),
    );

    set.add_compat(
        "valid_compat_aborted.sse",
        "a message, then ABORT (code 4) in a record of its own after the event, as the §18.4 sender writes it",
        compat_body(&wire),
        Expect::aborted(&[PROGRESS], 4, "model backend timed out"),
    );

    set.add_compat(
        "valid_compat_aborted_mid_message.sse",
        "valid_aborted_mid_message.bin in the compatible mapping: the second record holds the DATA headers of a message that the next event fills and the ABORT record after it discards (a §18.4 sender never writes this)",
        compat_body(&bytes_of(set, "valid_aborted_mid_message.bin")),
        Expect::aborted(&[PROGRESS], 4, "model backend timed out"),
    );

    // Intermediaries that lose or change the framing.
    set.add_compat(
        "invalid_compat_stripped_comments.sse",
        "§13 example whose comment lines an intermediary stripped: the event arrives with no DATA frame waiting",
        pieces[1].clone(),
        Expect::error("UnframedEvent", &[]),
    );

    set.add_compat(
        "invalid_compat_plain_mcp_stream.sse",
        "a plain MCP stream (priming event, keep-alive, the response as a `message` event) where the compatible mapping was promised",
        "data: \nid: 0\n\n:\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\nid: 1\n\n",
        Expect::error("UnframedEvent", &[]),
    );

    set.add_compat(
        "invalid_compat_base64_mapping_body.sse",
        "valid_sse_single_message.sse (the §15 mapping) read as the compatible mapping: an `mcp-frame` event is an event of another type",
        bytes_of(set, "valid_sse_single_message.sse"),
        Expect::error("UnexpectedEvent", &[]),
    );

    let multi = compat_pieces(&multiple);
    set.add_compat(
        "invalid_compat_event_dropped.sse",
        "valid_compat_multiple_messages.sse without the second message's event: the third record arrives while its DATA frame waits",
        [&multi[..3], &multi[4..]].concat().concat(),
        Expect::error("EventMissing", &[PROGRESS]),
    );

    let mut body = multi.clone();
    body.insert(2, multi[1].clone());
    set.add_compat(
        "invalid_compat_event_duplicated.sse",
        "valid_compat_multiple_messages.sse with the first event sent twice: the copy finds no DATA frame waiting",
        body.concat(),
        Expect::error("UnframedEvent", &[PROGRESS]),
    );

    let split = Raw::head(Some(KEY), ATTEMPT)
        .data(br#"{"ok""#)
        .keep_alive()
        .data(b":true}")
        .message_end(OK_MESSAGE)
        .stream_end(1)
        .build();
    set.add_compat(
        "invalid_compat_message_split_over_two_events.sse",
        "§13 message in two DATA frames with a KEEPALIVE between them, each DATA frame filled by its own event (`{\"ok\"`, then `:true}`): a stock client would read two messages; the second DATA header is SplitMessage",
        compat_body(&split),
        Expect::error("SplitMessage", &[]),
    );

    let short = format!("data: {}\n\n", r#"{"ok":tru}"#);
    set.add_compat(
        "invalid_compat_event_shorter.sse",
        "§13 example whose event lost a byte (`{\"ok\":tru}`): 10 bytes for an 11-byte DATA frame",
        format!("{}{short}", pieces[0]),
        Expect::error("EventLengthMismatch", &[]),
    );

    let long = format!("data: {}\n\n", r#"{"ok": true}"#);
    set.add_compat(
        "invalid_compat_event_longer.sse",
        "§13 example whose event a gateway re-serialized (`{\"ok\": true}`): 12 bytes for an 11-byte DATA frame",
        format!("{}{long}", pieces[0]),
        Expect::error("EventLengthMismatch", &[]),
    );

    let altered = format!("data: {}\n\n", r#"{"ok":TRUE}"#);
    set.add_compat(
        "invalid_compat_event_altered.sse",
        "§13 example whose event's bytes changed, not its length (`{\"ok\":TRUE}`): the DATA frame's payload CRC fails",
        format!("{}{altered}", pieces[0]),
        Expect::error("PayloadChecksumMismatch", &[]),
    );

    let spliced_retry = compat_pieces(&multiple_messages(RETRY, 16));
    set.add_compat(
        "invalid_compat_spliced_attempts.sse",
        "the first message (record and event) of valid_compat_multiple_messages.sse, then a retry's whole body (another attempt id): the retry's HEAD has a foreign sequence number",
        [&multi[..2], &spliced_retry[..]].concat().concat(),
        Expect::error("ForeignFrame", &[PROGRESS]),
    );

    set.add_compat(
        "invalid_compat_digest_mismatch.sse",
        "invalid_digest_mismatch.bin in the compatible mapping: the frame-level error is the verdict",
        compat_body(&bytes_of(set, "invalid_digest_mismatch.bin")),
        Expect::error("DigestMismatch", &[]),
    );

    let mut trailing = single.clone();
    let keep_alive = Raw::empty(0xa1a2_a3a8).keep_alive().build();
    trailing.extend_from_slice(&keep_alive);
    set.add_compat(
        "invalid_compat_record_after_stream_end.sse",
        "§13 example followed by a record carrying a KEEPALIVE frame: bytes after the sentinel",
        format!("{}{}", compat_body(&single), record(&keep_alive, "\n")),
        Expect::error("TrailingData", &[OK_MESSAGE]),
    );

    // Broken records.
    let text = &pieces[0];
    set.add_compat(
        "invalid_compat_record_bad_base64.sse",
        "§13 example with a `*` (not in the base64 alphabet) in the record",
        format!(
            "{}{}",
            text.replacen(":mcp-framing n00B", ":mcp-framing n00*", 1),
            pieces[1]
        ),
        Expect::error("InvalidRecord", &[]),
    );

    let unpadded = format!("{}\n", text.trim_end_matches('\n').trim_end_matches('='));
    set.add_compat(
        "invalid_compat_record_unpadded.sse",
        "§13 example with the `==` padding of the record's base64 left out",
        format!("{unpadded}{}", pieces[1]),
        Expect::error("InvalidRecord", &[]),
    );

    set.add_compat(
        "invalid_compat_record_without_space.sse",
        "§13 example with `:mcp-framing` directly followed by the base64 (no space): a comment starting with `mcp-framing` that is not a record",
        format!("{}{}", text.replacen(":mcp-framing ", ":mcp-framing", 1), pieces[1]),
        Expect::error("InvalidRecord", &[]),
    );

    let mut frames = [&single[..72], &single[83..]].concat();
    frames[52 + 11] ^= 0x01; // the DATA header's length field: 11 becomes 10, its CRC fails
    set.add_compat(
        "invalid_compat_record_header_checksum.sse",
        "§13 example whose record has a bit flipped in the DATA header's length (base64 re-encoded): the broken rest of the record goes to the frame decoder, which names the error",
        format!("{}{}", record(&frames, "\n"), pieces[1]),
        Expect::error("HeaderChecksumMismatch", &[]),
    );

    let frames = [&single[..72], &single[83..single.len() - 4]].concat();
    set.add_compat(
        "invalid_compat_record_partial_frame.sse",
        "§13 example whose record ends 4 bytes into STREAM_END's payload: after the event the frames are handed over, then InvalidRecord",
        format!("{}{}", record(&frames, "\n"), pieces[1]),
        Expect::error("InvalidRecord", &[OK_MESSAGE]),
    );

    // Cuts.
    set.add_compat(
        "invalid_compat_truncated_in_record.sse",
        "§13 example cut in the middle of its record line: the line is never complete, nothing is handed over",
        text[..100].to_owned(),
        Expect::truncated("NoFrame", &[]),
    );

    set.add_compat(
        "invalid_compat_truncated_in_event.sse",
        "§13 example cut inside the event's data line: the DATA frame waits for its payload",
        format!("{}{}", text, &pieces[1][..12]),
        Expect::truncated("InPayload", &[]),
    );

    set.add_compat(
        "invalid_compat_truncated_before_blank_line.sse",
        "§13 example cut after the event's data line, before its blank line: the event is never dispatched",
        format!("{}{}", text, pieces[1].strip_suffix('\n').expect("blank line")),
        Expect::truncated("InPayload", &[]),
    );

    set.add_compat(
        "invalid_compat_truncated_between_messages.sse",
        "valid_compat_multiple_messages.sse cut after the second event, before the third record",
        multi[..4].concat(),
        Expect::truncated("BetweenMessages", &[PROGRESS, LOG]),
    );

    let body = format!(
        "{}{}{}",
        record(frame(0), "\n"),
        record(&frame(1)[..20], "\n"),
        message_event(OK_MESSAGE, "\n"),
    );
    set.add_compat(
        "invalid_compat_truncated_before_end_record.sse",
        "valid_compat_end_record_after_event.sse cut after the event, before the record with MESSAGE_END and STREAM_END: the message is not verified",
        body,
        Expect::truncated("InMessage", &[]),
    );

    set.add_compat(
        "invalid_compat_truncated_only_keepalives.sse",
        "a body of keep-alive comments and a priming event only: no frame ever arrived",
        ":\n\ndata: \nid: 0\n\n: keep-alive\n\n",
        Expect::truncated("NoFrame", &[]),
    );

    let large = json_of_len(5_000);
    let mut enc = encoder(ATTEMPT, 16 * 1024);
    let mut wire = BytesMut::new();
    enc.message(&large, &mut wire).expect("message");
    enc.end(&mut wire).expect("end");
    set.add_compat(
        "invalid_compat_message_over_limit.sse",
        "a 5000-byte message with the decoder's max message size set to 4096: the DATA header is handed over with its record, and rejected before its event arrives",
        compat_body(&wire),
        Expect::error("MessageTooLarge", &[]),
    )
    .max_message_size = 4096;
    set.add_compat(
        "invalid_compat_event_too_large.sse",
        "a 5000-byte message with the event bound set to 4096 bytes (`decoder.max_event_data`)",
        compat_body(&wire),
        Expect::error("EventTooLarge", &[]),
    )
    .max_event_data = Some(4096);
}

/// What a prefix of a valid vector ends as, when its body is cut there and the input ends
/// (SPEC.md §7, §14 `prefixes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PrefixVerdict {
    /// A `Truncated` error: abandoned.
    Truncated,
    /// The final response delivered without the sentinel: clean, Regime B (§7 row 4).
    Delivered,
    /// Clean with the sentinel (§7 row 2).
    Clean,
    /// Aborted by the peer (§7 row 3).
    Aborted,
}

/// From `from` on, prefixes end as `verdict` (up to the next step).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct PrefixStep {
    pub(crate) from: usize,
    pub(crate) verdict: PrefixVerdict,
}

/// Whether `message` is a JSON-RPC response (SPEC.md §7.1), decided here on a `serde_json`
/// value, apart from the crate's `jsonrpc::is_response`: one JSON object with an `id` and a
/// `result` or an `error`.
pub(crate) fn is_jsonrpc_response(message: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(message).is_ok_and(|value| {
        value.as_object().is_some_and(|object| {
            object.contains_key("id")
                && (object.contains_key("result") || object.contains_key("error"))
        })
    })
}

/// The verdict of every prefix of a frame stream (index `c`: its first `c` bytes; the last index:
/// the whole stream, whose verdict is `whole`), from the frame layout and SPEC.md §7, §7.1 alone:
/// with a request key expected, the prefixes from the end of the first JSON-RPC response's
/// MESSAGE_END up to the end of the first DATA, MESSAGE_END or ABORT header after it are
/// delivered; a prefix that ends right after a whole STREAM_END or ABORT is clean or aborted;
/// every other strict prefix is truncated. For a well-formed stream this is exact; for an invalid
/// one, a bound (its checks may fail first).
pub(crate) fn frame_prefix_verdicts(
    stream: &[u8],
    keyed: bool,
    whole: PrefixVerdict,
) -> Vec<PrefixVerdict> {
    let mut delivered = None;
    let mut terminal = None;
    let mut message = Vec::new();
    let mut held = None;
    for span in super::frame_spans(stream) {
        if span.len() < 20 {
            // A header not yet whole: its kind is not trusted (§7.1).
            continue;
        }
        let kind = stream[span.start + 3];
        let whole_frame = span.len()
            == 20
                + u32::from_be_bytes(stream[span.start + 8..span.start + 12].try_into().unwrap())
                    as usize;
        if whole_frame && matches!(kind, 0x04 | 0x05) {
            // The terminal frame: nothing may follow it (§3).
            let verdict = if kind == 0x04 {
                PrefixVerdict::Clean
            } else {
                PrefixVerdict::Aborted
            };
            terminal = Some((span.end, verdict));
        }
        if let Some(from) = held {
            // Only KEEPALIVE, ignorable frames and STREAM_END may follow (§7.1).
            if !matches!(kind, 0x04 | 0x06 | 0x80..=0xff) {
                delivered = Some(from..span.start + 20);
                held = None;
            }
        } else if keyed && delivered.is_none() {
            match kind {
                0x02 if span.len() > 20 => {
                    message.extend_from_slice(&stream[span.start + 20..span.end])
                }
                // A whole MESSAGE_END (of a well-formed stream: its length and digest are right).
                0x03 if span.len() == 60 => {
                    if is_jsonrpc_response(&message) {
                        held = Some(span.end);
                    }
                    message.clear();
                }
                _ => {}
            }
        }
        if terminal.is_some() {
            break;
        }
    }
    if let Some(from) = held {
        delivered = Some(from..stream.len() + 1);
    }
    (0..=stream.len())
        .map(|cut| match terminal {
            _ if cut == stream.len() => whole,
            Some((end, verdict)) if cut == end => verdict,
            // Bytes after the terminal frame (§3).
            Some((end, _)) if cut > end => PrefixVerdict::Truncated,
            _ if delivered.as_ref().is_some_and(|range| range.contains(&cut)) => {
                PrefixVerdict::Delivered
            }
            _ => PrefixVerdict::Truncated,
        })
        .collect()
}

/// For a body in an SSE mapping: how many frame bytes the mapping has handed over after each
/// prefix of the body (index `b`: after its first `b` bytes), read with the crate's
/// `MappingDecoder` byte by byte (its output does not depend on the split; the reference decoder
/// checks every prefix of the manifest on its own, `tests/reference/run_vectors.py`). After a
/// mapping error (an invalid vector), no more frame bytes.
#[cfg(feature = "sse")]
fn frames_after_each_byte(vector: &Vector, body: &[u8]) -> (Vec<u8>, Vec<usize>) {
    let mapping: mcp_framing::mapping::Mapping = vector.mapping.parse().expect("a mapping");
    let decoder = vector.decoder();
    let mut unwrap = mcp_framing::internals::body::MappingDecoder::new(
        mapping,
        decoder.limits(),
        vector.max_event_data,
    );
    let mut frames = BytesMut::new();
    let mut after = vec![0];
    let mut failed = false;
    for byte in body {
        if !failed
            && unwrap
                .feed(std::slice::from_ref(byte), &mut frames)
                .is_err()
        {
            assert!(
                !vector.is_valid(),
                "{}: a valid vector breaks a mapping rule",
                vector.file
            );
            failed = true;
        }
        after.push(frames.len());
    }
    (frames.to_vec(), after)
}

#[cfg(not(feature = "sse"))]
fn frames_after_each_byte(_vector: &Vector, _body: &[u8]) -> (Vec<u8>, Vec<usize>) {
    panic!("the prefixes of an SSE body need the `sse` feature")
}

impl Vector {
    /// The verdict of each prefix of the vector's body by its frame layout alone (index `b`: its
    /// first `b` bytes; the last: the whole body), as for [`prefixes`](Self::prefixes). For an
    /// invalid vector the layout is only an upper bound: a prefix it calls delivered may be the
    /// vector's error instead, and the whole body is the error (`Truncated` here: not clean).
    pub(crate) fn layout_prefix_verdicts(&self) -> Vec<PrefixVerdict> {
        let whole = match (self.expect.verdict, self.expect.sentinel_seen) {
            ("clean", true) => PrefixVerdict::Clean,
            ("clean", false) => PrefixVerdict::Delivered,
            ("aborted", _) => PrefixVerdict::Aborted,
            _ => PrefixVerdict::Truncated,
        };
        let keyed = self.request_key.is_some();
        if self.mapping == "binary" {
            return frame_prefix_verdicts(&self.bytes, keyed, whole);
        }
        let (frames, after) = frames_after_each_byte(self, &self.bytes);
        let of_frames = frame_prefix_verdicts(&frames, keyed, whole);
        let last = after.len() - 1;
        // The whole body of an invalid vector is its error, whatever frames it carried.
        after
            .iter()
            .enumerate()
            .map(|(b, &n)| if b == last { whole } else { of_frames[n] })
            .collect()
    }

    /// The verdict of each prefix of a valid vector's body, as steps (SPEC.md §14 `prefixes`);
    /// `None` for an invalid vector.
    pub(crate) fn prefixes(&self) -> Option<Vec<PrefixStep>> {
        if !self.is_valid() {
            return None;
        }
        let mut steps: Vec<PrefixStep> = Vec::new();
        for (from, verdict) in self.layout_prefix_verdicts().into_iter().enumerate() {
            if steps.last().is_none_or(|step| step.verdict != verdict) {
                steps.push(PrefixStep { from, verdict });
            }
        }
        Some(steps)
    }

    /// The first offset whose prefix is delivered (SPEC.md §14 `delivered_from`).
    pub(crate) fn delivered_from(steps: &[PrefixStep]) -> Option<usize> {
        steps
            .iter()
            .find(|step| step.verdict == PrefixVerdict::Delivered)
            .map(|step| step.from)
    }
}

#[derive(Serialize)]
struct ManifestJson<'a> {
    spec_version: u32,
    vectors: Vec<EntryJson<'a>>,
}

#[derive(Serialize)]
struct EntryJson<'a> {
    file: &'a str,
    description: &'a str,
    mapping: &'static str,
    decoder: DecoderJson,
    expect: ExpectJson,
    /// Valid vectors: the first offset whose prefix is delivered, or null.
    #[serde(skip_serializing_if = "Option::is_none")]
    delivered_from: Option<Option<usize>>,
    /// Valid vectors: the verdict of every prefix, as steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    prefixes: Option<Vec<PrefixStep>>,
    /// Added field: the vector's length in bytes.
    size: usize,
    /// Added field: SHA-256 of the file.
    sha256: String,
}

#[derive(Serialize)]
struct DecoderJson {
    max_frame_payload: u32,
    max_message_size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_event_data: Option<usize>,
    #[serde(flatten)]
    bounds: Bounds,
}

#[derive(Serialize)]
struct ExpectJson {
    verdict: &'static str,
    sentinel_seen: bool,
    regime: &'static str,
    messages: Vec<MessageJson>,
    abort: Option<AbortJson>,
    error: Option<&'static str>,
    truncation: Option<&'static str>,
}

#[derive(Serialize)]
struct MessageJson {
    len: usize,
    sha256: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    utf8: Option<String>,
}

#[derive(Serialize)]
struct AbortJson {
    code: u16,
    reason: String,
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `manifest.json` for `vectors`, pretty-printed with a final newline.
pub(crate) fn manifest(vectors: &[Vector]) -> String {
    let manifest = ManifestJson {
        spec_version: SPEC_VERSION,
        vectors: vectors
            .iter()
            .map(|v| {
                let prefixes = v.prefixes();
                EntryJson {
                    file: &v.file,
                    description: &v.description,
                    mapping: v.mapping,
                    decoder: DecoderJson {
                        max_frame_payload: v.max_frame_payload,
                        max_message_size: v.max_message_size,
                        request_key: v.request_key.map(|k| k.to_string()),
                        max_event_data: v.max_event_data,
                        bounds: v.bounds,
                    },
                    expect: ExpectJson {
                        verdict: v.expect.verdict,
                        sentinel_seen: v.expect.sentinel_seen,
                        regime: v.expect.regime,
                        messages: v
                            .expect
                            .messages
                            .iter()
                            .map(|m| MessageJson {
                                len: m.len(),
                                sha256: hex(&sha256(m)),
                                utf8: std::str::from_utf8(m).ok().map(str::to_owned),
                            })
                            .collect(),
                        abort: v.expect.abort.as_ref().map(|(code, reason)| AbortJson {
                            code: *code,
                            reason: reason.clone(),
                        }),
                        error: v.expect.error,
                        truncation: v.expect.truncation,
                    },
                    delivered_from: prefixes.as_deref().map(Vector::delivered_from),
                    prefixes,
                    size: v.bytes.len(),
                    sha256: hex(&sha256(&v.bytes)),
                }
            })
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&manifest).expect("manifest serializes");
    text.push('\n');
    text
}
