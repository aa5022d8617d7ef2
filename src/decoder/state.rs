//! The decoder's state: one enum, so that an impossible combination (a payload awaited after the
//! end, an abort that also failed, message bytes or a running digest kept between messages, a
//! finished stream without a head) cannot be written.

use bytes::{Bytes, BytesMut};
use sha2::{Digest, Sha256};

use crate::error::{DecodeError, StreamState};
use crate::event::StreamSummary;
use crate::frame::{Abort, FrameHeader, FrameKind, StreamHead};

use super::prehashed::Known;

/// Where a stream decoder is, and what it keeps for it.
#[derive(Debug)]
pub(super) enum State {
    /// Reading frames.
    Open {
        /// Where in the stream grammar (SPEC.md §1).
        at: Position,
        /// A header that passed every check and whose payload has not all arrived yet.
        pending: Option<Pending>,
    },
    /// STREAM_END arrived, its message count matched (`summary.sentinel_seen`); or the input
    /// ended right after the final response (SPEC.md §7 row 4: delivered, `input_ended` set at
    /// once).
    Complete {
        head: StreamHead,
        /// The totals reported with the end.
        summary: StreamSummary,
        /// The end of input came with nothing after the sentinel (SPEC.md §3, §7): only then is
        /// the stream clean.
        input_ended: bool,
    },
    /// ABORT arrived; the end of input reports it as [`DecodeError::PeerAbort`].
    Aborted { head: StreamHead, abort: Abort },
    /// The final error; every later call returns it again.
    Failed {
        head: Option<StreamHead>,
        error: DecodeError,
    },
}

impl State {
    /// The public view of the state.
    #[inline]
    pub(super) fn stream_state(&self) -> StreamState {
        match self {
            Self::Open { at, .. } => at.stream_state(),
            Self::Complete { .. } | Self::Aborted { .. } | Self::Failed { .. } => {
                StreamState::Finished
            }
        }
    }

    /// The stream head, once HEAD arrived.
    pub(super) fn head(&self) -> Option<StreamHead> {
        match self {
            Self::Open {
                at: Position::AwaitingHead,
                ..
            } => None,
            Self::Open {
                at: Position::Streaming { head, .. },
                ..
            }
            | Self::Complete { head, .. }
            | Self::Aborted { head, .. } => Some(*head),
            Self::Failed { head, .. } => *head,
        }
    }
}

/// Where an open stream is in the grammar of SPEC.md §1.
#[derive(Debug)]
pub(super) enum Position {
    /// Nothing decoded yet: only HEAD may come.
    AwaitingHead,
    /// After HEAD: between messages (`message` is `None`: after HEAD or a MESSAGE_END), or
    /// inside one (after a DATA frame, before its MESSAGE_END).
    Streaming {
        head: StreamHead,
        message: Option<Message>,
        /// Where the stream stands with its final response (SPEC.md §7.1).
        answer: Answer,
    },
}

/// Where a stream stands with its final JSON-RPC response (SPEC.md §7.1): whether the end of
/// input before STREAM_END delivers it (§7 row 4).
///
/// Set once a message is verified, never per frame: whether the final response is still the
/// last thing the stream carried is read from the decoder's state when the input ends
/// ([`delivers_at_end`](Self::delivers_at_end)), so that a frame costs no work for it, keyed
/// or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// Not looked for: the decoder expects no request key or does not assemble messages (§7
    /// row 4 does not apply).
    Unchecked,
    /// No final response yet: every verified message is checked.
    Awaited,
    /// Message `index` was the final response (every later message is checked no more).
    Verified { index: u64 },
}

impl Answer {
    /// Whether the end of input delivers the final response (§7 row 4): it was verified, it is
    /// the last message the stream completed (`messages`), no message is open after it, and the
    /// frame whose payload was awaited, if any, is a KEEPALIVE, ignorable or STREAM_END one.
    /// Any DATA, MESSAGE_END or ABORT header after the response fails one of these for the
    /// rest of the stream: its end of input before STREAM_END is a truncation again.
    #[inline]
    pub(super) fn delivers_at_end(
        self,
        messages: u64,
        message: Option<&Message>,
        pending: Option<&Pending>,
    ) -> bool {
        matches!(self, Self::Verified { index } if index + 1 == messages)
            && message.is_none()
            && pending.is_none_or(|pending| may_follow_final_response(pending.kind))
    }
}

