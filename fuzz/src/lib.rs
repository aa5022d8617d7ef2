//! Oracles of the mcp-framing fuzz targets.
//!
//! Every target in `fuzz_targets/` is a one-line call into this library, so that the same oracle
//! runs under libFuzzer (`cargo fuzz run <target>`) and on stable in the main crate's
//! `tests/wire/fuzz_regressions.rs`, which replays the committed corpus and every crash ever found.
//! Each oracle asserts a property of the decoder, not only "no panic":
//!
//! - [`decode_raw`]: arbitrary bytes; memory stays within the configured limits, the events obey
//!   the stream rules, every verified message re-encodes to bytes that decode to it again, and a
//!   stream without extension frames re-encodes byte for byte.
//! - [`decode_chunked`]: the same bytes through `FramedRead` over a reader that returns them in
//!   fuzzer-chosen pieces with `Pending` in between; the events and verdict equal one-shot decoding.
//! - [`roundtrip`]: an `arbitrary` script of encoder calls, limits and read sizes; decoding gives
//!   back exactly what was encoded (clean, aborted, unterminated and cut streams).
//! - [`fixed_checksums`]: a mutated stream whose CRCs (and, by mode, digests, counts and sequence
//!   numbers) are repaired before decoding; the decoder must agree with an independent model.
//! - [`sse_decode`]: the SSE mapping's parser and frame decoder from arbitrary text, in any
//!   chunking, and frames carried through SSE and back.
//! - [`compat_decode`]: the compatible SSE mapping from arbitrary text, in any chunking: the
//!   same verdict, and the verified messages are what a stock SSE client reads; encoder scripts
//!   rebuild the binary stream byte for byte.
//! - [`contract_json`]: arbitrary bytes through the framing contract and request-key parsers;
//!   round trips, and a policy only where SPEC.md §9 and §11 allow one.
//! - `dedupe_request`: a deduplicating server's peer input: request bodies through the strict
//!   JSON reader, request identification, canonical JSON, and `DedupeLayer` itself.
//! - `http_headers`: the limits header parses what it prints; a response's headers never
//!   read as two mappings.
//! - [`jsonrpc_scan`]: arbitrary bytes and `arbitrary` JSON-RPC-ish messages; the JSON-RPC scan
//!   (`is_response`, and a keyed decoder's final response in the binary and compatible mappings)
//!   answers what `serde_json`'s strict reading does.
//!
//! This file is also compiled as a module of the main crate's tests (`#[path]`), so it uses only
//! dependencies both have and names nothing from libFuzzer.

pub mod checker;
pub mod compat_decode;
pub mod contract_json;
pub mod decode_chunked;
pub mod decode_raw;
#[cfg(all(feature = "http", feature = "dedupe"))]
pub mod dedupe_request;
pub mod fixed_checksums;
#[cfg(all(feature = "http", feature = "dedupe"))]
pub mod http_headers;
pub mod jsonrpc_scan;
pub mod limits;
pub mod model;
pub mod reader;
pub mod roundtrip;
pub mod sse_decode;

/// Bounds the heap while the decoder runs (`decode_raw` arms it around every decoder call).
///
/// The fuzz target implements it with a capped global allocator: an allocation past the limit
/// fails, and Rust aborts with "memory allocation of N bytes failed", which libFuzzer reports as
/// a crash. Tests use [`Unbounded`].
pub trait MemoryGuard {
    /// Bytes currently allocated through the global allocator.
    fn allocated(&self) -> usize;
    /// Makes allocations beyond `limit` bytes in total fail (`None`: no limit).
    fn set_limit(&self, limit: Option<usize>);
}

/// A [`MemoryGuard`] that measures and bounds nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unbounded;

impl MemoryGuard for Unbounded {
    fn allocated(&self) -> usize {
        0
    }

    fn set_limit(&self, _limit: Option<usize>) {}
}
