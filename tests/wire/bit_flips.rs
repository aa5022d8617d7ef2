//! Every single-bit flip of every valid vector is detected: never a clean end, never a message
//! other than the stream's. Run with `--nocapture` to see which error caught how many flips.

use crate::support::common;

use std::collections::BTreeMap;

use common::vectors::{self, Vector};
use common::{Outcome, decode_one_shot, fix_header_crc, frame_spans};
use mcp_framing::internals::frame::HEADER_LEN;

fn valid_vectors() -> Vec<Vector> {
    vectors::all()
        .into_iter()
        .filter(Vector::is_valid)
        .collect()
}

/// Byte offsets to flip: all of them for vectors up to 8 KiB; for the large ones every header
/// and control-frame byte, the first and last 16 bytes of every DATA payload and every 251st byte
/// in between (a flip inside a payload is caught by the same CRC wherever it is).
fn flip_offsets(bytes: &[u8]) -> Vec<usize> {
    if bytes.len() <= 8 * 1024 {
        return (0..bytes.len()).collect();
    }
    let mut offsets = Vec::new();
    for span in frame_spans(bytes) {
        let payload = span.start + HEADER_LEN..span.end;
        for at in span.clone() {
            let inner = bytes[span.start + 3] == 0x02
                && at >= payload.start + 16
                && at + 16 < payload.end
                && at % 251 != 0;
            if !inner {
                offsets.push(at);
            }
        }
    }
    offsets
}

/// Where the checked bytes of a vector end: its length, or, for a final response delivered
/// without its sentinel (SPEC.md §7 row 4), where the cut frame's unchecked bytes start: at its
/// start while its header is not whole, after its header otherwise. A header is trusted only once
/// whole (the magic and the version are checked as they arrive, §2) and a payload once its CRC
/// arrived, so a flip in those bytes leaves the response delivered, or breaks the magic or the
/// version.
fn checked_end(bytes: &[u8]) -> usize {
    match frame_spans(bytes).last() {
        Some(span) if span.len() < HEADER_LEN => span.start,
        Some(span)
            if span.len()
                < HEADER_LEN
                    + u32::from_be_bytes(bytes[span.start + 8..span.start + 12].try_into().unwrap())
                        as usize =>
        {
            span.start + HEADER_LEN
        }
        _ => bytes.len(),
    }
}

/// Messages delivered by `flipped` must be the first messages of `original`.
fn assert_only_genuine_messages(original: &Outcome, flipped: &Outcome, context: &str) {
    let genuine = original.messages();
    let delivered = flipped.messages();
    assert!(
        delivered.len() <= genuine.len() && delivered[..] == genuine[..delivered.len()],
        "{context}: a message that is not the stream's was delivered"
    );
}

#[test]
fn every_single_bit_flip_of_every_valid_vector_is_detected() {
    let mut caught: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut flips = 0;
    for vector in valid_vectors() {
        let original = decode_one_shot(vector.decoder(), &vector.bytes);
        let checked = checked_end(&vector.bytes);
        let mut bytes = vector.bytes.clone();
        for at in flip_offsets(&vector.bytes) {
            for bit in 0..8 {
                bytes[at] ^= 1 << bit;
                let flipped = decode_one_shot(vector.decoder(), &bytes);
                bytes[at] ^= 1 << bit;
                let context = format!("{} byte {at} bit {bit}", vector.file);
                if at >= checked {
                    // In the frame a cut left partial, after a delivered final response.
                    match &flipped.end {
                        Ok(()) => assert_eq!(flipped, original, "{context}"),
                        Err(err) => assert!(
                            ["BadMagic", "UnsupportedVersion"].contains(&err.kind()),
                            "{context}: {err}"
                        ),
                    }
                    continue;
                }
                let Err(err) = &flipped.end else {
                    panic!("{context}: undetected, clean end");
                };
                assert_ne!(err.kind(), "PeerAbort", "{context}: undetected");
                assert_ne!(
                    err.kind(),
                    "Truncated",
                    "{context}: a flip is not a truncation"
                );
                assert_only_genuine_messages(&original, &flipped, &context);
                *caught.entry(err.kind()).or_default() += 1;
                flips += 1;
            }
        }
    }
    println!("{flips} single-bit flips, caught by: {caught:?}");
    // A single-bit error is caught by the magic, the version or a CRC-32, before any frame rule.
    let expected = [
        "BadMagic",
        "HeaderChecksumMismatch",
        "PayloadChecksumMismatch",
        "UnsupportedVersion",
    ];
    assert_eq!(caught.keys().copied().collect::<Vec<_>>(), expected);
}

/// Flips a bit and recomputes the CRCs of the frame it is in, as a buggy re-framing proxy
/// would: only the stream rules (sequence, lengths, digest, counts, key) are left to notice.
fn flip_with_crcs_fixed(bytes: &mut [u8], at: usize, bit: u8) {
    bytes[at] ^= 1 << bit;
    let span = frame_spans(bytes)
        .into_iter()
        .find(|s| s.contains(&at))
        .expect("in a frame");
    if at >= span.start + 12 && at < span.start + 16 {
        return; // the flip is in the payload CRC itself: leave it wrong
    }
    if at >= span.start + HEADER_LEN {
        let crc = crc32fast::hash(&bytes[span.start + HEADER_LEN..span.end]);
        bytes[span.start + 12..span.start + 16].copy_from_slice(&crc.to_be_bytes());
    }
    if at < span.start + 16 || at >= span.start + HEADER_LEN {
        fix_header_crc(bytes, span.start);
    }
}

#[test]
fn a_bit_flip_with_recomputed_crcs_never_yields_a_clean_end_with_other_messages() {
    // CRCs detect accidents; behind a CRC-fixing proxy the sequence numbers, the length rules,
    // the digest, the message count and the request key still refuse any other message content.
    // Some flips are legitimately invisible: the attempt id's last 12 bytes and the abort reason
    // are opaque to the receiver (SPEC.md §12: integrity against tampering is TLS's job).
    let mut caught: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut flips = 0;
    for vector in valid_vectors().iter().filter(|v| v.bytes.len() <= 8 * 1024) {
        let original = decode_one_shot(vector.decoder(), &vector.bytes);
        // The partial frame after a delivered final response has no CRCs to fix (see above).
        for at in 0..checked_end(&vector.bytes) {
            for bit in 0..8 {
                let mut bytes = vector.bytes.clone();
                flip_with_crcs_fixed(&mut bytes, at, bit);
                let flipped = decode_one_shot(vector.decoder(), &bytes);
                let context = format!("{} byte {at} bit {bit}", vector.file);
                assert_only_genuine_messages(&original, &flipped, &context);
                let kind = match &flipped.end {
                    Ok(()) => {
                        assert_eq!(flipped.messages(), original.messages(), "{context}");
                        "undetected (clean, same messages)"
                    }
                    Err(err) => err.kind(),
                };
                *caught.entry(kind).or_default() += 1;
                flips += 1;
            }
        }
    }
    println!("{flips} single-bit flips with recomputed CRCs, outcome: {caught:?}");
    for rule in [
        "SequenceGap",
        "ForeignFrame",
        "LengthMismatch",
        "DigestMismatch",
        "MessageCountMismatch",
        "RequestKeyMismatch",
        "UnknownFrameKind",
        "InvalidFrameLength",
    ] {
        assert!(caught.contains_key(rule), "no flip caught by {rule}");
    }
}
