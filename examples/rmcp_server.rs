//! An rmcp server (stateless Streamable HTTP) behind `FramingLayer`: requests that opt in
//! (`Mcp-Framing: 1`) get framed responses, others are answered exactly as before.
//!
//! Run: `cargo run --features rmcp,demo --example rmcp_server [ADDR] [SECONDS]`
//! (default `127.0.0.1:8931`, stops after 120 seconds), then in another terminal
//! `cargo run --features rmcp,demo --example rmcp_client [URL]`.
//!
//! The tool `render_report` takes a large document as its arguments and returns it with numbered
//! lines: with 4 KiB frames, both span many frames.

use std::time::Duration;

#[path = "../tests/rmcp_support/mod.rs"]
mod rmcp_support;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8931".to_owned());
    let seconds: u64 = args.next().map_or(120, |s| s.parse().expect("SECONDS"));
    let app = axum::Router::new().nest_service("/mcp", rmcp_support::framed_service(4096));
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    println!(
        "rmcp server with FramingLayer on http://{}/mcp for {seconds} s",
        listener.local_addr().expect("addr")
    );
    let serve = axum::serve(listener, app);
    if tokio::time::timeout(Duration::from_secs(seconds), serve)
        .await
        .is_err()
    {
        println!("done");
    }
}
