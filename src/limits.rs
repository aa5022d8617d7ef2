//! Every bound of the format and every configurable limit, with the reason for its value
//! (SPEC.md §3, §6, §15, §18).
//!
//! Two kinds of numbers live here:
//!
//! - **bounds the format fixes**: the longest ABORT reason ([`MAX_ABORT_REASON_LEN`]) and, derived
//!   from the control frames' payload layouts, the smallest frame limit a receiver may configure
//!   ([`MIN_MAX_FRAME_PAYLOAD`]);
//! - **defaults of receiver and sender configuration**: [`Limits`] holds a receiver's limits (the
//!   decoder's, and a client's before negotiation, SPEC.md §11.3); the sender's frame size and
//!   the SSE event bounds (of both SSE mappings) have their own defaults.
//!
//! The decoder ([`DecoderBuilder`](crate::DecoderBuilder)), the encoder
//! ([`EncoderBuilder`](crate::EncoderBuilder)) and the client policy
//! (the contract's negotiation) all take their limits from here, so a default or a
//! check is written once.
//!
//! ```
//! use mcp_framing::{Limits, StreamDecoder};
//!
//! let limits = Limits::default().max_frame_payload(16 * 1024).max_message_size(4 << 20);
//! let decoder = StreamDecoder::builder().limits(limits).build();
//! assert_eq!(decoder.limits().max_frame_payload, 16 * 1024);
//! ```

// The ABORT bounds are written beside the ABORT payload (src/frame/abort.rs) and shown here: the
// frame files import nothing from this file, so the numbers sit on top of the frames, not in a
// circle with them.
use crate::frame::{
    HEAD_PAYLOAD_LEN, MAX_ABORT_PAYLOAD_LEN, MESSAGE_END_PAYLOAD_LEN, STREAM_END_PAYLOAD_LEN,
};
pub use crate::frame::MAX_ABORT_REASON_LEN;

/// Smallest frame limit a receiver can be configured with (SPEC.md §6): the payload of the
/// longest control frame (today the longest ABORT, 1026 bytes), so that every control frame fits
/// and `FrameTooLarge` only ever concerns DATA and ignorable frames.
pub const MIN_MAX_FRAME_PAYLOAD: u32 = max_u32(
    max_u32(HEAD_PAYLOAD_LEN, MESSAGE_END_PAYLOAD_LEN),
    max_u32(STREAM_END_PAYLOAD_LEN, MAX_ABORT_PAYLOAD_LEN),
);

/// Default maximum frame payload a receiver accepts: 64 KiB (SPEC.md §6).
///
/// Four times the default sender frame size ([`DEFAULT_FRAME_SIZE`]), while it bounds the read
/// buffer to about 64 KiB per stream; larger frames do not verify faster, since CRC-32 and
/// SHA-256 reach their full speed from about 1 KiB.
pub const DEFAULT_MAX_FRAME_PAYLOAD: u32 = 64 * 1024;

/// Default maximum message size, for the encoder and the decoder: 16 MiB (SPEC.md §6).
///
/// Room for MCP tool results with embedded images; a deployment expecting larger messages raises
/// it on both sides.
pub const DEFAULT_MAX_MESSAGE_SIZE: u64 = 16 * 1024 * 1024;

/// Default payload size of the DATA frames an encoder cuts a large chunk into: 16 KiB, a quarter
/// of the receiver's default limit (SPEC.md §6).
///
/// Small enough for any receiver configured down to 16 KiB, large enough that CRC-32 and SHA-256
/// run at full speed.
pub const DEFAULT_FRAME_SIZE: usize = 16 * 1024;

/// Default bound on the bytes of one stream: 16 GiB (SPEC.md §6.1).
///
/// 1,024 messages of the default maximum size, far more than any MCP response carries, and more
/// than the largest frame a receiver can be configured for (4 GiB), so it never overrides a frame
/// limit; a peer that sends more is streaming without end. It bounds the CPU time a peer can make
/// one stream cost (every byte is checksummed), not memory, which the frame and message limits
/// bound.
pub(crate) const DEFAULT_MAX_STREAM_BYTES: u64 = 16 << 30;

