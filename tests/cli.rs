//! The `mcp-frame` binary, run as a user would: on the conformance vectors, on its own output,
//! and on garbage. Checks exit statuses, outputs and that nothing ever panics.
#![cfg(feature = "cli")]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-frame");

fn vectors_dir() -> PathBuf {
    std::env::var_os("MCP_FRAMING_VECTORS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors"),
        PathBuf::from,
    )
}

/// Runs the binary with `args`, feeding `stdin`.
fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcp-frame runs");
    let mut pipe = child.stdin.take().expect("piped");
    let input = stdin.to_vec();
    // The binary may stop reading early (at the first error): ignore a broken pipe here.
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let out = child.wait_with_output().expect("mcp-frame finished");
    writer.join().expect("writer thread");
    out
}

fn code(out: &Output) -> i32 {
    out.status
        .code()
        .unwrap_or_else(|| panic!("killed by a signal: {out:?}"))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_no_panic(out: &Output, what: &str) {
    let err = stderr(out);
    assert!(
        !err.contains("panicked") && code(out) != 101,
        "{what}: the binary panicked: {err}"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

struct Vector {
    /// Carried in an SSE mapping (SPEC.md §15 or §18).
    sse: bool,
    compat: bool,
    file: String,
    path: PathBuf,
    data: Vec<u8>,
    decoder_args: Vec<String>,
    expect: Value,
}

fn vectors() -> Vec<Vector> {
    let dir = vectors_dir();
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(dir.join("manifest.json")).expect("tests/vectors/manifest.json exists"),
    )
    .expect("manifest is JSON");
    let list = manifest["vectors"].as_array().expect("vectors list");
    assert!(!list.is_empty());
    list.iter()
        .map(|v| {
            let file = v["file"].as_str().expect("file").to_owned();
            let path = dir.join(&file);
            let mapping = v["mapping"].as_str().unwrap_or("binary").to_owned();
            let mut decoder_args = vec!["--mapping".to_owned(), mapping.clone()];
            let d = &v["decoder"];
            if let Some(n) = d["max_frame_payload"].as_u64() {
                decoder_args.extend(["--max-frame-payload".to_owned(), n.to_string()]);
            }
            if let Some(n) = d["max_message_size"].as_u64() {
                decoder_args.extend(["--max-message-size".to_owned(), n.to_string()]);
            }
            if let Some(k) = d["request_key"].as_str() {
                decoder_args.extend(["--expect-request-key".to_owned(), k.to_owned()]);
            }
            // The per-stream bounds a vector sets (SPEC.md §6.1, §15), and its SSE event bound.
            for bound in [
                "max_stream_bytes",
                "max_messages",
                "max_keepalives_in_a_row",
                "max_ignorable_in_a_row",
                "max_sse_comments_in_a_row",
                "max_event_data",
            ] {
                if let Some(n) = d[bound].as_u64() {
                    let option = format!("--{}", bound.replace('_', "-"));
                    decoder_args.extend([option, n.to_string()]);
                }
            }
            Vector {
                sse: mapping != "binary",
                compat: mapping == "compat",
                data: std::fs::read(&path).expect("vector file"),
                file,
                path,
                decoder_args,
                expect: v["expect"].clone(),
            }
        })
        .collect()
}

/// (length, SHA-256) of each message of a verdict's or the manifest's `messages` list.
fn len_and_digest(messages: &Value) -> Vec<(u64, String)> {
    let list = messages.as_array().expect("a messages list");
    list.iter()
        .map(|m| {
            (
                m["len"].as_u64().expect("len"),
                m["sha256"].as_str().expect("sha256").to_owned(),
            )
        })
        .collect()
}

/// The errors of the SSE mappings (SPEC.md §15, §18.5): contract violations, found before the
/// frame decoder sees the bytes.
const MAPPING_ERRORS: [&str; 9] = [
    "UnexpectedEvent",
    "InvalidBase64",
    "EventTooLarge",
    "TooManyComments",
    "InvalidRecord",
    "UnframedEvent",
    "EventMissing",
    "SplitMessage",
    "EventLengthMismatch",
];

/// The fields of `verify --json` that carry the manifest's `expect` names (SPEC.md §14).
const VERDICT_FIELDS: [&str; 6] = [
    "verdict",
    "sentinel_seen",
    "regime",
    "error",
    "truncation",
    "abort",
];

/// The exit status the README documents for a manifest verdict.
fn expected_exit(v: &Vector) -> i32 {
    let e = &v.expect;
    let framed_start = v.data.len() >= 2 && v.data[..2] == [0x9f, 0x4d];
    match (e["verdict"].as_str(), e["error"].as_str()) {
        // With or without its sentinel (SPEC.md §7 rows 2 and 4: Regime A or B).
        (Some("clean"), _) => 0,
        (Some("aborted"), _) => 5,
        (_, Some(kind)) if MAPPING_ERRORS.contains(&kind) => 6,
        (_, Some("Truncated")) if v.sse => 3,
        (_, Some("Truncated")) if !v.data.is_empty() && !framed_start => 6,
        (_, Some("Truncated")) => 3,
        (
            _,
            Some(
                "RequestKeyMismatch"
                | "FrameTooLarge"
                | "MessageTooLarge"
                | "StreamTooLarge"
                | "TooManyMessages"
                | "TooManyKeepAlives"
                | "TooManyIgnorableFrames",
            ),
        ) => 6,
        (_, Some("BadMagic")) if v.sse => 4,
        (_, Some("BadMagic")) if !framed_start => 6,
        (_, Some("UnsupportedVersion")) if framed_start && v.data[2] != 1 => 6,
        _ => 4,
    }
}

/// How many frame bytes a vector holds: the file itself in the binary mapping, the bytes its
/// events (and records) carry in the SSE mappings (SPEC.md §15, §18).
fn frame_bytes(v: &Vector) -> usize {
    let mut frames = bytes::BytesMut::new();
    if v.compat {
        let mut compat = mcp_framing::internals::sse_compat::CompatDecoder::new();
        compat
            .feed(&v.data, &mut frames)
            .unwrap_or_else(|e| panic!("{}: {e}", v.file));
    } else if v.sse {
        let mut sse = mcp_framing::internals::sse::SseFrameDecoder::new();
        sse.feed(&v.data, &mut frames)
            .unwrap_or_else(|e| panic!("{}: {e}", v.file));
    } else {
        return v.data.len();
    }
    frames.len()
}

fn with_decoder_args<'a>(v: &'a Vector, head: &[&'a str]) -> Vec<&'a str> {
    let mut args: Vec<&str> = head.to_vec();
    args.extend(v.decoder_args.iter().map(String::as_str));
    args.push(v.path.to_str().expect("UTF-8 path"));
    args
}

#[test]
fn verify_reaches_the_manifest_verdict_and_exit_status_on_every_vector() {
    let vectors = vectors();
    for v in &vectors {
        let out = run(&with_decoder_args(v, &["verify", "--json"]), b"");
        assert_no_panic(&out, &v.file);
        let got: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{}: verify --json printed no JSON ({e}): {out:?}", v.file));
        for field in VERDICT_FIELDS {
            assert_eq!(got[field], v.expect[field], "{}: {field}", v.file);
        }
        let (have, want) = (
            len_and_digest(&got["messages"]),
            len_and_digest(&v.expect["messages"]),
        );
        assert_eq!(have, want, "{}: messages", v.file);
        assert_eq!(
            code(&out),
            expected_exit(v),
            "{}: exit status ({got})",
            v.file
        );
        assert_eq!(got["exit_code"], expected_exit(v), "{}", v.file);
    }
    eprintln!("verify: {} vectors", vectors.len());
}

#[test]
fn verify_reads_stdin_and_prints_one_line() {
    for v in vectors() {
        let mut args = vec!["verify"];
        args.extend(v.decoder_args.iter().map(String::as_str));
        let out = run(&args, &v.data);
        assert_eq!(code(&out), expected_exit(&v), "{}", v.file);
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text.lines().count(), 1, "{}: {text}", v.file);
        assert!(text.starts_with("stdin: "), "{text}");
    }
}

#[test]
fn decode_writes_exactly_the_verified_messages_and_the_verdict_on_stderr() {
    for v in vectors() {
        let out = run(
            &with_decoder_args(&v, &["decode", "--separator", "nul"]),
            b"",
        );
        assert_no_panic(&out, &v.file);
        assert_eq!(
            code(&out),
            expected_exit(&v),
            "{}: {}",
            v.file,
            stderr(&out)
        );
        let mut messages: Vec<&[u8]> = out.stdout.split(|&b| b == 0).collect();
        assert_eq!(
            messages.pop(),
            Some(&b""[..]),
            "{}: NUL after each message",
            v.file
        );
        let messages = if out.stdout.is_empty() {
            vec![]
        } else {
            messages
        };
        let want = v.expect["messages"].as_array().unwrap();
        // A message containing NUL bytes would split in two: none of the vectors' messages do.
        assert_eq!(messages.len(), want.len(), "{}", v.file);
        for (m, w) in messages.iter().zip(want) {
            assert_eq!(m.len() as u64, w["len"].as_u64().unwrap(), "{}", v.file);
            assert_eq!(
                hex(&Sha256::digest(m)),
                w["sha256"].as_str().unwrap(),
                "{}",
                v.file
            );
        }
        assert_eq!(
            stderr(&out).lines().count(),
            1,
            "{}: {}",
            v.file,
            stderr(&out)
        );
    }
}

#[test]
fn inspect_lists_the_frames_and_marks_the_frame_where_the_decoder_stopped() {
    for v in vectors() {
        let out = run(&with_decoder_args(&v, &["inspect", "--json"]), b"");
        assert_no_panic(&out, &v.file);
        assert_eq!(code(&out), expected_exit(&v), "{}", v.file);
        let got: Value = serde_json::from_slice(&out.stdout).expect("inspect --json is JSON");
        let frames = got["frames"].as_array().unwrap();
        // Every listed frame is contiguous from offset 0.
        let mut at = 0;
        for f in frames {
            assert_eq!(f["offset"].as_u64().unwrap(), at, "{}", v.file);
            at += 20 + f["payload_present"].as_u64().unwrap();
        }
        let stops: Vec<&str> = frames
            .iter()
            .filter_map(|f| f["decoder"].as_str())
            .filter(|d| !["ok", "cut", "not reached"].contains(d))
            .chain(got["decoder_stopped_in_tail"].as_str())
            .collect();
        match (
            v.expect["verdict"].as_str().unwrap(),
            v.expect["error"].as_str(),
        ) {
            // Delivered without the sentinel (SPEC.md §7 row 4): the frame the cut left partial,
            // if any, is the last one listed, `cut`.
            ("clean", _) if v.expect["sentinel_seen"] == false => {
                assert!(stops.is_empty(), "{}: {stops:?}", v.file);
                let (last, whole) = frames.split_last().expect("frames");
                assert!(whole.iter().all(|f| f["decoder"] == "ok"), "{}", v.file);
                assert!(
                    ["ok", "cut"].contains(&last["decoder"].as_str().unwrap()),
                    "{}",
                    v.file
                );
                assert!(
                    got["end_of_input"]
                        .as_str()
                        .unwrap()
                        .starts_with("Delivered"),
                    "{}",
                    v.file
                );
            }
            ("clean", _) => {
                assert!(stops.is_empty(), "{}: {stops:?}", v.file);
                assert!(frames.iter().all(|f| f["decoder"] == "ok"), "{}", v.file);
                assert_eq!(
                    at as usize,
                    frame_bytes(&v),
                    "{}: every byte listed",
                    v.file
                );
            }
            ("aborted", _) | (_, Some("Truncated")) => {
                assert!(stops.is_empty(), "{}: {stops:?}", v.file);
                assert!(got["end_of_input"].is_string(), "{}", v.file);
            }
            // A mapping-level error stops the SSE pass, not the frame decoder (SPEC.md §15, §18).
            (_, Some(kind)) if MAPPING_ERRORS.contains(&kind) => {
                assert!(stops.is_empty(), "{}: {stops:?}", v.file);
                assert_eq!(got["sse"]["error"], kind, "{}", v.file);
            }
            (_, Some(kind)) => {
                assert_eq!(stops.len(), 1, "{}: one stop: {stops:?}", v.file);
                assert!(
                    stops[0].starts_with(&format!("{kind}:")),
                    "{}: {stops:?}",
                    v.file
                );
            }
            other => panic!("{}: unexpected expectation {other:?}", v.file),
        }
        // The text table has a header line, a row per frame and the verdict.
        let text = run(&with_decoder_args(&v, &["inspect"]), b"");
        let text = String::from_utf8(text.stdout).unwrap();
        assert!(text.lines().count() > frames.len(), "{}: {text}", v.file);
        assert!(
            text.lines().last().unwrap().starts_with("verdict: "),
            "{text}"
        );
    }
}

fn single_message_vector() -> Vec<u8> {
    std::fs::read(vectors_dir().join("valid_single_message.bin")).expect("the §13 vector")
}

const KEY: &str = "00112233445566778899aabbccddeeff";
const ATTEMPT: &str = "a1a2a3a4b1b2b3b4c1c2c3c4d1d2d3d4";

#[test]
fn encode_reproduces_the_worked_example_of_the_spec_byte_for_byte() {
    let out = run(
        &["encode", "--request-key", KEY, "--attempt-id", ATTEMPT],
        br#"{"ok":true}"#,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(out.stdout, single_message_vector());
    // --json minifies to the same message.
    let out = run(
        &[
            "encode",
            "--json",
            "--request-key",
            KEY,
            "--attempt-id",
            ATTEMPT,
        ],
        b"  {\n  \"ok\" : true\n}\n",
    );
    assert_eq!(out.stdout, single_message_vector());
}

#[test]
fn encode_then_decode_round_trips_json_lines_in_small_frames() {
    let input = b"{\"jsonrpc\": \"2.0\", \"method\": \"notifications/progress\"}\n\n\
                  {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"n\":12345678901234567890123, \"s\":\"a  b\"}}\r\n";
    let enc = run(
        &[
            "encode",
            "--json",
            "--lines",
            "--frame-size",
            "5",
            "--chunk",
            "3",
            "--request-key",
            KEY,
        ],
        input,
    );
    assert_eq!(code(&enc), 0, "{}", stderr(&enc));
    let dec = run(&["decode", "--expect-request-key", KEY], &enc.stdout);
    assert_eq!(code(&dec), 0, "{}", stderr(&dec));
    assert_eq!(
        String::from_utf8(dec.stdout.clone()).unwrap(),
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\
         {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"n\":12345678901234567890123,\"s\":\"a  b\"}}\n"
    );
    assert!(
        stderr(&dec).starts_with("clean: 2 messages verified"),
        "{}",
        stderr(&dec)
    );
    // --chunk 3 makes DATA frames of at most 3 bytes.
    let inspect = run(&["inspect", "--json"], &enc.stdout);
    let got: Value = serde_json::from_slice(&inspect.stdout).unwrap();
    let data: Vec<u64> = got["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "DATA")
        .map(|f| f["length"].as_u64().unwrap())
        .collect();
    assert!(data.iter().all(|&l| (1..=3).contains(&l)), "{data:?}");
    // Another request's key is a contract violation.
    let wrong = run(&["verify", "--expect-request-key", ATTEMPT], &enc.stdout);
    assert_eq!(code(&wrong), 6);
}

#[test]
fn encode_frames_raw_bytes_as_one_message_and_each_line_with_lines() {
    let bytes: Vec<u8> = (0..=255u8).cycle().take(40_000).collect();
    let enc = run(&["encode", "--frame-size", "1000"], &bytes);
    let dec = run(&["decode", "--separator", "none"], &enc.stdout);
    assert_eq!(code(&dec), 0);
    assert_eq!(dec.stdout, bytes);
    let enc = run(&["encode", "--lines"], b"one\ntwo\r\n\nthree");
    let dec = run(&["decode"], &enc.stdout);
    assert_eq!(String::from_utf8(dec.stdout).unwrap(), "one\ntwo\nthree\n");
    // An empty input is one empty message; an empty JSON input is no message.
    let enc = run(&["encode"], b"");
    let v: Value = serde_json::from_slice(&run(&["verify", "--json"], &enc.stdout).stdout).unwrap();
    assert_eq!(v["messages"].as_array().unwrap().len(), 1);
    let enc = run(&["encode", "--json"], b" \n");
    let v: Value = serde_json::from_slice(&run(&["verify", "--json"], &enc.stdout).stdout).unwrap();
    assert_eq!(
        (
            v["verdict"].as_str(),
            v["messages"].as_array().unwrap().len()
        ),
        (Some("clean"), 0)
    );
}

#[test]
fn encode_rejects_invalid_json_without_writing_anything() {
    for (args, input, needle) in [
        (
            &["encode", "--json"][..],
            &b"{\"a\":1} {\"b\":"[..],
            "invalid JSON",
        ),
        (
            &["encode", "--json", "--lines"],
            b"{}\n{\"a\":1} 2\n",
            "line 2: expected one JSON value",
        ),
        (
            &["encode", "--json", "--lines"],
            b"{}\n[1,\n",
            "line 2: invalid JSON",
        ),
        (&["encode", "--json"], b"\"\xff\"", "not UTF-8"),
    ] {
        let out = run(args, input);
        assert_eq!(code(&out), 2, "{args:?}");
        assert!(
            out.stdout.is_empty(),
            "{args:?}: wrote {} bytes",
            out.stdout.len()
        );
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("mcp-frame: error: ") && err.contains(needle),
            "{err}"
        );
    }
}

#[test]
fn encode_aborts_the_stream_when_a_message_exceeds_the_limit() {
    let out = run(
        &["encode", "--max-message-size", "10", "--chunk", "4"],
        b"0123456789abcdef",
    );
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("aborted with code 5"),
        "{}",
        stderr(&out)
    );
    let v = run(&["verify", "--json"], &out.stdout);
    assert_eq!(code(&v), 5);
    let got: Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(got["abort"]["code"], 5);
}

#[test]
fn every_prefix_of_a_stream_is_abandoned_never_clean() {
    let stream = single_message_vector();
    for cut in 0..stream.len() {
        let out = run(&["verify", "--quiet"], &stream[..cut]);
        assert_eq!(code(&out), 3, "cut at {cut}");
        assert!(out.stdout.is_empty());
    }
    assert_eq!(code(&run(&["verify", "--quiet"], &stream)), 0);
}

#[test]
fn verify_and_decode_report_a_final_response_delivered_without_its_sentinel_as_clean_in_regime_b() {
    // SPEC.md §7 row 4: the final response verified, STREAM_END cut inside its payload.
    let dir = vectors_dir();
    let path = dir.join("valid_final_response_cut_in_stream_end.bin");
    let path = path.to_str().unwrap();
    let key = "00112233445566778899aabbccddeeff";
    let out = run(&["verify", "--expect-request-key", key, path], b"");
    assert_eq!(code(&out), 0, "{out:?}");
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.contains(": clean: the final response verified"),
        "{line}"
    );
    assert!(line.contains("before the STREAM_END sentinel"), "{line}");
    assert!(line.contains("regime B, sentinel not seen"), "{line}");
    let out = run(&["decode", "--expect-request-key", key, path], b"");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let messages: Vec<&[u8]> = out
        .stdout
        .split(|&b| b == b'\n')
        .filter(|m| !m.is_empty())
        .collect();
    assert_eq!(
        messages.len(),
        2,
        "the notification and the final response are written"
    );
    assert!(messages[1].starts_with(br#"{"jsonrpc":"2.0","id":1,"result""#));
    let out = run(
        &["verify", "--json", "--expect-request-key", key, path],
        b"",
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        regime_fields(&got),
        json!(["clean", 0, "clean", false, "B"])
    );
    // Without the key the tool cannot tell the final response is the request's: abandoned.
    assert_eq!(code(&run(&["verify", "--quiet", path], b"")), 3);
}

#[test]
fn inspect_keeps_listing_frames_after_a_corrupt_one() {
    let mut stream = single_message_vector();
    stream[52 + 20 + 3] ^= 0x10; // a bit of the DATA payload
    let out = run(&["inspect", "--json"], &stream);
    assert_eq!(code(&out), 4);
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let frames = got["frames"].as_array().unwrap();
    let decoder: Vec<&str> = frames
        .iter()
        .map(|f| f["decoder"].as_str().unwrap())
        .collect();
    assert_eq!(frames.len(), 4, "all frames listed");
    assert_eq!(decoder[0], "ok");
    assert!(
        decoder[1].starts_with("PayloadChecksumMismatch:"),
        "{decoder:?}"
    );
    assert_eq!(&decoder[2..], ["not reached", "not reached"]);
    assert_eq!(frames[1]["payload_crc_ok"], false);
    assert_eq!(frames[3]["kind"], "STREAM_END");
    // Unframed text: no frame at all, one line saying so, then the verdict.
    let out = run(&["inspect"], br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    assert_eq!(code(&out), 6);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("no frame header here"), "{text}");
    assert!(text.contains("verdict: contract-violation"), "{text}");
}

#[test]
fn usage_and_io_errors_exit_2_with_one_line() {
    for args in [
        &["verify", "/nonexistent/capture.bin"][..],
        &["decode", "--expect-request-key", "xyz"],
        &["verify", "--max-frame-payload", "100"],
        &["encode", "--frame-size", "0"],
        &["encode", "--attempt-id", "00"],
        &["encode", "--mapping", "carrier-pigeon"],
        &["frobnicate"],
    ] {
        let out = run(args, b"");
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).is_empty());
    }
    let out = run(&["verify", "/nonexistent/capture.bin"], b"");
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

/// SplitMix64, so a failing input can be reproduced from its seed.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn random_garbage_and_mutated_streams_never_make_it_panic() {
    let base = single_message_vector();
    let mut seed = 0xC0FFEE;
    let mut inputs: Vec<Vec<u8>> = vec![vec![], vec![0x9f], vec![0x9f, 0x4d, 0x01]];
    for i in 0..60 {
        let r = splitmix(&mut seed);
        let mut data = if i % 2 == 0 {
            let len = (r % 300) as usize;
            (0..len)
                .map(|_| splitmix(&mut seed) as u8)
                .collect::<Vec<u8>>()
        } else {
            base.clone()
        };
        if i % 2 == 1 {
            for _ in 0..=(r % 4) {
                let at = (splitmix(&mut seed) as usize) % data.len();
                data[at] = splitmix(&mut seed) as u8;
            }
        } else if i % 4 == 0 && data.len() > 3 {
            data[..3].copy_from_slice(&[0x9f, 0x4d, 0x01]);
        }
        inputs.push(data);
    }
    // SSE bodies with replaced bytes (line ends, colons, base64 characters, anything).
    let body = mcp_framing::internals::sse::SseFrameEncoder::new()
        .to_events(&base)
        .to_vec();
    for _ in 0..20 {
        let mut data = body.clone();
        for _ in 0..=(splitmix(&mut seed) % 3) {
            let at = (splitmix(&mut seed) as usize) % data.len();
            data[at] = *b"\n\r:=A!\xff"
                .get((splitmix(&mut seed) % 8) as usize)
                .unwrap_or(&0);
        }
        inputs.push(data);
    }
    for (i, data) in inputs.iter().enumerate() {
        for cmd in [
            &["verify"][..],
            &["inspect"],
            &["inspect", "--json"],
            &["decode"],
            &["verify", "--mapping", "sse"],
            &["inspect", "--mapping", "sse", "--json"],
        ] {
            let out = run(cmd, data);
            assert_no_panic(&out, &format!("input {i} ({}) with {cmd:?}", hex(data)));
            assert!(
                [0, 3, 4, 5, 6].contains(&code(&out)),
                "{cmd:?} on input {i}: {out:?}"
            );
        }
    }
}

#[test]
fn help_documents_the_exit_statuses() {
    let out = run(&["--help"], b"");
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "0 clean",
        "1 sentinel missing",
        "--require-sentinel",
        "3 abandoned",
        "4 corrupt",
        "5 aborted",
        "6 contract violation",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}

#[test]
fn decode_writes_each_message_as_soon_as_it_is_verified() {
    use std::io::BufRead;
    let stream = std::fs::read(vectors_dir().join("valid_multiple_messages.bin")).unwrap();
    let decoded = run(&["decode"], &stream);
    let first_line = String::from_utf8(decoded.stdout)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let mut child = Command::new(BIN)
        .arg("decode")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut stdout = std::io::BufReader::new(stdout);
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        tx.send(line).unwrap();
        // Keep reading, so that the decoder never writes into a closed pipe.
        std::io::copy(&mut stdout, &mut std::io::sink()).unwrap();
    });
    // Everything but the last byte: the first message is complete, the stream is not.
    stdin.write_all(&stream[..stream.len() - 1]).unwrap();
    stdin.flush().unwrap();
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the first message is written before the input ends");
    assert_eq!(line.trim_end(), first_line);
    drop(stdin);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert_eq!(status.code(), Some(3), "the cut stream is abandoned");
}

