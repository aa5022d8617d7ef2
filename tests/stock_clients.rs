//! Stock MCP clients from three SDKs against the rmcp example server (`examples/rmcp_server.rs`)
//! behind `FramingLayer`: the official Python SDK (`mcp`), the official TypeScript SDK (both
//! lines: `@modelcontextprotocol/sdk` 1.x and `@modelcontextprotocol/client` 2.x) and rmcp's own
//! reqwest client. None of them opts in, so the layer must serve them exactly as rmcp alone does:
//! initialize, `tools/list` and a ~100 KiB `tools/call` result checked byte for byte, with no
//! warning logged by the SDK.
//!
//! Then what each stock client does when a proxy ends the `tools/call` response body normally
//! in the middle (the README table "What stock clients do with a cut response"), next to what a
//! framing client reports for the same cut; and the stock TypeScript clients wrapped with the
//! typescript/ package's `framingFetch` (every result verified, every cut an immediate error,
//! keyed retries across the fleet example running each tool call once).
//!
//! The clients run from `tests/stock_support` (the Python and TypeScript ones as subprocesses
//! from what `scripts/stock-clients` installs; `bash scripts/test` runs it first); the tests
//! fail, not skip, when it is missing. The servers are the built examples
//! (`tests/example_support`), the rmcp one started once per server mode: adding a mode is one
//! entry in [`SERVER_MODES`].
//!
//! `cargo test --all-features --test stock_clients -- --ignored --nocapture` prints the cut table
//! measured with every SDK's default timeouts (it takes minutes: some clients hang until them).

#[path = "rmcp_support/cut.rs"]
mod cut;
#[path = "dedupe_support/mod.rs"]
mod dedupe_support;
#[path = "example_support/mod.rs"]
mod example_support;
#[path = "stock_support/mod.rs"]
mod stock_support;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use cut::Cut;
use example_support::{Example, executions, fleet_backend, repo, rmcp_server, runtime};
use mcp_framing::mapping::Mapping;
use mcp_framing::rmcp_http::FramingHttpClient;
use serde_json::Value;
use stock_support::{
    LINES, Report, SEED, TYPESCRIPT_SDKS, assert_exact, cut_fails_within, expected_text,
    framing_call, framing_stat as stat, node, run_python, run_rmcp_stock, run_typescript,
    run_typescript_sdk, with_warn_capture,
};

/// The server modes every stock client must not notice (`--mode` of the example server):
/// rmcp alone, rmcp behind `FramingLayer` (which frames only the requests that opt in), and
/// rmcp behind `FramingLayer::frame_all_responses(true)`, which frames every response in the
/// compatible SSE mapping (issue 13 §2, SPEC.md §18).
const SERVER_MODES: &[&str] = &["plain", "opt-in", "compat"];

/// Where the `tools/call` response body is ended: well inside the ~110 KB body (mid-SSE-event,
/// or mid-JSON-body), for every client alike.
const CUT_AT: usize = 50_000;

/// The request timeout given to stock clients in the cut tests (a client that hangs is stopped
/// by it); the README table gives the SDK defaults, measured by the ignored test.
const CUT_TIMEOUT_SECONDS: f64 = 2.0;

/// One server for every mode and response kind: (mode, json, server).
fn servers(modes: &[&str]) -> Vec<(String, bool, Example)> {
    let mut servers = Vec::new();
    for mode in modes {
        for json in [false, true] {
            servers.push(((*mode).to_owned(), json, rmcp_server(mode, json)));
        }
    }
    servers
}

// ---------------------------------------------------------------------------------------------
// A proxy that ends the `tools/call` response body normally after `cut` bytes.

/// A proxy in front of `upstream` that ends every `tools/call` response body normally after
/// `cut` bytes (`tests/rmcp_support/cut.rs`; `usize::MAX`: never): a proxy's idle timeout or a
/// backend scaled in, as the client sees it.
struct Proxy {
    url: String,
    cut: Arc<Cut>,
}

impl Proxy {
    fn start(upstream: &str, cut_at: usize) -> Self {
        let cut = Cut::new();
        cut.cut_method("tools/call", std::iter::repeat_n(cut_at, 64));
        let url = cut::serve_proxy(runtime(), upstream, cut.clone());
        Self { url, cut }
    }

