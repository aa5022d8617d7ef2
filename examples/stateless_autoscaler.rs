//! The seed scenario, end to end on loopback: two stateless MCP backends behind a discovery
//! resolver that re-resolves per request (round robin), and a proxy on one path that ends a
//! response body with a normal HTTP ending, at a chunk boundary, in the middle of a tool call's
//! JSON arguments.
//!
//! The same workload runs twice:
//! 1. unframed: the client gets a JSON parse error, retries on the other backend, "succeeds",
//!    and the truncation is in no counter;
//! 2. framed (SSE mapping): the client (`mcp_framing::client::RetryingClient`) classifies the cut
//!    as abandoned with the frames and bytes that arrived, counts it, and retries by itself with
//!    the same request key, because the contract says the backends deduplicate keyed tool calls
//!    (`mcp_framing::dedupe`, one `MemoryStore` shared by both backends here; a `RedisStore` for
//!    separate processes, see `scripts/fleet-demo`); the retry lands on the other backend, which
//!    answers from the store without running the tool again; the final result is verified
//!    (length + SHA-256, sentinel).
//!
//! 3. Then discovery stops declaring the framing contract, and the framed client refuses to
//!    start (Regime C: a clean end would be indistinguishable from an abandoned one).
//!
//! Run: `cargo run --release --features demo --example stateless_autoscaler`

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::stream;
use mcp_framing::client::{AttemptReport, DiscoveringResolver, RetrySchedule, RetryingClient};
use mcp_framing::dedupe::{Decision, Deduplicator, KeyedCall, MemoryStore, Principal};
use mcp_framing::http::{FramedBody, OptIn, response_headers};
use mcp_framing::telemetry;
use mcp_framing::{
    EncodeError, Outgoing, StreamEncoder,
    contract::{
        ClientPolicy, ContractError, Deduplication, DiscoverySource, EXTENSION_KEY,
        FramingContract, ServerDiscovery,
    },
    outcome::Verdict,
};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use serde_json::{Value, json};

/// The proxy forwards bodies in pieces of this size (its chunk boundaries).
const PROXY_CHUNK: usize = 1024;
const CALLS: usize = 3;

// ---------------------------------------------------------------------------------------------
// The backends: stateless, identical, each answers `server/discover` and `tools/call`.

struct Backend {
    name: &'static str,
    advertise_contract: Arc<AtomicBool>,
    executions: AtomicUsize,
    /// The deduplication engine over the store every backend shares (SPEC.md §17): what makes
    /// a keyed retry of a non-idempotent tool safe on a stateless fleet.
    dedup: Deduplicator,
}

/// The tool's result: the next tool call an agent should make, with large JSON arguments.
fn plan_next_step(id: &Value, task: &str) -> Value {
    let content: String = (0..160)
        .map(|i| format!("{task}: line {i:03} of the report body.\n"))
        .collect();
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {
            "content": [{"type": "text", "text": "next step planned"}],
            "structuredContent": {
                "next_call": {
                    "name": "write_file",
                    "arguments": {"path": format!("reports/{task}.md"), "content": content},
                }
            },
            "isError": false
        }
    })
}

fn run_tool(backend: &Backend, id: &Value, request: &Value) -> Value {
    backend.executions.fetch_add(1, Ordering::SeqCst);
    let task = request["params"]["arguments"]["task"]
        .as_str()
        .unwrap_or("task");
    plan_next_step(id, task)
}

