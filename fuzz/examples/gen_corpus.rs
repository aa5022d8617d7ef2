//! Generates the committed seed corpus under `fuzz/corpus/<target>/`.
//!
//! Run from the repository root: `cargo run --manifest-path fuzz/Cargo.toml --example gen_corpus`.
//!
//! Seeds come from the conformance vectors (`tests/vectors/*.bin`, when present), from streams
//! written here with the crate's encoder (and a few hand-built frames the encoder never writes),
//! and from every saved crash input (`fuzz/regressions/<target>/*`). Each target gets them in its
//! own input layout (a limits byte, a read schedule, a repair mode, ...). The output is
//! deterministic: rerunning it on the same sources rewrites the same files.

use std::fs;
use std::path::{Path, PathBuf};

use bytes::BytesMut;
use mcp_framing::internals::frame::FrameHeader;
use mcp_framing::internals::sse::SseFrameEncoder;
use mcp_framing::{AbortCode, AttemptId, RequestKey, StreamEncoder, StreamHead};
use mcp_framing_fuzz::limits::{DEFAULT_LIMITS_BYTE, EXPECTED_KEY};

/// A seed stream and whether it decodes to a clean or aborted end (a base for `fixed_checksums`).
struct Seed {
    name: String,
    bytes: Vec<u8>,
    valid: bool,
}

fn head(attempt_prefix: [u8; 4], key: Option<[u8; 16]>) -> StreamHead {
    let mut attempt = [
        0xa1, 0xa2, 0xa3, 0xa4, 0xb1, 0xb2, 0xb3, 0xb4, 0xc1, 0xc2, 0xc3, 0xc4, 0xd1, 0xd2, 0xd3,
        0xd4,
    ];
    attempt[..4].copy_from_slice(&attempt_prefix);
    StreamHead {
        request_key: key.map(RequestKey::from_bytes),
        attempt_id: AttemptId::from_bytes(attempt),
    }
}

fn encoded(
    frame_size: usize,
    head: StreamHead,
    write: impl FnOnce(&mut StreamEncoder, &mut BytesMut),
) -> Vec<u8> {
    let mut encoder = StreamEncoder::builder().frame_size(frame_size).build(head);
    let mut wire = BytesMut::new();
    write(&mut encoder, &mut wire);
    wire.to_vec()
}

