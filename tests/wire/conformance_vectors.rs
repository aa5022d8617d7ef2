//! The conformance suite of SPEC.md §14: every vector in `tests/vectors/manifest.json` reaches its
//! verdict, however its bytes are split; the committed files are what the generator writes.

use crate::support::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::{Outcome, decode_one_shot, decode_pieces, sha256, truncation_name, vectors};
use mcp_framing::{DecodeError, Event, Limits, RequestKey, StreamDecoder};
use serde_json::Value;

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(vectors_dir().join("manifest.json")).expect("manifest");
    serde_json::from_str(&text).expect("manifest is JSON")
}

fn entries(manifest: &Value) -> &Vec<Value> {
    manifest["vectors"].as_array().expect("vectors array")
}

/// The decoder a manifest entry asks for (defaults of SPEC.md §6 for missing fields).
fn decoder_for(entry: &Value) -> StreamDecoder {
    let config = &entry["decoder"];
    let mut limits = Limits::default();
    if let Some(max) = config["max_frame_payload"].as_u64() {
        limits = limits.max_frame_payload(u32::try_from(max).expect("u32"));
    }
    if let Some(max) = config["max_message_size"].as_u64() {
        limits = limits.max_message_size(max);
    }
    let count = |name: &str| {
        config[name]
            .as_u64()
            .map(|n| u32::try_from(n).expect("u32"))
    };
    // The per-stream bounds (SPEC.md §6.1, §15) a vector sets.
    let bounds = vectors::Bounds {
        max_stream_bytes: config["max_stream_bytes"].as_u64(),
        max_messages: config["max_messages"].as_u64(),
        max_keepalives_in_a_row: count("max_keepalives_in_a_row"),
        max_ignorable_in_a_row: count("max_ignorable_in_a_row"),
        max_sse_comments_in_a_row: count("max_sse_comments_in_a_row"),
    };
    let mut builder = StreamDecoder::builder().limits(bounds.apply(limits));
    if let Some(key) = config["request_key"].as_str() {
        builder = builder.expect_request_key(key.parse::<RequestKey>().expect("key"));
    }
    builder.build()
}

/// Checks the verified messages of `outcome` against the manifest's `expect.messages`.
fn check_messages(outcome: &Outcome, expect: &Value) -> Result<(), String> {
    let messages = outcome.messages();
    let expected = expect["messages"].as_array().expect("messages");
    if messages.len() != expected.len() {
        return Err(format!(
            "{} messages, expected {}",
            messages.len(),
            expected.len()
        ));
    }
    for (message, want) in messages.iter().zip(expected) {
        if message.len() as u64 != want["len"].as_u64().expect("len") {
            return Err(format!("message length {}, expected {want}", message.len()));
        }
        if vectors::hex(&sha256(message)) != want["sha256"].as_str().expect("sha256") {
            return Err("message digest differs".to_owned());
        }
        let utf8 = std::str::from_utf8(message).ok();
        if utf8 != want["utf8"].as_str() {
            return Err(format!("message text {utf8:?}, expected {}", want["utf8"]));
        }
    }
    Ok(())
}

