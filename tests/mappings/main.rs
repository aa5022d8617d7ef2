//! The HTTP body mappings without a network (SPEC.md §15, §18): the SSE mapping, the compatible
//! SSE mapping, the one server-side writer of every mapping, and the order of errors in a body.

#[path = "../support/mod.rs"]
mod support;

mod mapping_encoder;
mod sse_body_order;
mod sse_compat;
