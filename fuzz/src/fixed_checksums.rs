//! `fixed_checksums`: mutated valid streams with repaired checksums, against the model.
//!
//! Input: one mode byte, one limits byte ([`Limits::from_byte`]), then a stream (the seeds are
//! valid streams; the fuzzer mutates them). Before decoding, [`repair`] recomputes every header
//! CRC and payload CRC, so that mutations get past the checksums and reach the sequence,
//! state-machine, length and splice logic. The mode byte adds more repairs:
//!
//! | bit | repair |
//! |---|---|
//! | 0 | each MESSAGE_END's length and SHA-256, from the DATA payloads since the previous one |
//! | 1 | sequence numbers: HEAD's from its attempt id, then each frame the previous plus one |
//! | 2 | each STREAM_END's message count, from the MESSAGE_END frames before it |
//!
//! Oracle: the decoder reports exactly what the independent [`model`](super::model) reads from
//! the repaired frames: the same events (so a clean end has exactly the messages the frames
//! say, none skipped or merged) and the same verdict.

use sha2::{Digest, Sha256};

use super::decode_chunked::one_shot;
use super::limits::Limits;
use super::model;

/// Repairs selected by the mode byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    /// Recompute MESSAGE_END lengths and digests.
    pub digests: bool,
    /// Recompute sequence numbers.
    pub sequences: bool,
    /// Recompute STREAM_END message counts.
    pub counts: bool,
}

impl Mode {
    /// Reads the mode byte (see the module docs).
    #[must_use]
    pub fn from_byte(byte: u8) -> Self {
        Self {
            digests: byte & 1 != 0,
            sequences: byte & 2 != 0,
            counts: byte & 4 != 0,
        }
    }
}

fn put32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_be_bytes());
}

/// Walks `stream` frame by frame (by each header's length field) and repairs it in place: every
/// header CRC, every complete payload's CRC, and what `mode` selects. A final frame whose payload
/// is cut short keeps its payload CRC; bytes after the last whole header are left alone.
pub fn repair(stream: &mut [u8], mode: Mode) {
    let mut pos = 0usize;
    let mut sequence: Option<u32> = None;
    let mut open = Sha256::new();
    let mut open_len = 0u64;
    let mut message_ends = 0u64;
    while stream.len() - pos >= 20 {
        let kind = stream[pos + 3];
        let len = u32::from_be_bytes(stream[pos + 8..pos + 12].try_into().expect("4 bytes"));
        let start = pos + 20;
        let end = start.saturating_add(len as usize);
        let complete = end <= stream.len();
        if mode.sequences {
            let own = u32::from_be_bytes(stream[pos + 4..pos + 8].try_into().expect("4 bytes"));
            let fixed = match sequence {
                Some(previous) => previous.wrapping_add(1),
                None if kind == 0x01 && complete && len == 32 => {
                    u32::from_be_bytes(stream[start + 16..start + 20].try_into().expect("4 bytes"))
                }
                None => own,
            };
            put32(stream, pos + 4, fixed);
            sequence = Some(fixed);
        }
        if complete {
            let payload = &mut stream[start..end];
            match kind {
                0x02 => {
                    open.update(&payload[..]);
                    open_len += payload.len() as u64;
                }
                0x03 => {
                    let digest = std::mem::take(&mut open).finalize();
                    if mode.digests && payload.len() == 40 {
                        payload[..8].copy_from_slice(&open_len.to_be_bytes());
                        payload[8..].copy_from_slice(&digest);
                    }
                    open_len = 0;
                    message_ends += 1;
                }
                0x04 if mode.counts && payload.len() == 8 => {
                    payload.copy_from_slice(&message_ends.to_be_bytes());
                }
                _ => {}
            }
            let crc = crc32fast::hash(payload);
            put32(stream, pos + 12, crc);
        }
        let crc = crc32fast::hash(&stream[pos..pos + 16]);
        put32(stream, pos + 16, crc);
        if !complete {
            break;
        }
        pos = end;
    }
}

/// Runs the oracle on one input; see the module docs.
///
/// # Panics
///
/// When the decoder and the model disagree.
pub fn run(data: &[u8]) {
    let [mode, config, stream @ ..] = data else {
        return;
    };
    let limits = Limits::from_byte(*config);
    let mut stream = stream.to_vec();
    repair(&mut stream, Mode::from_byte(*mode));
    let outcome = model::walk(&stream, &limits);
    let events = one_shot(&limits, &stream);
    model::assert_agrees(&outcome, &events, limits.assemble);
}
