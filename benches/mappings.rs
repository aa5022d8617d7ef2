//! The SSE mappings compared (issue 13 §2): bytes on the wire, encode and decode throughput of
//! the compatible mapping (SPEC.md §18) against the base64 mapping (§15) and against unframed
//! SSE (what a stock MCP server sends), for one JSON-RPC response of 1 KiB, 64 KiB and 1 MiB.
//!
//! In each group `mappings-<size>`, over the same message:
//! - `unframed-encode` / `unframed-decode`: `data: <json>\n\n` written, and parsed back by the
//!   crate's SSE parser (the baseline: what any MCP client pays);
//! - `base64-encode` / `base64-decode`: frames (16 KiB DATA frames) in `mcp-frame` events,
//!   decoded and verified;
//! - `compat-encode` / `compat-decode`: one record and one `message` event, the binary stream
//!   rebuilt and verified;
//! - `binary-encode` / `binary-decode`: the frames as the body (the frame layer alone).
//!
//! Decoders get the body in 16 KiB reads (what an HTTP client hands over); `compat-decode-whole`
//! and `binary-decode-whole` get it in one read. `Throughput::Bytes` is the message size, so the
//! throughputs compare the cost of carrying the same message. The bytes on the wire are printed
//! before the measurements. The clock is the thread's CPU time (`BENCH_CLOCK=wall`: wall time).
//!
//! Run: `cargo bench --features sse --bench mappings`.

#[path = "support/thread_cpu_time.rs"]
mod thread_cpu_time;

use std::hint::black_box;

use bytes::{BufMut, Bytes, BytesMut};
use criterion::measurement::Measurement;
use criterion::{Criterion, Throughput};
use mcp_framing::internals::sse::{SseFrameDecoder, SseFrameEncoder, SseParser};
use mcp_framing::internals::sse_compat::{CompatDecoder, CompatEncoder};
use mcp_framing::{Event, StreamDecoder, StreamEncoder, StreamHead};
use thread_cpu_time::ThreadCpuTime;

/// Size of the reads a decoder is fed.
const READ: usize = 16 * 1024;

/// A JSON-RPC response of exactly `len` bytes: a text content item padded with prose.
fn json_payload(len: usize) -> Vec<u8> {
    let prefix: &[u8] = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""#;
    let suffix: &[u8] = br#""}],"isError":false}}"#;
    let prose = b"The quick brown fox jumps over the lazy dog; 0123456789 tokens stream by. ";
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(prefix);
    out.extend(prose.iter().cycle().take(len - prefix.len() - suffix.len()));
    out.extend_from_slice(suffix);
    assert_eq!(out.len(), len);
    out
}

fn head() -> StreamHead {
    StreamHead::for_request(None)
}

fn unframed_encode(message: &[u8]) -> BytesMut {
    let mut body = BytesMut::with_capacity(message.len() + 8);
    body.put_slice(b"data: ");
    body.put_slice(message);
    body.put_slice(b"\n\n");
    body
}

fn binary_encode(message: &[u8]) -> BytesMut {
    let mut enc = StreamEncoder::new(head());
    let mut wire = BytesMut::new();
    enc.message(message, &mut wire).unwrap();
    enc.end(&mut wire).unwrap();
    wire
}

fn base64_encode(message: &[u8]) -> BytesMut {
    let wire = binary_encode(message);
    BytesMut::from(SseFrameEncoder::new().to_events(&wire))
}

fn compat_encode(message: &[u8]) -> BytesMut {
    let mut enc = CompatEncoder::new(StreamEncoder::new(head()));
    let mut body = BytesMut::new();
    enc.final_message(message, &mut body).unwrap();
    body
}

/// Parses an unframed body; returns the bytes of the data of its events.
fn unframed_decode(body: &[u8]) -> usize {
    let mut parser = SseParser::with_max_event_data(1 << 24);
    let mut events = Vec::new();
    let mut carried = 0;
    for read in body.chunks(READ) {
        parser.feed(read, &mut events).unwrap();
        for event in events.drain(..) {
            carried += black_box(event.data).len();
        }
    }
    carried
}

/// Decodes frame bytes to the end; returns the bytes of the verified messages.
fn verify(decoder: &mut StreamDecoder, frames: &mut BytesMut, eof: bool) -> usize {
    let mut verified = 0;
    loop {
        let event = if eof {
            decoder.decode_eof(frames)
        } else {
            decoder.decode(frames)
        };
        match event.unwrap() {
            Some(Event::Message(message)) => verified += black_box(message.bytes()).len(),
            Some(_) => {}
            None => return verified,
        }
    }
}

fn binary_decode(body: &[u8]) -> usize {
    let mut decoder = StreamDecoder::builder().max_message_size(1 << 24).build();
    let mut frames = BytesMut::new();
    let mut verified = 0;
    for read in body.chunks(READ) {
        frames.extend_from_slice(read);
        verified += verify(&mut decoder, &mut frames, false);
    }
    verified + verify(&mut decoder, &mut frames, true)
}

