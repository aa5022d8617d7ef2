//! The HEAD frame (SPEC.md §3): the request key echo and the attempt id.

use bytes::BytesMut;

use super::header::write_frame;
use super::kind::{FrameKind, PayloadError};
use super::layout::HEAD_PAYLOAD_LEN;
use crate::ids::{AttemptId, NO_KEY, RequestKey};

/// The metadata of a stream's HEAD frame (SPEC.md §3).
///
/// # Examples
///
/// ```
/// use mcp_framing::{RequestKey, StreamHead};
///
/// let key = RequestKey::random();
/// let head = StreamHead::for_request(Some(key)); // draws a random attempt id
/// assert_eq!(head.request_key, Some(key));
/// assert_ne!(head.attempt_id, StreamHead::for_request(Some(key)).attempt_id); // one id per attempt
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamHead {
    /// The client's request key echoed by the server; `None` when the request carried none.
    pub request_key: Option<RequestKey>,
    /// The server's random id for this response attempt.
    pub attempt_id: AttemptId,
}

impl StreamHead {
    /// A head for a new response to a request with the given key, with a fresh random attempt id.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::StreamHead;
    /// let a = StreamHead::for_request(None);
    /// let b = StreamHead::for_request(None);
    /// assert_ne!(a.attempt_id, b.attempt_id);
    /// ```
    #[must_use]
    pub fn for_request(request_key: Option<RequestKey>) -> Self {
        Self {
            request_key,
            attempt_id: AttemptId::random(),
        }
    }

    /// The sequence number of the HEAD frame (SPEC.md §4).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{AttemptId, StreamHead};
    /// let head = StreamHead { request_key: None, attempt_id: AttemptId::from_bytes([0xff; 16]) };
    /// assert_eq!(head.initial_sequence(), u32::MAX);
    /// ```
    // Hidden: the same as `AttemptId::initial_sequence` of `attempt_id`, for the fuzz model.
    #[doc(hidden)]
    #[must_use]
    pub const fn initial_sequence(&self) -> u32 {
        self.attempt_id.initial_sequence()
    }

    /// Reads a HEAD payload: the request key (16 zero bytes: none) and the attempt id.
    ///
    /// The stream rules (HEAD's sequence number is its attempt id's first four bytes, SPEC.md §4;
    /// the key a client expects, §10) are the decoder's, not checked here.
    ///
    /// # Errors
    ///
    /// [`PayloadError::InvalidLength`] unless the payload is [`HEAD_PAYLOAD_LEN`] bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::internals::frame::PayloadError;
    /// use mcp_framing::{RequestKey, StreamHead};
    ///
    /// let head = StreamHead::for_request(Some(RequestKey::random()));
    /// let mut frame = bytes::BytesMut::new();
    /// head.encode(&mut frame);
    /// assert_eq!(StreamHead::load(&frame[20..]), Ok(head));
    /// assert!(matches!(StreamHead::load(&frame[20..30]), Err(PayloadError::InvalidLength { .. })));
    /// ```
    // Hidden: frame-level parsing (SPEC.md §5), for the CLI and the fuzz targets; the decoder yields `Event::Opened`.
    #[doc(hidden)]
    pub fn load(payload: &[u8]) -> Result<Self, PayloadError> {
        let payload: &[u8; HEAD_PAYLOAD_LEN as usize] = payload
            .try_into()
            .map_err(|_| PayloadError::invalid_length(FrameKind::Head, payload))?;
        let (key, attempt) = payload.split_at(16);
        let key: [u8; 16] = key.try_into().expect("16 bytes");
        Ok(Self {
            // 16 zero bytes: the request carried no key (SPEC.md §3); never a key itself.
            request_key: RequestKey::try_from(key).ok(),
            attempt_id: AttemptId::from_bytes(attempt.try_into().expect("16 bytes")),
        })
    }

    /// Writes the HEAD frame of this stream (header and payload) into `dst`; its sequence number
    /// is [`initial_sequence`](Self::initial_sequence) (SPEC.md §3, §4).
    ///
    /// # Examples
    ///
    /// See [`load`](Self::load).
    // Hidden: frame-level writing, for the CLI and the fuzz targets; encoders write HEAD themselves.
    #[doc(hidden)]
    pub fn encode(&self, dst: &mut BytesMut) {
        let mut payload = [0u8; HEAD_PAYLOAD_LEN as usize];
        // 16 zero bytes: the request carried no key (SPEC.md §3).
        let key = self.request_key.map_or(NO_KEY, |key| *key.as_bytes());
        payload[..16].copy_from_slice(&key);
        payload[16..].copy_from_slice(self.attempt_id.as_bytes());
        write_frame(FrameKind::Head, self.initial_sequence(), &payload, dst);
    }
}
