//! What the test binaries share, declared once by each (`tests/<group>/main.rs`:
//! `#[path = "../support/mod.rs"] mod support;`) and used by its modules as
//! `use crate::support::NAME;`. Each part is compiled where the features it needs are on; a
//! binary uses some of it.
#![allow(dead_code)] // each test binary uses a part of it

/// Where a discovery result carries the framing contract (SPEC.md §11.1), as peers write it.
pub(crate) const EXTENSION_KEY: &str = "io.github.mcp-framing/framing";

// Fixed ids, a raw frame writer, decoding drivers and the conformance vector generator.
#[cfg(feature = "internals")]
pub(crate) mod common;
// Streams, decoders and contract fixtures for the outcome, contract, retry and telemetry tests,
// and a `metrics` recorder local to a test: shared with the crate's unit tests, which compile the
// same files (src/test_support/).
#[path = "../../src/test_support/metrics_support.rs"]
pub(crate) mod metrics_support;
#[path = "../../src/test_support/outcome_support.rs"]
pub(crate) mod outcome_support;
// Real `redis-server` processes (one copy, in src/test_support/) and keyed calls.
#[cfg(all(feature = "dedupe", feature = "internals"))]
pub(crate) mod dedupe_support;
// A response whose body ends normally after a number of bytes.
#[cfg(feature = "demo")]
pub(crate) mod cut_support;
// A cutting (or comment-stripping) proxy in front of an MCP server.
#[cfg(feature = "demo")]
pub(crate) mod cut;
// An opted-in POST whose response is verified as a framing client does.
#[cfg(feature = "demo")]
pub(crate) mod http_support;
// The rmcp tool server behind `FramingLayer`.
#[cfg(all(feature = "rmcp", feature = "demo"))]
pub(crate) mod rmcp_support;
// A hand-scripted MCP server for the framing client's tests.
#[cfg(all(feature = "rmcp", feature = "demo"))]
pub(crate) mod scripted;
// The repository's examples run as server processes.
#[cfg(feature = "demo")]
pub(crate) mod example_support;
// The stock MCP clients (Python and TypeScript SDKs, rmcp) and the framing client.
#[cfg(all(feature = "rmcp", feature = "demo"))]
pub(crate) mod stock_support;
