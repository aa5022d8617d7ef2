//! Helpers shared by the outcome, contract, retry and telemetry tests: the crate's unit tests and
//! the test binaries in tests/ (through `tests/support/mod.rs`) compile this one file.
#![allow(dead_code)] // each test crate uses a subset

use bytes::BytesMut;
#[cfg(feature = "internals")]
use mcp_framing::internals::contract::{ClientPolicy, ServerDiscovery};
use mcp_framing::{
    DecodeError, Event, RequestKey, StreamDecoder, StreamEncoder, StreamHead, outcome::Outcome,
};

/// Feeds `input` to `decoder` and returns its final result: the first error, or `Ok(None)`.
pub(crate) fn final_result(
    decoder: &mut StreamDecoder,
    input: &[u8],
) -> Result<Option<Event>, DecodeError> {
    let mut buf = BytesMut::from(input);
    loop {
        match decoder.decode_eof(&mut buf) {
            Ok(Some(_)) => continue,
            end => return end,
        }
    }
}

/// Feeds `input` to `decoder` to the end of input and returns the outcome the decoder gives.
pub(crate) fn outcome_of(decoder: &mut StreamDecoder, input: &[u8]) -> Outcome {
    let _ = final_result(decoder, input);
    decoder.outcome()
}

/// A complete stream for `key`: a progress notification (2 DATA frames) and a response
/// (1 DATA frame), then the sentinel. Frames: HEAD, DATA, DATA, MESSAGE_END, DATA, MESSAGE_END,
/// STREAM_END.
pub(crate) fn complete_stream(key: Option<RequestKey>) -> (StreamHead, BytesMut) {
    let head = StreamHead::for_request(key);
    let mut enc = StreamEncoder::new(head);
    let mut wire = BytesMut::new();
    enc.push(
        br#"{"jsonrpc":"2.0","method":"notifications/progress","#,
        &mut wire,
    )
    .unwrap();
    enc.push(
        br#""params":{"progressToken":1,"progress":0.5}}"#,
        &mut wire,
    )
    .unwrap();
    enc.finish_message(&mut wire).unwrap();
    enc.message(
        br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
        &mut wire,
    )
    .unwrap();
    enc.end(&mut wire).unwrap();
    (head, wire)
}

/// Reads a discovery fixture from `tests/fixtures/discovery/`.
pub(crate) fn fixture(name: &str) -> serde_json::Value {
    let path = format!(
        "{}/tests/fixtures/discovery/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

#[cfg(feature = "internals")]
/// Parses a fixture as an `initialize` or `server/discover` result, by its file name.
pub(crate) fn discovery(name: &str) -> ServerDiscovery {
    let value = fixture(name);
    if name.starts_with("initialize") {
        ServerDiscovery::from_initialize(&value).unwrap()
    } else {
        ServerDiscovery::from_discover(&value).unwrap()
    }
}

#[cfg(feature = "internals")]
/// A framed policy from `discover_framed.json`.
pub(crate) fn framed_policy() -> ClientPolicy {
    ClientPolicy::builder()
        .build(&discovery("discover_framed.json"))
        .unwrap()
}
