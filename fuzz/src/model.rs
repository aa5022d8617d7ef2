//! An independent model of SPEC.md: walks the frames of a byte string and says what a receiver
//! must report. It shares no code with the crate's decoder (only the crate's value types, to
//! compare), works on a whole slice, and is written straight from the spec's tables, so that a
//! disagreement points at one of the two. Which message is a JSON-RPC response (SPEC.md §7.1) is
//! read with the crate's one rule, `jsonrpc::is_response` (tested against `serde_json` values in
//! `tests/wire/jsonrpc.rs`); where that rule applies, and what it decides at the end of input, is
//! the model's own.

use mcp_framing::FrameKind;
use mcp_framing::{
    Abort, AttemptId, DecodeError, Event, RequestKey, StreamHead, StreamSummary, Truncation,
};
use sha2::{Digest, Sha256};

use super::limits::Limits;

/// SPEC.md §2: magic and version.
const MAGIC: [u8; 2] = [0x9f, 0x4d];
const VERSION: u8 = 1;
/// SPEC.md §4: distances up to 2^20 are gaps (forward) or replays (backward).
const WINDOW: u32 = 1 << 20;

const HEAD: u8 = 0x01;
const DATA: u8 = 0x02;
const MESSAGE_END: u8 = 0x03;
const STREAM_END: u8 = 0x04;
const ABORT: u8 = 0x05;
const KEEPALIVE: u8 = 0x06;

/// What a receiver must report for one frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expected {
    /// HEAD.
    Opened(StreamHead),
    /// A DATA payload.
    Chunk {
        /// Index of its message.
        index: u64,
        /// Offset in its message.
        offset: u64,
        /// The payload.
        bytes: Vec<u8>,
    },
    /// A verified message.
    Message {
        /// Index of the message.
        index: u64,
        /// Its bytes.
        bytes: Vec<u8>,
        /// Their SHA-256.
        sha256: [u8; 32],
        /// The stream's final response (SPEC.md §7.1), for a decoder that expects a key and
        /// assembles.
        final_response: bool,
    },
    /// KEEPALIVE.
    KeepAlive,
    /// STREAM_END, or the end of input after the final response (`sentinel_seen` false).
    End(StreamSummary),
    /// ABORT.
    Aborted(Abort),
}

/// How the input ends for a receiver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// STREAM_END, then nothing.
    Clean,
    /// The final response, then the end of input before STREAM_END (SPEC.md §7 row 4).
    Delivered,
    /// Input ended without a terminal frame (SPEC.md §7).
    Truncated(Truncation),
    /// ABORT, then nothing.
    PeerAbort(Abort),
    /// Any other error, by its SPEC.md name.
    Error(&'static str),
}

/// The model's reading of a whole input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// What must be reported, in order.
    pub events: Vec<Expected>,
    /// How it ends.
    pub verdict: Verdict,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitingHead,
    Between,
    InMessage,
}

/// SPEC.md §7.1: where a stream stands with its final response.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// The decoder expects no key or does not assemble: not looked for.
    Unchecked,
    /// No JSON-RPC response verified yet.
    Awaited,
    /// The final response verified; only KEEPALIVE, ignorable or STREAM_END headers since.
    Held,
    /// A DATA, MESSAGE_END or ABORT header after the final response.
    Spent,
}

