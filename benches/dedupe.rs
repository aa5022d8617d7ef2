//! What request-key deduplication costs per tool call, measured in one run against one
//! baseline: a bare Redis `PING` round trip over a `ConnectionManager`, taken in the same run, on
//! the same runtime, the same way. Everything below the unit goes through the public API, as a
//! server mounts it: a `Deduplicator` over a store behind `DedupeLayer`.
//!
//! - `redis/ping`: one `PING` round trip (the unit);
//! - `http-call/*`: a keyed `tools/call` over loopback HTTP (reqwest client, axum server with a
//!   trivial tool) with a fresh key per call (the first-attempt path): `baseline` without
//!   deduplication, `memory` behind `DedupeLayer` over a `MemoryStore`, `redis` over a
//!   `RedisStore` on a `redis-server` the bench starts on a loopback port, `redis-wait` the same
//!   with a replica and `wait_for_replicas(1)`, `redis-cluster` over a three-primary cluster;
//! - `http-replay/*`: the same call retried with a key already completed (the replay path).
//!
//! The pieces are differences of these rows: the layer's own work is `http-call/memory` less
//! `http-call/baseline`; the store's share of a first attempt (its claim: the completion is
//! recorded after the answer is sent) is `http-call/redis` less `http-call/memory`.
//!
//! Every measurement runs its iterations in one task on the runtime's workers (where a server's
//! handler runs), so no measurement pays for a hop from the bench's thread that another does not.
//! Wall clock (the latency includes waiting on sockets and on Redis). After criterion, an
//! interleaved pass runs every operation once per round, in a shuffled order, and takes the
//! median over rounds of each one's ratio to that round's `PING`: on a machine whose load
//! changes while the bench runs, these ratios hold where criterion's one-after-the-other medians
//! do not. `scripts/bench-dedupe` runs it and prints both.

#[path = "../tests/support/dedupe_support/mod.rs"]
mod dedupe_support;

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use criterion::Criterion;
use mcp_framing::RequestKey;
use mcp_framing::dedupe::{DedupeStore, Deduplicator, MemoryStore, RedisStore};
use mcp_framing::http::DedupeLayer;
use serde_json::{Value, json};

const RESULT: &str =
    r#"{"content":[{"type":"text","text":"charged 100 cents to acct-1"}],"isError":false}"#;

async fn tool(body: axum::body::Bytes) -> ([(http::HeaderName, &'static str); 1], String) {
    let request: Value = serde_json::from_slice(&body).expect("JSON");
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{RESULT}}}"#,
            request["id"]
        ),
    )
}

async fn serve(dedup: Option<Deduplicator>) -> String {
    let mut app = Router::new().route("/mcp", post(tool));
    if let Some(dedup) = dedup {
        app = app.layer(DedupeLayer::new(dedup));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn request(key: RequestKey) -> String {
    let mut request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "charge", "arguments": {"account": "acct-1", "amount": 100}}});
    mcp_framing::request::set_request_key(&mut request, key).unwrap();
    request.to_string()
}

async fn call(http: &reqwest::Client, url: &str, key: RequestKey) -> usize {
    let body = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(request(key))
        .send()
        .await
        .expect("loopback")
        .bytes()
        .await
        .expect("body");
    assert!(
        body.ends_with(b"}}"),
        "a complete response from {url}: {}",
        String::from_utf8_lossy(&body)
    );
    body.len()
}

/// One measured operation: each call makes one iteration.
type Op = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Rounds of the interleaved pass.
const ROUNDS: usize = 400;

