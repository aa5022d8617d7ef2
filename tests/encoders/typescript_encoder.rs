//! The TypeScript package's encoder (`typescript/src/encoder.ts`, `body-encoder.ts`) against the
//! crate: thousands of generated streams (message sizes around every frame boundary, UTF-8 of
//! every width, LF lines, messages over the limit, messages an SSE event cannot carry, keep-alives,
//! aborts; frame sizes from 1 byte to 64 KiB; the binary, SSE and compatible mappings) are written
//! by the package's encoder with the attempt id the test chose, and
//!
//! - are byte for byte what the crate's `MappingEncoder` writes for the same calls;
//! - decode, in the crate's `BodyDecoder` (whole and in random pieces), the reference decoder
//!   (`tests/reference/`) and the package's own decoder (`typescript/dist/batch.js`), to the
//!   verdict the calls call for: every message delivered, then clean, or the ABORT code the call
//!   or the failing message asks for.
//!
//! Needs `node`, `python3` and the TypeScript package built (`scripts/stock-clients` builds it);
//! fails, never skips, without them.

use super::{crate_encoder, hex, repo, unhex};
use std::process::{Command, Stdio};

use bytes::BytesMut;
use mcp_framing::mapping::Mapping;
use mcp_framing::{
    AbortCode, BodyDecoder, BodyError, DecodeError, Event, RequestKey, StreamDecoder,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A small deterministic generator (xorshift64*): the same streams on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        std::array::from_fn(|_| self.next() as u8)
    }
}

#[derive(Clone, Debug)]
enum Op {
    Message(Vec<u8>),
    /// The last message, with the stream's end (the final response).
    Final(Vec<u8>),
    /// A message written in pieces (binary and SSE mappings).
    Pieces(Vec<Vec<u8>>),
    KeepAlive,
    End,
    Abort(u16, String),
}

struct Job {
    mapping: Mapping,
    frame_size: usize,
    max_message: u64,
    key: Option<RequestKey>,
    attempt: [u8; 16],
    ops: Vec<Op>,
}

const FRAME_SIZES: [usize; 9] = [1, 2, 7, 100, 1026, 4096, 16 * 1024, 40_000, 64 * 1024];
const UTF8: [&str; 6] = ["a", "é", "中", "😀", "\n", "\""];

/// A message of `len` bytes (or a character more): JSON-like text, UTF-8 of every width and LF
/// lines; now and then bytes an SSE event cannot carry (invalid UTF-8, a CR).
fn message(rng: &mut Rng, len: usize, unusual: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 4);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"");
    out.truncate(len);
    while out.len() < len {
        let piece = UTF8[rng.below(UTF8.len())];
        if rng.chance(70) {
            out.push(b'a' + rng.below(26) as u8);
        } else {
            out.extend_from_slice(piece.as_bytes());
        }
    }
    if unusual && !out.is_empty() {
        let at = rng.below(out.len());
        out[at] = if rng.chance(50) { b'\r' } else { 0xff };
    }
    out
}

fn message_len(rng: &mut Rng, frame: usize) -> usize {
    // Tiny frames make a long body of a short message (an SSE event per byte), and a long
    // compatible record (20 header bytes per byte: a receiver's line bound is its message limit
    // plus 64 KiB, SPEC.md §18.7): kept short.
    let cap = match frame {
        0..100 => 300,
        100..1026 => 3000,
        _ => 300_000,
    };
    let len = match rng.below(10) {
        0 => rng.below(3),
        1..=5 => 1 + rng.below(300),
        6 | 7 => {
            // Around a frame boundary: one to three frames of the small sizes, one of the large.
            let frames = 1 + rng.below(if frame > 4096 { 1 } else { 3 });
            (frame * frames)
                .saturating_add(rng.below(3))
                .saturating_sub(1)
        }
        8 => rng.below(5_000),
        _ if rng.chance(3) => 50_000 + rng.below(150_000),
        _ => rng.below(2_000),
    };
    len.min(cap)
}

