//! Shared by the deduplication tests, the dedupe bench and the store soak: real `redis-server`
//! processes (one server, or a cluster) they start and stop themselves. One copy, in
//! `src/test_support/`, which the crate's unit tests compile too.
#![allow(dead_code, unreachable_pub, unused_imports)] // each test binary uses part of it

#[cfg(feature = "redis")]
#[path = "../../../src/test_support/redis_servers.rs"]
mod redis_servers;

#[cfg(feature = "redis")]
pub use redis_servers::{Persistence, RedisCluster, RedisServer, free_port};
