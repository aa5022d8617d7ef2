//! `roundtrip`: `arbitrary` scripts of encoder calls -> encode -> decode gives them back.
//!
//! Input: an `arbitrary`-generated [`Script`]: request key, attempt id, encoder frame size and
//! message limit, decoder limits, a list of encoder calls, how the stream ends (sentinel, abort,
//! nothing, or cut at a byte) and the read sizes the decoder is fed with.
//!
//! Oracle:
//! - the encoder writes exactly the frames a simple simulation of its documented behaviour
//!   predicts (serialized independently here), refuses the calls it documents refusing, and
//!   writes nothing when it refuses;
//! - decoding, in the scripted reads, reports exactly what the [`model`](super::model) reads
//!   from those bytes;
//! - and the round trip itself: when the decoder's limits admit the stream, a clean stream gives
//!   back every message and keepalive, an aborted one the messages finished before the abort and
//!   the abort, an unterminated one the finished messages and a truncation, or, when its last
//!   message is its first JSON-RPC response and the decoder expects a key, the response delivered
//!   (SPEC.md §7 row 4); a cut stream is never clean with its sentinel, is delivered only after
//!   its final response, and gives back a prefix of the messages.

use arbitrary::{Arbitrary, Unstructured};
use bytes::BytesMut;
use mcp_framing::internals::frame::MAX_ABORT_REASON_LEN;
use mcp_framing::{
    Abort, AttemptId, DecodeError, EncodeError, Event, RequestKey, StreamEncoder, StreamHead,
    Truncation, internals::limits::DEFAULT_MAX_MESSAGE_SIZE,
};
use sha2::{Digest, Sha256};

use super::limits::Limits;
use super::model::{self, Expected, Verdict};

/// One encoder call.
#[derive(Arbitrary, Clone, Debug)]
pub enum Op {
    /// `StreamEncoder::message`.
    Message(Vec<u8>),
    /// `StreamEncoder::push`.
    Push(Vec<u8>),
    /// `StreamEncoder::finish_message`.
    Finish,
    /// `StreamEncoder::keep_alive`.
    KeepAlive,
    /// `StreamEncoder::message` with a JSON-RPC response of this id (SPEC.md §7.1).
    Response(u32),
}

/// The JSON-RPC response of [`Op::Response`].
fn response(id: u32) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[]}}}}"#).into_bytes()
}

/// Whether `message` is a JSON-RPC response (the crate's one rule, SPEC.md §7.1).
fn is_response(message: &[u8]) -> bool {
    std::str::from_utf8(message).is_ok_and(mcp_framing::internals::jsonrpc::is_response)
}

/// How the script ends its stream.
#[derive(Arbitrary, Clone, Debug)]
pub enum Ending {
    /// `end` (after finishing an open message).
    End,
    /// `abort` with this code and reason (cut to 1024 bytes if longer).
    Abort {
        /// The reason code.
        code: u16,
        /// The reason text.
        reason: String,
    },
    /// No terminal frame: the server died.
    Unterminated,
    /// `end`, then the bytes are cut at this position (modulo the length): a strict prefix.
    Cut(u16),
}

/// A whole scripted stream; see the module docs.
#[derive(Arbitrary, Clone, Debug)]
pub struct Script {
    /// The request key (an all-zero key is the same as none on the wire).
    pub request_key: Option<[u8; 16]>,
    /// The attempt id; its first four bytes are the first sequence number.
    pub attempt_id: [u8; 16],
    /// Encoder frame size minus one.
    pub frame_size: u16,
    /// Encoder message limit (`None`: the default).
    pub max_message_size: Option<u16>,
    /// Decoder limits byte ([`Limits::from_byte`]); with bit 6 the decoder expects the script's
    /// key, or [`EXPECTED_KEY`](super::limits::EXPECTED_KEY) if it has none.
    pub decoder_limits: u8,
    /// The encoder calls.
    pub ops: Vec<Op>,
    /// How the stream ends.
    pub ending: Ending,
    /// Read sizes minus one, cycled (empty: one read).
    pub reads: Vec<u8>,
}

