//! Throughput of mcp-framing against the hashing floor and peer framings (issue 6).
//!
//! Every group measures, in the same run and over the same bytes:
//! - `mcp-framing-*`: this crate's encoder and decoder (decode + verify);
//! - `floor-*`: what a verifying decoder must at least pay (memcpy, CRC-32, SHA-256, both);
//! - `ldc-*`: tokio-util `LengthDelimitedCodec` (no checksum, no terminal frame);
//! - `aws-eventstream-*`: `aws-smithy-eventstream` (prelude and message CRC-32, headers);
//! - `serde_json-from_slice`: parsing the payload, what the consumer does next.
//!
//! Groups `message-<size>` carry messages of 64 B to 1 MiB at the default frame sizes
//! (`Throughput::Bytes`); groups `tokens-<size>` carry one message streamed as 100,000 chunks of
//! 16 or 48 bytes, one frame each (`Throughput::Elements`: frames per second).
//!
//! The clock is the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), so that other
//! processes on a shared machine do not inflate a measurement while it is preempted; set
//! `BENCH_CLOCK=wall` for criterion's wall clock.
//!
//! `scripts/bench-report` runs this and writes `docs/perf/results.md` with the ratios.
//! Quick look: `cargo bench --bench throughput -- message-64KiB`.

#[path = "support/thread_cpu_time.rs"]
mod thread_cpu_time;

use std::hint::black_box;
use std::time::Duration;

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder, write_message_to};
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::{Bytes, BytesMut};
use criterion::measurement::Measurement;
use criterion::{BatchSize, BenchmarkGroup, Criterion, Throughput};
use mcp_framing::{Event, StreamDecoder, StreamEncoder, StreamHead};
use sha2::{Digest, Sha256};
use thread_cpu_time::ThreadCpuTime;
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

/// Bytes of messages per iteration of a `message-*` bench (several small messages per stream,
/// so that a stream's HEAD and STREAM_END frames weigh little).
const STREAM_BYTES: usize = 256 * 1024;

/// Chunks per iteration of a `tokens-*` bench.
const TOKEN_CHUNKS: usize = 100_000;

/// A JSON-RPC response of exactly `len` bytes (at least 64): a text content item padded with
/// varied prose, so that `serde_json` has realistic work.
fn json_payload(len: usize) -> Vec<u8> {
    let (prefix, suffix): (&[u8], &[u8]) = if len < 128 {
        (br#"{"jsonrpc":"2.0","id":1,"result":{"text":""#, br#""}}"#)
    } else {
        (
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""#,
            br#""}],"isError":false}}"#,
        )
    };
    let prose = b"The quick brown fox jumps over the lazy dog; 0123456789 tokens stream by. ";
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(prefix);
    let filler = len - prefix.len() - suffix.len();
    out.extend(prose.iter().cycle().take(filler));
    out.extend_from_slice(suffix);
    assert_eq!(out.len(), len);
    serde_json::from_slice::<serde_json::Value>(&out).expect("bench payload is valid JSON");
    out
}

/// The framed stream of `messages` (each one message), in default-size frames.
fn framed_stream(head: StreamHead, messages: &[&[u8]]) -> Bytes {
    let mut enc = StreamEncoder::new(head);
    let mut wire = BytesMut::new();
    for message in messages {
        enc.message(message, &mut wire).unwrap();
    }
    enc.end(&mut wire).unwrap();
    wire.freeze()
}

/// The framed stream of one message pushed as `chunks`, one DATA frame each.
fn framed_chunks(head: StreamHead, chunks: &[&[u8]]) -> Bytes {
    let mut enc = StreamEncoder::new(head);
    let mut wire = BytesMut::new();
    for chunk in chunks {
        enc.push(chunk, &mut wire).unwrap();
    }
    enc.finish_message(&mut wire).unwrap();
    enc.end(&mut wire).unwrap();
    wire.freeze()
}

/// Decodes a whole stream; returns the number of verified messages (checked by the caller) and
/// the read buffer, so that freeing it happens outside the measurement, as for every decoder
/// here (a transport keeps its read buffer).
fn decode_stream(decoder: StreamDecoder, mut buf: BytesMut) -> (u64, BytesMut) {
    let mut decoder = decoder;
    let mut verified = 0;
    while let Some(event) = decoder.decode_eof(&mut buf).unwrap() {
        match event {
            Event::Message(message) => {
                black_box(message.bytes());
                verified += 1;
            }
            Event::MessageVerified(summary) => {
                black_box(summary);
                verified += 1;
            }
            Event::Chunk(chunk) => {
                black_box(chunk.unverified_bytes());
            }
            _ => {}
        }
    }
    (verified, buf)
}

fn ldc_frames(payloads: &[&[u8]]) -> Bytes {
    let mut codec = LengthDelimitedCodec::new();
    let mut wire = BytesMut::new();
    for payload in payloads {
        codec
            .encode(Bytes::copy_from_slice(payload), &mut wire)
            .unwrap();
    }
    wire.freeze()
}

fn ldc_decode(mut buf: BytesMut) -> (u64, BytesMut) {
    let mut codec = LengthDelimitedCodec::new();
    let mut frames = 0;
    while let Some(frame) = codec.decode_eof(&mut buf).unwrap() {
        black_box(&frame);
        frames += 1;
    }
    (frames, buf)
}

/// An event-stream message as AWS services send them (Bedrock, Transcribe): three string headers
/// and the payload.
fn aws_message(payload: Bytes) -> Message {
    Message::new(payload)
        .add_header(Header::new(
            ":event-type",
            HeaderValue::String("chunk".into()),
        ))
        .add_header(Header::new(
            ":content-type",
            HeaderValue::String("application/json".into()),
        ))
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String("event".into()),
        ))
}

