//! Two separate backend processes sharing one Redis: exactly-once tool calls across processes.
//!
//! `scripts/fleet-demo` runs it: it starts `redis-server` on a free loopback port, two
//! `fleet backend` processes (rmcp behind `FramingLayer::dedupe` over a `RedisStore`, each with
//! its own connection; backend-a also cuts every tool-call response the first time, as a
//! misbehaving proxy would), then `fleet client`, which calls the tool through the retrying
//! client and prints the attempts per call and the executions per backend. rmcp answers
//! `server/discover`; the layer writes its framing contract, deduplication included, into the
//! result (SPEC.md §11.2, §17.11): the backend declares nothing by hand.
//!
//! ```sh
//! bash scripts/fleet-demo                  # all of it (needs redis-server on PATH)
//! cargo run --features rmcp,redis,demo --example fleet -- --help
//! fleet backend --redis redis://127.0.0.1:6379/ --name backend-a --cut
//! fleet client --endpoints http://127.0.0.1:PORT_A/mcp,http://127.0.0.1:PORT_B/mcp --calls 6
//! ```

mod help;

use std::collections::HashSet;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use mcp_framing::client::{AttemptReport, DiscoveringResolver, RetrySchedule, RetryingClient};
use mcp_framing::dedupe::{Deduplicator, RedisStore};
use mcp_framing::http::DedupeLayer;
use mcp_framing::rmcp_http::FramingLayer;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool, tool_router};
use serde_json::{Value, json};
use tower_layer::Layer;

#[derive(Debug, serde::Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ChargeArgs {
    /// The account.
    account: String,
    /// Cents.
    amount: u64,
}

#[derive(Clone)]
struct Ledger {
    executions: Arc<AtomicUsize>,
}

#[tool_router(server_handler)]
impl Ledger {
    #[tool(description = "Charge an account (not idempotent)")]
    async fn charge(&self, Parameters(args): Parameters<ChargeArgs>) -> String {
        self.executions.fetch_add(1, Ordering::SeqCst);
        let receipt: String = (0..60)
            .map(|i| {
                format!(
                    "receipt line {i:02}: {} cents to {}\n",
                    args.amount, args.account
                )
            })
            .collect();
        format!("charged {} to {}\n{receipt}", args.amount, args.account)
    }
}

struct Backend {
    name: String,
    executions: Arc<AtomicUsize>,
    cut: bool,
    cut_keys: Mutex<HashSet<String>>,
}

/// Tool calls cut once per key on the cutting backend; everything to rmcp behind the layer.
async fn front(
    State(backend): State<Arc<Backend>>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 16 << 20)
        .await
        .unwrap_or_default();
    let message: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let key = parts
        .headers
        .get("mcp-framing-request-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let cut = backend.cut
        && message["method"] == "tools/call"
        && key.is_some_and(|key| backend.cut_keys.lock().unwrap().insert(key));
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if !cut {
        return response;
    }
    // End the body normally after 1500 bytes, once per key: a proxy's idle timeout. (The whole
    // body is read first: the tool has run, only its response is lost.)
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    Response::from_parts(parts, Body::from(bytes.slice(..bytes.len().min(1500))))
}

