//! The Python and TypeScript packages' encoders against the crate: thousands of generated
//! messages written by each package, byte for byte the crate's `MappingEncoder`, and accepted by
//! the crate's decoder, the reference decoder (`tests/reference/`) and the package's own decoder.

use std::path::PathBuf;

use mcp_framing::internals::body::MappingEncoder;
use mcp_framing::mapping::Mapping;
use mcp_framing::{AttemptId, RequestKey, StreamEncoder, StreamHead};

mod python_encoder;
mod typescript_encoder;

/// The repository's root: the drivers, the reference decoder and the packages are found from it.
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Bytes as lowercase hex, as the drivers exchange bodies and attempt ids.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of a driver's lowercase hex.
fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The crate's encoder that a package's generated stream is compared with: `mapping` over a
/// `StreamEncoder` with the stream's head, frame size and message limit.
fn crate_encoder(
    mapping: Mapping,
    request_key: Option<RequestKey>,
    attempt_id: [u8; 16],
    frame_size: usize,
    max_message_size: u64,
) -> MappingEncoder {
    let head = StreamHead {
        request_key,
        attempt_id: AttemptId::from_bytes(attempt_id),
    };
    let frames = StreamEncoder::builder()
        .frame_size(frame_size)
        .max_message_size(max_message_size)
        .build(head);
    MappingEncoder::new(mapping, frames)
}