/// Checks `outcome` against the manifest's `expect` object; returns a description of the first
/// difference.
fn check(outcome: &Outcome, expect: &Value) -> Result<(), String> {
    check_messages(outcome, expect)?;
    let aborted = outcome.events.iter().find_map(|e| match e {
        Event::Aborted(abort) => Some(abort.clone()),
        _ => None,
    });
    match expect["verdict"].as_str().expect("verdict") {
        "clean" => {
            let Some(Event::End(summary)) = outcome.events.last().filter(|_| outcome.end.is_ok())
            else {
                return Err(format!("expected clean end, got {:?}", outcome.end));
            };
            // With the sentinel (SPEC.md §7 row 2, Regime A), or a final response delivered
            // without it (row 4, Regime B).
            if Some(summary.sentinel_seen) != expect["sentinel_seen"].as_bool() {
                return Err(format!(
                    "sentinel seen: {}, expected {}",
                    summary.sentinel_seen, expect["sentinel_seen"]
                ));
            }
        }
        "aborted" => {
            let want = &expect["abort"];
            let code = want["code"].as_u64().expect("code");
            let reason = want["reason"].as_str().expect("reason");
            let Some(abort) = aborted else {
                return Err(format!("expected an Aborted event, got {:?}", outcome.end));
            };
            if u64::from(u16::from(abort.code)) != code || abort.reason != reason {
                return Err(format!("abort {abort:?}, expected {want}"));
            }
            if outcome.end != Err(DecodeError::PeerAbort(abort)) {
                return Err(format!("expected PeerAbort, got {:?}", outcome.end));
            }
        }
        "error" => {
            let Err(err) = &outcome.end else {
                return Err("expected an error, got a clean end".to_owned());
            };
            if Some(err.kind()) != expect["error"].as_str() {
                return Err(format!("error {err:?}, expected {}", expect["error"]));
            }
            if truncation_name(err).as_deref() != expect["truncation"].as_str() {
                return Err(format!("error {err:?}, expected {}", expect["truncation"]));
            }
            if aborted.is_some() && matches!(err, DecodeError::Truncated { .. }) {
                return Err("truncated after an abort".to_owned());
            }
        }
        other => return Err(format!("unknown verdict {other}")),
    }
    // The regime follows from the verdict (SPEC.md §11.4): the sentinel or ABORT decided (A),
    // or the framing's own checks (B).
    let regime = match (
        expect["verdict"].as_str(),
        expect["sentinel_seen"].as_bool(),
    ) {
        (Some("clean"), Some(true)) | (Some("aborted"), Some(false)) => "A",
        (Some("clean" | "error"), Some(false)) => "B",
        other => return Err(format!("verdict and sentinel_seen {other:?}")),
    };
    if expect["regime"] != regime {
        return Err(format!("regime {}, expected {regime}", expect["regime"]));
    }
    if let (Some(kind), Err(err)) = (expect["error"].as_str(), &outcome.end) {
        if err.kind() != kind {
            return Err(format!("error kind {}, expected {kind}", err.kind()));
        }
    }
    Ok(())
}

/// The body decoder a manifest entry asks for: the crate's `BodyDecoder` (the path
/// `VerifiedResponse` and `mcp-frame` take) in the entry's SSE mapping, with the entry's decoder
/// and, if given, its `decoder.max_event_data` (otherwise the bound the limits imply).
#[cfg(feature = "sse")]
fn body_decoder_for(entry: &Value) -> mcp_framing::BodyDecoder {
    let mapping = match entry["mapping"].as_str() {
        Some(name @ ("sse" | "compat")) => name.parse().expect("a mapping"),
        other => panic!("not an SSE mapping: {other:?}"),
    };
    let body = mcp_framing::BodyDecoder::new(mapping, decoder_for(entry));
    match entry["decoder"]["max_event_data"].as_u64() {
        Some(max) => body.max_event_data(usize::try_from(max).expect("usize")),
        None => body,
    }
}

