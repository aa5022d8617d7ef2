//! The proxies people deploy, from the Debian archive (issue 22): nginx 1.22, HAProxy 2.6,
//! Caddy 2.6, Apache 2.4 with mod_proxy and Apache Traffic Server 9.2, each started by the test
//! on free loopback ports with a configuration kept in `tests/proxies/` (the proxy's defaults,
//! and what its documentation recommends for SSE), in front of:
//!
//! - `examples/rmcp_server` behind `FramingLayer` (`--mode opt-in` and `--mode compat`, SSE and
//!   JSON responses): every client (the framing client in each mapping, the stock Python,
//!   TypeScript and rmcp clients) gets every result byte for byte, with no SDK warning;
//! - a backend that dies mid-response (`tests/proxies/backend.py`: a close-delimited body closed
//!   early, a chunked body without its last chunk, a connection reset, a process killed in the
//!   middle of a write) at several offsets: what the proxy sends downstream and what each client
//!   reports, the framing client's verdict asserted (abandoned, except a cut after the final
//!   response's MESSAGE_END that the proxy ends cleanly: delivered, clean in Regime B, SPEC.md §7
//!   row 4);
//! - the same backend slower than the proxy's read timeout;
//! - a server whose tool streams progress notifications: when each reaches the client, through
//!   each proxy and directly.
//!
//! `bash scripts/proxies` installs the proxies (`bash scripts/test` runs it); a missing proxy
//! fails the tests, it never skips them. The tests print their tables (with `--nocapture`) and
//! write them to `target/proxies/`. By default they run the short matrix (`.ci/run`: every
//! proxy, fewer cuts and configurations); with `MCP_FRAMING_PROXY_MATRIX=full` every offset and
//! configuration: `bash scripts/proxy-matrix`. The stock clients are
//! `tests/support/stock_support.rs`'s, the example server `tests/support/example_support.rs`'s.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use mcp_framing::rmcp_http::{FramingHttpClient, FramingLayer};
use mcp_framing::{RequestKey, StreamDecoder};
use mcp_framing::{
    http::{Delivery, VerifiedResponse},
    mapping::Mapping,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, NumberOrString, ProgressNotificationParam, ProgressToken,
    RequestMetaObject,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleClient, RoleServer, ServiceExt, tool, tool_router};
use serde_json::Value;
use tower_layer::Layer;

#[path = "support/mod.rs"]
mod support;
use crate::support::example_support;
use crate::support::http_support::opt_in_headers_asking;
use crate::support::stock_support;
use example_support::{Example, repo, rmcp_server, runtime};
use stock_support::{
    LINES, Report, SEED, assert_exact, expected_text, framing_call, run_python, run_rmcp_stock,
    run_typescript,
};

#[path = "proxies/harness.rs"]
mod harness;
use harness::{
    Backend, Downstream, End, Kind, Proxy, READ_TIMEOUT_SECONDS, Variant, observe, observe_with,
};

/// The request timeout given to the stock clients on a cut (the TypeScript SDK waits for it).
const CUT_TIMEOUT_SECONDS: f64 = 2.0;

/// The request timeout of the stock TypeScript client on the clean path: a loopback call takes
/// well under a second, and Caddy's empty `200` ([`caddy_defect_response`]) then costs this, not
/// the SDK's default of 60 s.
const CLEAN_TIMEOUT_SECONDS: f64 = 10.0;

/// How long the slow backend waits: longer than every proxy's read timeout.
const STALL_SECONDS: f64 = (2 * READ_TIMEOUT_SECONDS + 1) as f64;

/// The streaming tool: progress notifications, `TICK_MS` apart, then the result.
const TICKS: u32 = 4;
const TICK_MS: u64 = 300;

fn full() -> bool {
    std::env::var("MCP_FRAMING_PROXY_MATRIX").is_ok_and(|v| v == "full")
}

/// One test at a time: each starts ten proxy processes, and the streaming one measures time.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn port_of(url: &str) -> u16 {
    url.trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {url}"))
}

/// The proxy instances of a run: every proxy, in both configurations unless `default_only`.
fn instances(default_only: bool) -> Vec<(Kind, Variant)> {
    let variants: &[Variant] = if default_only {
        &[Variant::Default]
    } else {
        &Variant::ALL
    };
    Kind::ALL
        .iter()
        .flat_map(|kind| variants.iter().map(move |variant| (*kind, *variant)))
        .collect()
}

/// How many proxy instances run at once: two, as many as there are cores (their processes and
/// clients mostly wait, but the stock clients' start-up is CPU-bound, and their requests time
/// out after [`CUT_TIMEOUT_SECONDS`]).
const AT_ONCE: usize = 2;

/// Runs `each` for every instance, [`AT_ONCE`] at a time. Its rows, in the order of `instances`.
fn per_instance(
    instances: &[(Kind, Variant)],
    each: impl Fn(Kind, Variant) -> Vec<Vec<String>> + Sync,
) -> Vec<Vec<String>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, Vec<Vec<String>>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..AT_ONCE)
            .map(|_| {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let Some((kind, variant)) = instances.get(i) else {
                            return;
                        };
                        let rows = each(*kind, *variant);
                        done.lock().unwrap().push((i, rows));
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().expect("an instance's thread");
        }
    });
    let mut done = done.into_inner().unwrap();
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().flat_map(|(_, rows)| rows).collect()
}

