//! The decoder's state: one enum, so that an impossible combination (a payload awaited after the
//! end, an abort that also failed, message bytes or a running digest kept between messages, a
//! finished stream without a head) cannot be written.

use bytes::{Bytes, BytesMut};
use sha2::{Digest, Sha256};

use crate::error::{DecodeError, StreamState};
use crate::event::StreamSummary;
use crate::frame::{Abort, FrameHeader, FrameKind, StreamHead};

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

/// The bytes of the open message, as far as the decoder keeps them.
#[derive(Debug)]
pub(super) enum Message {
    /// Not assembling: the bytes went out as chunks; the decoder's running SHA-256 has them.
    Streamed,
    /// Assembling, one DATA frame so far: its zero-copy slice of the read buffer.
    One(Bytes),
    /// Assembling, two or more frames: copied once into a buffer that grows as they arrive
    /// (never reserved from a declared length).
    Many(BytesMut),
}

impl Message {
    /// The open message after its first DATA frame; `hasher` is the decoder's running SHA-256,
    /// fresh at every message start (see [`finish`](Self::finish)).
    #[inline]
    pub(super) fn first(chunk: &Bytes, assemble: bool, hasher: &mut Sha256) -> Self {
        if assemble {
            Self::One(chunk.clone())
        } else {
            hasher.update(chunk);
            Self::Streamed
        }
    }

    /// Adds the next DATA frame's bytes.
    #[inline]
    pub(super) fn push(&mut self, chunk: &Bytes, hasher: &mut Sha256) {
        match self {
            Self::Streamed => hasher.update(chunk),
            Self::Many(bytes) => bytes.extend_from_slice(chunk),
            Self::One(first) => {
                let mut bytes = BytesMut::with_capacity(first.len() + chunk.len());
                bytes.extend_from_slice(first);
                bytes.extend_from_slice(chunk);
                *self = Self::Many(bytes);
            }
        }
    }

    /// The message's SHA-256 and its bytes (empty when not assembling). An assembled message is
    /// hashed here, once, in one pass; a streamed one was hashed frame by frame into `hasher`,
    /// which is left fresh for the next message.
    #[inline]
    pub(super) fn finish(message: Option<Self>, hasher: &mut Sha256) -> ([u8; 32], Bytes) {
        let mut hasher = std::mem::take(hasher);
        let bytes = match message {
            // Streamed (or empty): every byte went through `hasher` already.
            None | Some(Self::Streamed) => return (hasher.finalize().into(), Bytes::new()),
            Some(Self::One(bytes)) => bytes,
            Some(Self::Many(bytes)) => bytes.freeze(),
        };
        hasher.update(&bytes);
        (hasher.finalize().into(), bytes)
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