impl Answer {
    /// SPEC.md §7.1: whether verified message `index` (its `bytes`, `utf8`: known to be UTF-8
    /// already) is the final response: the first verified JSON-RPC response, recognized here
    /// once, only while it is awaited (a keyed, assembling decoder before its first response);
    /// then recorded as verified.
    #[inline(always)]
    pub(super) fn is_final_response(&mut self, index: u64, bytes: &[u8], utf8: bool) -> bool {
        let final_response = *self == Self::Awaited && is_jsonrpc_response(bytes, utf8);
        if final_response {
            *self = Self::Verified { index };
        }
        final_response
    }
}

/// Whether verified message bytes are a JSON-RPC response (SPEC.md §7.1): UTF-8, then the one
/// rule of [`crate::jsonrpc::is_response`], read in one pass; `utf8`: the bytes are known to be
/// UTF-8 already (validated once, by the SSE parser that delivered them), and are not again.
fn is_jsonrpc_response(bytes: &[u8], utf8: bool) -> bool {
    if utf8 {
        crate::jsonrpc::is_response_text(bytes)
    } else {
        crate::jsonrpc::is_utf8_response(bytes)
    }
}

/// Whether a frame of `kind` may follow the final response without ending its delivery at the
/// end of input (SPEC.md §7.1): filler frames and the sentinel.
#[inline]
fn may_follow_final_response(kind: FrameKind) -> bool {
    matches!(
        kind,
        FrameKind::KeepAlive | FrameKind::Ignorable(_) | FrameKind::StreamEnd
    )
}

impl Position {
    #[inline]
    pub(super) fn stream_state(&self) -> StreamState {
        match self {
            Self::AwaitingHead => StreamState::AwaitingHead,
            Self::Streaming { message: None, .. } => StreamState::BetweenMessages,
            Self::Streaming {
                message: Some(_), ..
            } => StreamState::InMessage,
        }
    }
}

/// The open message, as far as the decoder keeps it: a small enum, moved whole at every
/// message start and end (issue 18: a struct of every field any case needs cost each small
/// message a copy of all of them).
///
/// Every DATA payload is hashed as it arrives, or in batches of [`HASH_BATCH`] bytes (the
/// decoder's running SHA-256, fresh at every message start), so that the last step after the
/// final byte is the digest comparison (issue 21). Payloads the compatible mapping's decoder
/// hashed already as they arrived ([`Known`]) are not hashed again, nor copied together: that
/// decoder has the message whole (its event's data), which an assembling decoder delivers as
/// it is.
#[derive(Debug)]
pub(super) enum Message {
    /// Not assembling: the payloads went out as chunks; the running SHA-256 has them.
    Streamed,
    /// Assembling, one DATA payload so far: its zero-copy slice of the read buffer, of which
    /// the running SHA-256 has the first `hashed` bytes (all or none).
    One { bytes: Bytes, hashed: usize },
    /// Assembling, two or more: copied once into a buffer that grows as they arrive (never
    /// reserved from a declared length: the frames' lengths are declared, the message's only
    /// at its end), of which the running SHA-256 has the first `hashed` bytes.
    Many { bytes: BytesMut, hashed: usize },
    /// Assembling, and every payload so far is one that the computation made before they
    /// arrived covered: `message` is what it covered and `sha256` its digest, `len` bytes of it
    /// arrived, all of it when `whole`. The running SHA-256 is left alone.
    Prehashed {
        sha256: [u8; 32],
        message: Bytes,
        len: usize,
        whole: bool,
    },
}

/// Bytes an assembling decoder gathers before it hashes them: a payload of at least this size
/// is hashed as it arrives (issue 21: after a large message's last byte only the digest
/// comparison is left), smaller ones together, so that a stream of small DATA frames (LLM
/// tokens) pays the hasher's per-call work once per batch rather than once per frame, and at
/// most this many bytes are hashed after the last one arrived.
const HASH_BATCH: usize = 4096;

