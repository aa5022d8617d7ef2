//! The seed scenario, end to end on loopback: two stateless MCP backends behind a discovery
//! resolver that re-resolves per request (round robin), and a proxy on one path that ends a
//! response body with a normal HTTP ending, at a chunk boundary, in the middle of a tool call's
//! JSON arguments.
//!
//! Each backend is what a user mounts: rmcp's `StreamableHttpService` (stateless, JSON
//! responses) with a non-idempotent tool, behind
//! `FramingLayer::new().frame_size(512).dedupe(..)` over one `MemoryStore` shared by both (a
//! `RedisStore` for separate processes, see `scripts/fleet-demo`). The layer frames the responses
//! of requests that opt in, deduplicates keyed tool calls, and declares both in the
//! `server/discover` result rmcp writes (SPEC.md §11.2, §17.11).
//!
//! The same workload runs twice:
//! 1. unframed: a plain HTTP client gets a JSON parse error, retries on the other backend,
//!    "succeeds", the tool ran twice, and the truncation is in no counter;
//! 2. framed: `mcp_framing::client::RetryingClient` over a `DiscoveringResolver` learns the
//!    contract from `server/discover` before each attempt, classifies the cut as abandoned with
//!    the frames and bytes that arrived, counts it, and retries by itself with the same request
//!    key; the retry lands on the other backend, which replays the stored result instead of
//!    running the tool again; the final result is verified (length + SHA-256, sentinel).
//!
//! 3. Then the framed client is pointed at an rmcp backend without `FramingLayer`: it refuses to
//!    start (Regime C: a clean end would be indistinguishable from an abandoned one).
//!
//! Run: `cargo run --release --features rmcp,demo --example stateless_autoscaler`

mod help;

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::stream;
use mcp_framing::client::{
    AttemptReport, CallError, DiscoveringResolver, RetrySchedule, RetryingClient,
};
use mcp_framing::contract::ContractError;
use mcp_framing::dedupe::{Deduplicator, MemoryStore};
use mcp_framing::outcome::Verdict;
use mcp_framing::rmcp_http::FramingLayer;
use mcp_framing::telemetry;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool, tool_router};
use serde_json::{Value, json};
use tower_layer::Layer;

/// The proxy forwards bodies in pieces of this size (its chunk boundaries).
const PROXY_CHUNK: usize = 1024;
const CALLS: usize = 3;

// ---------------------------------------------------------------------------------------------
// The backends: an rmcp server with one non-idempotent tool, stateless, identical.

#[derive(Debug, serde::Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct PlanArgs {
    /// The task to plan for.
    task: String,
}

#[derive(Clone)]
struct Planner {
    executions: Arc<AtomicUsize>,
}

#[tool_router(server_handler)]
impl Planner {
    /// The next tool call an agent should make, with large JSON arguments (a few KiB).
    #[tool(description = "Plan the next step of a task (not idempotent: counts executions)")]
    fn plan_next_step(
        &self,
        Parameters(PlanArgs { task }): Parameters<PlanArgs>,
    ) -> CallToolResult {
        self.executions.fetch_add(1, Ordering::SeqCst);
        let content: String = (0..160)
            .map(|i| format!("{task}: line {i:03} of the report body.\n"))
            .collect();
        let mut result = CallToolResult::success(vec![ContentBlock::text("next step planned")]);
        result.structured_content = Some(json!({"next_call": {"name": "write_file",
            "arguments": {"path": format!("reports/{task}.md"), "content": content}}}));
        result
    }
}

/// rmcp's stateless Streamable HTTP service over `Planner`, answering with `application/json`.
fn planner(executions: &Arc<AtomicUsize>) -> StreamableHttpService<Planner, NeverSessionManager> {
    let planner = Planner {
        executions: executions.clone(),
    };
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.json_response = true;
    StreamableHttpService::new(move || Ok(planner.clone()), Arc::default(), config)
}

async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}/mcp")
}

// ---------------------------------------------------------------------------------------------
// The proxy on one path: forwards in 1 KiB pieces and, for tool calls, ends the body normally
// after half of them (an idle timeout, a redeploy, a misbehaving load balancer).

struct Proxy {
    upstream: String,
    http: reqwest::Client,
    cuts: AtomicUsize,
}