async fn backend(State(backend): State<Arc<Backend>>, headers: HeaderMap, body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let id = request["id"].clone();
    let response = match request["method"].as_str() {
        Some("server/discover") => {
            let mut result = json!({
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "extensions": {}},
                "serverInfo": {"name": backend.name, "version": "1.0.0"},
            });
            if backend.advertise_contract.load(Ordering::SeqCst) {
                FramingContract::v1()
                    .with_deduplication(Deduplication::new(backend.dedup.window_duration()))
                    .declare_in(&mut result, DiscoverySource::Discover)
                    .expect("a discovery result");
            }
            json!({"jsonrpc": "2.0", "id": id, "result": result})
        }
        Some("tools/call") => {
            let header_key = OptIn::from_headers(&headers)
                .ok()
                .flatten()
                .and_then(|o| o.request_key);
            let principal = Principal::from_authorization(&headers);
            match KeyedCall::from_request(principal, header_key, &request, backend.dedup.rules()) {
                Ok(Some(call)) => match backend.dedup.begin(&call).await {
                    // First attempt of this key on any backend: run the tool, record the result.
                    Decision::Execute(guard) => {
                        let result = run_tool(&backend, &id, &request);
                        let bytes = serde_json::to_vec(&result).expect("serializable");
                        guard.complete(&bytes).await.expect("the store records it");
                        result
                    }
                    // A retry of a call that already ran: its result, under this attempt's id.
                    Decision::Replay(stored) => {
                        serde_json::from_str(&stored.to_response(&id)).expect("stored JSON")
                    }
                    Decision::Refused(refusal) => {
                        serde_json::from_str(&refusal.to_response(&id, call.request_key()))
                            .expect("a JSON-RPC error")
                    }
                    Decision::Unprotected(_) => run_tool(&backend, &id, &request),
                },
                // No key: nothing to deduplicate on.
                Ok(None) => run_tool(&backend, &id, &request),
                Err(err) => return (StatusCode::BAD_REQUEST, err.to_string()).into_response(),
            }
        }
        _ => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no such method"}})
        }
    };
    let bytes = serde_json::to_vec(&response).expect("serializable");
    match OptIn::from_headers(&headers) {
        // Not opted in: answered exactly as before, as `application/json`.
        Ok(None) => (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            Body::from_stream(stream::iter(
                bytes
                    .chunks(512)
                    .map(|c| Ok::<_, std::io::Error>(Bytes::copy_from_slice(c)))
                    .collect::<Vec<_>>(),
            )),
        )
            .into_response(),
        Ok(Some(opt_in)) => {
            // Framed: a progress notification, then the result as produced, in 512-byte pieces.
            let token = request["params"]["_meta"]["progressToken"].clone();
            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                  "params": {"progressToken": token, "progress": 1, "total": 2}});
            let mut items = vec![Outgoing::Message(
                serde_json::to_vec(&progress).expect("serializable").into(),
            )];
            items.extend(
                bytes
                    .chunks(512)
                    .map(|c| Outgoing::Chunk(Bytes::copy_from_slice(c))),
            );
            items.push(Outgoing::FinishMessage);
            // Within the client's limits (`Mcp-Framing-Limits`), echoing its request key.
            let encoder = opt_in.encoder(StreamEncoder::builder().frame_size(512));
            let source = stream::iter(items.into_iter().map(Ok::<_, EncodeError>));
            let body = FramedBody::new(source, encoder, opt_in.mapping());
            (response_headers(opt_in.mapping()), Body::from_stream(body)).into_response()
        }
        Err(err) => (StatusCode::BAD_REQUEST, err.to_string()).into_response(),
    }
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

// ---------------------------------------------------------------------------------------------
// Discovery: a resolver that hands out the next endpoint on every request (round robin).