/// Every vector carried in SSE events (SPEC.md §15) reaches the same verdict as the binary one.
#[test]
fn verify_reaches_the_same_verdict_on_every_vector_carried_in_sse_events() {
    use mcp_framing::internals::sse::SseFrameEncoder;
    let dir = std::env::temp_dir().join(format!("mcp-frame-sse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut checked = 0;
    for mut v in vectors().into_iter().filter(|v| !v.sse) {
        v.data = SseFrameEncoder::new().to_events(&v.data).to_vec();
        v.path = dir.join(format!("{}.sse", v.file));
        v.sse = true;
        std::fs::write(&v.path, &v.data).unwrap();
        v.decoder_args[1] = "sse".to_owned();
        let out = run(&with_decoder_args(&v, &["verify", "--json"]), b"");
        assert_no_panic(&out, &v.file);
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        for field in VERDICT_FIELDS {
            assert_eq!(got[field], v.expect[field], "{} in SSE: {field}", v.file);
        }
        assert_eq!(
            len_and_digest(&got["messages"]),
            len_and_digest(&v.expect["messages"]),
            "{}",
            v.file
        );
        // The BadMagic of a binary vector is inside an mcp-frame event here: corrupt, not
        // "not framed at all".
        let want = match v.expect["error"].as_str() {
            Some("BadMagic" | "UnsupportedVersion")
                if got["detail"].as_str().unwrap().contains("offset 0") =>
            {
                6
            }
            _ => expected_exit(&v),
        };
        assert_eq!(code(&out), want, "{}: {got}", v.file);
        checked += 1;
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(checked > 0);
}

#[test]
fn encode_and_decode_the_sse_mapping() {
    use mcp_framing::internals::sse::SseFrameEncoder;
    let out = run(
        &[
            "encode",
            "--mapping",
            "sse",
            "--request-key",
            KEY,
            "--attempt-id",
            ATTEMPT,
        ],
        br#"{"ok":true}"#,
    );
    assert_eq!(code(&out), 0);
    assert_eq!(
        out.stdout,
        SseFrameEncoder::new()
            .to_events(&single_message_vector())
            .to_vec()
    );
    let body = out.stdout;
    let dec = run(&["decode", "--mapping", "sse"], &body);
    assert_eq!(
        (code(&dec), dec.stdout.as_slice()),
        (0, &b"{\"ok\":true}\n"[..])
    );
    // Read as a binary stream, an SSE body is not framed: exit 6 with a hint.
    let wrong = run(&["verify"], &body);
    assert_eq!(code(&wrong), 6);
    assert!(String::from_utf8_lossy(&wrong.stdout).contains("try --mapping sse"));
    // Every cut is abandoned; an unframed event is a contract violation.
    for cut in (0..body.len()).step_by(7) {
        assert_eq!(
            code(&run(&["verify", "--mapping", "sse"], &body[..cut])),
            3,
            "cut {cut}"
        );
    }
    let plain = [&b"event: message\ndata: {}\n\n"[..], &body].concat();
    let out = run(&["verify", "--mapping", "sse", "--json"], &plain);
    assert_eq!(code(&out), 6);
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["error"], "UnexpectedEvent");
    // inspect lists the frames of the events and says where the SSE layer broke.
    for (extra, error, status) in [
        // A broken SSE mapping is a contract violation; bytes after the sentinel are corrupt.
        (&b"event: mcp-frame\ndata: !!!!\n\n"[..], "InvalidBase64", 6),
        (b"event: mcp-frame\ndata: AA==\n\n", "TrailingData", 4),
    ] {
        let out = run(
            &["inspect", "--mapping", "sse", "--json"],
            &[&body, extra].concat(),
        );
        assert_eq!(code(&out), status, "{error}");
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got["frames"].as_array().unwrap().len(), 4);
        assert_eq!(got["verdict"]["error"], error);
    }
    let mut broken = body[..body.len() / 2].to_vec();
    broken.extend_from_slice(b"\n\nevent: mcp-frame\ndata: !!!!\n\n");
    let out = run(&["inspect", "--mapping", "sse"], &broken);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("InvalidBase64"), "{text}");
}

