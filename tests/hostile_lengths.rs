//! Hostile lengths (SPEC.md §2 "Header first", §6, §12): a header that claims more than the
//! limits is rejected as soon as its 20 bytes are in, without waiting for or allocating the
//! payload, and memory stays within the configured limits.
//!
//! This binary counts every allocation with the `cap` allocator. The scenarios run one after the
//! other in a single test (the allocator is process-wide): each sets a hard allocation limit of
//! its budget above what was allocated when it started (an allocation past it fails and aborts
//! the test binary) and samples the bytes allocated after every decoder call.

#[path = "support/common/mod.rs"]
mod common;

use std::alloc::System;

use bytes::BytesMut;
use cap::Cap;
use mcp_framing::internals::frame::HEADER_LEN;
use mcp_framing::{DecodeError, Event, StreamDecoder, StreamEncoder};

use common::{ATTEMPT, KEY, Raw, head};

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

/// Allocation accounting for one scenario.
struct Meter {
    name: &'static str,
    base: usize,
    budget: usize,
    peak: usize,
}

impl Meter {
    fn start(name: &'static str, budget: usize) -> Self {
        let base = ALLOCATOR.allocated();
        ALLOCATOR
            .set_limit(base + budget)
            .expect("limit above what is allocated");
        println!("{name}: budget {budget} bytes");
        Self {
            name,
            base,
            budget,
            peak: 0,
        }
    }

    fn sample(&mut self) {
        self.peak = self
            .peak
            .max(ALLOCATOR.allocated().saturating_sub(self.base));
    }

    /// Lifts the limit (before any assertion: a panic under the limit could not allocate its
    /// message) and checks the budget.
    fn finish(mut self) -> usize {
        self.sample();
        ALLOCATOR.set_limit(usize::MAX).expect("no limit");
        println!("{}: peak {} bytes allocated", self.name, self.peak);
        assert!(self.peak <= self.budget, "{}: over budget", self.name);
        self.peak
    }
}

/// Feeds `input` in pieces of `piece` bytes; returns the first error and how many bytes had been
/// fed when it came (the error must come before the payload it refers to).
fn feed(
    decoder: &mut StreamDecoder,
    meter: &mut Meter,
    input: &[u8],
    piece: usize,
) -> Option<(DecodeError, usize)> {
    let mut buf = BytesMut::new();
    let mut fed = 0;
    for chunk in input.chunks(piece) {
        buf.extend_from_slice(chunk);
        fed += chunk.len();
        loop {
            let result = decoder.decode(&mut buf);
            meter.sample();
            match result {
                Ok(Some(_event)) => {}
                Ok(None) => break,
                Err(err) => return Some((err, fed)),
            }
        }
    }
    None
}

fn head_frame() -> Vec<u8> {
    Raw::head(Some(KEY), ATTEMPT).build()
}

fn claiming(len: u32) -> Vec<u8> {
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.header_claiming(0x02, len, &[]);
    raw.build()
}

#[test]
fn hostile_lengths_are_rejected_at_the_header_and_memory_stays_within_the_limits() {
    // Warm up lazily allocated runtime state (stdout, thread-locals) outside any budget.
    println!("allocated before the scenarios: {}", ALLOCATOR.allocated());
    a_header_claiming_4_gib_is_rejected_before_its_payload();
    a_header_one_byte_over_the_frame_limit_is_rejected_before_its_payload();
    a_4_gib_frame_under_a_4_gib_limit_grows_only_with_the_bytes_received();
    a_data_header_over_the_message_limit_is_rejected_before_its_payload();
    assembling_a_message_stays_within_the_message_limit();
    a_non_assembling_decoder_stays_within_one_frame_whatever_the_message_size();
    println!(
        "peak allocated in this process: {}",
        ALLOCATOR.max_allocated()
    );
}

/// A DATA header claiming `len` bytes, followed by up to 64 KiB of its payload, fed one byte at a
/// time to a decoder with frame limit `max`: rejected with the header's 20th byte, within a
/// 64 KiB allocation budget.
fn assert_rejected_at_the_header(name: &'static str, len: u32, max: u32) {
    let mut input = claiming(len);
    input.extend(std::iter::repeat_n(0x5a, (len as usize).min(64 * KIB)));
    let mut meter = Meter::start(name, 64 * KIB);
    let mut decoder = StreamDecoder::builder()
        .max_frame_payload(max)
        .expect_request_key(KEY)
        .build();
    let result = feed(&mut decoder, &mut meter, &input, 1);
    meter.finish();
    let (err, fed) = result.expect("rejected");
    assert_eq!(err, DecodeError::FrameTooLarge { len, max });
    assert_eq!(fed, head_frame().len() + HEADER_LEN);
}

fn a_header_claiming_4_gib_is_rejected_before_its_payload() {
    assert_rejected_at_the_header("4 GiB claim, default limit", u32::MAX, 65_536);
}

