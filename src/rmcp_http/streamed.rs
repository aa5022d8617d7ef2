//! A large inner message sent on as it arrives: the part of it that can go out before its end.
//!
//! [`FramingLayer`](super::FramingLayer) frames an inner message (an SSE event's data, a JSON
//! body) in the binary and SSE mappings as its bytes arrive, once it is longer than
//! [`STREAM_FROM`]: DATA frames leave while the inner server still writes, each frame's CRC-32
//! and the message's SHA-256 computed as the bytes pass, and the MESSAGE_END (length, digest)
//! follows its last byte. What decides whether the message is framed at all (JSON-RPC, the
//! request's id, SPEC.md §3.1) needs the whole message: it is read as the bytes arrive (the
//! resumable scan of [`jsonrpc`](crate::jsonrpc), which stops where they end and goes on from
//! there), so that only its last bytes are left to read after them, and decided at the end; a
//! message it refuses, or one over the limit, ends with an ABORT in place of its MESSAGE_END, so
//! that it is never verified (SPEC.md §3, §5: an ABORT discards the open message).
//!
//! What goes out is what an SSE client reads (UTF-8 with replacement, as the layer frames the
//! data of an event whole): only the bytes up to the first that is not UTF-8 are sent early,
//! since a replacement changes nothing before it; the rest follows once the message is whole.
//! The compatible mapping (SPEC.md §18.4) writes a message's record, its digest included, before
//! its event, so a message there leaves whole after its last byte; its data line is read the same
//! way as it arrives (UTF-8, JSON-RPC) and its frames hashed, so that only the record and the
//! event are left to write then.

use bytes::Bytes;

use crate::jsonrpc::{Carried, Scan, message_text, utf8_message_text};

/// The bytes of a message after which it is sent on as it arrives (one DATA frame of the
/// encoder's default size): a smaller message is framed whole, in one write with its end.
pub(super) const STREAM_FROM: usize = 16 * 1024;

/// How much of the message arriving has gone out, how much of it is known to be UTF-8, and its
/// JSON-RPC reading as far as that.
#[derive(Debug, Default)]
pub(super) struct Streamed {
    /// Bytes of the message sent on.
    sent: usize,
    /// Bytes of the message checked as UTF-8 (whole characters); at least `sent`.
    valid: usize,
    /// A byte that is not UTF-8 was found at `valid`: nothing more goes out before the end.
    broken: bool,
    /// The JSON-RPC reading of the message's first `valid` bytes (text, as the scan needs).
    scan: Scan<false>,
}

impl Streamed {
    /// Whether some of the message went out (the encoder is inside it).
    pub(super) fn started(&self) -> bool {
        self.sent > 0
    }

    /// The bytes of the message that can go out now. `so_far` holds the message from `at` on,
    /// as far as it arrived (an SSE data line's value, a JSON body); its last bytes are those of
    /// `latest`, the inner body's last chunk, which the result slices (no copy) where it can.
    pub(super) fn next(&mut self, so_far: &[u8], at: usize, latest: &Bytes) -> Option<Bytes> {
        self.arrived(&so_far[at..]);
        if self.valid < STREAM_FROM || self.valid == self.sent {
            return None;
        }
        let (start, end) = (at + self.sent, at + self.valid);
        self.sent = self.valid;
        // `latest` is the end of `so_far` (or holds all of it and more before).
        let tail = so_far.len().min(latest.len());
        let tail_start = so_far.len() - tail;
        Some(if start >= tail_start {
            // Index `i` of `so_far` is `latest.len() - (so_far.len() - i)` of `latest`.
            let from_end = |i: usize| latest.len() - (so_far.len() - i);
            latest.slice(from_end(start)..from_end(end))
        } else {
            Bytes::copy_from_slice(&so_far[start..end])
        })
    }

    /// Checks as UTF-8 and reads (JSON-RPC) the bytes of `message` (the message from its first
    /// byte, as far as it arrived) not seen yet; returns how many of its bytes are known to be
    /// UTF-8 (whole characters: they are read, the rest waits), none more once one is not.
    pub(super) fn arrived(&mut self, message: &[u8]) -> usize {
        if !self.broken && message.len() > self.valid {
            match simdutf8::compat::from_utf8(&message[self.valid..]) {
                Ok(_) => self.valid = message.len(),
                Err(err) => {
                    self.valid += err.valid_up_to();
                    // `None`: a character cut at the end, which the next bytes complete.
                    self.broken = err.error_len().is_some();
                }
            }
            if !self.broken {
                self.scan.feed(&message[..self.valid]);
            }
        }
        if self.broken { 0 } else { self.valid }
    }

    /// The whole message `data` (its first bytes those seen as it arrived) as an SSE client
    /// reads it, and what it carries ([`message_text`]): for a message read as it arrived, only
    /// the bytes that came after are checked as UTF-8 and scanned. The flag: the message was
    /// read as it arrived and is UTF-8, so the text is `data` itself and its first bytes are
    /// those seen.
    pub(super) fn read(&mut self, data: Bytes) -> (Bytes, Carried, bool) {
        let seen = self.valid > 0 && !self.broken;
        if seen
            && data
                .get(self.valid..)
                .is_some_and(|rest| simdutf8::basic::from_utf8(rest).is_ok())
        {
            let (text, carried) = utf8_message_text(data, std::mem::take(&mut self.scan));
            (text, carried, true)
        } else {
            let (text, carried) = message_text(data);
            (text, carried, false)
        }
    }

    /// What is left to send of the whole message `text` (as an SSE client reads it: the bytes
    /// sent are its first bytes), once it has arrived; `None` if nothing went out before.
    pub(super) fn rest(&self, text: &Bytes) -> Option<Bytes> {
        self.started()
            .then(|| text.slice(self.sent.min(text.len())..))
    }
}