/// Streams written with the encoder, and a few built frame by frame.
fn encoder_seeds() -> Vec<Seed> {
    let spec = head([0xa1, 0xa2, 0xa3, 0xa4], Some(EXPECTED_KEY));
    let ok = |name: &str, bytes: Vec<u8>| Seed {
        name: name.into(),
        bytes,
        valid: true,
    };
    let bad = |name: &str, bytes: Vec<u8>| Seed {
        name: name.into(),
        bytes,
        valid: false,
    };
    let spec_example = encoded(16 * 1024, spec, |e, w| {
        e.message(br#"{"ok":true}"#, w).unwrap();
        e.end(w).unwrap();
    });
    let two_messages = encoded(8, head([0, 0, 0, 7], None), |e, w| {
        e.message(br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#, w)
            .unwrap();
        for piece in [
            &b"{\"jsonrpc\":\"2.0\","[..],
            b"\"id\":1,",
            b"\"result\":{}}",
        ] {
            e.push(piece, w).unwrap();
        }
        e.finish_message(w).unwrap();
        e.end(w).unwrap();
    });
    let mut seeds = vec![
        ok("spec_example", spec_example.clone()),
        ok("two_messages_in_small_frames", two_messages.clone()),
        ok(
            "keepalives_and_empty_message",
            encoded(4, head([1, 2, 3, 4], None), |e, w| {
                e.keep_alive(w).unwrap();
                e.finish_message(w).unwrap();
                e.push(b"[1,", w).unwrap();
                e.keep_alive(w).unwrap();
                e.push(b"2]", w).unwrap();
                e.finish_message(w).unwrap();
                e.end(w).unwrap();
            }),
        ),
        ok(
            "no_messages",
            encoded(1024, head([9, 9, 9, 9], None), |e, w| e.end(w).unwrap()),
        ),
        ok(
            "abort_inside_message",
            encoded(16, spec, |e, w| {
                e.push(br#"{"partial":"#, w).unwrap();
                e.abort(AbortCode::UpstreamFailed, "model backend went away", w)
                    .unwrap();
            }),
        ),
        ok(
            "abort_between_messages",
            encoded(64, head([0x10, 0, 0, 0], None), |e, w| {
                e.message(b"{}", w).unwrap();
                e.abort(AbortCode::Other(700), "", w).unwrap();
            }),
        ),
        ok(
            "sequence_wraps",
            encoded(2, head([0xff, 0xff, 0xff, 0xfd], None), |e, w| {
                e.message(b"abcdef", w).unwrap();
                e.end(w).unwrap();
            }),
        ),
        ok(
            "message_in_many_frames",
            encoded(512, head([0x55, 0x55, 0x55, 0x55], None), |e, w| {
                let message: Vec<u8> = (0..3000u32)
                    .map(|i| b"0123456789abcdef"[(i % 16) as usize])
                    .collect();
                e.message(&message, w).unwrap();
                e.end(w).unwrap();
            }),
        ),
    ];
    // An extension frame (kind 0x80) between HEAD and the message: the encoder never writes one.
    let ext = head([0, 0, 1, 0], None);
    let mut frames = Vec::new();
    let mut sequence = ext.initial_sequence();
    let mut frame = |kind: u8, payload: &[u8]| {
        frames.extend_from_slice(&FrameHeader::for_payload(kind, sequence, payload).to_bytes());
        frames.extend_from_slice(payload);
        sequence = sequence.wrapping_add(1);
    };
    let mut head_payload = [0u8; 32];
    head_payload[16..].copy_from_slice(ext.attempt_id.as_bytes());
    frame(0x01, &head_payload);
    frame(0x80, b"extension");
    frame(0x02, b"{}");
    let mut end = 2u64.to_be_bytes().to_vec();
    end.extend_from_slice(&sha2_digest(b"{}"));
    frame(0x03, &end);
    frame(0x04, &1u64.to_be_bytes());
    seeds.push(ok("extension_frame", frames));

    // Invalid ones, for the targets that take any bytes.
    let n = two_messages.len();
    seeds.push(bad("cut_in_header", two_messages[..10].to_vec()));
    seeds.push(bad("cut_in_payload", two_messages[..60].to_vec()));
    seeds.push(bad(
        "cut_inside_message",
        two_messages[..n - 28 - 60 - 20 - 4].to_vec(),
    ));
    seeds.push(bad("cut_before_sentinel", two_messages[..n - 28].to_vec()));
    let mut trailing = spec_example.clone();
    trailing.extend_from_slice(b"\n");
    seeds.push(bad("trailing_byte", trailing));
    seeds.push(bad(
        "unframed_json",
        br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec(),
    ));
    seeds
}

fn sha2_digest(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

/// `tests/vectors/*.bin`; `valid_*` are bases for `fixed_checksums`.
fn vector_seeds(root: &Path) -> Vec<Seed> {
    let Ok(dir) = fs::read_dir(root.join("tests/vectors")) else {
        return Vec::new();
    };
    let mut seeds: Vec<Seed> = dir
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "bin"))
        .map(|path| {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            Seed {
                valid: name.starts_with("valid"),
                bytes: fs::read(&path).unwrap(),
                name: format!("vector_{name}"),
            }
        })
        .collect();
    seeds.sort_by(|a, b| a.name.cmp(&b.name));
    seeds
}

/// Largest seed stream given to the targets that cut or re-read their input many times.
const MAX_SMALL_SEED: usize = 16 * 1024;

/// Every target whose corpus this writes.
const TARGETS: [&str; 7] = [
    "decode_raw",
    "decode_chunked",
    "roundtrip",
    "fixed_checksums",
    "contract_json",
    "sse_decode",
    "compat_decode",
];

/// Read schedules for `decode_chunked` (see `ScheduledReader`): one read, byte by byte with
/// `Pending` before each, mixed sizes, header-sized pieces.
const SCHEDULES: [&[u8]; 4] = [&[], &[0x80], &[0x82, 0x13, 0xff, 0x00], &[0x93, 0x13, 0x7f]];

/// Limits bytes for `decode_raw` variants: frame 1026 / messages 1000 / no assembling / key;
/// and frame 1500 / messages 40.
const SMALL_LIMITS: [u8; 2] = [0b0110_1100, 0b0000_1001];

/// Bit 6 of a limits byte: the decoder expects [`EXPECTED_KEY`], the key of the vectors.
const KEYED_LIMITS_BIT: u8 = 0b0100_0000;

/// `contract_json` seeds: (name, mode byte, JSON). Mode bit 0: `server/discover`; bit 1: accept
/// ambiguity.
const CONTRACTS: [(&str, u8, &str); 10] = [
    (
        "initialize_v1",
        0,
        r#"{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"experimental":{"io.github.mcp-framing/framing":{"versions":[1],"sentinelRequired":true,"frameChecksum":"crc32","messageDigest":"sha256","maxFramePayload":65536,"maxMessageSize":16777216,"transports":["binary","sse"]}}},"serverInfo":{"name":"example","version":"1.0.0"}}"#,
    ),
    (
        "discover_v1",
        1,
        r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"extensions":{"io.github.mcp-framing/framing":{"versions":[1],"sentinelRequired":true,"frameChecksum":"crc32","messageDigest":"sha256","maxFramePayload":16384,"maxMessageSize":1048576,"transports":["sse"]}}},"ttlMs":60000,"cacheScope":"public"}"#,
    ),
    (
        "jsonrpc_response",
        0,
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"experimental":{"io.github.mcp-framing/framing":{"versions":[1],"sentinelRequired":true,"frameChecksum":"crc32","messageDigest":"sha256","transports":["binary"]}}}}}"#,
    ),
    (
        "sentinel_not_required",
        2,
        r#"{"protocolVersion":"2025-06-18","capabilities":{"experimental":{"io.github.mcp-framing/framing":{"versions":[1],"sentinelRequired":false,"frameChecksum":"crc32","messageDigest":"sha256","transports":["binary"]}}}}"#,
    ),
    (
        "no_contract",
        0,
        r#"{"protocolVersion":"2025-06-18","capabilities":{"tools":{}}}"#,
    ),
    (
        "frame_limit_too_small",
        0,
        r#"{"protocolVersion":"2025-06-18","capabilities":{"experimental":{"io.github.mcp-framing/framing":{"versions":[1],"sentinelRequired":true,"frameChecksum":"crc32","messageDigest":"sha256","maxFramePayload":1000,"transports":["binary"]}}}}"#,
    ),
    (
        "no_common_version_or_transport",
        1,
        r#"{"supportedVersions":["2026-07-28"],"capabilities":{"extensions":{"io.github.mcp-framing/framing":{"versions":[2,3],"sentinelRequired":true,"frameChecksum":"crc32","messageDigest":"sha256","transports":["websocket"]}}}}"#,
    ),
    (
        "malformed_contract",
        0,
        r#"{"capabilities":{"experimental":{"io.github.mcp-framing/framing":{"versions":"1","sentinelRequired":1}}}}"#,
    ),
    (
        "experimental_in_discover",
        3,
        r#"{"supportedVersions":["2026-07-28"],"capabilities":{"experimental":{"io.github.mcp-framing/framing":{"versions":[1],"sentinelRequired":true,"frameChecksum":"crc32c","messageDigest":"sha256","transports":["binary"]}}}}"#,
    ),
    (
        "request_with_key",
        0,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{},"_meta":{"io.github.mcp-framing/requestKey":"00112233445566778899aabbccddeeff"}}}"#,
    ),
];

