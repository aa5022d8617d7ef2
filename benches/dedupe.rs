//! What request-key deduplication costs per tool call (issues 10 and 20), measured in one run
//! against one baseline: a bare Redis `PING` round trip over a `ConnectionManager`, taken in the
//! same run, on the same runtime, the same way.
//!
//! - `redis/ping`: one `PING` round trip (the unit);
//! - `redis/claim`: `DedupeStore::claim` of a fresh key on a `RedisStore` (one script, one round
//!   trip);
//! - `engine/{memory,redis}`: `Deduplicator::begin` + `ExecutionGuard::complete` of a fresh key,
//!   no HTTP (the claim and the completion: two round trips on Redis);
//! - `http-call/*`: a keyed `tools/call` over loopback HTTP (reqwest client, axum server with a
//!   trivial tool) with a fresh key per call (the first-attempt path): `baseline` without
//!   deduplication, `memory` behind `DedupeLayer` over a `MemoryStore`, `redis` over a
//!   `RedisStore` on a `redis-server` the bench starts on a loopback port, `redis-wait` the same
//!   with a replica and `wait_for_replicas(1)`, `redis-cluster` over a three-primary cluster;
//! - `http-replay/*`: the same call retried with a key already completed (the replay path).
//!
//! Every measurement runs its iterations in one task on the runtime's workers (where a server's
//! handler runs), so no measurement pays for a hop from the bench's thread that another does not.
//! Wall clock (the latency includes waiting on sockets and on Redis). `scripts/bench-dedupe`
//! runs it and prints the medians with their ratios to `redis/ping`.

#[path = "../tests/dedupe_support/mod.rs"]
mod dedupe_support;

use std::future::Future;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use criterion::Criterion;
use mcp_framing::RequestKey;
use mcp_framing::dedupe::{
    ClaimRequest, Decision, DedupeStore, Deduplicator, FencingToken, LeaseExpiry, MemoryStore,
    RedisStore,
};
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
    mcp_framing::set_request_key(&mut request, key).unwrap();
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
    assert!(body.ends_with(b"}}"), "a complete response");
    body.len()
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
    while replicated
        .info_field("replication", "connected_slaves")
        .as_deref()
        != Some("1")
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let cluster = dedupe_support::RedisCluster::start(3, 0, dedupe_support::Persistence::None);

    let redis = runtime.block_on(redis_store(redis_server.url()));
    let redis_wait: Arc<dyn DedupeStore> = runtime.block_on(async {
        Arc::new(
            RedisStore::builder(replicated.url())
                .prefix("bench:")
                .wait_for_replicas(1, Duration::from_millis(100))
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

    let mut group = criterion.benchmark_group("redis");
    group.bench_function("ping", |b| {
        b.iter_custom(|iters| {
            let ping = ping.clone();
            on_workers(&runtime, iters, move || {
                let mut ping = ping.clone();
                async move {
                    let pong: String = redis::cmd("PING").query_async(&mut ping).await.unwrap();
                    black_box(pong);
                }
            })
        });
    });
    group.bench_function("claim", |b| {
        b.iter_custom(|iters| {
            let store = redis.clone();
            on_workers(&runtime, iters, move || {
                let store = store.clone();
                async move {
                    let call = dedupe_support::call("bench", RequestKey::random(), json!({}));
                    let claim = ClaimRequest {
                        fingerprint: call.fingerprint(),
                        token: FencingToken::random(),
                        lease: Duration::from_secs(30),
                        retention: Duration::from_secs(3600),
                        on_expired_lease: LeaseExpiry::Reexecute,
                    };
                    black_box(store.claim(&call.store_key(), &claim).await.unwrap());
                }
            })
        });
    });
    group.finish();

    let mut group = criterion.benchmark_group("engine");
    let response: Arc<str> = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{RESULT}}}"#).into();
    for (name, store) in [("memory", &memory), ("redis", &redis)] {
        let dedup = Deduplicator::with_shared_store(store.clone());
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let (dedup, response) = (dedup.clone(), response.clone());
                on_workers(&runtime, iters, move || {
                    let (dedup, response) = (dedup.clone(), response.clone());
                    async move {
                        let call = dedupe_support::call("bench", RequestKey::random(), json!({}));
                        let Decision::Execute(guard) = dedup.begin(&call).await else {
                            panic!("fresh key")
                        };
                        guard.complete(response.as_bytes()).await.expect("recorded");
                    }
                })
            });
        });
    }
    group.finish();

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
    for (group_name, replay) in [("http-call", false), ("http-replay", true)] {
        let mut group = criterion.benchmark_group(group_name);
        for (name, url) in &urls {
            let key = RequestKey::random();
            runtime.block_on(call(&http, url, key));
            group.bench_function(*name, |b| {
                b.iter_custom(|iters| {
                    let (http, url) = (http.clone(), url.clone());
                    on_workers(&runtime, iters, move || {
                        let (http, url) = (http.clone(), url.clone());
                        async move {
                            let key = if replay { key } else { RequestKey::random() };
                            black_box(call(&http, &url, key).await);
                        }
                    })
                });
            });
        }
        group.finish();
    }
    criterion.final_summary();
}
