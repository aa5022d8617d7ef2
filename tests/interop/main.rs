//! Real MCP servers that no one here wrote, from the official SDKs (the fixture servers of
//! `tests/servers/`: the Python SDK `mcp` 2.3.0 and FastMCP 4.1 under uvicorn, the TypeScript
//! SDK's v1 `StreamableHTTPServerTransport` and v2 `createMcpHandler` on Node.js; every one with
//! `text/event-stream` and `application/json` responses), driven by the stock clients of
//! `tests/stock_support` (the Python SDK's, the TypeScript SDK's v1 and v2 lines', rmcp's).
//!
//! - [`direct`]: every stock client gets every result byte for byte from every server, with
//!   nothing in between (what proves the fixtures);
//! - [`through`]: the same through `mcp-frame proxy` (the sidecar, spawned from the built
//!   binary), with and without `--frame-all compat`, and every framing client verifying every
//!   response;
//! - [`fleet`]: two processes of each server behind two sidecars sharing one Redis, cut on the
//!   way at many offsets: every cut reported at once, its keyed retry answered with the recorded
//!   result, one execution per logical call;
//! - [`killed`]: every server killed in the middle of a tool call, every framing client waiting
//!   on it: aborted or abandoned, never clean;
//! - [`slow`]: a slow tool whose client went away completes, is recorded, and its keyed retry
//!   (from every framing client) gets it replayed;
//! - [`readme`]: the README's sidecar section, its FastMCP and TypeScript servers and its
//!   `mcp-frame proxy` command, followed as written.
//!
//! The servers and clients run from what `scripts/stock-clients` installs (`bash scripts/test`
//! runs it first); the tests fail, not skip, when it is missing. Each module starts its servers
//! once, in parallel (`servers::FixtureServer::start_all`), and its tests share them.

#[path = "../support/mod.rs"]
mod support;
use support::{cut, dedupe_support, example_support, stock_support};
#[allow(dead_code)] // the sidecar's own tests use the rest
#[path = "../sidecar/support.rs"]
mod sidecar_support;

mod direct;
mod fleet;
mod killed;
mod readme;
mod servers;
mod slow;
mod through;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, NumberOrString, ProgressToken, RequestMetaObject};

use servers::{Counter, FixtureServer, Sdk};
use stock_support::{
    LINES, Report, SEED, expected_text, run_python, run_rmcp_stock, run_typescript_sdk, sha256_hex,
};

pub(crate) use stock_support::framing_call_tool as call_tool;

/// The tools of every fixture server, as `tools/list` gives them (sorted).
const TOOLS: [&str; 4] = ["count", "generate_text", "notify", "slow"];

/// One server of every SDK, answering with SSE and with JSON, all recording into one counter.
fn every_server() -> (Arc<Counter>, Vec<FixtureServer>) {
    let counter = Counter::new();
    let which: Vec<(Sdk, bool)> = Sdk::ALL
        .iter()
        .flat_map(|&sdk| [(sdk, false), (sdk, true)])
        .collect();
    let servers = FixtureServer::start_all(&which, &counter);
    (counter, servers)
}

/// The servers of [`every_server`], started once for the modules that only call them (the
/// others kill theirs, or need processes of their own).
fn shared_servers() -> &'static (Arc<Counter>, Vec<FixtureServer>) {
    static SERVERS: OnceLock<(Arc<Counter>, Vec<FixtureServer>)> = OnceLock::new();
    SERVERS.get_or_init(every_server)
}

/// The four stock clients at once (the Python SDK's, the TypeScript SDK's v1 and v2 lines',
/// rmcp's), each over every URL in turn: every result exact ([`assert_exact`]).
fn every_stock_client_exact(urls: &[String], labels: &[String]) {
    let cap = Duration::from_secs(120);
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let runs: Vec<(&str, Vec<Report>)> = std::thread::scope(|scope| {
        let urls = &urls;
        let python = scope.spawn(move || run_python(urls, None, cap));
        let v1 = scope.spawn(move || run_typescript_sdk("v1", false, urls, None, cap));
        let v2 = scope.spawn(move || run_typescript_sdk("v2", false, urls, None, cap));
        let rmcp = scope.spawn(move || {
            urls.iter()
                .map(|url| run_rmcp_stock(url, None))
                .collect::<Vec<_>>()
        });
        vec![
            ("python", python.join().unwrap()),
            ("typescript v1", v1.join().unwrap()),
            ("typescript v2", v2.join().unwrap()),
            ("rmcp", rmcp.join().unwrap()),
        ]
    });
    for (client, reports) in &runs {
        for (report, url) in reports.iter().zip(&urls) {
            assert_eq!(report.url, *url, "{client}");
        }
        assert_exact(reports, labels);
    }
}

/// Asserts that every report is the exact `generate_text {SEED, LINES}` result, with the
/// fixture servers' tools listed and no warning logged by the client.
fn assert_exact(reports: &[Report], labels: &[String]) {
    assert_eq!(reports.len(), labels.len());
    let expected = expected_text(SEED, LINES);
    let sha = sha256_hex(expected.as_bytes());
    for (report, label) in reports.iter().zip(labels) {
        let label = format!("{} from {label}", report.client);
        assert_eq!(report.outcome, "ok", "{label}: {report:?}");
        assert_eq!(report.matched, Some(true), "{label}: {report:?}");
        assert_eq!(report.bytes, Some(expected.len()), "{label}");
        assert_eq!(report.sha256.as_deref(), Some(sha.as_str()), "{label}");
        assert_eq!(report.tools, TOOLS, "{label}");
        assert!(
            report.warnings.is_empty(),
            "{label}: the client logged {:?}",
            report.warnings
        );
    }
}

/// `slow {key, ms}`, with a progress token: the tool sends a progress notification before it
/// sleeps, so that an SSE response has begun while it runs.
fn slow(key: &str, ms: u64) -> CallToolRequestParams {
    let arguments = serde_json::json!({"key": key, "ms": ms});
    let mut call =
        CallToolRequestParams::new("slow").with_arguments(arguments.as_object().unwrap().clone());
    call.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::Number(1),
    )));
    call
}

/// Waits until `counter` shows an execution of `tool` with `key` (a minute at most: a loaded
/// machine is slow, a missing execution is a failure).
fn wait_for_execution(counter: &Counter, tool: &str, key: &str, label: &str) {
    let start = Instant::now();
    while counter.executions(tool, key) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{label}: no `{tool} {key}` recorded within a minute"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
