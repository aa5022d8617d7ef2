//! What the unit tests share, with each other and with the test binaries in tests/ (which compile
//! some of these files too, through `tests/support/mod.rs`: one copy). They name the crate
//! `mcp_framing`, as the tests outside it do (`extern crate self` in lib.rs, tests only); the
//! deduplication scenarios, which drive the engine below the public API, are the crate's alone.

#[cfg(feature = "dedupe")]
pub(crate) mod keyed_calls;
pub(crate) mod metrics_support;
pub(crate) mod outcome_support;
// A relay that sees the store's round trips, for `RedisStore`'s claim-protocol tests.
#[cfg(feature = "redis")]
#[allow(unreachable_pub)] // written as `redis_servers.rs` is
pub(crate) mod redis_relay;
// Shared with tests/support, the dedupe bench and the store soak, which use it from outside.
#[cfg(feature = "redis")]
#[allow(unreachable_pub)]
pub(crate) mod redis_servers;
#[cfg(feature = "dedupe")]
pub(crate) mod store_scenarios;
#[cfg(feature = "dedupe")]
pub(crate) mod store_vectors;