/// Default bound on the messages of one stream: 65,536 (SPEC.md §6.1).
///
/// A response stream carries the notifications of one request and its response: even a chatty
/// tool that reports progress for every step stays far below. A consumer that keeps every message
/// (`decode_all`) keeps at most this many.
pub(crate) const DEFAULT_MAX_MESSAGES: u64 = 1 << 16;

/// Default bound on KEEPALIVE frames in a row, with no DATA or MESSAGE_END between them: 4,096
/// (SPEC.md §6.1).
///
/// Servers send a keep-alive while they have nothing else to send, typically every 15 to 30
/// seconds: 4,096 in a row is more than 17 hours of silence at 15 seconds. Only a peer that
/// holds the stream open for nothing reaches it; an idle timeout between frames bounds the time
/// of each.
pub(crate) const DEFAULT_MAX_KEEPALIVES_IN_A_ROW: u32 = 4096;

/// Default bound on ignorable frames (kinds `0x80..=0xFF`) in a row, with no DATA or MESSAGE_END
/// between them: 1,024 (SPEC.md §6.1).
///
/// Version 1 senders send none (SPEC.md §3); an extension that adds some sends a few per
/// message. A run of a thousand frames that all get skipped is a peer spinning.
pub(crate) const DEFAULT_MAX_IGNORABLE_IN_A_ROW: u32 = 1024;

/// Default bound on SSE lines in a row that carry no data (`:` comments, blank lines, fields of
/// events without data): 4,096 (SPEC.md §15).
///
/// The SSE counterpart of [`DEFAULT_MAX_KEEPALIVES_IN_A_ROW`]: keep-alive comments come every 15
/// to 30 seconds; lines that carry nothing never reach the frame decoder, so its bounds cannot
/// see them.
pub(crate) const DEFAULT_MAX_SSE_COMMENTS_IN_A_ROW: u32 = 4096;

/// Default limit on one SSE event's `data` (base64 text, all `data` lines together): 256 KiB
/// (SPEC.md §15).
///
/// A frame of the default maximum payload ([`DEFAULT_MAX_FRAME_PAYLOAD`]) is about 87 KiB of
/// base64, so the default admits every frame a default sender emits, with room for a few frames
/// per event. The limit bounds the memory a peer can make us buffer before an event ends.
pub const DEFAULT_MAX_EVENT_DATA: usize = 256 * 1024;

/// The bound on one SSE event's data for a receiver whose frame limit is `max_frame_payload`
/// (SPEC.md §15): the base64 of one whole frame of that payload (header included), and never
/// less than [`DEFAULT_MAX_EVENT_DATA`]. Deriving it from the frame limit in force means that a
/// receiver configured for larger frames accepts the events that carry them, and that the bound
/// stays within about 4/3 of the frame limit (plus the default) of memory.
#[cfg(feature = "sse")]
#[must_use]
pub(crate) fn event_data_limit(max_frame_payload: u32) -> usize {
    let frame = crate::frame::HEADER_LEN as u64 + u64::from(max_frame_payload);
    let base64 = frame.div_ceil(3) * 4;
    usize::try_from(base64)
        .unwrap_or(usize::MAX)
        .max(DEFAULT_MAX_EVENT_DATA)
}

/// Room above the message limit in the compatible mapping's event bound: the `data: ` prefixes
/// and LFs of a message sent over many lines (SPEC.md §18.7).
const COMPAT_EVENT_SLACK: usize = 64 * 1024;

/// Default limit on one event's data (and on one line) in the compatible SSE mapping: 16 MiB +
/// 64 KiB (SPEC.md §18.7).
///
/// An event there carries a whole message, unencoded, so the bound must admit the largest
/// message a receiver accepts ([`DEFAULT_MAX_MESSAGE_SIZE`]), plus room for the `data: ` prefixes
/// of a message sent over several lines. It bounds what a peer can make a receiver buffer before
/// an event or a line ends.
pub const DEFAULT_MAX_COMPAT_EVENT_DATA: usize =
    DEFAULT_MAX_MESSAGE_SIZE as usize + COMPAT_EVENT_SLACK;