#[test]
fn encode_and_decode_the_compatible_mapping() {
    let out = run(
        &[
            "encode",
            "--mapping",
            "compat",
            "--request-key",
            KEY,
            "--attempt-id",
            ATTEMPT,
        ],
        br#"{"ok":true}"#,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Byte for byte the SPEC.md §18.4 example.
    assert_eq!(
        out.stdout,
        std::fs::read(vectors_dir().join("valid_compat_single_message.sse")).unwrap()
    );
    let body = out.stdout;
    let dec = run(&["decode", "--mapping", "compat"], &body);
    assert_eq!(
        (code(&dec), dec.stdout.as_slice()),
        (0, &b"{\"ok\":true}\n"[..])
    );
    // Read as a binary stream: not framed, with a hint naming the mapping.
    let wrong = run(&["verify"], &body);
    assert_eq!(code(&wrong), 6);
    assert!(String::from_utf8_lossy(&wrong.stdout).contains("try --mapping compat"));
    // Every cut is abandoned.
    for cut in (0..body.len()).step_by(5) {
        assert_eq!(
            code(&run(&["verify", "--mapping", "compat"], &body[..cut])),
            3,
            "cut {cut}"
        );
    }
    // Several JSON messages: one event each, the last record carries the sentinel.
    let out = run(
        &["encode", "--mapping", "compat", "--json", "--frame-size", "8"],
        b"{\"jsonrpc\": \"2.0\", \"method\": \"a\"}\n{\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {}}",
    );
    assert_eq!(code(&out), 0);
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let events: Vec<&str> = text.lines().filter(|l| l.starts_with("data: ")).collect();
    assert_eq!(
        events,
        [
            r#"data: {"jsonrpc":"2.0","method":"a"}"#,
            r#"data: {"jsonrpc":"2.0","id":1,"result":{}}"#
        ]
    );
    let dec = run(&["decode", "--mapping", "compat"], &out.stdout);
    assert_eq!(code(&dec), 0);
    // The comments stripped by a gateway: a contract violation, nothing delivered.
    let stripped: String = text
        .lines()
        .filter(|l| !l.starts_with(':'))
        .map(|l| format!("{l}\n"))
        .collect();
    let out = run(&["decode", "--mapping", "compat"], stripped.as_bytes());
    assert_eq!((code(&out), out.stdout.len()), (6, 0));
    assert!(stderr(&out).contains("UnframedEvent"), "{}", stderr(&out));
    // inspect lists the frames the records and events carry.
    let out = run(&["inspect", "--mapping", "compat", "--json"], &body);
    assert_eq!(code(&out), 0);
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["frames"].as_array().unwrap().len(), 4);
    assert_eq!(got["sse"]["carried"], "1 framing records, 1 message events");
    // --chunk cannot split an event.
    let out = run(&["encode", "--mapping", "compat", "--chunk", "3"], b"{}");
    assert_eq!(code(&out), 2);
}

