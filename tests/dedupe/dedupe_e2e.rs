//! Exactly-once tool calls across a stateless fleet, end to end over loopback HTTP (SPEC.md §17):
//! two rmcp backends (separate servers, separate Redis connections) behind `FramingLayer::dedupe`,
//! sharing one real `redis-server`; a proxy in front of each that ends tool-call response bodies
//! normally at chosen byte offsets; clients that retry by themselves.

use crate::support::cut_support;
use crate::support::dedupe_support;
use crate::support::metrics_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use dedupe_support::RedisServer;
use futures::TryStreamExt;
use mcp_framing::client::{DiscoveringResolver, RetrySchedule};
use mcp_framing::dedupe::{Deduplicator, RedisStore};
use mcp_framing::rmcp_http::{FramingHttpClient, FramingLayer};
use mcp_framing::{RequestKey, StreamDecoder};
use mcp_framing::{
    http::{Delivery, VerifiedResponse, opt_in_headers},
    internals::http::DEDUPE_HEADER,
    mapping::Mapping,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServiceExt, tool, tool_router};
use serde_json::{Value, json};
use tower_layer::Layer;

// ---------------------------------------------------------------------------------------------
// The tool: charges an account, counting its executions (started and finished) where no
// deduplication can hide them.

#[derive(Debug, serde::Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ChargeArgs {
    /// The account.
    account: String,
    /// Cents.
    amount: u64,
    /// Milliseconds the charge takes.
    #[serde(default)]
    delay_ms: u64,
}

