//! What the unit tests share, with each other and with the test binaries in tests/ (which compile
//! these files too, through `tests/support/mod.rs`: one copy). They name the crate
//! `mcp_framing`, as the tests outside it do (`extern crate self` in lib.rs, tests only).

pub(crate) mod metrics_support;
pub(crate) mod outcome_support;
#[cfg(feature = "dedupe")]
pub(crate) mod store_vectors;