/// An SSE error after a corrupt frame, in one read or two: the frame's error comes first.
#[test]
fn sse_errors_come_in_body_order_whatever_the_reads() {
    use mcp_framing::internals::sse::SseFrameEncoder;
    let mut stream = single_message_vector();
    stream[52 + 20] ^= 1; // the DATA payload
    let mut body = SseFrameEncoder::new().to_events(&stream).to_vec();
    body.push(b':');
    body.extend(std::iter::repeat_n(b'x', 300 * 1024)); // a line over the event bound
    body.extend_from_slice(b"\n\n");
    let out = run(&["verify", "--mapping", "sse", "--json"], &body);
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["error"], "PayloadChecksumMismatch");
    assert_eq!(code(&out), 4);
}

#[test]
fn abort_reasons_are_printed_with_control_characters_escaped() {
    // The reason is chosen by the peer: printed raw it could clear the terminal, forge a line
    // of output or reverse text.
    let mut enc = mcp_framing::StreamEncoder::new(mcp_framing::StreamHead::for_request(None));
    let mut wire = bytes::BytesMut::new();
    enc.abort(
        mcp_framing::AbortCode::InternalError,
        "boom\x1b[2J\r\nforged line\u{202e}txet",
        &mut wire,
    )
    .unwrap();
    for command in ["verify", "decode", "inspect"] {
        let out = run(&[command], &wire);
        assert_eq!(code(&out), 5, "{command}: aborted");
        let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(printed.contains("boom"), "{command}: {printed}");
        assert!(
            !printed.contains(['\x1b', '\r', '\u{202e}']) && !printed.contains("\nforged"),
            "{command} printed the reason raw: {printed:?}"
        );
    }
}

