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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// Not looked for: the decoder expects no request key or does not assemble messages (§7
    /// row 4 does not apply).
    Unchecked,
    /// No final response yet: every verified message is checked.
    Awaited,
    /// The last verified message is the final response, and every header accepted since is a
    /// KEEPALIVE, ignorable or STREAM_END one: the end of input delivers it.
    Held,
    /// A DATA, MESSAGE_END or ABORT header came after the final response: for the rest of the
    /// stream the end of input before STREAM_END is a truncation again.
    Spent,
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
}

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
        }
    }

    /// Adds the next DATA payload, whose CRC was checked; `known`: what was computed of it
    /// before it arrived. `hasher` is the decoder's running SHA-256, fresh at every message
    /// start (see [`finish`](Self::finish)).
    #[inline]
    pub(super) fn push(
        &mut self,
        payload: &Bytes,
        assemble: bool,
        known: Option<Known>,
        hasher: &mut Sha256,
    ) {
        match (&self.prehashed, known) {
            (None, Some(known)) if known.first && assemble && self.len == 0 => {
                self.prehashed = Some((known.sha256, known.message));
                self.whole = known.last;
                self.len = payload.len();
                return;
            }
            (Some(_), Some(known)) if !known.first && !self.whole => {
                self.whole = known.last;
                self.len += payload.len();
                return;
            }
            (Some((_, message)), _) => {
                // Not a payload that computation covered: the ones it covered are hashed and
                // kept now, the rest as they come.
                let covered = message.slice(..self.len);
                hasher.update(&covered);
                self.body = Some(Body::One(covered));
                self.prehashed = None;
            }
            (None, _) => {}
        }
        hasher.update(payload);
        self.len += payload.len();
        if !assemble {
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
