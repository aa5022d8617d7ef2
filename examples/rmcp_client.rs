//! An rmcp client over `FramingHttpClient`: it reads the server's framing contract from the
//! `initialize` result (a server that does not frame, or declares no contract, is refused before
//! any tool call, the error saying what to do), opts in,
//! sends a request key with every request, verifies every frame and hands rmcp only verified
//! messages, unchanged. A response cut on the way reaches the caller as a JSON-RPC error carrying
//! the outcome report (SPEC.md §11.7), never as a parse error.
//!
//! Run the server first (`cargo run --features rmcp,demo --example rmcp_server`), then
//! `cargo run --features rmcp,demo --example rmcp_client -- [URL] [compat|sse|binary]` (the
//! mapping asked for; default `compat`, SPEC.md §18). `--help` lists the arguments.

mod help;

use mcp_framing::mapping::Mapping;
use mcp_framing::{client::OUTCOME_DATA_KEY, rmcp_http::FramingHttpClient};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, NumberOrString, ProgressToken, RequestMetaObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

/// A document of about 31 KiB: tool-call arguments that span many frames.
fn document() -> String {
    (0..400)
        .map(|i| format!("line {i} of a long report body, {}\n", "x".repeat(40)))
        .collect()
}

/// The server's `render_report` call for `document`, with a progress token so that the tool
/// reports progress (a notification, verified too) before its result.
fn render_report_call(title: &str, document: &str) -> CallToolRequestParams {
    let arguments = serde_json::json!({"title": title, "body": document});
    let mut params = CallToolRequestParams::new("render_report")
        .with_arguments(arguments.as_object().expect("an object").clone());
    params.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::Number(1),
    )));
    params
}

/// `--help`, and the usage line of an argument error.
const HELP: &str = "\
usage: rmcp_client [URL] [compat|sse|binary]
run:   cargo run --features rmcp,demo --example rmcp_client -- [URL] [MAPPING]

An rmcp client over FramingHttpClient: initializes (reading the server's framing contract), then
calls render_report with a large document and prints what verified, or the outcome report of a
call that did not end clean.

  URL         the server (default http://127.0.0.1:8931/mcp: the rmcp_server example)
  MAPPING     the mapping asked for: compat (default, SPEC.md §18), sse or binary
  -h, --help  print this help";

/// The URL and mapping from the command line, or `Err` with what is wrong.
fn parse_args(args: &[String]) -> Result<(String, Mapping), String> {
    if let Some(option) = args.iter().find(|arg| arg.starts_with('-')) {
        return Err(format!("unknown option {option:?}"));
    }
    let url = args
        .first()
        .map_or("http://127.0.0.1:8931/mcp", String::as_str);
    let mapping = match args.get(1).map(String::as_str) {
        None | Some("compat") => Mapping::Compat,
        Some("sse") => Mapping::Sse,
        Some("binary") => Mapping::Binary,
        Some(other) => return Err(format!("unknown mapping {other:?}: compat, sse or binary")),
    };
    if let Some(extra) = args.get(2) {
        return Err(format!("unexpected argument {extra:?}"));
    }
    Ok((url.to_owned(), mapping))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if help::asked(&args, HELP) {
        return;
    }
    let (url, mapping) =
        parse_args(&args).unwrap_or_else(|err| help::usage_error("rmcp_client", HELP, &err));
    let client = FramingHttpClient::new(reqwest::Client::new()).mapping(mapping);
    let transport = StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(url.as_str()),
    );
    let peer = match ().serve(transport).await {
        Ok(peer) => peer,
        Err(err) => {
            // A server that does not frame fails as NotFramed, its message saying what to do;
            // one that frames without declaring a contract is a configuration error (Regime C).
            println!("initialize failed: {err}");
            return;
        }
    };
    let document = document();
    let result = peer
        .call_tool(render_report_call("Quarterly report", &document))
        .await;
    match result {
        Ok(result) => {
            let text = &result.content[0].as_text().expect("text").text;
            println!(
                "render_report: {} bytes of arguments, {} bytes of verified result",
                document.len(),
                text.len()
            );
            println!("first line: {}", text.lines().next().unwrap_or(""));
        }
        Err(rmcp::ServiceError::McpError(error)) => {
            println!("render_report failed: {}", error.message);
            if let Some(outcome) = error.data.as_ref().map(|d| &d[OUTCOME_DATA_KEY]) {
                println!("outcome: {outcome}");
            }
        }
        Err(err) => println!("render_report failed: {err}"),
    }
    let _ = peer.cancel().await;
}
