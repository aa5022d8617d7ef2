//! The wire format through the public API and the internals: frames and streams encoded and
//! decoded (round trips, splits, splices, bit flips, truncations, the stream rules and bounds),
//! the conformance vectors and the reference decoder, the saved fuzz inputs, JSON-RPC response
//! detection, and outcomes (the regime table, the contract). Retry decisions and what the client
//! records are the crate's unit tests (src/retry/, src/telemetry/tests.rs).

#[path = "../support/mod.rs"]
mod support;

mod bit_flips;
mod conformance_vectors;
mod fuzz_regressions;
mod no_clean_prefix;
mod outcome_mapping;
mod peer_text;
mod reference_decoder;
mod request_key;
mod roundtrip;
mod splices;
mod splits;
mod stream_bounds;
mod stream_rules;
mod truncation;
mod zero_copy;
