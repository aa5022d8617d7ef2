//! `RedisStore` against a real `redis-server` that each test starts on a free loopback port
//! (SPEC.md §17): the deduplication engine's scenarios (`memory/tests.rs` runs them over the
//! embedded store), the records' keys and lifetimes, an outage, and the claim protocol with
//! replicas (SPEC.md §17.12.1), round trip by round trip through a relay. The server binary must
//! be installed (`scripts/test` does it): a missing one fails the tests, it never skips them.
//! Over a cluster, after restarts, and against the record-format vectors: the modules below.

mod cluster;
#[cfg(feature = "http")]
mod durability;
mod vectors;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::RedisStore;
use crate::RequestKey;
use crate::dedupe::deduplicator::CompleteError;
use crate::dedupe::store::{ClaimRequest, FencingToken};
use crate::dedupe::{DedupeStore, Decision, Deduplicator, LeaseExpiry, StoreError};
use crate::test_support::redis_relay::{Command, RedisRelay, Upstream};
use crate::test_support::redis_servers::RedisServer;
use crate::test_support::store_scenarios as s;

/// The prefix of these tests' records.
const PREFIX: &str = "test:dedupe:";

async fn redis(server: &RedisServer) -> Arc<dyn DedupeStore> {
    Arc::new(
        RedisStore::builder(server.url())
            .prefix(PREFIX)
            .response_timeout(Duration::from_millis(500))
            .connection_timeout(Duration::from_millis(500))
            .reconnect_attempts(1)
            .connect()
            .await
            .expect("connect to the test redis-server"),
    )
}

#[tokio::test]
async fn retry_is_replayed_under_its_own_id() {
    let server = RedisServer::start();
    s::retry_is_replayed_under_its_own_id(redis(&server).await).await;
}

#[tokio::test]
async fn error_results_are_replayed() {
    let server = RedisServer::start();
    s::error_results_are_replayed(redis(&server).await).await;
}

#[tokio::test]
async fn same_key_with_other_arguments_is_a_conflict() {
    let server = RedisServer::start();
    s::other_arguments_are_a_conflict(redis(&server).await).await;
}

