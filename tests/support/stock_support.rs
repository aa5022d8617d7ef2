//! The stock MCP clients, as `tests/stock/stock_clients.rs`, `tests/proxies.rs` and
//! `tests/stock/python_client.rs` run them: the Python and TypeScript SDK clients
//! (`tests/stock_clients/client.py`, `client.mjs`, from what `scripts/stock-clients` installs;
//! the TypeScript ones also wrapped with the typescript/ package's `framingFetch`) and rmcp's own
//! client, each reporting one [`Report`] per URL, and the framing client (`FramingHttpClient`)
//! with its verdict. The servers they talk to are the examples of
//! `tests/support/example_support.rs` (`crate::support::example_support`).
// Each includer uses a part of it.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_framing::{client::OUTCOME_DATA_KEY, rmcp_http::FramingHttpClient};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tracing_subscriber::layer::SubscriberExt;

use crate::support::example_support::repo;

/// The `generate_text` arguments: 1200 lines, 104 616 bytes of text (several 16 KiB frames).
pub(crate) const SEED: &str = "stock-clients";
pub(crate) const LINES: u32 = 1200;

/// The text of `generate_text {seed, lines}`, by the rule in `examples/rmcp_server.rs`,
/// written again here so that the test does not trust the server's code.
pub(crate) fn expected_text(seed: &str, lines: u32) -> String {
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

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The clients, and what each one reports.

/// What a client reported for one URL (the JSON line of `client.py` / `client.mjs`).
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub(crate) struct Report {
    pub(crate) client: String,
    pub(crate) url: String,
    pub(crate) outcome: String,
    pub(crate) phase: String,
    #[serde(default)]
    pub(crate) tools: Vec<String>,
    #[serde(default)]
    pub(crate) bytes: Option<usize>,
    #[serde(default)]
    pub(crate) sha256: Option<String>,
    #[serde(default, rename = "match")]
    pub(crate) matched: Option<bool>,
    #[serde(default)]
    pub(crate) error: Option<String>,
    /// The JSON-RPC error code, when the SDK raised a JSON-RPC error.
    #[serde(default)]
    pub(crate) code: Option<i64>,
    #[serde(default)]
    pub(crate) seconds: Option<f64>,
    pub(crate) warnings: Vec<String>,
    /// Whether the client ran with `framingFetch` (typescript/, `client.mjs --wrap`).
    #[serde(default)]
    pub(crate) wrapped: bool,
    /// The outcome report of a wrapped call that failed (SPEC.md §11.7).
    #[serde(default)]
    pub(crate) framing: Option<Value>,
    /// `framingFetch`'s counters after the call (`verified`, `unverified`, `attempts`, ...).
    #[serde(default, rename = "framingStats")]
    pub(crate) framing_stats: Option<Value>,
}

/// `path` (relative to the repository), which `scripts/stock-clients` installs: missing is a
/// failure, not a skip.
pub(crate) fn installed(path: &str, what: &str) -> PathBuf {
    let path = repo().join(path);
    assert!(
        path.exists(),
        "{} is missing: run `bash scripts/stock-clients` (scripts/test does) to install {what}",
        path.display()
    );
    path
}

/// The Python interpreter of the virtual environment with the pinned Python SDK and the Python
/// client package (python/, installed from its wheel).
pub(crate) fn python() -> PathBuf {
    installed(
        "target/stock-clients/venv/bin/python",
        "the pinned Python SDK and the Python client package",
    )
}

/// `node`, with the pinned TypeScript SDKs (both lines) installed next to `client.mjs`, and the
/// TypeScript client package built (`typescript/dist`, for `--wrap` and `fleet.mjs`).
pub(crate) fn node() -> PathBuf {
    installed(
        "tests/stock_clients/node_modules/@modelcontextprotocol/sdk",
        "the pinned TypeScript SDK",
    );
    installed(
        "tests/stock_clients/node_modules/@modelcontextprotocol/client",
        "the pinned TypeScript SDK of the v2 line",
    );
    installed("typescript/dist/index.js", "the TypeScript client package");
    PathBuf::from("node")
}

/// Reads `pipe` to its end on a thread of its own.
pub(crate) fn read_all(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Runs a client program (`script` of `tests/stock_clients/`, with `options`) over `urls`,
/// stopped after `cap` at the latest; its reports.
pub(crate) fn run_program(
    program: &Path,
    script: &str,
    options: &[&str],
    urls: &[&str],
    timeout: Option<f64>,
    cap: Duration,
) -> Vec<Report> {
    let mut command = Command::new(program);
    command.arg(repo().join("tests/stock_clients").join(script));
    command.args(options);
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

/// The stock Python SDK client over `urls`.
pub(crate) fn run_python(urls: &[&str], timeout: Option<f64>, cap: Duration) -> Vec<Report> {
    run_program(&python(), "client.py", &[], urls, timeout, cap)
}

/// The TypeScript SDK lines: `client.mjs --sdk` and what the README calls them.
pub(crate) const TYPESCRIPT_SDKS: [(&str, &str); 2] = [
    ("v1", "@modelcontextprotocol/sdk 1.32.2"),
    ("v2", "@modelcontextprotocol/client 2.4.0"),
];

/// The stock TypeScript client of the v1 line (`@modelcontextprotocol/sdk`), unwrapped.
pub(crate) fn run_typescript(urls: &[&str], timeout: Option<f64>, cap: Duration) -> Vec<Report> {
    run_typescript_sdk("v1", false, urls, timeout, cap)
}

/// The stock TypeScript client of SDK line `sdk` over `urls`; `wrap`: with `framingFetch`.
pub(crate) fn run_typescript_sdk(
    sdk: &str,
    wrap: bool,
    urls: &[&str],
    timeout: Option<f64>,
    cap: Duration,
) -> Vec<Report> {
    let mut options = vec!["--sdk", sdk];
    if wrap {
        options.push("--wrap");
    }
    run_program(&node(), "client.mjs", &options, urls, timeout, cap)
}

/// A `tracing` layer that keeps every event at WARN or above.
#[derive(Clone, Default)]
pub(crate) struct WarnCapture(pub(crate) Arc<Mutex<Vec<String>>>);

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
pub(crate) fn with_warn_capture<T>(
    future: impl std::future::Future<Output = T>,
) -> (T, Vec<String>) {
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

pub(crate) fn generate_text_call() -> CallToolRequestParams {
    let arguments = serde_json::json!({"seed": SEED, "lines": LINES});
    CallToolRequestParams::new("generate_text")
        .with_arguments(arguments.as_object().expect("an object").clone())
}

/// What a wrapped report's counters say (`framingFetch`'s `stats`).
pub(crate) fn framing_stat(report: &Report, name: &str) -> u64 {
    report
        .framing_stats
        .as_ref()
        .and_then(|stats| stats[name].as_u64())
        .unwrap_or_else(|| panic!("{}: no framingStats.{name} in {report:?}", report.url))
}

/// What the driver printed: one JSON line per call, then the wrapper's counters; and the log
/// records it printed to stderr.
pub(crate) struct DriverRun {
    pub(crate) calls: Vec<Value>,
    pub(crate) stats: Value,
    pub(crate) logs: Vec<String>,
}

/// Runs `tests/python_client/driver.py` (the Python SDK with the package's wrapper) with `args`.
pub(crate) fn python_driver(args: &[&str]) -> DriverRun {
    let out = Command::new(python())
        .arg(repo().join("tests/python_client/driver.py"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run the Python driver");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "driver {args:?}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let mut lines: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let stats = lines.pop().expect("a stats line")["stats"].clone();
    let logs: Vec<String> = stderr.lines().map(str::to_owned).collect();
    assert!(
        logs.iter().all(|line| line.starts_with("LOG ")),
        "the driver wrote to stderr:\n{stderr}"
    );
    DriverRun {
        calls: lines,
        stats,
        logs,
    }
}

/// Runs `tests/stock_clients/fleet.mjs` (the TypeScript SDK of line `sdk` with `framingFetch`,
/// keyed retries) with `args`; what it printed.
pub(crate) fn typescript_fleet(sdk: &str, args: &[&str]) -> Value {
    let output = Command::new(node())
        .arg(repo().join("tests/stock_clients/fleet.mjs"))
        .args(["--sdk", sdk])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run fleet.mjs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "fleet.mjs {sdk} {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The framing clients of the Python and TypeScript packages (the Python SDK with the package's
/// wrapper, the TypeScript SDK of either line with `framingFetch`), keyed retries on, as their
/// drivers run them: [`python_driver`]'s `fleet` mode, [`typescript_fleet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FleetDriver {
    Python,
    /// The TypeScript SDK line, `v1` or `v2`.
    TypeScript(&'static str),
}

impl FleetDriver {
    /// Each of them.
    pub(crate) const ALL: [Self; 3] =
        [Self::Python, Self::TypeScript("v1"), Self::TypeScript("v2")];

    /// What the reports call it.
    pub(crate) fn name(self) -> String {
        match self {
            Self::Python => "python wrapper".to_owned(),
            Self::TypeScript(sdk) => format!("typescript {sdk} framingFetch"),
        }
    }

    /// Runs the driver's fleet mode over `endpoints` (comma-separated) with `args` (the options
    /// both drivers take): one object per call, each with `ok` (a bool), `text` or `error`,
    /// `seconds`, `ended` (the wall-clock time it ended, seconds since the epoch) and
    /// `attempts` (the classification of each of its attempts).
    pub(crate) fn fleet(self, endpoints: &str, args: &[&str]) -> Vec<Value> {
        match self {
            Self::Python => {
                let mut all = vec!["fleet", endpoints];
                all.extend_from_slice(args);
                let mut calls = python_driver(&all).calls;
                for call in &mut calls {
                    call["ok"] = Value::Bool(call["outcome"] == "ok");
                }
                calls
            }
            Self::TypeScript(sdk) => {
                let mut all = vec!["--endpoints", endpoints];
                all.extend_from_slice(args);
                match typescript_fleet(sdk, &all)["calls"].take() {
                    Value::Array(calls) => calls,
                    other => panic!("fleet.mjs {sdk}: no calls: {other}"),
                }
            }
        }
    }
}

/// The stock rmcp client (rmcp's own reqwest transport, `from_uri`), as a user writes it.
pub(crate) fn run_rmcp_stock(url: &str, timeout: Option<f64>) -> Report {
    let (mut report, warnings) = with_warn_capture(async {
        let mut report = Report {
            client: "rmcp".to_owned(),
            url: url.to_owned(),
            outcome: "error".to_owned(),
            phase: "initialize".to_owned(),
            ..Report::default()
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
pub(crate) fn assert_exact(reports: &[Report], labels: &[String]) {
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

// ---------------------------------------------------------------------------------------------
// The framing client.

/// `generate_text` through `client` (a framing client, opted in) at `url`: the result's text,
/// or the JSON-RPC error's message and outcome data (`data[OUTCOME_DATA_KEY]`); and what was
/// logged at WARN or above. A failed `initialize` is an error whose message starts with
/// `initialize:` (a proxy may refuse the session before the call).
pub(crate) fn framing_call(
    client: FramingHttpClient,
    url: &str,
) -> (Result<String, (String, Value)>, Vec<String>) {
    framing_call_tool(client, url, generate_text_call())
}

/// As [`framing_call`], for the tool call `call`.
pub(crate) fn framing_call_tool(
    client: FramingHttpClient,
    url: &str,
    call: CallToolRequestParams,
) -> (Result<String, (String, Value)>, Vec<String>) {
    framing_call_tool_with(client, url, call, ())
}

/// As [`framing_call_tool`], the server's notifications handed to `handler` (a progress
/// notification, verified, tells the test that the response has begun).
pub(crate) fn framing_call_tool_with(
    client: FramingHttpClient,
    url: &str,
    call: CallToolRequestParams,
    handler: impl rmcp::ClientHandler,
) -> (Result<String, (String, Value)>, Vec<String>) {
    with_warn_capture(async {
        let transport = StreamableHttpClientTransport::with_client(
            client,
            StreamableHttpClientTransportConfig::with_uri(url),
        );
        let peer = match handler.serve(transport).await {
            Ok(peer) => peer,
            Err(err) => return Err((format!("initialize: {err}"), Value::Null)),
        };
        let result = peer.call_tool(call).await;
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

/// How soon a wrapped client's cut call must fail (issue 19: "within 1 s"), given how long the
/// same run's clean calls took: 1 s, or on a machine so loaded that a clean call took longer
/// than a third of that, three times the slowest of them. A cut call is failed on the cut, so it
/// takes no longer than a clean call does; an unwrapped SDK waits for its request timeout or for
/// the stream to end instead.
pub(crate) fn cut_fails_within(clean_seconds: impl IntoIterator<Item = f64>) -> f64 {
    let slowest = clean_seconds.into_iter().fold(0.0, f64::max);
    (3.0 * slowest).max(1.0)
}
