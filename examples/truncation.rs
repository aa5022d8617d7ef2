//! A small end-to-end demo of the problem and its fix, without any network:
//! a tool-call response is cut at every chunk boundary, as a proxy closing the body normally would.
//! Unframed, the client sees a JSON parse error (or, worse, nothing wrong); framed, every cut is
//! a precise truncation verdict and only the complete stream is clean.
//!
//! Run: `cargo run --release --example truncation`

mod help;

use bytes::BytesMut;
use mcp_framing::{DecodeError, RequestKey, StreamDecoder, StreamEncoder, StreamHead};

/// `--help`.
const HELP: &str = "\
usage: truncation
run:   cargo run --release --example truncation

A tool-call response cut at every 64-byte chunk boundary, unframed (a JSON parse error, or
nothing wrong) and framed (a precise truncation verdict; only the complete stream is clean).
No network, no feature needed. It takes no arguments.

  -h, --help  print this help";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if help::asked(&args, HELP) {
        return;
    }
    if let Some(arg) = args.first() {
        help::usage_error("truncation", HELP, &format!("unexpected argument {arg:?}"));
    }
    let response = serde_json::json!({
        "jsonrpc": "2.0",
        "id": 42,
        "result": {"content": [{"type": "text", "text": "x".repeat(300)}], "isError": false}
    });
    let unframed = serde_json::to_vec(&response).expect("serializable");

    // The server streams the response in 64-byte chunks.
    let key = RequestKey::random();
    let mut enc = StreamEncoder::builder()
        .frame_size(64)
        .build(StreamHead::for_request(Some(key)));
    let mut framed = BytesMut::new();
    for chunk in unframed.chunks(64) {
        enc.push(chunk, &mut framed).expect("push");
    }
    enc.finish_message(&mut framed).expect("finish");
    enc.end(&mut framed).expect("end");

    println!(
        "unframed body: {} bytes; framed body: {} bytes",
        unframed.len(),
        framed.len()
    );
    println!("\n1. unframed: the body closes normally after each 64-byte chunk");
    for cut in (64..=unframed.len()).step_by(64).chain([unframed.len()]) {
        let verdict = match serde_json::from_slice::<serde_json::Value>(&unframed[..cut]) {
            Ok(_) => "parsed: looks complete".to_owned(),
            Err(err) => format!("JSON parse error ({err})"),
        };
        println!("   cut at {cut:>4}: {verdict}");
    }

    println!("\n2. framed: the same cuts, at every frame boundary");
    let mut boundaries = vec![0usize];
    let mut at = 0;
    while at < framed.len() {
        let len = u32::from_be_bytes(framed[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        at += 20 + len;
        boundaries.push(at);
    }
    let mut clean = 0;
    for cut in boundaries {
        let decoder = StreamDecoder::builder().expect_request_key(key).build();
        let verdict = match decoder.decode_all(&framed[..cut]) {
            Ok(stream) => {
                clean += 1;
                format!("clean: {} verified message(s)", stream.messages.len())
            }
            Err(err @ DecodeError::Truncated { .. }) => format!("abandoned: {err}"),
            Err(err) => format!("error: {err}"),
        };
        println!("   cut at {cut:>4}: {verdict}");
    }
    assert_eq!(clean, 1, "only the complete stream may be clean");
    println!("\nonly the complete framed stream was clean; every cut was named");
}