struct Resolver {
    endpoints: Vec<(String, &'static str)>,
    next: AtomicUsize,
}

impl Resolver {
    fn resolve(&self) -> &(String, &'static str) {
        let i = self.next.fetch_add(1, Ordering::SeqCst);
        &self.endpoints[i % self.endpoints.len()]
    }
}

async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

fn tool_call(id: u64, task: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "plan_next_step", "arguments": {"task": task},
        "_meta": {"progressToken": id,
                  "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
}

/// Where `"arguments":{...}` sits in a result message, to show where the cut landed.
fn arguments_span(message: &[u8]) -> (usize, usize) {
    let text = String::from_utf8_lossy(message);
    let start = text
        .find("\"arguments\"")
        .expect("the result has arguments");
    let end = text.rfind("}}}").expect("the result ends its objects");
    (start, end)
}

fn cut_position(cut: usize, complete: &[u8]) -> String {
    let (start, end) = arguments_span(complete);
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

// ---------------------------------------------------------------------------------------------
// Run 1: an ordinary client. Any error is retried on the next endpoint; success is counted.

#[derive(Default)]
struct Counters {
    ok: usize,
    failed: usize,
    truncations: usize,
    retries: usize,
    keyed_retries: usize,
    verified: usize,
    /// Attempts per logical call (framed run).
    attempts: Vec<u32>,
}

async fn unframed_run(
    http: &reqwest::Client,
    resolver: &Resolver,
    log: &mut Vec<String>,
) -> Counters {
    let mut counters = Counters::default();
    for call in 0..CALLS {
        let task = format!("task-{call}");
        let mut cut_at = None;
        for attempt in 1.. {
            let (url, name) = resolver.resolve();
            let body = http
                .post(url)
                .header("accept", "application/json, text/event-stream")
                .json(&tool_call(call as u64 + 1, &task))
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
                    cut_at = Some(body.len());
                    // The usual client: a parse error is "transient", retried, not counted.
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
// Run 2: the framed client. Discovery first: no contract, no start.

/// Discovery with the client policy of issue 3: every endpoint the resolver can hand out must
/// declare the framing contract (a request may land on any of them), and must keep declaring what
/// the first one did (a downgrade between two endpoints is an error, not a silent fallback).
async fn discover(
    http: &reqwest::Client,
    resolver: &Resolver,
) -> Result<ClientPolicy, ContractError> {
    let mut policy: Option<ClientPolicy> = None;
    for (url, _) in &resolver.endpoints {
        let response: Value = http
            .post(url)
            .json(&json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover"}))
            .send()
            .await
            .expect("loopback request")
            .json()
            .await
            .expect("discovery is not cut");
        let discovery = ServerDiscovery::from_discover(&response["result"])?;
        match &policy {
            None => policy = Some(ClientPolicy::new(&discovery)?),
            Some(policy) => policy.recheck(&discovery)?,
        }
    }
    Ok(policy.expect("at least one endpoint"))
}

async fn framed_run(
    http: &reqwest::Client,
    resolver: &Resolver,
    log: &mut Vec<String>,
) -> Counters {
    let mut counters = Counters::default();
    let policy = discover(http, resolver)
        .await
        .expect("the contract is declared");
    let negotiated = policy.negotiated().expect("framing negotiated");
    log.push(format!(
        "discovery: {EXTENSION_KEY} on every endpoint; negotiated version {}, regime {:?}, \
         deduplication of tools/call declared: {}",
        negotiated.version,
        policy.regime(),
        policy.deduplicates("tools/call")
    ));
    // The client retries by itself: before each attempt it re-resolves the endpoint (round
    // robin, server/discover every time) and re-checks the contract there.
    let endpoints: Vec<&str> = resolver
        .endpoints
        .iter()
        .map(|(url, _)| url.as_str())
        .collect();
    let names: HashMap<String, &'static str> = resolver
        .endpoints
        .iter()
        .map(|(url, name)| (url.clone(), *name))
        .collect();
    let attempts_log = Arc::new(Mutex::new(Vec::new()));
    let truncations = Arc::new(AtomicUsize::new(0));
    let client = RetryingClient::new(
        http.clone(),
        DiscoveringResolver::new(http.clone(), endpoints),
    )
    .schedule(
        RetrySchedule::default()
            .max_attempts(3)
            .initial_backoff(Duration::from_millis(20)),
    )
    .observe({
        let attempts_log = attempts_log.clone();
        let truncations = truncations.clone();
        move |report: &AttemptReport<'_>| {
            if matches!(report.outcome.verdict, Verdict::Abandoned { .. }) {
                truncations.fetch_add(1, Ordering::SeqCst);
            }
            let name = names.get(report.endpoint).copied().unwrap_or("?");
            let received = report.outcome.received;
            let line = match report.decision {
                None => format!(
                    "attempt {} via {name}: {}, result verified",
                    report.attempt, report.outcome.verdict
                ),
                Some(decision) => format!(
                    "attempt {} via {name}: {}; {} frames, {} bytes received, {} message(s) \
                         verified, {} bytes of the result open\n      retry decision: {} ({})",
                    report.attempt,
                    report.outcome.verdict,
                    received.frames,
                    received.bytes,
                    received.messages,
                    received.open_message_bytes,
                    decision.name(),
                    decision.reason()
                ),
            };
            attempts_log.lock().expect("lock").push(line);
        }
    });
    for call in 0..CALLS {
        let task = format!("task-{call}");
        // The client draws one key per logical request and reuses it on every retry.
        match client.call(tool_call(call as u64 + 1, &task)).await {
            Ok(outcome) => {
                log.push(format!(
                    "call {call} (request key {}): ok after {} attempt(s), {} bytes",
                    outcome.request_key,
                    outcome.attempts,
                    outcome.response.len()
                ));
                for line in attempts_log.lock().expect("lock").drain(..) {
                    log.push(format!("    {line}"));
                }
                counters.ok += 1;
                counters.verified += 1;
                counters.attempts.push(outcome.attempts);
            }
            Err(err) => {
                log.push(format!("call {call}: {err}"));
                counters.failed += 1;
            }
        }
    }
    let stats = client.stats().snapshot();
    counters.retries = stats.retries as usize;
    counters.keyed_retries = stats.retries as usize;
    counters.truncations = truncations.load(Ordering::SeqCst);
    counters
}

#[tokio::main]
async fn main() {
    // The crate emits through the `metrics` facade; a real service installs its Prometheus or
    // OpenTelemetry exporter here. The demo installs the debugging recorder and prints it.
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().expect("the only recorder");
    telemetry::describe();
    METRICS.set(snapshotter).expect("set once");
    tokio::time::timeout(Duration::from_secs(60), run())
        .await
        .expect("the demo finishes in seconds");
}

async fn run() {
    let advertise = Arc::new(AtomicBool::new(true));
    // One store for both backends (they share this process); separate processes share a
    // RedisStore instead (scripts/fleet-demo).
    let store = Arc::new(MemoryStore::new());
    let mut backends = Vec::new();
    for name in ["backend-a", "backend-b"] {
        let state = Arc::new(Backend {
            name,
            advertise_contract: advertise.clone(),
            executions: AtomicUsize::new(0),
            dedup: Deduplicator::with_shared_store(store.clone()),
        });
        let addr = serve(
            Router::new()
                .route("/mcp", post(backend))
                .with_state(state.clone()),
        )
        .await;
        backends.push((state, addr));
    }
    let http = reqwest::Client::new();
    let proxy_state = Arc::new(Proxy {
        upstream: format!("http://{}/mcp", backends[0].1),
        http: http.clone(),
        cuts: AtomicUsize::new(0),
    });
    let proxy_addr = serve(
        Router::new()
            .route("/mcp", post(proxy))
            .with_state(proxy_state.clone()),
    )
    .await;
    let resolver = Resolver {
        endpoints: vec![
            (format!("http://{proxy_addr}/mcp"), "proxy->backend-a"),
            (format!("http://{}/mcp", backends[1].1), "backend-b"),
        ],
        next: AtomicUsize::new(0),
    };
    println!(
        "loopback: backend-a {}, backend-b {}, proxy {proxy_addr} -> backend-a",
        backends[0].1, backends[1].1
    );
    println!("resolver: round robin over [proxy->backend-a, backend-b], re-resolved per request\n");

    let mut unframed_log = Vec::new();
    let unframed = unframed_run(&http, &resolver, &mut unframed_log).await;
    let unframed_cuts = proxy_state.cuts.swap(0, Ordering::SeqCst);
    let executions = |backends: &[(Arc<Backend>, SocketAddr)]| -> Vec<usize> {
        backends
            .iter()
            .map(|(b, _)| b.executions.swap(0, Ordering::SeqCst))
            .collect()
    };
    let unframed_executions = executions(&backends);
    println!("== run 1: unframed (application/json)");
    unframed_log.iter().for_each(|l| println!("  {l}"));

    resolver.next.store(0, Ordering::SeqCst);
    let mut framed_log = Vec::new();
    let framed = framed_run(&http, &resolver, &mut framed_log).await;
    let framed_cuts = proxy_state.cuts.swap(0, Ordering::SeqCst);
    let framed_executions = executions(&backends);
    println!("\n== run 2: framed (SSE mapping, event: mcp-frame)");
    framed_log.iter().for_each(|l| println!("  {l}"));

    println!("\n== run 3: discovery without the framing contract");
    advertise.store(false, Ordering::SeqCst);
    let refused = match discover(&http, &resolver).await {
        Err(err @ ContractError::NoContract { .. }) => {
            println!("  framed client refuses to start, no request sent:\n    {err}");
            true
        }
        Err(err) => {
            println!("  framed client refuses to start: {err}");
            true
        }
        Ok(_) => false,
    };
    println!("\n== framed client's metrics (the `metrics` facade, read from the recorder)");
    let metric_lines = metric_lines(METRICS.get().expect("installed"));
    for line in &metric_lines {
        println!("  {line}");
    }

    println!(
        "\n== summary ({CALLS} tool calls per run; the proxy cut {unframed_cuts} and {framed_cuts} responses)"
    );
    let rows = [
        (
            "what the client saw at the cut",
            "JSON parse error".to_owned(),
            "abandoned (Truncated)".to_owned(),
        ),
        (
            "tool calls reported ok",
            unframed.ok.to_string(),
            framed.ok.to_string(),
        ),
        (
            "tool calls failed",
            unframed.failed.to_string(),
            framed.failed.to_string(),
        ),
        (
            "truncations counted",
            unframed.truncations.to_string(),
            framed.truncations.to_string(),
        ),
        (
            "retries counted",
            unframed.retries.to_string(),
            format!("{} (automatic, keyed)", framed.keyed_retries),
        ),
        (
            "attempts per call",
            "2 (hand-made retry)".to_owned(),
            framed
                .attempts
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "results verified (len+sha256+sentinel)",
            unframed.verified.to_string(),
            framed.verified.to_string(),
        ),
        (
            "start without contract (Regime C)",
            "n/a".to_owned(),
            if refused {
                "refused".to_owned()
            } else {
                "STARTED".to_owned()
            },
        ),
    ];
    println!("  {:<40} {:>22} {:>22}", "", "unframed", "framed");
    for (label, left, right) in rows {
        println!("  {label:<40} {left:>22} {right:>22}");
    }
    println!(
        "  {:<40} {:>22} {:>22}",
        "tool executions (backend-a / backend-b)",
        format!("{} / {}", unframed_executions[0], unframed_executions[1]),
        format!("{} / {}", framed_executions[0], framed_executions[1]),
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
    assert_eq!(unframed_cuts, CALLS);
    assert_eq!(
        (framed.ok, framed.truncations, framed.verified),
        (CALLS, CALLS, CALLS)
    );
    assert_eq!(framed_cuts, CALLS);
    assert!(refused, "Regime C must be refused");
    assert_eq!(
        unframed_executions,
        [CALLS, CALLS],
        "unframed retries run the tool again"
    );
    assert_eq!(
        framed_executions,
        [CALLS, 0],
        "keyed retries are deduplicated"
    );
    let counted = |prefix: &str| {
        metric_lines
            .iter()
            .filter(|line| line.starts_with(prefix))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>()
    };
    assert_eq!(
        (
            counted("mcp_framing.client.responses{outcome=abandoned"),
            counted("mcp_framing.client.responses{outcome=clean"),
            counted("mcp_framing.client.retries{"),
            counted("mcp_framing.client.truncations{"),
        ),
        (3, 3, 3, 3)
    );
    assert_eq!(
        framed.attempts, [2; CALLS],
        "one cut, one automatic retry per call"
    );
}

/// The debugging recorder's reader, set once in `main`.
static METRICS: std::sync::OnceLock<Snapshotter> = std::sync::OnceLock::new();

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