/// The stock TypeScript client over `urls`, [`URLS_A_PROCESS`] URLs a process, the processes at
/// once: it waits for its request timeout on a cut SSE response, and those waits overlap instead
/// of adding up. The reports, in the order of `urls`.
fn run_typescript_at_once(urls: &[&str], timeout: Option<f64>, cap: Duration) -> Vec<Report> {
    std::thread::scope(|scope| {
        let runs: Vec<_> = urls
            .chunks(URLS_A_PROCESS)
            .map(|chunk| scope.spawn(move || run_typescript(chunk, timeout, cap)))
            .collect();
        runs.into_iter()
            .flat_map(|run| run.join().expect("a TypeScript client's thread"))
            .collect()
    })
}

/// How many URLs one stock TypeScript client process runs in [`run_typescript_at_once`].
const URLS_A_PROCESS: usize = 4;

/// A Markdown table, printed and written to `target/proxies/{name}.md`.
struct Table {
    name: &'static str,
    text: String,
}

impl Table {
    fn new(name: &'static str, header: &[&str]) -> Self {
        let mut text = format!("| {} |\n|", header.join(" | "));
        text.push_str(&" --- |".repeat(header.len()));
        text.push('\n');
        Self { name, text }
    }

    fn row(&mut self, cells: &[String]) {
        // (rows are built by the instances' threads, then added in order)
        let cells: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(self.text, "| {} |", cells.join(" | "));
    }

    fn write(&self) {
        let dir = repo().join("target/proxies");
        std::fs::create_dir_all(&dir).expect("target/proxies");
        std::fs::write(dir.join(format!("{}.md", self.name)), &self.text).expect("the table");
        println!("\n{}\n{}", self.name, self.text);
    }
}

// ---------------------------------------------------------------------------------------------
// The framing client and what it reports.

/// The mappings a framing client asks for.
const MAPPINGS: [Mapping; 3] = [Mapping::Sse, Mapping::Binary, Mapping::Compat];

fn mapping_name(mapping: Mapping) -> &'static str {
    match mapping {
        Mapping::Binary => "binary",
        Mapping::Compat => "compat",
        _ => "sse",
    }
}

/// `FramingHttpClient` asking for `mapping`, over reqwest (which asks for gzip and decodes it:
/// the proxies' compression is on its path too).
fn framing_client(mapping: Mapping) -> FramingHttpClient {
    FramingHttpClient::new(reqwest::Client::new()).mapping(mapping)
}

/// The framing client's verdict on a `generate_text` call.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Verdict {
    /// The exact result, verified, with its STREAM_END sentinel.
    Delivered,
    /// The exact result, verified by its MESSAGE_END, with STREAM_END cut and then a clean end of
    /// input (SPEC.md §7 row 4): clean in Regime B, the missing sentinel logged.
    DeliveredWithoutSentinel,
    /// `abandoned` (`Truncated`, or `Body`: the transport failed), with where it was cut.
    Abandoned(String),
    /// The proxy answered with an HTTP error status instead of a response: "502 to tools/call".
    HttpError(String),
    /// The proxy closed the connection without any response (no status line).
    NoResponse,
    /// Anything else: a wrong result, another classification, a transport error.
    Other(String),
}

impl Verdict {
    /// The verdict on `result`, with what the framing client logged at WARN or above
    /// (`framing_call`).
    fn of(result: &Result<String, (String, Value)>, warnings: &[String]) -> Self {
        match result {
            Ok(text) if *text == expected_text(SEED, LINES) => {
                if sentinel_missing(warnings) {
                    Self::DeliveredWithoutSentinel
                } else {
                    Self::Delivered
                }
            }
            Ok(text) => Self::Other(format!("a wrong result of {} bytes", text.len())),
            // `Truncated`: the body ended early; `Body`: the transport failed under it.
            Err((_, outcome)) if outcome["classification"] == "abandoned" => {
                let detail = outcome["detail"].as_str().unwrap_or_default();
                let at = match outcome["kind"].as_str() {
                    Some("Truncated") => detail
                        .split_once("truncated ")
                        .map_or(detail, |(_, at)| at)
                        .split(['(', ':'])
                        .next()
                        .unwrap_or_default()
                        .trim()
                        .to_owned(),
                    _ => format!(
                        "transport error after {} frames",
                        outcome["framesReceived"].as_u64().unwrap_or_default()
                    ),
                };
                Self::Abandoned(at)
            }
            Err((message, Value::Null)) => {
                let status = ["502", "503", "504"]
                    .into_iter()
                    .find(|s| message.contains(s));
                match status {
                    // `framing_call` names a failed initialize: the proxy refused the session
                    // before the call.
                    Some(status) if message.starts_with("initialize:") => {
                        Self::HttpError(format!("{status} to initialize"))
                    }
                    Some(status) => Self::HttpError(format!("{status} to tools/call")),
                    None if message.contains("error sending request") => Self::NoResponse,
                    None => Self::Other(message.clone()),
                }
            }
            Err((message, outcome)) => Self::Other(format!("{message} {outcome}")),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Delivered => "delivered, verified".to_owned(),
            Self::DeliveredWithoutSentinel => {
                "delivered without its sentinel (Regime B)".to_owned()
            }
            Self::Abandoned(at) => format!("abandoned ({at})"),
            Self::HttpError(status) => format!("HTTP {status}"),
            Self::NoResponse => "no response (connection closed)".to_owned(),
            Self::Other(other) => format!("**{}**", short(other, 80)),
        }
    }
}