#[test]
fn the_sse_event_bound_follows_the_frame_limit_given() {
    // One 1 MiB frame is one SSE event of about 1.4 MiB of base64.
    let mut enc = mcp_framing::StreamEncoder::builder()
        .frame_size(1 << 20)
        .build(mcp_framing::StreamHead::for_request(None));
    let mut wire = bytes::BytesMut::new();
    enc.message(&vec![b'7'; 1 << 20], &mut wire).unwrap();
    enc.end(&mut wire).unwrap();
    let body = mcp_framing::internals::sse::SseFrameEncoder::new().to_events(&wire);
    for command in ["verify", "decode", "inspect"] {
        let out = run(
            &[
                command,
                "--mapping",
                "sse",
                "--max-frame-payload",
                "1048576",
            ],
            &body,
        );
        assert_eq!(code(&out), 0, "{command}: {}", stderr(&out));
        // With the default frame limit the frame is over the limit: a contract violation.
        let out = run(&[command, "--mapping", "sse"], &body);
        assert_eq!(code(&out), 6, "{command}: {}", stderr(&out));
    }
}

#[test]
fn require_sentinel_makes_every_reading_command_exit_1_for_a_stream_cut_before_its_sentinel() {
    let path = vectors_dir().join("valid_final_response_cut_in_stream_end.bin");
    let path = path.to_str().unwrap();
    let strict = ["--expect-request-key", KEY, "--require-sentinel", path];
    for cmd in ["verify", "decode", "inspect"] {
        let out = run(&[&[cmd, "--json"][..], &strict[..]].concat(), b"");
        assert_eq!(code(&out), 1, "{cmd}: {out:?}");
        let json = if cmd == "decode" {
            &out.stderr
        } else {
            &out.stdout
        };
        let got: Value = serde_json::from_slice(json).unwrap();
        let verdict = if cmd == "inspect" {
            &got["verdict"]
        } else {
            &got
        };
        assert_eq!(
            regime_fields(verdict),
            json!(["sentinel-missing", 1, "clean", false, "B"]),
            "{cmd}"
        );
    }
    let out = run(&[&["verify"][..], &strict[..]].concat(), b"");
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.contains(": sentinel-missing: the final response verified"),
        "{line}"
    );
    assert!(line.contains("(--require-sentinel)"), "{line}");
    // decode still writes the verified messages; only the status differs.
    let out = run(&[&["decode"][..], &strict[..]].concat(), b"");
    assert_eq!(code(&out), 1);
    assert_eq!(out.stdout.iter().filter(|&&b| b == b'\n').count(), 2);
    // A stream with its sentinel stays clean, regime A, under the flag.
    let out = run(&["verify", "--require-sentinel"], &single_message_vector());
    assert_eq!(code(&out), 0);
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.starts_with("stdin: clean: 1 message verified"),
        "{line}"
    );
    assert!(line.ends_with("; regime A, sentinel seen\n"), "{line}");
}

