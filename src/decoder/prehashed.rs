//! Payload checks made before the payloads reached the decoder (issue 21): the compatible
//! mapping's decoder hashes a message event's data line while it arrives, and the frame decoder
//! compares those values with the headers and the MESSAGE_END instead of hashing the message
//! again once the event is whole. Every value is for an exact place in the frame bytes; a
//! payload that is not at such a place is checked as any other. The payloads an entry covers are
//! not in the frame bytes: their headers are, and the decoder takes each payload from the
//! entry's message (no copy of the message into the frame bytes).

use std::collections::VecDeque;

use bytes::Bytes;

/// The payload checks of one message's DATA frames, made on exactly the bytes that become those
/// payloads: where each payload belongs in the frame bytes handed to the decoder (right after
/// its header, which is there; the payload is not), its length and CRC-32, and the SHA-256 of
/// them all, in order (the message).
#[cfg_attr(not(feature = "sse"), allow(dead_code))] // made by the compatible mapping's decoder
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Prehashed {
    /// (offset in the frame bytes handed to the decoder, length, CRC-32) of each payload, in
    /// order.
    pub(crate) payloads: Vec<(u64, u32, u32)>,
    /// The SHA-256 of the payloads, in order.
    pub(crate) sha256: [u8; 32],
    /// The payloads, in order, as one buffer: the message, which an assembling decoder delivers
    /// as it is rather than copying the payloads together again. Valid UTF-8 (an SSE data line
    /// its parser validated and left unchanged): the decoder does not validate it again.
    pub(crate) message: Bytes,
}

/// What a [`Prehashed`] entry says of one payload.
#[derive(Clone, Debug)]
pub(super) struct Known {
    pub(super) crc: u32,
    /// The entry's first payload: a message may take the entry's digest and bytes from here on.
    pub(super) first: bool,
    /// The entry's last payload: the digest covers the message up to here.
    pub(super) last: bool,
    pub(super) sha256: [u8; 32],
    /// The entry's message (with its first payload; empty with the others).
    pub(super) message: Bytes,
    /// The payload: its slice of the entry's message.
    pub(super) payload: Bytes,
}

/// The entries not used up yet, in stream order, and the next payload of the first.
#[derive(Debug)]
pub(super) struct Prehashes {
    entries: VecDeque<Prehashed>,
    next: usize,
    /// Where the first entry's next payload starts in its message.
    next_in_message: usize,
    /// Where in the binary stream the first entry's next payload lies (`u64::MAX` without an
    /// entry): a payload before it is known to no entry, which is all a frame of a stream
    /// without entries (every mapping but the compatible one) costs.
    next_at: u64,
}

impl Default for Prehashes {
    fn default() -> Self {
        Self {
            entries: VecDeque::new(),
            next: 0,
            next_in_message: 0,
            next_at: u64::MAX,
        }
    }
}

impl Prehashes {
    #[cfg_attr(not(feature = "sse"), allow(dead_code))]
    pub(super) fn push(&mut self, entry: Prehashed) {
        if !entry.payloads.is_empty() {
            self.entries.push_back(entry);
            self.find_next();
        }
    }

    /// Whether a payload at `offset` in the frame bytes may be known to an entry.
    #[inline]
    pub(super) fn may_know(&self, offset: u64) -> bool {
        offset >= self.next_at
    }

    /// What is known of the payload of `len` bytes at `offset` in the frame bytes, if it is the
    /// next payload of the first entry (the payload itself included: it is not in the frame
    /// bytes); entries behind it (or that disagree with it) are dropped.
    pub(super) fn payload(&mut self, offset: u64, len: u32) -> Option<Box<Known>> {
        // Boxed: a decoder without prehashed payloads moves only a pointer's worth of `None`
        // through every frame, not the ~110 bytes of a `Known`.
        let known = self.lookup(offset, len).map(Box::new);
        self.find_next();
        known
    }

    fn find_next(&mut self) {
        self.next_at = self
            .entries
            .front()
            .and_then(|entry| entry.payloads.get(self.next))
            .map_or(u64::MAX, |&(at, _, _)| at);
    }

    fn lookup(&mut self, offset: u64, len: u32) -> Option<Known> {
        loop {
            let entry = self.entries.front()?;
            match entry.payloads.get(self.next) {
                Some(&(at, _, _)) if at > offset => return None,
                Some(&(at, expected, crc))
                    if at == offset
                        && expected == len
                        && entry.message.len() - self.next_in_message >= len as usize =>
                {
                    let start = self.next_in_message;
                    self.next += 1;
                    self.next_in_message += len as usize;
                    let known = Known {
                        crc,
                        first: self.next == 1,
                        last: self.next == entry.payloads.len(),
                        sha256: entry.sha256,
                        // Needed with the first payload only.
                        message: if self.next == 1 {
                            entry.message.clone()
                        } else {
                            Bytes::new()
                        },
                        payload: entry.message.slice(start..start + len as usize),
                    };
                    if known.last {
                        self.entries.pop_front();
                        self.next = 0;
                        self.next_in_message = 0;
                    }
                    return Some(known);
                }
                // Behind this payload, or of another length: of no use any more.
                _ => {
                    self.entries.pop_front();
                    self.next = 0;
                    self.next_in_message = 0;
                }
            }
        }
    }
}
