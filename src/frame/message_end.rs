//! The MESSAGE_END frame (SPEC.md §3, §5): a message's length and SHA-256.

use bytes::BytesMut;

use super::header::write_frame;
use super::kind::{FrameKind, PayloadError};
use super::layout::MESSAGE_END_PAYLOAD_LEN;

/// The payload of a MESSAGE_END frame: what the message's DATA bytes must add up to.
///
/// The receiver checks the length first (`LengthMismatch`), then the digest (`DigestMismatch`);
/// only then is the message complete (SPEC.md §3).
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::frame::{FrameHeader, HEADER_LEN, MessageEnd};
/// use mcp_framing::{FrameKind, StreamEncoder, StreamHead};
/// use sha2::Digest;
///
/// let mut wire = bytes::BytesMut::new();
/// StreamEncoder::new(StreamHead::for_request(None)).message(br#"{"ok":true}"#, &mut wire)?;
/// // The MESSAGE_END of `{"ok":true}` ends the frames: the header, the length, the SHA-256.
/// let frame = &wire[wire.len() - (20 + 8 + 32)..];
/// let header = FrameHeader::read(frame[..HEADER_LEN].try_into().unwrap());
/// assert_eq!(FrameKind::from_byte(header.kind), Some(FrameKind::MessageEnd));
/// let end = MessageEnd { len: 11, sha256: sha2::Sha256::digest(br#"{"ok":true}"#).into() };
/// assert_eq!(MessageEnd::load(&frame[HEADER_LEN..]), Ok(end));
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MessageEnd {
    /// Length of the message in bytes.
    pub len: u64,
    /// SHA-256 of the message (its DATA payloads concatenated).
    pub sha256: [u8; 32],
}

impl MessageEnd {
    /// Reads a MESSAGE_END payload.
    ///
    /// # Errors
    ///
    /// [`PayloadError::InvalidLength`] unless the payload is 40 bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::internals::frame::{MessageEnd, PayloadError};
    /// assert!(matches!(MessageEnd::load(&[0; 8]), Err(PayloadError::InvalidLength { .. })));
    /// ```
    #[inline]
    pub fn load(payload: &[u8]) -> Result<Self, PayloadError> {
        let Ok(payload) = <&[u8; MESSAGE_END_PAYLOAD_LEN as usize]>::try_from(payload) else {
            return Err(PayloadError::invalid_length(FrameKind::MessageEnd, payload));
        };
        let (len, sha256) = payload.split_at(8);
        Ok(Self {
            len: u64::from_be_bytes(len.try_into().expect("8 bytes")),
            sha256: sha256.try_into().expect("32 bytes"),
        })
    }

    /// Writes this MESSAGE_END frame (header and payload) into `dst` with sequence number
    /// `sequence`.
    #[inline]
    pub(crate) fn encode(&self, sequence: u32, dst: &mut BytesMut) {
        let mut payload = [0u8; MESSAGE_END_PAYLOAD_LEN as usize];
        payload[..8].copy_from_slice(&self.len.to_be_bytes());
        payload[8..].copy_from_slice(&self.sha256);
        write_frame(FrameKind::MessageEnd, sequence, &payload, dst);
    }
}
