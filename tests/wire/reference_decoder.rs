//! Every external decoder must agree with the manifest of the conformance suite and with this
//! crate's decoder, on every vector, on thousands of generated and mutated streams, and whatever
//! way the input is split. The external decoders are listed in [`external_decoders`]: the
//! independent Python reference decoder (tests/reference/, written from SPEC.md alone) and the
//! shipped client packages (python/, typescript/), each run once per test in `--batch` mode (the
//! protocol of `tests/reference/mcp_framing_ref.py`), one process each. The reference decoder's
//! own check of every vector (whole, byte by byte, cut in two anywhere:
//! `tests/reference/run_vectors.py`) is a job of `scripts/test` of its own.
//!
//! These tests need `python3`, `node` and the TypeScript package built, and fail (they do not
//! skip) without them: `scripts/test` installs them (`scripts/stock-clients` builds the package).

use crate::support::common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bytes::BytesMut;
use mcp_framing::internals::frame::{FrameHeader, HEADER_LEN};
use mcp_framing::{
    AbortCode, AttemptId, DecodeError, Event, RequestKey, StreamDecoder, StreamEncoder, StreamHead,
    Truncation,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// An external decoder speaking the batch protocol (a job list on stdin, the verdicts on stdout).
struct External {
    /// Who it is, in failure reports.
    name: &'static str,
    program: &'static str,
    /// Arguments; paths are relative to the repository root, the working directory.
    args: &'static [&'static str],
    /// Environment variables set for it.
    env: &'static [(&'static str, &'static str)],
}

/// The decoders every verdict of the crate is compared with. Adding a decoder is one entry here.
fn external_decoders() -> Vec<External> {
    vec![
        External {
            name: "reference decoder (tests/reference/)",
            program: "python3",
            args: &["tests/reference/mcp_framing_ref.py", "--batch"],
            env: &[],
        },
        External {
            // The package's decoder is standard library only: its source tree is enough.
            name: "Python package (python/)",
            program: "python3",
            args: &["-m", "mcp_framing.conformance", "--batch"],
            env: &[("PYTHONPATH", "python/src")],
        },
        External {
            // The package's batch entry point, compiled by `scripts/stock-clients`.
            name: "TypeScript package (typescript/)",
            program: "node",
            args: &["typescript/dist/batch.js", "--batch"],
            env: &[],
        },
    ]
}

/// `tests/vectors`, or the directory named by `MCP_FRAMING_VECTORS` (to check another suite).
fn vectors_dir() -> PathBuf {
    std::env::var_os("MCP_FRAMING_VECTORS")
        .map_or_else(|| repo().join("tests/vectors"), PathBuf::from)
}

/// A program started by [`start`], being fed its input.
struct Running {
    child: std::process::Child,
    writer: std::thread::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// Waits for the program to end; its status and output.
    fn finish(self) -> std::process::Output {
        let out = self.child.wait_with_output().expect("the program ran");
        self.writer
            .join()
            .expect("writer thread")
            .expect("job list written");
        out
    }
}

/// Starts `program` with `args` and `env` in the repository, feeding it `stdin`; panics with a
/// clear message if the program is absent.
fn start(program: &str, args: &[&Path], env: &[(&str, &str)], stdin: &[u8]) -> Running {
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| {
            panic!(
                "cannot run {program} ({err}): run `bash scripts/test`, which installs what the \
                 external decoders need"
            )
        });
    let mut pipe = child.stdin.take().expect("stdin is piped");
    let input = stdin.to_vec();
    // Write from another thread so a large answer cannot deadlock against a large job list.
    let writer = std::thread::spawn(move || pipe.write_all(&input));
    Running { child, writer }
}

/// Decoder settings of one case, in the manifest's `decoder` shape.
#[derive(Clone, Debug)]
struct Config {
    /// The transport mapping: `"binary"` (the default), `"sse"` (SPEC.md §15) or `"compat"`
    /// (§18).
    mapping: &'static str,
    max_frame_payload: Option<u32>,
    max_message_size: Option<u64>,
    request_key: Option<RequestKey>,
    /// The SSE event bound, when not the one the limits imply.
    max_event_data: Option<usize>,
    /// The per-stream bounds (SPEC.md §6.1, §15) a vector sets.
    bounds: common::vectors::Bounds,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            mapping: "binary",
            max_frame_payload: None,
            max_message_size: None,
            request_key: None,
            max_event_data: None,
            bounds: common::vectors::Bounds::default(),
        }
    }
}

impl Config {
    fn from_manifest(value: Option<&Value>, mapping: &'static str) -> Self {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Self {
                mapping,
                ..Self::default()
            };
        };
        Self {
            mapping,
            max_event_data: value["max_event_data"].as_u64().map(|n| n as usize),
            max_frame_payload: value["max_frame_payload"]
                .as_u64()
                .map(|n| u32::try_from(n).expect("max_frame_payload fits u32")),
            max_message_size: value["max_message_size"].as_u64(),
            request_key: value["request_key"]
                .as_str()
                .map(|s| s.parse().expect("request_key is 32 hex digits")),
            bounds: serde_json::from_value(value.clone()).expect("bounds"),
        }
    }

    fn to_json(&self) -> Value {
        let mut out = serde_json::Map::new();
        if let Some(n) = self.max_frame_payload {
            out.insert("max_frame_payload".into(), json!(n));
        }
        if let Some(n) = self.max_message_size {
            out.insert("max_message_size".into(), json!(n));
        }
        if let Some(key) = self.request_key {
            out.insert("request_key".into(), json!(key.to_string()));
        }
        if let Some(n) = self.max_event_data {
            out.insert("max_event_data".into(), json!(n));
        }
        if let Value::Object(bounds) = json!(self.bounds) {
            out.extend(bounds);
        }
        Value::Object(out)
    }

    fn decoder(&self) -> StreamDecoder {
        let mut builder = StreamDecoder::builder();
        if let Some(n) = self.max_frame_payload {
            builder = builder.max_frame_payload(n);
        }
        if let Some(n) = self.max_message_size {
            builder = builder.max_message_size(n);
        }
        if let Some(key) = self.request_key {
            builder = builder.expect_request_key(key);
        }
        let limits = self.bounds.apply(*builder.clone().build().limits());
        builder.limits(limits).build()
    }
}

fn truncation_name(at: &Truncation) -> &'static str {
    at.kind()
}

