//! Stock MCP clients from three SDKs against the rmcp example server (`examples/rmcp_server.rs`)
//! behind `FramingLayer`: the official Python SDK (`mcp`), the official TypeScript SDK
//! (`@modelcontextprotocol/sdk`) and rmcp's own reqwest client. None of them opts in, so the layer
//! must serve them exactly as rmcp alone does: initialize, `tools/list` and a ~100 KiB
//! `tools/call` result checked byte for byte, with no warning logged by the SDK.
//!
//! Then what each stock client does when a proxy ends the `tools/call` response body normally
//! in the middle (the README table "What stock clients do with a cut response"), next to what a
//! framing client reports for the same cut.
//!
//! The Python and TypeScript clients (`tests/stock_clients/client.py`, `client.mjs`) run as
//! subprocesses from what `scripts/stock-clients` installs (`bash scripts/test` runs it first);
//! the tests fail, not skip, when it is missing. The server is the built example binary, started
//! once per server mode: adding a mode is one entry in [`SERVER_MODES`].
//!
//! `cargo test --all-features --test stock_clients -- --ignored --nocapture` prints the cut table
//! measured with every SDK's default timeouts (it takes minutes: some clients hang until them).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_framing::http::Mapping;
use mcp_framing::rmcp_http::{FramingHttpClient, OUTCOME_DATA_KEY};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tracing_subscriber::layer::SubscriberExt;

/// The server modes every stock client must not notice (`--mode` of the example server):
/// rmcp alone, rmcp behind `FramingLayer` (which frames only the requests that opt in), and
/// rmcp behind `FramingLayer::frame_all_responses(true)`, which frames every response in the
/// compatible SSE mapping (issue 13 §2, SPEC.md §18).
const SERVER_MODES: &[&str] = &["plain", "opt-in", "compat"];

/// The `generate_text` arguments: 1200 lines, 104 616 bytes of text (several 16 KiB frames).
const SEED: &str = "stock-clients";
const LINES: u32 = 1200;

/// Where the `tools/call` response body is ended: well inside the ~110 KB body (mid-SSE-event,
/// or mid-JSON-body), for every client alike.
const CUT_AT: usize = 50_000;

/// The request timeout given to stock clients in the cut tests (a client that hangs is stopped
/// by it); the README table gives the SDK defaults, measured by the ignored test.
const CUT_TIMEOUT_SECONDS: f64 = 2.0;

