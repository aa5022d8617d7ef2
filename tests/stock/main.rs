//! Stock peers as processes: the official SDKs' clients (Python, TypeScript, rmcp) against the
//! example servers, with and without the framing wrappers, and the main job
//! (`examples/stateless_autoscaler.rs`) run as a user would. The proxies between them are
//! `tests/proxies.rs`, a binary of its own.

#[path = "../support/mod.rs"]
mod support;

mod main_job;
mod python_client;
mod stock_clients;
