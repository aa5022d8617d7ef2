//! Exactly-once under faults, counted: keyed tool calls through a proxy that cuts 30%
//! of tool-call responses at random offsets, to four backend processes sharing a Redis, while a
//! backend is killed and restarted and Redis is restarted (one server with AOF), or a cluster
//! primary is stopped, its replica promoted and the node restarted (a cluster, `WAIT` for one
//! replica). Every execution of the tool is written to a ledger file by the process that ran it;
//! at the end every logical call's executions are counted, and each call that did not execute
//! exactly once is listed with its cause. `scripts/soak` builds and runs it:
//!
//! ```sh
//! bash scripts/soak                     # the long run: 10,000 calls on each store
//! bash scripts/soak --short             # CI: 600 calls on each store
//! cargo run --release --features rmcp,redis,demo,internals --example dedupe_soak -- --help
//! dedupe_soak run --calls 10000 --callers 64 --cut 0.3 --store single|cluster|both
//! ```
//!
//! The process runs as the driver (`run`: Redis, the backends, the proxy, the callers, the
//! faults, the report) or as one backend (`backend`: rmcp behind `FramingLayer::dedupe` over a
//! `RedisStore`, spawned by the driver). It exits with status 1 when a call executed other than
//! once without a cause the run knows of (a backend killed while it ran the call), or failed.

mod help;

#[path = "../tests/support/cut_support.rs"]
mod cut_support;
#[path = "../tests/support/dedupe_support/mod.rs"]
mod dedupe_support;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use dedupe_support::{Persistence, RedisCluster, RedisServer};
use futures_util::StreamExt;
use mcp_framing::RequestKey;
use mcp_framing::client::{CallError, DiscoveringResolver, RetrySchedule, RetryingClient};
use mcp_framing::dedupe::{Deduplicator, RedisStore};
use mcp_framing::http::DedupeLayer;
use mcp_framing::rmcp_http::FramingLayer;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool, tool_router};
use serde_json::{Value, json};
use tower_layer::Layer;

/// The lease of the backends' claims: longer than a cluster failover takes (node timeout 2 s,
/// then the election), so a claim whose renewals fail during one is not taken over.
const LEASE: Duration = Duration::from_secs(10);
/// How long a duplicate waits for the attempt in flight (past the lease: it takes over a dead
/// holder's claim itself).
const WAIT: Duration = Duration::from_secs(15);
const BACKENDS: usize = 4;
/// The backend that is killed and restarted.
const VICTIM: usize = 1;

// ---------------------------------------------------------------------------------------------
// A backend process.

#[derive(Debug, serde::Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct WorkArgs {
    /// The logical call.
    call: u64,
    /// Milliseconds the work takes.
    ms: u64,
}

#[derive(Clone)]
struct Worker {
    ledger: Arc<Mutex<std::fs::File>>,
}

impl Worker {
    /// One line per event with the wall-clock time (the driver orders executions of one call
    /// across processes by it), one `write` each (appended: a killed process loses nothing
    /// written).
    fn log(&self, event: &str, call: u64) {
        let line = format!("{event} {call} {}\n", unix_micros());
        let mut ledger = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
        ledger
            .write_all(line.as_bytes())
            .expect("the ledger is writable");
    }
}

#[tool_router(server_handler)]
impl Worker {
    #[tool(description = "Do some work (not idempotent: every execution is in the ledger)")]
    async fn work(&self, Parameters(args): Parameters<WorkArgs>) -> String {
        self.log("start", args.call);
        tokio::time::sleep(Duration::from_millis(args.ms)).await;
        self.log("finish", args.call);
        // Long enough to span a few frames, so cuts land at many places.
        (0..24)
            .map(|i| format!("call {} line {i:02}: done\n", args.call))
            .collect()
    }
}

/// Microseconds since the Unix epoch (one clock for every process of the run).
fn unix_micros() -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    u64::try_from(since.as_micros()).expect("before the year 500000")
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

