//! `sse_decode`: the SSE mapping (SPEC.md §15) from arbitrary bytes, in any chunking.
//!
//! Input: one mode byte, one byte `n`, `n` schedule bytes (piece sizes as in
//! [`ScheduledReader`](super::reader::ScheduledReader): bits 0..=6, `0x7f` for all; bit 7 is
//! ignored here), then the body. Mode bits 0..=1 pick the parser's event size limit (64 bytes,
//! 1 KiB, 4 KiB, the default 256 KiB); bit 2 set reads the body as frame bytes to be carried in
//! SSE instead of as SSE text.
//!
//! Oracle, for SSE text:
//! - `SseParser` yields the same events, comments, error and discarded byte count whether the
//!   body arrives in one piece or in the scheduled pieces; its events, written out again as SSE
//!   text, parse to the same events;
//! - `SseFrameDecoder` yields the same frame bytes, frame event count and error in one piece or
//!   in pieces, and those frame bytes carried in SSE again decode to themselves;
//! - no event's data exceeds the limit.
//!
//! For frame bytes: `SseFrameEncoder` output, fed to `SseFrameDecoder` in the scheduled pieces,
//! gives back exactly the frame bytes, one event per frame, nothing discarded.

use bytes::BytesMut;

use super::reader::pieces;
use mcp_framing::{
    internals::limits::DEFAULT_MAX_EVENT_DATA,
    internals::sse::{SseEvent, SseFrameDecoder, SseFrameEncoder, SseParser},
    mapping::{FRAME_EVENT, SseError},
};

/// Event size limits a mode byte can pick.
const MAX_EVENT_DATA: [usize; 4] = [64, 1024, 4096, DEFAULT_MAX_EVENT_DATA];

/// What a parser made of a body: events, comments, the first error, and the bytes `finish`
/// discarded (when no error).
#[derive(Debug, PartialEq, Eq)]
struct Parsed {
    events: Vec<SseEvent>,
    comments: u64,
    result: Result<usize, SseError>,
}

fn parse(max: usize, pieces: &[&[u8]]) -> Parsed {
    let mut parser = SseParser::with_max_event_data(max);
    let mut events = Vec::new();
    let result = pieces
        .iter()
        .try_for_each(|piece| parser.feed(piece, &mut events))
        .map(|()| parser.finish());
    Parsed {
        events,
        comments: parser.comments(),
        result,
    }
}

/// What a frame decoder made of a body: frame bytes, frame events, the first error, and the
/// bytes `finish` discarded (when no error).
#[derive(Debug, PartialEq, Eq)]
struct Framed {
    frames: BytesMut,
    frame_events: u64,
    result: Result<usize, SseError>,
}

fn decode_frames(max: usize, pieces: &[&[u8]]) -> Framed {
    let mut decoder = SseFrameDecoder::with_max_event_data(max);
    let mut frames = BytesMut::new();
    let result = pieces
        .iter()
        .try_for_each(|piece| decoder.feed(piece, &mut frames))
        .map(|()| decoder.finish());
    Framed {
        frames,
        frame_events: decoder.frame_events(),
        result,
    }
}

/// Writes events out as SSE text: each data line its own `data:` field.
fn write_events(events: &[SseEvent]) -> Vec<u8> {
    let mut out = Vec::new();
    for event in events {
        if let Some(name) = &event.event {
            out.extend_from_slice(format!("event: {name}\n").as_bytes());
        }
        // An event without data lines has empty data; with data, every line is a field.
        if !event.data.is_empty() || event.event.is_none() && event.id.is_none() {
            for line in event.data.split('\n') {
                out.extend_from_slice(format!("data: {line}\n").as_bytes());
            }
        }
        if let Some(id) = &event.id {
            out.extend_from_slice(format!("id: {id}\n").as_bytes());
        }
        out.push(b'\n');
    }
    out
}

/// Runs the oracle on one input; see the module docs.
///
/// # Panics
///
/// When the SSE mapping breaks the oracle.
pub fn run(data: &[u8]) {
    let [mode, n, rest @ ..] = data else {
        return;
    };
    let (schedule, body) = rest.split_at(usize::from(*n).min(rest.len()));
    let split = pieces(body, schedule);
    if mode & 0b100 != 0 {
        carries_frames(body, &split);
        return;
    }
    let max = MAX_EVENT_DATA[usize::from(mode & 0b11)];

    let whole = parse(max, &[body]);
    assert_eq!(
        whole,
        parse(max, &split),
        "SseParser: one piece vs scheduled pieces"
    );
    for event in &whole.events {
        assert!(event.data.len() <= max, "event data over the limit {max}");
    }
    if whole.result.is_ok() {
        let again = parse(DEFAULT_MAX_EVENT_DATA, &[&write_events(&whole.events)]);
        assert_eq!(
            again.events, whole.events,
            "SSE events written out and parsed again"
        );
    }

    let framed = decode_frames(max, &[body]);
    assert_eq!(
        framed,
        decode_frames(max, &split),
        "SseFrameDecoder: one piece vs pieces"
    );
    carries_frames(&framed.frames, &[&framed.frames]);
}

/// `frames` carried in SSE and decoded again, in the given pieces of the SSE text.
fn carries_frames(frames: &[u8], split: &[&[u8]]) {
    let text = SseFrameEncoder::new().to_events(frames);
    // Re-cut the SSE text at the same piece lengths as the body was cut.
    let mut sizes = split.iter().map(|piece| piece.len()).cycle();
    let mut pieces = Vec::new();
    let mut rest = &text[..];
    while !rest.is_empty() {
        let size = sizes.next().unwrap_or(rest.len()).max(1);
        let (piece, tail) = rest.split_at(size.min(rest.len()));
        pieces.push(piece);
        rest = tail;
    }
    let decoded = decode_frames(DEFAULT_MAX_EVENT_DATA.max(text.len()), &pieces);
    assert_eq!(decoded.result, Ok(0), "SSE-carried frames: verdict");
    assert!(
        decoded.frames[..] == frames[..],
        "SSE-carried frames: bytes"
    );
    let events = text
        .windows(FRAME_EVENT.len())
        .filter(|w| *w == FRAME_EVENT.as_bytes())
        .count();
    assert_eq!(
        decoded.frame_events, events as u64,
        "SSE-carried frames: event count"
    );
}
