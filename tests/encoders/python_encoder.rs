//! The Python package's encoder (python/src/mcp_framing/encoder.py) against the crate: over
//! thousands of generated streams (message sizes around the frame size, UTF-8 of every width,
//! frame sizes from 1 byte to 64 KiB, message limits that refuse, keep-alives, streamed
//! messages, aborts; binary, SSE and compatible mappings) it writes exactly the bytes the crate's
//! `MappingEncoder` writes for the same attempt id, and the crate's decoder, the reference decoder
//! (tests/reference/) and the Python package's decoder all accept every one with the same
//! verdict and messages.
//!
//! Needs `python3` (the package's encoder and decoders are standard library only: the source
//! tree is enough); it fails, and does not skip, without it.

use super::{crate_encoder, hex, repo, unhex};
use std::process::Command;

use bytes::BytesMut;
use mcp_framing::internals::body::CompatEncodeError;
use mcp_framing::mapping::Mapping;
use mcp_framing::{
    AbortCode, BodyDecoder, BodyError, DecodeError, EncodeError, Event, RequestKey, StreamDecoder,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A small deterministic generator (xorshift64*): the same jobs on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    fn bytes16(&mut self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.next().to_le_bytes());
        out[8..].copy_from_slice(&self.next().to_le_bytes());
        out
    }
}

/// One operation of a job, as the driver reads it.
#[derive(Clone, Debug)]
enum Op {
    Message(Vec<u8>),
    Push(Vec<u8>),
    Finish,
    KeepAlive,
    End,
    Abort(u16, String),
}

impl Op {
    fn to_json(&self) -> Value {
        match self {
            Op::Message(m) => json!(["message", hex(m)]),
            Op::Push(m) => json!(["push", hex(m)]),
            Op::Finish => json!(["finish"]),
            Op::KeepAlive => json!(["keepalive"]),
            Op::End => json!(["end"]),
            Op::Abort(code, reason) => json!(["abort", code, reason]),
        }
    }
}

#[derive(Clone, Debug)]
struct Job {
    mapping: Mapping,
    frame_size: usize,
    max_message_size: u64,
    request_key: Option<RequestKey>,
    attempt_id: [u8; 16],
    ops: Vec<Op>,
}

/// Text of `len` bytes or a little more, in one of several alphabets: JSON-ish ASCII, 2-, 3-
/// and 4-byte UTF-8, line feeds; `raw` adds bytes an SSE event cannot carry (CR, invalid UTF-8).
fn text(rng: &mut Rng, len: usize, raw: bool) -> Vec<u8> {
    const PIECES: &[&str] = &[
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""#,
        "abc",
        "\"}]}}",
        "é",
        "中文",
        "😀",
        "\n",
        " ",
        "\\u00e9",
    ];
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        if raw && rng.below(50) == 0 {
            out.push(*rng.pick(&[b'\r', 0xff, 0xc3, 0x80, 0x00]));
        } else {
            out.extend_from_slice(rng.pick(PIECES).as_bytes());
        }
    }
    out
}

fn message_len(rng: &mut Rng, frame_size: usize) -> usize {
    let cap = if frame_size < 16 { 600 } else { 70_000 };
    let len = match rng.below(20) {
        0..=3 => rng.below(17) as usize,
        4..=9 => rng.below(300) as usize,
        10..=15 => rng.below(5000) as usize,
        16..=17 => rng.below(70_000) as usize,
        // Around a multiple of the frame size.
        _ => (frame_size * (1 + rng.below(4) as usize)).saturating_sub(1) + rng.below(3) as usize,
    };
    len.min(cap)
}

