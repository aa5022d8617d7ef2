//! The HTTP binding over loopback: `FramedBody` and `VerifiedResponse`, `FramingLayer` on rmcp and
//! on hand-written services, `FramingHttpClient` and the client engine, HTTPS, idle timeouts, what
//! a server declares, and how a framed response leaves the server.

#[path = "../support/mod.rs"]
mod support;

mod client_engine;
mod declaration;
mod http_compat;
mod http_layer;
mod http_loopback;
mod http_rmcp;
mod http_rmcp_client;
#[cfg(feature = "rustls")]
mod https_rmcp;
mod idle_timeout;
mod inner_body_end;
mod no_nagle_stall;
mod server_body;
mod streamed_messages;