fn a_header_one_byte_over_the_frame_limit_is_rejected_before_its_payload() {
    assert_rejected_at_the_header("64 KiB + 1 claim, default limit", 65_537, 65_536);
    assert_rejected_at_the_header("4 KiB + 1 claim, 4 KiB limit", 4097, 4096);
}

fn a_4_gib_frame_under_a_4_gib_limit_grows_only_with_the_bytes_received() {
    // A receiver configured to accept huge frames still reserves nothing from the declared
    // length: its buffer holds what arrived (here 1 MiB of a claimed 4 GiB - 1).
    let received = MIB;
    let mut input = claiming(u32::MAX);
    input.extend(std::iter::repeat_n(0x5a, received));
    let mut meter = Meter::start("4 GiB claim under a 4 GiB limit", 4 * received);
    let mut decoder = StreamDecoder::builder()
        .max_frame_payload(u32::MAX)
        .max_message_size(u64::MAX)
        .build();
    let outcome = feed(&mut decoder, &mut meter, &input, 8 * KIB);
    let peak = meter.finish();
    assert_eq!(outcome, None, "still waiting for the payload");
    assert!(peak >= received, "the received bytes are buffered");
}

fn a_data_header_over_the_message_limit_is_rejected_before_its_payload() {
    let first = vec![b'a'; 60_000];
    let mut raw = Raw::head(Some(KEY), ATTEMPT);
    raw.data(&first).header_claiming(0x02, 60_000, &[]);
    let prefix_len = raw.bytes.len();
    raw.bytes.extend(std::iter::repeat_n(b'b', 60_000));
    let mut meter = Meter::start("message limit", 256 * KIB);
    let mut decoder = StreamDecoder::builder()
        .max_message_size(100_000)
        .expect_request_key(KEY)
        .build();
    let result = feed(&mut decoder, &mut meter, &raw.bytes, 1000);
    meter.finish();
    let (err, fed) = result.expect("rejected");
    assert_eq!(
        err,
        DecodeError::MessageTooLarge {
            len: 120_000,
            max: 100_000
        }
    );
    // Rejected in the read that completed the second DATA header.
    assert!(
        fed - prefix_len < 1000,
        "waited for {} bytes",
        fed - prefix_len
    );
}

/// A stream of one `len`-byte message in DATA frames of `frame` bytes.
fn big_stream(len: usize, frame: usize) -> Vec<u8> {
    let mut enc = StreamEncoder::builder()
        .frame_size(frame)
        .max_message_size(len as u64)
        .build(head(Some(KEY), ATTEMPT));
    let mut wire = BytesMut::new();
    enc.message(&vec![b'x'; len], &mut wire).expect("message");
    enc.end(&mut wire).expect("end");
    wire.to_vec()
}

fn assembling_a_message_stays_within_the_message_limit() {
    let limit = 2 * MIB;
    let wire = big_stream(limit, 16 * KIB);
    // Budget: the assembled message (growing by doubling: at most twice the limit) plus one
    // frame of read buffer and slack for its growth.
    let mut meter = Meter::start("assembling 2 MiB", 2 * limit + 256 * KIB);
    let mut decoder = StreamDecoder::builder()
        .max_message_size(limit as u64)
        .build();
    let mut buf = BytesMut::new();
    let mut lens = Vec::with_capacity(1);
    for chunk in wire.chunks(8 * KIB) {
        buf.extend_from_slice(chunk);
        while let Ok(Some(event)) = decoder.decode(&mut buf) {
            meter.sample();
            if let Event::Message(m) = event {
                lens.push(m.bytes().len());
            }
        }
    }
    let end = decoder.decode_eof(&mut buf);
    meter.finish();
    assert_eq!(end, Ok(None));
    assert_eq!(lens, [limit]);
}

fn a_non_assembling_decoder_stays_within_one_frame_whatever_the_message_size() {
    let len = 8 * MIB;
    let wire = big_stream(len, 64 * KIB);
    let mut meter = Meter::start("streaming 8 MiB without assembling", 512 * KIB);
    let mut decoder = StreamDecoder::builder().assemble_messages(false).build();
    let mut buf = BytesMut::new();
    let mut received = 0;
    let mut verified = 0;
    for chunk in wire.chunks(8 * KIB) {
        buf.extend_from_slice(chunk);
        while let Ok(Some(event)) = decoder.decode(&mut buf) {
            meter.sample();
            match event {
                Event::Chunk(c) => received += c.unverified_bytes().len(),
                Event::MessageVerified(s) => verified = s.len,
                _ => {}
            }
        }
    }
    let end = decoder.decode_eof(&mut buf);
    meter.finish();
    assert_eq!(end, Ok(None));
    assert_eq!((received, verified), (len, len as u64));
}