fn be32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn be64(bytes: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// SPEC.md §3 length rules, by kind byte (`None`: unknown kind).
fn length_allowed(kind: u8, len: u32) -> Option<bool> {
    Some(match kind {
        HEAD => len == 32,
        DATA => len >= 1,
        MESSAGE_END => len == 40,
        STREAM_END => len == 8,
        ABORT => (2..=1026).contains(&len),
        KEEPALIVE => len == 0,
        0x80..=0xff => true,
        _ => return None,
    })
}

/// Reads `input` as a receiver configured with `limits` must (SPEC.md §2–§7).
#[must_use]
pub fn walk(input: &[u8], limits: &Limits) -> Outcome {
    let mut events = Vec::new();
    let verdict = walk_into(input, limits, &mut events);
    Outcome { events, verdict }
}

fn walk_into(input: &[u8], limits: &Limits, events: &mut Vec<Expected>) -> Verdict {
    let mut state = State::AwaitingHead;
    let mut pos = 0usize;
    let mut next_sequence = 0u32;
    let mut frames = 0u64;
    let mut messages = 0u64;
    let mut open: Vec<u8> = Vec::new();
    // SPEC.md §6.1: the per-stream bounds (the targets decode with their defaults), and the
    // KEEPALIVE and ignorable frames since the last DATA or MESSAGE_END.
    let bounds = mcp_framing::Limits::DEFAULT;
    let (mut keepalives, mut ignorable) = (0u32, 0u32);
    let mut answer = if limits.request_key.is_some() && limits.assemble {
        Answer::Awaited
    } else {
        Answer::Unchecked
    };
    // SPEC.md §7 row 4: the end of input after the final response, whatever part of a frame
    // (a header, or a STREAM_END or ignorable payload) it cut.
    let delivered = |events: &mut Vec<Expected>, frames: u64, messages: u64| {
        events.push(Expected::End(StreamSummary {
            messages,
            frames,
            bytes: input.len() as u64,
            sentinel_seen: false,
        }));
        Verdict::Delivered
    };
    loop {
        let rest = &input[pos..];
        if answer == Answer::Held && rest.is_empty() {
            return delivered(events, frames, messages);
        }
        if rest.is_empty() {
            return Verdict::Truncated(match state {
                State::AwaitingHead => Truncation::NoFrame,
                State::Between => Truncation::BetweenMessages { messages },
                State::InMessage => Truncation::InMessage {
                    message_bytes: open.len() as u64,
                },
            });
        }
        if rest.len() < 20 {
            // SPEC.md §2: magic and version are checked as soon as they arrive.
            if rest.len() >= 2 && rest[..2] != MAGIC {
                return Verdict::Error("BadMagic");
            }
            if rest.len() >= 3 && rest[2] != VERSION {
                return Verdict::Error("UnsupportedVersion");
            }
            if answer == Answer::Held {
                return delivered(events, frames, messages);
            }
            return Verdict::Truncated(Truncation::InHeader {
                received: rest.len(),
            });
        }
        let header = &rest[..20];
        // SPEC.md §2 "Header first": magic, version, header CRC, kind, sequence, length, limits.
        if header[..2] != MAGIC {
            return Verdict::Error("BadMagic");
        }
        if header[2] != VERSION {
            return Verdict::Error("UnsupportedVersion");
        }
        if crc32fast::hash(&header[..16]) != be32(header, 16) {
            return Verdict::Error("HeaderChecksumMismatch");
        }
        let kind = header[3];
        let sequence = be32(header, 4);
        let len = be32(header, 8);
        let Some(len_ok) = length_allowed(kind, len) else {
            return Verdict::Error("UnknownFrameKind");
        };
        if state == State::AwaitingHead {
            if kind != HEAD {
                return Verdict::Error("UnexpectedFrame");
            }
        } else {
            let distance = sequence.wrapping_sub(next_sequence);
            if distance != 0 {
                return Verdict::Error(if distance <= WINDOW {
                    "SequenceGap"
                } else if distance >= WINDOW.wrapping_neg() {
                    "SequenceReplay"
                } else {
                    "ForeignFrame"
                });
            }
            if kind == HEAD || (kind == STREAM_END && state == State::InMessage) {
                return Verdict::Error("UnexpectedFrame");
            }
        }
        if !len_ok {
            return Verdict::Error("InvalidFrameLength");
        }
        if len > limits.max_frame_payload {
            return Verdict::Error("FrameTooLarge");
        }
        if kind == DATA && open.len() as u64 + u64::from(len) > limits.max_message_size {
            return Verdict::Error("MessageTooLarge");
        }
        if (pos + 20) as u64 + u64::from(len) > bounds.max_stream_bytes {
            return Verdict::Error("StreamTooLarge");
        }
        if kind == KEEPALIVE && keepalives >= bounds.max_keepalives_in_a_row {
            return Verdict::Error("TooManyKeepAlives");
        }
        if kind >= 0x80 && ignorable >= bounds.max_ignorable_in_a_row {
            return Verdict::Error("TooManyIgnorableFrames");
        }
        if kind == MESSAGE_END && messages >= bounds.max_messages {
            return Verdict::Error("TooManyMessages");
        }
        // SPEC.md §7.1: only filler frames and STREAM_END may follow the final response.
        if answer == Answer::Held && !matches!(kind, KEEPALIVE | STREAM_END | 0x80..=0xff) {
            answer = Answer::Spent;
        }
        let len = len as usize;
        if rest.len() - 20 < len {
            if answer == Answer::Held {
                return delivered(events, frames, messages);
            }
            return Verdict::Truncated(Truncation::InPayload {
                kind: FrameKind::from_byte(kind).expect("known kind"),
                received: rest.len() - 20,
                declared: len as u32,
            });
        }
        let payload = &rest[20..20 + len];
        if crc32fast::hash(payload) != be32(header, 12) {
            return Verdict::Error("PayloadChecksumMismatch");
        }
        pos += 20 + len;
        frames += 1;
        next_sequence = sequence.wrapping_add(1);
        match kind {
            HEAD => {
                let attempt: [u8; 16] = payload[16..].try_into().expect("16 bytes");
                // SPEC.md §4: HEAD's sequence number is the attempt id's first four bytes.
                if sequence != be32(&attempt, 0) {
                    return Verdict::Error("ForeignFrame");
                }
                let key: [u8; 16] = payload[..16].try_into().expect("16 bytes");
                let key = (key != [0; 16]).then(|| RequestKey::from_bytes(key));
                if limits.request_key.is_some() && key != limits.request_key {
                    return Verdict::Error("RequestKeyMismatch");
                }
                events.push(Expected::Opened(StreamHead {
                    request_key: key,
                    attempt_id: AttemptId::from_bytes(attempt),
                }));
                state = State::Between;
            }
            DATA => {
                events.push(Expected::Chunk {
                    index: messages,
                    offset: open.len() as u64,
                    bytes: payload.to_vec(),
                });
                open.extend_from_slice(payload);
                state = State::InMessage;
                (keepalives, ignorable) = (0, 0);
            }
            MESSAGE_END => {
                if be64(payload, 0) != open.len() as u64 {
                    return Verdict::Error("LengthMismatch");
                }
                let sha256: [u8; 32] = Sha256::digest(&open).into();
                if payload[8..] != sha256 {
                    return Verdict::Error("DigestMismatch");
                }
                // SPEC.md §7.1: the first verified JSON-RPC response is the final one.
                let final_response = answer == Answer::Awaited
                    && std::str::from_utf8(&open)
                        .is_ok_and(mcp_framing::internals::jsonrpc::is_response);
                if final_response {
                    answer = Answer::Held;
                }
                events.push(Expected::Message {
                    index: messages,
                    bytes: std::mem::take(&mut open),
                    sha256,
                    final_response,
                });
                messages += 1;
                state = State::Between;
                (keepalives, ignorable) = (0, 0);
            }
            STREAM_END => {
                if be64(payload, 0) != messages {
                    return Verdict::Error("MessageCountMismatch");
                }
                events.push(Expected::End(StreamSummary {
                    messages,
                    frames,
                    bytes: pos as u64,
                    sentinel_seen: true,
                }));
                return after_terminal(&input[pos..], Verdict::Clean);
            }
            ABORT => {
                let Ok(reason) = std::str::from_utf8(&payload[2..]) else {
                    return Verdict::Error("InvalidAbort");
                };
                let code = u16::from_be_bytes([payload[0], payload[1]]);
                let abort = Abort::new(code.into(), reason);
                events.push(Expected::Aborted(abort.clone()));
                return after_terminal(&input[pos..], Verdict::PeerAbort(abort));
            }
            KEEPALIVE => {
                keepalives += 1;
                events.push(Expected::KeepAlive);
            }
            _ => ignorable += 1, // 0x80..=0xFF: checked, then skipped (SPEC.md §3).
        }
    }
}

/// SPEC.md §3: nothing may follow a terminal frame.
fn after_terminal(rest: &[u8], verdict: Verdict) -> Verdict {
    if rest.is_empty() {
        verdict
    } else {
        Verdict::Error("TrailingData")
    }
}

/// Asserts that a decoder's `events` (its verdict last if an error) are what the model expects.
///
/// # Panics
///
/// On the first difference, naming it.
pub fn assert_agrees(outcome: &Outcome, events: &[Result<Event, DecodeError>], assemble: bool) {
    let (events, verdict) = match events.split_last() {
        Some((Err(err), events)) => (events, Some(err)),
        _ => (events, None),
    };
    for (i, (expected, event)) in outcome.events.iter().zip(events).enumerate() {
        let event = event.as_ref().expect("errors come last");
        assert!(
            matches(expected, event, assemble),
            "event {i}: model expects {expected:?}, decoder reported {event:?}"
        );
    }
    assert_eq!(
        outcome.events.len(),
        events.len(),
        "event count: model {:?}, decoder {:?} (verdict {verdict:?})",
        outcome.events.get(events.len()),
        events.get(outcome.events.len()),
    );
    match (&outcome.verdict, verdict) {
        (Verdict::Clean | Verdict::Delivered, None) => {}
        (Verdict::Truncated(at), Some(DecodeError::Truncated { at: found, .. })) => {
            assert_eq!(at, found, "truncation point");
        }
        (Verdict::PeerAbort(abort), Some(DecodeError::PeerAbort(found))) => {
            assert_eq!(abort, found, "abort");
        }
        (Verdict::Error(kind), Some(err)) if *kind == err.kind() => {}
        (expected, found) => panic!("verdict: model expects {expected:?}, decoder {found:?}"),
    }
}

fn matches(expected: &Expected, event: &Event, assemble: bool) -> bool {
    match (expected, event) {
        (Expected::Opened(head), Event::Opened(found)) => head == found,
        (
            Expected::Chunk {
                index,
                offset,
                bytes,
            },
            Event::Chunk(chunk),
        ) => {
            (chunk.message_index(), chunk.offset()) == (*index, *offset)
                && chunk.unverified_bytes()[..] == bytes[..]
        }
        (
            Expected::Message {
                index,
                bytes,
                sha256,
                final_response,
            },
            Event::Message(message),
        ) if assemble => {
            let summary = message.summary();
            (summary.index, summary.len, summary.sha256) == (*index, bytes.len() as u64, *sha256)
                && message.bytes()[..] == bytes[..]
                && message.is_final_response() == *final_response
        }
        (
            Expected::Message {
                index,
                bytes,
                sha256,
                ..
            },
            Event::MessageVerified(summary),
        ) if !assemble => {
            (summary.index, summary.len, summary.sha256) == (*index, bytes.len() as u64, *sha256)
        }
        (Expected::KeepAlive, Event::KeepAlive) => true,
        (Expected::End(summary), Event::End(found)) => summary == found,
        (Expected::Aborted(abort), Event::Aborted(found)) => abort == found,
        _ => false,
    }
}
