//! The STREAM_END frame (SPEC.md §3): the sentinel, with the stream's message count.

use bytes::BytesMut;

use super::header::write_frame;
use super::kind::{FrameKind, PayloadError};

/// The payload of a STREAM_END frame: how many messages (MESSAGE_END frames) the stream carried.
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::frame::StreamEnd;
/// use mcp_framing::{StreamEncoder, StreamHead};
///
/// let mut wire = bytes::BytesMut::new();
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// enc.message(b"{}", &mut wire)?;
/// enc.end(&mut wire)?;
/// // The sentinel ends the stream: its payload is the message count.
/// let payload = &wire[wire.len() - 8..];
/// assert_eq!(payload, &[0, 0, 0, 0, 0, 0, 0, 1]);
/// assert_eq!(StreamEnd::load(payload), Ok(StreamEnd { messages: 1 }));
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamEnd {
    /// Messages in the stream; the receiver checks it against the messages it verified
    /// (`MessageCountMismatch`).
    pub messages: u64,
}

impl StreamEnd {
    /// Reads a STREAM_END payload.
    ///
    /// # Errors
    ///
    /// [`PayloadError::InvalidLength`] unless the payload is 8 bytes (`STREAM_END_PAYLOAD_LEN`).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::internals::frame::{PayloadError, StreamEnd};
    /// assert!(matches!(StreamEnd::load(&[0; 4]), Err(PayloadError::InvalidLength { .. })));
    /// ```
    pub fn load(payload: &[u8]) -> Result<Self, PayloadError> {
        let count: [u8; 8] = payload
            .try_into()
            .map_err(|_| PayloadError::invalid_length(FrameKind::StreamEnd, payload))?;
        Ok(Self {
            messages: u64::from_be_bytes(count),
        })
    }

    /// Writes this STREAM_END frame (header and payload) into `dst` with sequence number
    /// `sequence`.
    pub(crate) fn encode(&self, sequence: u32, dst: &mut BytesMut) {
        write_frame(
            FrameKind::StreamEnd,
            sequence,
            &self.messages.to_be_bytes(),
            dst,
        );
    }
}
