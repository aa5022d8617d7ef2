//! Replays every saved fuzz input through its target's oracle, on stable, as part of
//! `cargo test`: the crash inputs the fuzzers found (`fuzz/regressions/<target>/`) and the
//! committed seed corpus (`fuzz/corpus/<target>/`). The oracles are the fuzz crate's own
//! (`fuzz/src/`), compiled here as a module, so a fixed bug stays fixed without a nightly
//! compiler or libFuzzer.
#![cfg(all(feature = "codec", feature = "sse"))]

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

// `pub` items are for the fuzz crate's targets; here some are unused.
#[path = "../../fuzz/src/lib.rs"]
#[allow(unreachable_pub, dead_code)]
mod oracles;

/// Runs `oracle` on every saved input of `target`; returns how many there were.
fn replay(target: &str, oracle: impl Fn(&[u8])) -> usize {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut count = 0;
    for kind in ["regressions", "corpus"] {
        let Ok(entries) = fs::read_dir(fuzz.join(kind).join(target)) else {
            continue;
        };
        let mut paths: Vec<_> = entries.map(|entry| entry.unwrap().path()).collect();
        paths.sort();
        for path in paths {
            let bytes = fs::read(&path).unwrap();
            let outcome = catch_unwind(AssertUnwindSafe(|| oracle(&bytes)));
            assert!(
                outcome.is_ok(),
                "{} fails the {target} oracle; reproduce with: cargo +nightly fuzz run {target} {}",
                path.display(),
                path.display()
            );
            count += 1;
        }
    }
    count
}

#[test]
fn saved_inputs_pass_the_decode_raw_oracle() {
    let count = replay("decode_raw", |data| {
        oracles::decode_raw::run(data, &oracles::Unbounded);
    });
    assert!(count >= 10, "only {count} decode_raw inputs");
}

#[test]
fn saved_inputs_pass_the_decode_chunked_oracle() {
    let count = replay("decode_chunked", oracles::decode_chunked::run);
    assert!(count >= 10, "only {count} decode_chunked inputs");
}

#[test]
fn saved_inputs_pass_the_roundtrip_oracle() {
    let count = replay("roundtrip", oracles::roundtrip::run);
    assert!(count >= 10, "only {count} roundtrip inputs");
}

#[test]
fn saved_inputs_pass_the_fixed_checksums_oracle() {
    let count = replay("fixed_checksums", oracles::fixed_checksums::run);
    assert!(count >= 5, "only {count} fixed_checksums inputs");
}

#[test]
fn saved_inputs_pass_the_contract_json_oracle() {
    let count = replay("contract_json", oracles::contract_json::run);
    assert!(count >= 5, "only {count} contract_json inputs");
}

#[test]
fn saved_inputs_pass_the_compat_decode_oracle() {
    let count = replay("compat_decode", oracles::compat_decode::run);
    assert!(count >= 10, "only {count} compat_decode inputs");
}

#[test]
fn saved_inputs_pass_the_sse_decode_oracle() {
    let count = replay("sse_decode", oracles::sse_decode::run);
    assert!(count >= 10, "only {count} sse_decode inputs");
}

/// Found by `sse_decode` (`fuzz/regressions/sse_decode/frame_decoder_error_depends_on_chunking`):
/// the events that ended in the same read as a parse error were dropped, so a body was
/// `EventTooLarge` in one read but `UnexpectedEvent` in two, and frames before the error were
/// delivered or not depending on the reads.
#[test]
fn sse_frame_decoder_result_does_not_depend_on_how_the_body_is_split() {
    use mcp_framing::internals::frame::FrameHeader;
    use mcp_framing::{
        internals::sse::{SseFrameDecoder, SseFrameEncoder},
        mapping::SseError,
    };

    let keepalive = FrameHeader::for_payload(0x06, 1, &[]).to_bytes();
    let framed = SseFrameEncoder::new().to_events(&keepalive);
    let oversized = [b'x'; 100];
    let decode = |pieces: &[&[u8]]| {
        let mut decoder = SseFrameDecoder::with_max_event_data(64);
        let mut frames = bytes::BytesMut::new();
        let result = pieces.iter().try_for_each(|p| decoder.feed(p, &mut frames));
        (frames, result)
    };

    let unframed = [&b"data: {}\n\n"[..], &oversized].concat();
    let whole = decode(&[&unframed]);
    assert_eq!(whole, decode(&[&unframed[..10], &unframed[10..]]));
    assert!(matches!(whole.1, Err(SseError::UnexpectedEvent { .. })));

    let frame_then_oversized = [&framed[..], &oversized].concat();
    let whole = decode(&[&frame_then_oversized]);
    assert_eq!(whole, decode(&[&framed[..], &oversized]));
    assert_eq!(
        &whole.0[..],
        &keepalive[..],
        "the frame before the error is delivered"
    );
    assert!(matches!(whole.1, Err(SseError::EventTooLarge { max: 64 })));
}

#[cfg(all(feature = "http", feature = "dedupe"))]
#[test]
fn saved_inputs_pass_the_dedupe_request_oracle() {
    let count = replay("dedupe_request", oracles::dedupe_request::run);
    assert!(count >= 15, "only {count} dedupe_request inputs");
}

#[cfg(all(feature = "http", feature = "dedupe"))]
#[test]
fn saved_inputs_pass_the_http_headers_oracle() {
    let count = replay("http_headers", oracles::http_headers::run);
    assert!(count >= 10, "only {count} http_headers inputs");
}

#[test]
fn saved_inputs_pass_the_jsonrpc_scan_oracle() {
    let count = replay("jsonrpc_scan", oracles::jsonrpc_scan::run);
    assert!(count >= 10, "only {count} jsonrpc_scan inputs");
}