/// Whether the framing client logged a final response delivered without its sentinel: the
/// outcome event (target `mcp_framing`, `WARN`) says `clean`, Regime `B`, `sentinel_seen` false.
fn sentinel_missing(warnings: &[String]) -> bool {
    warnings.iter().any(|warning| {
        warning.starts_with("WARN mcp_framing:")
            && warning.contains(" outcome=\"clean\"")
            && warning.contains(" regime=B")
            && warning.contains(" sentinel_seen=false")
    })
}

fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        text.chars().take(max).collect::<String>() + "…"
    }
}

/// What a stock client reported, in a table cell.
fn stock_cell(report: &Report) -> String {
    if report.outcome == "ok" {
        return if report.matched == Some(true) {
            "ok, exact".to_owned()
        } else {
            "**ok, wrong result**".to_owned()
        };
    }
    let mut cell = short(report.error.as_deref().unwrap_or("error"), 70);
    if let Some(code) = report.code {
        let _ = write!(cell, " ({code})");
    }
    if let Some(seconds) = report.seconds {
        let _ = write!(cell, ", {seconds:.1} s");
    }
    if !report.warnings.is_empty() {
        let _ = write!(cell, "; logs {}", report.warnings.len());
    }
    cell
}

// ---------------------------------------------------------------------------------------------
// The clean path.

/// Caddy 2.6.2's defect, measured here: now and then (about one TypeScript SDK session in ten to
/// twenty, a Python SDK session now and then, rmcp's client rarely; never directly against the
/// server) it closes the backend connection a response is being read from, logging "aborting
/// with incomplete response" and [`CADDY_DEFECT_LOG`] for it (its `read_timeout` sets a deadline
/// on a connection already closed). What the client then gets depends on how far the response
/// had come: a `200` with an empty SSE body (the TypeScript SDK waits for the response until its
/// request timeout; the Python SDK fails at once with "SSE stream ended without a response",
/// rmcp's client with "Transport closed"), a JSON body cut short (the stock clients' JSON parse
/// errors: the failure this crate exists for), or, before the head, a `502` (the Python SDK's
/// "Server returned an error response"). Whether `report` is one of those (and nothing else):
/// that client's error for such a response, and Caddy logged the defect.
fn caddy_defect_response(proxy: &Proxy, report: &Report) -> bool {
    let error = report.error.as_deref().unwrap_or_default();
    let defect_form = match report.client.as_str() {
        "typescript" => {
            error.ends_with("Request timed out")
                || error.starts_with("SyntaxError: Unterminated string in JSON")
        }
        "python" => {
            error == "MCPError: SSE stream ended without a response"
                || error.starts_with("MCPError: Failed to parse JSON response")
                || (error == "MCPError: Server returned an error response"
                    && report.code == Some(-32603))
        }
        // What rmcp's client says for an SSE body that ends before its response, at once
        // (tests/stock/stock_clients.rs, the cut at 0 bytes), and for a JSON body cut short.
        "rmcp" => error == "Transport closed" || error.contains("could not parse JSON response"),
        _ => false,
    };
    report.outcome == "error" && defect_form && !caddy_defect_lines(proxy).is_empty()
}

/// What Caddy 2.6.2 logs when its reverse proxy aborts a response it was relaying.
const CADDY_DEFECT_LOG: &str = "use of closed network connection";

/// The lines of `proxy`'s logs that show the defect of [`caddy_defect_response`], if `proxy` is
/// Caddy (none otherwise). The body it then cuts is not always empty: a framing client has also
/// seen it cut inside a message, which it reports as abandoned, as it must.
fn caddy_defect_lines(proxy: &Proxy) -> Vec<String> {
    if proxy.kind != Kind::Caddy {
        return Vec::new();
    }
    proxy
        .logs()
        .lines()
        .filter(|line| line.contains(CADDY_DEFECT_LOG))
        .map(str::to_owned)
        .collect()
}

/// [`assert_exact`] over the reports that are not [`caddy_defect_response`]; those are marked in
/// their table cells.
fn assert_exact_but_caddy(proxy: &Proxy, reports: &[Report], labels: &[String]) -> Vec<String> {
    let (mut exact, mut exact_labels, mut cells) = (Vec::new(), Vec::new(), Vec::new());
    for (report, label) in reports.iter().zip(labels) {
        if caddy_defect_response(proxy, report) {
            cells.push(format!("**Caddy: its defect**, {}", stock_cell(report)));
        } else {
            cells.push(stock_cell(report));
            exact.push(report.clone());
            exact_labels.push(label.clone());
        }
    }
    assert_exact(&exact, &exact_labels);
    cells
}

