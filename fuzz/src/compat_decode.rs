//! `compat_decode`: the compatible SSE mapping (SPEC.md §18) from arbitrary bytes, in any
//! chunking.
//!
//! Input: one mode byte, one byte `n`, `n` schedule bytes (piece sizes as in
//! [`ScheduledReader`](super::reader::ScheduledReader): bits 0..=6, `0x7f` for all; bit 7 is
//! ignored here), then the body. Mode bits 0..=1 pick the event bound (64 bytes, 1 KiB, 4 KiB,
//! the default). Mode bit 2 set reads the body as a script instead of SSE text: messages
//! separated by NUL bytes, written with `CompatEncoder` (frame size by bits 5..=7, ending by bits
//! 3..=4: end, final message, abort, cut in the middle).
//!
//! Oracle, for SSE text:
//! - `CompatDecoder` hands over the same frame bytes, counts and error whether the body arrives in
//!   one piece or in the scheduled pieces, and the whole pipeline (compat decoder, then the frame
//!   decoder, errors in body order) reaches the same verdict and messages, and so does the
//!   crate's `BodyDecoder` (the path `VerifiedResponse` and `mcp-frame` take), up to
//!   `TrailingData::len`, documented as the bytes found after the end *in that read* (the
//!   pipeline and `BodyDecoder` read the frame bytes in different pieces);
//! - **a framing client reads what a stock client reads**: the verified messages, empty ones
//!   aside, are a prefix of the data of the body's `message` events as a plain SSE parser
//!   dispatches them, and all of them when the stream is clean.
//!
//! For a script: the body the encoder writes, decoded in the scheduled pieces, rebuilds exactly
//! the binary stream a `StreamEncoder` writes for the same messages, and gives back every
//! message (clean, or aborted); a stock SSE parser reads exactly the messages; a body cut in the
//! middle is truncated.

use bytes::{Bytes, BytesMut};

use super::reader::pieces;
use mcp_framing::internals::sse::SseParser;
use mcp_framing::{
    AbortCode, AttemptId, BodyDecoder, BodyError, DecodeError, Event, StreamDecoder, StreamEncoder,
    StreamHead, mapping::Mapping,
};
use mcp_framing::{
    internals::limits::DEFAULT_MAX_COMPAT_EVENT_DATA, internals::sse_compat::CompatDecoder,
    mapping::CompatError,
};

/// Event bounds a mode byte can pick.
const MAX_EVENT_DATA: [usize; 4] = [64, 1024, 4096, DEFAULT_MAX_COMPAT_EVENT_DATA];

/// Frame sizes a script can pick.
const FRAME_SIZES: [usize; 8] = [1, 2, 7, 16, 100, 1024, 16384, 16384];

/// What the compat decoder alone made of a body.
#[derive(Debug, PartialEq, Eq)]
struct Carried {
    frames: BytesMut,
    records: u64,
    message_events: u64,
    result: Result<usize, CompatError>,
}

fn carry(max: usize, pieces: &[&[u8]]) -> Carried {
    let mut decoder = CompatDecoder::with_max_event_data(max);
    let mut frames = BytesMut::new();
    let result = pieces
        .iter()
        .try_for_each(|piece| decoder.feed(piece, &mut frames))
        .map(|()| decoder.finish());
    Carried {
        frames,
        records: decoder.records(),
        message_events: decoder.message_events(),
        result,
    }
}

/// How a body ended for a framing client.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Clean,
    Frame(DecodeError),
    Mapping(CompatError),
}

/// `end` with what may depend on read boundaries (`TrailingData::len`) set to 0.
fn normalized(end: End) -> End {
    match end {
        End::Frame(DecodeError::TrailingData { .. }) => {
            End::Frame(DecodeError::TrailingData { len: 0 })
        }
        other => other,
    }
}

/// The whole pipeline: the frame decoder runs after every piece, an error in frames handed over
/// before a mapping error wins (SPEC.md §18.5).
fn verdict(max: usize, pieces: &[&[u8]]) -> (Vec<Bytes>, End) {
    let mut compat = CompatDecoder::with_max_event_data(max);
    let mut decoder = StreamDecoder::new();
    let mut buf = BytesMut::new();
    let mut messages = Vec::new();
    let mut drain = |decoder: &mut StreamDecoder, buf: &mut BytesMut, eof: bool| loop {
        let next = if eof {
            decoder.decode_eof(buf)
        } else {
            decoder.decode(buf)
        };
        match next {
            Ok(Some(Event::Message(message))) => messages.push(message.bytes().clone()),
            Ok(Some(_)) => {}
            Ok(None) => return None,
            Err(err) => return Some(err),
        }
    };
    for piece in pieces {
        let fed = compat.feed(piece, &mut buf);
        if let Some(err) = drain(&mut decoder, &mut buf, false) {
            return (messages, End::Frame(err));
        }
        if let Err(err) = fed {
            return (messages, End::Mapping(err));
        }
    }
    compat.finish();
    let end = match drain(&mut decoder, &mut buf, true) {
        Some(err) => End::Frame(err),
        None => End::Clean,
    };
    (messages, end)
}

/// The same through the crate's `BodyDecoder` in the compatible mapping.
fn body_verdict(max: usize, pieces: &[&[u8]]) -> (Vec<Bytes>, End) {
    let mut body = BodyDecoder::new(Mapping::Compat, StreamDecoder::new()).max_event_data(max);
    let mut messages = Vec::new();
    let drain = |body: &mut BodyDecoder, messages: &mut Vec<Bytes>| loop {
        match body.next_event() {
            Ok(Some(Event::Message(message))) => messages.push(message.bytes().clone()),
            Ok(Some(_)) => {}
            Ok(None) => return None,
            Err(BodyError::Decode(err)) => return Some(End::Frame(err)),
            Err(BodyError::Compat(err)) => return Some(End::Mapping(err)),
            Err(other) => panic!("BodyDecoder in the compatible mapping: {other:?}"),
        }
    };
    for piece in pieces {
        body.feed(piece);
        if let Some(end) = drain(&mut body, &mut messages) {
            return (messages, end);
        }
    }
    body.finish();
    let end = drain(&mut body, &mut messages).unwrap_or(End::Clean);
    (messages, end)
}