/// What a verdict says of a stream's completeness: `status`, `exit_code`, `verdict`,
/// `sentinel_seen` and `regime`, in that order.
fn regime_fields(verdict: &Value) -> Value {
    ["status", "exit_code", "verdict", "sentinel_seen", "regime"]
        .iter()
        .map(|field| verdict[field].clone())
        .collect()
}

#[cfg(all(feature = "rmcp", feature = "demo"))]
#[path = "support/example_support.rs"]
mod example_support;

/// Each example of `Cargo.toml` (and `examples/*.rs` without an entry) with its required features.
#[cfg(all(feature = "rmcp", feature = "demo"))]
fn examples_and_features() -> Vec<(String, Vec<String>)> {
    let manifest = include_str!("../Cargo.toml");
    let mut examples: Vec<(String, Vec<String>)> = Vec::new();
    let mut in_example = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_example = line == "[[example]]";
        } else if let (true, Some(name)) = (in_example, line.strip_prefix("name = ")) {
            examples.push((name.trim_matches('"').to_owned(), Vec::new()));
        } else if let (true, Some(list)) = (in_example, line.strip_prefix("required-features = ")) {
            let features = list.trim_matches(['[', ']']).split(',');
            examples.last_mut().expect("name first").1 = features
                .map(|f| f.trim().trim_matches('"').to_owned())
                .filter(|f| !f.is_empty())
                .collect();
        }
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    for entry in std::fs::read_dir(dir).expect("examples/") {
        let path = entry.expect("an example").path();
        if path.extension().is_none_or(|ext| ext != "rs") {
            continue; // examples/help/: the command line the examples share
        }
        let name = path
            .file_stem()
            .expect("a name")
            .to_string_lossy()
            .into_owned();
        if !examples.iter().any(|(n, _)| *n == name) {
            examples.push((name, Vec::new()));
        }
    }
    examples.sort();
    examples
}