fn message_json(bytes: &[u8]) -> Value {
    json!({
        "len": bytes.len(),
        "sha256": hex(&Sha256::digest(bytes)),
        "utf8": std::str::from_utf8(bytes).ok(),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The crate decoder's verdict, in the manifest's `expect` shape, feeding `data` cut at `cuts`.
fn rust_verdict(data: &[u8], config: &Config, cuts: &[usize]) -> Value {
    let mut decoder = config.decoder();
    let mut input = Input::new(config);
    let mut buf = BytesMut::new();
    let mut messages = Vec::new();
    // Runs `step` until it needs more input or fails (then returns the error).
    let mut drain = |step: &mut dyn FnMut(&mut BytesMut) -> Result<Option<Event>, DecodeError>,
                     buf: &mut BytesMut|
     -> Option<DecodeError> {
        loop {
            match step(buf) {
                Ok(Some(Event::Message(m))) => messages.push(message_json(m.bytes())),
                Ok(Some(_)) => {}
                Ok(None) => return None,
                Err(err) => return Some(err),
            }
        }
    };
    let mut failure = None;
    // An error of the transport mapping; the frames decoded before it are decoded first.
    let mut mapping_error = None;
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&data.len())) {
        mapping_error = input.push(&data[start..end], &mut buf);
        start = end;
        failure = drain(&mut |b| decoder.decode(b), &mut buf);
        if failure.is_some() || mapping_error.is_some() {
            break;
        }
    }
    if failure.is_none() && mapping_error.is_none() {
        failure = drain(&mut |b| decoder.decode_eof(b), &mut buf);
    }
    let (verdict, abort, error, truncation) = match &failure {
        None if mapping_error.is_some() => {
            ("error", Value::Null, json!(mapping_error), Value::Null)
        }
        None => ("clean", Value::Null, Value::Null, Value::Null),
        Some(DecodeError::PeerAbort(abort)) => (
            "aborted",
            json!({"code": u16::from(abort.code), "reason": abort.reason}),
            json!("PeerAbort"),
            Value::Null,
        ),
        Some(DecodeError::Truncated { at, .. }) => (
            "error",
            Value::Null,
            json!("Truncated"),
            json!(truncation_name(at)),
        ),
        Some(err) => ("error", Value::Null, json!(err.kind()), Value::Null),
    };
    // SPEC.md §11.4: the regime and whether the sentinel decided, from the decoder's own state;
    // a mapping's error is a contract violation, decided by the framing's rules (Regime B).
    let outcome = decoder.outcome();
    let (sentinel_seen, regime) = match (&failure, &mapping_error) {
        (None, Some(_)) => (false, "B"),
        _ => (outcome.sentinel_seen, outcome.regime.name()),
    };
    json!({
        "verdict": verdict,
        "sentinel_seen": sentinel_seen,
        "regime": regime,
        "messages": messages,
        "abort": abort,
        "error": error,
        "truncation": truncation,
    })
}

/// How the bytes of a case become frame bytes (SPEC.md §15, §16, §18).
enum Input {
    Binary,
    #[cfg(feature = "sse")]
    Mapped(Box<mcp_framing::internals::body::MappingDecoder>),
}

impl Input {
    fn new(config: &Config) -> Self {
        // The crate's body decoder of the mapping (SPEC.md §15, §18), its bounds from the limits.
        #[cfg(feature = "sse")]
        {
            let mapping = config.mapping.parse().expect("a mapping");
            let limits = *config.decoder().limits();
            match mcp_framing::internals::body::MappingDecoder::new(
                mapping,
                &limits,
                config.max_event_data,
            ) {
                mcp_framing::internals::body::MappingDecoder::Binary => Self::Binary,
                other => Self::Mapped(Box::new(other)),
            }
        }
        #[cfg(not(feature = "sse"))]
        {
            assert!(
                config.mapping == "binary",
                "mapping {:?} needs the `sse` feature (cargo test --all-features)",
                config.mapping
            );
            Self::Binary
        }
    }

    /// Appends the frame bytes `piece` carries to `buf`; the mapping's error kind if it fails.
    fn push(&mut self, piece: &[u8], buf: &mut BytesMut) -> Option<String> {
        match self {
            Self::Binary => {
                buf.extend_from_slice(piece);
                None
            }
            #[cfg(feature = "sse")]
            Self::Mapped(mapping) => mapping
                .feed(piece, buf)
                .err()
                .map(|err| err.kind().to_owned()),
        }
    }
}

/// One stream to decode, with the ways to split it.
struct Case {
    name: String,
    data: Vec<u8>,
    config: Config,
    /// Each entry: the offsets to cut the input at.
    splits: Vec<Vec<usize>>,
    /// The manifest's expectation, for vectors.
    expect: Option<Value>,
}

impl Case {
    fn new(name: impl Into<String>, data: Vec<u8>, config: Config) -> Self {
        Self {
            name: name.into(),
            data,
            config,
            splits: vec![vec![]],
            expect: None,
        }
    }

    /// Adds one byte-at-a-time feed and every 2-way split (for a stream longer than
    /// `LONG_STREAM`, the 2-way splits at `cut_points`).
    fn with_every_split(mut self) -> Self {
        let n = self.data.len();
        self.splits.push((1..n).collect());
        let cuts = cut_points(&self.data);
        self.splits.extend(cuts.into_iter().map(|cut| vec![cut]));
        self
    }
}

/// Runs every external decoder over `cases` (one process each) and compares every verdict with
/// the crate decoder's (same split) and with the manifest (when given). Returns (agreements,
/// report, the number of streams by the first external decoder's verdict).
fn compare(cases: &[Case]) -> (usize, Vec<String>, BTreeMap<String, usize>) {
    let jobs: Vec<Value> = cases
        .iter()
        .map(|c| {
            json!({
                "hex": hex(&c.data),
                "mapping": c.config.mapping,
                "decoder": c.config.to_json(),
                "splits": c.splits,
            })
        })
        .collect();
    let jobs = serde_json::to_vec(&jobs).unwrap();
    // Every external decoder works on the whole job list at once, in its own process, while
    // this one computes the crate's verdicts; their answers are read in order after that.
    let externals: Vec<(External, Running)> = external_decoders()
        .into_iter()
        .map(|external| {
            let args: Vec<&Path> = external.args.iter().map(Path::new).collect();
            let running = start(external.program, &args, external.env, &jobs);
            (external, running)
        })
        .collect();
    let rust: Vec<Vec<Value>> = cases
        .iter()
        .map(|case| {
            case.splits
                .iter()
                .map(|cuts| rust_verdict(&case.data, &case.config, cuts))
                .collect()
        })
        .collect();
    let mut agreements = 0;
    let mut failures = Vec::new();
    let mut by_verdict = None;
    for (external, running) in externals {
        let out = running.finish();
        assert!(
            out.status.success(),
            "{} failed ({}): {}",
            external.name,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let answers: Vec<Vec<Value>> = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{} prints JSON: {e}", external.name));
        assert_eq!(
            answers.len(),
            cases.len(),
            "{}: one answer per job",
            external.name
        );
        let mut outcomes = BTreeMap::<String, usize>::new();
        for ((case, answer), rust) in cases.iter().zip(answers).zip(&rust) {
            assert_eq!(
                answer.len(),
                case.splits.len(),
                "{}: {}: one verdict per split",
                external.name,
                case.name
            );
            let first = &answer[0];
            let outcome = match first["verdict"].as_str() {
                Some("error") => format!(
                    "{}{}",
                    first["error"].as_str().unwrap_or("?"),
                    first["truncation"]
                        .as_str()
                        .map(|t| format!("/{t}"))
                        .unwrap_or_default()
                ),
                // SPEC.md §7 row 4: clean without the sentinel.
                Some("clean") if first["sentinel_seen"] == false => "delivered".to_owned(),
                other => other.unwrap_or("?").to_owned(),
            };
            *outcomes.entry(outcome).or_default() += 1;
            for ((cuts, theirs), rust) in case.splits.iter().zip(answer).zip(rust) {
                // The fields the crate reports are compared (a decoder may report more).
                let theirs = match (&theirs, rust) {
                    (Value::Object(fields), Value::Object(wanted)) => Value::Object(
                        fields
                            .iter()
                            .filter(|(k, _)| wanted.contains_key(*k))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                    ),
                    _ => theirs,
                };
                let mut ok = true;
                if &theirs != rust {
                    ok = false;
                    failures.push(format!(
                        "{}: {} (cuts {:?}): {theirs} != crate {rust}",
                        external.name,
                        case.name,
                        &cuts[..cuts.len().min(4)]
                    ));
                }
                if let Some(expect) = &case.expect {
                    if &theirs != expect {
                        ok = false;
                        failures.push(format!(
                            "{}: {} (cuts {:?}): {theirs} != manifest {expect}",
                            external.name,
                            case.name,
                            &cuts[..cuts.len().min(4)]
                        ));
                    }
                }
                agreements += usize::from(ok);
            }
        }
        eprintln!("{}: outcomes (by stream): {outcomes:?}", external.name);
        by_verdict.get_or_insert(outcomes);
    }
    (agreements, failures, by_verdict.unwrap_or_default())
}

/// Asserts that both decoders agree on every case; returns the number of streams by verdict.
fn assert_agree(what: &str, cases: &[Case]) -> BTreeMap<String, usize> {
    let (agreements, failures, outcomes) = compare(cases);
    eprintln!(
        "{what}: {} streams, {agreements} verdicts agree, {} disagreements",
        cases.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{what}: {} disagreements, first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    outcomes
}

/// The manifest's expectation reduced to the fields both decoders report.
fn expectation(expect: &Value) -> Value {
    let messages: Vec<Value> = expect["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| json!({"len": m["len"], "sha256": m["sha256"], "utf8": m["utf8"]}))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "verdict": expect["verdict"],
        "sentinel_seen": expect["sentinel_seen"],
        "regime": expect["regime"],
        "messages": messages,
        "abort": expect["abort"],
        "error": expect["error"],
        "truncation": expect["truncation"],
    })
}

/// Vectors up to this size are split at every offset; larger ones at a sample of offsets.
const ALL_SPLITS_MAX: usize = 4096;

#[test]
fn every_external_decoder_agrees_with_the_manifest_and_the_crate_on_every_vector() {
    let manifest_path = vectors_dir().join("manifest.json");
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(&manifest_path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", manifest_path.display())),
    )
    .expect("manifest.json is JSON");
    assert_eq!(manifest["spec_version"], 1);
    let vectors = manifest["vectors"].as_array().expect("a vectors list");
    assert!(!vectors.is_empty(), "the manifest lists no vectors");
    let mut cases = Vec::new();
    for vector in vectors {
        let file = vector["file"].as_str().expect("file name");
        let mapping = match vector["mapping"].as_str().unwrap_or("binary") {
            "binary" => "binary",
            "sse" => "sse",
            "compat" => "compat",
            other => panic!("{file}: unknown mapping {other}"),
        };
        let data = std::fs::read(vectors_dir().join(file)).expect("vector file");
        let config = Config::from_manifest(vector.get("decoder"), mapping);
        let mut case = Case::new(file, data, config);
        if case.data.len() <= ALL_SPLITS_MAX {
            case = case.with_every_split();
        } else {
            let n = case.data.len();
            case.splits.push((1..n).collect());
            let step = n / 256;
            case.splits.extend(
                (0..=n)
                    .step_by(step)
                    .chain([HEADER_LEN, n])
                    .map(|c| vec![c]),
            );
        }
        case.expect = Some(expectation(&vector["expect"]));
        cases.push(case);
    }
    assert_agree("vectors", &cases);
}

/// SplitMix64: a small deterministic generator, so a failure names a reproducible case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).expect("fits usize")
    }
}