#[tokio::test]
async fn another_principals_key_never_matches() {
    let server = RedisServer::start();
    s::another_principal_never_matches(redis(&server).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claims_on_two_store_clients_execute_exactly_once() {
    let server = RedisServer::start();
    // Two connection managers: two backends sharing one Redis.
    s::concurrent_claims_execute_once(redis(&server).await, redis(&server).await).await;
}

#[tokio::test]
async fn duplicate_waits_for_the_attempt_in_flight_and_gets_its_result() {
    let server = RedisServer::start();
    s::duplicate_waits_for_the_attempt_in_flight(redis(&server).await).await;
}

#[tokio::test]
async fn duplicate_gets_in_progress_after_the_bounded_wait() {
    let server = RedisServer::start();
    s::duplicate_gets_in_progress_after_the_wait(redis(&server).await).await;
}

#[tokio::test]
async fn dropped_guard_frees_the_key_only_when_its_lease_expires() {
    let server = RedisServer::start();
    s::dropped_guard_frees_the_key_only_when_its_lease_expires(redis(&server).await).await;
}

#[tokio::test]
async fn a_stale_guards_completion_is_rejected() {
    let server = RedisServer::start();
    s::a_stale_guard_s_completion_is_rejected(redis(&server).await).await;
}

#[tokio::test]
async fn fencing_rejects_stale_renewal_completion_and_release() {
    let server = RedisServer::start();
    s::fencing_rejects_a_stale_completion(redis(&server).await).await;
}

#[tokio::test]
async fn the_heartbeat_keeps_a_long_calls_lease() {
    let server = RedisServer::start();
    s::the_heartbeat_keeps_a_long_call_s_lease(redis(&server).await).await;
}

#[tokio::test]
async fn a_result_too_large_to_store_is_never_executed_again() {
    let server = RedisServer::start();
    s::a_result_too_large_is_never_executed_again(redis(&server).await).await;
}

#[tokio::test]
async fn refuse_policy_reports_outcome_unknown_after_an_expired_lease() {
    let server = RedisServer::start();
    s::refuse_policy_reports_outcome_unknown(redis(&server).await).await;
}

#[tokio::test]
async fn release_frees_the_key_at_once() {
    let server = RedisServer::start();
    s::release_frees_the_key_at_once(redis(&server).await).await;
}

#[tokio::test]
async fn records_expire_after_the_window() {
    let server = RedisServer::start();
    s::records_expire_after_the_window(redis(&server).await).await;
}

#[tokio::test]
async fn every_record_has_a_ttl_under_the_configured_prefix() {
    let server = RedisServer::start();
    let store = redis(&server).await;
    let dedup = s::engine(store);
    let key = RequestKey::random();
    let guard = s::expect_execute(dedup.begin(&s::call("alice", key, json!({}))).await);
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys, [format!("test:dedupe:{}", guard.store_key())]);
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&keys[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(ttl > 0 && ttl <= 24 * 3600 * 1000, "in flight: {ttl}");
    guard.complete(&s::response(1, "x")).await.unwrap();
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&keys[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(ttl > 24 * 3600 * 1000 - 60_000, "completed: {ttl}");
}

#[tokio::test]
async fn redis_stopped_mid_run_refuses_keyed_calls_and_nothing_executes_twice() {
    let mut server = RedisServer::start();
    // A short lease: the completion below is tried again while the lease holds, then given up.
    let dedup = Deduplicator::with_shared_store(redis(&server).await)
        .store_timeout(Duration::from_secs(1))
        .lease(Duration::from_secs(2))
        .wait(Duration::ZERO);
    let done = RequestKey::random();
    s::expect_execute(dedup.begin(&s::call("alice", done, json!({}))).await)
        .complete(&s::response(1, "before the outage"))
        .await
        .unwrap();
    let in_flight = RequestKey::random();
    let guard = s::expect_execute(dedup.begin(&s::call("alice", in_flight, json!({}))).await);

    server.stop();

    for key in [done, in_flight, RequestKey::random()] {
        let started = Instant::now();
        let decision = dedup.begin(&s::call("alice", key, json!({}))).await;
        let Decision::Refused(refusal) = &decision else {
            panic!("a keyed call with the store down must be refused, got {decision:?}")
        };
        assert_eq!(refusal.reason(), "store_unavailable");
        assert!(refusal.is_retryable());
        // Refused within the store timeout and the reconnection attempts, never hanging (the
        // bound is generous: a loaded machine only makes it slower).
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "refused promptly: {:?}",
            started.elapsed()
        );
    }
    // The call in flight cannot record its result: tried again while its lease holds, then
    // reported, never silently lost.
    let started = Instant::now();
    assert!(matches!(
        guard.complete(&s::response(1, "during the outage")).await,
        Err(CompleteError::Store(_))
    ));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let stats = dedup.stats().snapshot();
    assert_eq!(stats.executed, 2);
    assert_eq!(stats.store_unavailable, 3);
}

#[tokio::test]
async fn an_unreachable_redis_fails_to_connect_with_a_redis_error() {
    let mut server = RedisServer::start();
    let url = server.url();
    server.stop();
    let err = RedisStore::builder(url)
        .connection_timeout(Duration::from_millis(300))
        .reconnect_attempts(0)
        .connect()
        .await
        .unwrap_err();
    assert!(err.to_string().starts_with("redis: "), "{err}");
}

#[tokio::test]
async fn a_repeated_completion_with_its_token_is_accepted_and_changes_nothing() {
    let server = RedisServer::start();
    s::a_repeated_completion_with_its_token_is_accepted_once_recorded(redis(&server).await).await;
}

/// An engine on a store whose claims and completions wait up to `wait` for one replica (its
/// store timeouts above `wait`, so that the wait is what ends first).
async fn waiting_for_a_replica(server: &RedisServer, wait: Duration) -> Deduplicator {
    let store = s::store_waiting_for_a_replica(server.url(), PREFIX, wait).await;
    s::engine(Arc::new(store)).store_timeout(wait + Duration::from_secs(10))
}

/// Whether a batch the relay forwards holds a `WAIT`.
fn waits(batch: &[Command]) -> bool {
    batch
        .iter()
        .any(|command| command[0].eq_ignore_ascii_case(b"WAIT"))
}

#[tokio::test]
async fn a_replay_behind_a_primary_without_its_replicas_does_not_wait_for_them() {
    // A primary whose replicas are gone (here: none at all), with claims waiting for one. A
    // call recorded before (by a backend that does not wait) is replayed at once: the replay
    // wrote nothing, so nothing waits on replicas for it. Sent with the claim script, the
    // `WAIT` held every replay for its whole timeout (30 s here).
    let server = RedisServer::start();
    let wait = Duration::from_secs(30);
    let replaying = waiting_for_a_replica(&server, wait).await;
    let call = s::call("alice", RequestKey::random(), json!({"to": "bob"}));
    let recorder = s::engine(redis(&server).await);
    let guard = s::expect_execute(recorder.begin(&call).await);
    guard.complete(&s::response(1, "sent")).await.unwrap();

    let started = Instant::now();
    let decision = replaying.begin(&call).await;
    s::expect_reason(&decision, "replay");
    assert!(
        started.elapsed() < wait / 2,
        "the replay took {:?}: it waited on replicas",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_claim_whose_wait_for_replicas_fails_is_given_back() {
    // Claims wait for one replica of a primary that has none, and the `WAIT` after a claim
    // fails (the server closes its connection). The call never ran, so its claim is given back
    // and the call refused as the store's failure: a retry claims again at once instead of
    // meeting, until the lease ends, a claim whose call never ran.
    let server = RedisServer::start();
    let wait = Duration::from_secs(30);
    let claiming = waiting_for_a_replica(&server, wait).await;
    let call = s::call("alice", RequestKey::random(), json!({"to": "bob"}));
    // Closes the connection of the client blocked in `WAIT`, once there is one.
    let kill_the_waiting_client = async {
        let client = redis::Client::open(server.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let deadline = Instant::now() + wait / 2;
        loop {
            let clients: String = redis::cmd("CLIENT")
                .arg("LIST")
                .query_async(&mut conn)
                .await
                .unwrap();
            let waiting = clients
                .lines()
                .find(|line| line.contains(" cmd=wait "))
                .and_then(|line| line.split(' ').find_map(|field| field.strip_prefix("id=")));
            if let Some(id) = waiting {
                let killed: i64 = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("ID")
                    .arg(id)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert_eq!(killed, 1);
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no client ever waited: {clients}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let started = Instant::now();
    let (decision, ()) = tokio::join!(claiming.begin(&call), kill_the_waiting_client);
    s::expect_reason(&decision, "store_unavailable");
    assert!(
        started.elapsed() < wait / 2,
        "refused after {:?}: it waited on replicas",
        started.elapsed()
    );
    // Given back: a backend that does not wait for replicas executes the call now.
    let other = s::engine(redis(&server).await);
    s::expect_execute(other.begin(&call).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_gone_before_its_replicas_acknowledged_it_is_refused() {
    // A primary with a replica that acknowledges everything. Between the claim and its `WAIT`,
    // the record disappears, as a failover to a replica that had not received it loses it: here
    // the relay deletes it before it forwards the round trip that holds the `WAIT`. The replica
    // acknowledged the claim's write, so a `WAIT` alone reports it replicated, and the call
    // would run on a claim nobody holds (a retry would run it again). The claim is renewed in the
    // `WAIT`'s round trip: the renewal finds it gone, and the call is refused.
    let primary = RedisServer::start();
    let _replica = RedisServer::start_replica_of(&primary);
    let call = s::call("alice", RequestKey::random(), json!({"to": "bob"}));
    let record = format!("{PREFIX}{}", call.store_key());
    let url = primary.url();
    let relay = RedisRelay::start(&primary, Upstream::PerClient, move |batch| {
        if waits(batch) {
            let client = redis::Client::open(url.as_str()).unwrap();
            let _: i64 = redis::cmd("DEL")
                .arg(&record)
                .query(&mut client.get_connection().unwrap())
                .unwrap();
        }
    });
    let wait = Duration::from_secs(30);
    let store = s::store_waiting_for_a_replica(relay.url(), PREFIX, wait).await;
    let claiming = s::engine(Arc::new(store.clone())).store_timeout(wait + Duration::from_secs(10));

    let started = Instant::now();
    s::expect_reason(&claiming.begin(&call).await, "store_unavailable");
    assert!(started.elapsed() < wait / 2, "{:?}", started.elapsed());
    assert_eq!(claiming.stats().snapshot().executed, 0);
    // The store's own error names what happened.
    let claim = ClaimRequest {
        fingerprint: call.fingerprint(),
        token: FencingToken::random(),
        lease: Duration::from_secs(30),
        retention: Duration::from_secs(60),
        on_expired_lease: LeaseExpiry::Reexecute,
    };
    let err = store.claim(&call.store_key(), &claim).await.unwrap_err();
    assert!(matches!(err, StoreError::ClaimLost), "{err}");
    assert_eq!(err.kind(), "claim_lost");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_waited_for_by_replicas_takes_two_round_trips_and_a_replay_one() {
    let primary = RedisServer::start();
    let _replica = RedisServer::start_replica_of(&primary);
    let relay = RedisRelay::start(&primary, Upstream::PerClient, |_| {});
    let wait = Duration::from_secs(30);
    let store = s::store_waiting_for_a_replica(relay.url(), PREFIX, wait).await;
    let dedup = s::engine(Arc::new(store));
    // The scripts are loaded once per server (`EVALSHA`, then `EVAL` on `NOSCRIPT`): a first
    // call loads them.
    let first = s::call("alice", RequestKey::random(), json!({}));
    s::expect_execute(dedup.begin(&first).await)
        .complete(&s::response(1, "first"))
        .await
        .unwrap();

    let call = s::call("alice", RequestKey::random(), json!({}));
    let before = relay.batches().len();
    let guard = s::expect_execute(dedup.begin(&call).await);
    assert_eq!(
        relay.batches()[before..],
        [vec!["EVALSHA"], vec!["EVALSHA", "WAIT"]],
        "the claim, then the renewal and WAIT"
    );
    guard.complete(&s::response(1, "done")).await.unwrap();
    let before = relay.batches().len();
    s::expect_reason(&dedup.begin(&call).await, "replay");
    assert_eq!(relay.batches()[before..], [vec!["EVALSHA"]]);
}
