//! The fixed numbers of the frame layout (SPEC.md §2, §3): the magic, the version, the header's
//! length and each control payload's. They sit below every other frame file (which import them)
//! and import nothing, so the frame files form no import circle.

/// The two magic bytes that start every frame (SPEC.md §2).
///
/// `0x9F` can never start UTF-8 text, so unframed JSON or SSE text is rejected at byte 0.
pub const MAGIC: [u8; 2] = [0x9F, 0x4D];

/// The format version this crate implements (SPEC.md §8): the version byte of every header, and
/// the one version in the contract's `versions` and the `Mcp-Framing` header.
pub const VERSION: u8 = 1;

/// Length of every frame header in bytes (SPEC.md §2).
pub const HEADER_LEN: usize = 20;

/// Payload length of a HEAD frame (SPEC.md §3): request key (16 bytes), attempt id (16 bytes).
pub(crate) const HEAD_PAYLOAD_LEN: u32 = 32;

/// Payload length of a MESSAGE_END frame (SPEC.md §3): length (u64), SHA-256 (32 bytes).
pub(crate) const MESSAGE_END_PAYLOAD_LEN: u32 = 40;

/// Payload length of a STREAM_END frame (SPEC.md §3): the message count (u64).
pub(crate) const STREAM_END_PAYLOAD_LEN: u32 = 8;

/// Shortest ABORT payload: the reason code alone (SPEC.md §3).
pub(crate) const ABORT_MIN_PAYLOAD_LEN: u32 = 2;

/// Longest reason text an ABORT frame may carry, in bytes (SPEC.md §3).
///
/// Enough for an error message and a little context; short enough that the longest control frame
/// (and with it [`MIN_MAX_FRAME_PAYLOAD`](crate::limits::MIN_MAX_FRAME_PAYLOAD)) stays small.
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::frame::MAX_ABORT_REASON_LEN;
///
/// assert_eq!(MAX_ABORT_REASON_LEN, 1024);
/// ```
pub const MAX_ABORT_REASON_LEN: usize = 1024;

/// Longest ABORT payload: the reason code (2 bytes) and the longest reason (SPEC.md §3).
pub(crate) const MAX_ABORT_PAYLOAD_LEN: u32 = 2 + MAX_ABORT_REASON_LEN as u32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_abort_payload_is_the_reason_code_and_the_longest_reason() {
        assert_eq!(MAX_ABORT_PAYLOAD_LEN, 1026);
        assert_eq!(MAX_ABORT_PAYLOAD_LEN as usize, 2 + MAX_ABORT_REASON_LEN);
    }

    #[test]
    fn the_head_and_message_end_payloads_have_their_fixed_lengths() {
        assert_eq!(HEAD_PAYLOAD_LEN, 16 + 16); // the request key, the attempt id
        assert_eq!(MESSAGE_END_PAYLOAD_LEN, 8 + 32); // the length, the SHA-256
    }
}
