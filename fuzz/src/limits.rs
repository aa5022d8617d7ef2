//! Decoder configurations chosen by one input byte.

use mcp_framing::{
    RequestKey, StreamDecoder,
    internals::limits::{
        DEFAULT_MAX_FRAME_PAYLOAD, DEFAULT_MAX_MESSAGE_SIZE, MIN_MAX_FRAME_PAYLOAD,
    },
};

/// Frame limits a target can pick (bits 0..=1 of the limits byte): the smallest allowed, two
/// small ones and the default.
pub const FRAME_LIMITS: [u32; 4] = [MIN_MAX_FRAME_PAYLOAD, 1500, 4096, DEFAULT_MAX_FRAME_PAYLOAD];

/// Message limits a target can pick (bits 2..=4): tiny ones that the fuzzer's inputs can reach,
/// and the default.
pub const MESSAGE_LIMITS: [u64; 8] = [
    0,
    1,
    40,
    1000,
    4096,
    65_536,
    1 << 20,
    DEFAULT_MAX_MESSAGE_SIZE,
];

/// The request key a decoder expects when bit 6 is set: the key of SPEC.md §13.
pub const EXPECTED_KEY: [u8; 16] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
];

/// The limits byte of a default decoder: 64 KiB frames, 16 MiB messages, assembling, no key.
pub const DEFAULT_LIMITS_BYTE: u8 = 0b0001_1111;

/// A decoder configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest frame payload.
    pub max_frame_payload: u32,
    /// Largest message.
    pub max_message_size: u64,
    /// Whether the decoder assembles messages (`Event::Message`) or only verifies them.
    pub assemble: bool,
    /// The request key the decoder requires, if any.
    pub request_key: Option<RequestKey>,
}

impl Limits {
    /// Reads a configuration from one byte: bits 0..=1 frame limit, 2..=4 message limit, bit 5
    /// set: do not assemble, bit 6 set: expect [`EXPECTED_KEY`]. Bit 7 is left to the target.
    #[must_use]
    pub fn from_byte(byte: u8) -> Self {
        Self {
            max_frame_payload: FRAME_LIMITS[usize::from(byte & 0b11)],
            max_message_size: MESSAGE_LIMITS[usize::from((byte >> 2) & 0b111)],
            assemble: byte & 0b0010_0000 == 0,
            request_key: (byte & 0b0100_0000 != 0).then(|| RequestKey::from_bytes(EXPECTED_KEY)),
        }
    }

    /// A fresh decoder with this configuration.
    #[must_use]
    pub fn decoder(&self) -> StreamDecoder {
        let builder = StreamDecoder::builder()
            .max_frame_payload(self.max_frame_payload)
            .max_message_size(self.max_message_size)
            .assemble_messages(self.assemble);
        match self.request_key {
            Some(key) => builder.expect_request_key(key).build(),
            None => builder.build(),
        }
    }
}
