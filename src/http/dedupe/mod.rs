//! Request-key deduplication over HTTP (SPEC.md §17.10; features `http` and `dedupe`): a tower
//! layer for any MCP server answering Streamable HTTP POSTs (rmcp, axum, hyper).
//!
//! One file a job:
//!
//! | file | owns |
//! |---|---|
//! | `layer.rs` | [`DedupeLayer`]: its configuration (principal, methods, request bound) |
//! | `service.rs` | [`DedupeService`]: read the request, ask the engine, execute, replay or refuse |
//! | `identify.rs` | which request is a keyed call of a deduplicated method (strict JSON, §17.10) |
//! | `capture.rs` | driving the inner response to its end and recording its final response |
//! | `body.rs` | the response body: [`DedupeBody`], [`DedupeBodyError`], the relay channel |

mod body;
mod capture;
mod identify;
mod layer;
mod service;

pub use body::{DedupeBody, DedupeBodyError};
pub use layer::DedupeLayer;
pub use service::{DEDUPE_HEADER, DedupeService};