/// The text of `generate_text {seed, lines}`, by the rule in `examples/rmcp_server.rs`,
/// written again here so that the test does not trust the server's code.
fn expected_text(seed: &str, lines: u32) -> String {
    let mut text = String::new();
    for i in 0..lines {
        let run = char::from(b'a' + u8::try_from(i % 26).unwrap())
            .to_string()
            .repeat((i % 64) as usize);
        text.push_str(&format!(
            "{i:06} {seed} \"quoted\" back\\slash\ttab café ✓ {run}\n"
        ));
    }
    text
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[path = "rmcp_support/cut.rs"]
mod cut;
#[path = "example_support/mod.rs"]
mod example_support;

use cut::Cut;
use example_support::{Example, repo, runtime};

// ---------------------------------------------------------------------------------------------
// The example server, as a subprocess.

/// The example server on a free loopback port, killed on drop.
struct Server {
    _example: Example,
    url: String,
}

impl Server {
    fn start(mode: &str, json: bool) -> Self {
        let mut args = vec!["--addr", "127.0.0.1:0", "--mode", mode, "--seconds", "300"];
        if json {
            args.push("--json");
        }
        let example = Example::start("rmcp_server", &args);
        let url = example.url.clone();
        Self {
            _example: example,
            url,
        }
    }
}

/// One server for every mode and response kind: (mode, json, server).
fn servers(modes: &[&str]) -> Vec<(String, bool, Server)> {
    let mut servers = Vec::new();
    for mode in modes {
        for json in [false, true] {
            servers.push(((*mode).to_owned(), json, Server::start(mode, json)));
        }
    }
    servers
}

// ---------------------------------------------------------------------------------------------
// A proxy that ends the `tools/call` response body normally after `cut` bytes.

/// A proxy in front of `upstream` that ends every `tools/call` response body normally after
/// `cut` bytes (`tests/rmcp_support/cut.rs`): a proxy's idle timeout or a backend scaled in, as
/// the client sees it.
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
// The clients, and what each one reports.

/// What a client reported for one URL (the JSON line of `client.py` / `client.mjs`).
#[derive(Debug, Clone, serde::Deserialize)]
struct Report {
    client: String,
    url: String,
    outcome: String,
    phase: String,
    #[serde(default)]
    tools: Vec<String>,
    #[serde(default)]
    bytes: Option<usize>,
    #[serde(default)]
    sha256: Option<String>,
    #[serde(default, rename = "match")]
    matched: Option<bool>,
    #[serde(default)]
    error: Option<String>,
    /// The JSON-RPC error code, when the SDK raised a JSON-RPC error.
    #[serde(default)]
    code: Option<i64>,
    #[serde(default)]
    seconds: Option<f64>,
    warnings: Vec<String>,
}

/// `path` (relative to the repository), which `scripts/stock-clients` installs: missing is a
/// failure, not a skip.
fn installed(path: &str, what: &str) -> PathBuf {
    let path = repo().join(path);
    assert!(
        path.exists(),
        "{} is missing: run `bash scripts/stock-clients` (scripts/test does) to install {what}",
        path.display()
    );
    path
}

/// The Python interpreter of the virtual environment with the pinned Python SDK.
fn python() -> PathBuf {
    installed(
        "target/stock-clients/venv/bin/python",
        "the pinned Python SDK",
    )
}

/// `node`, with the pinned TypeScript SDK installed next to `client.mjs`.
fn node() -> PathBuf {
    installed(
        "tests/stock_clients/node_modules/@modelcontextprotocol/sdk",
        "the pinned TypeScript SDK",
    );
    PathBuf::from("node")
}

/// Reads `pipe` to its end on a thread of its own.
fn read_all(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Runs a client program over `urls`, stopped after `cap` at the latest; its reports.
fn run_program(
    program: &Path,
    script: &str,
    urls: &[&str],
    timeout: Option<f64>,
    cap: Duration,
) -> Vec<Report> {
    let mut command = Command::new(program);
    command.arg(repo().join("tests/stock_clients").join(script));
    if let Some(timeout) = timeout {
        command.args(["--timeout", &timeout.to_string()]);
    }
    command.args(["--seed", SEED, "--lines", &LINES.to_string()]);
    let mut child = command
        .args(urls)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("start {}: {err}", program.display()));
    let out = read_all(child.stdout.take().expect("stdout"));
    let err = read_all(child.stderr.take().expect("stderr"));
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > cap {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    let reports: Vec<Report> = out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert_eq!(
        reports.len(),
        urls.len(),
        "{script} stopped early (after {:?}); stdout:\n{out}\nstderr:\n{err}",
        start.elapsed()
    );
    assert!(err.is_empty(), "{script} wrote to stderr:\n{err}");
    reports
}

fn run_python(urls: &[&str], timeout: Option<f64>, cap: Duration) -> Vec<Report> {
    run_program(&python(), "client.py", urls, timeout, cap)
}

fn run_typescript(urls: &[&str], timeout: Option<f64>, cap: Duration) -> Vec<Report> {
    run_program(&node(), "client.mjs", urls, timeout, cap)
}

/// A `tracing` layer that keeps every event at WARN or above.
#[derive(Clone, Default)]
struct WarnCapture(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for WarnCapture {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!(" {}={value:?}", field.name()));
            }
        }
        let metadata = event.metadata();
        if *metadata.level() <= tracing::Level::WARN {
            let mut fields = Fields(String::new());
            event.record(&mut fields);
            self.0.lock().unwrap().push(format!(
                "{} {}:{}",
                metadata.level(),
                metadata.target(),
                fields.0
            ));
        }
    }
}

/// Runs `future` on a fresh current-thread runtime with a WARN capture as this thread's
/// subscriber: every task rmcp spawns runs on this thread, so every event it logs is seen.
fn with_warn_capture<T>(future: impl std::future::Future<Output = T>) -> (T, Vec<String>) {
    let capture = WarnCapture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let value = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future);
    let warnings = std::mem::take(&mut *capture.0.lock().unwrap());
    (value, warnings)
}

fn generate_text_call() -> CallToolRequestParams {
    let arguments = serde_json::json!({"seed": SEED, "lines": LINES});
    CallToolRequestParams::new("generate_text")
        .with_arguments(arguments.as_object().expect("an object").clone())
}

/// The stock rmcp client (rmcp's own reqwest transport, `from_uri`), as a user writes it.
fn run_rmcp_stock(url: &str, timeout: Option<f64>) -> Report {
    let (mut report, warnings) = with_warn_capture(async {
        let mut report = Report {
            client: "rmcp".to_owned(),
            url: url.to_owned(),
            outcome: "error".to_owned(),
            phase: "initialize".to_owned(),
            tools: Vec::new(),
            bytes: None,
            sha256: None,
            matched: None,
            error: None,
            code: None,
            seconds: None,
            warnings: Vec::new(),
        };
        let transport = StreamableHttpClientTransport::from_uri(url);
        let peer = match ().serve(transport).await {
            Ok(peer) => peer,
            Err(err) => {
                report.error = Some(format!("{err}"));
                return report;
            }
        };
        report.phase = "tools/list".to_owned();
        match peer.list_all_tools().await {
            Ok(tools) => {
                report.tools = tools.iter().map(|t| t.name.to_string()).collect();
                report.tools.sort();
            }
            Err(err) => {
                report.error = Some(format!("{err}"));
                return report;
            }
        }
        report.phase = "tools/call".to_owned();
        let start = Instant::now();
        let call = peer.call_tool(generate_text_call());
        let result = match timeout {
            Some(seconds) => tokio::time::timeout(Duration::from_secs_f64(seconds), call)
                .await
                .unwrap_or_else(|_| {
                    Err(rmcp::ServiceError::Timeout {
                        timeout: Duration::from_secs_f64(seconds),
                    })
                }),
            None => call.await,
        };
        report.seconds = Some(start.elapsed().as_secs_f64());
        match result {
            Ok(result) => {
                let text = &result.content[0].as_text().expect("text").text;
                report.bytes = Some(text.len());
                report.sha256 = Some(sha256_hex(text.as_bytes()));
                report.matched = Some(*text == expected_text(SEED, LINES));
                report.outcome = "ok".to_owned();
            }
            Err(err) => report.error = Some(format!("{err}")),
        }
        let _ = peer.cancel().await;
        report
    });
    report.warnings = warnings;
    report
}