/// The frames the encoder is expected to write, and the stream's content.
struct Simulation {
    head: StreamHead,
    frame_size: usize,
    max_message: u64,
    frames: Vec<(u8, Vec<u8>)>,
    open: Option<Vec<u8>>,
    messages: Vec<Vec<u8>>,
    keepalives: usize,
    abort: Option<Abort>,
}

impl Simulation {
    fn frame(&mut self, kind: u8, payload: Vec<u8>) {
        if self.frames.is_empty() {
            let mut head = Vec::with_capacity(32);
            let key = self.head.request_key.map_or([0; 16], |k| *k.as_bytes());
            head.extend_from_slice(&key);
            head.extend_from_slice(self.head.attempt_id.as_bytes());
            self.frames.push((0x01, head));
        }
        self.frames.push((kind, payload));
    }

    fn data(&mut self, bytes: &[u8]) {
        for piece in bytes.chunks(self.frame_size) {
            self.frame(0x02, piece.to_vec());
        }
        self.open
            .get_or_insert_with(Vec::new)
            .extend_from_slice(bytes);
    }

    fn finish(&mut self) {
        let message = self.open.take().unwrap_or_default();
        let mut payload = (message.len() as u64).to_be_bytes().to_vec();
        payload.extend_from_slice(&Sha256::digest(&message));
        self.frame(0x03, payload);
        self.messages.push(message);
    }

    fn end(&mut self) {
        let count = self.messages.len() as u64;
        self.frame(0x04, count.to_be_bytes().to_vec());
    }

    /// The frames serialized with the SPEC.md §2 layout, written out here independently.
    fn wire(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut sequence = self.head.initial_sequence();
        for (kind, payload) in &self.frames {
            let start = out.len();
            out.extend_from_slice(&[0x9f, 0x4d, 0x01, *kind]);
            out.extend_from_slice(&sequence.to_be_bytes());
            out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            out.extend_from_slice(&crc32fast::hash(payload).to_be_bytes());
            let crc = crc32fast::hash(&out[start..]);
            out.extend_from_slice(&crc.to_be_bytes());
            out.extend_from_slice(payload);
            sequence = sequence.wrapping_add(1);
        }
        out
    }
}