async fn proxy(State(proxy): State<Arc<Proxy>>, headers: HeaderMap, body: Bytes) -> Response {
    let is_tool_call = serde_json::from_slice::<Value>(&body)
        .is_ok_and(|request| request["method"] == "tools/call");
    let mut request = proxy.http.post(&proxy.upstream).body(body);
    for (name, value) in &headers {
        if name != axum::http::header::HOST && name != axum::http::header::CONTENT_LENGTH {
            request = request.header(name, value);
        }
    }
    let Ok(upstream) = request.send().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let status = upstream.status();
    let mut response_headers = upstream.headers().clone();
    response_headers.remove(axum::http::header::CONTENT_LENGTH);
    let Ok(bytes) = upstream.bytes().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let mut pieces: Vec<Bytes> = bytes
        .chunks(PROXY_CHUNK)
        .map(Bytes::copy_from_slice)
        .collect();
    if is_tool_call {
        pieces.truncate(pieces.len() / 2);
        proxy.cuts.fetch_add(1, Ordering::SeqCst);
    }
    let body = Body::from_stream(stream::iter(
        pieces.into_iter().map(Ok::<_, std::io::Error>),
    ));
    (status, response_headers, body).into_response()
}

fn tool_call(id: usize, task: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "plan_next_step", "arguments": {"task": task}}})
}

/// Where the cut landed in the complete response, against its `"arguments":{...}` span.
fn cut_position(cut: usize, complete: &[u8]) -> String {
    let text = String::from_utf8_lossy(complete);
    let start = text
        .find("\"arguments\"")
        .expect("the result has arguments");
    let end = text.rfind("}}").expect("the arguments end");
    let inside = if (start..end).contains(&cut) {
        "inside"
    } else {
        "OUTSIDE"
    };
    format!(
        "    the cut attempt ended at byte {cut} of this {}-byte result: {inside} the tool call's \
         JSON arguments (bytes {start}..{end})",
        complete.len()
    )
}

#[derive(Default)]
struct Counters {
    ok: usize,
    failed: usize,
    truncations: usize,
    retries: usize,
    verified: usize,
    /// Attempts per logical call.
    attempts: Vec<u32>,
}

// ---------------------------------------------------------------------------------------------
// Run 1: an ordinary client, round robin. Any error is retried on the next endpoint.

async fn unframed_run(endpoints: &[(String, &str)], log: &mut Vec<String>) -> Counters {
    let http = reqwest::Client::new();
    let mut counters = Counters::default();
    let mut next = 0;
    for call in 0..CALLS {
        let task = format!("task-{call}");
        let mut cut_at = None;
        for attempt in 1.. {
            let (url, name) = &endpoints[next % endpoints.len()];
            next += 1;
            // What rmcp requires of a 2026-07-28 request: its version and capabilities in `_meta`,
            // the version, the method and the tool in headers.
            let mut request = tool_call(call + 1, &task);
            request["params"]["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}});
            let body = http
                .post(url)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "plan_next_step")
                .json(&request)
                .send()
                .await
                .expect("loopback request")
                .bytes()
                .await
                .expect("the body ended normally");
            match serde_json::from_slice::<Value>(&body) {
                Ok(_) => {
                    log.push(format!(
                        "call {call} attempt {attempt} via {name}: ok ({} bytes)",
                        body.len()
                    ));
                    if let Some(cut) = cut_at {
                        log.push(cut_position(cut, &body));
                    }
                    counters.ok += 1;
                    break;
                }
                Err(err) if attempt == 1 => {
                    let tail = String::from_utf8_lossy(&body[body.len().saturating_sub(24)..])
                        .replace('\n', "\\n");
                    log.push(format!(
                        "call {call} attempt {attempt} via {name}: JSON parse error \"{err}\" \
                         after {} bytes ending ...{tail}; retrying",
                        body.len()
                    ));
                    // The usual client: a parse error is "transient", retried, not counted.
                    cut_at = Some(body.len());
                }
                Err(_) => {
                    counters.failed += 1;
                    break;
                }
            }
        }
    }
    counters
}

// ---------------------------------------------------------------------------------------------
// Run 2: the framed client. Before each attempt it re-resolves the endpoint (round robin,
// server/discover every time) and re-checks the contract the layer declares there.

/// Each ended attempt, as a log line, and whether it was abandoned (a cut seen as one).
type AttemptLog = Arc<Mutex<Vec<(bool, bool, String)>>>;

