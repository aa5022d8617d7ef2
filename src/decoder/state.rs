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

/// The open message, as far as the decoder keeps it.
///
/// Every DATA payload is hashed as it arrives (the decoder's running SHA-256), so that the last
/// step after the final byte is the digest comparison (issue 21). Payloads the compatible
/// mapping's decoder hashed already as they arrived ([`Known`]) are not hashed again, nor
/// copied together: that decoder has the message whole (its event's data), which an assembling
/// decoder delivers as it is.
#[derive(Debug)]
pub(super) struct Message {
    /// Assembling: the payloads so far (`None` while they are those of `prehashed`).
    body: Option<Body>,
    /// Bytes of the payloads so far.
    len: usize,
    /// The message as hashed before its payloads reached the decoder, and its SHA-256, while
    /// every payload so far is one that computation covered (assembling only): the running
    /// hasher and `body` are then left alone.
    prehashed: Option<([u8; 32], Bytes)>,
    /// The computation covered the message up to its last payload so far.
    whole: bool,
    /// Assembling: how many bytes of `body` the running hasher has (see [`HASH_BATCH`]).
    hashed: usize,
}

/// Bytes an assembling decoder gathers before it hashes them: a payload of at least this size
/// is hashed as it arrives (issue 21: after a large message's last byte only the digest
/// comparison is left), smaller ones together, so that a stream of small DATA frames (LLM
/// tokens) pays the hasher's per-call work once per batch rather than once per frame, and at
/// most this many bytes are hashed after the last one arrived.
const HASH_BATCH: usize = 4096;

/// An assembled message's bytes so far.
#[derive(Debug)]
enum Body {
    /// One DATA frame: its zero-copy slice of the read buffer.
    One(Bytes),
    /// Two or more: copied once into a buffer that grows as they arrive (never reserved from a
    /// declared length: the frames' lengths are declared, the message's only at its end).
    Many(BytesMut),
}

impl Message {
    /// A message before its first DATA frame.
    #[inline]
    pub(super) fn new() -> Self {
        Self {
            body: None,
            len: 0,
            prehashed: None,
            whole: false,
            hashed: 0,
        }
    }

    /// Adds the next DATA payload, whose CRC was checked and of which nothing was computed
    /// before it arrived. `hasher` is the decoder's running SHA-256, fresh at every message
    /// start (see [`finish`](Self::finish)).
    #[inline]
    pub(super) fn push(&mut self, payload: &Bytes, assemble: bool, hasher: &mut Sha256) {
        if self.prehashed.is_some() {
            self.forget_prehashed(hasher);
        }
        self.len += payload.len();
        if !assemble {
            hasher.update(payload);
            return;
        }
        self.body = Some(match self.body.take() {
            None => Body::One(payload.clone()),
            Some(Body::One(first)) => {
                let mut bytes = BytesMut::with_capacity(first.len() + payload.len());
                bytes.extend_from_slice(&first);
                bytes.extend_from_slice(payload);
                Body::Many(bytes)
            }
            Some(Body::Many(mut bytes)) => {
                bytes.extend_from_slice(payload);
                Body::Many(bytes)
            }
        });
        if self.len - self.hashed >= HASH_BATCH {
            self.hash_body(hasher);
        }
    }

    /// Hands the hasher the bytes of `body` it does not have yet.
    fn hash_body(&mut self, hasher: &mut Sha256) {
        let body: &[u8] = match &self.body {
            None => &[],
            Some(Body::One(bytes)) => bytes,
            Some(Body::Many(bytes)) => bytes,
        };
        hasher.update(&body[self.hashed..]);
        self.hashed = body.len();
    }

    /// Adds the next DATA payload, whose CRC was checked, with what was computed of it before
    /// it arrived (`known`): a payload that computation covered is neither hashed nor kept.
    #[cfg_attr(not(feature = "sse"), allow(dead_code))] // known only from the compatible mapping
    pub(super) fn push_known(
        &mut self,
        payload: &Bytes,
        assemble: bool,
        known: Known,
        hasher: &mut Sha256,
    ) {
        match &self.prehashed {
            None if known.first && assemble && self.len == 0 => {
                self.prehashed = Some((known.sha256, known.message));
                self.whole = known.last;
                self.len = payload.len();
            }
            Some(_) if !known.first && !self.whole => {
                self.whole = known.last;
                self.len += payload.len();
            }
            _ => self.push(payload, assemble, hasher),
        }
    }

    /// A payload that the computation made before the payloads arrived did not cover: the ones
    /// it covered are hashed and kept now, the rest as they come.
    #[cold]
    #[inline(never)]
    fn forget_prehashed(&mut self, hasher: &mut Sha256) {
        if let Some((_, message)) = self.prehashed.take() {
            let covered = message.slice(..self.len);
            hasher.update(&covered);
            self.hashed = covered.len();
            self.body = Some(Body::One(covered));
        }
    }

    /// The message's SHA-256, its bytes (empty when not assembling), and whether they are known
    /// to be UTF-8 (the compatible mapping's data line, which its SSE parser validated and
    /// delivered unchanged), leaving `hasher` fresh for the next message.
    #[inline]
    pub(super) fn finish(message: Option<Self>, hasher: &mut Sha256) -> ([u8; 32], Bytes, bool) {
        let mut hasher = std::mem::take(hasher);
        let Some(message) = message else {
            return (hasher.finalize().into(), Bytes::new(), false);
        };
        match message.prehashed {
            Some((sha256, bytes)) if message.whole => (sha256, bytes, true),
            // Computed for more payloads than the message had: its own are hashed now (a part
            // of the line, which may end inside a character).
            Some((_, bytes)) => {
                let bytes = bytes.slice(..message.len);
                hasher.update(&bytes);
                (hasher.finalize().into(), bytes, false)
            }
            None => {
                let bytes = match message.body {
                    None => Bytes::new(),
                    Some(Body::One(bytes)) => bytes,
                    Some(Body::Many(bytes)) => bytes.freeze(),
                };
                if bytes.len() > message.hashed {
                    hasher.update(&bytes[message.hashed..]);
                }
                (hasher.finalize().into(), bytes, false)
            }
        }
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