fn attempt(first: u32, fill: u8) -> AttemptId {
    let mut bytes = [fill; 16];
    bytes[..4].copy_from_slice(&first.to_be_bytes());
    AttemptId::from_bytes(bytes)
}

const KEY: [u8; 16] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
];

/// Streams written by the crate's encoder, covering every frame kind and terminal.
fn encoded_streams() -> Vec<(&'static str, Vec<u8>)> {
    let key = Some(RequestKey::from_bytes(KEY));
    let enc = |first: u32, frame_size: usize| {
        StreamEncoder::builder()
            .frame_size(frame_size)
            .build(StreamHead {
                request_key: key,
                attempt_id: attempt(first, 0xa5),
            })
    };
    let mut out = Vec::new();

    let mut w = BytesMut::new();
    enc(0xA1A2_A3A4, 16384).end(&mut w).unwrap();
    out.push(("no messages", w.to_vec()));

    let mut w = BytesMut::new();
    let mut e = enc(0xA1A2_A3A4, 16384);
    e.message(br#"{"ok":true}"#, &mut w).unwrap();
    e.end(&mut w).unwrap();
    out.push(("one message", w.to_vec()));

    let mut w = BytesMut::new();
    let mut e = enc(0xFFFF_FFFD, 5);
    e.message(b"", &mut w).unwrap();
    e.keep_alive(&mut w).unwrap();
    e.push(br#"{"jsonrpc":"2.0","#, &mut w).unwrap();
    e.keep_alive(&mut w).unwrap();
    e.push(
        br#""id":1,"result":{"text":"caf\u00e9 \xe2\x82\xac"}}"#,
        &mut w,
    )
    .unwrap();
    e.finish_message(&mut w).unwrap();
    e.message(&[0xff, 0xfe, 0x00], &mut w).unwrap();
    e.keep_alive(&mut w).unwrap();
    e.end(&mut w).unwrap();
    out.push((
        "empty, multi-frame and binary messages, keep-alives, wrapping sequence",
        w.to_vec(),
    ));

    let mut w = BytesMut::new();
    let mut e = enc(7, 4);
    e.message(b"[1,2,3]", &mut w).unwrap();
    e.push(b"{\"partial\":", &mut w).unwrap();
    e.abort(AbortCode::UpstreamFailed, "backend went away", &mut w)
        .unwrap();
    out.push(("abort inside a message", w.to_vec()));

    let mut w = BytesMut::new();
    let mut e = enc(0x8000_0000, 16384);
    e.message(b"{}", &mut w).unwrap();
    e.abort(AbortCode::Other(700), "arrêt: ☃", &mut w).unwrap();
    out.push((
        "abort between messages, reserved code, UTF-8 reason",
        w.to_vec(),
    ));

    // Final JSON-RPC responses (SPEC.md §7.1), so that a keyed decoder's cuts after them are
    // delivered (§7 row 4), and what may or may not follow them.
    let progress =
        br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#;
    let mut w = BytesMut::new();
    let mut e = enc(0x0000_0010, 24);
    e.message(progress, &mut w).unwrap();
    e.message(
        br#" {"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"no"}} "#,
        &mut w,
    )
    .unwrap();
    e.keep_alive(&mut w).unwrap();
    e.end(&mut w).unwrap();
    out.push((
        "a notification, then an error response, a keep-alive",
        w.to_vec(),
    ));

    let mut w = BytesMut::new();
    let mut e = enc(0x0BAD_CAFE, 16384);
    e.message(br#"{"jsonrpc":"2.0","id":null,"result":{"id":1}}"#, &mut w)
        .unwrap();
    e.message(progress, &mut w).unwrap();
    e.message(br#"{"jsonrpc":"2.0","id":2,"result":{}}"#, &mut w)
        .unwrap();
    e.end(&mut w).unwrap();
    out.push((
        "a response, a notification and a second response",
        w.to_vec(),
    ));

    let mut w = BytesMut::new();
    let mut e = enc(0x7777_0000, 8);
    e.message(br#"[{"id":1,"result":{}}]"#, &mut w).unwrap();
    e.message(br#"{"id":1,"result":NaN}"#, &mut w).unwrap();
    e.message(br#"{"id":1,"result":{}}x"#, &mut w).unwrap();
    e.message(br#"{"result":{},"params":{"id":1}}"#, &mut w)
        .unwrap();
    e.message(br#"{"jsonrpc":"2.0","\u0069d":5,"result":[]}"#, &mut w)
        .unwrap();
    e.abort(AbortCode::Overloaded, "draining", &mut w).unwrap();
    out.push((
        "messages that are not responses (a batch, NaN, trailing bytes, a nested id), then an escaped-key response and an abort",
        w.to_vec(),
    ));

    // Messages longer than 4 KiB: a decoder may read a long message's head first and the rest
    // only where §7.1 decides a verdict (the Python package does), so these streams compare that
    // path too: a cut JSON text that looks like a response, a response whose `id` follows its
    // long result, and a message after a long response.
    let long = "é x \\\"q\\\" ".repeat(400);
    let lookalike = format!(r#"{{"jsonrpc":"2.0","id":5,"result":{{"text":"{long}"}}"#);
    let id_last = format!(r#"{{"jsonrpc":"2.0","result":{{"text":"{long}"}},"id":4}}"#);
    let id_first =
        format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"text":"{long}"}}]}}}}"#);
    let mut w = BytesMut::new();
    let mut e = enc(0x4000_0000, 1024);
    e.message(lookalike.as_bytes(), &mut w).unwrap();
    e.message(id_last.as_bytes(), &mut w).unwrap();
    e.keep_alive(&mut w).unwrap();
    e.end(&mut w).unwrap();
    out.push((
        "a long cut JSON text that looks like a response, then a long response whose id comes last",
        w.to_vec(),
    ));
    let mut w = BytesMut::new();
    let mut e = enc(0x4000_1000, 1500);
    e.message(id_first.as_bytes(), &mut w).unwrap();
    e.message(progress, &mut w).unwrap();
    e.end(&mut w).unwrap();
    out.push(("a long response, then a notification", w.to_vec()));
    out
}

/// A stream longer than this is cut at `cut_points` rather than at every offset (the cases grow
/// with the square of its length otherwise).
const LONG_STREAM: usize = 2048;

/// Where a stream is cut: every offset of a short stream; for a long one, every offset within
/// 24 bytes of each frame boundary (headers, the bytes around each MESSAGE_END) and every 13th.
fn cut_points(stream: &[u8]) -> Vec<usize> {
    let n = stream.len();
    if n <= LONG_STREAM {
        return (0..=n).collect();
    }
    let mut at: usize = 0;
    let mut cuts: Vec<usize> = (0..=n).step_by(13).collect();
    for frame in frames_of(stream) {
        cuts.extend(at.saturating_sub(24)..=(at + 24).min(n));
        at += frame.len();
    }
    cuts.extend(n.saturating_sub(24)..=n);
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// Splits a well-formed stream into its frames (header + payload bytes).
fn frames_of(stream: &[u8]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut at = 0;
    while at + HEADER_LEN <= stream.len() {
        let len = u32::from_be_bytes(stream[at + 8..at + 12].try_into().unwrap()) as usize;
        let end = (at + HEADER_LEN + len).min(stream.len());
        frames.push(stream[at..end].to_vec());
        at = end;
    }
    frames
}

/// Rewrites a frame's header fields and recomputes its CRCs, so the decoders get past the
/// checksums to the stream rules.
fn reframe(kind: u8, sequence: u32, len: u32, payload: &[u8]) -> Vec<u8> {
    let mut header = FrameHeader::for_payload(kind, sequence, payload);
    header.len = len;
    let mut out = header.to_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

fn seq_of(frame: &[u8]) -> u32 {
    u32::from_be_bytes(frame[4..8].try_into().unwrap())
}

#[test]
fn every_external_decoder_agrees_with_the_crate_on_generated_and_mutated_streams() {
    let streams = encoded_streams();
    let default = Config::default();
    let keyed = Config {
        request_key: Some(RequestKey::from_bytes(KEY)),
        ..Config::default()
    };
    let mut cases = Vec::new();
    let mut rng = Rng(0x5EED);
    for (name, stream) in &streams {
        cases.push(Case::new(*name, stream.clone(), default.clone()).with_every_split());
        cases.push(Case::new(
            format!("{name}, key expected"),
            stream.clone(),
            keyed.clone(),
        ));
        let other_key = Config {
            request_key: Some(RequestKey::from_bytes([7; 16])),
            ..Config::default()
        };
        cases.push(Case::new(
            format!("{name}, other key"),
            stream.clone(),
            other_key,
        ));
        let small = Config {
            max_message_size: Some(6),
            ..Config::default()
        };
        cases.push(Case::new(
            format!("{name}, 6-byte messages"),
            stream.clone(),
            small,
        ));
        for cut in cut_points(stream)
            .into_iter()
            .filter(|&cut| cut < stream.len())
        {
            cases.push(Case::new(
                format!("{name}, cut at {cut}"),
                stream[..cut].to_vec(),
                default.clone(),
            ));
            // A keyed decoder delivers the final response at a cut after it (SPEC.md §7 row 4).
            cases.push(Case::new(
                format!("{name}, cut at {cut}, key expected"),
                stream[..cut].to_vec(),
                keyed.clone(),
            ));
        }
        let mut trailing = stream.clone();
        trailing.push(0x9f);
        cases.push(Case::new(
            format!("{name}, trailing byte"),
            trailing,
            default.clone(),
        ));
        for _ in 0..(3 * stream.len()).min(3 * LONG_STREAM) {
            let mut flipped = stream.clone();
            let at = rng.below(flipped.len());
            flipped[at] ^= 1 << rng.below(8);
            let config = if rng.below(2) == 0 { &default } else { &keyed };
            cases.push(Case::new(
                format!("{name}, bit flip at {at}"),
                flipped,
                config.clone(),
            ));
        }
        let frames = frames_of(stream);
        for i in 0..frames.len() {
            let join = |fs: Vec<&Vec<u8>>| fs.into_iter().flatten().copied().collect::<Vec<u8>>();
            let dropped = join(
                frames
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, f)| f)
                    .collect(),
            );
            cases.push(Case::new(
                format!("{name}, frame {i} dropped"),
                dropped.clone(),
                default.clone(),
            ));
            cases.push(Case::new(
                format!("{name}, frame {i} dropped, key expected"),
                dropped,
                keyed.clone(),
            ));
            let mut dup: Vec<&Vec<u8>> = frames.iter().collect();
            dup.insert(i, &frames[i]);
            cases.push(Case::new(
                format!("{name}, frame {i} twice"),
                join(dup),
                default.clone(),
            ));
            if i + 1 < frames.len() {
                let mut swapped: Vec<&Vec<u8>> = frames.iter().collect();
                swapped.swap(i, i + 1);
                cases.push(Case::new(
                    format!("{name}, frames {i}/{} swapped", i + 1),
                    join(swapped),
                    default.clone(),
                ));
            }
            // Header rewrites with valid CRCs: every kind class, lengths, sequence numbers.
            let frame = &frames[i];
            let (kind, seq, payload) = (frame[3], seq_of(frame), &frame[HEADER_LEN..]);
            let len = u32::try_from(payload.len()).unwrap();
            let mut rewrites = Vec::new();
            for k in [
                0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x7f, 0x80, 0xff,
            ] {
                rewrites.push((format!("kind {k:#04x}"), reframe(k, seq, len, payload)));
            }
            for (what, s) in [
                ("seq +2", seq.wrapping_add(2)),
                ("seq -1", seq.wrapping_sub(1)),
                ("seq +2^20", seq.wrapping_add(1 << 20)),
                ("seq +2^20+1", seq.wrapping_add((1 << 20) + 1)),
                ("seq -2^20", seq.wrapping_sub(1 << 20)),
                ("seq -2^20-1", seq.wrapping_sub((1 << 20) + 1)),
                ("seq +2^31", seq.wrapping_add(1 << 31)),
            ] {
                rewrites.push((what.to_owned(), reframe(kind, s, len, payload)));
            }
            for (what, l) in [
                ("len -1", len.wrapping_sub(1)),
                ("len +1", len + 1),
                ("len 0", 0),
                ("len 65537", 65537),
                ("len max", u32::MAX),
            ] {
                rewrites.push((what.to_owned(), reframe(kind, seq, l, payload)));
            }
            if !payload.is_empty() {
                let mut p = payload.to_vec();
                let at = rng.below(p.len());
                p[at] ^= 1 << rng.below(8);
                rewrites.push((
                    format!("payload bit {at} with CRC"),
                    reframe(kind, seq, len, &p),
                ));
                let mut p = payload.to_vec();
                *p.last_mut().unwrap() = 0xc3; // a cut UTF-8 sequence in an ABORT reason
                rewrites.push((
                    "last payload byte 0xc3 with CRC".to_owned(),
                    reframe(kind, seq, len, &p),
                ));
            }
            for (what, frame) in rewrites {
                let mut fs: Vec<&Vec<u8>> = frames.iter().collect();
                fs[i] = &frame;
                let config = if rng.below(2) == 0 { &default } else { &keyed };
                cases.push(Case::new(
                    format!("{name}, frame {i}: {what}"),
                    join(fs),
                    config.clone(),
                ));
            }
        }
    }
    // Splices of two attempts of the same request at every frame boundary.
    let (_, a) = &streams[1];
    let mut w = BytesMut::new();
    let mut e = StreamEncoder::new(StreamHead {
        request_key: Some(RequestKey::from_bytes(KEY)),
        attempt_id: attempt(0x0BAD_F00D, 0x5a),
    });
    e.message(br#"{"ok":false}"#, &mut w).unwrap();
    e.end(&mut w).unwrap();
    let (fa, fb) = (frames_of(a), frames_of(&w));
    for k in 1..fa.len() {
        let spliced: Vec<u8> = fa[..k].iter().chain(&fb[k..]).flatten().copied().collect();
        cases.push(Case::new(
            format!("splice at frame {k}"),
            spliced,
            keyed.clone(),
        ));
    }
    // A frame limit below a message's frame size.
    let mut w = BytesMut::new();
    let mut e = StreamEncoder::builder()
        .frame_size(2000)
        .build(StreamHead::for_request(None));
    e.message(&[b'x'; 3000], &mut w).unwrap();
    e.end(&mut w).unwrap();
    let tight = Config {
        max_frame_payload: Some(1026),
        ..Config::default()
    };
    cases.push(Case::new("2000-byte frame, 1026 limit", w.to_vec(), tight));
    cases.push(Case::new(
        "2000-byte frames, default limit",
        w.to_vec(),
        default.clone(),
    ));
    // Random garbage and unframed bodies.
    cases.push(Case::new(
        "unframed JSON",
        br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec(),
        default.clone(),
    ));
    cases.push(Case::new(
        "short unframed JSON",
        b"{}".to_vec(),
        default.clone(),
    ));
    for n in 0..200 {
        let len = rng.below(120);
        let mut data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if n % 2 == 0 && data.len() >= 3 {
            data[..3].copy_from_slice(&[0x9f, 0x4d, 0x01]);
        }
        cases.push(Case::new(format!("garbage {n}"), data, default.clone()));
    }
    assert!(cases.len() > 2000, "{} cases", cases.len());
    let outcomes = assert_agree("generated streams", &cases);
    // The final-response rule (SPEC.md §7 row 4) is exercised, not only the sentinel's.
    assert!(
        outcomes.get("delivered").copied().unwrap_or(0) >= 50,
        "delivered streams: {outcomes:?}"
    );
}

/// SSE bodies (SPEC.md §15) made by the crate's SSE encoder, reformatted and mutated.
#[cfg(feature = "sse")]
#[test]
fn every_external_decoder_agrees_with_the_crate_on_sse_bodies() {
    use mcp_framing::internals::sse::SseFrameEncoder;

    let sse = Config {
        mapping: "sse",
        ..Config::default()
    };
    let sse_keyed = Config {
        request_key: Some(RequestKey::from_bytes(KEY)),
        ..sse.clone()
    };
    let mut rng = Rng(0x55E);
    let event = |bytes: &[u8]| SseFrameEncoder::new().to_events(bytes).to_vec();
    let mut cases = Vec::new();
    // The long streams' lazy reading of §7.1 is the frame decoder's, compared on the binary
    // streams above; cut at every offset of their base64 bodies they would make this batch
    // hundreds of megabytes.
    for (name, stream) in encoded_streams()
        .into_iter()
        .filter(|(_, stream)| stream.len() <= LONG_STREAM)
    {
        let body = event(&stream);
        let frames = frames_of(&stream);
        cases.push(Case::new(format!("sse {name}"), body.clone(), sse.clone()).with_every_split());
        cases.push(Case::new(
            format!("sse {name}, key"),
            body.clone(),
            sse_keyed.clone(),
        ));
        let replace = |from: &[u8], to: &[u8]| replace_all(&body, from, to);
        cases.push(
            Case::new(
                format!("sse {name}, CRLF"),
                replace(b"\n", b"\r\n"),
                sse.clone(),
            )
            .with_every_split(),
        );
        cases.push(
            Case::new(
                format!("sse {name}, CR"),
                replace(b"\n", b"\r"),
                sse.clone(),
            )
            .with_every_split(),
        );
        let mut primed = b"\xef\xbb\xbf: stream opened\nid: 0\nretry: 1000\n\n".to_vec();
        primed.extend_from_slice(&replace(
            b"\n\nevent",
            b"\n\n: keep-alive\nfoo: bar\n\nevent",
        ));
        cases.push(
            Case::new(
                format!("sse {name}, BOM, priming event, comments"),
                primed,
                sse.clone(),
            )
            .with_every_split(),
        );
        // Each event's base64 split over two data lines; then two frames per event.
        let mut split_lines = Vec::new();
        let mut paired = Vec::new();
        for (i, frame) in frames.iter().enumerate() {
            let one = event(frame);
            let text = std::str::from_utf8(&one).unwrap();
            let data = text
                .strip_prefix("event: mcp-frame\ndata: ")
                .unwrap()
                .trim_end();
            let cut = (rng.below(data.len()) / 4) * 4 + rng.below(3);
            let cut = cut.min(data.len());
            split_lines.extend_from_slice(
                format!(
                    "event: mcp-frame\ndata: {}\ndata:{}\n\n",
                    &data[..cut],
                    &data[cut..]
                )
                .as_bytes(),
            );
            if i % 2 == 0 {
                use base64::Engine as _;
                let pair: Vec<u8> = frames[i..(i + 2).min(frames.len())].concat();
                let data = base64::engine::general_purpose::STANDARD.encode(&pair);
                paired.extend_from_slice(format!("event: mcp-frame\ndata: {data}\n\n").as_bytes());
            }
        }
        cases.push(
            Case::new(format!("sse {name}, data lines"), split_lines, sse.clone())
                .with_every_split(),
        );
        cases.push(
            Case::new(
                format!("sse {name}, two frames per event"),
                paired,
                sse.clone(),
            )
            .with_every_split(),
        );
        for cut in 0..body.len() {
            cases.push(Case::new(
                format!("sse {name}, cut at {cut}"),
                body[..cut].to_vec(),
                sse.clone(),
            ));
            cases.push(Case::new(
                format!("sse {name}, cut at {cut}, key"),
                body[..cut].to_vec(),
                sse_keyed.clone(),
            ));
        }
        for _ in 0..body.len() / 4 {
            let mut mutated = body.clone();
            let at = rng.below(mutated.len());
            const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            mutated[at] = match rng.below(4) {
                0 => b'!',
                1 => b'=',
                2 => b'\n',
                _ => B64[rng.below(64)],
            };
            cases.push(Case::new(
                format!("sse {name}, byte {at} replaced"),
                mutated,
                sse.clone(),
            ));
        }
        let mut dropped = body.clone();
        dropped.remove(rng.below(body.len()));
        cases.push(Case::new(
            format!("sse {name}, a byte dropped"),
            dropped,
            sse.clone(),
        ));
        for extra in [
            &b"event: mcp-frame\ndata: AA==\n\n"[..],
            b": after the end\n\n",
            b"event: message\ndata: {}\n\n",
            b"event: mcp-frame\ndata: AA==",
        ] {
            let mut more = body.clone();
            more.extend_from_slice(extra);
            cases.push(Case::new(
                format!("sse {name} + {:?}", String::from_utf8_lossy(extra)),
                more,
                sse.clone(),
            ));
        }
    }
    // Bodies that are not (only) framed, and edge cases of the event format.
    let (_, one) = &encoded_streams()[1];
    let body = event(one);
    let prefixed = |head: &[u8]| [head, &body[..]].concat();
    for (what, data) in [
        (
            "unnamed message event",
            prefixed(b"data: {\"jsonrpc\":\"2.0\"}\n\n"),
        ),
        (
            "named message event",
            prefixed(b"event: message\ndata: {}\n\n"),
        ),
        (
            "mcp-frame event without data",
            prefixed(b"event: mcp-frame\n\n"),
        ),
        (
            "mcp-frame event with empty data",
            prefixed(b"event: mcp-frame\ndata:\n\n"),
        ),
        (
            "event name without a space",
            replace_all(&body, b"event: ", b"event:"),
        ),
        (
            "event name with a trailing space",
            replace_all(&body, b"event: mcp-frame", b"event: mcp-frame "),
        ),
        (
            "data without a space",
            replace_all(&body, b"data: ", b"data:"),
        ),
        (
            "unpadded base64",
            b"event: mcp-frame\ndata: QQ\n\n".to_vec(),
        ),
        (
            "non-canonical base64 bits",
            b"event: mcp-frame\ndata: QR==\n\n".to_vec(),
        ),
        (
            "base64 with a space",
            b"event: mcp-frame\ndata: QUJD REVG\n\n".to_vec(),
        ),
        ("empty body", Vec::new()),
        ("only comments", b": a\n: b\n\n".to_vec()),
        (
            "event too large",
            [
                &b"event: mcp-frame\ndata: "[..],
                &vec![b'A'; 256 * 1024 + 4],
                b"\n\n",
            ]
            .concat(),
        ),
        ("unnamed event with empty data", prefixed(b"data:\n\n")),
        ("named event without data", prefixed(b"event: ping\n\n")),
        (
            "giant comment",
            prefixed(&[&b":"[..], &vec![b'x'; 300 * 1024], b"\n\n"].concat()),
        ),
        (
            "two data lines at the limit",
            [
                &b"event: mcp-frame\ndata: "[..],
                &vec![b'A'; 128 * 1024],
                b"\ndata: ",
                &vec![b'A'; 128 * 1024],
                b"\n\n",
            ]
            .concat(),
        ),
        (
            "event at the limit",
            [
                &b"event: mcp-frame\ndata: "[..],
                &vec![b'A'; 256 * 1024],
                b"\n\n",
            ]
            .concat(),
        ),
    ] {
        cases.push(Case::new(format!("sse edge: {what}"), data, sse.clone()));
    }
    assert!(cases.len() > 1000, "{} cases", cases.len());
    assert_agree("SSE bodies", &cases);
}

#[cfg(feature = "sse")]
fn replace_all(data: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(at) = rest.windows(from.len()).position(|w| w == from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// Bodies of the compatible SSE mapping (SPEC.md §18) made by the crate's compat encoder,
/// reformatted, cut, mutated, and with records or events stripped, dropped or duplicated.
#[cfg(feature = "sse")]
#[test]
fn every_external_decoder_agrees_with_the_crate_on_compat_bodies() {
    use mcp_framing::internals::{body::MappingEncoder, sse_compat::CompatEncoder};
    use mcp_framing::mapping::Mapping;

    let compat = Config {
        mapping: "compat",
        ..Config::default()
    };
    let keyed = Config {
        request_key: Some(RequestKey::from_bytes(KEY)),
        ..compat.clone()
    };
    let key = Some(RequestKey::from_bytes(KEY));
    let frames = |first: u32, frame_size: usize| {
        StreamEncoder::builder()
            .frame_size(frame_size)
            .build(StreamHead {
                request_key: key,
                attempt_id: attempt(first, 0xc3),
            })
    };
    let encoder = |first: u32, frame_size: usize| CompatEncoder::new(frames(first, frame_size));
    let large = format!("{{\"data\":\"{}\"}}", "y".repeat(5000));
    let mut bodies: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut b = BytesMut::new();
    encoder(0xA1A2_A3A4, 16384).end(&mut b).unwrap();
    bodies.push(("no messages", b.to_vec()));
    let mut b = BytesMut::new();
    encoder(0xA1A2_A3A4, 16384)
        .final_message(br#"{"ok":true}"#, &mut b)
        .unwrap();
    bodies.push(("one message", b.to_vec()));
    let mut b = BytesMut::new();
    let mut e = encoder(0xFFFF_FFFE, 7);
    e.message("{\"progress\":\"caf\u{e9} \u{20ac}\"}".as_bytes(), &mut b)
        .unwrap();
    e.message(b"{\n  \"pretty\": true\n}", &mut b).unwrap();
    e.final_message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut b)
        .unwrap();
    bodies.push((
        "three messages, wrapping sequence, multi-byte, multi-line",
        b.to_vec(),
    ));
    let mut b = BytesMut::new();
    let mut e = encoder(0x0102_0304, 1024);
    e.message(large.as_bytes(), &mut b).unwrap();
    e.abort(AbortCode::UpstreamFailed, "gone", &mut b).unwrap();
    bodies.push(("a 5 KiB message in 1 KiB frames, aborted", b.to_vec()));
    // The final response with STREAM_END in a later record (SPEC.md §18.5): a keyed decoder
    // delivers its cuts between the response's event and that record (§7 row 4).
    let mut b = BytesMut::new();
    let mut e = MappingEncoder::new(Mapping::Compat, frames(0x0000_0042, 16384));
    e.message(
        br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
        &mut b,
    )
    .unwrap();
    e.message(
        br#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#,
        &mut b,
    )
    .unwrap();
    e.keep_alive(&mut b).unwrap();
    e.end(&mut b).unwrap();
    bodies.push((
        "a notification, the response, then a keep-alive and STREAM_END in records of their own",
        b.to_vec(),
    ));

    let mut rng = Rng(0xC0A7);
    let mut cases = Vec::new();
    for (name, body) in &bodies {
        let small = body.len() <= 2048;
        let case = |what: String, data: Vec<u8>, config: &Config| {
            let case = Case::new(format!("compat {name}, {what}"), data, config.clone());
            if small { case.with_every_split() } else { case }
        };
        cases.push(case("as written".into(), body.clone(), &compat));
        cases.push(case("key".into(), body.clone(), &keyed));
        let replace = |from: &[u8], to: &[u8]| replace_all(body, from, to);
        cases.push(case("CRLF".into(), replace(b"\n", b"\r\n"), &compat));
        cases.push(case("CR".into(), replace(b"\n", b"\r"), &compat));
        let mut primed = b"\xef\xbb\xbf:\n\ndata: \nid: 0\nretry: 1000\n\n".to_vec();
        primed.extend_from_slice(&replace(
            b"\n:mcp",
            b"\n: keep-alive\n\n: mcp-framing x\n:mcp",
        ));
        cases.push(case(
            "BOM, priming event, keep-alives".into(),
            primed,
            &compat,
        ));
        cases.push(case(
            "events named message, with ids".into(),
            replace(b"\ndata: ", b"\nevent: message\nid: 7\ndata: "),
            &compat,
        ));
        let lines: Vec<&[u8]> = body.split_inclusive(|&b| b == b'\n').collect();
        let without = |keep: &dyn Fn(&[u8]) -> bool| -> Vec<u8> {
            lines
                .iter()
                .filter(|l| keep(l))
                .flat_map(|l| l.to_vec())
                .collect()
        };
        cases.push(case(
            "comments stripped".into(),
            without(&|l: &[u8]| !l.starts_with(b":")),
            &compat,
        ));
        // Records and events, one at a time, dropped and duplicated.
        let pieces: Vec<Vec<u8>> = body.split_inclusive(|&b| b == b'\n').fold(
            Vec::new(),
            |mut pieces: Vec<Vec<u8>>, line| {
                match pieces.last_mut() {
                    Some(last) if !line.starts_with(b":") && !last.starts_with(b":") => {
                        last.extend_from_slice(line);
                    }
                    _ => pieces.push(line.to_vec()),
                }
                pieces
            },
        );
        for i in 0..pieces.len() {
            let mut dropped = pieces.clone();
            dropped.remove(i);
            cases.push(case(
                format!("piece {i} dropped"),
                dropped.concat(),
                &compat,
            ));
            let mut twice = pieces.clone();
            twice.insert(i, pieces[i].clone());
            cases.push(case(format!("piece {i} twice"), twice.concat(), &compat));
        }
        let step = if small { 1 } else { 37 };
        for cut in (0..body.len()).step_by(step) {
            cases.push(Case::new(
                format!("compat {name}, cut at {cut}"),
                body[..cut].to_vec(),
                compat.clone(),
            ));
            cases.push(Case::new(
                format!("compat {name}, cut at {cut}, key"),
                body[..cut].to_vec(),
                keyed.clone(),
            ));
        }
        const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for _ in 0..body.len().min(1500) / 3 {
            let mut mutated = body.clone();
            let at = rng.below(mutated.len());
            mutated[at] = match rng.below(7) {
                0 => b'!',
                1 => b'=',
                2 => b'\n',
                3 => b':',
                4 => mutated[at] ^ (1 << rng.below(8)),
                5 => rng.next() as u8,
                _ => B64[rng.below(64)],
            };
            cases.push(Case::new(
                format!("compat {name}, byte {at} replaced"),
                mutated,
                compat.clone(),
            ));
        }
        let mut dropped = body.clone();
        dropped.remove(rng.below(body.len()));
        cases.push(Case::new(
            format!("compat {name}, a byte dropped"),
            dropped,
            compat.clone(),
        ));
        for extra in [
            &b":mcp-framing n00BBgAAAAAAAAAAAAAAAAAAAAA=\n"[..],
            b"data: {}\n\n",
            b"event: ping\ndata: x\n\n",
            b": after the end\n\n",
            b":mcp-framing\n",
            b":mcp-framing \n",
            b":mcp-framingAAAA\n",
            b":mcp-framing AAAA AAAA\n",
        ] {
            cases.push(Case::new(
                format!("compat {name} + {:?}", String::from_utf8_lossy(extra)),
                [&body[..], extra].concat(),
                compat.clone(),
            ));
        }
    }
    // Records that hold a broken frame, a lone header, an unknown kind, several messages.
    let (_, one) = &encoded_streams()[1];
    let record = |frames: &[u8]| {
        use base64::Engine as _;
        format!(
            ":mcp-framing {}\n",
            base64::engine::general_purpose::STANDARD.encode(frames)
        )
        .into_bytes()
    };
    let mut unknown_kind = FrameHeader::for_payload(0x07, 0xA1A2_A3A5, b"x")
        .to_bytes()
        .to_vec();
    unknown_kind.push(b'x');
    for (what, data) in [
        ("a partial header", record(&one[..10])),
        ("HEAD cut in its payload", record(&one[..40])),
        (
            "HEAD then an unknown kind",
            [record(&one[..52]), record(&unknown_kind)].concat(),
        ),
        ("the binary frames whole", record(one)),
        (
            "an event of another type",
            b"event: mcp-frame\ndata: AA==\n\n".to_vec(),
        ),
        (
            "an event of another type after a record",
            [
                record(&one[..72]),
                b"event: ping\ndata: {\"ok\":true}\n\n".to_vec(),
            ]
            .concat(),
        ),
        ("empty body", Vec::new()),
    ] {
        cases.push(Case::new(
            format!("compat edge: {what}"),
            data,
            compat.clone(),
        ));
    }
    let (_, body) = &bodies[3];
    for max in [64usize, 1024, 5000, 5012, 5013, 6000] {
        cases.push(Case::new(
            format!("compat event bound {max}"),
            body.clone(),
            Config {
                max_event_data: Some(max),
                ..compat.clone()
            },
        ));
    }
    assert!(cases.len() > 1500, "{} cases", cases.len());
    assert_agree("compat bodies", &cases);
}