#[derive(Clone, Default)]
struct Ledger {
    started: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
    /// This backend's executions.
    here: Arc<AtomicUsize>,
    /// Accounts charged before (shared by the fleet): `delay_ms` holds only for an account's
    /// first execution, so a re-execution after a crash runs at once.
    charged: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

#[tool_router(server_handler)]
impl Ledger {
    #[tool(description = "Charge an account (not idempotent)")]
    async fn charge(&self, Parameters(args): Parameters<ChargeArgs>) -> String {
        self.started.fetch_add(1, Ordering::SeqCst);
        self.here.fetch_add(1, Ordering::SeqCst);
        let first = self.charged.lock().unwrap().insert(args.account.clone());
        if first {
            tokio::time::sleep(Duration::from_millis(args.delay_ms)).await;
        }
        self.finished.fetch_add(1, Ordering::SeqCst);
        // A receipt long enough to span many frames, so cuts land at many places.
        let lines: String = (0..120)
            .map(|i| {
                format!(
                    "receipt line {i:03}: charged {} cents to {}\n",
                    args.amount, args.account
                )
            })
            .collect();
        format!("charged {} to {}\n{lines}", args.amount, args.account)
    }
}

fn rmcp_service(ledger: Ledger) -> StreamableHttpService<Ledger, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.sse_keep_alive = None;
    StreamableHttpService::new(
        move || Ok(ledger.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

// ---------------------------------------------------------------------------------------------
// The proxy in front of each backend: cuts the first `cuts` attempts of a keyed tool call at
// `offset` bytes (a normal end of body), as set per request key.

#[derive(Default)]
struct Proxy {
    /// Request key -> (byte offset, attempts still to cut).
    plan: std::sync::Mutex<std::collections::HashMap<String, (usize, usize)>>,
    /// The plan for the next tool call with a key not seen yet (clients draw their keys).
    next: std::sync::Mutex<Option<(usize, usize)>>,
    cuts: AtomicUsize,
}

impl Proxy {
    fn arm(&self, offset: usize, attempts: usize) {
        *self.next.lock().unwrap() = Some((offset, attempts));
    }
}

async fn cutting_proxy(
    State(proxy): State<Arc<Proxy>>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    let key = request
        .headers()
        .get("mcp-framing-request-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .expect("request body");
    let is_tool_call =
        serde_json::from_slice::<Value>(&bytes).is_ok_and(|r| r["method"] == "tools/call");
    let cut = key.filter(|_| is_tool_call).and_then(|key| {
        let mut plan = proxy.plan.lock().unwrap();
        if !plan.contains_key(&key) {
            let armed = proxy.next.lock().unwrap().take()?;
            plan.insert(key.clone(), armed);
        }
        let (offset, left) = plan.get_mut(&key)?;
        if *left == 0 {
            return None;
        }
        *left -= 1;
        Some(*offset)
    });
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let Some(limit) = cut else {
        return response;
    };
    proxy.cuts.fetch_add(1, Ordering::SeqCst);
    cut_support::cut_after(response, limit)
}

// ---------------------------------------------------------------------------------------------
// The fleet.

struct Backend {
    addr: SocketAddr,
    /// This backend's executions.
    here: Arc<AtomicUsize>,
    dedup: Deduplicator,
    /// The runtime the backend runs on, so a test can kill it (every task dropped at once).
    runtime: Option<tokio::runtime::Runtime>,
}

impl Backend {
    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A backend on its own runtime (two worker threads), with its own Redis connection.
fn backend(redis_url: &str, proxy: Arc<Proxy>, ledger: Ledger, lease: Duration) -> Backend {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a backend runtime");
    let redis_url = redis_url.to_owned();
    let here = ledger.here.clone();
    let service_ledger = ledger;
    let (addr, dedup) = runtime.block_on(async move {
        let store = RedisStore::builder(redis_url)
            .prefix("e2e:")
            .response_timeout(Duration::from_millis(500))
            .connection_timeout(Duration::from_millis(500))
            .reconnect_attempts(1)
            .connect()
            .await
            .expect("connect to redis");
        // A duplicate waits as long as it takes (it returns as soon as the attempt in flight
        // completes): no retry depends on how fast a loaded machine runs the first attempt.
        let dedup = Deduplicator::new(store)
            .lease(lease)
            .wait(Duration::from_secs(60))
            .store_timeout(Duration::from_secs(5));
        let service = FramingLayer::new()
            .frame_size(1024)
            .dedupe(dedup.clone())
            .layer(rmcp_service(service_ledger));
        let app = Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn_with_state(proxy, cutting_proxy));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (addr, dedup)
    });
    Backend {
        addr,
        here,
        dedup,
        runtime: Some(runtime),
    }
}

/// Round robin over the backends, each discovered before every attempt (per-request discovery):
/// `FramingLayer::dedupe` declares the deduplication of `tools/call` in rmcp's `server/discover`
/// answer (the cutting proxy cuts tool calls only).
fn round_robin(backends: [&Backend; 2]) -> DiscoveringResolver {
    DiscoveringResolver::new(reqwest::Client::new(), backends.map(Backend::url))
}

fn charge(account: &str, amount: u64) -> CallToolRequestParams {
    charge_taking(account, amount, 0)
}

fn charge_taking(account: &str, amount: u64, delay_ms: u64) -> CallToolRequestParams {
    let args = json!({"account": account, "amount": amount, "delay_ms": delay_ms});
    CallToolRequestParams::new("charge").with_arguments(args.as_object().unwrap().clone())
}

/// A keyed, framed tools/call over plain HTTP; returns the decision header and the verified final
/// response.
async fn raw_call(
    url: &str,
    key: RequestKey,
    id: u64,
    args: Value,
    auth: Option<&str>,
) -> (String, Value) {
    let mut request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "charge", "arguments": args}});
    mcp_framing::request::set_request_key(&mut request, key).unwrap();
    let mut builder = reqwest::Client::new()
        .post(url)
        .headers(opt_in_headers(key, false))
        .header("content-type", "application/json")
        .body(request.to_string());
    if let Some(auth) = auth {
        builder = builder.header("authorization", auth);
    }
    let response = builder.send().await.expect("loopback request");
    let decision = response
        .headers()
        .get(DEDUPE_HEADER)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let decoder = StreamDecoder::builder().expect_request_key(key).build();
    let verified = VerifiedResponse::new(response.bytes_stream(), Mapping::Sse, decoder);
    let deliveries: Vec<Delivery> = verified.try_collect().await.expect("a verified response");
    assert!(
        matches!(deliveries.last(), Some(Delivery::Complete(_))),
        "a complete response: {deliveries:?}"
    );
    let last = deliveries
        .iter()
        .rev()
        .find_map(|delivery| match delivery {
            Delivery::Message(message) => Some(message),
            _ => None,
        })
        .expect("a final response")
        .deserialize::<Value>()
        .unwrap();
    (decision, last)
}

fn text_of(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------

#[test]
fn every_cut_call_executes_exactly_once_across_two_backends_and_is_verified() {
    let redis = RedisServer::start();
    let proxy = Arc::new(Proxy::default());
    let started = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let charged = Arc::default();
    let ledger = |_| Ledger {
        started: started.clone(),
        finished: finished.clone(),
        here: Arc::default(),
        charged: Arc::clone(&charged),
    };
    let a = backend(
        &redis.url(),
        proxy.clone(),
        ledger(0),
        Duration::from_secs(5),
    );
    let b = backend(
        &redis.url(),
        proxy.clone(),
        ledger(1),
        Duration::from_secs(5),
    );
    // The client on this thread (a current-thread runtime), so that the test's recorder sees
    // its metrics; the backends run on runtimes of their own.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let metrics = metrics_support::Recorded::new();
    let _recording = metrics.install_local();
    runtime.block_on(async {
        let resolver = round_robin([&a, &b]);
        // The SSE mapping of SPEC.md §15, whose HEAD event leaves before the tool finishes (the
        // offsets below are chosen for it).
        let client = FramingHttpClient::new(reqwest::Client::new())
            .mapping(Mapping::Sse)
            .auto_retry(
                resolver,
                RetrySchedule::default()
                    .max_attempts(6)
                    .initial_backoff(Duration::from_millis(20)),
            );
        let retry_stats = client.retry_stats().unwrap();
        let transport = StreamableHttpClientTransport::with_client(
            client,
            StreamableHttpClientTransportConfig::with_uri(a.url()),
        );
        let peer = ().serve(transport).await.expect("handshake");

        // An uncut call to learn the length of a framed tool-call response.
        let clean = peer
            .call_tool(charge("probe", 1))
            .await
            .expect("a clean call");
        assert!(
            clean.content[0]
                .as_text()
                .unwrap()
                .text
                .starts_with("charged 1 to probe")
        );
        let framed_len = {
            let (_, response) = raw_call(
                &a.url(),
                RequestKey::random(),
                1,
                json!({"account": "len", "amount": 1}),
                None,
            )
            .await;
            response.to_string().len() * 4 / 3 // the SSE mapping's base64: a lower bound on the body
        };
        let baseline = started.load(Ordering::SeqCst);
        assert_eq!(baseline, 2);

        // Cut each call's first attempts at a different offset, from the first byte to the end.
        let calls = 24usize;
        let mut expected_cuts = 0;
        for i in 0..calls {
            let account = format!("acct-{i}");
            // The first calls are cut inside the HEAD event (the first ~97 bytes, sent before
            // the tool finishes) and take a while: their retries find them in flight and wait.
            // The others are cut anywhere in the response, once the tool has finished.
            let (offset, delay_ms) = if i < 6 {
                (1 + i * 16, 150)
            } else {
                (1 + (i - 6) * framed_len / (calls - 6), 0)
            };
            let cut_attempts = 1 + i % 3; // up to three cuts in a row
            expected_cuts += cut_attempts;
            proxy.arm(offset, cut_attempts);
            let result = peer
                .call_tool(charge_taking(&account, 100 + i as u64, delay_ms))
                .await
                .expect("the call completes after its retries");
            let text = &result.content[0].as_text().expect("text").text;
            assert!(
                text.starts_with(&format!("charged {} to {account}\n", 100 + i)),
                "{text}"
            );
            assert!(text.ends_with(&format!(
                "receipt line 119: charged {} cents to {account}\n",
                100 + i
            )));
        }
        let executions = started.load(Ordering::SeqCst) - baseline;
        assert_eq!(executions, calls, "exactly one execution per logical call");
        assert_eq!(
            finished.load(Ordering::SeqCst),
            started.load(Ordering::SeqCst)
        );
        assert_eq!(proxy.cuts.load(Ordering::SeqCst), expected_cuts);
        let retries = retry_stats.snapshot();
        assert_eq!(
            retries.retries as usize, expected_cuts,
            "every cut retried once: {retries:?}"
        );
        assert_eq!(retries.gave_up, 0);
        assert_eq!(
            metrics.counter("mcp_framing.client.responses", &[("outcome", "abandoned")]) as usize,
            expected_cuts,
            "every cut counted"
        );
        assert_eq!(
            metrics.counter(
                "mcp_framing.client.retry_decisions",
                &[("decision", "retry")]
            ) as usize,
            expected_cuts
        );
        assert_eq!(
            metrics.counter("mcp_framing.client.retries", &[]) as usize,
            expected_cuts
        );
        let (da, db) = (a.dedup.stats().snapshot(), b.dedup.stats().snapshot());
        assert_eq!((da.executed + db.executed) as usize, calls + 2);
        assert_eq!(
            (da.replayed + db.replayed) as usize,
            expected_cuts,
            "every retry replayed"
        );
        // Whether a retry found its call still in flight depends on timing (the retries that
        // did are printed below); `two_attempts_of_one_key_in_flight_at_once_on_two_backends_
        // execute_once` covers that path deterministically.
        println!(
            "cut-proxy run: {calls} logical calls, {expected_cuts} cuts, {executions} executions \
             ({:.2} per call), {} retries, replays {}+{}, waits {}+{}",
            executions as f64 / calls as f64,
            retries.retries,
            da.replayed,
            db.replayed,
            da.waited,
            db.waited
        );
        let _ = peer.cancel().await;
    });
}

/// Two backends sharing `redis`, with one tool counter.
fn fleet(
    redis: &RedisServer,
    lease: Duration,
) -> (Backend, Backend, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let proxy = Arc::new(Proxy::default());
    let started = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let charged = Arc::default();
    let ledger = || Ledger {
        started: started.clone(),
        finished: finished.clone(),
        here: Arc::default(),
        charged: Arc::clone(&charged),
    };
    let a = backend(&redis.url(), proxy.clone(), ledger(), lease);
    let b = backend(&redis.url(), proxy, ledger(), lease);
    (a, b, started, finished)
}

#[test]
fn two_attempts_of_one_key_in_flight_at_once_on_two_backends_execute_once() {
    let redis = RedisServer::start();
    let (a, b, started, _) = fleet(&redis, Duration::from_secs(5));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        for round in 0..5 {
            let key = RequestKey::random();
            let args = json!({"account": format!("race-{round}"), "amount": 7, "delay_ms": 300});
            let (url_a, url_b) = (a.url(), b.url());
            let (first, second) = tokio::join!(
                raw_call(&url_a, key, 1, args.clone(), None),
                raw_call(&url_b, key, 2, args.clone(), None)
            );
            let mut decisions = [first.0.as_str(), second.0.as_str()];
            decisions.sort_unstable();
            // One executes; the other waits for it and replays its result.
            assert_eq!(decisions, ["execute", "replay"], "round {round}");
            assert_eq!(text_of(&first.1), text_of(&second.1));
            assert_eq!(
                (first.1["id"].as_u64(), second.1["id"].as_u64()),
                (Some(1), Some(2))
            );
        }
        assert_eq!(started.load(Ordering::SeqCst), 5);
        assert_eq!(
            a.here.load(Ordering::SeqCst) + b.here.load(Ordering::SeqCst),
            5
        );
    });
}

