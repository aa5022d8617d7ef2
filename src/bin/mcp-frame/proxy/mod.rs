//! `mcp-frame proxy`: a sidecar that puts the crate's `FramingLayer` (and its deduplication) in
//! front of any MCP server over Streamable HTTP, whatever language the server is written in.
//!
//! | file | what |
//! |---|---|
//! | `config.rs` | the flags (each with its environment variable) and their checks |
//! | `edge.rs` | a client request: checks, forwarding headers, the framing stack |
//! | `upstream.rs` | the pooled upstream client, its timeouts and errors |
//! | `health.rs` | the health endpoint |
//! | `telemetry.rs` | logs and the Prometheus endpoint |
//! | `serve.rs` | the listener, the connections and the graceful shutdown |

mod config;
mod edge;
mod health;
mod serve;
mod telemetry;
mod upstream;

pub(crate) use config::ProxyArgs;

use crate::CliError;

/// Runs the sidecar until SIGTERM or SIGINT; exit status 0 after a graceful shutdown.
pub(crate) fn run(args: &ProxyArgs) -> Result<u8, CliError> {
    telemetry::logs(args.log_format, &args.log)?;
    runtime()?.block_on(serve::run(args))
}

/// A worker's event loop: a current-thread runtime. A call's tasks (the client connection, the
/// upstream connection, the framing) then hand its bytes to each other on one thread, without
/// waking another.
fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| CliError::io("start the runtime", err))
}