fn job(rng: &mut Rng) -> Job {
    let mapping = *rng.pick(&[Mapping::Binary, Mapping::Sse, Mapping::Compat]);
    let frame_size = *rng.pick(&[1, 2, 3, 7, 16, 100, 1000, 1025, 1026, 4096, 16384, 65536]);
    let max_message_size = if rng.below(7) == 0 {
        rng.below(6000)
    } else {
        16 << 20
    };
    let request_key = (rng.below(3) != 0).then(|| RequestKey::from_bytes(rng.bytes16()));
    let mut attempt_id = rng.bytes16();
    if rng.below(10) == 0 {
        // Sequence numbers that wrap from 0xFFFFFFFF to 0 within the stream (SPEC.md §4).
        attempt_id[..4].copy_from_slice(&(u32::MAX - rng.below(8) as u32).to_be_bytes());
    }
    let raw = mapping != Mapping::Compat || rng.below(20) == 0;
    let mut ops = Vec::new();
    for _ in 0..rng.below(5) {
        match rng.below(10) {
            0 => ops.push(Op::KeepAlive),
            1 if mapping != Mapping::Compat => {
                for _ in 0..=rng.below(3) {
                    let len = message_len(rng, frame_size);
                    ops.push(Op::Push(text(rng, len, raw)));
                }
                ops.push(Op::Finish);
            }
            _ => {
                let len = message_len(rng, frame_size);
                let len = if mapping == Mapping::Compat && rng.below(40) != 0 {
                    len.max(1)
                } else {
                    len
                };
                ops.push(Op::Message(text(rng, len, raw)));
            }
        }
    }
    if rng.below(8) == 0 {
        let code = *rng.pick(&[0u16, 1, 2, 3, 4, 5, 77]);
        let len = rng.below(1500) as usize;
        let reason = String::from_utf8_lossy(&text(rng, len, false)).into_owned();
        ops.push(Op::Abort(code, reason));
    } else {
        ops.push(Op::End);
    }
    Job {
        mapping,
        frame_size,
        max_message_size,
        request_key,
        attempt_id,
        ops,
    }
}

fn error_kind(err: &CompatEncodeError) -> &'static str {
    match err {
        CompatEncodeError::Encode(EncodeError::MessageTooLarge { .. }) => "MessageTooLarge",
        CompatEncodeError::Encode(EncodeError::MessageOpen) => "MessageOpen",
        CompatEncodeError::Encode(EncodeError::StreamFinished) => "StreamFinished",
        CompatEncodeError::Encode(EncodeError::AbortReasonTooLong { .. }) => "AbortReasonTooLong",
        CompatEncodeError::Encode(EncodeError::SequenceExhausted) => "SequenceExhausted",
        CompatEncodeError::NotUtf8 { .. } => "NotUtf8",
        CompatEncodeError::CarriageReturn { .. } => "CarriageReturn",
        CompatEncodeError::EmptyMessage => "EmptyMessage",
        other => panic!("unexpected encode error {other:?}"),
    }
}

/// The crate's bytes for `job`, and the error that ended it, if any.
fn rust_body(job: &Job) -> (Vec<u8>, Option<&'static str>) {
    let mut enc = crate_encoder(
        job.mapping,
        job.request_key,
        job.attempt_id,
        job.frame_size,
        job.max_message_size,
    );
    let mut out = BytesMut::new();
    let mut run = || -> Result<(), CompatEncodeError> {
        for op in &job.ops {
            match op {
                Op::Message(m) => enc.message(m, &mut out)?,
                Op::Push(m) => enc.push(m, &mut out)?,
                Op::Finish => enc.finish_message(&mut out)?,
                Op::KeepAlive => enc.keep_alive(&mut out)?,
                Op::End => enc.end(&mut out)?,
                Op::Abort(code, reason) => enc.abort(AbortCode::from(*code), reason, &mut out)?,
            }
        }
        enc.flush(&mut out)
    };
    let result = run();
    match result {
        Ok(()) => (out.to_vec(), None),
        Err(err) => {
            enc.fail(&err, &mut out);
            (out.to_vec(), Some(error_kind(&err)))
        }
    }
}

