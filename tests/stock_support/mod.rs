//! The stock MCP clients and the example server, as `tests/stock_clients.rs` and
//! `tests/proxies.rs` run them: the example server (`examples/rmcp_server.rs`) as a subprocess,
//! the Python and TypeScript SDK clients (`tests/stock_clients/client.py`, `client.mjs`, from what
//! `scripts/stock-clients` installs) and rmcp's own client, each reporting one [`Report`], and the
//! framing client (`FramingHttpClient`) with its verdict.
// Each includer uses a part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use mcp_framing::rmcp_http::{FramingHttpClient, OUTCOME_DATA_KEY};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tracing_subscriber::layer::SubscriberExt;

/// The `generate_text` arguments: 1200 lines, 104 616 bytes of text (several 16 KiB frames).
pub(crate) const SEED: &str = "stock-clients";
pub(crate) const LINES: u32 = 1200;

/// A multi-threaded runtime for what the tests serve or proxy in process, beside the clients
/// (which run on runtimes of their own).
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

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

pub(crate) fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

// ---------------------------------------------------------------------------------------------
// The example server, as a subprocess.

/// `cargo build --example rmcp_server` with the features and profile this test was built with
/// (a no-op after `cargo test`, which builds the examples), and the binary's path.
pub(crate) fn server_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let features: Vec<&str> = [
            ("codec", cfg!(feature = "codec")),
            ("sse", cfg!(feature = "sse")),
            ("http", cfg!(feature = "http")),
            ("rmcp", cfg!(feature = "rmcp")),
            ("demo", cfg!(feature = "demo")),
            ("cli", cfg!(feature = "cli")),
        ]
        .into_iter()
        .filter_map(|(name, on)| on.then_some(name))
        .collect();
        let mut cargo = Command::new(env!("CARGO"));
        cargo
            .current_dir(repo())
            .args(["build", "--quiet", "--example", "rmcp_server"])
            .args(["--message-format", "json", "--no-default-features"])
            .args(["--features", &features.join(",")]);
        if !cfg!(debug_assertions) {
            cargo.arg("--release");
        }
        let output = cargo.stderr(Stdio::inherit()).output().expect("run cargo");
        assert!(output.status.success(), "cargo build --example rmcp_server");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|m| m["target"]["name"] == "rmcp_server")
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .expect("cargo reported the rmcp_server executable")
    })
}

/// The example server on a free loopback port, killed on drop (it stops by itself after an hour,
/// longer than any test takes, the proxies' full matrix included).
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) url: String,
}

impl Server {
    pub(crate) fn start(mode: &str, json: bool) -> Self {
        let mut command = Command::new(server_binary());
        command.args(["--addr", "127.0.0.1:0", "--mode", mode, "--seconds", "3600"]);
        if json {
            command.arg("--json");
        }
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the example server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the server's first line");
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in the server's first line {line:?}"))
            .to_owned();
        Self { child, url }
    }

    /// Panics if the server exited: a test whose every request failed through a dead server
    /// must not pass for a proxy's doing.
    pub(crate) fn assert_running(&mut self) {
        let status = self.child.try_wait().expect("wait for the example server");
        assert!(status.is_none(), "the example server exited: {status:?}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One server for every mode and response kind: (mode, json, server).
pub(crate) fn servers(modes: &[&str]) -> Vec<(String, bool, Server)> {
    let mut servers = Vec::new();
    for mode in modes {
        for json in [false, true] {
            servers.push(((*mode).to_owned(), json, Server::start(mode, json)));
        }
    }
    servers
}

// ---------------------------------------------------------------------------------------------
// The clients, and what each one reports.

/// What a client reported for one URL (the JSON line of `client.py` / `client.mjs`).
#[derive(Debug, Clone, serde::Deserialize)]
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

/// The Python interpreter of the virtual environment with the pinned Python SDK.
pub(crate) fn python() -> PathBuf {
    installed(
        "target/stock-clients/venv/bin/python",
        "the pinned Python SDK",
    )
}

/// `node`, with the pinned TypeScript SDK installed next to `client.mjs`.
pub(crate) fn node() -> PathBuf {
    installed(
        "tests/stock_clients/node_modules/@modelcontextprotocol/sdk",
        "the pinned TypeScript SDK",
    );
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

/// Runs a client program over `urls`, stopped after `cap` at the latest; its reports.
pub(crate) fn run_program(
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

pub(crate) fn run_python(urls: &[&str], timeout: Option<f64>, cap: Duration) -> Vec<Report> {
    run_program(&python(), "client.py", urls, timeout, cap)
}

pub(crate) fn run_typescript(urls: &[&str], timeout: Option<f64>, cap: Duration) -> Vec<Report> {
    run_program(&node(), "client.mjs", urls, timeout, cap)
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

/// The stock rmcp client (rmcp's own reqwest transport, `from_uri`), as a user writes it.
pub(crate) fn run_rmcp_stock(url: &str, timeout: Option<f64>) -> Report {
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

// Cut responses.

/// `generate_text` through `client` (a framing client, opted in) at `url`: the result's text,
/// or the JSON-RPC error's message and outcome data (`data[OUTCOME_DATA_KEY]`); and what was
/// logged at WARN or above.
pub(crate) fn framing_call(
    client: FramingHttpClient,
    url: &str,
) -> (Result<String, (String, Value)>, Vec<String>) {
    with_warn_capture(async {
        let transport = StreamableHttpClientTransport::with_client(
            client,
            StreamableHttpClientTransportConfig::with_uri(url),
        );
        let peer = match ().serve(transport).await {
            Ok(peer) => peer,
            Err(err) => return Err((format!("initialize: {err}"), Value::Null)),
        };
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