/// Hand-written SSE bodies for `sse_decode` (mode byte 3: the default event limit).
const SSE_TEXTS: [(&str, &str); 6] = [
    (
        "unframed_message",
        "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
    ),
    (
        "comments_crlf_bom",
        "\u{feff}: keep-alive\r\nevent: mcp-frame\r\ndata: n00BBgAAAAEAAAAAAAAAAA==\r\n\r\n",
    ),
    (
        "data_split_over_lines",
        "event: mcp-frame\ndata: n00BBgAA\ndata: AAEAAAAAAAAAAA==\nid: 7\nretry: 1000\n\n",
    ),
    ("invalid_base64", "event: mcp-frame\ndata: not base64!\n\n"),
    (
        "cr_only_and_no_space",
        "event:mcp-frame\rdata:n00BBgAAAAEAAAAAAAAAAA==\r\r: done\r",
    ),
    ("unterminated_event", "event: mcp-frame\ndata: n00B"),
];

/// `compat_decode` scripts: (name, mode byte, NUL-separated messages). Mode bit 2: a script;
/// bits 3-4: 0 end, 1 final message, 2 abort, 3 cut; bits 5-7: frame size (1, 2, 7, 16, 100, 1024,
/// 16384).
const COMPAT_SCRIPTS: [(&str, u8, &str); 4] = [
    (
        "script_final_message_frames_of_7",
        0b0100_1100,
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\0{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
    ),
    (
        "script_abort_multi_line",
        0b1011_0100,
        "{\n  \"pretty\": true\n}\0caf\u{e9} \u{20ac}",
    ),
    ("script_no_messages_cut", 0b1101_1100, ""),
    ("script_end_one_byte_frames", 0b0000_0100, "{\"ok\":true}"),
];

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    fs::write(dir.join(name), bytes).unwrap();
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut seeds = vector_seeds(&root);
    let vectors = seeds.len();
    seeds.extend(encoder_seeds());

    let corpus = root.join("fuzz/corpus");
    for target in TARGETS {
        let dir = corpus.join(target);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        if let Ok(saved) = fs::read_dir(root.join("fuzz/regressions").join(target)) {
            for entry in saved.filter_map(Result::ok) {
                let name = format!("regression_{}", entry.file_name().to_string_lossy());
                write(&dir, &name, &fs::read(entry.path()).unwrap());
            }
        }
    }
    let mut valid = 0usize;
    for (i, seed) in seeds.iter().enumerate() {
        let with_prefix = |prefix: &[u8]| [prefix, &seed.bytes[..]].concat();
        write(
            &corpus.join("decode_raw"),
            &seed.name,
            &with_prefix(&[DEFAULT_LIMITS_BYTE]),
        );
        // The 40-64 KiB vectors (frames at and over the limit) seed decode_raw and
        // fixed_checksums; the targets that cut or re-read their input get the small ones.
        if seed.bytes.len() <= MAX_SMALL_SEED {
            let schedule = SCHEDULES[i % SCHEDULES.len()];
            let mut prefix = vec![DEFAULT_LIMITS_BYTE, schedule.len() as u8];
            prefix.extend_from_slice(schedule);
            write(
                &corpus.join("decode_chunked"),
                &seed.name,
                &with_prefix(&prefix),
            );
            write(&corpus.join("roundtrip"), &seed.name, &seed.bytes);
        }
        if seed.valid {
            let mode = (valid % 8) as u8;
            valid += 1;
            write(
                &corpus.join("fixed_checksums"),
                &seed.name,
                &with_prefix(&[mode, DEFAULT_LIMITS_BYTE]),
            );
        }
    }
    // The final-response rule (SPEC.md §7 row 4) applies to a decoder that expects the key:
    // every vector about it, whole and cut, seeds the targets with the key expected too.
    let keyed = DEFAULT_LIMITS_BYTE | KEYED_LIMITS_BIT;
    for seed in seeds.iter().filter(|s| s.name.contains("final_response")) {
        let with_prefix = |prefix: &[u8]| [prefix, &seed.bytes[..]].concat();
        let name = format!("{}_keyed", seed.name);
        write(&corpus.join("decode_raw"), &name, &with_prefix(&[keyed]));
        let mut prefix = vec![keyed, SCHEDULES[0].len() as u8];
        prefix.extend_from_slice(SCHEDULES[0]);
        write(&corpus.join("decode_chunked"), &name, &with_prefix(&prefix));
        write(
            &corpus.join("fixed_checksums"),
            &name,
            &with_prefix(&[0, keyed]),
        );
    }
    for (limits, seed) in SMALL_LIMITS.iter().zip(seeds.iter().filter(|s| s.valid)) {
        let name = format!("{}_limits_{limits:02x}", seed.name);
        write(
            &corpus.join("decode_raw"),
            &name,
            &[&[*limits], &seed.bytes[..]].concat(),
        );
    }
    let sse = corpus.join("sse_decode");
    let small_valid = seeds
        .iter()
        .filter(|s| s.valid && s.bytes.len() <= MAX_SMALL_SEED);
    for (i, seed) in small_valid.take(8).enumerate() {
        let text = SseFrameEncoder::new().to_events(&seed.bytes);
        let schedule = SCHEDULES[i % SCHEDULES.len()];
        let mut input = vec![3, schedule.len() as u8];
        input.extend_from_slice(schedule);
        write(
            &sse,
            &format!("{}_sse", seed.name),
            &[&input[..], &text[..]].concat(),
        );
        if i < 3 {
            input[0] = 0b111; // the body is frame bytes to carry through SSE
            write(
                &sse,
                &format!("{}_frames", seed.name),
                &[&input[..], &seed.bytes[..]].concat(),
            );
        }
    }
    for (i, (name, text)) in SSE_TEXTS.iter().enumerate() {
        let schedule = SCHEDULES[i % SCHEDULES.len()];
        let mut input = vec![3, schedule.len() as u8];
        input.extend_from_slice(schedule);
        write(&sse, name, &[&input[..], text.as_bytes()].concat());
    }
    // compat_decode: the compatible mapping's vectors as SSE text (the default event bound; the
    // vector with a small bound gets it), then encoder scripts.
    let compat = corpus.join("compat_decode");
    let mut files: Vec<PathBuf> = fs::read_dir(root.join("tests/vectors"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.to_string_lossy().contains("_compat_"))
        .collect();
    files.sort();
    for (i, path) in files.iter().enumerate() {
        let text = fs::read(path).unwrap();
        if text.len() > MAX_SMALL_SEED {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let bound = if name.contains("too_large") { 2 } else { 3 };
        let schedule = SCHEDULES[i % SCHEDULES.len()];
        let mut input = vec![bound, schedule.len() as u8];
        input.extend_from_slice(schedule);
        write(
            &compat,
            &format!("vector_{name}"),
            &[&input[..], &text[..]].concat(),
        );
    }
    for (name, mode, script) in COMPAT_SCRIPTS {
        let schedule = SCHEDULES[usize::from(mode) % SCHEDULES.len()];
        let mut input = vec![mode, schedule.len() as u8];
        input.extend_from_slice(schedule);
        write(&compat, name, &[&input[..], script.as_bytes()].concat());
    }
    for (name, mode, json) in CONTRACTS {
        write(
            &corpus.join("contract_json"),
            name,
            &[&[mode], json.as_bytes()].concat(),
        );
    }
    println!(
        "wrote seeds for {} streams ({vectors} from tests/vectors) under fuzz/corpus/",
        seeds.len()
    );
}
