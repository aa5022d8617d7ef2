//! The SSE mapping (SPEC.md §15) without a network: byte-exact with the binary form whatever the
//! chunking and line endings, keep-alive comments skipped, every cut a truncation, unframed events
//! refused.

use bytes::BytesMut;
use proptest::prelude::*;

use super::encoder::EVENT_OVERHEAD;
use super::{RawItem, SseFrameDecoder, SseFrameEncoder, SseParser, is_message_event};
use crate::mapping::SseError;
use crate::{DecodeError, StreamDecoder, StreamEncoder, StreamHead};

#[test]
fn more_lines_without_data_in_a_row_than_the_bound_fail_as_too_many_comments() {
    let mut parser = SseParser::new().max_comments_in_a_row(2);
    let err = parser.feed(b": a\n: b\n: c\n", &mut Vec::new()).unwrap_err();
    assert_eq!(err, SseError::TooManyComments { max: 2 });
    let mut dec = SseFrameDecoder::new().max_comments_in_a_row(1);
    let err = dec
        .feed(b": ping\n: ping\n", &mut BytesMut::new())
        .unwrap_err();
    assert_eq!(err, SseError::TooManyComments { max: 1 });
}

#[test]
fn a_keep_alive_comment_is_counted_whatever_its_line_ending() {
    let mut dec = SseFrameDecoder::new();
    dec.feed(b": ping\r\n\r\n", &mut BytesMut::new()).unwrap();
    assert_eq!(dec.comments(), 1);
}

/// The binary stream of `messages` in frames of at most `frame_size` bytes, then the sentinel.
fn binary(messages: &[Vec<u8>], frame_size: usize) -> BytesMut {
    let head = StreamHead::for_request(None);
    let mut enc = StreamEncoder::builder().frame_size(frame_size).build(head);
    let mut wire = BytesMut::new();
    for message in messages {
        enc.message(message, &mut wire).unwrap();
    }
    enc.end(&mut wire).unwrap();
    wire
}

/// Feeds `body` to a fresh SSE decoder in pieces whose sizes cycle through `splits`.
fn decode_sse(body: &[u8], splits: &[usize]) -> Result<BytesMut, SseError> {
    let mut dec = SseFrameDecoder::new();
    let mut frames = BytesMut::new();
    let mut rest = body;
    let mut i = 0;
    while !rest.is_empty() {
        let n = splits[i % splits.len()].clamp(1, rest.len());
        dec.feed(&rest[..n], &mut frames)?;
        rest = &rest[n..];
        i += 1;
    }
    dec.finish();
    Ok(frames)
}

fn with_line_endings(body: &[u8], ending: &str) -> Vec<u8> {
    String::from_utf8(body.to_vec())
        .unwrap()
        .replace('\n', ending)
        .into_bytes()
}

proptest! {
    #[test]
    fn sse_mapping_is_byte_exact_whatever_the_chunking_and_line_endings(
        messages in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..4),
        frame_size in 1usize..128,
        splits in prop::collection::vec(1usize..40, 1..8),
        ending in prop::sample::select(vec!["\n", "\r\n", "\r"]),
        comments in any::<bool>(),
    ) {
        let wire = binary(&messages, frame_size);
        let mut body = SseFrameEncoder::new().to_events(&wire).to_vec();
        if comments {
            // A keep-alive comment between every two events, as proxies and MCP servers send.
            body = String::from_utf8(body).unwrap().replace("\n\n", "\n\n: keep-alive\n\n").into_bytes();
        }
        let body = with_line_endings(&body, ending);
        let frames = decode_sse(&body, &splits).unwrap();
        prop_assert_eq!(&frames[..], &wire[..]);
        let stream = StreamDecoder::new().decode_all(&frames).unwrap();
        let got: Vec<Vec<u8>> = stream.messages.iter().map(|m| m.bytes().to_vec()).collect();
        prop_assert_eq!(got, messages);
    }
}

