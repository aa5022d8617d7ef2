//! What survives a Redis restart between two attempts of a keyed call (SPEC.md §17.12), against
//! a real `redis-server` each test starts, stops with SIGKILL and starts again on the same port
//! and directory: with AOF (`appendfsync always`) the retry is replayed, one execution; without
//! persistence the record is gone and the retry executes again, as documented. And what a claim
//! waited for by replicas guarantees when the store's connection is replaced between its round
//! trips.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tower_layer::Layer;
use tower_service::Service;

use crate::RequestKey;
use crate::dedupe::{Deduplicator, RedisStore};
use crate::http::DedupeLayer;
use crate::http::dedupe::DEDUPE_HEADER;
use crate::test_support::redis_relay::{RedisRelay, Upstream};
use crate::test_support::redis_servers::{Persistence, RedisServer};
use crate::test_support::store_scenarios as s;

/// A tool that counts its executions (where no deduplication can hide them).
#[derive(Clone, Default)]
struct Counter(Arc<AtomicUsize>);

impl Service<http::Request<Full<Bytes>>> for Counter {
    type Response = http::Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Full<Bytes>>) -> Self::Future {
        let executions = self.0.clone();
        Box::pin(async move {
            let body = request.into_body().collect().await.unwrap().to_bytes();
            let id = serde_json::from_slice::<Value>(&body).unwrap()["id"].clone();
            let n = executions.fetch_add(1, Ordering::SeqCst) + 1;
            let result = json!({"jsonrpc": "2.0", "id": id, "result": {"execution": n}});
            Ok(http::Response::builder()
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(result.to_string())))
                .unwrap())
        })
    }
}

async fn store(server: &RedisServer) -> RedisStore {
    RedisStore::builder(server.url())
        .prefix("durability:")
        .response_timeout(Duration::from_secs(2))
        .connection_timeout(Duration::from_secs(2))
        .reconnect_attempts(3)
        .connect()
        .await
        .expect("connect to the test redis-server")
}

/// One keyed `tools/call` through the layer: the decision header and the response.
async fn call<S>(service: &mut S, key: RequestKey, id: u64) -> (String, Value)
where
    S: Service<
            http::Request<Full<Bytes>>,
            Response = http::Response<crate::http::DedupeBody>,
        >,
    S::Error: std::fmt::Debug,
{
    let mut request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "charge", "arguments": {"account": "a", "amount": 1}}});
    crate::request::set_request_key(&mut request, key).unwrap();
    let request = http::Request::post("/mcp")
        .body(Full::new(Bytes::from(request.to_string())))
        .unwrap();
    let response = service.call(request).await.unwrap();
    let decision = response.headers()[DEDUPE_HEADER]
        .to_str()
        .unwrap()
        .to_owned();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (decision, serde_json::from_slice(&body).unwrap())
}

/// Executes a keyed call, restarts Redis (SIGKILL, then the same port and directory), retries
/// it: returns the tool's executions and the retry's decision.
async fn restart_between_two_attempts(persistence: Persistence) -> (usize, String) {
    let mut server = RedisServer::start_with(persistence, &[]);
    let dedup = Deduplicator::new(store(&server).await).store_timeout(Duration::from_secs(5));
    let executions = Counter::default();
    let mut service = DedupeLayer::new(dedup).layer(executions.clone());
    let key = RequestKey::random();
    let (decision, response) = call(&mut service, key, 1).await;
    assert_eq!(
        (decision.as_str(), &response["result"]["execution"]),
        ("execute", &json!(1))
    );

    server.restart();

    // The connection manager reconnects by itself; the first command after the restart may
    // find the old connection broken: ask again while the store is unavailable (bounded).
    let mut retry = call(&mut service, key, 2).await;
    for _ in 0..50 {
        if retry.0 != "store_unavailable" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        retry = call(&mut service, key, 2).await;
    }
    assert_eq!(retry.1["id"], 2, "answered under the retry's id");
    (executions.0.load(Ordering::SeqCst), retry.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restarted_with_aof_between_two_attempts_replays_the_retry_one_execution() {
    let (executions, decision) = restart_between_two_attempts(Persistence::AofAlways).await;
    assert_eq!((executions, decision.as_str()), (1, "replay"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restarted_without_persistence_loses_the_record_and_the_retry_executes_again() {
    // The documented re-execution (SPEC.md §17.12): the record did not survive the restart.
    let (executions, decision) = restart_between_two_attempts(Persistence::None).await;
    assert_eq!((executions, decision.as_str()), (2, "execute"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_in_flight_survives_a_restart_with_aof_and_its_completion_lands_after_it() {
    let mut server = RedisServer::start_with(Persistence::AofAlways, &[]);
    let dedup = s::engine(Arc::new(store(&server).await));
    let call = s::call("alice", RequestKey::random(), json!({}));
    let guard = s::expect_execute(dedup.begin(&call).await);
    server.stop();
    // The call finishes while Redis is down: its completion is tried again while the lease
    // holds (30 s), and lands once Redis is back.
    let completion = tokio::spawn(async move { guard.complete(&s::response(1, "done")).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(server.start_again(), "redis-server restarts");
    completion
        .await
        .unwrap()
        .expect("recorded once Redis is back");
    s::expect_reason(&dedup.begin(&call).await, "replay");
    assert_eq!(dedup.stats().snapshot().executed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_connection_is_replaced_before_its_wait_executes_only_once_a_replica_has_it()
{
    // A primary whose one replica stopped acknowledging (frozen), behind a relay that sends
    // every round trip of the store over a new connection to it: a reconnect between the claim
    // and its `WAIT`. `WAIT` counts the writes of its own connection (since Redis 7.2, and in
    // Valkey, only the commands that wrote count; before, any command counted everything written
    // so far): on a connection that wrote nothing it counts the frozen replica at once, and the
    // tool would run on a claim no replica has. The claim is renewed in the `WAIT`'s round trip,
    // so the `WAIT` waits for a write the replica never acknowledges: refused, the tool never
    // ran, the claim given back.
    let primary = RedisServer::start();
    let replica = RedisServer::start_replica_of(&primary);
    replica.pause();
    let relay = RedisRelay::start(&primary, Upstream::PerBatch, |_| {});
    let wait = Duration::from_millis(300);
    let store = s::store_waiting_for_a_replica(relay.url(), "durability:", wait).await;
    let dedup = Deduplicator::new(store).store_timeout(wait + Duration::from_secs(10));
    let executions = Counter::default();
    let mut service = DedupeLayer::new(dedup).layer(executions.clone());

    let (decision, response) = call(&mut service, RequestKey::random(), 1).await;
    assert_eq!(
        decision,
        "store_unavailable",
        "{response}; round trips {:?}; replica {:?}",
        relay.batches(),
        primary.info_field("replication", "slave0")
    );
    assert_eq!(executions.0.load(Ordering::SeqCst), 0, "the tool ran");
    let records: Vec<String> = primary.command(&["KEYS", "durability:*"]);
    assert!(
        records.is_empty(),
        "the claim was not given back: {records:?}"
    );
    // The claim and its `WAIT` did go over two connections.
    let batches = relay.batches();
    let claim = batches
        .iter()
        .position(|batch| *batch == ["EVALSHA"] || *batch == ["EVAL"])
        .expect("a claim");
    assert!(
        batches[claim + 1..]
            .iter()
            .any(|batch| batch.contains(&"WAIT".to_owned())),
        "{batches:?}"
    );
    replica.resume();
}
