//! Added latency of request-key deduplication per tool call (issue 10), measured in one run:
//!
//! - `http-call/*`: a keyed `tools/call` over loopback HTTP (reqwest client, axum server with a
//!   trivial tool) with a fresh key per call (the first-attempt path: claim, execute, record),
//!   `baseline` without deduplication, `memory` behind `DedupeLayer` over a `MemoryStore`,
//!   `redis` over a `RedisStore` on a `redis-server` the bench starts on a loopback port;
//! - `http-replay/*`: the same call retried with a key already completed (the replay path);
//! - `engine/*`: `Deduplicator::begin` + `ExecutionGuard::complete` alone, no HTTP.
//!
//! Wall clock (the latency includes waiting on sockets and on Redis). `scripts/bench-dedupe`
//! runs it and prints the medians and the ratios to the baseline.

#[path = "../tests/dedupe_support/mod.rs"]
mod dedupe_support;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use criterion::Criterion;
use mcp_framing::RequestKey;
use mcp_framing::dedupe::{Decision, DedupeStore, Deduplicator, MemoryStore, RedisStore};
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
    let redis: Arc<dyn DedupeStore> = runtime.block_on(async {
        Arc::new(
            RedisStore::builder(redis_server.url())
                .prefix("bench:")
                .connect()
                .await
                .expect("redis"),
        )
    });
    // A store bound large enough that the benchmark's records are never evicted.
    let memory: Arc<dyn DedupeStore> =
        Arc::new(MemoryStore::new().max_entries(5_000_000).max_bytes(4 << 30));
    let http = reqwest::Client::new();
    let urls = runtime.block_on(async {
        [
            ("baseline", serve(None).await),
            (
                "memory",
                serve(Some(Deduplicator::with_shared_store(memory.clone()))).await,
            ),
            (
                "redis",
                serve(Some(Deduplicator::with_shared_store(redis.clone()))).await,
            ),
        ]
    });

    let mut group = criterion.benchmark_group("http-call");
    for (name, url) in &urls {
        group.bench_function(*name, |b| {
            b.iter(|| runtime.block_on(call(&http, url, black_box(RequestKey::random()))));
        });
    }
    group.finish();

    let mut group = criterion.benchmark_group("http-replay");
    for (name, url) in &urls {
        let key = RequestKey::random();
        runtime.block_on(call(&http, url, key));
        group.bench_function(*name, |b| {
            b.iter(|| runtime.block_on(call(&http, url, black_box(key))))
        });
    }
    group.finish();

    let mut group = criterion.benchmark_group("engine");
    let response = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{RESULT}}}"#);
    for (name, store) in [("memory", &memory), ("redis", &redis)] {
        let dedup = Deduplicator::with_shared_store(store.clone());
        group.bench_function(name, |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let call = dedupe_support::call("bench", RequestKey::random(), json!({"n": 1}));
                    let Decision::Execute(guard) = dedup.begin(&call).await else {
                        panic!("fresh key")
                    };
                    guard.complete(response.as_bytes()).await.expect("recorded");
                })
            });
        });
    }
    group.finish();
    criterion.final_summary();
}