#[test]
fn every_cut_of_an_sse_body_is_a_truncation_never_a_shorter_stream() {
    let messages = vec![br#"{"jsonrpc":"2.0","id":1,"result":{"text":"hello"}}"#.to_vec()];
    let wire = binary(&messages, 16);
    let body = SseFrameEncoder::new().to_events(&wire);
    for cut in 0..body.len() {
        let frames = decode_sse(&body[..cut], &[cut.max(1)]).unwrap();
        let err = StreamDecoder::new().decode_all(&frames).unwrap_err();
        assert!(
            matches!(err, DecodeError::Truncated { .. }),
            "cut {cut}: {err}"
        );
    }
    let frames = decode_sse(&body, &[7]).unwrap();
    assert!(StreamDecoder::new().decode_all(&frames).is_ok());
}

#[test]
fn refuses_unframed_message_events_in_a_framed_response() {
    let body = b": ok\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
    let err = decode_sse(body, &[5]).unwrap_err();
    assert_eq!(
        err,
        SseError::UnexpectedEvent {
            name: "message".into()
        }
    );
    // Unnamed data events are `message` events too.
    let err = decode_sse(b"data: {}\n\n", &[3]).unwrap_err();
    assert!(matches!(err, SseError::UnexpectedEvent { .. }));
}

#[test]
fn skips_events_without_data() {
    let wire = binary(&[b"{}".to_vec()], 64);
    let mut body = b"id: 0\nretry: 3000\n\nevent: ping\n\n".to_vec();
    body.extend_from_slice(&SseFrameEncoder::new().to_events(&wire));
    assert_eq!(&decode_sse(&body, &[9]).unwrap()[..], &wire[..]);
}

#[test]
fn rejects_invalid_base64_and_oversized_events() {
    let err = decode_sse(b"event: mcp-frame\ndata: !!!!\n\n", &[4]).unwrap_err();
    assert_eq!(err, SseError::InvalidBase64 { event: 0 });
    let mut dec = SseFrameDecoder::with_max_event_data(8);
    let err = dec
        .feed(
            b"event: mcp-frame\ndata: AAAA\ndata: AAAA\ndata: AAAA\n",
            &mut BytesMut::new(),
        )
        .unwrap_err();
    assert_eq!(err, SseError::EventTooLarge { max: 8 });
}

#[test]
fn accepts_base64_split_over_several_data_lines() {
    let wire = binary(&[b"[1,2,3]".to_vec()], 64);
    let body = SseFrameEncoder::new().to_events(&wire);
    // Re-wrap each event's base64 at 10 characters per data line.
    let text = String::from_utf8(body.to_vec()).unwrap();
    let mut rewrapped = String::new();
    for line in text.lines() {
        match line.strip_prefix("data: ") {
            Some(data) => {
                for piece in data.as_bytes().chunks(10) {
                    rewrapped.push_str("data: ");
                    rewrapped.push_str(std::str::from_utf8(piece).unwrap());
                    rewrapped.push('\n');
                }
            }
            None => {
                rewrapped.push_str(line);
                rewrapped.push('\n');
            }
        }
    }
    assert_eq!(
        &decode_sse(rewrapped.as_bytes(), &[13]).unwrap()[..],
        &wire[..]
    );
}

#[test]
fn overhead_per_event_matches_spec() {
    // SPEC.md §15: an event with one frame of n payload bytes is 25 + 4 * ceil((20 + n) / 3).
    let wire = binary(&[vec![b'x'; 16 * 1024]], 16 * 1024);
    let body = SseFrameEncoder::new().to_events(&wire);
    let frames = [52usize, 20 + 16 * 1024, 60, 28]; // HEAD, DATA, MESSAGE_END, STREAM_END
    let expected: usize = frames
        .iter()
        .map(|len| EVENT_OVERHEAD + 4 * len.div_ceil(3))
        .sum();
    assert_eq!(body.len(), expected);
    assert_eq!(
        EVENT_OVERHEAD + 4 * (20usize + 16 * 1024).div_ceil(3),
        21_897
    );
    assert_eq!(
        frames.map(|len| EVENT_OVERHEAD + 4 * len.div_ceil(3)),
        [97, 21_897, 105, 65]
    );
}

#[test]
fn a_message_event_has_no_event_type_an_empty_one_or_message() {
    assert!(is_message_event(None));
    assert!(is_message_event(Some("")));
    assert!(is_message_event(Some("message")));
    assert!(!is_message_event(Some("mcp-frame")));
    assert!(!is_message_event(Some("Message"))); // event types are case-sensitive
}

/// What the layer reads of its inner server (feature `rmcp-server`): a long data line that
/// arrives in large reads of a shared buffer is handed on as parts of those reads, not copied
/// into one buffer, whatever comes before it and however its lines end.
#[cfg(feature = "rmcp-server")]
#[test]
fn a_long_data_line_in_large_reads_is_handed_on_as_the_reads_own_bytes() {
    use bytes::Bytes;

    use super::{RawItem, SseParser};

    let value = "x".repeat(50_000);
    for before in ["", "event: message\r\n", ": keep-alive\r", "id: 7\n"] {
        for end in ["\n\n", "\r\n\r\n", "\r\r"] {
            let body = Bytes::from(format!("{before}data: {value}{end}"));
            let mut parser = SseParser::new().data_unchecked();
            let mut items = Vec::new();
            for at in (0..body.len()).step_by(10_000) {
                let read = body.slice(at..(at + 10_000).min(body.len()));
                parser.feed_raw_shared(&read, &mut items).unwrap();
            }
            let data = items.into_iter().find_map(|item| match item {
                RawItem::Event { data, .. } => Some(data),
                RawItem::Comment(_) => None,
            });
            let buffers: Vec<Bytes> = data.unwrap().into_buffers().collect();
            assert_eq!(buffers.concat(), value.as_bytes(), "{before:?} {end:?}");
            assert!(buffers.len() > 1, "{before:?} {end:?}: one buffer");
            // Only a read's short part (under 4 KiB, at the line's end here) is copied.
            let body_at = body.as_ptr() as usize..body.as_ptr() as usize + body.len();
            let copied: usize = buffers
                .iter()
                .filter(|buffer| !body_at.contains(&(buffer.as_ptr() as usize)))
                .map(Bytes::len)
                .sum();
            assert!(copied < 4096, "{before:?} {end:?}: {copied} bytes copied");
        }
    }
}

#[test]
fn comments_come_in_body_order_with_the_events() {
    let mut items = Vec::new();
    let mut parser = SseParser::new();
    parser
        .feed_raw_items(b"data: a\n:inside\n\n:after\n", &mut items)
        .unwrap();
    let items: Vec<String> = items
        .iter()
        .map(|item| match item {
            RawItem::Comment(text) => format!("comment {}", String::from_utf8_lossy(text)),
            RawItem::Event { name, data, .. } => {
                format!("event {name:?} {}", String::from_utf8_lossy(&data.copy_range(0..data.len())))
            }
        })
        .collect();
    assert_eq!(items, ["comment inside", "event None a", "comment after"]);
}

#[test]
fn one_event_carries_its_bytes_in_base64_between_the_event_line_and_a_blank_line() {
    let mut body = BytesMut::new();
    SseFrameEncoder::new().encode_event(&[0u8; 20], &mut body);
    // base64 of 20 bytes
    assert_eq!(
        &body[..],
        &b"event: mcp-frame\ndata: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n"[..]
    );
}
