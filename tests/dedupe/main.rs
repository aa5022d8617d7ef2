//! Request-key deduplication (SPEC.md §17): the engine over the embedded store and over Redis
//! (one server, a cluster, a restart), its metrics, the tower layer, the fleet end to end over
//! loopback HTTP, and the one rule for message events and final responses every layer applies.

#[path = "../support/mod.rs"]
mod support;

mod dedupe_cluster;
mod dedupe_durability;
mod dedupe_e2e;
mod dedupe_http;
mod dedupe_memory;
mod dedupe_metrics;
mod dedupe_redis;
mod one_rule;
mod store_vectors;