/// The verdict of the crate's `BodyDecoder`, in the manifest's shape (verdict, messages, abort).
fn rust_verdict(job: &Job, body: &[u8]) -> Value {
    let mut builder = StreamDecoder::builder()
        .max_frame_payload(u32::try_from(job.frame_size.max(1026)).expect("fits"))
        .max_message_size(job.max_message_size);
    if let Some(key) = job.request_key {
        builder = builder.expect_request_key(key);
    }
    let mut decoder = BodyDecoder::new(job.mapping, builder.build());
    decoder.feed(body);
    decoder.finish();
    let mut messages = Vec::new();
    let mut abort = Value::Null;
    let verdict = loop {
        match decoder.next_event() {
            Ok(Some(Event::Message(m))) => messages.push(message_json(m.bytes())),
            Ok(Some(Event::Aborted(a))) => {
                abort = json!({"code": u16::from(a.code), "reason": a.reason});
            }
            Ok(Some(Event::End(_))) | Ok(None) => break "clean".to_owned(),
            Ok(Some(_)) => {}
            Err(BodyError::Decode(DecodeError::PeerAbort(a))) => {
                abort = json!({"code": u16::from(a.code), "reason": a.reason});
                break "aborted".to_owned();
            }
            Err(err) => break format!("error: {err}"),
        }
    };
    let verdict = if abort.is_null() {
        verdict
    } else {
        "aborted".to_owned()
    };
    json!({"verdict": verdict, "messages": messages, "abort": abort})
}

fn message_json(bytes: &[u8]) -> Value {
    let digest: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    json!({"len": bytes.len(), "sha256": digest})
}