/// The data of the `message` events a plain SSE parser dispatches (empty ones skipped), up to
/// its first error: what a stock MCP client reads.
fn stock_view(max: usize, body: &[u8]) -> Vec<Bytes> {
    let mut parser = SseParser::with_max_event_data(max);
    let mut events = Vec::new();
    let _ = parser.feed(body, &mut events);
    events
        .into_iter()
        .filter(|e| !e.data.is_empty() && matches!(e.event.as_deref(), None | Some("message")))
        .map(|e| Bytes::from(e.data))
        .collect()
}

/// Runs the oracle on one input; see the module docs.
///
/// # Panics
///
/// When the compatible mapping breaks the oracle.
pub fn run(data: &[u8]) {
    let [mode, n, rest @ ..] = data else {
        return;
    };
    let (schedule, body) = rest.split_at(usize::from(*n).min(rest.len()));
    if mode & 0b100 != 0 {
        script(*mode, schedule, body);
        return;
    }
    let max = MAX_EVENT_DATA[usize::from(mode & 0b11)];
    let split = pieces(body, schedule);

    let whole = carry(max, &[body]);
    assert_eq!(
        whole,
        carry(max, &split),
        "CompatDecoder: one piece vs pieces"
    );

    let (messages, end) = verdict(max, &[body]);
    let end = normalized(end);
    let in_pieces = verdict(max, &split);
    let in_pieces = (in_pieces.0, normalized(in_pieces.1));
    assert_eq!(
        (&messages, &end),
        (&in_pieces.0, &in_pieces.1),
        "pipeline: one piece vs pieces"
    );
    let (body_messages, body_end) = body_verdict(max, &split);
    let body_end = normalized(body_end);
    assert_eq!(
        (&body_messages, &body_end),
        (&messages, &end),
        "BodyDecoder vs the pipeline"
    );
    let read: Vec<&Bytes> = messages.iter().filter(|m| !m.is_empty()).collect();
    let stock = stock_view(max, body);
    assert!(
        read.len() <= stock.len() && read.iter().zip(&stock).all(|(a, b)| *a == b),
        "verified messages are not what a stock client reads: {read:?} vs {stock:?}"
    );
    if end == End::Clean {
        assert_eq!(
            read.len(),
            stock.len(),
            "clean, yet a stock client reads more events"
        );
    }
}

/// Mode bit 2: messages written with `CompatEncoder`, then decoded.
fn script(mode: u8, schedule: &[u8], script: &[u8]) {
    use mcp_framing::internals::sse_compat::CompatEncoder;

    let messages: Vec<Vec<u8>> = script
        .split(|&b| b == 0)
        .map(|m| String::from_utf8_lossy(m).replace('\r', " ").into_bytes())
        .filter(|m| !m.is_empty())
        .collect();
    let frame_size = FRAME_SIZES[usize::from(mode >> 5)];
    let head = StreamHead {
        request_key: None,
        attempt_id: AttemptId::from_bytes([mode; 16]),
    };
    let build = || StreamEncoder::builder().frame_size(frame_size).build(head);
    let mut compat = CompatEncoder::new(build());
    let mut binary = build();
    let mut body = BytesMut::new();
    let mut wire = BytesMut::new();
    let ending = (mode >> 3) & 0b11;
    for (i, message) in messages.iter().enumerate() {
        binary.message(message, &mut wire).unwrap();
        if ending == 1 && i + 1 == messages.len() {
            compat.final_message(message, &mut body).unwrap();
            binary.end(&mut wire).unwrap();
        } else {
            compat.message(message, &mut body).unwrap();
        }
    }
    match ending {
        1 if !messages.is_empty() => {}
        2 => {
            compat
                .abort(AbortCode::Cancelled, "script", &mut body)
                .unwrap();
            binary
                .abort(AbortCode::Cancelled, "script", &mut wire)
                .unwrap();
        }
        _ => {
            compat.end(&mut body).unwrap();
            binary.end(&mut wire).unwrap();
        }
    }
    let max = DEFAULT_MAX_COMPAT_EVENT_DATA;
    let split = pieces(&body, schedule);
    let carried = carry(max, &split);
    // (`finish` counts the bytes after the last blank line: a final record line, handled.)
    assert!(
        carried.result.is_ok(),
        "encoder output: mapping verdict {:?}",
        carried.result
    );
    assert!(
        carried.frames[..] == wire[..],
        "encoder output: rebuilt binary stream"
    );
    let (read, end) = verdict(max, &split);
    let expected: Vec<Bytes> = messages.iter().map(|m| Bytes::from(m.clone())).collect();
    assert_eq!(read, expected, "encoder output: messages");
    assert_eq!(
        stock_view(max, &body),
        expected,
        "encoder output: stock view"
    );
    match ending {
        2 => assert!(
            matches!(end, End::Frame(DecodeError::PeerAbort(_))),
            "{end:?}"
        ),
        _ => assert_eq!(end, End::Clean),
    }
    if ending == 3 && !body.is_empty() {
        let cut = schedule.first().map_or(body.len() / 2, |&b| usize::from(b)) % body.len();
        let (_, end) = verdict(max, &[&body[..cut]]);
        assert!(
            matches!(end, End::Frame(DecodeError::Truncated { .. })),
            "cut at {cut}: {end:?}"
        );
    }
}