fn job(rng: &mut Rng, index: usize) -> Job {
    let mapping = [Mapping::Binary, Mapping::Sse, Mapping::Compat][index % 3];
    let frame_size = FRAME_SIZES[rng.below(FRAME_SIZES.len())];
    let max_message = if rng.chance(15) {
        rng.below(4000) as u64
    } else {
        16 * 1024 * 1024
    };
    let key = rng.chance(70).then(|| {
        let key = RequestKey::from_bytes(rng.bytes());
        // The zero key means "none" (SPEC.md §10): drawn with probability 2^-128, still excluded.
        (key.as_bytes() != &[0; 16]).then_some(key)
    });
    let mut ops = Vec::new();
    for _ in 0..rng.below(5) {
        let len = message_len(rng, frame_size);
        let unusual = rng.chance(3);
        match rng.below(8) {
            0 => ops.push(Op::KeepAlive),
            1 if mapping != Mapping::Compat => {
                let bytes = message(rng, len, unusual);
                let mut pieces = Vec::new();
                let mut at = 0;
                while at < bytes.len() {
                    let end = (at + 1 + rng.below(bytes.len() - at)).min(bytes.len());
                    pieces.push(bytes[at..end].to_vec());
                    at = end;
                }
                ops.push(Op::Pieces(pieces));
            }
            _ => ops.push(Op::Message(message(rng, len, unusual))),
        }
    }
    match rng.below(10) {
        0 => {
            let long = "x".repeat(1500);
            let reason = ["", "upstream failed", "déjà vu 😀", &long][rng.below(4)];
            ops.push(Op::Abort(rng.below(7) as u16, reason.to_owned()));
        }
        1..=5 => {
            let len = message_len(rng, frame_size);
            let unusual = rng.chance(3);
            ops.push(Op::Final(message(rng, len, unusual)));
        }
        _ => ops.push(Op::End),
    }
    Job {
        mapping,
        frame_size,
        max_message,
        key: key.flatten(),
        attempt: rng.bytes(),
        ops,
    }
}

impl Job {
    fn to_json(&self) -> Value {
        let ops: Vec<Value> = self
            .ops
            .iter()
            .flat_map(|op| match op {
                Op::Message(m) => vec![json!({"message": hex(m)})],
                Op::Final(m) => vec![json!({"final": hex(m)})],
                Op::Pieces(pieces) => pieces
                    .iter()
                    .map(|p| json!({"push": hex(p)}))
                    .chain([json!({"finish": true})])
                    .collect(),
                Op::KeepAlive => vec![json!({"keepAlive": true})],
                Op::End => vec![json!({"end": true})],
                Op::Abort(code, reason) => vec![json!({"abort": [code, reason]})],
            })
            .collect();
        json!({
            "mapping": self.mapping.name(),
            "frameSize": self.frame_size,
            "maxMessageSize": self.max_message,
            "requestKey": self.key.map(|k| k.to_string()),
            "attemptId": hex(&self.attempt),
            "ops": ops,
        })
    }

    fn decoder_json(&self) -> Value {
        json!({
            "max_frame_payload": self.max_frame_payload(),
            "max_message_size": self.max_message,
            "request_key": self.key.map(|k| k.to_string()),
        })
    }

    /// The receiver's frame limit: the sender's frame size, or the least a receiver may set.
    fn max_frame_payload(&self) -> u32 {
        u32::try_from(self.frame_size).unwrap().max(1026)
    }

    /// The crate's encoder, given the same calls: the bytes, and the error kind of a failed call.
    fn rust_body(&self) -> (Vec<u8>, Option<String>) {
        let mut encoder = crate_encoder(
            self.mapping,
            self.key,
            self.attempt,
            self.frame_size,
            self.max_message,
        );
        let mut out = BytesMut::new();
        encoder.open(&mut out).unwrap();
        for op in &self.ops {
            let result = match op {
                // The crate's compatible encoder holds a message until the next call; `flush`
                // writes it, as the package's `message` does at once.
                Op::Message(m) => encoder
                    .message(m, &mut out)
                    .and_then(|()| encoder.flush(&mut out)),
                Op::Final(m) => encoder
                    .message(m, &mut out)
                    .and_then(|()| encoder.end(&mut out)),
                Op::Pieces(pieces) => pieces
                    .iter()
                    .try_for_each(|p| encoder.push(p, &mut out))
                    .and_then(|()| encoder.finish_message(&mut out)),
                Op::KeepAlive => encoder.keep_alive(&mut out),
                Op::End => encoder.end(&mut out),
                Op::Abort(code, reason) => encoder.abort(AbortCode::from(*code), reason, &mut out),
            };
            if let Err(err) = result {
                encoder.fail(&err, &mut out);
                return (out.to_vec(), Some(err.to_string()));
            }
        }
        (out.to_vec(), None)
    }