#[test]
fn same_key_with_other_arguments_is_a_conflict_and_executes_nothing() {
    let redis = RedisServer::start();
    let (a, b, started, _) = fleet(&redis, Duration::from_secs(5));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let key = RequestKey::random();
        let (decision, _) =
            raw_call(&a.url(), key, 1, json!({"account": "x", "amount": 5}), None).await;
        assert_eq!(decision, "execute");
        let (decision, response) = raw_call(
            &b.url(),
            key,
            2,
            json!({"account": "x", "amount": 500}),
            None,
        )
        .await;
        assert_eq!(decision, "key_conflict");
        assert_eq!(response["id"], 2);
        assert_eq!(response["error"]["code"], -32080);
        // The refusal as SPEC.md §17.9 writes it: final, not retryable.
        let refusal = &response["error"]["data"]["io.github.mcp-framing/dedupe"];
        assert_eq!(
            (refusal["reason"].as_str(), refusal["retryable"].as_bool()),
            (Some("key_conflict"), Some(false))
        );
        assert_eq!(started.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn another_principals_key_does_not_match() {
    let redis = RedisServer::start();
    let (a, b, started, _) = fleet(&redis, Duration::from_secs(5));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let key = RequestKey::random();
        let args = json!({"account": "shared", "amount": 9});
        let (alice, _) = raw_call(&a.url(), key, 1, args.clone(), Some("Bearer alice")).await;
        let (bob, _) = raw_call(&b.url(), key, 1, args.clone(), Some("Bearer bob")).await;
        let (alice_again, _) = raw_call(&b.url(), key, 2, args.clone(), Some("Bearer alice")).await;
        assert_eq!(
            (alice.as_str(), bob.as_str(), alice_again.as_str()),
            ("execute", "execute", "replay")
        );
        assert_eq!(started.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn redis_stopped_mid_run_refuses_keyed_calls_and_nothing_executes_twice() {
    let mut redis = RedisServer::start();
    let (a, b, started, _) = fleet(&redis, Duration::from_secs(5));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let done = RequestKey::random();
        let args = json!({"account": "before", "amount": 1});
        assert_eq!(
            raw_call(&a.url(), done, 1, args.clone(), None).await.0,
            "execute"
        );
        redis.stop();
        for (url, key) in [
            (a.url(), done),
            (b.url(), done),
            (b.url(), RequestKey::random()),
        ] {
            let (decision, response) = raw_call(&url, key, 2, args.clone(), None).await;
            assert_eq!(decision, "store_unavailable");
            assert_eq!(response["error"]["code"], -32084);
            let refusal = &response["error"]["data"]["io.github.mcp-framing/dedupe"];
            assert_eq!(
                (refusal["reason"].as_str(), refusal["retryable"].as_bool()),
                (Some("store_unavailable"), Some(true))
            );
        }
        // Through the retrying rmcp client: the refusal is retryable, retried, then returned.
        let resolver = round_robin([&a, &b]);
        let client = FramingHttpClient::new(reqwest::Client::new()).auto_retry(
            resolver,
            RetrySchedule::default()
                .max_attempts(3)
                .initial_backoff(Duration::from_millis(10)),
        );
        let stats = client.retry_stats().unwrap();
        let transport = StreamableHttpClientTransport::with_client(
            client,
            StreamableHttpClientTransportConfig::with_uri(a.url()),
        );
        let peer = ().serve(transport).await.expect("the handshake is not deduplicated");
        let err = peer.call_tool(charge("during", 2)).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("deduplication store is unavailable"),
            "{err}"
        );
        assert_eq!(
            stats.snapshot().refusals_retried,
            2,
            "{:?}",
            stats.snapshot()
        );
        assert_eq!(
            started.load(Ordering::SeqCst),
            1,
            "nothing executed while the store was down"
        );
        let _ = peer.cancel().await;
    });
}

#[test]
fn a_backend_that_dies_mid_execution_frees_the_key_when_its_lease_expires() {
    let redis = RedisServer::start();
    let lease = Duration::from_millis(1200);
    let (mut a, b, started, finished) = fleet(&redis, lease);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let key = RequestKey::random();
        let args = json!({"account": "crash", "amount": 3, "delay_ms": 30_000});
        // The claim is made after this instant; renewals only extend it, so no other attempt
        // can take it over before `sent + lease`.
        let sent = Instant::now();
        let first = tokio::spawn({
            let (url, args) = (a.url(), args.clone());
            async move {
                let mut request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "charge", "arguments": args}});
                mcp_framing::request::set_request_key(&mut request, key).unwrap();
                reqwest::Client::new()
                    .post(url)
                    .headers(opt_in_headers(key, false))
                    .header("content-type", "application/json")
                    .body(request.to_string())
                    .send()
                    .await
                    .map(|r| r.status())
            }
        });
        // Wait (bounded) until the first attempt is executing; the charge takes 30 s, so it is
        // still running when the backend dies, however loaded the machine.
        let waiting = Instant::now();
        while started.load(Ordering::SeqCst) == 0 {
            assert!(
                waiting.elapsed() < Duration::from_secs(60),
                "the first attempt never started"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let died = Instant::now();
        a.kill(); // every task of backend A dropped: the handler, its heartbeat, the capture
        let _ = first.await;
        assert_eq!(
            finished.load(Ordering::SeqCst),
            0,
            "the handler future was dropped mid-execution"
        );

        // Retries on B: "in progress" while the dead claim's lease runs, then executed again
        // (LeaseExpiry::Reexecute, SPEC.md §17.5).
        let mut refusals = 0;
        let response = loop {
            let (decision, response) = raw_call(&b.url(), key, 2, args.clone(), None).await;
            match decision.as_str() {
                "in_progress" => refusals += 1,
                "execute" => break response,
                other => panic!("unexpected {other}: {response}"),
            }
            assert!(
                died.elapsed() < Duration::from_secs(60),
                "the lease never expired"
            );
        };
        assert!(
            sent.elapsed() >= lease,
            "freed only after the lease: {:?} after the first attempt",
            sent.elapsed()
        );
        // B's wait outlasts the lease: its first attempt waits the lease out and takes over;
        // either way nothing ran before the lease expired.
        println!(
            "crash run: re-executed {:?} after the backend died, {refusals} in-progress refusal(s)",
            died.elapsed()
        );
        assert!(text_of(&response).starts_with("charged 3 to crash"));
        assert_eq!(
            (
                started.load(Ordering::SeqCst),
                finished.load(Ordering::SeqCst)
            ),
            (2, 1)
        );
        // From now on the result is replayed.
        assert_eq!(raw_call(&b.url(), key, 3, args, None).await.0, "replay");
    });
}