#[cfg(all(feature = "rmcp", feature = "demo"))]
#[test]
fn every_example_answers_help_with_the_cargo_line_that_runs_it_and_refuses_unknown_arguments() {
    let enabled = [
        ("rmcp", cfg!(feature = "rmcp")),
        ("demo", cfg!(feature = "demo")),
        ("redis", cfg!(feature = "redis")),
        ("internals", cfg!(feature = "internals")),
    ];
    let mut skipped = Vec::new();
    for (name, features) in examples_and_features() {
        // The line a user copies, in --help and at the top of the example: the features are
        // exactly those Cargo.toml requires (Cargo names them too when one is missing).
        let run = if features.is_empty() {
            format!(" --example {name}")
        } else {
            format!(" --features {} --example {name}", features.join(","))
        };
        let source =
            std::fs::read_to_string(format!("{}/examples/{name}.rs", env!("CARGO_MANIFEST_DIR")))
                .expect("the example's source");
        let doc: String = source
            .lines()
            .take_while(|l| l.starts_with("//!") || l.is_empty())
            .map(|l| l.trim_start_matches("//!"))
            .collect::<Vec<_>>()
            .join("\n")
            .replace("\n ", " ");
        assert!(
            doc.contains(&format!("cargo run{run}"))
                || doc.contains(&format!("cargo run --release{run}")),
            "{name}: the module docs show `cargo run ...{run}`"
        );
        let missing: Vec<&String> = features
            .iter()
            .filter(|f| !enabled.iter().any(|(e, on)| e == f && *on))
            .collect();
        if !missing.is_empty() {
            skipped.push(format!("{name} (needs {missing:?})"));
            continue;
        }
        let binary = example_support::example_binary(&name);
        let help = Command::new(&binary).arg("--help").output().expect("runs");
        let text = String::from_utf8(help.stdout.clone()).expect("UTF-8 help");
        assert_eq!(code(&help), 0, "{name} --help: {}", stderr(&help));
        assert!(
            text.starts_with(&format!("usage: {name}")),
            "{name}: {text}"
        );
        let cargo = text
            .lines()
            .find(|l| l.contains("cargo run"))
            .unwrap_or_else(|| panic!("{name} --help names no cargo line: {text}"));
        assert!(
            cargo.contains(&format!("cargo run{run}"))
                || cargo.contains(&format!("cargo run --release{run}")),
            "{name}: {cargo:?} is not `cargo run ...{run}`"
        );
        let wrong = Command::new(&binary)
            .arg("--no-such-option")
            .output()
            .expect("runs");
        assert_eq!(code(&wrong), 2, "{name} --no-such-option: {wrong:?}");
        assert!(
            stderr(&wrong).contains("--help"),
            "{name}: {}",
            stderr(&wrong)
        );
        assert!(wrong.stdout.is_empty(), "{name}: nothing run");
    }
    eprintln!("examples skipped for the features of this build: {skipped:?}");
    if cfg!(all(feature = "redis", feature = "internals")) {
        assert!(skipped.is_empty(), "{skipped:?}");
    }
}

#[test]
fn every_subcommand_of_mcp_frame_answers_help() {
    for cmd in ["encode", "decode", "inspect", "verify"] {
        let out = run(&[cmd, "--help"], b"");
        assert_eq!(code(&out), 0, "{cmd}: {}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains(&format!("Usage: mcp-frame {cmd}")), "{text}");
    }
}