fn aws_frames(payloads: &[&[u8]]) -> Bytes {
    let mut wire = Vec::new();
    for payload in payloads {
        write_message_to(&aws_message(Bytes::copy_from_slice(payload)), &mut wire).unwrap();
    }
    Bytes::from(wire)
}

fn aws_decode(mut buf: BytesMut) -> (u64, BytesMut) {
    let mut decoder = MessageFrameDecoder::new();
    let mut messages = 0;
    while let DecodedFrame::Complete(message) = decoder.decode_frame(&mut buf).unwrap() {
        black_box(message.payload());
        messages += 1;
    }
    assert!(buf.is_empty());
    (messages, buf)
}

fn fresh(wire: &Bytes) -> BytesMut {
    BytesMut::from(&wire[..])
}

/// Decoders, measured on the same wire bytes, each iteration from a fresh copy (not timed).
fn bench_decoders<M: Measurement>(
    group: &mut BenchmarkGroup<'_, M>,
    ours: &Bytes,
    ldc: &Bytes,
    aws: &Bytes,
    messages: u64,
    frames: u64,
) {
    let verify = || StreamDecoder::builder().assemble_messages(false).build();
    assert_eq!(decode_stream(verify(), fresh(ours)).0, messages);
    group.bench_function("mcp-framing-decode-verify", |b| {
        b.iter_batched(
            || fresh(ours),
            |buf| decode_stream(verify(), buf),
            BatchSize::LargeInput,
        );
    });
    assert_eq!(decode_stream(StreamDecoder::new(), fresh(ours)).0, messages);
    group.bench_function("mcp-framing-decode-assemble", |b| {
        b.iter_batched(
            || fresh(ours),
            |buf| decode_stream(StreamDecoder::new(), buf),
            BatchSize::LargeInput,
        );
    });
    assert_eq!(ldc_decode(fresh(ldc)).0, frames);
    group.bench_function("ldc-decode", |b| {
        b.iter_batched(|| fresh(ldc), ldc_decode, BatchSize::LargeInput);
    });
    assert_eq!(aws_decode(fresh(aws)).0, frames);
    group.bench_function("aws-eventstream-decode", |b| {
        b.iter_batched(|| fresh(aws), aws_decode, BatchSize::LargeInput);
    });
}

fn message_groups<M: Measurement>(c: &mut Criterion<M>) {
    let head = StreamHead::for_request(None);
    for (name, size) in [
        ("64B", 64),
        ("1KiB", 1024),
        ("64KiB", 64 * 1024),
        ("1MiB", 1024 * 1024),
    ] {
        let payload = json_payload(size);
        let count = (STREAM_BYTES / size).max(1);
        let messages: Vec<&[u8]> = vec![&payload[..]; count];
        let total = (size * count) as u64;
        let mut group = c.benchmark_group(format!("message-{name}"));
        group.throughput(Throughput::Bytes(total));
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        group.sample_size(30);

        // The floor: what verifying these bytes costs at least, message by message.
        let mut sink = vec![0u8; size];
        group.bench_function("floor-memcpy", |b| {
            b.iter(|| {
                for message in &messages {
                    sink.copy_from_slice(black_box(message));
                    black_box(&sink);
                }
            });
        });
        group.bench_function("floor-crc32", |b| {
            b.iter(|| {
                for message in &messages {
                    black_box(crc32fast::hash(black_box(message)));
                }
            });
        });
        group.bench_function("floor-sha256", |b| {
            b.iter(|| {
                for message in &messages {
                    black_box(Sha256::digest(black_box(message)));
                }
            });
        });
        group.bench_function("floor-crc32+sha256", |b| {
            b.iter(|| {
                for message in &messages {
                    black_box(crc32fast::hash(black_box(message)));
                    black_box(Sha256::digest(black_box(message)));
                }
            });
        });

        // Encoders: one stream (or codec) per iteration, into a buffer that keeps its capacity.
        let mut dst = BytesMut::new();
        group.bench_function("mcp-framing-encode", |b| {
            b.iter(|| {
                dst.clear();
                let mut enc = StreamEncoder::new(head);
                for message in &messages {
                    enc.message(black_box(message), &mut dst).unwrap();
                }
                enc.end(&mut dst).unwrap();
                black_box(&dst);
            });
        });
        let shared: Vec<Bytes> = messages.iter().map(|m| Bytes::copy_from_slice(m)).collect();
        group.bench_function("ldc-encode", |b| {
            b.iter(|| {
                dst.clear();
                let mut codec = LengthDelimitedCodec::new();
                for message in &shared {
                    codec.encode(message.clone(), &mut dst).unwrap();
                }
                black_box(&dst);
            });
        });
        let aws_template = aws_message(Bytes::copy_from_slice(&payload));
        let mut aws_dst = Vec::new();
        group.bench_function("aws-eventstream-encode", |b| {
            b.iter(|| {
                aws_dst.clear();
                for _ in 0..count {
                    write_message_to(&aws_template.clone(), &mut aws_dst).unwrap();
                }
                black_box(&aws_dst);
            });
        });

        bench_decoders(
            &mut group,
            &framed_stream(head, &messages),
            &ldc_frames(&messages),
            &aws_frames(&messages),
            count as u64,
            count as u64,
        );

        // Context: what the consumer does with the verified bytes next.
        group.bench_function("serde_json-from_slice", |b| {
            b.iter(|| {
                for message in &messages {
                    black_box(serde_json::from_slice::<serde_json::Value>(message).unwrap());
                }
            });
        });
        group.finish();
    }
}

