//! An rmcp server (stateless Streamable HTTP) behind `FramingLayer`: requests that opt in
//! (`Mcp-Framing: 1`) get framed responses, others are answered as before; the layer declares
//! its framing contract in the `initialize` and `server/discover` results rmcp writes (SPEC.md
//! §11.2), so every client learns from the handshake it performs anyway that this server frames,
//! without a line of declaration here.
//!
//! Run: `cargo run --features rmcp,demo --example rmcp_server -- [OPTIONS]`, then in another
//! terminal `cargo run --features rmcp,demo --example rmcp_client [URL]`, or any stock MCP client
//! (the tests run the official Python and TypeScript SDK clients against it:
//! `tests/stock/stock_clients.rs`).
//!
//! Options:
//! - `--addr ADDR`: where to listen (default `127.0.0.1:8931`; port 0 picks a free port). The
//!   first line on stdout is `listening URL ...`, for test harnesses.
//! - `--mode MODE`: `opt-in` (default: `FramingLayer`, which frames only the requests that opt
//!   in), `compat` (`FramingLayer::frame_all_responses(true)`: every response framed, in the
//!   compatible SSE mapping for requests that did not opt in, which stock clients read as a plain
//!   MCP stream; SPEC.md §18) or `plain` (rmcp alone, no layer: the baseline).
//! - `--json`: rmcp answers with `application/json` where it can (`json_response`) instead of
//!   `text/event-stream`.
//! - `--frame-size BYTES`: DATA frame size for framed responses (default 16384).
//! - `--seconds N`: stop after N seconds (default 120).
//! - `--nodelay`: TCP_NODELAY on every accepted connection (`axum::serve` leaves Nagle's
//!   algorithm on): a benchmark's calls in sequence then never wait for a client's delayed ACK.
//!
//! Two tools:
//! - `generate_text {seed, lines}` returns a deterministic text of about 89 bytes a line (1200
//!   lines: 104 616 bytes, several 16 KiB frames) mixing JSON escapes (`"`, `\`, tab, newline) and
//!   multi-byte UTF-8, so a client can check a large result byte for byte: line `i` (from 0) is
//!   `format!("{i:06} {seed} \"quoted\" back\\slash\ttab café ✓ {run}\n")` where `run` is the
//!   letter `a + i % 26` repeated `i % 64` times.
//! - `render_report {title, body}` takes a large document as its arguments and returns it with
//!   numbered lines (arguments and result both span many frames); with a progress token in the
//!   request it sends a progress notification before its result.

mod help;

use std::sync::Arc;
use std::time::Duration;

use mcp_framing::rmcp_http::FramingLayer;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use tower_layer::Layer;

/// The most lines `generate_text` produces (about 9 MB): the caller does not decide how much the
/// server allocates.
const MAX_LINES: u32 = 100_000;

#[derive(Debug, serde::Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct TextArgs {
    /// Goes into every line.
    seed: String,
    /// How many lines (at most 100000).
    lines: u32,
}

#[derive(Debug, serde::Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ReportArgs {
    /// The title.
    title: String,
    /// The document to render, large.
    body: String,
}

/// The text `generate_text` returns (see the module docs).
fn generate_text(seed: &str, lines: u32) -> String {
    let mut text = String::new();
    for i in 0..lines {
        let letter = char::from(b'a' + (i % 26) as u8);
        let run: String = std::iter::repeat_n(letter, (i % 64) as usize).collect();
        text.push_str(&format!(
            "{i:06} {seed} \"quoted\" back\\slash\ttab café ✓ {run}\n"
        ));
    }
    text
}

#[derive(Clone, Debug)]
struct Tools;

#[tool_router(server_handler)]
impl Tools {
    #[tool(
        description = "Deterministic text of `lines` lines with JSON escapes and UTF-8, \
                          for checking a large result byte for byte"
    )]
    fn generate_text(&self, Parameters(args): Parameters<TextArgs>) -> Result<String, ErrorData> {
        if args.lines > MAX_LINES {
            return Err(ErrorData::invalid_params(
                format!("lines must be at most {MAX_LINES}"),
                None,
            ));
        }
        Ok(generate_text(&args.seed, args.lines))
    }

    #[tool(description = "Render a report: returns the document with numbered lines")]
    async fn render_report(
        &self,
        Parameters(args): Parameters<ReportArgs>,
        context: RequestContext<RoleServer>,
    ) -> String {
        // A notification before the final result, on the same response stream.
        if let Some(token) = context.meta.get_progress_token() {
            let _ = context
                .peer
                .notify_progress(ProgressNotificationParam::new(token, 0.5))
                .await;
        }
        let lines: Vec<String> = args
            .body
            .lines()
            .enumerate()
            .map(|(i, line)| format!("{:05} {line}", i + 1))
            .collect();
        format!("# {}\n{}", args.title, lines.join("\n"))
    }
}