/// Runs `program args` in the repository with `stdin` (through a file: the answers may be large
/// while the job list is still being read), returning its stdout as JSON.
fn run_json(program: &str, args: &[&str], env: &[(&str, &str)], stdin: Vec<u8>) -> Value {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let jobs =
        std::env::temp_dir().join(format!("python_encoder-{}-{run}.json", std::process::id()));
    std::fs::write(&jobs, stdin).expect("job list written");
    let out = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(repo())
        .stdin(std::fs::File::open(&jobs).expect("job list"))
        .output()
        .unwrap_or_else(|err| panic!("cannot run {program} ({err}): python3 is needed"));
    let _ = std::fs::remove_file(&jobs);
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

fn python_bodies(jobs: &[Job]) -> Vec<(Vec<u8>, Option<String>)> {
    let list: Vec<Value> = jobs
        .iter()
        .map(|job| {
            json!({
                "mapping": job.mapping.name(),
                "frame_size": job.frame_size,
                "max_message_size": job.max_message_size,
                "request_key": job.request_key.map(|k| k.to_string()),
                "attempt_id": hex(&job.attempt_id),
                "ops": job.ops.iter().map(Op::to_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    let answer = run_json(
        "python3",
        &["tests/python_encoder/driver.py"],
        &[("PYTHONPATH", "python/src")],
        serde_json::to_vec(&list).expect("jobs"),
    );
    answer
        .as_array()
        .expect("a list")
        .iter()
        .map(|a| {
            (
                unhex(a["body"].as_str().expect("body")),
                a["error"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// The verdicts of an external decoder speaking the batch protocol of
/// tests/reference/mcp_framing_ref.py, reduced to verdict, messages and abort.
fn external_verdicts(
    args: &[&str],
    env: &[(&str, &str)],
    jobs: &[Job],
    bodies: &[Vec<u8>],
) -> Vec<Value> {
    let list: Vec<Value> = jobs
        .iter()
        .zip(bodies)
        .map(|(job, body)| {
            let mut decoder = json!({
                "max_frame_payload": job.frame_size.max(1026),
                "max_message_size": job.max_message_size,
            });
            if let Some(key) = job.request_key {
                decoder["request_key"] = json!(key.to_string());
            }
            json!({"hex": hex(body), "mapping": job.mapping.name(), "decoder": decoder, "splits": [[]]})
        })
        .collect();
    let answer = run_json(
        "python3",
        args,
        env,
        serde_json::to_vec(&list).expect("jobs"),
    );
    answer
        .as_array()
        .expect("a list")
        .iter()
        .map(|per_job| {
            let v = &per_job[0];
            let messages: Vec<Value> = v["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .map(|m| json!({"len": m["len"], "sha256": m["sha256"]}))
                .collect();
            let verdict = match v["verdict"].as_str() {
                Some("error") => format!("error: {}", v["error"]),
                other => other.expect("a verdict").to_owned(),
            };
            json!({"verdict": verdict, "messages": messages, "abort": v["abort"]})
        })
        .collect()
}

/// The messages a job completes, in order, and whether it ends with STREAM_END (not ABORT).
fn expected_messages(job: &Job) -> Vec<Value> {
    let mut messages = Vec::new();
    let mut open: Option<Vec<u8>> = None;
    for op in &job.ops {
        match op {
            Op::Message(m) => messages.push(message_json(m)),
            Op::Push(m) => open.get_or_insert_with(Vec::new).extend_from_slice(m),
            Op::Finish => messages.push(message_json(&open.take().unwrap_or_default())),
            _ => {}
        }
    }
    messages
}

#[test]
fn the_python_encoder_writes_the_crates_bytes_and_every_decoder_accepts_them() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let jobs: Vec<Job> = (0..2400).map(|_| job(&mut rng)).collect();
    let python = python_bodies(&jobs);
    assert_eq!(python.len(), jobs.len());
    let bodies: Vec<Vec<u8>> = python.iter().map(|(body, _)| body.clone()).collect();

    // The two decoders read the bodies at the same time, each in its own process.
    let (reference, package) = std::thread::scope(|scope| {
        let reference = scope.spawn(|| {
            external_verdicts(
                &["tests/reference/mcp_framing_ref.py", "--batch"],
                &[],
                &jobs,
                &bodies,
            )
        });
        let package = external_verdicts(
            &["-m", "mcp_framing.conformance", "--batch"],
            &[("PYTHONPATH", "python/src")],
            &jobs,
            &bodies,
        );
        (
            reference.join().expect("the reference decoder's run"),
            package,
        )
    });

    let (mut clean, mut aborted, mut refused, mut messages) = (0, 0, 0, 0);
    for (i, job) in jobs.iter().enumerate() {
        let (body, python_error) = &python[i];
        let (rust, rust_error) = rust_body(job);
        assert_eq!(
            python_error.as_deref(),
            rust_error,
            "job {i} ({:?}, frame {}): the same refusal",
            job.mapping,
            job.frame_size
        );
        assert!(
            *body == rust,
            "job {i} ({:?}, frame {}, limit {}): the Python encoder's {} bytes differ from the crate's {} (first at {:?})",
            job.mapping,
            job.frame_size,
            job.max_message_size,
            body.len(),
            rust.len(),
            body.iter().zip(&rust).position(|(a, b)| a != b)
        );
        let verdict = rust_verdict(job, body);
        assert_eq!(
            verdict, reference[i],
            "job {i}: the reference decoder agrees"
        );
        assert_eq!(
            verdict, package[i],
            "job {i}: the Python package's decoder agrees"
        );
        let expected = expected_messages(job);
        let got = verdict["messages"].as_array().expect("messages");
        match verdict["verdict"].as_str() {
            Some("clean") => {
                assert!(
                    rust_error.is_none(),
                    "job {i}: clean only without a refusal"
                );
                assert_eq!(got, &expected, "job {i}: every message, in order");
                clean += 1;
            }
            Some("aborted") => {
                assert!(
                    got.len() <= expected.len(),
                    "job {i}: no message the job did not write"
                );
                assert_eq!(
                    got[..],
                    expected[..got.len()],
                    "job {i}: the messages before the ABORT"
                );
                let ended_by_abort = matches!(job.ops.last(), Some(Op::Abort(..)));
                assert!(
                    ended_by_abort || rust_error.is_some(),
                    "job {i}: aborted only when asked or refused"
                );
                if rust_error == Some("MessageTooLarge") {
                    assert_eq!(
                        verdict["abort"]["code"], 5,
                        "job {i}: message too large is code 5"
                    );
                }
                aborted += 1;
                refused += usize::from(rust_error.is_some());
            }
            other => panic!("job {i}: {other:?}: {verdict}"),
        }
        messages += got.len();
    }
    // The generator reaches every branch.
    assert!(
        clean > 1500 && aborted > 200 && refused > 50,
        "clean {clean}, aborted {aborted}, refused {refused}"
    );
    assert!(messages > 3000, "{messages} messages");
}