async fn backend(args: &[String]) {
    let redis = arg(args, "--redis").expect("--redis URL");
    let port: u16 = arg(args, "--port")
        .and_then(|p| p.parse().ok())
        .expect("--port");
    let ledger_dir = PathBuf::from(arg(args, "--ledger-dir").expect("--ledger-dir"));
    let replicas: u32 = arg(args, "--wait-replicas").map_or(0, |n| n.parse().expect("a number"));
    // The store may be restarting when this backend starts: try for a while.
    let started = Instant::now();
    let store = loop {
        let connected = RedisStore::builder(redis.clone())
            .prefix("soak:")
            .response_timeout(Duration::from_secs(1))
            .connection_timeout(Duration::from_secs(1))
            .reconnect_attempts(2)
            .wait_for_replicas(replicas, Duration::from_millis(250))
            .connect()
            .await;
        match connected {
            Ok(store) => break store,
            Err(err) if started.elapsed() > Duration::from_secs(60) => panic!("redis: {err}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let dedup = Deduplicator::new(store)
        .lease(LEASE)
        .wait(WAIT)
        .store_timeout(Duration::from_secs(3));
    let ledger = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ledger_dir.join(format!("{}.log", std::process::id())))
        .expect("a ledger file");
    let worker = Worker {
        ledger: Arc::new(Mutex::new(ledger)),
    };
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.sse_keep_alive = None;
    let rmcp = StreamableHttpService::new(
        move || Ok(worker.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let service = FramingLayer::new()
        .frame_size(512)
        .dedupe(DedupeLayer::new(dedup))
        .layer(rmcp);
    let app = Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind the backend's port");
    println!("listening {}", std::process::id());
    std::io::stdout().flush().expect("stdout");
    axum::serve(listener, app).await.expect("serve");
}

// ---------------------------------------------------------------------------------------------
// The driver: Redis, the backends, the proxy, the callers, the faults, the report.

/// A small deterministic random source (splitmix64), seeded per run.
struct Random(AtomicU64);

impl Random {
    fn next(&self) -> u64 {
        let mut z = self
            .0
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A backend process the driver owns.
struct Backend {
    child: Option<Child>,
}

impl Backend {
    fn start(port: u16, redis: &str, ledger_dir: &Path, replicas: u32) -> (Self, u32) {
        let mut child = Command::new(std::env::current_exe().expect("this program"))
            .args(["backend", "--redis", redis, "--port", &port.to_string()])
            .arg("--ledger-dir")
            .arg(ledger_dir)
            .args(["--wait-replicas", &replicas.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn a backend");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the backend's first line");
        let pid = line
            .strip_prefix("listening ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("a backend did not start: {line:?}"));
        (Self { child: Some(child) }, pid)
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.kill();
    }
}

struct Proxy {
    http: reqwest::Client,
    ports: Vec<u16>,
    next: AtomicUsize,
    cut_rate: f64,
    random: Random,
    /// The longest tool-call response seen (cut offsets are drawn below it).
    longest: AtomicUsize,
    cuts: AtomicU64,
    tool_calls: AtomicU64,
}

/// Forwards a request to the backends in turn (to the next one when a backend refuses the
/// connection: the request never reached it), and cuts the response of a tool call with the
/// configured probability, at a random offset: its body ends normally there.
async fn proxy(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 16 << 20)
        .await
        .unwrap_or_default();
    let tool_call =
        serde_json::from_slice::<Value>(&bytes).is_ok_and(|r| r["method"] == "tools/call");
    let first = proxy.next.fetch_add(1, Ordering::Relaxed);
    let mut upstream = None;
    for i in 0..proxy.ports.len() {
        let port = proxy.ports[(first + i) % proxy.ports.len()];
        let mut forward = proxy
            .http
            .post(format!("http://127.0.0.1:{port}/mcp"))
            .body(bytes.clone());
        for (name, value) in &parts.headers {
            if name != http::header::HOST && name != http::header::CONTENT_LENGTH {
                forward = forward.header(name, value);
            }
        }
        match forward.send().await {
            Ok(response) => {
                upstream = Some(response);
                break;
            }
            Err(err) if err.is_connect() => continue,
            Err(_) => break, // sent, then failed: it may have run; the client decides
        }
    }
    let Some(upstream) = upstream else {
        return (http::StatusCode::BAD_GATEWAY, "no backend answered").into_response();
    };
    let mut response = Response::builder().status(upstream.status());
    for (name, value) in upstream.headers() {
        if name != http::header::CONTENT_LENGTH && name != http::header::TRANSFER_ENCODING {
            response = response.header(name, value);
        }
    }
    // A backend killed mid-response ends its body abruptly: so does the proxy.
    let body = Body::from_stream(upstream.bytes_stream());
    let response = response.body(body).expect("a response");
    if !tool_call {
        return response;
    }
    proxy.tool_calls.fetch_add(1, Ordering::Relaxed);
    let cut = (proxy.random.below(1_000_000) as f64) < proxy.cut_rate * 1_000_000.0;
    if !cut {
        return measure(response, proxy.clone());
    }
    proxy.cuts.fetch_add(1, Ordering::Relaxed);
    let longest = proxy.longest.load(Ordering::Relaxed).max(512);
    let offset = proxy.random.below(longest as u64) as usize;
    cut_support::cut_after(response, offset)
}

/// `response`, noting its length once its body ended.
fn measure(response: Response, proxy: Arc<Proxy>) -> Response {
    let (parts, body) = response.into_parts();
    let seen = Arc::new(AtomicUsize::new(0));
    let stream = body.into_data_stream().map(move |piece| {
        if let Ok(piece) = &piece {
            let total = seen.fetch_add(piece.len(), Ordering::Relaxed) + piece.len();
            proxy.longest.fetch_max(total, Ordering::Relaxed);
        }
        piece
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// The store a run uses.
enum Store {
    Single(RedisServer),
    Cluster(RedisCluster),
}

impl Store {
    fn url(&self) -> String {
        match self {
            Self::Single(server) => server.url(),
            Self::Cluster(cluster) => cluster.url(),
        }
    }

    fn describe(&self) -> &'static str {
        match self {
            Self::Single(_) => "one redis-server, AOF appendfsync always, restarted mid-run",
            Self::Cluster(_) => {
                "a Redis Cluster (3 primaries, 1 replica each, AOF always, WAIT 1), a primary \
                 stopped mid-run, its replica promoted, the node restarted"
            }
        }
    }

    /// The fault: restart the server; or stop a primary, wait for its replica's promotion,
    /// restart the node and wait for it to catch up as a replica. Returns what happened.
    fn fault(&mut self) -> String {
        match self {
            Self::Single(server) => {
                let started = Instant::now();
                server.restart();
                format!(
                    "redis-server killed and restarted ({:?} down)",
                    started.elapsed()
                )
            }
            Self::Cluster(cluster) => {
                let started = Instant::now();
                let victim = cluster
                    .nodes
                    .iter()
                    .position(|n| n.info_field("replication", "role").as_deref() == Some("master"))
                    .expect("a primary");
                cluster.nodes[victim].stop();
                cluster.wait_healthy(Duration::from_secs(120));
                let promoted = started.elapsed();
                assert!(cluster.nodes[victim].start_again(), "the node restarts");
                cluster.wait_healthy(Duration::from_secs(120));
                cluster.wait_replicas_online(1, Duration::from_secs(120));
                format!(
                    "primary on port {} killed; replica promoted after {promoted:?}; the node \
                     back as a replica after {:?}",
                    cluster.nodes[victim].port(),
                    started.elapsed()
                )
            }
        }
    }
}

/// One execution of the tool, from a ledger.
struct Execution {
    pid: u32,
    /// Microseconds since the Unix epoch.
    started: u64,
    finished: bool,
}

/// What one logical call came to.
struct Finished {
    call: u64,
    latency: Duration,
    attempts: u32,
    error: Option<String>,
}

struct Settings {
    calls: u64,
    callers: usize,
    cut: f64,
    seed: u64,
    /// After this, callers start no new call (the run is bounded in time as well as in calls).
    deadline: Duration,
}

/// The longest one logical call may take, retries included, before it counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// One run against one store; returns whether every exception was explained.
async fn run_one(mut store: Store, settings: &Settings) -> bool {
    let ledger_dir = std::env::temp_dir().join(format!(
        "mcp-framing-soak-{}-{}",
        std::process::id(),
        dedupe_support::free_port()
    ));
    std::fs::create_dir_all(&ledger_dir).expect("a ledger directory");
    let replicas = u32::from(matches!(store, Store::Cluster(_)));
    let url = store.url();
    let ports: Vec<u16> = (0..BACKENDS).map(|_| dedupe_support::free_port()).collect();
    let mut backends = Vec::new();
    let mut pids = Vec::new();
    for &port in &ports {
        let (backend, pid) = Backend::start(port, &url, &ledger_dir, replicas);
        backends.push(backend);
        pids.push(pid);
    }
    let proxy = Arc::new(Proxy {
        http: reqwest::Client::new(),
        ports: ports.clone(),
        next: AtomicUsize::new(0),
        cut_rate: settings.cut,
        random: Random(AtomicU64::new(settings.seed)),
        longest: AtomicUsize::new(0),
        cuts: AtomicU64::new(0),
        tool_calls: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/mcp", axum::routing::post(self::proxy))
        .with_state(proxy.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    // Every attempt is resolved through the proxy: a backend's `server/discover` answer declares
    // the deduplication of `tools/call` (`FramingLayer::dedupe`); the proxy cuts tool calls only.
    let http = reqwest::Client::new();
    let resolver = DiscoveringResolver::new(http.clone(), [proxy_url]);
    let client = RetryingClient::new(http, resolver).schedule(
        RetrySchedule::default()
            .max_attempts(60)
            .initial_backoff(Duration::from_millis(20))
            .max_backoff(Duration::from_secs(1)),
    );
    let next = Arc::new(AtomicU64::new(0));
    let rediscovered = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let mut callers = Vec::new();
    for _ in 0..settings.callers {
        let (client, next, done, finished, rediscovered) = (
            client.clone(),
            next.clone(),
            done.clone(),
            finished.clone(),
            rediscovered.clone(),
        );
        let calls = settings.calls;
        let stop_at = started + settings.deadline;
        callers.push(tokio::spawn(async move {
            loop {
                if Instant::now() > stop_at {
                    return;
                }
                let call = next.fetch_add(1, Ordering::Relaxed);
                if call >= calls {
                    return;
                }
                let mut request = json!({"jsonrpc": "2.0", "id": call, "method": "tools/call",
                    "params": {"name": "work", "arguments": {"call": call, "ms": call % 20}}});
                mcp_framing::request::set_request_key(&mut request, RequestKey::random())
                    .expect("a tools/call takes a key");
                let sent = Instant::now();
                // A discovery that fails (its backend killed under it) ends the call before its
                // next attempt is sent: the caller makes the call again under the same key, which
                // the fleet executes at most once.
                let keyed = async {
                    loop {
                        match client.call(request.clone()).await {
                            Err(CallError::Resolve(_)) => {
                                rediscovered.fetch_add(1, Ordering::Relaxed);
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                            outcome => return outcome,
                        }
                    }
                };
                let outcome = tokio::time::timeout(CALL_TIMEOUT, keyed).await;
                let expected = format!("call {call} line 00: done");
                let (attempts, error) = match outcome {
                    Err(_) => (
                        0,
                        Some(format!("no final response within {CALL_TIMEOUT:?}")),
                    ),
                    Ok(Ok(outcome)) => {
                        let response: serde_json::Value = outcome.deserialize().unwrap_or_default();
                        let text = response["result"]["content"][0]["text"]
                            .as_str()
                            .unwrap_or_default();
                        let error = (!text.starts_with(&expected)).then(|| {
                            format!(
                                "unexpected response {}",
                                String::from_utf8_lossy(&outcome.response)
                            )
                        });
                        (outcome.attempts, error)
                    }
                    Ok(Err(err)) => (0, Some(err.to_string())),
                };
                finished.lock().unwrap().push(Finished {
                    call,
                    latency: sent.elapsed(),
                    attempts,
                    error,
                });
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    // The faults, at fixed points of the run.
    let at = |fraction: f64| (settings.calls as f64 * fraction) as u64;
    let wait_for = |count: u64| {
        let done = done.clone();
        let stop_at = started + settings.deadline;
        async move {
            while done.load(Ordering::Relaxed) < count && Instant::now() < stop_at {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let mut faults = Vec::new();
    wait_for(at(0.2)).await;
    let killed_pid = pids[VICTIM];
    backends[VICTIM].kill();
    let killed_micros = unix_micros();
    let killed_at = started.elapsed();
    faults.push(format!(
        "{:>7.1?}  backend-{VICTIM} (pid {killed_pid}) killed (SIGKILL)",
        killed_at
    ));
    wait_for(at(0.3)).await;
    let (backend, pid) = Backend::start(ports[VICTIM], &url, &ledger_dir, replicas);
    backends[VICTIM] = backend;
    pids.push(pid);
    faults.push(format!(
        "{:>7.1?}  backend-{VICTIM} restarted on the same port (pid {pid})",
        started.elapsed()
    ));
    wait_for(at(0.5)).await;
    let fault_at = started.elapsed();
    let (store_back, what) = tokio::task::spawn_blocking(move || {
        let what = store.fault();
        (store, what)
    })
    .await
    .expect("the store fault");
    store = store_back;
    faults.push(format!("{fault_at:>7.1?}  {what}"));
    for caller in callers {
        caller.await.expect("a caller");
    }
    let wall = started.elapsed();
    for backend in &mut backends {
        backend.kill();
    }
    let completed = done.load(Ordering::Relaxed);

    // The ledgers: every execution (process, start time, finished), by the process that ran it.
    let mut executions: HashMap<u64, Vec<Execution>> = HashMap::new();
    for entry in std::fs::read_dir(&ledger_dir).expect("the ledgers") {
        let path = entry.expect("a ledger").path();
        let pid: u32 = path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse().ok())
            .expect("a ledger named by pid");
        let text = std::fs::read_to_string(&path).expect("a ledger");
        let mut open: HashMap<u64, usize> = HashMap::new();
        for line in text.lines() {
            let mut fields = line.split(' ');
            let (Some(event), Some(call), Some(at)) = (fields.next(), fields.next(), fields.next())
            else {
                panic!("a ledger line is `event call micros`: {line:?}")
            };
            let call: u64 = call.parse().expect("a call number");
            let at: u64 = at.parse().expect("a time");
            let runs = executions.entry(call).or_default();
            match event {
                "start" => {
                    open.insert(call, runs.len());
                    runs.push(Execution {
                        pid,
                        started: at,
                        finished: false,
                    });
                }
                "finish" => {
                    let i = open.remove(&call).expect("a finish after its start");
                    runs[i].finished = true;
                }
                other => panic!("unknown ledger event {other}"),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&ledger_dir);

    let mut finished = std::mem::take(&mut *finished.lock().unwrap());
    finished.sort_by_key(|f| f.call);
    let mut latencies: Vec<Duration> = finished.iter().map(|f| f.latency).collect();
    latencies.sort_unstable();
    let percentile = |p: f64| {
        let last = latencies.len().saturating_sub(1);
        latencies
            .get((last as f64 * p) as usize)
            .copied()
            .unwrap_or_default()
    };
    let attempts: u64 = finished.iter().map(|f| u64::from(f.attempts)).sum();
    let mut histogram: BTreeMap<usize, u64> = BTreeMap::new();
    let mut effects: BTreeMap<usize, u64> = BTreeMap::new();
    let mut exceptions = Vec::new();
    let mut unexplained = 0;
    for call in 0..completed.min(settings.calls) {
        let mut runs = executions.remove(&call).unwrap_or_default();
        runs.sort_by_key(|run| run.started);
        *histogram.entry(runs.len()).or_default() += 1;
        *effects
            .entry(runs.iter().filter(|r| r.finished).count())
            .or_default() += 1;
        if runs.len() == 1 {
            continue;
        }
        // Explained: the first execution ran on the killed process, started before the kill,
        // and exactly one other followed it (the retry, once the dead claim's lease expired).
        let first = &runs[0];
        let killed_first =
            runs.len() == 2 && first.pid == killed_pid && first.started < killed_micros;
        let cause = match (killed_first, first.finished) {
            (true, false) => Some(format!(
                "backend-{VICTIM} (pid {killed_pid}) was killed while it executed the call (started, \
                 never finished); its lease expired and a retry executed it again (LeaseExpiry::Reexecute, \
                 SPEC.md §17.5)"
            )),
            (true, true) => Some(format!(
                "backend-{VICTIM} (pid {killed_pid}) was killed after the tool finished, before its \
                 result was recorded; its lease expired and a retry executed it again"
            )),
            (false, _) => None,
        };
        let runs_text: Vec<String> = runs
            .iter()
            .map(|run| {
                let at = run.started as f64 / 1e6 - killed_micros as f64 / 1e6;
                let done = if run.finished {
                    "finished"
                } else {
                    "did not finish"
                };
                format!("pid {} started {at:+.3}s from the kill, {done}", run.pid)
            })
            .collect();
        match cause {
            Some(cause) => exceptions.push(format!(
                "call {call}: {} executions ({}): {cause}",
                runs.len(),
                runs_text.join(", ")
            )),
            None => {
                unexplained += 1;
                exceptions.push(format!(
                    "call {call}: {} executions ({}): UNEXPLAINED",
                    runs.len(),
                    runs_text.join(", ")
                ));
            }
        }
    }
    let failed: Vec<&Finished> = finished.iter().filter(|f| f.error.is_some()).collect();

    println!(
        "\n## soak: {} logical calls, {} callers, {} backends, {:.0}% of tool-call responses cut",
        settings.calls,
        settings.callers,
        BACKENDS,
        settings.cut * 100.0
    );
    println!("store: {}", store.describe());
    println!("faults (time since start):");
    for fault in &faults {
        println!("  {fault}");
    }
    println!(
        "wall {wall:.1?}, throughput {:.1} calls/s; latency per logical call (retries included): \
         p50 {:.1?}, p99 {:.1?}, max {:.1?}",
        completed as f64 / wall.as_secs_f64(),
        percentile(0.5),
        percentile(0.99),
        latencies.last().copied().unwrap_or_default()
    );
    println!(
        "attempts {attempts} ({} retries); tool-call responses through the proxy {}, cut {}; \
         calls made again under their key after a failed discovery {}",
        attempts.saturating_sub(settings.calls),
        proxy.tool_calls.load(Ordering::Relaxed),
        proxy.cuts.load(Ordering::Relaxed),
        rediscovered.load(Ordering::Relaxed)
    );
    let show = |map: &BTreeMap<usize, u64>| {
        map.iter()
            .map(|(n, calls)| format!("{n}: {calls}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "executions per logical call (started): {}",
        show(&histogram)
    );
    println!("executions per logical call (finished): {}", show(&effects));
    println!("exceptions ({}):", exceptions.len());
    for exception in &exceptions {
        println!("  {exception}");
    }
    println!("failed calls ({}):", failed.len());
    for f in &failed {
        println!(
            "  call {}: {}",
            f.call,
            f.error.as_deref().unwrap_or_default()
        );
    }
    if completed < settings.calls {
        println!(
            "stopped at the deadline ({:?}): {completed} of {} calls made",
            settings.deadline, settings.calls
        );
    }
    let pass = unexplained == 0 && failed.is_empty() && completed == settings.calls;
    println!(
        "verdict: {}",
        if pass {
            "PASS (every call executed exactly once, or its exception has a known cause)"
        } else {
            "FAIL"
        }
    );
    pass
}

async fn run(args: &[String]) -> bool {
    let settings = Settings {
        calls: arg(args, "--calls").map_or(10_000, |n| n.parse().expect("--calls N")),
        callers: arg(args, "--callers").map_or(64, |n| n.parse().expect("--callers N")),
        cut: arg(args, "--cut").map_or(0.3, |n| n.parse().expect("--cut FRACTION")),
        seed: arg(args, "--seed").map_or(20, |n| n.parse().expect("--seed N")),
        deadline: Duration::from_secs(
            arg(args, "--max-seconds").map_or(1800, |n| n.parse().expect("--max-seconds N")),
        ),
    };
    let which = arg(args, "--store").unwrap_or_else(|| "both".to_owned());
    let mut pass = true;
    if which == "single" || which == "both" {
        let server = RedisServer::start_with(Persistence::AofAlways, &[]);
        pass &= run_one(Store::Single(server), &settings).await;
    }
    if which == "cluster" || which == "both" {
        let cluster = RedisCluster::start(3, 1, Persistence::AofAlways);
        pass &= run_one(Store::Cluster(cluster), &settings).await;
    }
    pass
}

/// `--help`, and the usage lines of an argument error.
const HELP: &str = "\
usage: dedupe_soak run [--calls N] [--callers N] [--cut FRACTION] [--seed N] [--max-seconds N]
                       [--store single|cluster|both]
       dedupe_soak backend --redis URL --port PORT --ledger-dir DIR [--wait-replicas N]
run:   cargo run --release --features rmcp,redis,demo,internals --example dedupe_soak -- run
       (bash scripts/soak builds and runs it; redis-server on PATH)

Keyed tool calls through a proxy that cuts responses, to four backend processes sharing a Redis,
under restarts and failovers; every execution is counted. Exit status 1 when a call executed
other than once without a known cause.

  run                    the driver: Redis, the backends, the proxy, the callers, the faults
    --calls N            logical calls per store (default 10000)
    --callers N          concurrent callers (default 64)
    --cut FRACTION       share of tool-call responses cut (default 0.3)
    --seed N             the random seed (default 20)
    --max-seconds N      give up after N seconds (default 1800)
    --store STORE        single (one Redis with AOF), cluster, or both (default)
  backend                one backend, spawned by the driver
  -h, --help             print this help";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if help::asked(&args, HELP) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match args.first().map(String::as_str) {
        Some("backend") => runtime.block_on(backend(&args)),
        Some("run") => {
            if !runtime.block_on(run(&args)) {
                std::process::exit(1);
            }
        }
        Some(other) => {
            help::usage_error("dedupe_soak", HELP, &format!("unknown command {other:?}"))
        }
        None => help::usage_error("dedupe_soak", HELP, "run or backend?"),
    }
}