/// Decodes an SSE body (SPEC.md §15, §18) fed in `pieces` through `body`, taking the events
/// after every piece: an error in frames handed over before a mapping error comes first (body
/// order). Returns the frame-level outcome and the mapping error (kind and detail), if one ended
/// the body first.
#[cfg(feature = "sse")]
fn decode_sse_pieces<'a>(
    mut body: mcp_framing::BodyDecoder,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> (Outcome, Option<(&'static str, String)>) {
    use mcp_framing::{BodyDecoder, BodyError};
    let mut events = Vec::new();
    let drain = |body: &mut BodyDecoder, events: &mut Vec<Event>| loop {
        match body.next_event() {
            Ok(Some(event)) => events.push(event),
            Ok(None) => return None,
            Err(err) => {
                body.feed(b"\n\n");
                assert_eq!(body.next_event(), Err(err.clone()), "errors are final");
                return Some(err);
            }
        }
    };
    let mut end = None;
    for piece in pieces {
        body.feed(piece);
        end = drain(&mut body, &mut events);
        if end.is_some() {
            break;
        }
    }
    if end.is_none() {
        body.finish();
        end = drain(&mut body, &mut events);
    }
    match end {
        None => (
            Outcome {
                events,
                end: Ok(()),
            },
            None,
        ),
        Some(BodyError::Decode(err)) => (
            Outcome {
                events,
                end: Err(err),
            },
            None,
        ),
        Some(err) => (
            Outcome {
                events,
                end: Ok(()),
            },
            Some((err.kind(), format!("{err:?}"))),
        ),
    }
}

/// Checks an SSE decoding against the manifest: a mapping error is the verdict when it ended
/// the body, with the messages verified before it.
#[cfg(feature = "sse")]
fn check_sse(
    (outcome, mapping_error): &(Outcome, Option<(&'static str, String)>),
    expect: &Value,
) -> Result<(), String> {
    let Some((kind, detail)) = mapping_error else {
        return check(outcome, expect);
    };
    check_messages(outcome, expect)?;
    if expect["verdict"] != "error" || Some(*kind) != expect["error"].as_str() {
        return Err(format!("mapping error {detail}, expected {expect}"));
    }
    if !expect["truncation"].is_null() {
        return Err(format!("mapping error {detail}, expected a truncation"));
    }
    Ok(())
}

/// Offsets at which to split an SSE body: every offset up to 8 KiB; above, every offset within
/// 64 bytes of a line end or of either end, and every 997th (inside one long line the SSE
/// decoder only buffers).
#[cfg(feature = "sse")]
fn sse_cut_points(body: &[u8]) -> Vec<usize> {
    if body.len() <= 8 * 1024 {
        return (1..body.len()).collect();
    }
    let ends: Vec<usize> = body
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'\n' || b == b'\r')
        .map(|(at, _)| at)
        .chain([0, body.len()])
        .collect();
    (1..body.len())
        .filter(|&at| at % 997 == 0 || ends.iter().any(|&end| at.abs_diff(end) <= 64))
        .collect()
}

#[test]
fn every_vector_reaches_its_manifest_verdict_in_one_read_and_at_every_two_way_split() {
    let manifest = manifest();
    assert_eq!(manifest["spec_version"], 1);
    let mut failures = Vec::new();
    for entry in entries(&manifest) {
        let file = entry["file"].as_str().expect("file");
        match entry["mapping"].as_str() {
            Some("binary") => {}
            #[cfg(feature = "sse")]
            Some("sse" | "compat") => {
                check_sse_vector(file, entry, &mut failures);
                continue;
            }
            #[cfg(not(feature = "sse"))]
            Some("sse" | "compat") => continue, // needs the `sse` feature (CI runs --all-features)
            other => panic!("{file}: unknown mapping {other:?}"),
        }
        let bytes = std::fs::read(vectors_dir().join(file)).expect(file);
        let whole = decode_one_shot(decoder_for(entry), &bytes);
        if let Err(why) = check(&whole, &entry["expect"]) {
            failures.push(format!("{file} (one read): {why}"));
            continue;
        }
        let whole = whole.split_independent();
        for at in common::cut_points(&bytes) {
            let split = decode_pieces(decoder_for(entry), [&bytes[..at], &bytes[at..]]);
            if split.split_independent() != whole {
                failures.push(format!("{file}: split at {at} changes the events"));
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One vector of an SSE mapping (SPEC.md §15, §18): in one read and split in two at every cut
/// point.
#[cfg(feature = "sse")]
fn check_sse_vector(file: &str, entry: &Value, failures: &mut Vec<String>) {
    let body = std::fs::read(vectors_dir().join(file)).expect(file);
    let whole = decode_sse_pieces(body_decoder_for(entry), [&body[..]]);
    if let Err(why) = check_sse(&whole, &entry["expect"]) {
        failures.push(format!("{file} (one read): {why}"));
        return;
    }
    let whole = (whole.0.split_independent(), whole.1);
    for at in sse_cut_points(&body) {
        let (outcome, err) = decode_sse_pieces(body_decoder_for(entry), [&body[..at], &body[at..]]);
        if (outcome.split_independent(), err) != whole {
            failures.push(format!("{file}: split at {at} changes the verdict"));
            return;
        }
    }
}

#[test]
fn vectors_cover_every_error_kind_truncation_and_frame_kind() {
    let manifest = manifest();
    let mut errors = BTreeSet::new();
    let mut truncations = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    let mut verdicts = BTreeSet::new();
    let mut sse_verdicts = BTreeSet::new();
    let mut compat_verdicts = BTreeSet::new();
    let mut compat_truncations = BTreeSet::new();
    for entry in entries(&manifest) {
        let expect = &entry["expect"];
        verdicts.insert(expect["verdict"].as_str().expect("verdict").to_owned());
        if entry["mapping"] == "sse" {
            // Of the SSE mapping: every verdict, every SSE error, truncation, a frame-level error.
            sse_verdicts.insert(expect["error"].as_str().unwrap_or("clean").to_owned());
            continue;
        }
        if entry["mapping"] == "compat" {
            // Of the compatible mapping: every verdict, every mapping error, every truncation
            // point it can reach, and frame-level errors.
            compat_verdicts.insert(expect["error"].as_str().unwrap_or("clean").to_owned());
            if let Some(at) = expect["truncation"].as_str() {
                compat_truncations.insert(at.to_owned());
            }
            continue;
        }
        if let Some(error) = expect["error"].as_str() {
            errors.insert(error.to_owned());
        }
        if let Some(at) = expect["truncation"].as_str() {
            truncations.insert(at.to_owned());
        }
        let file = entry["file"].as_str().expect("file");
        if file.starts_with("valid_") {
            let bytes = std::fs::read(vectors_dir().join(file)).expect(file);
            for span in common::frame_spans(&bytes) {
                kinds.insert(match bytes[span.start + 3] {
                    kind @ 0x01..=0x06 => kind,
                    0x80..=0xff => 0x80,
                    other => panic!("{file}: kind {other:#x} in a valid vector"),
                });
            }
        }
    }
    let all_errors = [
        "BadMagic",
        "UnsupportedVersion",
        "HeaderChecksumMismatch",
        "PayloadChecksumMismatch",
        "UnknownFrameKind",
        "InvalidFrameLength",
        "FrameTooLarge",
        "MessageTooLarge",
        "StreamTooLarge",
        "TooManyMessages",
        "TooManyKeepAlives",
        "TooManyIgnorableFrames",
        "SequenceGap",
        "SequenceReplay",
        "ForeignFrame",
        "UnexpectedFrame",
        "LengthMismatch",
        "DigestMismatch",
        "MessageCountMismatch",
        "RequestKeyMismatch",
        "InvalidAbort",
        "TrailingData",
        "Truncated",
        "PeerAbort",
    ];
    let all_errors: BTreeSet<String> = all_errors.iter().map(|s| s.to_string()).collect();
    assert_eq!(errors, all_errors);
    let all_truncations = [
        "NoFrame",
        "InHeader",
        "InPayload",
        "InMessage",
        "BetweenMessages",
    ];
    assert_eq!(
        truncations,
        all_truncations.iter().map(|s| s.to_string()).collect()
    );
    assert_eq!(kinds, BTreeSet::from([1, 2, 3, 4, 5, 6, 0x80]));
    assert_eq!(
        verdicts,
        BTreeSet::from(["aborted", "clean", "error"].map(str::to_owned))
    );
    let sse = [
        "clean",
        "PeerAbort",
        "UnexpectedEvent",
        "InvalidBase64",
        "EventTooLarge",
        "TooManyComments",
        "DigestMismatch",
        "Truncated",
    ];
    assert_eq!(sse_verdicts, sse.iter().map(|s| s.to_string()).collect());
    let compat = [
        "clean",
        "PeerAbort",
        "UnframedEvent",
        "EventMissing",
        "SplitMessage",
        "EventLengthMismatch",
        "InvalidRecord",
        "UnexpectedEvent",
        "EventTooLarge",
        "PayloadChecksumMismatch",
        "HeaderChecksumMismatch",
        "DigestMismatch",
        "ForeignFrame",
        "TrailingData",
        "MessageTooLarge",
        "Truncated",
    ];
    assert_eq!(
        compat_verdicts,
        compat.iter().map(|s| s.to_string()).collect()
    );
    assert_eq!(
        compat_truncations,
        BTreeSet::from(["NoFrame", "InPayload", "InMessage", "BetweenMessages"].map(str::to_owned))
    );
}

/// The prefix offsets to check of a body of `len` bytes whose verdict changes at `steps`: every
/// offset up to 8 KiB; above, every offset within 64 bytes of a step or of either end, and every
/// 997th.
fn prefix_cuts(len: usize, steps: &[usize]) -> Vec<usize> {
    (0..=len)
        .filter(|&at| {
            len <= 8 * 1024
                || at % 997 == 0
                || steps
                    .iter()
                    .chain(&[0, len])
                    .any(|&step| at.abs_diff(step) <= 64)
        })
        .collect()
}

/// What the crate makes of a prefix of a vector's body, in the manifest's words (SPEC.md §14
/// `prefixes`): `truncated`, `delivered`, `clean` or `aborted`, or the unexpected verdict.
fn prefix_verdict(entry: &Value, prefix: &[u8]) -> String {
    let decoder = decoder_for(entry);
    let (end, outcome) = match entry["mapping"].as_str() {
        Some("binary") => {
            let mut decoder = decoder;
            let events = decoder.decode_to_end(&mut bytes::BytesMut::from(prefix));
            let end = match events.last() {
                Some(Err(err)) => Err(err.clone()),
                _ => Ok(()),
            };
            (end, decoder.outcome())
        }
        #[cfg(feature = "sse")]
        Some("sse" | "compat") => {
            let mut body = body_decoder_for(entry);
            body.feed(prefix);
            body.finish();
            let end = loop {
                match body.next_event() {
                    Ok(Some(_)) => {}
                    Ok(None) => break Ok(()),
                    Err(mcp_framing::BodyError::Decode(err)) => break Err(err),
                    Err(err) => return format!("mapping error {err}"),
                }
            };
            (end, body.outcome())
        }
        other => panic!("mapping {other:?} (the SSE mappings need the `sse` feature)"),
    };
    match end {
        Ok(()) if outcome.is_clean() && outcome.sentinel_seen => "clean".to_owned(),
        Ok(()) if outcome.is_clean() && outcome.regime == mcp_framing::outcome::Regime::B => {
            "delivered".to_owned()
        }
        Err(DecodeError::Truncated { .. }) if !outcome.is_clean() => "truncated".to_owned(),
        Err(DecodeError::PeerAbort(_)) => "aborted".to_owned(),
        other => format!("{other:?} with the outcome {outcome:?}"),
    }
}

#[test]
fn every_prefix_of_a_valid_vector_reaches_the_verdict_the_manifest_gives_it() {
    let manifest = manifest();
    let mut failures = Vec::new();
    let mut delivered = 0;
    for entry in entries(&manifest) {
        let file = entry["file"].as_str().expect("file");
        if !file.starts_with("valid_") {
            assert!(
                entry.get("prefixes").is_none(),
                "{file}: prefixes of an invalid vector"
            );
            continue;
        }
        #[cfg(not(feature = "sse"))]
        if entry["mapping"] != "binary" {
            continue; // needs the `sse` feature (CI runs --all-features)
        }
        let bytes = std::fs::read(vectors_dir().join(file)).expect(file);
        let steps: Vec<(usize, &str)> = entry["prefixes"]
            .as_array()
            .expect("prefixes")
            .iter()
            .map(|step| {
                let from = usize::try_from(step["from"].as_u64().expect("from")).expect("usize");
                (from, step["verdict"].as_str().expect("verdict"))
            })
            .collect();
        let first_delivered = steps
            .iter()
            .find(|(_, v)| *v == "delivered")
            .map(|(at, _)| *at);
        assert_eq!(
            entry["delivered_from"]
                .as_u64()
                .map(|at| usize::try_from(at).expect("usize")),
            first_delivered,
            "{file}: delivered_from is the first delivered step"
        );
        let whole = steps.last().expect("a step").1;
        let expect = &entry["expect"];
        let want_whole = match (
            expect["verdict"].as_str(),
            expect["sentinel_seen"].as_bool(),
        ) {
            (Some("clean"), Some(true)) => "clean",
            (Some("clean"), Some(false)) => "delivered",
            (Some("aborted"), _) => "aborted",
            other => panic!("{file}: a valid vector with {other:?}"),
        };
        assert_eq!(
            whole, want_whole,
            "{file}: the last step is the whole verdict"
        );
        let cuts = prefix_cuts(
            bytes.len(),
            &steps.iter().map(|(at, _)| *at).collect::<Vec<_>>(),
        );
        for cut in cuts {
            let want = steps
                .iter()
                .rev()
                .find(|(from, _)| *from <= cut)
                .expect("a step from 0")
                .1;
            let got = prefix_verdict(entry, &bytes[..cut]);
            if got != want {
                failures.push(format!(
                    "{file} cut at {cut}: {got}, the manifest says {want}"
                ));
                break;
            }
            delivered += usize::from(want == "delivered");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(delivered > 0, "some prefixes are delivered");
}

#[cfg(feature = "sse")]
#[test]
fn committed_vectors_match_the_generator() {
    let generated = vectors::all_mappings();
    let dir = vectors_dir();
    // `MCP_FRAMING_WRITE_VECTORS=1 cargo test --test wire conformance_vectors::` writes the files (the
    // generator is deterministic); the comparison below then holds.
    if std::env::var_os("MCP_FRAMING_WRITE_VECTORS").is_some() {
        for vector in &generated {
            std::fs::write(dir.join(&vector.file), &vector.bytes).expect("vector written");
        }
        std::fs::write(dir.join("manifest.json"), vectors::manifest(&generated))
            .expect("manifest written");
    }
    let mut stale = Vec::new();
    for vector in &generated {
        let committed = std::fs::read(dir.join(&vector.file)).unwrap_or_default();
        if committed != vector.bytes {
            stale.push(vector.file.clone());
        }
    }
    let committed_manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap_or_default();
    if committed_manifest != vectors::manifest(&generated) {
        stale.push("manifest.json".to_owned());
    }
    let names: BTreeSet<&str> = generated.iter().map(|v| v.file.as_str()).collect();
    for file in std::fs::read_dir(&dir).expect("vectors dir") {
        let name = file
            .expect("entry")
            .file_name()
            .into_string()
            .expect("utf-8");
        if (name.ends_with(".bin") || name.ends_with(".sse")) && !names.contains(name.as_str()) {
            stale.push(format!("{name} (not generated)"));
        }
    }
    assert!(
        stale.is_empty(),
        "tests/vectors/ is out of date, run \
         `MCP_FRAMING_WRITE_VECTORS=1 cargo test --all-features --test wire conformance_vectors::`: {stale:?}"
    );
}

#[test]
fn the_worked_example_of_the_spec_is_the_single_message_vector() {
    let bytes = std::fs::read(vectors_dir().join("valid_single_message.bin")).expect("vector");
    // SPEC.md §13, field by field.
    let frames = common::frame_spans(&bytes);
    assert_eq!(frames.len(), 4);
    let expect = [
        (0x01u8, 0xa1a2_a3a4u32, 32u32),
        (0x02, 0xa1a2_a3a5, 11),
        (0x03, 0xa1a2_a3a6, 40),
        (0x04, 0xa1a2_a3a7, 8),
    ];
    for (span, (kind, seq, len)) in frames.iter().zip(expect) {
        let frame = &bytes[span.clone()];
        assert_eq!(&frame[..4], &[0x9f, 0x4d, 0x01, kind]);
        assert_eq!(frame[4..8], seq.to_be_bytes());
        assert_eq!(frame[8..12], len.to_be_bytes());
        assert_eq!(frame[12..16], crc32fast::hash(&frame[20..]).to_be_bytes());
        assert_eq!(frame[16..20], crc32fast::hash(&frame[..16]).to_be_bytes());
    }
    assert_eq!(
        vectors::hex(&bytes[20..52]),
        "00112233445566778899aabbccddeeffa1a2a3a4b1b2b3b4c1c2c3c4d1d2d3d4"
    );
    assert_eq!(&bytes[72..83], br#"{"ok":true}"#);
    assert_eq!(bytes[103..111], 11u64.to_be_bytes());
    assert_eq!(bytes[111..143], sha256(br#"{"ok":true}"#));
    assert_eq!(bytes[163..171], 1u64.to_be_bytes());
    // The README's annotated hex dump shows these bytes.
    let readme = std::fs::read_to_string(vectors_dir().join("README.md")).expect("README");
    let dump: String = readme
        .lines()
        .skip_while(|l| !l.starts_with("```text"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .filter_map(|l| l.split("  ").nth(1))
        .flat_map(|hex| hex.split_whitespace())
        .collect();
    assert_eq!(dump, vectors::hex(&bytes));
    // So does SPEC.md §13, CRCs filled in.
    let spec = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("SPEC.md"))
        .expect("SPEC.md");
    let example: String = spec
        .split("## §13")
        .nth(1)
        .expect("§13")
        .lines()
        .skip_while(|l| !l.starts_with("```text"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .flat_map(str::split_whitespace)
        .filter(|token| token.bytes().all(|b| b.is_ascii_hexdigit()))
        .collect();
    assert_eq!(example, vectors::hex(&bytes));
}

#[test]
fn the_second_worked_example_of_the_spec_is_the_aborted_worked_example_vector() {
    let bytes = vectors::aborted_worked_example();
    let committed =
        std::fs::read(vectors_dir().join("valid_aborted_worked_example.bin")).expect("vector");
    assert_eq!(committed, bytes);
    // SPEC.md §13, the second text block, CRCs filled in.
    let spec = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("SPEC.md"))
        .expect("SPEC.md");
    let example: String = spec
        .split("## §13")
        .nth(1)
        .expect("§13")
        .split("```text")
        .nth(2)
        .expect("a second example")
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .flat_map(str::split_whitespace)
        .filter(|token| token.bytes().all(|b| b.is_ascii_hexdigit()))
        .collect();
    assert_eq!(example, vectors::hex(&bytes));
    // What the text says of it: aborted with one message; the cuts it names.
    let err = StreamDecoder::new().decode_all(&bytes).unwrap_err();
    assert_eq!(
        err,
        DecodeError::PeerAbort(mcp_framing::Abort::new(
            mcp_framing::AbortCode::Overloaded,
            "draining"
        ))
    );
    let truncation = |cut: usize| match StreamDecoder::new().decode_all(&bytes[..cut]) {
        Err(DecodeError::Truncated { at, .. }) => at,
        other => panic!("cut at {cut}: {other:?}"),
    };
    assert_eq!(
        truncation(72),
        mcp_framing::Truncation::BetweenMessages { messages: 0 }
    );
    assert_eq!(
        truncation(207),
        mcp_framing::Truncation::InMessage { message_bytes: 4 }
    );
}
