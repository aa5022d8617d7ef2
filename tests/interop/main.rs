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
//! - [`in_process`]: every server framing its own responses in-process (the Python package's
//!   `FramingMiddleware`, the TypeScript package's `framingHandler`): the stock clients byte for
//!   byte, the framing clients verifying, the cut fleet on one Redis, the server killed;
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
mod in_process;
mod killed;
mod readme;
mod servers;
mod slow;
mod through;

use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use mcp_framing::mapping::Mapping;
use mcp_framing::rmcp_http::FramingHttpClient;

use rmcp::model::{CallToolRequestParams, NumberOrString, ProgressToken, RequestMetaObject};

use servers::{Counter, FixtureServer, Sdk};
use stock_support::{
    LINES, Report, SEED, expected_text, framing_call, framing_stat as stat, python_driver,
    run_python, run_rmcp_stock, run_typescript_sdk, sha256_hex,
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

/// Every framing client verifies every response from `urls` (labelled `labels`), which come in
/// pairs, each server's endpoint without and with frame-all compat: Rust's `FramingHttpClient`
/// (SSE and binary mappings) at every URL, the Python package's wrapper (compatible and binary
/// mappings, two calls) at one endpoint of each server, the TypeScript package's `framingFetch`
/// (both SDK lines) at every URL; every result byte for byte, nothing unverified, nothing logged.
fn every_framing_client_verifies(urls: &[String], labels: &[String]) {
    let expected = expected_text(SEED, LINES);
    thread::scope(|scope| {
        // Rust: `FramingHttpClient` in the SSE mapping and in the binary one; a result is handed
        // out only once verified (an unframed or cut response is an error).
        let rust = scope.spawn(|| {
            for (url, label) in urls.iter().zip(labels) {
                for mapping in [Mapping::Sse, Mapping::Binary] {
                    let client = FramingHttpClient::new(reqwest::Client::new()).mapping(mapping);
                    let (result, warnings) = framing_call(client, url);
                    let label = format!("rust {mapping:?}, {label}");
                    assert_eq!(result.as_deref(), Ok(expected.as_str()), "{label}");
                    assert!(warnings.is_empty(), "{label}: {warnings:?}");
                }
            }
        });
        // Python: the package's wrapper around the SDK's client, two calls per endpoint, in the
        // compatible mapping and in the binary one.
        let python = scope.spawn(|| {
            // One endpoint of each server (a Python process a run takes seconds on a loaded
            // machine): frame-all off and compat in turn, each mapping in turn.
            for (i, (url, label)) in urls.iter().zip(labels).enumerate().step_by(2) {
                let url = if i % 4 == 0 { url } else { &urls[i + 1] };
                let label = if i % 4 == 0 { label } else { &labels[i + 1] };
                let mapping = if i % 8 < 4 { "compat" } else { "binary" };
                let run = python_driver(&[
                    "calls",
                    url,
                    "--calls",
                    "2",
                    "--seed",
                    SEED,
                    "--lines",
                    &LINES.to_string(),
                    "--mapping",
                    mapping,
                ]);
                let (calls, stats) = (&run.calls, &run.stats);
                let label = format!("python {mapping}, {label}");
                assert!(run.logs.is_empty(), "{label}: {:?}", run.logs);
                assert_eq!(calls.len(), 2, "{label}");
                for call in calls {
                    assert_eq!(call["outcome"], "ok", "{label}: {call}");
                    assert_eq!(call["match"], true, "{label}: byte for byte");
                }
                assert_eq!(stats["incomplete"], 0, "{label}: {stats}");
                assert_eq!(stats["errors"], 0, "{label}: {stats}");
                assert_eq!(
                    stats["verified_messages"], stats["messages_verified_by_attempts"],
                    "{label}: {stats}"
                );
                assert!(
                    stats["verified_messages"].as_u64() >= Some(3),
                    "{label}: {stats}"
                );
            }
        });
        // TypeScript: both SDK lines with `framingFetch`, at once.
        for sdk in ["v1", "v2"] {
            scope.spawn(move || {
                let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
                let reports = run_typescript_sdk(sdk, true, &urls, None, Duration::from_secs(120));
                let labels: Vec<String> = labels
                    .iter()
                    .map(|l| format!("{sdk} wrapped, {l}"))
                    .collect();
                assert_exact(&reports, &labels);
                for (report, label) in reports.iter().zip(&labels) {
                    assert!(report.wrapped, "{label}");
                    assert_eq!(stat(report, "unverified"), 0, "{label}: {report:?}");
                    assert!(stat(report, "verified") >= 3, "{label}: {report:?}");
                    assert_eq!(stat(report, "errors"), 0, "{label}: {report:?}");
                }
            });
        }
        rust.join().unwrap();
        python.join().unwrap();
    });
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

/// What a framing call gave: its result's text, or its error's message and outcome report; and
/// what the client logged at WARN or above (`stock_support::framing_call_tool`).
type CallOutcome = (Result<String, (String, serde_json::Value)>, Vec<String>);

/// Kills `server` (its tool call `call` under way) and waits for the call: its error's message
/// and outcome report, what the client logged, and the seconds from the kill to the report.
/// Panics if the call handed out a result.
fn kill_during_call(
    server: &mut FixtureServer,
    call: thread::JoinHandle<CallOutcome>,
    label: &str,
) -> (String, serde_json::Value, Vec<String>, f64) {
    let killed = Instant::now();
    server.kill();
    let (result, warnings) = call.join().unwrap();
    let seconds = killed.elapsed().as_secs_f64();
    let Err((message, outcome)) = result else {
        panic!("{label}: a call whose server was killed handed out {result:?}");
    };
    (message, outcome, warnings, seconds)
}

/// Asserts that a framing call that did not end clean (`message`, its outcome report `outcome`,
/// what the client logged `warnings`) was reported aborted or abandoned, and logged so; its
/// classification.
fn assert_aborted_or_abandoned<'a>(
    label: &str,
    message: &str,
    outcome: &'a serde_json::Value,
    warnings: &[String],
) -> &'a str {
    let classification = outcome["classification"].as_str().unwrap_or_default();
    assert!(
        matches!(classification, "aborted" | "abandoned"),
        "{label}: {message}: {outcome}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(&format!("outcome=\"{classification}\""))),
        "{label}: {warnings:?}"
    );
    classification
}

/// A raw JSON-RPC POST of `body` to `url` as the stock clients send it (the 2025-11-25 revision,
/// JSON or an event stream accepted), its response head.
async fn raw_post(url: &str, body: &serde_json::Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(body)
        .send()
        .await
        .expect("the server answers")
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