    /// What every decoder must report: the messages written before the stream ended, and how
    /// it ended: `Ok(())` clean, `Err(code)` an ABORT.
    fn expected(&self) -> (Vec<Vec<u8>>, Result<(), u16>) {
        let mut messages = Vec::new();
        let fits = |m: &[u8]| m.len() as u64 <= self.max_message;
        let carried = |m: &[u8]| {
            self.mapping != Mapping::Compat
                || (!m.is_empty() && std::str::from_utf8(m).is_ok() && !m.contains(&b'\r'))
        };
        for op in &self.ops {
            match op {
                Op::Message(_) | Op::Final(_) | Op::Pieces(_) => {
                    let m = match op {
                        Op::Pieces(p) => p.concat(),
                        Op::Message(m) | Op::Final(m) => m.clone(),
                        _ => unreachable!(),
                    };
                    if !fits(&m) {
                        return (messages, Err(5));
                    }
                    if !carried(&m) {
                        return (messages, Err(1));
                    }
                    messages.push(m);
                    if matches!(op, Op::Final(_)) {
                        return (messages, Ok(()));
                    }
                }
                Op::KeepAlive => {}
                Op::End => return (messages, Ok(())),
                Op::Abort(code, _) => return (messages, Err(*code)),
            }
        }
        unreachable!("every job ends with End, Final or Abort")
    }
}

/// The crate's verdict of `body`, fed in pieces cut at `cuts`: the messages, and `Ok(())` clean
/// or `Err(code)` aborted; anything else fails the test.
fn rust_verdict(job: &Job, body: &[u8], cuts: &[usize]) -> (Vec<Vec<u8>>, Result<(), u16>) {
    let decoder = StreamDecoder::builder()
        .max_frame_payload(job.max_frame_payload())
        .max_message_size(job.max_message);
    let decoder = match job.key {
        Some(key) => decoder.expect_request_key(key),
        None => decoder,
    };
    let mut body_decoder = BodyDecoder::new(job.mapping, decoder.build());
    let mut messages = Vec::new();
    let mut start = 0;
    let mut drain = |d: &mut BodyDecoder| -> Option<Result<(), u16>> {
        loop {
            match d.next_event() {
                Ok(Some(Event::Message(m))) => messages.push(m.bytes().to_vec()),
                Ok(Some(Event::End(_))) => return Some(Ok(())),
                Ok(Some(_)) => {}
                Ok(None) => return None,
                Err(BodyError::Decode(DecodeError::PeerAbort(abort))) => {
                    return Some(Err(u16::from(abort.code)));
                }
                Err(err) => panic!("the crate's decoder refused a stream: {err}"),
            }
        }
    };
    let mut ended = None;
    for &end in cuts.iter().chain([&body.len()]) {
        body_decoder.feed(&body[start..end]);
        start = end;
        ended = ended.or(drain(&mut body_decoder));
    }
    body_decoder.finish();
    ended = ended.or(drain(&mut body_decoder));
    let outcome = body_decoder.outcome();
    let ended = ended.expect("the stream ended with STREAM_END or ABORT");
    if ended.is_ok() {
        assert!(outcome.sentinel_seen, "a clean stream saw its sentinel");
    }
    (messages, ended)
}