/// Runs the encoder through the script next to the simulation; returns both.
fn encode(script: &Script) -> (BytesMut, Simulation) {
    let key = script
        .request_key
        .filter(|key| *key != [0; 16])
        .map(RequestKey::from_bytes);
    let head = StreamHead {
        request_key: key,
        attempt_id: AttemptId::from_bytes(script.attempt_id),
    };
    let frame_size = usize::from(script.frame_size) + 1;
    let max_message = script
        .max_message_size
        .map_or(DEFAULT_MAX_MESSAGE_SIZE, u64::from);
    let mut encoder = StreamEncoder::builder()
        .frame_size(frame_size)
        .max_message_size(max_message)
        .build(head);
    let mut sim = Simulation {
        head,
        frame_size,
        max_message,
        frames: Vec::new(),
        open: None,
        messages: Vec::new(),
        keepalives: 0,
        abort: None,
    };
    let mut wire = BytesMut::new();
    for op in &script.ops {
        let op = &match op {
            Op::Response(id) => Op::Message(response(*id)),
            other => other.clone(),
        };
        let before = wire.len();
        let refused = match op {
            Op::Push(bytes) => {
                let len = sim.open.as_ref().map_or(0, Vec::len) as u64 + bytes.len() as u64;
                let result = encoder.push(bytes, &mut wire);
                if len > sim.max_message && !bytes.is_empty() {
                    assert!(
                        matches!(result, Err(EncodeError::MessageTooLarge { .. })),
                        "{result:?}"
                    );
                    true
                } else {
                    result.expect("push within the limit");
                    if !bytes.is_empty() {
                        sim.data(bytes);
                    }
                    bytes.is_empty()
                }
            }
            Op::Message(bytes) => {
                let result = encoder.message(bytes, &mut wire);
                if sim.open.is_some() {
                    assert!(
                        matches!(result, Err(EncodeError::MessageOpen)),
                        "{result:?}"
                    );
                    true
                } else if bytes.len() as u64 > sim.max_message {
                    assert!(
                        matches!(result, Err(EncodeError::MessageTooLarge { .. })),
                        "{result:?}"
                    );
                    true
                } else {
                    let summary = result.expect("message within the limit");
                    assert_eq!(summary.index, sim.messages.len() as u64, "message index");
                    sim.data(bytes);
                    sim.finish();
                    false
                }
            }
            Op::Finish => {
                encoder.finish_message(&mut wire).expect("finish");
                sim.finish();
                false
            }
            Op::KeepAlive => {
                encoder.keep_alive(&mut wire).expect("keepalive");
                sim.frame(0x06, Vec::new());
                sim.keepalives += 1;
                false
            }
            Op::Response(_) => unreachable!("written as a message above"),
        };
        if refused {
            assert_eq!(
                wire.len(),
                before,
                "the encoder wrote bytes for a refused call: {op:?}"
            );
        }
        assert_eq!(
            encoder.in_message(),
            sim.open.is_some(),
            "in_message after {op:?}"
        );
    }
    match &script.ending {
        Ending::End | Ending::Cut(_) => {
            if sim.open.is_some() {
                let before = wire.len();
                let result = encoder.end(&mut wire);
                assert!(
                    matches!(result, Err(EncodeError::MessageOpen)),
                    "{result:?}"
                );
                assert_eq!(
                    wire.len(),
                    before,
                    "the encoder wrote bytes for a refused end"
                );
                encoder
                    .finish_message(&mut wire)
                    .expect("finish before the end");
                sim.finish();
            }
            encoder.end(&mut wire).expect("end");
            sim.end();
        }
        Ending::Abort { code, reason } => {
            let mut reason = reason.as_str();
            if reason.len() > MAX_ABORT_REASON_LEN {
                let result = encoder.abort((*code).into(), reason, &mut wire);
                assert!(matches!(
                    result,
                    Err(EncodeError::AbortReasonTooLong { .. })
                ));
                let mut cut = MAX_ABORT_REASON_LEN;
                while !reason.is_char_boundary(cut) {
                    cut -= 1;
                }
                reason = &reason[..cut];
            }
            encoder
                .abort((*code).into(), reason, &mut wire)
                .expect("abort");
            let mut payload = code.to_be_bytes().to_vec();
            payload.extend_from_slice(reason.as_bytes());
            sim.frame(0x05, payload);
            sim.abort = Some(Abort::new((*code).into(), reason));
        }
        Ending::Unterminated => {}
    }
    if !matches!(script.ending, Ending::Unterminated) {
        assert!(encoder.is_finished(), "finished after the terminal frame");
        let before = wire.len();
        let result = encoder.push(b"late", &mut wire);
        assert!(
            matches!(result, Err(EncodeError::StreamFinished)),
            "{result:?}"
        );
        assert_eq!(wire.len(), before, "the encoder wrote bytes after the end");
    }
    (wire, sim)
}

/// Feeds `input` to a fresh decoder in the scripted reads; every event, then the verdict if an
/// error.
fn decode(limits: &Limits, input: &[u8], reads: &[u8]) -> Vec<Result<Event, DecodeError>> {
    let mut decoder = limits.decoder();
    let mut buf = BytesMut::new();
    let mut events = Vec::new();
    let mut pos = 0;
    let mut step = 0;
    while pos < input.len() {
        let size = reads
            .get(step % reads.len().max(1))
            .map_or(input.len(), |&r| usize::from(r) + 1);
        let end = input.len().min(pos + size);
        buf.extend_from_slice(&input[pos..end]);
        pos = end;
        step += 1;
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(event)) => events.push(Ok(event)),
                Ok(None) => break,
                Err(err) => {
                    events.push(Err(err));
                    return events;
                }
            }
        }
    }
    events.extend(decoder.decode_to_end(&mut buf));
    events
}

