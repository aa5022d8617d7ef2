//! Shared by the deduplication tests, the dedupe bench and the store soak: real `redis-server`
//! processes (one server, or a cluster) they start and stop themselves, and keyed calls. One copy
//! of each, in `src/test_support/`, which the crate's unit tests compile too.
#![allow(dead_code, unreachable_pub, unused_imports)] // each test binary uses part of it

#[path = "../../../src/test_support/keyed_calls.rs"]
mod keyed_calls;
#[cfg(feature = "redis")]
#[path = "../../../src/test_support/redis_servers.rs"]
mod redis_servers;

#[cfg(feature = "redis")]
pub use redis_servers::{Persistence, RedisCluster, RedisServer, free_port};

pub(crate) use keyed_calls::{call, response};
// What `keyed_calls.rs` builds: named here, below the public API.
use mcp_framing::internals::dedupe::KeyedCall;