/// How the server answers requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// rmcp alone.
    Plain,
    /// rmcp behind `FramingLayer`: framed responses for the requests that opt in.
    OptIn,
    /// rmcp behind `FramingLayer` framing every response (the compatible mapping unless a
    /// request opted in for another).
    Compat,
}

#[derive(Debug)]
struct Options {
    addr: String,
    mode: Mode,
    json: bool,
    frame_size: usize,
    seconds: u64,
    nodelay: bool,
}

/// `--help`, and the usage line of an argument error.
const HELP: &str = "\
usage: rmcp_server [--addr ADDR] [--mode opt-in|compat|plain] [--json] [--frame-size BYTES] [--seconds N] [--nodelay]
run:   cargo run --features rmcp,demo --example rmcp_server -- [OPTIONS]

An rmcp server (stateless Streamable HTTP) behind FramingLayer, with the tools generate_text
{seed, lines} and render_report {title, body}. The first line on stdout is `listening URL ...`.

  --addr ADDR         where to listen (default 127.0.0.1:8931; port 0 picks a free port)
  --mode MODE         opt-in (default: FramingLayer frames the requests that opt in), compat
                      (every response framed; the compatible SSE mapping for the others), plain
                      (rmcp alone, no layer)
  --json              answer application/json where rmcp can, instead of text/event-stream
  --frame-size BYTES  DATA frame size of framed responses (default 16384)
  --seconds N         stop after N seconds (default 120)
  --nodelay           TCP_NODELAY on every accepted connection (Nagle's algorithm off)
  -h, --help          print this help";

/// The options, or `Err` with what is wrong.
fn parse_options(args: Vec<String>) -> Result<Options, String> {
    let mut options = Options {
        addr: "127.0.0.1:8931".to_owned(),
        mode: Mode::OptIn,
        json: false,
        frame_size: 16 * 1024,
        seconds: 120,
        nodelay: false,
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--addr" => options.addr = value("--addr")?,
            "--mode" => {
                options.mode = match value("--mode")?.as_str() {
                    "opt-in" => Mode::OptIn,
                    "plain" => Mode::Plain,
                    "compat" => Mode::Compat,
                    other => return Err(format!("unknown mode {other:?} (opt-in, compat, plain)")),
                }
            }
            "--json" => options.json = true,
            "--nodelay" => options.nodelay = true,
            "--frame-size" => {
                options.frame_size = value("--frame-size")?
                    .parse()
                    .map_err(|e| format!("--frame-size: {e}"))?;
            }
            "--seconds" => {
                options.seconds = value("--seconds")?
                    .parse()
                    .map_err(|e| format!("--seconds: {e}"))?;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if help::asked(&args, HELP) {
        return;
    }
    let options =
        parse_options(args).unwrap_or_else(|err| help::usage_error("rmcp_server", HELP, &err));
    // rmcp's stateless Streamable HTTP service.
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.sse_keep_alive = None;
    config.json_response = options.json;
    let service = StreamableHttpService::new(
        || Ok(Tools),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    // The wiring this example is about: one layer around rmcp's service, which frames and
    // declares that it does (`layer.contract()`).
    let layer = FramingLayer::new()
        .frame_size(options.frame_size)
        .frame_all_responses(options.mode == Mode::Compat);
    let app = match options.mode {
        Mode::OptIn | Mode::Compat => {
            axum::Router::new().nest_service("/mcp", layer.layer(service))
        }
        Mode::Plain => axum::Router::new().nest_service("/mcp", service),
    };
    let listener = tokio::net::TcpListener::bind(&options.addr)
        .await
        .unwrap_or_else(|err| panic!("bind {}: {err}", options.addr));
    let addr = listener.local_addr().expect("a bound address");
    println!(
        "listening http://{addr}/mcp (mode {}, {} responses, stops after {} s)",
        match options.mode {
            Mode::OptIn => "opt-in",
            Mode::Compat => "compat",
            Mode::Plain => "plain",
        },
        if options.json { "json" } else { "sse" },
        options.seconds
    );
    let nodelay = options.nodelay;
    let listener = axum::serve::ListenerExt::tap_io(listener, move |tcp| {
        if nodelay {
            let _ = tcp.set_nodelay(true);
        }
    });
    let serve = axum::serve(listener, app);
    if tokio::time::timeout(Duration::from_secs(options.seconds), serve)
        .await
        .is_err()
    {
        println!("done");
    }
}