#[test]
fn every_client_gets_every_result_byte_for_byte_through_every_proxy() {
    let _serial = serial();
    let mut servers: Vec<(&str, bool, Example)> = [("opt-in", false), ("opt-in", true)]
        .into_iter()
        .chain([("compat", false), ("compat", true)])
        .map(|(mode, json)| (mode, json, rmcp_server(mode, json)))
        .collect();
    let upstreams: Vec<u16> = servers.iter().map(|(_, _, s)| port_of(&s.url)).collect();
    let mut table = Table::new(
        "clean",
        &[
            "proxy",
            "server",
            "framing sse",
            "framing binary",
            "framing compat",
            "Python",
            "TypeScript",
            "rmcp",
        ],
    );
    let rows = per_instance(&instances(false), |kind, variant| {
        let mut rows = Vec::new();
        let proxy = Proxy::start(kind, variant, &upstreams);
        let urls: Vec<String> = (0..servers.len()).map(|i| proxy.url(i, "/mcp")).collect();
        let labels: Vec<String> = servers
            .iter()
            .map(|(mode, json, _)| {
                let kind = if *json { "json" } else { "sse" };
                format!("{}, mode {mode}, {kind} responses", proxy.label())
            })
            .collect();
        let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
        let cap = Duration::from_secs(120);
        // The clients one after the other, but for the Python and TypeScript processes beside
        // them: more sessions at once through Caddy 2.6 make its defect (an empty `200`, see
        // [`caddy_defect_response`]) reach the other clients too.
        let (python, typescript, rmcp, framing) = std::thread::scope(|scope| {
            let python = scope.spawn(|| run_python(&refs, None, cap));
            let typescript =
                scope.spawn(|| run_typescript(&refs, Some(CLEAN_TIMEOUT_SECONDS), cap));
            let rmcp: Vec<Report> = urls.iter().map(|url| run_rmcp_stock(url, None)).collect();
            let framing: Vec<Vec<(Verdict, Vec<String>)>> = urls
                .iter()
                .map(|url| {
                    MAPPINGS
                        .iter()
                        .map(|mapping| {
                            let (result, warnings) = framing_call(framing_client(*mapping), url);
                            (Verdict::of(&result, &warnings), warnings)
                        })
                        .collect()
                })
                .collect();
            (
                python.join().unwrap(),
                typescript.join().unwrap(),
                rmcp,
                framing,
            )
        });
        let python_cells = assert_exact_but_caddy(&proxy, &python, &labels);
        let typescript_cells = assert_exact_but_caddy(&proxy, &typescript, &labels);
        let rmcp_cells = assert_exact_but_caddy(&proxy, &rmcp, &labels);
        for (i, label) in labels.iter().enumerate() {
            for ((verdict, warnings), mapping) in framing[i].iter().zip(MAPPINGS) {
                let label = format!("{label}, framing client ({})", mapping_name(mapping));
                if matches!(verdict, Verdict::Abandoned(_)) {
                    let defect = caddy_defect_lines(&proxy);
                    if !defect.is_empty() {
                        // Caddy cut the response (its defect, logged): seen as a cut, and shown in
                        // the table cell (`describe`) and here; anything else is still a failure.
                        eprintln!("{label}: {} (Caddy logged {defect:?})", verdict.describe());
                        continue;
                    }
                }
                assert_eq!(*verdict, Verdict::Delivered, "{label}");
                assert!(warnings.is_empty(), "{label}: logged {warnings:?}");
            }
            let (mode, json, _) = &servers[i];
            rows.push(vec![
                proxy.label(),
                format!("{mode}, {}", if *json { "json" } else { "sse" }),
                framing[i][0].0.describe(),
                framing[i][1].0.describe(),
                framing[i][2].0.describe(),
                python_cells[i].clone(),
                typescript_cells[i].clone(),
                rmcp_cells[i].clone(),
            ]);
        }
        rows
    });
    for row in &rows {
        table.row(row);
    }
    for (_, _, server) in &mut servers {
        server.assert_running();
    }
    table.write();
}

// ---------------------------------------------------------------------------------------------
// A backend that dies mid-response.

/// How the backend ends the body (`backend.py`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    Close,
    Chunked,
    Reset,
    Kill,
}

impl Way {
    const ALL: [Self; 4] = [Self::Close, Self::Chunked, Self::Reset, Self::Kill];

    fn path(self) -> &'static str {
        match self {
            Self::Close => "close",
            Self::Chunked => "chunked",
            Self::Reset => "reset",
            Self::Kill => "kill",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::Close => "close-delimited body closed early",
            Self::Chunked => "chunked body without its last chunk",
            Self::Reset => "connection reset",
            Self::Kill => "process killed mid-chunk",
        }
    }
}

/// Where the body is cut, for a body whose final response becomes verifiable `tail` bytes
/// before its end (`None`: an unframed body, for the stock clients).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Position {
    /// Before the first byte of the body (the head sent).
    Start,
    /// 10 bytes in: inside the first frame, or the first SSE line.
    InHead,
    /// At byte 60 000, inside the ~100 KB result.
    InResult,
    /// One byte before the final response can be verified (its MESSAGE_END, or the end of the
    /// event or record carrying it).
    BeforeFinalEnd,
    /// Right after the final response can be verified: only STREAM_END is missing.
    AfterFinalEnd,
    /// All but the last byte of the body.
    LastByte,
}

