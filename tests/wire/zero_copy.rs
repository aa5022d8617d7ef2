//! The decoder hands out payload bytes without copying them (issue 6): chunks and single-frame
//! messages are slices of the read buffer; a multi-frame message is assembled in one buffer of
//! its own, never in the read buffer.

use std::ops::Range;

use bytes::BytesMut;
use mcp_framing::{Event, StreamDecoder, StreamEncoder, StreamHead};

fn address_range(bytes: &[u8]) -> Range<usize> {
    let start = bytes.as_ptr() as usize;
    start..start + bytes.len()
}

fn within(inner: &[u8], outer: &Range<usize>) -> bool {
    let inner = address_range(inner);
    outer.start <= inner.start && inner.end <= outer.end
}

fn overlaps(inner: &[u8], outer: &Range<usize>) -> bool {
    let inner = address_range(inner);
    inner.start < outer.end && outer.start < inner.end
}

/// A stream with a 10,000-byte message in 1 KiB frames, then a one-frame message.
fn two_messages() -> (BytesMut, Vec<u8>, Vec<u8>) {
    let big: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let small = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec();
    let mut enc = StreamEncoder::builder()
        .frame_size(1024)
        .build(StreamHead::for_request(None));
    let mut wire = BytesMut::new();
    enc.message(&big, &mut wire).unwrap();
    enc.message(&small, &mut wire).unwrap();
    enc.end(&mut wire).unwrap();
    (wire, big, small)
}

#[test]
fn verified_chunks_and_single_frame_messages_are_slices_of_the_read_buffer() {
    let (mut buf, big, small) = two_messages();
    let read_buffer = address_range(&buf);
    let mut decoder = StreamDecoder::new();
    let (mut chunks, mut messages) = (0, Vec::new());
    while let Some(event) = decoder.decode_eof(&mut buf).unwrap() {
        match event {
            Event::Chunk(chunk) => {
                assert!(
                    within(chunk.unverified_bytes(), &read_buffer),
                    "chunk {chunks} was copied out of the read buffer"
                );
                chunks += 1;
            }
            Event::Message(message) => messages.push(message),
            _ => {}
        }
    }
    assert_eq!(chunks, 10 + 1);
    assert_eq!(messages.len(), 2);
    // One frame: the message is the chunk itself, still a slice of the read buffer.
    assert_eq!(messages[1].bytes().as_ref(), &small[..]);
    assert!(within(messages[1].bytes(), &read_buffer));
    // Several frames: assembled by one copy into a buffer of its own.
    assert_eq!(messages[0].bytes().as_ref(), &big[..]);
    assert!(!overlaps(messages[0].bytes(), &read_buffer));
}

#[test]
fn chunks_are_slices_of_the_read_buffer_when_the_decoder_does_not_assemble() {
    let (mut buf, big, _) = two_messages();
    let read_buffer = address_range(&buf);
    let mut decoder = StreamDecoder::builder().assemble_messages(false).build();
    let mut first_message = Vec::new();
    while let Some(event) = decoder.decode_eof(&mut buf).unwrap() {
        if let Event::Chunk(chunk) = event {
            assert!(within(chunk.unverified_bytes(), &read_buffer));
            if chunk.message_index() == 0 {
                first_message.extend_from_slice(chunk.unverified_bytes());
            }
        }
    }
    assert_eq!(first_message, big);
}

#[test]
fn chunks_stay_slices_of_the_read_buffer_when_bytes_arrive_in_small_reads() {
    let (wire, big, _) = two_messages();
    // A transport read buffer with room for the whole stream, filled 100 bytes at a time:
    // chunks must point into it, whichever read completed their frame.
    let mut buf = BytesMut::with_capacity(wire.len());
    let read_buffer = buf.as_ptr() as usize..buf.as_ptr() as usize + wire.len();
    let mut decoder = StreamDecoder::new();
    let mut message = None;
    for read in wire.chunks(100) {
        buf.extend_from_slice(read);
        while let Some(event) = decoder.decode(&mut buf).unwrap() {
            match event {
                Event::Chunk(chunk) => assert!(within(chunk.unverified_bytes(), &read_buffer)),
                Event::Message(m) if message.is_none() => message = Some(m),
                _ => {}
            }
        }
    }
    assert!(decoder.decode_eof(&mut buf).unwrap().is_none());
    assert_eq!(message.unwrap().bytes().as_ref(), &big[..]);
}
