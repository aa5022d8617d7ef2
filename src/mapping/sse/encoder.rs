//! The SSE mapping's encoder (SPEC.md §15): frame bytes in, `mcp-frame` events out.

use bytes::{BufMut, Bytes, BytesMut};

use super::base64::put_base64;
use crate::frame::{FrameHeader, HEADER_LEN};
use crate::mapping::FRAME_EVENT;

/// Encodes frame bytes as SSE `mcp-frame` events, one event per whole frame (SPEC.md §15).
///
/// # Examples
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::internals::sse::SseFrameEncoder;
/// use mcp_framing::{StreamEncoder, StreamHead};
///
/// let mut wire = BytesMut::new();
/// StreamEncoder::new(StreamHead::for_request(None)).open(&mut wire)?;
/// let body = SseFrameEncoder::new().to_events(&wire);
/// assert!(body.starts_with(b"event: mcp-frame\ndata: n00BA")); // 9f 4d 01 01 ...
/// assert!(body.ends_with(b"\n\n"));
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct SseFrameEncoder {
    _private: (),
}

/// Bytes an `mcp-frame` event adds around its base64 data: `event: mcp-frame\n` (17),
/// `data: ` (6) and the final `\n\n` (2).
pub(crate) const EVENT_OVERHEAD: usize = 25;

impl SseFrameEncoder {
    /// A new encoder.
    ///
    /// # Examples
    ///
    /// See [`SseFrameEncoder`].
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes the whole frames in `frames` as events into `dst`, one event per frame. A trailing
    /// partial frame (which an encoder never produces) is written as one last event.
    pub(crate) fn encode(&self, frames: &[u8], dst: &mut BytesMut) {
        // Room for every event at once: `dst` grown once, not by doubling event after event.
        let events: usize = WholeFrames(frames).map(|frame| event_len(frame.len())).sum();
        dst.reserve(events);
        WholeFrames(frames).for_each(|frame| self.encode_event(frame, dst));
    }

    /// Writes `bytes` (one or more whole frames) as a single event.
    pub(crate) fn encode_event(&self, bytes: &[u8], dst: &mut BytesMut) {
        dst.reserve(event_len(bytes.len()));
        dst.put_slice(b"event: ");
        dst.put_slice(FRAME_EVENT.as_bytes());
        dst.put_slice(b"\ndata: ");
        put_base64(bytes, dst);
        dst.put_slice(b"\n\n");
    }

    /// The events of the whole frames in `frames`, one event per frame (a trailing partial frame,
    /// which an encoder never produces, as one last event).
    ///
    /// # Examples
    ///
    /// ```
    /// let body = mcp_framing::internals::sse::SseFrameEncoder::new().to_events(&[]);
    /// assert!(body.is_empty());
    /// ```
    #[must_use]
    pub fn to_events(&self, frames: &[u8]) -> Bytes {
        let mut dst = BytesMut::new();
        self.encode(frames, &mut dst);
        dst.freeze()
    }
}

/// The bytes of the event [`SseFrameEncoder::encode_event`] writes for `len` bytes of frames: its
/// lines around their base64 text (padded, SPEC.md §15).
fn event_len(len: usize) -> usize {
    EVENT_OVERHEAD + len.div_ceil(3) * 4
}

/// The frames of a run of frame bytes, each as its header declares (a trailing partial frame
/// last, whole).
struct WholeFrames<'a>(&'a [u8]);

impl<'a> Iterator for WholeFrames<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.0.is_empty() {
            return None;
        }
        let len = match self.0.first_chunk::<HEADER_LEN>() {
            Some(header) => {
                let declared = FrameHeader::read(header).len as usize;
                HEADER_LEN.saturating_add(declared).min(self.0.len())
            }
            None => self.0.len(),
        };
        let (frame, rest) = self.0.split_at(len);
        self.0 = rest;
        Some(frame)
    }
}