impl Position {
    fn all() -> &'static [Self] {
        if full() {
            &[
                Self::Start,
                Self::InHead,
                Self::InResult,
                Self::BeforeFinalEnd,
                Self::AfterFinalEnd,
                Self::LastByte,
            ]
        } else {
            &[Self::Start, Self::InResult, Self::AfterFinalEnd]
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::Start => "before the body",
            Self::InHead => "at byte 10",
            Self::InResult => "at byte 60 000 (in the result)",
            Self::BeforeFinalEnd => "1 byte before the final response verifies",
            Self::AfterFinalEnd => "after the final MESSAGE_END (only STREAM_END missing)",
            Self::LastByte => "all but the last byte",
        }
    }

    /// The backend's offset (negative: from the end of the body), if it applies to the body.
    fn offset(self, tail: Option<usize>) -> Option<i64> {
        let from_end = |n: usize| -i64::try_from(n).unwrap();
        match self {
            Self::Start => Some(0),
            Self::InHead => Some(10),
            Self::InResult => Some(60_000),
            Self::BeforeFinalEnd => tail.map(|t| from_end(t + 1)),
            // With no byte between them (tail 0) there is no such cut.
            Self::AfterFinalEnd => tail.filter(|t| *t > 0).map(from_end),
            Self::LastByte => Some(-1),
        }
    }

    /// Whether the final response is verifiable in the bytes before this cut.
    fn after_final(self, tail: usize) -> bool {
        match self {
            Self::AfterFinalEnd => tail > 0,
            Self::LastByte => tail > 1,
            _ => false,
        }
    }
}

/// The `generate_text` call of every client, as JSON-RPC.
fn generate_text_request() -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "generate_text", "arguments": {"seed": SEED, "lines": LINES}}})
    .to_string()
}

/// For each mapping, how many bytes before the end of the `generate_text` response body its
/// final response becomes verifiable: the body fetched directly from `server`, its prefixes
/// decoded by `VerifiedResponse`, the shortest one that yields the message found by bisection.
fn tails(server: &Example) -> Vec<(Mapping, usize)> {
    runtime().block_on(async {
        let http = reqwest::Client::new();
        let mut tails = Vec::new();
        for mapping in MAPPINGS {
            let key = RequestKey::random();
            let body = http
                .post(&server.url)
                .headers(opt_in_headers_asking(key, mapping))
                .header("content-type", "application/json")
                .body(generate_text_request())
                .send()
                .await
                .expect("the direct call")
                .bytes()
                .await
                .expect("the direct body");
            let verified = |n: usize| {
                let prefix = body.slice(..n);
                async move {
                    let chunks = futures::stream::iter([Ok::<_, std::io::Error>(prefix)]);
                    let mut response = VerifiedResponse::new(chunks, mapping, StreamDecoder::new());
                    let mut messages = 0;
                    let mut complete = false;
                    while let Some(Ok(delivery)) = response.next().await {
                        match delivery {
                            Delivery::Message(_) => messages += 1,
                            Delivery::Complete(_) => complete = true,
                            _ => {}
                        }
                    }
                    (messages, complete)
                }
            };
            assert_eq!(
                verified(body.len()).await,
                (1, true),
                "{mapping:?}: the direct body is one verified message and its sentinel"
            );
            let (mut low, mut high) = (0, body.len());
            while low < high {
                let mid = usize::midpoint(low, high);
                if verified(mid).await.0 == 1 {
                    high = mid;
                } else {
                    low = mid + 1;
                }
            }
            tails.push((mapping, body.len() - low));
        }
        tails
    })
}

/// The framing client on one case: its verdict, how long it took, and (for a cut after the
/// final response) how the proxy ended that response.
struct FramingCell {
    verdict: Verdict,
    seconds: f64,
    end: Option<Downstream>,
}

/// Whether the proxy ended a response cut after its final response cleanly: `200`, and a normal
/// HTTP ending (SPEC.md §7 row 4 then delivers the final response).
fn deliverable(end: Option<&Downstream>) -> bool {
    end.is_some_and(|d| d.status == 200 && d.end == End::Clean)
}