fn base64_decode(body: &[u8]) -> usize {
    let mut sse = SseFrameDecoder::new();
    let mut decoder = StreamDecoder::new();
    let mut frames = BytesMut::new();
    let mut verified = 0;
    for read in body.chunks(READ) {
        sse.feed(read, &mut frames).unwrap();
        verified += verify(&mut decoder, &mut frames, false);
    }
    sse.finish();
    verified + verify(&mut decoder, &mut frames, true)
}

fn compat_decode(body: &[u8]) -> usize {
    compat_decode_in(body, READ)
}

/// The compatible mapping's decoder fed the whole body at once.
fn compat_decode_whole(body: &[u8]) -> usize {
    compat_decode_in(body, body.len())
}

/// The binary mapping's decoder fed the whole body at once.
fn binary_decode_whole(body: &[u8]) -> usize {
    let mut decoder = StreamDecoder::builder().max_message_size(1 << 24).build();
    let mut frames = BytesMut::from(body);
    verify(&mut decoder, &mut frames, true)
}

fn compat_decode_in(body: &[u8], read_len: usize) -> usize {
    let mut compat = CompatDecoder::new();
    let mut decoder = StreamDecoder::new();
    let mut frames = BytesMut::new();
    let mut verified = 0;
    for read in body.chunks(read_len) {
        compat.feed(read, &mut frames).unwrap();
        verified += verify(&mut decoder, &mut frames, false);
    }
    compat.finish();
    verified + verify(&mut decoder, &mut frames, true)
}

type Encode = fn(&[u8]) -> BytesMut;
type Decode = fn(&[u8]) -> usize;

const MAPPINGS: [(&str, Encode, Decode); 4] = [
    ("unframed", unframed_encode, unframed_decode),
    ("base64", base64_encode, base64_decode),
    ("compat", compat_encode, compat_decode),
    ("binary", binary_encode, binary_decode),
];

/// Decoders also measured with the whole body in one read (`<mapping>-decode-whole`).
const WHOLE: [(&str, Decode); 2] = [
    ("compat", compat_decode_whole),
    ("binary", binary_decode_whole),
];

const SIZES: [(&str, usize); 3] = [("1KiB", 1024), ("64KiB", 64 * 1024), ("1MiB", 1024 * 1024)];

/// Bytes on the wire of each mapping, and the ratio to unframed SSE.
fn print_wire_sizes() {
    println!("bytes on the wire for one response (message = the JSON-RPC response):");
    println!(
        "{:>8} {:>10} {:>19} {:>19} {:>19} {:>19}",
        "message", "", "unframed SSE", "base64 (§15)", "compat (§18)", "binary (§16)"
    );
    for (name, len) in SIZES {
        let message = json_payload(len);
        let sizes: Vec<usize> = MAPPINGS
            .iter()
            .map(|(_, enc, _)| enc(&message).len())
            .collect();
        let cell = |n: usize| format!("{n} (x{:.4})", n as f64 / sizes[0] as f64);
        println!(
            "{name:>8} {len:>10} {:>19} {:>19} {:>19} {:>19}",
            cell(sizes[0]),
            cell(sizes[1]),
            cell(sizes[2]),
            cell(sizes[3])
        );
    }
}

fn groups<M: Measurement>(c: &mut Criterion<M>) {
    for (name, len) in SIZES {
        let message = json_payload(len);
        let mut group = c.benchmark_group(format!("mappings-{name}"));
        group.throughput(Throughput::Bytes(len as u64));
        if len >= 1 << 20 {
            group.sample_size(30);
        }
        for (mapping, encode, decode) in MAPPINGS {
            let body: Bytes = encode(&message).freeze();
            assert_eq!(decode(&body), len, "{mapping} round trip");
            group.bench_function(format!("{mapping}-encode"), |b| {
                b.iter(|| encode(black_box(&message)));
            });
            group.bench_function(format!("{mapping}-decode"), |b| {
                b.iter(|| decode(black_box(&body)));
            });
            if let Some((_, whole)) = WHOLE.iter().find(|(name, _)| *name == mapping) {
                assert_eq!(whole(&body), len, "{mapping} round trip, one read");
                group.bench_function(format!("{mapping}-decode-whole"), |b| {
                    b.iter(|| whole(black_box(&body)));
                });
            }
        }
        group.finish();
    }
}

fn main() {
    print_wire_sizes();
    if std::env::var("BENCH_CLOCK").as_deref() == Ok("wall") {
        let mut c = Criterion::default().configure_from_args();
        groups(&mut c);
        c.final_summary();
    } else {
        let mut c = Criterion::default()
            .with_measurement(ThreadCpuTime)
            .configure_from_args();
        groups(&mut c);
        c.final_summary();
    }
}