/// The bound on one event's data in the compatible SSE mapping for a receiver whose message
/// limit is `max_message_size` (SPEC.md §18.7): one message plus 64 KiB. Deriving it from the
/// limit in force means that a receiver configured for larger messages accepts the events that
/// carry them.
#[cfg(feature = "sse")]
#[must_use]
pub(crate) fn compat_event_data_limit(max_message_size: u64) -> usize {
    usize::try_from(max_message_size)
        .unwrap_or(usize::MAX)
        .saturating_add(COMPAT_EVENT_SLACK)
}

/// The setters of the [`Limits`] fields that need no check beyond their type: one each, with a
/// doc example that sets `$example`.
macro_rules! bound_setters {
    ($($(#[$doc:meta])* $field:ident: $ty:ty = $example:expr;)*) => {$(
        $(#[$doc])*
        ///
        /// # Examples
        ///
        /// ```
        #[doc = concat!("let limits = mcp_framing::Limits::default().", stringify!($field), "(", stringify!($example), ");")]
        /// assert_ne!(limits, mcp_framing::Limits::default());
        /// ```
        #[must_use]
        pub fn $field(mut self, max: $ty) -> Self {
            self.$field = max;
            self
        }
    )*};
}

const fn max_u32(a: u32, b: u32) -> u32 {
    if a > b { a } else { b }
}

/// A receiver's limits (SPEC.md §6), checked on every frame header before its payload is awaited.
///
/// Build one from [`Limits::default`] with the setters (which check what they are given): each
/// setter's documentation names the default and the reason for it.
///
/// # Examples
///
/// ```
/// use mcp_framing::{DecodeError, Limits, StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = bytes::BytesMut::new();
/// enc.message(&[b'x'; 100], &mut wire)?;
/// enc.end(&mut wire)?;
///
/// let limits = Limits::default().max_message_size(64);
/// let err = StreamDecoder::builder().limits(limits).build().decode_all(&wire).unwrap_err();
/// assert_eq!(err, DecodeError::MessageTooLarge { len: 100, max: 64 });
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Limits {
    /// Largest frame payload accepted, checked on the raw header field before any byte of the
    /// payload is awaited or reserved. Default [`DEFAULT_MAX_FRAME_PAYLOAD`]; at least
    /// [`MIN_MAX_FRAME_PAYLOAD`].
    #[doc(hidden)] // set with the setter below, which carries this text; read by the fuzz oracles
    pub max_frame_payload: u32,
    /// Largest message accepted, checked at every DATA header before its payload arrives.
    /// Default [`DEFAULT_MAX_MESSAGE_SIZE`].
    #[doc(hidden)] // set with the setter below, which carries this text; read by the fuzz oracles
    pub max_message_size: u64,
    /// Most bytes one stream may carry, checked at every header on the end of its frame
    /// (`StreamTooLarge`). Default 16 GiB (SPEC.md §6.1).
    #[doc(hidden)] // set with the setter below, which carries this text; read by the fuzz oracles
    pub max_stream_bytes: u64,
    /// Most messages one stream may carry, checked at every MESSAGE_END header
    /// (`TooManyMessages`). Default 65,536 (SPEC.md §6.1).
    #[doc(hidden)] // set with the setter below, which carries this text; read by the fuzz oracles
    pub max_messages: u64,
    /// Most KEEPALIVE frames in a row, checked at every KEEPALIVE header (`TooManyKeepAlives`).
    /// Default 4,096 (SPEC.md §6.1).
    #[doc(hidden)] // set with the setter below, which carries this text; read by the fuzz oracles
    pub max_keepalives_in_a_row: u32,
    /// Most ignorable frames in a row, checked at every ignorable header
    /// (`TooManyIgnorableFrames`). Default 1,024 (SPEC.md §6.1).
    #[doc(hidden)] // set with the setter below, which carries this text; read by the fuzz oracles
    pub max_ignorable_in_a_row: u32,
    /// Most SSE lines in a row that carry no data, in the SSE mapping (`TooManyComments`).
    /// Default 4,096 (SPEC.md §15).
    #[doc(hidden)] // set with the setter below, which carries this text; read by the fuzz oracles
    pub max_sse_comments_in_a_row: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Limits {
    /// The defaults of SPEC.md §6 (also [`Limits::default`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::Limits;
    /// assert_eq!(Limits::default().max_frame_payload, 64 * 1024);
    /// assert_eq!(Limits::default(), Limits::default());
    /// ```
    // Hidden: the same as `Limits::default()`, the one documented name, for `const` contexts in
    // the crate, the tests and the fuzz targets.
    #[doc(hidden)]
    pub const DEFAULT: Self = Self {
        max_frame_payload: DEFAULT_MAX_FRAME_PAYLOAD,
        max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
        max_stream_bytes: DEFAULT_MAX_STREAM_BYTES,
        max_messages: DEFAULT_MAX_MESSAGES,
        max_keepalives_in_a_row: DEFAULT_MAX_KEEPALIVES_IN_A_ROW,
        max_ignorable_in_a_row: DEFAULT_MAX_IGNORABLE_IN_A_ROW,
        max_sse_comments_in_a_row: DEFAULT_MAX_SSE_COMMENTS_IN_A_ROW,
    };

    /// Largest frame payload accepted, checked on the raw header field before any byte of the
    /// payload is awaited or reserved. Default [`DEFAULT_MAX_FRAME_PAYLOAD`]; at least
    /// [`MIN_MAX_FRAME_PAYLOAD`].
    ///
    /// # Panics
    ///
    /// If `max` is below [`MIN_MAX_FRAME_PAYLOAD`] (the largest control frame).
    ///
    /// # Examples
    ///
    /// ```
    /// let limits = mcp_framing::Limits::default().max_frame_payload(1 << 20);
    /// assert_ne!(limits, mcp_framing::Limits::default());
    /// ```
    #[must_use]
    pub fn max_frame_payload(mut self, max: u32) -> Self {
        self.max_frame_payload = max;
        self.checked()
    }

    bound_setters! {
        /// Largest message accepted, checked at every DATA header before its payload arrives.
        /// Default [`DEFAULT_MAX_MESSAGE_SIZE`].
        max_message_size: u64 = 1 << 20;
        /// Most bytes one stream may carry, checked at every header on the end of its frame
        /// (`StreamTooLarge`). Default 16 GiB (SPEC.md §6.1).
        max_stream_bytes: u64 = 1 << 30;
        /// Most messages one stream may carry, checked at every MESSAGE_END header
        /// (`TooManyMessages`). Default 65,536 (SPEC.md §6.1).
        max_messages: u64 = 100;
        /// Most KEEPALIVE frames in a row, checked at every KEEPALIVE header (`TooManyKeepAlives`).
        /// Default 4,096 (SPEC.md §6.1).
        max_keepalives_in_a_row: u32 = 10;
        /// Most ignorable frames in a row, checked at every ignorable header
        /// (`TooManyIgnorableFrames`). Default 1,024 (SPEC.md §6.1).
        max_ignorable_in_a_row: u32 = 0;
        /// Most SSE lines in a row that carry no data, in the SSE mapping (`TooManyComments`).
        /// Default 4,096 (SPEC.md §15).
        max_sse_comments_in_a_row: u32 = 100;
    }

    /// Checks every field against the format's bounds; the one place these checks are written.
    ///
    /// # Panics
    ///
    /// If the frame payload limit is below [`MIN_MAX_FRAME_PAYLOAD`].
    ///
    /// # Examples
    ///
    /// ```
    /// let limits = mcp_framing::Limits::default().checked();
    /// assert_eq!(limits, mcp_framing::Limits::default());
    /// ```
    // Hidden: the setters and the builders that take a `Limits` check it; the one place the checks are written.
    #[doc(hidden)]
    #[must_use]
    #[track_caller]
    pub fn checked(self) -> Self {
        assert!(
            self.max_frame_payload >= MIN_MAX_FRAME_PAYLOAD,
            "max frame payload must be at least {MIN_MAX_FRAME_PAYLOAD}"
        );
        self
    }
}

/// The setters of a builder that holds a [`Limits`] in the field `$field`: `limits`,
/// `max_frame_payload` and `max_message_size`, written once for the decoder's and the client
/// policy's builders (each delegates to [`Limits`], where the defaults, reasons and checks are).
/// `$example` is an expression that makes such a builder, for the doc examples.
macro_rules! limit_setters {
    ($field:ident, $example:literal) => {
        /// The receiver's limits, all at once (default `Limits::default()`).
        ///
        /// # Panics
        ///
        /// If the limits break the format's bounds (see
        /// [`Limits::checked`](crate::limits::Limits::checked)).
        ///
        /// # Examples
        ///
        /// ```
        #[doc = concat!("let b = ", $example, ".limits(mcp_framing::Limits::default().max_message_size(1 << 20));")]
        /// # let _ = b;
        /// ```
        #[must_use]
        pub fn limits(mut self, limits: crate::limits::Limits) -> Self {
            self.$field = limits.checked();
            self
        }

        /// Sets [`Limits::max_frame_payload`](crate::limits::Limits::max_frame_payload) (default and
        /// reason written there).
        ///
        /// # Panics
        ///
        /// If `max` is below [`MIN_MAX_FRAME_PAYLOAD`](crate::limits::MIN_MAX_FRAME_PAYLOAD).
        ///
        /// # Examples
        ///
        /// ```
        #[doc = concat!("let b = ", $example, ".max_frame_payload(1 << 20);")]
        /// # let _ = b;
        /// ```
        // Hidden: the same as `.limits(Limits::default().max_frame_payload(max))`, the one documented way; the
        // tests and the layers use the shortcut.
        #[doc(hidden)]
        #[must_use]
        pub fn max_frame_payload(mut self, max: u32) -> Self {
            self.$field = self.$field.max_frame_payload(max);
            self
        }

        /// Sets [`Limits::max_message_size`](crate::limits::Limits::max_message_size) (default and
        /// reason written there).
        ///
        /// # Examples
        ///
        /// ```
        #[doc = concat!("let b = ", $example, ".max_message_size(4 << 20);")]
        /// # let _ = b;
        /// ```
        // Hidden: the same as `.limits(Limits::default().max_message_size(max))`, the one documented way; the
        // tests and the layers use the shortcut.
        #[doc(hidden)]
        #[must_use]
        pub fn max_message_size(mut self, max: u64) -> Self {
            self.$field = self.$field.max_message_size(max);
            self
        }
    };
}
pub(crate) use limit_setters;

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "sse")]
    #[test]
    fn an_sse_event_holds_one_whole_frame_in_base64_and_never_less_than_the_default() {
        assert_eq!(
            event_data_limit(DEFAULT_MAX_FRAME_PAYLOAD),
            DEFAULT_MAX_EVENT_DATA
        );
        // A frame of 1 MiB is 1,398,128 bytes of base64 (20 header bytes included).
        assert_eq!(event_data_limit(1 << 20), 1_398_128);
        assert_eq!(event_data_limit(1026), DEFAULT_MAX_EVENT_DATA);
    }

    #[cfg(feature = "sse")]
    #[test]
    fn a_compatible_event_holds_one_message_and_64_kib() {
        assert_eq!(
            compat_event_data_limit(DEFAULT_MAX_MESSAGE_SIZE),
            DEFAULT_MAX_COMPAT_EVENT_DATA
        );
        assert_eq!(compat_event_data_limit(1 << 20), (1 << 20) + 65_536);
        assert_eq!(compat_event_data_limit(u64::MAX), usize::MAX);
    }

    #[test]
    fn the_minimum_frame_limit_is_the_longest_control_frame() {
        assert_eq!(MIN_MAX_FRAME_PAYLOAD, 1026);
    }

    #[test]
    fn the_per_stream_defaults_are_the_values_the_setters_document() {
        let limits = Limits::DEFAULT;
        assert_eq!(limits.max_stream_bytes, 16 << 30);
        assert_eq!(limits.max_messages, 65_536);
        assert_eq!(limits.max_keepalives_in_a_row, 4_096);
        assert_eq!(limits.max_ignorable_in_a_row, 1_024);
        assert_eq!(limits.max_sse_comments_in_a_row, 4_096);
    }
}