/// Runs the oracle on one input; see the module docs.
///
/// # Panics
///
/// When a round trip loses, adds or changes anything.
pub fn run(data: &[u8]) {
    let Ok(script) = Script::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let (wire, sim) = encode(&script);
    assert!(
        wire[..] == sim.wire()[..],
        "encoder output differs from the simulation"
    );

    let mut limits = Limits::from_byte(script.decoder_limits);
    if limits.request_key.is_some() {
        limits.request_key = sim.head.request_key.or(limits.request_key);
    }
    let input = match script.ending {
        Ending::Cut(at) => &wire[..usize::from(at) % wire.len()],
        _ => &wire[..],
    };
    let outcome = model::walk(input, &limits);
    let events = decode(&limits, input, &script.reads);
    model::assert_agrees(&outcome, &events, limits.assemble);

    // The round trip, in terms of the script.
    let messages: Vec<&[u8]> = outcome
        .events
        .iter()
        .filter_map(|e| match e {
            Expected::Message { bytes, .. } => Some(&bytes[..]),
            _ => None,
        })
        .collect();
    let keepalives = outcome
        .events
        .iter()
        .filter(|e| matches!(e, Expected::KeepAlive))
        .count();
    assert!(
        messages.len() <= sim.messages.len()
            && messages.iter().zip(&sim.messages).all(|(a, b)| a == b),
        "decoded messages are not a prefix of the encoded ones"
    );
    let admitted =
        sim.frames.iter().all(|(kind, payload)| {
            *kind != 0x02 || payload.len() <= limits.max_frame_payload as usize
        }) && sim
            .messages
            .iter()
            .chain(&sim.open)
            .all(|m| m.len() as u64 <= limits.max_message_size)
            && (sim.frames.is_empty()
                || limits.request_key.is_none()
                || limits.request_key == sim.head.request_key);
    if let Ending::Cut(_) = script.ending {
        assert_ne!(
            outcome.verdict,
            Verdict::Clean,
            "a strict prefix decoded as clean"
        );
        if outcome.verdict == Verdict::Delivered {
            // SPEC.md §7.1: only right after the final response, the stream's last message.
            let last = outcome.events.iter().rev().find_map(|e| match e {
                Expected::Message { final_response, .. } => Some(*final_response),
                _ => None,
            });
            assert_eq!(last, Some(true), "delivered without a final response last");
        }
        return;
    }
    if !admitted {
        assert!(
            matches!(outcome.verdict, Verdict::Error(kind)
                if ["FrameTooLarge", "MessageTooLarge", "RequestKeyMismatch"].contains(&kind)),
            "over the limits, verdict {:?}",
            outcome.verdict
        );
        return;
    }
    assert_eq!(messages.len(), sim.messages.len(), "messages lost or added");
    assert_eq!(keepalives, sim.keepalives, "keepalives lost or added");
    if !sim.frames.is_empty() {
        assert_eq!(
            outcome.events.first(),
            Some(&Expected::Opened(sim.head)),
            "stream head"
        );
    }
    // SPEC.md §7 row 4: an unterminated stream whose last message is its first JSON-RPC
    // response, for a decoder that expects a key and assembles messages.
    let first_response = sim.messages.iter().position(|m| is_response(m));
    let delivers = limits.request_key.is_some()
        && limits.assemble
        && sim.open.is_none()
        && first_response.is_some_and(|i| i + 1 == sim.messages.len());
    let expected = match (&script.ending, &sim.abort) {
        (Ending::End, _) => Verdict::Clean,
        (Ending::Abort { .. }, Some(abort)) => Verdict::PeerAbort(abort.clone()),
        (_, _) if sim.frames.is_empty() => Verdict::Truncated(Truncation::NoFrame),
        (_, _) if delivers => Verdict::Delivered,
        (_, _) => Verdict::Truncated(match &sim.open {
            Some(open) => Truncation::InMessage {
                message_bytes: open.len() as u64,
            },
            None => Truncation::BetweenMessages {
                messages: sim.messages.len() as u64,
            },
        }),
    };
    assert_eq!(outcome.verdict, expected, "round-trip verdict");
}