fn framed_client(endpoints: &[(String, &'static str)], log: &AttemptLog) -> RetryingClient {
    let http = reqwest::Client::new();
    let names: HashMap<String, &str> = endpoints.iter().cloned().collect();
    let urls: Vec<String> = endpoints.iter().map(|(url, _)| url.clone()).collect();
    let log = log.clone();
    RetryingClient::new(http.clone(), DiscoveringResolver::new(http, urls))
        .schedule(
            RetrySchedule::default()
                .max_attempts(3)
                .initial_backoff(Duration::from_millis(20)),
        )
        .observe(move |report: &AttemptReport<'_>| {
            let name = names.get(report.endpoint).copied().unwrap_or("?");
            let outcome = report.outcome;
            let line = match report.decision {
                None => format!(
                    "attempt {} via {name}: {} (regime {:?}), result verified",
                    report.attempt, outcome.verdict, outcome.regime
                ),
                Some(decision) => format!(
                    "attempt {} via {name}: {} (regime {:?}); {} frames, {} bytes received, \
                     {} message(s) verified, {} bytes of the result open\n      \
                     retry decision: {} ({})",
                    report.attempt,
                    outcome.verdict,
                    outcome.regime,
                    outcome.received.frames,
                    outcome.received.bytes,
                    outcome.received.messages,
                    outcome.received.open_message_bytes,
                    decision.name(),
                    decision.reason()
                ),
            };
            let abandoned = matches!(outcome.verdict, Verdict::Abandoned { .. });
            let retried = report.decision.is_some_and(|decision| decision.is_retry());
            log.lock().expect("lock").push((abandoned, retried, line));
        })
}

async fn framed_run(endpoints: &[(String, &'static str)], log: &mut Vec<String>) -> Counters {
    let attempts = AttemptLog::default();
    let client = framed_client(endpoints, &attempts);
    let mut counters = Counters::default();
    for call in 0..CALLS {
        // The client draws one request key per logical call and reuses it on every retry.
        match client
            .call(tool_call(call + 1, &format!("task-{call}")))
            .await
        {
            Ok(outcome) => {
                log.push(format!(
                    "call {call} (request key {}): ok after {} attempt(s), {} bytes",
                    outcome.request_key,
                    outcome.attempts,
                    outcome.response.len()
                ));
                counters.ok += 1;
                counters.verified += 1;
                counters.attempts.push(outcome.attempts);
            }
            Err(err) => {
                log.push(format!("call {call}: {err}"));
                counters.failed += 1;
            }
        }
        for (abandoned, retried, line) in attempts.lock().expect("lock").drain(..) {
            counters.truncations += usize::from(abandoned);
            counters.retries += usize::from(retried);
            log.push(format!("    {line}"));
        }
    }
    counters
}

/// `--help`.
const HELP: &str = "\
usage: stateless_autoscaler
run:   cargo run --release --features rmcp,demo --example stateless_autoscaler

The main job on loopback, in seconds: two stateless rmcp backends behind FramingLayer with
deduplication, a proxy that cuts a tool call's response, the same workload unframed (a parse
error, the tool run twice) and framed (abandoned, retried with the same request key, replayed,
verified), then the framed client against a backend without the layer (refused). It takes no
arguments.

  -h, --help  print this help";

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if help::asked(&args, HELP) {
        return;
    }
    if let Some(arg) = args.first() {
        help::usage_error(
            "stateless_autoscaler",
            HELP,
            &format!("unexpected argument {arg:?}"),
        );
    }
    // The crate emits through the `metrics` facade; a real service installs its Prometheus or
    // OpenTelemetry exporter here. The demo installs the debugging recorder and prints it.
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().expect("the only recorder");
    telemetry::describe();
    tokio::time::timeout(Duration::from_secs(60), run(&snapshotter))
        .await
        .expect("the demo finishes in seconds");
}

async fn run(metrics: &Snapshotter) {
    // One store for both backends (they share this process); separate processes share a
    // RedisStore instead (scripts/fleet-demo).
    let store = Arc::new(MemoryStore::new());
    let executions = [Arc::default(), Arc::default(), Arc::default()];
    let mut backends = Vec::new();
    for executions in &executions[..2] {
        let mcp = FramingLayer::new()
            .frame_size(512)
            .dedupe(Deduplicator::with_shared_store(store.clone()))
            .layer(planner(executions));
        backends.push(serve(Router::new().nest_service("/mcp", mcp)).await);
    }
    let proxy_state = Arc::new(Proxy {
        upstream: backends[0].clone(),
        http: reqwest::Client::new(),
        cuts: AtomicUsize::new(0),
    });
    let proxy_url = serve(
        Router::new()
            .route("/mcp", post(proxy))
            .with_state(proxy_state.clone()),
    )
    .await;
    let endpoints = [
        (proxy_url.clone(), "proxy->backend-a"),
        (backends[1].clone(), "backend-b"),
    ];
    println!(
        "loopback: backend-a {}, backend-b {}, proxy {proxy_url} -> backend-a",
        backends[0], backends[1]
    );
    println!(
        "backends: rmcp StreamableHttpService (stateless, JSON responses) behind \
         FramingLayer::new().frame_size(512).dedupe(..), one MemoryStore"
    );
    println!("resolver: round robin over [proxy->backend-a, backend-b], re-resolved per request\n");
    let executed = || -> Vec<usize> {
        executions
            .iter()
            .map(|n| n.swap(0, Ordering::SeqCst))
            .collect()
    };

    let mut log = Vec::new();
    let unframed = unframed_run(&endpoints, &mut log).await;
    let unframed_cuts = proxy_state.cuts.swap(0, Ordering::SeqCst);
    let unframed_executions = executed();
    println!("== run 1: unframed (application/json)");
    log.drain(..).for_each(|l| println!("  {l}"));

    let framed = framed_run(&endpoints, &mut log).await;
    let framed_cuts = proxy_state.cuts.swap(0, Ordering::SeqCst);
    let framed_executions = executed();
    println!(
        "\n== run 2: framed (RetryingClient: the compatible SSE mapping, the contract from server/discover)"
    );
    log.drain(..).for_each(|l| println!("  {l}"));

    println!("\n== run 3: the framed client against rmcp without FramingLayer");
    let plain = serve(Router::new().nest_service("/mcp", planner(&executions[2]))).await;
    let attempts = AttemptLog::default();
    let refusal = framed_client(&[(plain, "backend-c")], &attempts)
        .call(tool_call(1, "task-0"))
        .await;
    let refused = match refusal {
        Err(err @ CallError::Contract(ContractError::NoContract { .. })) => {
            println!("  framed client refuses to start, no tool call sent:\n    {err}");
            true
        }
        Err(err) => {
            println!("  framed client failed otherwise: {err}");
            false
        }
        Ok(_) => false,
    };
    let refused = refused && executed()[2] == 0 && attempts.lock().expect("lock").is_empty();

    println!(
        "\n== metrics of the framed client and the layers (the `metrics` facade, read from the recorder)"
    );
    let metric_lines = metric_lines(metrics);
    for line in &metric_lines {
        println!("  {line}");
    }

    println!(
        "\n== summary ({CALLS} tool calls per run; the proxy cut {unframed_cuts} and {framed_cuts} responses)"
    );
    let row = |label: &str, unframed: &dyn Display, framed: &dyn Display| {
        println!("  {label:<40} {unframed:>22} {framed:>22}");
    };
    let pair = |n: &[usize]| format!("{} / {}", n[0], n[1]);
    let attempts: Vec<String> = framed.attempts.iter().map(u32::to_string).collect();
    row("", &"unframed", &"framed");
    row(
        "what the client saw at the cut",
        &"JSON parse error",
        &"abandoned (Truncated)",
    );
    row("tool calls reported ok", &unframed.ok, &framed.ok);
    row("tool calls failed", &unframed.failed, &framed.failed);
    row(
        "truncations counted",
        &unframed.truncations,
        &framed.truncations,
    );
    let keyed = format!("{} (automatic, keyed)", framed.retries);
    row("retries counted", &unframed.retries, &keyed);
    row(
        "attempts per call",
        &"2 (hand-made retry)",
        &attempts.join(", "),
    );
    row(
        "results verified (len+sha256+sentinel)",
        &unframed.verified,
        &framed.verified,
    );
    let started = if refused { "refused" } else { "STARTED" };
    row("start without contract (Regime C)", &"n/a", &started);
    row(
        "tool executions (backend-a / backend-b)",
        &pair(&unframed_executions),
        &pair(&framed_executions),
    );
    println!(
        "  (framed retries carry the request key: backend-b finds the call in the deduplication\n   \
         store (mcp_framing::dedupe) and replays its result instead of running the\n   \
         non-idempotent tool a second time)"
    );

    assert_eq!(
        (unframed.ok, unframed.truncations),
        (CALLS, 0),
        "unframed hides the cuts"
    );
    assert_eq!((unframed_cuts, framed_cuts), (CALLS, CALLS));
    assert_eq!(
        unframed_executions[..2],
        [CALLS, CALLS],
        "unframed retries run the tool again"
    );
    assert_eq!(
        (framed.ok, framed.truncations, framed.verified),
        (CALLS, CALLS, CALLS)
    );
    assert_eq!(
        framed.attempts, [2; CALLS],
        "one cut, one automatic retry per call"
    );
    assert_eq!(
        framed_executions[..2],
        [CALLS, 0],
        "keyed retries are deduplicated"
    );
    assert!(refused, "Regime C must be refused before any tool call");
}

/// Every counter, and every histogram's count and sum, as `name{labels} value` lines.
fn metric_lines(snapshotter: &Snapshotter) -> Vec<String> {
    let mut lines: Vec<String> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let labels: Vec<String> = key
                .key()
                .labels()
                .filter(|l| !l.value().is_empty())
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let series = format!("{}{{{}}}", key.key().name(), labels.join(","));
            match value {
                DebugValue::Counter(0) => None,
                DebugValue::Counter(n) => Some(format!("{series} {n}")),
                DebugValue::Histogram(values) => {
                    let sum: f64 = values.iter().map(|v| v.0).sum();
                    Some(format!("{series} count={} sum={sum:.4}s", values.len()))
                }
                DebugValue::Gauge(g) => Some(format!("{series} {}", g.0)),
            }
        })
        .collect();
    lines.sort();
    lines
}
