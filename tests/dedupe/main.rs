//! Request-key deduplication (SPEC.md §17) through the public API: the tower layer, the fleet end
//! to end over loopback HTTP with a real Redis, and the one rule for message events and final
//! responses every layer applies. The engine and its stores, driven call by call, are the crate's
//! unit tests (`src/dedupe/`).

#[path = "../support/mod.rs"]
mod support;

mod dedupe_e2e;
mod dedupe_http;
mod one_rule;