    /// Bytes of the last `tools/call` response body forwarded.
    fn forwarded(&self) -> usize {
        self.cut
            .forwarded
            .lock()
            .unwrap()
            .last()
            .copied()
            .unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------------------------
// The clean path.

fn clean_runs(run: impl Fn(&[&str]) -> Vec<Report>) {
    let servers = servers(SERVER_MODES);
    let urls: Vec<&str> = servers.iter().map(|(_, _, s)| s.url.as_str()).collect();
    let labels: Vec<String> = servers
        .iter()
        .map(|(mode, json, _)| format!("mode {mode}, {}", if *json { "json" } else { "sse" }))
        .collect();
    let reports = run(&urls);
    assert_eq!(reports.len(), urls.len());
    for (report, url) in reports.iter().zip(&urls) {
        assert_eq!(report.url, *url);
    }
    assert_exact(&reports, &labels);
}

#[test]
fn python_sdk_client_gets_every_result_byte_for_byte_through_the_layer() {
    clean_runs(|urls| run_python(urls, None, Duration::from_secs(60)));
}

#[test]
fn typescript_sdk_client_gets_every_result_byte_for_byte_through_the_layer() {
    clean_runs(|urls| run_typescript(urls, None, Duration::from_secs(60)));
}

#[test]
fn typescript_v2_sdk_client_gets_every_result_byte_for_byte_through_the_layer() {
    clean_runs(|urls| run_typescript_sdk("v2", false, urls, None, Duration::from_secs(60)));
}

#[test]
fn rmcp_stock_client_gets_every_result_byte_for_byte_through_the_layer() {
    clean_runs(|urls| urls.iter().map(|url| run_rmcp_stock(url, None)).collect());
}

// ---------------------------------------------------------------------------------------------
// Cut responses.

/// The framing client (`FramingHttpClient` over reqwest, opted in) through the same proxy: the
/// JSON-RPC error's message and outcome data.
fn run_framing(url: &str, binary: bool) -> (Result<String, (String, Value)>, Vec<String>) {
    // The README table's rows: the SSE mapping of SPEC.md §15 and the binary one.
    let mapping = if binary {
        Mapping::Binary
    } else {
        Mapping::Sse
    };
    framing_call(
        FramingHttpClient::new(reqwest::Client::new()).mapping(mapping),
        url,
    )
}

/// One cut: where, the server's response kind, and the proxy in front of that server.
struct CutCase {
    cut: usize,
    json: bool,
    _server: Example,
    proxy: Proxy,
}

impl CutCase {
    fn label(&self) -> String {
        let kind = if self.json { "json" } else { "sse" };
        format!("{kind} response cut at {}", self.cut)
    }
}

/// The cuts of the README table: a `text/event-stream` and an `application/json` response,
/// each ended before its first byte and at [`CUT_AT`], from a server behind `FramingLayer`.
fn cut_cases() -> Vec<CutCase> {
    let mut cases = Vec::new();
    for cut in [0, CUT_AT] {
        for json in [false, true] {
            let server = rmcp_server("opt-in", json);
            let proxy = Proxy::start(&server.url, cut);
            cases.push(CutCase {
                cut,
                json,
                _server: server,
                proxy,
            });
        }
    }
    cases
}

/// Runs a stock client over every cut; checks that each report is an error of the `tools/call`
/// and returns (case, report) pairs.
fn cut_runs(run: impl Fn(&[&str]) -> Vec<Report>, check: impl Fn(&CutCase, &Report)) {
    let cases = cut_cases();
    let urls: Vec<&str> = cases.iter().map(|c| c.proxy.url.as_str()).collect();
    let reports = run(&urls);
    for (case, report) in cases.iter().zip(&reports) {
        let label = case.label();
        assert_eq!(report.url, case.proxy.url, "{label}");
        assert_eq!(report.phase, "tools/call", "{label}: {report:?}");
        assert_eq!(report.outcome, "error", "{label}: {report:?}");
        assert_eq!(
            case.proxy.forwarded(),
            case.cut,
            "{label}: the proxy forwarded exactly the bytes before the cut"
        );
        check(case, report);
    }
}

fn error_of(report: &Report) -> &str {
    report.error.as_deref().unwrap_or_default()
}

#[test]
fn python_sdk_client_on_a_cut_response_errs_at_once_as_the_readme_says() {
    cut_runs(
        |urls| run_python(urls, Some(CUT_TIMEOUT_SECONDS), Duration::from_secs(60)),
        |case, report| {
            let label = case.label();
            let error = error_of(report);
            if case.json {
                assert!(
                    error.starts_with("MCPError: Failed to parse JSON response"),
                    "{label}: {error}"
                );
                assert_eq!(report.code, Some(-32700), "{label}: PARSE_ERROR");
                assert_eq!(
                    report.warnings,
                    ["ERROR mcp.client.streamable_http: Error parsing JSON response"],
                    "{label}"
                );
            } else {
                assert_eq!(
                    error, "MCPError: SSE stream ended without a response",
                    "{label}"
                );
                assert_eq!(report.code, Some(-32000), "{label}: CONNECTION_CLOSED");
                assert!(report.warnings.is_empty(), "{label}: {:?}", report.warnings);
            }
            assert!(
                report.seconds.unwrap() < CUT_TIMEOUT_SECONDS,
                "{label}: no wait: {report:?}"
            );
        },
    );
}

#[test]
fn typescript_sdk_clients_on_a_cut_sse_response_hang_until_their_request_timeout() {
    // (SDK line, the error its request timeout raises, its JSON-RPC code if it has one)
    let timeouts = [
        (
            "v1",
            "McpError: MCP error -32001: Request timed out",
            Some(-32001),
        ),
        ("v2", "SdkError: Request timed out", None),
    ];
    for (sdk, timed_out, timeout_code) in timeouts {
        cut_runs(
            |urls| {
                run_typescript_sdk(
                    sdk,
                    false,
                    urls,
                    Some(CUT_TIMEOUT_SECONDS),
                    Duration::from_secs(60),
                )
            },
            |case, report| {
                let label = format!("{sdk}, {}", case.label());
                let error = error_of(report);
                let seconds = report.seconds.unwrap();
                if case.json {
                    assert!(error.starts_with("SyntaxError: "), "{label}: {error}");
                    assert!(seconds < CUT_TIMEOUT_SECONDS, "{label}: {report:?}");
                    assert!(
                        report.warnings.contains(&format!("onerror: {error}")),
                        "{label}: {:?}",
                        report.warnings
                    );
                } else {
                    assert_eq!(error, timed_out, "{label}");
                    assert_eq!(report.code, timeout_code, "{label}: the timeout's code");
                    assert!(
                        seconds >= CUT_TIMEOUT_SECONDS * 0.99,
                        "{label}: waited for the timeout: {report:?}"
                    );
                    assert!(report.warnings.is_empty(), "{label}: {:?}", report.warnings);
                }
            },
        );
    }
}

#[test]
fn rmcp_stock_client_on_a_cut_response_errs_at_once_as_the_readme_says() {
    cut_runs(
        |urls| {
            urls.iter()
                .map(|url| run_rmcp_stock(url, Some(CUT_TIMEOUT_SECONDS)))
                .collect()
        },
        |case, report| {
            let label = case.label();
            let error = error_of(report);
            if case.json {
                assert!(
                    error.contains("could not parse JSON response as ServerJsonRpcMessage"),
                    "{label}: {error}"
                );
            } else {
                assert_eq!(error, "Transport closed", "{label}");
            }
            assert!(report.seconds.unwrap() < CUT_TIMEOUT_SECONDS, "{label}");
            assert!(report.warnings.is_empty(), "{label}: {:?}", report.warnings);
        },
    );
}

#[test]
fn framing_client_reports_the_same_cuts_as_abandoned_and_surfaces_them_without_deduplication() {
    for case in cut_cases() {
        for binary in [false, true] {
            let label = format!(
                "{}, {} mapping",
                case.label(),
                if binary { "binary" } else { "sse" }
            );
            let (result, warnings) = run_framing(&case.proxy.url, binary);
            let Err((message, outcome)) = result else {
                panic!("{label}: a cut response was handed out as complete");
            };
            assert_eq!(case.proxy.forwarded(), case.cut);
            assert!(
                message.starts_with("mcp-framing: response abandoned: truncated"),
                "{label}: {message}"
            );
            assert_eq!(outcome["classification"], "abandoned", "{label}");
            assert_eq!(outcome["kind"], "Truncated", "{label}");
            // Keyed, but the example server declares no deduplication (SPEC.md §17.11): a
            // retry could run the tool again, so the cut is surfaced, not retried.
            assert_eq!(outcome["retryDecision"], "surface_to_caller", "{label}");
            assert_eq!(outcome["messagesVerified"], 0, "{label}");
            let detail = outcome["detail"].as_str().unwrap();
            match (case.cut, binary) {
                (0, _) => {
                    assert!(
                        detail.contains("truncated before any frame"),
                        "{label}: {detail}"
                    );
                    assert_eq!(outcome["openMessageBytes"], 0, "{label}");
                }
                (_, false) => {
                    assert!(
                        detail.contains("truncated inside a message"),
                        "{label}: {detail}"
                    );
                    assert_eq!(outcome["openMessageBytes"], 32768, "{label}");
                }
                (_, true) => {
                    assert!(
                        detail.contains("truncated inside the payload of a DATA frame"),
                        "{label}: {detail}"
                    );
                    assert_eq!(outcome["openMessageBytes"], 49152, "{label}");
                }
            }
            // The framing client reports the cut itself: one `mcp_framing` warning with the
            // verdict (a stock client logs nothing, or an unrelated parse error).
            assert_eq!(warnings.len(), 1, "{label}: {warnings:?}");
            assert!(
                warnings[0].starts_with("WARN mcp_framing:")
                    && warnings[0].contains("outcome=\"abandoned\""),
                "{label}: {warnings:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The stock TypeScript clients wrapped with `framingFetch` (the typescript/ package): the same
// SDKs, untouched, given the package's fetch.

/// The server modes whose responses a wrapped client verifies: the layer framing the requests
/// that opt in, and framing every response (the compatible mapping).
const FRAMED_MODES: &[&str] = &["opt-in", "compat"];

/// Offsets to cut a framed `tools/call` body of `len` bytes at: before its first byte, inside
/// the first record (HEAD), around the first message event, spread over the body, and its last
/// bytes (the final event without its blank line).
fn cut_offsets(len: usize) -> Vec<usize> {
    let mut offsets = vec![0, 1, 13, 100, 229, 230, 1_000, 16_500];
    offsets.extend([len / 4, len / 2, 3 * len / 4, len - 100, len - 2, len - 1]);
    offsets.sort_unstable();
    offsets.dedup();
    offsets
}

#[test]
fn typescript_sdk_clients_wrapped_get_every_result_verified_and_fail_every_cut_at_once() {
    // (mode, json, server, an uncut proxy in front of it)
    let mut servers = Vec::new();
    for mode in FRAMED_MODES {
        for json in [false, true] {
            let server = rmcp_server(mode, json);
            let whole = Proxy::start(&server.url, usize::MAX);
            let label = format!("mode {mode}, {}", if json { "json" } else { "sse" });
            servers.push((label, server, whole));
        }
    }
    let expected = expected_text(SEED, LINES);
    let mut cut_calls = 0;
    for (sdk, name) in TYPESCRIPT_SDKS {
        // Clean: byte for byte, every message handed to the SDK verified, nothing logged.
        let urls: Vec<&str> = servers
            .iter()
            .map(|(_, _, whole)| whole.url.as_str())
            .collect();
        let labels: Vec<String> = servers
            .iter()
            .map(|(label, _, _)| format!("{name}, {label}"))
            .collect();
        let reports = run_typescript_sdk(sdk, true, &urls, None, Duration::from_secs(60));
        assert_exact(&reports, &labels);
        let within = cut_fails_within(reports.iter().filter_map(|r| r.seconds));
        for (report, label) in reports.iter().zip(&labels) {
            assert!(report.wrapped, "{label}");
            assert_eq!(stat(report, "unverified"), 0, "{label}: {report:?}");
            assert!(stat(report, "verified") >= 3, "{label}: {report:?}");
            assert_eq!(stat(report, "errors"), 0, "{label}: {report:?}");
        }
        // Cut: the framed body's length (from the uncut proxy) decides where.
        let mut cuts = Vec::new();
        for (label, server, whole) in &servers {
            let len = whole.forwarded();
            assert!(
                len > expected.len(),
                "{label}: the framed body carries the whole result"
            );
            for cut in cut_offsets(len) {
                cuts.push((label, cut, Proxy::start(&server.url, cut)));
            }
        }
        let urls: Vec<&str> = cuts
            .iter()
            .map(|(_, _, proxy)| proxy.url.as_str())
            .collect();
        let reports = run_typescript_sdk(sdk, true, &urls, None, Duration::from_secs(120));
        for ((label, cut, proxy), report) in cuts.iter().zip(&reports) {
            let label = format!("{name}, {label}, cut at {cut}");
            assert_eq!(report.phase, "tools/call", "{label}: {report:?}");
            assert_eq!(
                report.outcome, "error",
                "{label}: a cut call handed out: {report:?}"
            );
            assert_eq!(proxy.forwarded(), *cut, "{label}");
            // At once, with the outcome, where the unwrapped SDK waits for its request timeout.
            let seconds = report.seconds.unwrap();
            assert!(
                seconds < within,
                "{label}: failed after {seconds} s (bound {within} s)"
            );
            assert_eq!(report.code, Some(-32603), "{label}: {report:?}");
            assert!(
                error_of(report).contains("mcp-framing: response abandoned: truncated"),
                "{label}: {report:?}"
            );
            let outcome = report.framing.as_ref().expect("the outcome report");
            assert_eq!(outcome["classification"], "abandoned", "{label}");
            assert_eq!(outcome["kind"], "Truncated", "{label}");
            assert_eq!(outcome["attempts"], 1, "{label}");
            // Keyed, but the example server declares no deduplication (SPEC.md §17.11).
            assert_eq!(outcome["retryDecision"], "surface_to_caller", "{label}");
            assert_eq!(outcome["messagesVerified"], 0, "{label}");
            // Nothing unverified reached the SDK; the cut is logged once, as a warning.
            assert_eq!(stat(report, "unverified"), 0, "{label}");
            assert_eq!(report.warnings.len(), 1, "{label}: {:?}", report.warnings);
            assert!(
                report.warnings[0].contains("outcome=abandoned"),
                "{label}: {:?}",
                report.warnings
            );
            cut_calls += 1;
        }
    }
    assert!(cut_calls >= 100, "{cut_calls} cut calls");
}

#[test]
fn typescript_sdk_clients_wrapped_fail_the_unframed_handshake_of_a_server_without_framing() {
    // rmcp alone ignores the opt-in: its initialize response arrives unframed, which fails at
    // once as NotFramed before any tool call, as the Rust client fails it (SPEC.md §11.3, §16).
    let server = rmcp_server("plain", false);
    for (sdk, name) in TYPESCRIPT_SDKS {
        let reports = run_typescript_sdk(
            sdk,
            true,
            &[&server.url],
            Some(5.0),
            Duration::from_secs(60),
        );
        let report = &reports[0];
        assert_eq!(report.outcome, "error", "{name}: {report:?}");
        assert_eq!(report.phase, "initialize", "{name}: {report:?}");
        assert!(
            error_of(report).contains("not framed"),
            "{name}: {report:?}"
        );
        assert!(report.seconds.unwrap() < 5.0, "{name}: {report:?}");
    }
}

#[test]
fn typescript_sdk_clients_wrapped_with_keyed_retries_run_each_cut_tool_call_once_across_a_fleet() {
    // Two backend processes sharing one real Redis; backend-a cuts every tool call's first
    // response (after 1500 bytes, the tool having run), so every call is cut once, and its
    // keyed retry goes to backend-b, which must replay the result instead of charging again.
    const CALLS: u64 = 24;
    let redis = dedupe_support::RedisServer::start();
    let a = fleet_backend(&redis.url(), "backend-a", true);
    let b = fleet_backend(&redis.url(), "backend-b", false);
    let endpoints = format!("{},{}", a.url, b.url);
    let mut logical = 0;
    for (sdk, name) in TYPESCRIPT_SDKS {
        let mut command = Command::new(node());
        command
            .arg(repo().join("tests/stock_clients/fleet.mjs"))
            .args([
                "--sdk",
                sdk,
                "--endpoints",
                &endpoints,
                "--calls",
                &CALLS.to_string(),
            ]);
        let output = command
            .stderr(Stdio::inherit())
            .output()
            .expect("run fleet.mjs");
        assert!(output.status.success(), "{name}: fleet.mjs failed");
        let run: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{name}: {e}: {}", String::from_utf8_lossy(&output.stdout)));
        let calls = run["calls"].as_array().expect("calls");
        assert_eq!(calls.len() as u64, CALLS, "{name}");
        for (i, call) in calls.iter().enumerate() {
            assert_eq!(call["ok"], true, "{name}: call {i}: {call}");
            let text = call["text"].as_str().unwrap();
            let expected = format!("charged {} to acct-{sdk}-{i}\n", 100 + i);
            assert!(text.starts_with(&expected), "{name}: call {i}: {text:?}");
        }
        // Every call: a cut first attempt on backend-a, decided `retry`, then a clean one.
        let tool_attempts: Vec<&Value> = run["attempts"]
            .as_array()
            .expect("attempts")
            .iter()
            .filter(|attempt| attempt["method"] == "tools/call")
            .collect();
        assert_eq!(
            tool_attempts.len() as u64,
            2 * CALLS,
            "{name}: {tool_attempts:?}"
        );
        for pair in tool_attempts.chunks(2) {
            assert_eq!(pair[0]["endpoint"], a.url.as_str(), "{name}: {pair:?}");
            assert_eq!(pair[0]["outcome"], "abandoned", "{name}: {pair:?}");
            assert_eq!(pair[0]["decision"], "retry", "{name}: {pair:?}");
            assert_eq!(pair[1]["endpoint"], b.url.as_str(), "{name}: {pair:?}");
            assert_eq!(pair[1]["outcome"], "clean", "{name}: {pair:?}");
        }
        assert!(
            run["stats"]["retries"].as_u64().unwrap() >= CALLS,
            "{name}: {}",
            run["stats"]
        );
        logical += CALLS;
        // One execution per logical call, across both backends.
        assert_eq!(
            executions(&a) + executions(&b),
            logical,
            "{name}: exactly once"
        );
    }
    assert!(logical >= 20);
}

#[test]
fn the_warn_capture_sees_events_of_tasks_spawned_on_the_client_runtime() {
    // The rmcp tests' "no warning" is only as good as this capture.
    let ((), warnings) = with_warn_capture(async {
        tokio::spawn(async { tracing::warn!(target: "rmcp::transport", "spawned") })
            .await
            .unwrap();
        tracing::info!("below the threshold");
    });
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("WARN rmcp::transport:"),
        "{warnings:?}"
    );
}

#[test]
#[ignore = "measures the README table with the SDKs' default timeouts: minutes"]
fn print_the_cut_table_with_sdk_default_timeouts() {
    let cap = Duration::from_secs(400);
    let cases = cut_cases();
    let urls: Vec<&str> = cases.iter().map(|c| c.proxy.url.as_str()).collect();
    let runs: Vec<Vec<Report>> = std::thread::scope(|scope| {
        let mut runs = vec![scope.spawn(|| run_python(&urls, None, cap))];
        for (sdk, _) in TYPESCRIPT_SDKS {
            for wrap in [false, true] {
                let urls = &urls;
                runs.push(scope.spawn(move || run_typescript_sdk(sdk, wrap, urls, None, cap)));
            }
        }
        let rmcp: Vec<Report> = urls.iter().map(|url| run_rmcp_stock(url, None)).collect();
        let mut done: Vec<Vec<Report>> = runs.into_iter().map(|run| run.join().unwrap()).collect();
        done.push(rmcp);
        done
    });
    for reports in runs {
        for (case, report) in cases.iter().zip(reports) {
            println!(
                "{}: {}{} -> {} {:?} (code {:?}) after {:?} s; outcome {}; logged {:?}",
                case.label(),
                report.client,
                if report.wrapped {
                    " + framingFetch"
                } else {
                    ""
                },
                report.outcome,
                report.error,
                report.code,
                report.seconds,
                report.framing.as_ref().map_or(Value::Null, Clone::clone),
                report.warnings
            );
        }
    }
    for case in &cases {
        for binary in [false, true] {
            let (result, warnings) = run_framing(&case.proxy.url, binary);
            println!(
                "{}: framing client ({} mapping) -> {result:?}; logged {warnings:?}",
                case.label(),
                if binary { "binary" } else { "sse" },
            );
        }
    }
}