fn token_groups<M: Measurement>(c: &mut Criterion<M>) {
    let head = StreamHead::for_request(None);
    for size in [16, 48] {
        // Tool-call arguments streamed by an LLM, one small chunk per frame.
        let message = json_payload(size * TOKEN_CHUNKS);
        let chunks: Vec<&[u8]> = message.chunks(size).collect();
        assert_eq!(chunks.len(), TOKEN_CHUNKS);
        let mut group = c.benchmark_group(format!("tokens-{size}B"));
        group.throughput(Throughput::Elements(TOKEN_CHUNKS as u64));
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(3));
        group.sample_size(20);

        // The floor per frame: copy each chunk; CRC-32 each chunk and stream it into SHA-256.
        let mut sink = Vec::with_capacity(message.len());
        group.bench_function("floor-memcpy", |b| {
            b.iter(|| {
                sink.clear();
                for chunk in &chunks {
                    sink.extend_from_slice(black_box(chunk));
                }
                black_box(&sink);
            });
        });
        group.bench_function("floor-crc32", |b| {
            b.iter(|| {
                for chunk in &chunks {
                    black_box(crc32fast::hash(black_box(chunk)));
                }
            });
        });
        group.bench_function("floor-sha256", |b| {
            b.iter(|| {
                let mut hasher = Sha256::new();
                for chunk in &chunks {
                    hasher.update(black_box(chunk));
                }
                black_box(hasher.finalize())
            });
        });
        group.bench_function("floor-crc32+sha256", |b| {
            b.iter(|| {
                let mut hasher = Sha256::new();
                for chunk in &chunks {
                    black_box(crc32fast::hash(black_box(chunk)));
                    hasher.update(black_box(chunk));
                }
                black_box(hasher.finalize())
            });
        });

        let mut dst = BytesMut::new();
        group.bench_function("mcp-framing-encode", |b| {
            b.iter(|| {
                dst.clear();
                let mut enc = StreamEncoder::new(head);
                for chunk in &chunks {
                    enc.push(black_box(chunk), &mut dst).unwrap();
                }
                enc.finish_message(&mut dst).unwrap();
                enc.end(&mut dst).unwrap();
                black_box(&dst);
            });
        });
        let shared: Vec<Bytes> = chunks.iter().map(|c| Bytes::copy_from_slice(c)).collect();
        group.bench_function("ldc-encode", |b| {
            b.iter(|| {
                dst.clear();
                let mut codec = LengthDelimitedCodec::new();
                for chunk in &shared {
                    codec.encode(chunk.clone(), &mut dst).unwrap();
                }
                black_box(&dst);
            });
        });
        let templates: Vec<Message> = shared.iter().map(|c| aws_message(c.clone())).collect();
        let mut aws_dst = Vec::new();
        group.bench_function("aws-eventstream-encode", |b| {
            b.iter(|| {
                aws_dst.clear();
                for template in &templates {
                    write_message_to(&template.clone(), &mut aws_dst).unwrap();
                }
                black_box(&aws_dst);
            });
        });

        bench_decoders(
            &mut group,
            &framed_chunks(head, &chunks),
            &ldc_frames(&chunks),
            &aws_frames(&chunks),
            1,
            TOKEN_CHUNKS as u64,
        );
        group.finish();
    }
}

fn run<M: Measurement>(mut c: Criterion<M>) {
    message_groups(&mut c);
    token_groups(&mut c);
    c.final_summary();
}

fn main() {
    if std::env::var("BENCH_CLOCK").as_deref() == Ok("wall") {
        run(Criterion::default().configure_from_args());
    } else {
        run(Criterion::default()
            .with_measurement(ThreadCpuTime)
            .configure_from_args());
    }
}
