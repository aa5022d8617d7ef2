//! The header checks of SPEC.md §2 "Header first", written once: every check in the spec's order,
//! each failure built out of line so that a header that passes costs only the comparisons.

use super::state::{Pending, Position};
use crate::error::DecodeError;
use crate::frame::{FrameHeader, FrameKind, HEADER_LEN, MAGIC, VERSION};
use crate::limits::Limits;

/// Distance within which a wrong sequence number counts as a gap or a replay (SPEC.md §4).
const SEQUENCE_WINDOW: u32 = 1 << 20;

/// What a header is checked against besides itself.
#[derive(Clone, Copy, Debug)]
pub(super) struct Expect<'a> {
    pub(super) limits: &'a Limits,
    /// The sequence number the frame must carry (not checked while awaiting HEAD).
    pub(super) sequence: u32,
    /// Bytes of the open message so far.
    pub(super) message_bytes: u64,
    /// Messages completed so far.
    pub(super) messages: u64,
    /// KEEPALIVE and ignorable frames since the last DATA or MESSAGE_END.
    pub(super) runs: Runs,
}

/// Frames in a row that carried no message byte, since the last DATA or MESSAGE_END (SPEC.md
/// §6.1).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Runs {
    pub(super) keepalives: u32,
    pub(super) ignorable: u32,
}

/// SPEC.md §2 "Header first": the header at stream `offset` (its `raw` bytes) parsed, its magic,
/// version and CRC checked, then everything [`check_header`] checks, before its payload is
/// awaited. The frame, waiting for its payload, or the first failing check's error.
#[inline(always)]
pub(super) fn checked_header(
    raw: &[u8; HEADER_LEN],
    at: &Position,
    expect: Expect<'_>,
    offset: u64,
) -> Result<Pending, DecodeError> {
    let header = match FrameHeader::parse(raw) {
        Ok(header) => header,
        Err(err) => return Err(DecodeError::from_header(err, offset)),
    };
    let kind = check_header(&header, at, expect, offset)?;
    Ok(Pending {
        header,
        kind,
        offset,
    })
}

/// Checks a header whose magic, version and CRC passed (SPEC.md §2 steps 3 to 6), before its
/// payload is awaited: kind, place in the stream (sequence number, then whether the kind may
/// appear there), length rule, frame limit, message limit, then the per-stream bounds. The first
/// failing check names the error.
#[inline(always)]
fn check_header(
    header: &FrameHeader,
    at: &Position,
    expect: Expect<'_>,
    offset: u64,
) -> Result<FrameKind, DecodeError> {
    // Step 3: the kind.
    let Some(kind) = FrameKind::from_byte(header.kind) else {
        return Err(cold(|| DecodeError::UnknownFrameKind {
            kind: header.kind,
            offset,
        }));
    };
    // Step 4: the place in the stream. SPEC.md §3: HEAD MUST be the first frame (its sequence
    // number is checked against the attempt id in its payload); every later frame carries the
    // previous sequence number plus one (§4); HEAD never comes again, STREAM_END not inside a
    // message.
    let allowed = match at {
        Position::AwaitingHead => kind == FrameKind::Head,
        Position::Streaming { message, .. } => {
            if header.sequence != expect.sequence {
                return Err(sequence_error(expect.sequence, header.sequence));
            }
            match kind {
                FrameKind::Head => false,
                FrameKind::StreamEnd => message.is_none(),
                _ => true,
            }
        }
    };
    if !allowed {
        return Err(cold(|| DecodeError::UnexpectedFrame {
            kind,
            state: at.stream_state(),
        }));
    }
    // Step 5: the kind's length rule, then the limits on the raw length field (SPEC.md §6),
    // before any reservation.
    if !kind.allows_len(header.len) {
        return Err(cold(|| DecodeError::InvalidFrameLength {
            kind,
            len: header.len,
        }));
    }
    if header.len > expect.limits.max_frame_payload {
        return Err(cold(|| DecodeError::FrameTooLarge {
            len: header.len,
            max: expect.limits.max_frame_payload,
        }));
    }
    if kind == FrameKind::Data {
        let len = expect.message_bytes + u64::from(header.len);
        if len > expect.limits.max_message_size {
            return Err(cold(|| DecodeError::MessageTooLarge {
                len,
                max: expect.limits.max_message_size,
            }));
        }
    }
    // Step 6: the per-stream bounds (SPEC.md §6.1): bytes, then what this kind adds to a count.
    let end = offset + (HEADER_LEN as u64 + u64::from(header.len));
    if end > expect.limits.max_stream_bytes {
        return Err(cold(|| DecodeError::StreamTooLarge {
            len: end,
            max: expect.limits.max_stream_bytes,
        }));
    }
    match kind {
        FrameKind::KeepAlive if expect.runs.keepalives >= expect.limits.max_keepalives_in_a_row => {
            Err(cold(|| DecodeError::TooManyKeepAlives {
                max: expect.limits.max_keepalives_in_a_row,
            }))
        }
        FrameKind::Ignorable(_)
            if expect.runs.ignorable >= expect.limits.max_ignorable_in_a_row =>
        {
            Err(cold(|| DecodeError::TooManyIgnorableFrames {
                max: expect.limits.max_ignorable_in_a_row,
            }))
        }
        FrameKind::MessageEnd if expect.messages >= expect.limits.max_messages => {
            Err(cold(|| DecodeError::TooManyMessages {
                max: expect.limits.max_messages,
            }))
        }
        _ => Ok(kind),
    }
}

/// Checks magic and version of a header whose 20 bytes have not all arrived (SPEC.md §2: the
/// magic as soon as 2 bytes are there, the version at the third), so that a short unframed body
/// (a JSON error, a proxy's HTML page) is rejected as such, not reported as a truncation.
pub(super) fn check_partial_header(buf: &[u8], offset: u64) -> Result<(), DecodeError> {
    if let [first, second, rest @ ..] = buf {
        if [*first, *second] != MAGIC {
            return Err(DecodeError::BadMagic {
                found: [*first, *second],
                offset,
            });
        }
        if let Some(&version) = rest.first() {
            if version != VERSION {
                return Err(DecodeError::UnsupportedVersion { version, offset });
            }
        }
    }
    Ok(())
}

/// Builds an error out of line: the checks above stay a few comparisons on the hot path, and each
/// error value is only constructed (in its own cold copy of this function) when a check fails.
#[cold]
#[inline(never)]
fn cold(build: impl FnOnce() -> DecodeError) -> DecodeError {
    build()
}

/// SPEC.md §4: the error for a frame that does not carry the expected sequence number, by the
/// distance `found - expected (mod 2^32)`.
#[cold]
#[inline(never)]
fn sequence_error(expected: u32, found: u32) -> DecodeError {
    let distance = found.wrapping_sub(expected);
    if distance <= SEQUENCE_WINDOW {
        DecodeError::SequenceGap { expected, found }
    } else if distance.wrapping_neg() <= SEQUENCE_WINDOW {
        DecodeError::SequenceReplay { expected, found }
    } else {
        DecodeError::ForeignFrame { expected, found }
    }
}