async fn stats(State(backend): State<Arc<Backend>>) -> Response {
    let body =
        json!({"name": backend.name, "executions": backend.executions.load(Ordering::SeqCst)});
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// `--help`, and the usage line of an argument error.
const HELP: &str = "\
usage: fleet backend --redis URL [--name NAME] [--cut] | fleet client --endpoints URL,URL [--calls N]
run:   cargo run --features rmcp,redis,demo --example fleet -- backend|client [OPTIONS]
       (bash scripts/fleet-demo starts redis-server, two backends and the client)

Exactly-once tool calls across processes sharing one Redis.

  backend               rmcp behind FramingLayer::dedupe over a RedisStore, on a free loopback
                        port (the first line on stdout: `NAME listening URL`)
    --redis URL         the Redis (or Valkey) to share, e.g. redis://127.0.0.1:6379/
    --name NAME         its name in the stats (default backend)
    --cut               cut every tool-call response the first time, as a misbehaving proxy
  client                calls the tool through RetryingClient over the endpoints in turn
    --endpoints URL,URL the backends' URLs
    --calls N           logical calls (default 6)
  -h, --help            print this help";

/// Ends the process on a bad command line (status 2).
fn usage_error(err: &str) -> ! {
    help::usage_error("fleet", HELP, err)
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

async fn backend(args: &[String]) {
    let redis = arg(args, "--redis").unwrap_or_else(|| usage_error("backend needs --redis URL"));
    let name = arg(args, "--name").unwrap_or_else(|| "backend".to_owned());
    let store = RedisStore::builder(redis)
        .prefix("fleet-demo:")
        .connect()
        .await
        .expect("redis");
    let dedupe = DedupeLayer::new(Deduplicator::new(store));
    let executions = Arc::new(AtomicUsize::new(0));
    let state = Arc::new(Backend {
        name: name.clone(),
        executions: executions.clone(),
        cut: args.iter().any(|a| a == "--cut"),
        cut_keys: Mutex::default(),
    });
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    let ledger = Ledger { executions };
    let rmcp = StreamableHttpService::new(
        move || Ok(ledger.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let mcp = FramingLayer::new()
        .frame_size(512)
        .dedupe(dedupe)
        .layer(rmcp);
    let app = Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(state.clone(), front))
        .route("/stats", get(stats))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    println!(
        "{name} listening http://{}/mcp",
        listener.local_addr().expect("address")
    );
    std::io::stdout().flush().expect("stdout");
    axum::serve(listener, app).await.expect("serve");
}

async fn client(args: &[String]) {
    let endpoints: Vec<String> = arg(args, "--endpoints")
        .unwrap_or_else(|| usage_error("client needs --endpoints URL,URL"))
        .split(',')
        .map(str::to_owned)
        .collect();
    let calls: usize = arg(args, "--calls").map_or(6, |n| {
        n.parse()
            .unwrap_or_else(|e| usage_error(&format!("--calls: {e}")))
    });
    let http = reqwest::Client::new();
    let abandoned = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let log = Arc::new(Mutex::new(Vec::new()));
    let client = RetryingClient::new(
        http.clone(),
        DiscoveringResolver::new(http.clone(), endpoints.clone()),
    )
    .schedule(RetrySchedule::default().initial_backoff(Duration::from_millis(20)))
    .observe({
        let log = log.clone();
        let abandoned = abandoned.clone();
        move |r: &AttemptReport<'_>| {
            if r.outcome.verdict.name() == "abandoned" {
                abandoned.fetch_add(1, Ordering::SeqCst);
            }
            let decision = r
                .decision
                .map_or(String::new(), |d| format!(" -> {}", d.name()));
            log.lock().unwrap().push(format!(
                "attempt {} via {}: {}{decision}",
                r.attempt, r.endpoint, r.outcome.verdict
            ));
        }
    });
    let mut attempts = 0;
    for i in 0..calls {
        let request = json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
            "params": {"name": "charge", "arguments": {"account": format!("acct-{i}"), "amount": 100 + i}}});
        let outcome = client.call(request).await.expect("the call completes");
        attempts += outcome.attempts as usize;
        let response: Value = outcome.deserialize().expect("a verified JSON-RPC response");
        let text = response["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        println!(
            "call {i}: {} after {} attempt(s)",
            text.lines().next().unwrap_or_default(),
            outcome.attempts
        );
        for line in log.lock().unwrap().drain(..) {
            println!("    {line}");
        }
    }
    let mut total = 0;
    for endpoint in &endpoints {
        let stats: Value = http
            .get(endpoint.replace("/mcp", "/stats"))
            .send()
            .await
            .expect("stats")
            .json()
            .await
            .expect("stats JSON");
        total += stats["executions"].as_u64().unwrap_or(0);
        println!("{}: {} execution(s)", stats["name"], stats["executions"]);
    }
    println!(
        "client: {calls} logical calls, {attempts} attempts, {} retries, {} abandoned responses",
        attempts - calls,
        abandoned.load(Ordering::SeqCst)
    );
    println!("tool executions across the fleet: {total} for {calls} calls");
    assert_eq!(
        total as usize, calls,
        "exactly one execution per logical call"
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if help::asked(&args, HELP) {
        return;
    }
    match args.first().map(String::as_str) {
        Some("backend") => backend(&args).await,
        Some("client") => client(&args).await,
        Some(other) => usage_error(&format!("unknown command {other:?}")),
        None => usage_error("backend or client?"),
    }
}