impl Message {
    /// The message after its first DATA payload, whose CRC was checked; `known`: what was
    /// computed of it before it arrived, if anything. `hasher` is the decoder's running SHA-256,
    /// fresh at every message start (see [`finish`](Self::finish)).
    #[inline]
    pub(super) fn first(
        payload: &Bytes,
        assemble: bool,
        known: Option<Box<Known>>,
        hasher: &mut Sha256,
    ) -> Self {
        if !assemble {
            hasher.update(payload);
            return Self::Streamed;
        }
        match known {
            Some(known) if known.first => Self::Prehashed {
                sha256: known.sha256,
                message: known.message,
                len: payload.len(),
                whole: known.last,
            },
            _ => {
                let hashed = if payload.len() >= HASH_BATCH {
                    hasher.update(payload);
                    payload.len()
                } else {
                    0
                };
                Self::One {
                    bytes: payload.clone(),
                    hashed,
                }
            }
        }
    }

    /// Adds a DATA payload to the open message in `slot`, or starts the message with it (see
    /// [`first`](Self::first)) when none is open.
    #[inline(always)]
    pub(super) fn add(
        slot: &mut Option<Self>,
        payload: &Bytes,
        assemble: bool,
        known: Option<Box<Known>>,
        hasher: &mut Sha256,
    ) {
        match slot {
            Some(message) => message.push(payload, known, hasher),
            None => *slot = Some(Self::first(payload, assemble, known, hasher)),
        }
    }

    /// Adds the next DATA payload, whose CRC was checked, with what was computed of it before
    /// it arrived (`known`), if anything: a payload that computation covered, continuing the
    /// message it covered, is neither hashed nor kept.
    #[inline]
    pub(super) fn push(&mut self, payload: &Bytes, known: Option<Box<Known>>, hasher: &mut Sha256) {
        match self {
            Self::Streamed => hasher.update(payload),
            Self::Many { bytes, hashed } => {
                bytes.extend_from_slice(payload);
                if bytes.len() - *hashed >= HASH_BATCH {
                    hasher.update(&bytes[*hashed..]);
                    *hashed = bytes.len();
                }
            }
            Self::One { bytes, hashed } => {
                let many = Self::gather(bytes, *hashed, payload, hasher);
                *self = many;
            }
            Self::Prehashed {
                message,
                len,
                whole,
                ..
            } => match known {
                Some(known) if !known.first && !*whole => {
                    *whole = known.last;
                    *len += payload.len();
                }
                // A payload that the computation did not cover: the ones it covered are
                // hashed and kept now, the rest as they come.
                _ => {
                    let covered = message.slice(..*len);
                    hasher.update(&covered);
                    let many = Self::gather(&covered, covered.len(), payload, hasher);
                    *self = many;
                }
            },
        }
    }

    /// The message's second payload: `first` (of which the running SHA-256 has `hashed`
    /// bytes) and `payload` copied together.
    #[inline(never)]
    fn gather(first: &[u8], hashed: usize, payload: &[u8], hasher: &mut Sha256) -> Self {
        let mut bytes = BytesMut::with_capacity(first.len() + payload.len());
        bytes.extend_from_slice(first);
        bytes.extend_from_slice(payload);
        let hashed = if bytes.len() - hashed >= HASH_BATCH {
            hasher.update(&bytes[hashed..]);
            bytes.len()
        } else {
            hashed
        };
        Self::Many { bytes, hashed }
    }

    /// The message's SHA-256, its bytes (empty when not assembling), and whether they are known
    /// to be UTF-8 (the compatible mapping's data line, which its SSE parser validated and
    /// delivered unchanged), leaving `hasher` fresh for the next message. `None`: a message
    /// without DATA.
    #[inline]
    pub(super) fn finish(message: Option<Self>, hasher: &mut Sha256) -> ([u8; 32], Bytes, bool) {
        let (bytes, hashed) = match message {
            None | Some(Self::Streamed) => (Bytes::new(), 0),
            Some(Self::One { bytes, hashed }) => (bytes, hashed),
            Some(Self::Many { bytes, hashed }) => (bytes.freeze(), hashed),
            // The running SHA-256 was left alone, fresh.
            Some(Self::Prehashed {
                sha256,
                message,
                whole: true,
                ..
            }) => return (sha256, message, true),
            // Computed for more payloads than the message had: its own are hashed now (a part
            // of the line, which may end inside a character).
            Some(Self::Prehashed { message, len, .. }) => (message.slice(..len), 0),
        };
        if bytes.len() > hashed {
            hasher.update(&bytes[hashed..]);
        }
        (hasher.finalize_reset().into(), bytes, false)
    }
}

/// A checked header waiting for its payload.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pending {
    pub(super) header: FrameHeader,
    pub(super) kind: FrameKind,
    /// Stream offset of the frame.
    pub(super) offset: u64,
}