/// The interleaved pass: every round runs every operation once, in a shuffled order, in one task
/// on the workers, so that a machine whose load changes during the run weighs on all of them
/// alike. Writes each operation's median and the median over rounds of its ratio to that
/// round's `PING` to `target/criterion/interleaved.json` (read by `scripts/bench-dedupe`).
fn interleaved(runtime: &tokio::runtime::Runtime, ops: &[(&'static str, Op)]) {
    let ops: Vec<(&'static str, Op)> = ops.to_vec();
    let samples = runtime
        .block_on(runtime.spawn(async move {
            let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(ROUNDS); ops.len()];
            let mut order: Vec<usize> = (0..ops.len()).collect();
            let mut state = 0x9e37_79b9_7f4a_7c15_u64;
            for _ in 0..ROUNDS {
                for i in (1..order.len()).rev() {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    order.swap(i, (state % (i as u64 + 1)) as usize);
                }
                for &i in &order {
                    let started = Instant::now();
                    (ops[i].1)().await;
                    samples[i].push(started.elapsed().as_secs_f64() * 1e6);
                }
            }
            ops.iter()
                .map(|(name, _)| *name)
                .zip(samples)
                .collect::<Vec<_>>()
        }))
        .expect("the interleaved pass");
    let ping = &samples
        .iter()
        .find(|(name, _)| *name == "redis/ping")
        .expect("redis/ping is measured")
        .1;
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let mut report = serde_json::Map::new();
    for (name, values) in &samples {
        let mut ratios: Vec<f64> = values.iter().zip(ping).map(|(v, p)| v / p).collect();
        let mut values = values.clone();
        report.insert(
            (*name).to_owned(),
            json!({"median_us": median(&mut values), "median_ratio_to_ping": median(&mut ratios)}),
        );
    }
    let path = std::path::Path::new("target/criterion/interleaved.json");
    std::fs::create_dir_all(path.parent().expect("a directory")).expect("target/criterion");
    std::fs::write(path, Value::Object(report).to_string()).expect("the interleaved report");
}

/// Runs `iters` sequential iterations of `op` in one task on the runtime's workers; their total
/// wall-clock time.
fn on_workers<F, Fut>(runtime: &tokio::runtime::Runtime, iters: u64, op: F) -> Duration
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    runtime
        .block_on(runtime.spawn(async move {
            let started = Instant::now();
            for _ in 0..iters {
                op().await;
            }
            started.elapsed()
        }))
        .expect("the measuring task")
}

async fn redis_store(url: String) -> Arc<dyn DedupeStore> {
    Arc::new(
        RedisStore::builder(url)
            .prefix("bench:")
            .connect()
            .await
            .expect("redis"),
    )
}

fn main() {
    let mut criterion = Criterion::default()
        .sample_size(40)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let redis_server = dedupe_support::RedisServer::start();
    // A primary with one replica, for `wait_for_replicas(1)`.
    let replicated = dedupe_support::RedisServer::start();
    let replica = dedupe_support::RedisServer::start();
    let _: () = replica.command(&["REPLICAOF", "127.0.0.1", &replicated.port().to_string()]);
    // Until the replica is synchronised and streaming (before that, WAIT cannot succeed).
    while replicated.replica_ports().len() != 1 {
        std::thread::sleep(Duration::from_millis(50));
    }
    let cluster = dedupe_support::RedisCluster::start(3, 0, dedupe_support::Persistence::None);

    let redis = runtime.block_on(redis_store(redis_server.url()));
    let redis_wait: Arc<dyn DedupeStore> = runtime.block_on(async {
        Arc::new(
            RedisStore::builder(replicated.url())
                .prefix("bench:")
                // Generous: a loaded machine schedules the replica late.
                .wait_for_replicas(1, Duration::from_secs(1))
                .connect()
                .await
                .expect("redis with a replica"),
        )
    });
    let redis_cluster = runtime.block_on(redis_store(cluster.url()));
    let ping = runtime.block_on(async {
        let client = redis::Client::open(redis_server.url()).unwrap();
        redis::aio::ConnectionManager::new(client).await.unwrap()
    });
    // A store bound large enough that the benchmark's records are never evicted.
    let memory: Arc<dyn DedupeStore> =
        Arc::new(MemoryStore::new().max_entries(5_000_000).max_bytes(4 << 30));

    // Every measured operation, once: criterion measures each in turn, then the interleaved
    // pass measures them all in every round.
    let mut ops: Vec<(&str, Op)> = Vec::new();
    let ping_op: Op = Arc::new(move || {
        let mut ping = ping.clone();
        Box::pin(async move {
            let pong: String = redis::cmd("PING").query_async(&mut ping).await.unwrap();
            black_box(pong);
        })
    });
    ops.push(("redis/ping", ping_op));
    let http = reqwest::Client::new();
    let urls: Vec<(&str, String)> = runtime.block_on(async {
        let mut urls = vec![("baseline", serve(None).await)];
        for (name, store) in [
            ("memory", &memory),
            ("redis", &redis),
            ("redis-wait", &redis_wait),
            ("redis-cluster", &redis_cluster),
        ] {
            let dedup = Deduplicator::with_shared_store(store.clone());
            urls.push((name, serve(Some(dedup)).await));
        }
        urls
    });
    for (group, replay) in [("http-call", false), ("http-replay", true)] {
        for (name, url) in &urls {
            let key = RequestKey::random();
            runtime.block_on(call(&http, url, key));
            let (http, url) = (http.clone(), url.clone());
            let name: &'static str = Box::leak(format!("{group}/{name}").into_boxed_str());
            ops.push((
                name,
                Arc::new(move || {
                    let (http, url) = (http.clone(), url.clone());
                    Box::pin(async move {
                        let key = if replay { key } else { RequestKey::random() };
                        black_box(call(&http, &url, key).await);
                    })
                }),
            ));
        }
    }

    for (name, op) in &ops {
        let (group, function) = name.split_once('/').expect("group/name");
        let mut group = criterion.benchmark_group(group);
        group.bench_function(function, |b| {
            b.iter_custom(|iters| {
                let op = op.clone();
                on_workers(&runtime, iters, move || op())
            });
        });
        group.finish();
    }
    interleaved(&runtime, &ops);
    criterion.final_summary();
}
