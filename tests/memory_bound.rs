//! Bounded memory (issue 6, SPEC.md §6): decoding a 1 GiB stream keeps peak memory under two
//! frames of read buffer plus the largest message, measured by a counting global allocator.
//!
//! The stream is generated lazily, one frame at a time into the read buffer, so the test never
//! holds more than the decoder does. It is its own test binary because the allocator counts the
//! whole process, and one test function because the peak it reads cannot be reset.

use std::alloc::System;

use bytes::{BufMut, BytesMut};
use cap::Cap;
use mcp_framing::FrameKind;
use mcp_framing::internals::frame::{FrameHeader, HEADER_LEN};
use mcp_framing::{
    Event, StreamDecoder, StreamEncoder, StreamHead, internals::limits::DEFAULT_MAX_FRAME_PAYLOAD,
};

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

const FRAME: usize = DEFAULT_MAX_FRAME_PAYLOAD as usize;
/// Messages of 1 MiB: 16 full frames each.
const MESSAGE: usize = 1 << 20;
/// Allocations that are not the decoder's (test harness, the event being matched): 16 KiB.
const SLACK: usize = 16 * 1024;

/// Writes frames of a stream of identical messages into a read buffer, as a transport would.
struct LazyStream {
    payload: Vec<u8>,
    payload_crc: u32,
    message_end: [u8; 40],
    next_sequence: u32,
}

impl LazyStream {
    /// Starts the stream (its HEAD frame goes into `buf`).
    fn open(buf: &mut BytesMut) -> Self {
        let payload: Vec<u8> = (0..FRAME).map(|i| (i % 251) as u8).collect();
        // The digest of the (constant) message, from a throwaway encoder fed frame by frame.
        let mut encoder = StreamEncoder::new(StreamHead::for_request(None));
        let mut scratch = BytesMut::new();
        for _ in 0..MESSAGE / FRAME {
            encoder.push(&payload, &mut scratch).unwrap();
            scratch.clear();
        }
        let summary = encoder.finish_message(&mut scratch).unwrap();
        let mut message_end = [0u8; 40];
        message_end[..8].copy_from_slice(&summary.len.to_be_bytes());
        message_end[8..].copy_from_slice(&summary.sha256);
        let head = StreamHead::for_request(None);
        StreamEncoder::new(head).open(buf).unwrap();
        Self {
            payload_crc: FrameHeader::for_payload(0x02, 0, &payload).payload_crc,
            payload,
            message_end,
            next_sequence: head.initial_sequence().wrapping_add(1),
        }
    }

    fn frame(&mut self, kind: FrameKind, payload: &[u8], crc: u32, buf: &mut BytesMut) {
        let header = FrameHeader {
            kind: kind.to_byte(),
            sequence: self.next_sequence,
            len: payload.len() as u32,
            payload_crc: crc,
        };
        buf.put_slice(&header.to_bytes());
        buf.put_slice(payload);
        self.next_sequence = self.next_sequence.wrapping_add(1);
    }

    fn data(&mut self, buf: &mut BytesMut) {
        let payload = std::mem::take(&mut self.payload);
        self.frame(FrameKind::Data, &payload, self.payload_crc, buf);
        self.payload = payload;
    }

    fn message_end(&mut self, buf: &mut BytesMut) {
        let payload = self.message_end;
        let crc = FrameHeader::for_payload(0x03, 0, &payload).payload_crc;
        self.frame(FrameKind::MessageEnd, &payload, crc, buf);
    }

    fn stream_end(&mut self, messages: u64, buf: &mut BytesMut) {
        let payload = messages.to_be_bytes();
        let crc = FrameHeader::for_payload(0x04, 0, &payload).payload_crc;
        self.frame(FrameKind::StreamEnd, &payload, crc, buf);
    }
}

/// Decodes `messages` messages of [`MESSAGE`] bytes fed frame by frame; returns the bytes of
/// verified messages. Every event is dropped once looked at, as a consumer that forwards them.
fn decode_lazily(mut decoder: StreamDecoder, messages: u64) -> u64 {
    let mut buf = BytesMut::new();
    let mut stream = LazyStream::open(&mut buf);
    let mut verified = 0u64;
    let mut drain = |decoder: &mut StreamDecoder, buf: &mut BytesMut| {
        while let Some(event) = decoder.decode(buf).unwrap() {
            match event {
                Event::Message(message) => verified += message.bytes().len() as u64,
                Event::MessageVerified(summary) => verified += summary.len,
                _ => {}
            }
        }
    };
    for _ in 0..messages {
        for _ in 0..MESSAGE / FRAME {
            stream.data(&mut buf);
            drain(&mut decoder, &mut buf);
        }
        stream.message_end(&mut buf);
        drain(&mut decoder, &mut buf);
    }
    stream.stream_end(messages, &mut buf);
    drain(&mut decoder, &mut buf);
    assert!(decoder.decode_eof(&mut buf).unwrap().is_none());
    verified
}

#[test]
fn decoding_a_gibibyte_stream_keeps_peak_memory_within_two_frames_and_one_message() {
    let frame = HEADER_LEN + FRAME;
    let base = ALLOCATOR.allocated();
    assert!(ALLOCATOR.max_allocated() < base + SLACK);

    // Not assembling: the decoder holds at most the read buffer, two frames.
    let verified = decode_lazily(
        StreamDecoder::builder().assemble_messages(false).build(),
        64,
    );
    assert_eq!(verified, 64 * MESSAGE as u64);
    let peak = ALLOCATOR.max_allocated() - base;
    // The generator keeps one payload; computing the digest took one more frame of scratch.
    let generator = FRAME + frame + 52;
    eprintln!(
        "not assembling: peak {peak} bytes (bound {})",
        generator + 2 * frame + SLACK
    );
    assert!(peak <= generator + 2 * frame + SLACK, "peak {peak} bytes");

    // Assembling (the default): plus the largest message, over a 1 GiB stream.
    let verified = decode_lazily(StreamDecoder::new(), 1024);
    assert_eq!(verified, 1 << 30);
    let peak = ALLOCATOR.max_allocated() - base;
    let bound = FRAME + 2 * frame + MESSAGE + SLACK;
    eprintln!("assembling: peak {peak} bytes (bound {bound})");
    assert!(peak <= bound, "peak {peak} bytes, bound {bound}");
}