/// Asserts that every report is the exact `generate_text` result with no warning.
fn assert_exact(reports: &[Report], labels: &[String]) {
    let expected = expected_text(SEED, LINES);
    let sha = sha256_hex(expected.as_bytes());
    for (report, label) in reports.iter().zip(labels) {
        assert_eq!(report.outcome, "ok", "{label}: {report:?}");
        assert_eq!(report.matched, Some(true), "{label}: {report:?}");
        assert_eq!(report.bytes, Some(expected.len()), "{label}");
        assert_eq!(report.sha256.as_deref(), Some(sha.as_str()), "{label}");
        assert_eq!(report.tools, ["generate_text", "render_report"], "{label}");
        assert!(
            report.warnings.is_empty(),
            "{label}: the SDK logged {:?}",
            report.warnings
        );
    }
}

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
fn rmcp_stock_client_gets_every_result_byte_for_byte_through_the_layer() {
    clean_runs(|urls| urls.iter().map(|url| run_rmcp_stock(url, None)).collect());
}

// ---------------------------------------------------------------------------------------------
// Cut responses.

/// The framing client (`FramingHttpClient` over reqwest, opted in) through the same proxy: the
/// JSON-RPC error's message and outcome data.
fn run_framing(url: &str, binary: bool) -> (Result<String, (String, Value)>, Vec<String>) {
    with_warn_capture(async {
        // The README table's rows: the SSE mapping of SPEC.md §15 and the binary one.
        let mapping = if binary {
            Mapping::Binary
        } else {
            Mapping::Sse
        };
        let client = FramingHttpClient::new(reqwest::Client::new()).mapping(mapping);
        let transport = StreamableHttpClientTransport::with_client(
            client,
            StreamableHttpClientTransportConfig::with_uri(url),
        );
        let peer = ().serve(transport).await.expect("initialize is not cut");
        let result = peer.call_tool(generate_text_call()).await;
        let _ = peer.cancel().await;
        match result {
            Ok(result) => Ok(result.content[0].as_text().expect("text").text.clone()),
            Err(rmcp::ServiceError::McpError(error)) => Err((
                error.message.to_string(),
                error
                    .data
                    .map_or(Value::Null, |d| d[OUTCOME_DATA_KEY].clone()),
            )),
            Err(err) => Err((format!("{err}"), Value::Null)),
        }
    })
}

/// One cut: where, the server's response kind, and the proxy in front of that server.
struct CutCase {
    cut: usize,
    json: bool,
    _server: Server,
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
            let server = Server::start("opt-in", json);
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
fn typescript_sdk_client_on_a_cut_sse_response_hangs_until_its_request_timeout() {
    cut_runs(
        |urls| run_typescript(urls, Some(CUT_TIMEOUT_SECONDS), Duration::from_secs(60)),
        |case, report| {
            let label = case.label();
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
                assert_eq!(
                    error, "McpError: MCP error -32001: Request timed out",
                    "{label}"
                );
                assert_eq!(report.code, Some(-32001), "{label}: RequestTimeout");
                assert!(
                    seconds >= CUT_TIMEOUT_SECONDS * 0.99,
                    "{label}: waited for the timeout: {report:?}"
                );
                assert!(report.warnings.is_empty(), "{label}: {:?}", report.warnings);
            }
        },
    );
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
    let (python, typescript, rmcp) = std::thread::scope(|scope| {
        let python = scope.spawn(|| run_python(&urls, None, cap));
        let typescript = scope.spawn(|| run_typescript(&urls, None, cap));
        let rmcp: Vec<Report> = urls.iter().map(|url| run_rmcp_stock(url, None)).collect();
        (python.join().unwrap(), typescript.join().unwrap(), rmcp)
    });
    for reports in [python, typescript, rmcp] {
        for (case, report) in cases.iter().zip(reports) {
            println!(
                "{}: {} -> {} {:?} (code {:?}) after {:?} s; logged {:?}",
                case.label(),
                report.client,
                report.outcome,
                report.error,
                report.code,
                report.seconds,
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