/// The request headers of a framing client asking for `mapping`, as `(name, value)`, with
/// `Accept-Encoding: gzip` as reqwest sends it.
fn framing_headers(mapping: Mapping) -> Vec<(String, String)> {
    let headers = opt_in_headers_asking(RequestKey::random(), mapping);
    let mut lines: Vec<(String, String)> = headers
        .iter()
        .map(|(name, value)| {
            (
                name.to_string(),
                value.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    lines.push(("Accept-Encoding".to_owned(), "gzip".to_owned()));
    lines
}

/// One cell of the stock side of a case: its URL and what each stock client said.
struct StockCase {
    way: Way,
    position: Position,
    url: String,
    path: String,
}

#[test]
fn a_backend_dying_mid_response_behind_every_proxy_is_abandoned_never_clean_never_a_parse_error() {
    let _serial = serial();
    let mut server = rmcp_server("opt-in", false);
    let tails = tails(&server);
    let backend = Backend::start(&server.url, STALL_SECONDS);
    let mut table = Table::new(
        "dying",
        &[
            "proxy",
            "backend",
            "cut",
            "downstream (stock request)",
            "Python",
            "TypeScript",
            "rmcp",
            "framing sse",
            "framing binary",
            "framing compat",
        ],
    );
    let mut dying = instances(false);
    if !full() {
        // Traffic Server's SSE configuration (its compress plugin) holds the client 30 s (its
        // client-side no-activity timeout) and then closes without a response in several cuts:
        // two minutes of waiting, for the full matrix only. Its default configuration stays.
        dying.retain(|instance| *instance != (Kind::TrafficServer, Variant::Sse));
    }
    let rows = per_instance(&dying, |kind, variant| {
        let mut rows = Vec::new();
        let proxy = Proxy::start(kind, variant, &[backend.port]);
        let mut stock = Vec::new();
        for way in Way::ALL {
            for position in Position::all() {
                if let Some(offset) = position.offset(None) {
                    let path = format!("/{}/{offset}/mcp", way.path());
                    stock.push(StockCase {
                        way,
                        position: *position,
                        url: proxy.url(0, &path),
                        path,
                    });
                }
            }
        }
        let urls: Vec<&str> = stock.iter().map(|c| c.url.as_str()).collect();
        let cap = Duration::from_secs(300);
        let timeout = Some(CUT_TIMEOUT_SECONDS);
        let (python, typescript, rmcp, downstream, framing) = std::thread::scope(|scope| {
            let python = scope.spawn(|| run_python(&urls, timeout, cap));
            let typescript = scope.spawn(|| run_typescript_at_once(&urls, timeout, cap));
            let rmcp = scope.spawn(|| {
                urls.iter()
                    .map(|url| run_rmcp_stock(url, timeout))
                    .collect::<Vec<Report>>()
            });
            let downstream: Vec<Downstream> = stock
                .iter()
                .map(|case| {
                    runtime().block_on(observe(
                        proxy.ports[0],
                        &case.path,
                        &generate_text_request(),
                    ))
                })
                .collect();
            let mut framing = Vec::new();
            for way in Way::ALL {
                for position in Position::all() {
                    // The three mappings at once: each call is its own connection.
                    let cells: Vec<Option<FramingCell>> = std::thread::scope(|inner| {
                        let calls: Vec<_> = tails
                            .iter()
                            .map(|(mapping, tail)| {
                                let offset = position.offset(Some(*tail));
                                let proxy = &proxy;
                                inner.spawn(move || {
                                    let path = format!("/{}/{}/mcp", way.path(), offset?);
                                    let start = Instant::now();
                                    let (result, warnings) = framing_call(
                                        framing_client(*mapping),
                                        &proxy.url(0, &path),
                                    );
                                    let seconds = start.elapsed().as_secs_f64();
                                    // Where the final response is in the bytes before the cut:
                                    // how the proxy ended this very response decides the verdict
                                    // (SPEC.md §7 row 4 needs a clean end of input).
                                    let end = position.after_final(*tail).then(|| {
                                        runtime().block_on(observe_with(
                                            proxy.ports[0],
                                            &path,
                                            &generate_text_request(),
                                            &framing_headers(*mapping),
                                        ))
                                    });
                                    Some(FramingCell {
                                        verdict: Verdict::of(&result, &warnings),
                                        seconds,
                                        end,
                                    })
                                })
                            })
                            .collect();
                        calls.into_iter().map(|c| c.join().unwrap()).collect()
                    });
                    framing.push((way, *position, cells));
                }
            }
            (
                python.join().unwrap(),
                typescript.join().unwrap(),
                rmcp.join().unwrap(),
                downstream,
                framing,
            )
        });
        for (way, position, cells) in &framing {
            let label = format!(
                "{}, {}, cut {}",
                proxy.label(),
                way.describe(),
                position.describe()
            );
            for ((mapping, _), cell) in tails.iter().zip(cells) {
                let Some(FramingCell { verdict, end, .. }) = cell else {
                    continue;
                };
                let label = format!("{label}, framing client ({})", mapping_name(*mapping));
                // The final response verified and the body ended cleanly after it (not a transport
                // error): delivered, clean in Regime B, the missing sentinel logged (issue 18,
                // SPEC.md §7 row 4). The proxy cut it or failed: abandoned. A session the proxy
                // refused at `initialize` never reached the cut.
                let refused = matches!(verdict, Verdict::HttpError(s) if s.ends_with("initialize"));
                if deliverable(end.as_ref()) && !refused {
                    assert_eq!(
                        *verdict,
                        Verdict::DeliveredWithoutSentinel,
                        "{label}: {end:?}"
                    );
                } else {
                    // Never a clean stream, never a parse error: `abandoned`, or no response at
                    // all (an HTTP error status, or the connection closed before a head).
                    assert!(
                        matches!(
                            verdict,
                            Verdict::Abandoned(_) | Verdict::HttpError(_) | Verdict::NoResponse
                        ),
                        "{label}: {verdict:?}"
                    );
                }
            }
            let stock_at = stock
                .iter()
                .position(|c| c.way == *way && c.position == *position);
            let stock_cells = stock_at.map_or_else(
                || vec!["–".to_owned(); 4],
                |i| {
                    let label = format!("{label}, stock clients");
                    for report in [&python[i], &typescript[i], &rmcp[i]] {
                        // A cut before the last byte leaves no stock client with the result,
                        // and none of them may hand out a partial one as complete.
                        assert_eq!(report.outcome, "error", "{label}: {report:?}");
                        if !caddy_defect_response(&proxy, report) {
                            assert_eq!(report.phase, "tools/call", "{label}: {report:?}");
                        }
                    }
                    vec![
                        downstream[i].describe(),
                        stock_cell(&python[i]),
                        stock_cell(&typescript[i]),
                        stock_cell(&rmcp[i]),
                    ]
                },
            );
            let mut row = vec![
                proxy.label(),
                way.describe().to_owned(),
                position.describe().to_owned(),
            ];
            row.extend(stock_cells);
            row.extend(cells.iter().map(|cell| {
                cell.as_ref().map_or("–".to_owned(), |c| {
                    format!("{}, {:.1} s", c.verdict.describe(), c.seconds)
                })
            }));
            rows.push(row);
        }
        rows
    });
    for row in &rows {
        table.row(row);
    }
    server.assert_running();
    // The backend did what it was told: every cut it made is where the path said.
    for record in backend.records.lock().unwrap().iter() {
        let (offset, sent) = (record["offset"].as_u64(), record["sent"].as_u64());
        assert_eq!(sent, offset, "backend.py: {record}");
    }
    table.write();
}

// ---------------------------------------------------------------------------------------------
// A backend slower than the proxy's read timeout.

#[test]
fn a_backend_slower_than_the_read_timeout_of_every_proxy_is_never_a_clean_response() {
    let _serial = serial();
    let mut server = rmcp_server("opt-in", false);
    let backend = Backend::start(&server.url, STALL_SECONDS);
    let mut table = Table::new(
        "slow",
        &[
            "proxy",
            "backend",
            "downstream (stock request)",
            "framing sse",
            "seconds",
        ],
    );
    let cases = [
        ("stallhead/0", "no head for 7 s"),
        ("stall/60000", "head and 60 000 bytes, then nothing for 7 s"),
    ];
    let rows = per_instance(&instances(!full()), |kind, variant| {
        let mut rows = Vec::new();
        let proxy = Proxy::start(kind, variant, &[backend.port]);
        let results = std::thread::scope(|scope| {
            let handles: Vec<_> = cases
                .iter()
                .map(|(path, _)| {
                    let path = format!("/{path}/mcp");
                    let url = proxy.url(0, &path);
                    let port = proxy.ports[0];
                    scope.spawn(move || {
                        let raw = scope.spawn(move || {
                            runtime().block_on(observe(port, &path, &generate_text_request()))
                        });
                        let start = Instant::now();
                        let (result, warnings) = framing_call(framing_client(Mapping::Sse), &url);
                        let seconds = start.elapsed().as_secs_f64();
                        (
                            raw.join().unwrap(),
                            Verdict::of(&result, &warnings),
                            seconds,
                        )
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        });
        for ((_, what), (downstream, verdict, seconds)) in cases.iter().zip(results) {
            let label = format!("{}, {what}", proxy.label());
            assert!(
                matches!(
                    verdict,
                    Verdict::Abandoned(_) | Verdict::HttpError(_) | Verdict::NoResponse
                ),
                "{label}: {verdict:?}"
            );
            assert!(
                downstream.status >= 500 || downstream.end != End::Clean,
                "{label}: a stalled body reached the client as a clean end: {downstream:?}"
            );
            rows.push(vec![
                proxy.label(),
                (*what).to_owned(),
                downstream.describe(),
                verdict.describe(),
                format!("{seconds:.1}"),
            ]);
        }
        rows
    });
    for row in &rows {
        table.row(row);
    }
    server.assert_running();
    table.write();
}

// ---------------------------------------------------------------------------------------------
// Streaming: progress notifications through each proxy.

#[derive(Debug, serde::Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct TickArgs {
    /// How many notifications.
    steps: u32,
    /// Milliseconds between two.
    interval_ms: u64,
    /// Which call this is, for the test's records.
    tag: i64,
}

/// When the server sent each notification (step 1..=steps) and the result (step 0), by the
/// call's tag.
fn emitted() -> &'static Mutex<Vec<(i64, u32, Instant)>> {
    static EMITTED: Mutex<Vec<(i64, u32, Instant)>> = Mutex::new(Vec::new());
    &EMITTED
}

#[derive(Clone, Debug)]
struct Ticker;

#[tool_router(server_handler)]
impl Ticker {
    #[tool(description = "Progress notifications `interval_ms` apart, then a result")]
    async fn ticks(
        &self,
        Parameters(args): Parameters<TickArgs>,
        context: RequestContext<RoleServer>,
    ) -> String {
        let token = context.meta.get_progress_token();
        let number = args.tag;
        for step in 1..=args.steps.min(50) {
            tokio::time::sleep(Duration::from_millis(args.interval_ms.min(5_000))).await;
            if let Some(token) = &token {
                emitted()
                    .lock()
                    .unwrap()
                    .push((number, step, Instant::now()));
                let _ = context
                    .peer
                    .notify_progress(
                        ProgressNotificationParam::new(token.clone(), f64::from(step))
                            .with_total(f64::from(args.steps)),
                    )
                    .await;
            }
        }
        emitted().lock().unwrap().push((number, 0, Instant::now()));
        format!("ticked {}", args.steps)
    }
}

/// An rmcp client handler that notes when each progress notification arrives.
#[derive(Clone, Debug, Default)]
struct Clock(Arc<Mutex<Vec<(u32, Instant)>>>);

impl rmcp::ClientHandler for Clock {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let step = params.progress as u32;
        self.0.lock().unwrap().push((step, Instant::now()));
    }
}

/// The streaming server: rmcp's stateless service behind `FramingLayer`, on a loopback port.
fn ticker_server() -> u16 {
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.sse_keep_alive = None;
    let service = StreamableHttpService::new(
        || Ok(Ticker),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = axum::Router::new().nest_service("/mcp", FramingLayer::new().layer(service));
    let listener = runtime()
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let port = listener.local_addr().unwrap().port();
    runtime().spawn(async move { axum::serve(listener, app).await });
    port
}

/// The clients of the streaming test: the stock rmcp client, and the framing client per mapping.
const STREAM_CLIENTS: [&str; 4] = [
    "rmcp stock",
    "framing sse",
    "framing binary",
    "framing compat",
];

/// One `ticks` call by client `which` with progress token `token`: for each notification and
/// then the result, how long after the server sent it the client had it (ms).
async fn timed_ticks(url: String, which: usize, token: i64) -> Vec<f64> {
    let clock = Clock::default();
    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
    let peer = if which == 0 {
        clock
            .clone()
            .serve(StreamableHttpClientTransport::from_uri(url.as_str()))
            .await
    } else {
        let client = framing_client(MAPPINGS[which - 1]);
        clock
            .clone()
            .serve(StreamableHttpClientTransport::with_client(client, config))
            .await
    }
    .expect("initialize");
    let arguments = serde_json::json!({"steps": TICKS, "interval_ms": TICK_MS, "tag": token});
    let mut params =
        CallToolRequestParams::new("ticks").with_arguments(arguments.as_object().unwrap().clone());
    params.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::Number(token),
    )));
    let result = peer.call_tool(params).await.expect("the ticks call");
    let done = Instant::now();
    let _ = peer.cancel().await;
    let text = &result.content[0].as_text().expect("text").text;
    assert_eq!(
        *text,
        format!("ticked {TICKS}"),
        "{url}, {}",
        STREAM_CLIENTS[which]
    );
    let sent: Vec<(u32, Instant)> = emitted()
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, _, _)| *t == token)
        .map(|(_, step, at)| (*step, *at))
        .collect();
    // rmcp runs each notification's handler as a task of its own: they may run in any order,
    // and after the result is handed out. Wait for them (bounded), then sort by step.
    let waiting = Instant::now();
    while clock.0.lock().unwrap().len() < TICKS as usize
        && waiting.elapsed() < Duration::from_secs(5)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut arrived: Vec<(u32, Instant)> = clock.0.lock().unwrap().clone();
    arrived.sort_by_key(|(step, _)| *step);
    let steps: Vec<u32> = arrived.iter().map(|(step, _)| *step).collect();
    assert_eq!(
        steps,
        (1..=TICKS).collect::<Vec<_>>(),
        "{url}, {}: every notification",
        STREAM_CLIENTS[which]
    );
    let delay = |step: u32, at: Instant| {
        let sent = sent
            .iter()
            .find(|(s, _)| *s == step)
            .unwrap_or_else(|| panic!("token {token}: step {step} not in {sent:?}"))
            .1;
        at.saturating_duration_since(sent).as_secs_f64() * 1000.0
    };
    let mut delays: Vec<f64> = arrived.iter().map(|(step, at)| delay(*step, *at)).collect();
    delays.push(delay(0, done));
    delays
}

