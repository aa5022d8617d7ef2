//! `mcp-frame`: encode, decode, inspect and verify mcp-framing streams (SPEC.md).
//!
//! ```text
//! mcp-frame encode  [INPUT] [-o OUT] [--json [--lines]] [--frame-size N] [--chunk N]
//!                   [--request-key HEX] [--attempt-id HEX]
//! mcp-frame decode  [INPUT] [--expect-request-key HEX]      messages on stdout, verdict on stderr
//! mcp-frame inspect [INPUT] [--json]                         a table of frames and the verdict
//! mcp-frame verify  [INPUT] [--json] [--require-sentinel]    the verdict as an exit status
//! mcp-frame proxy   --upstream URL [--listen ADDR] ...      a framing sidecar (feature `proxy`)
//! ```
//!
//! Every command takes `--mapping binary|sse|compat` (SPEC.md §15, §16, §18).
//!
//! Exit statuses (every subcommand that reads a stream):
//! 0 clean: every message verified and the stream is complete, with its STREAM_END sentinel
//! (Regime A) or, with `--expect-request-key`, a final response that verified before the input
//! ended (Regime B, SPEC.md §7 row 4); the regime and whether the sentinel was seen are in the
//! verdict line and in `--json` (`regime`, `sentinel_seen`).
//! 1 the sentinel missing, only with `--require-sentinel`: clean in Regime B, but the stream was
//! cut before STREAM_END.
//! 2 usage or I/O error, 3 abandoned (truncated), 4 corrupt, 5 aborted by the peer, 6 contract
//! violation (not a framed stream, unsupported version, frames or messages over the limits,
//! request key mismatch, a broken SSE mapping). The crate's `Outcome` decides.

mod decode;
mod encode;
mod input;
mod inspect;
#[cfg(feature = "proxy")]
mod proxy;
mod verdict;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Encode, decode, inspect and verify mcp-framing streams (self-delimiting, self-verifying
/// framing for streamed MCP payloads, SPEC.md).
#[derive(Debug, Parser)]
#[command(
    name = "mcp-frame",
    version,
    after_help = "Exit statuses: 0 clean (STREAM_END arrived: regime A; or, with \
                  --expect-request-key, the final response verified and the input ended \
                  before STREAM_END: regime B, SPEC.md §7 row 4; the verdict names the regime \
                  and sentinel_seen), 1 sentinel missing (a regime B stream, only with \
                  --require-sentinel), 2 usage or I/O error, 3 abandoned (truncated), \
                  4 corrupt, 5 aborted by the peer, 6 contract violation (not a framed stream, \
                  unsupported version, over the limits, request key mismatch, broken SSE mapping)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Frame bytes or JSON messages (stdin or a file) into a stream.
    Encode(encode::EncodeArgs),
    /// Decode a stream: verified messages on stdout, the verdict on stderr.
    Decode(decode::DecodeArgs),
    /// List the frames of a stream (offset, kind, sequence, length, checksums) and the verdict.
    Inspect(inspect::InspectArgs),
    /// Check a stream and report the verdict as the exit status (and `--json`).
    Verify(decode::VerifyArgs),
    /// Run a sidecar in front of any MCP server: framed responses and deduplicated tool calls.
    #[cfg(feature = "proxy")]
    Proxy(Box<proxy::ProxyArgs>),
}

/// A failure of the tool itself (not a verdict on the stream): exit status 2.
#[derive(Debug)]
pub(crate) enum CliError {
    /// Bad arguments or input that cannot be encoded.
    Usage(String),
    /// Reading or writing failed.
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl CliError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Usage(msg) => f.write_str(msg),
            Self::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

/// Exit status for usage and I/O errors (clap uses 2 for its usage errors too).
pub(crate) const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Encode(args) => encode::run(&args),
        Command::Decode(args) => decode::run_decode(&args),
        Command::Inspect(args) => inspect::run(&args),
        Command::Verify(args) => decode::run_verify(&args),
        #[cfg(feature = "proxy")]
        Command::Proxy(args) => proxy::run(&args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("mcp-frame: error: {err}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
