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

use crate::jsonrpc::{Carried, Scan, carried_by_serde, message_text};
use crate::mapping::sse::Parts;

/// The bytes of a message after which it is sent on as it arrives (one DATA frame of the
/// encoder's default size): a smaller message is framed whole, in one write with its end.
pub(super) const STREAM_FROM: usize = 16 * 1024;

/// The bytes of the next read joined at a time to those kept of the last one (a character,
/// an escape or a key cut by the read), so that the reading goes on in place soon after the
/// read's start.
const JOIN: usize = 64;

/// How much of the message arriving has gone out, how much of it is known to be UTF-8, and its
/// JSON-RPC reading as far as that.
///
/// The message's bytes are read as the reads they came in (parts of the inner chunks), never
/// as one buffer: the UTF-8 check and the JSON-RPC scan go on from where the last read ended,
/// and of the bytes before only those they still need are kept (a character, an escape or a
/// top-level key cut by a read: a few bytes, joined to the next read's first bytes).
#[derive(Debug, Default)]
pub(super) struct Streamed {
    /// Bytes of the message sent on.
    sent: usize,
    /// Bytes of the message checked as UTF-8 (whole characters); at least `sent`.
    valid: usize,
    /// A byte that is not UTF-8 was found at `valid`: nothing more goes out before the end.
    broken: bool,
    /// Bytes of the message seen (read as they arrived).
    seen: usize,
    /// The JSON-RPC reading of the message's first `valid` bytes (text, as the scan needs); its
    /// text starts at `kept_from`.
    scan: Scan<false>,
    /// The message's bytes from `kept_from` to `seen`: those the UTF-8 check or the scan still
    /// needs.
    kept: Vec<u8>,
    kept_from: usize,
}

impl Streamed {
    /// Whether some of the message went out (the encoder is inside it).
    pub(super) fn started(&self) -> bool {
        self.sent > 0
    }

    /// The bytes of the message that can go out now. `so_far` holds the message from `at` on,
    /// as far as it arrived (an SSE data line as it was kept, a JSON body); its last bytes are
    /// those of `latest`, the inner body's last chunk, which the result slices (no copy) where
    /// it can.
    pub(super) fn next(&mut self, so_far: &Parts, at: usize, latest: &Bytes) -> Option<Bytes> {
        self.arrived(so_far, at);
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
            Bytes::from(so_far.copy_range(start..end))
        })
    }

    /// Checks as UTF-8 and reads (JSON-RPC) the bytes of the message not seen yet: `so_far`
    /// holds it from `at` on, as far as it arrived. Returns how many of its bytes are known to
    /// be UTF-8 (whole characters: they are read, the rest waits), none more once one is not.
    pub(super) fn arrived(&mut self, so_far: &Parts, at: usize) -> usize {
        for piece in so_far.pieces_from(at + self.seen) {
            self.feed(piece);
        }
        if self.broken { 0 } else { self.valid }
    }

    /// Reads `piece`, the message's next bytes: joined to the bytes kept (a few) until the
    /// reading needs none of them, then in place.
    fn feed(&mut self, mut piece: &[u8]) {
        if self.broken {
            self.seen += piece.len();
            return;
        }
        while !self.kept.is_empty() && !piece.is_empty() {
            // Linear in the bytes kept, however many (a long top-level key).
            let take = piece.len().min(JOIN.max(self.kept.len()));
            let mut kept = std::mem::take(&mut self.kept);
            kept.extend_from_slice(&piece[..take]);
            piece = &piece[take..];
            self.seen += take;
            let needed = self.read_window(&kept);
            kept.drain(..needed);
            self.kept = kept;
            if self.broken {
                self.seen += piece.len();
                return;
            }
        }
        if !piece.is_empty() {
            self.seen += piece.len();
            let needed = self.read_window(piece);
            self.kept = piece[needed..].to_vec();
        }
    }

    /// Checks and scans `window`, the message's bytes from `kept_from` to `seen`, from where
    /// the last reading stopped; returns how many of its first bytes are no longer needed (and
    /// moves `kept_from` past them).
    fn read_window(&mut self, window: &[u8]) -> usize {
        let checked = self.valid - self.kept_from;
        match simdutf8::compat::from_utf8(&window[checked..]) {
            Ok(_) => self.valid = self.seen,
            Err(err) => {
                self.valid += err.valid_up_to();
                // `None`: a character cut at the end, which the next bytes complete.
                self.broken = err.error_len().is_some();
            }
        }
        if self.broken {
            return 0;
        }
        let valid = self.valid - self.kept_from;
        self.scan.feed(&window[..valid]);
        let needed = self.scan.needed().min(valid);
        self.scan.rebase(needed);
        self.kept_from += needed;
        needed
    }

    /// The whole message `data` (its first bytes those seen as it arrived) as an SSE client
    /// reads it, and what it carries ([`message_text`]): for a message read as it arrived, only
    /// the bytes that came after are checked as UTF-8 and scanned, and the text is `data`
    /// itself, as it came (the flag says so: its first bytes are those seen). Otherwise it is
    /// read whole, in one buffer.
    pub(super) fn read_whole(&mut self, data: Parts) -> (Parts, Carried, bool) {
        if self.valid > 0 && !self.broken && data.len() >= self.seen {
            for piece in data.pieces_from(self.seen) {
                self.feed(piece);
            }
            if !self.broken && self.valid == data.len() {
                let kept = std::mem::take(&mut self.kept);
                let carried = match std::mem::take(&mut self.scan).finish(&kept) {
                    Some(members) => Carried::scanned(members),
                    None => {
                        let text = data.into_bytes();
                        let carried = carried_by_serde(&text);
                        return (Parts::from(text), carried, true);
                    }
                };
                return (data, carried, true);
            }
        }
        let (text, carried) = message_text(data.into_bytes());
        (Parts::from(text), carried, false)
    }

    /// Bytes of the message sent on: what is left to send of the whole message once it has
    /// arrived (as an SSE client reads it, [`read_whole`](Self::read_whole)) follows them.
    pub(super) fn sent(&self) -> usize {
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_read_in_parts_kept_as_they_came_is_decided_as_in_one_buffer() {
        let text = "a \\\"quoted\\\" line, café ✓ \\u00e9\\n ".repeat(2000);
        let message = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"text":"{text}"}}}}"#);
        let bytes = Bytes::from(message);
        for read in [1, 2, 3, 5, 7, 64, 4095, 4096, 5000, 16 * 1024, 65_536] {
            let mut streamed = Streamed::default();
            let mut parts = Parts::default();
            let mut sent = Vec::new();
            for at in (0..bytes.len()).step_by(read) {
                let latest = bytes.slice(at..(at + read).min(bytes.len()));
                parts.push_shared(latest.clone(), usize::MAX);
                if let Some(chunk) = streamed.next(&parts, 0, &latest) {
                    sent.extend_from_slice(&chunk);
                }
            }
            assert!(streamed.started(), "reads of {read}");
            let (text, carried, seen) = streamed.read_whole(parts);
            assert!(seen);
            let Carried::Response(members) = &carried else {
                panic!("reads of {read}: {carried:?}");
            };
            assert_eq!(text.copy_range(members.id.clone().unwrap()), b"7");
            sent.extend(text.split_off(streamed.sent()).pieces().flatten());
            assert_eq!(sent, bytes, "reads of {read}");
        }
    }
}
