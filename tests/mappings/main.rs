//! The HTTP body mappings without a network (SPEC.md §15, §18): the SSE mapping, the compatible
//! SSE mapping and the order of errors in a body. The one server-side writer of every mapping is
//! tested beside it (src/mapping/encoder/tests.rs).

#[path = "../support/mod.rs"]
mod support;

mod sse_body_order;
mod sse_compat;