#[test]
fn progress_notifications_reach_every_client_through_every_proxy_and_their_delays_are_recorded() {
    let _serial = serial();
    let port = ticker_server();
    let mut table = Table::new(
        "streaming",
        &[
            "path",
            "client",
            "delay of each notification (ms)",
            "delay of the result (ms)",
            "streams?",
        ],
    );
    measure(
        &mut table,
        "direct",
        &format!("http://127.0.0.1:{port}/mcp"),
    );
    for (kind, variant) in instances(false) {
        // One proxy at a time: measured, then stopped.
        let proxy = Proxy::start(kind, variant, &[port]);
        measure(&mut table, &proxy.label(), &proxy.url(0, "/mcp"));
    }
    table.write();
}

/// Runs every streaming client at `url` at once and adds their rows.
fn measure(table: &mut Table, label: &str, url: &str) {
    static TOKENS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1);
    let calls = (0..STREAM_CLIENTS.len()).map(|which| {
        let token = TOKENS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        runtime().spawn(timed_ticks(url.to_owned(), which, token))
    });
    let handles: Vec<_> = calls.collect();
    for (which, handle) in handles.into_iter().enumerate() {
        let delays = runtime().block_on(handle).expect("a streaming client");
        let (notes, result) = delays.split_at(delays.len() - 1);
        // Held back: the first notification reached the client no earlier than the last was
        // sent (the whole stream arrived in one piece).
        let spread = f64::from(TICKS - 1) * TICK_MS as f64;
        let streams = if notes[0] + 1.0 >= spread {
            "**no: held until the end**"
        } else if notes.iter().any(|d| *d > 100.0) {
            "late"
        } else {
            "yes"
        };
        table.row(&[
            label.to_owned(),
            STREAM_CLIENTS[which].to_owned(),
            notes
                .iter()
                .map(|d| format!("{d:.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            format!("{:.0}", result[0]),
            streams.to_owned(),
        ]);
    }
}