/// Runs `program` in the repository with `input` (a job list, written to a file first) on its
/// stdin, and returns its stdout; fails the test if it cannot run or fails.
fn run(program: &str, args: &[&str], input: &[u8]) -> Vec<u8> {
    let jobs = std::env::temp_dir().join(format!(
        "typescript-encoder-{}-{program}.json",
        std::process::id()
    ));
    std::fs::write(&jobs, input).expect("job list written");
    let out = Command::new(program)
        .args(args)
        .current_dir(repo())
        .stdin(std::fs::File::open(&jobs).expect("job list"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|err| {
            panic!("cannot run {program} ({err}): `bash scripts/stock-clients` installs it")
        });
    let _ = std::fs::remove_file(&jobs);
    assert!(out.status.success(), "{program} {args:?} failed");
    out.stdout
}

/// A verdict of the batch protocol (the conformance manifest's `expect` shape), as the test's.
fn batch_verdict(verdict: &Value) -> (Vec<(u64, String)>, Result<(), u16>) {
    let messages = verdict["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["len"].as_u64().unwrap(),
                m["sha256"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let ended = match verdict["verdict"].as_str() {
        Some("clean") => Ok(()),
        Some("aborted") => Err(u16::try_from(verdict["abort"]["code"].as_u64().unwrap()).unwrap()),
        _ => panic!("not clean and not aborted: {verdict}"),
    };
    (messages, ended)
}

fn summary(messages: &[Vec<u8>]) -> Vec<(u64, String)> {
    messages
        .iter()
        .map(|m| (m.len() as u64, hex(&Sha256::digest(m))))
        .collect()
}

#[test]
fn every_stream_the_typescript_encoder_writes_is_the_crates_and_every_decoder_reads_it_as_written()
{
    const JOBS: usize = 3000;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let jobs: Vec<Job> = (0..JOBS).map(|i| job(&mut rng, i)).collect();
    let input = serde_json::to_vec(&jobs.iter().map(Job::to_json).collect::<Vec<_>>()).unwrap();
    let written: Vec<Value> = run(
        "node",
        &["typescript/test/support/encode-batch.mjs"],
        &input,
    )
    .split(|&b| b == b'\n')
    .filter(|line| !line.is_empty())
    .map(|line| serde_json::from_slice(line).expect("the encoder's answer is JSON"))
    .collect();
    assert_eq!(written.len(), JOBS);

    let (mut batch, mut whole) = (Vec::new(), Vec::new());
    let mut expectations = Vec::new();
    let (mut aborted, mut failed_calls, mut bytes) = (0, 0, 0);
    for (index, (job, out)) in jobs.iter().zip(&written).enumerate() {
        let body = unhex(out["body"].as_str().expect("body"));
        bytes += body.len();
        let (rust, rust_error) = job.rust_body();
        assert!(
            body == rust,
            "job {index} ({:?}, frame {}): the package wrote {} bytes, the crate {}",
            job.mapping,
            job.frame_size,
            body.len(),
            rust.len()
        );
        assert_eq!(
            out["error"].is_null(),
            rust_error.is_none(),
            "job {index}: a call failed in one encoder only ({rust_error:?}, {})",
            out["error"]
        );
        failed_calls += usize::from(rust_error.is_some());
        let (messages, ended) = job.expected();
        aborted += usize::from(ended.is_err());
        assert_eq!(
            rust_verdict(job, &body, &[]),
            (messages.clone(), ended),
            "job {index}"
        );
        let cuts = {
            let mut cuts: Vec<usize> = (0..4).map(|_| rng.below(body.len() + 1)).collect();
            cuts.sort_unstable();
            cuts
        };
        assert_eq!(
            rust_verdict(job, &body, &cuts),
            (messages.clone(), ended),
            "job {index} in pieces {cuts:?}"
        );
        // The reference decoder (pure Python, slow) reads each body whole, the package's
        // decoder also in pieces.
        let case = |splits: Value| {
            json!({
                "hex": hex(&body),
                "mapping": job.mapping.name(),
                "decoder": job.decoder_json(),
                "splits": splits,
            })
        };
        whole.push(case(json!([[]])));
        batch.push(case(json!([[], cuts])));
        expectations.push((summary(&messages), ended));
    }
    // The generator reaches every ending.
    assert!(
        aborted > JOBS / 10 && failed_calls > JOBS / 50,
        "{aborted} aborted, {failed_calls} failed calls"
    );
    assert!(bytes > 3_000_000, "{bytes} bytes written");

    eprintln!("{JOBS} streams, {bytes} bytes, {aborted} aborted, {failed_calls} failed calls");
    let decoders: [(&str, &str, &[&str], &[Value]); 2] = [
        (
            "reference decoder",
            "python3",
            &["tests/reference/mcp_framing_ref.py", "--batch"],
            &whole,
        ),
        (
            "TypeScript decoder",
            "node",
            &["typescript/dist/batch.js", "--batch"],
            &batch,
        ),
    ];
    // Both decoders read at the same time, each in its own process; their answers are checked
    // in order.
    let answers: Vec<Vec<u8>> = std::thread::scope(|scope| {
        let runs: Vec<_> = decoders
            .iter()
            .map(|&(name, program, args, batch)| {
                scope.spawn(move || {
                    let batch = serde_json::to_vec(batch).unwrap();
                    let started = std::time::Instant::now();
                    let out = run(program, args, &batch);
                    eprintln!("{name}: {:.1} s", started.elapsed().as_secs_f64());
                    out
                })
            })
            .collect();
        runs.into_iter()
            .map(|run| run.join().expect("a decoder's run"))
            .collect()
    });
    for ((name, ..), answer) in decoders.into_iter().zip(answers) {
        let verdicts: Vec<Vec<Value>> = serde_json::from_slice(&answer).expect("JSON verdicts");
        assert_eq!(verdicts.len(), JOBS, "{name}");
        for (index, (per_split, expected)) in verdicts.iter().zip(&expectations).enumerate() {
            for verdict in per_split {
                assert_eq!(&batch_verdict(verdict), expected, "{name}, job {index}");
            }
        }
    }
}
