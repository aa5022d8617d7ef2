//! The deduplication engine's scenarios, run by the unit tests against every store (`MemoryStore`
//! in `dedupe/memory/tests.rs`, `RedisStore` on one server and on a cluster in
//! `dedupe/redis/tests.rs`), and their helpers. They drive the engine call by call
//! (`Deduplicator::begin`, its decisions and guards) and the store's claim protocol, which only
//! the crate names.
#![allow(dead_code)] // each store's tests run the scenarios that apply to it

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

pub(crate) use super::keyed_calls::{call, response};
use crate::RequestKey;
#[cfg(feature = "redis")]
use crate::dedupe::RedisStore;
use crate::dedupe::deduplicator::{CompleteError, Recorded};
use crate::dedupe::scope::{Scope, StoreKey};
use crate::dedupe::store::{
    ClaimOutcome, ClaimRequest, Completed, FencingToken, StoreFuture, StoredResponse,
};
use crate::dedupe::{
    Decision, DedupeStore, Deduplicator, ExecutionGuard, KeyedCall, LeaseExpiry, Principal,
    StoreError,
};

/// The engine of the scenarios: the default lease (30 s, so that no claim expires unless a
/// scenario means it to, however loaded the machine), no wait.
pub(crate) fn engine(store: Arc<dyn DedupeStore>) -> Deduplicator {
    Deduplicator::with_shared_store(store)
        .wait(Duration::ZERO)
        .store_timeout(Duration::from_secs(5))
}

/// A lease the scenarios let expire, and how long they sleep to be past it. Nothing asserts
/// that a lease is still live after it: sleeping at least this long is all that matters, so a
/// loaded machine only makes the scenario slower (with `MemoryStore` under a paused clock it
/// takes no time).
pub(crate) const SHORT_LEASE: Duration = Duration::from_millis(300);
pub(crate) const PAST_SHORT_LEASE: Duration = Duration::from_millis(400);

/// A store at `url`, under `prefix`, whose claims and completions wait up to `wait` for one
/// replica (its response timeout above `wait`, so that the wait is what ends first).
#[cfg(feature = "redis")]
pub(crate) async fn store_waiting_for_a_replica(
    url: String,
    prefix: &str,
    wait: Duration,
) -> RedisStore {
    RedisStore::builder(url)
        .prefix(prefix)
        .response_timeout(wait + Duration::from_secs(5))
        .wait_for_replicas(1, wait)
        .connect()
        .await
        .expect("connect to the test redis-server")
}

#[track_caller]
pub(crate) fn expect_execute(decision: Decision) -> ExecutionGuard {
    match decision {
        Decision::Execute(guard) => guard,
        other => panic!("expected Execute, got {other:?}"),
    }
}

#[track_caller]
pub(crate) fn expect_reason(decision: &Decision, reason: &str) {
    assert_eq!(decision.name(), reason, "decision {decision:?}");
}

// ---------------------------------------------------------------------------------------------
// Scenarios, run against every store.

pub(crate) async fn retry_is_replayed_under_its_own_id(store: Arc<dyn DedupeStore>) {
    let dedup = engine(store);
    let key = RequestKey::random();
    let guard = expect_execute(dedup.begin(&call("alice", key, json!({"to": "bob"}))).await);
    assert_eq!(guard.generation(), 1);
    guard
        .complete(&response(1, "sent"))
        .await
        .expect("recorded");
    for retry_id in [2u64, 3] {
        let Decision::Replay(stored) = dedup.begin(&call("alice", key, json!({"to": "bob"}))).await
        else {
            panic!("a retry must be replayed");
        };
        let replayed: Value = serde_json::from_str(&stored.to_response(&retry_id.into())).unwrap();
        assert_eq!(replayed["id"], retry_id);
        assert_eq!(replayed["result"]["content"][0]["text"], "sent");
    }
    assert_eq!(dedup.stats().snapshot().executed, 1);
    assert_eq!(dedup.stats().snapshot().replayed, 2);
}

pub(crate) async fn error_results_are_replayed(store: Arc<dyn DedupeStore>) {
    let dedup = engine(store);
    let key = RequestKey::random();
    let guard = expect_execute(dedup.begin(&call("alice", key, json!({}))).await);
    let error = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"mailbox full"}}"#;
    guard.complete(error).await.unwrap();
    let Decision::Replay(stored) = dedup.begin(&call("alice", key, json!({}))).await else {
        panic!("an error result is replayed too");
    };
    assert!(stored.is_error());
    assert_eq!(
        stored.to_response(&json!("r-2")),
        r#"{"jsonrpc":"2.0","id":"r-2","error":{"code":-32000,"message":"mailbox full"}}"#
    );
}

pub(crate) async fn other_arguments_are_a_conflict(store: Arc<dyn DedupeStore>) {
    let dedup = engine(store);
    let key = RequestKey::random();
    let guard = expect_execute(dedup.begin(&call("alice", key, json!({"to": "bob"}))).await);
    // While in flight and after completion alike.
    expect_reason(
        &dedup.begin(&call("alice", key, json!({"to": "eve"}))).await,
        "key_conflict",
    );
    guard.complete(&response(1, "sent")).await.unwrap();
    let decision = dedup.begin(&call("alice", key, json!({"to": "eve"}))).await;
    let Decision::Refused(refusal) = &decision else {
        panic!("{decision:?}")
    };
    assert!(!refusal.is_retryable());
    assert_eq!(refusal.code(), -32080);
    assert_eq!(dedup.stats().snapshot().executed, 1);
}

pub(crate) async fn another_principal_never_matches(store: Arc<dyn DedupeStore>) {
    let dedup = engine(store);
    let key = RequestKey::random();
    expect_execute(dedup.begin(&call("alice", key, json!({}))).await)
        .complete(&response(1, "alice's"))
        .await
        .unwrap();
    // Bob sends Alice's key: his own record, executed, never Alice's result.
    let bob = expect_execute(dedup.begin(&call("bob", key, json!({}))).await);
    bob.complete(&response(1, "bob's")).await.unwrap();
    let anonymous = expect_execute(dedup.begin(&call("", key, json!({}))).await);
    drop(anonymous);
    let Decision::Replay(stored) = dedup.begin(&call("bob", key, json!({}))).await else {
        panic!()
    };
    assert!(String::from_utf8_lossy(stored.json()).contains("bob's"));
    // Another tool with the same key and principal is another record too.
    let scope = Scope::new(
        Principal::from_id("alice"),
        "tools/call",
        Some("open_ticket"),
    );
    let other_tool = KeyedCall::new(scope, key, call("alice", key, json!({})).fingerprint());
    expect_execute(dedup.begin(&other_tool).await);
}

pub(crate) async fn concurrent_claims_execute_once(
    a: Arc<dyn DedupeStore>,
    b: Arc<dyn DedupeStore>,
) {
    let engines = [engine(a), engine(b)];
    let key = RequestKey::random();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let dedup = engines[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            dedup.begin(&call("alice", key, json!({"n": 1}))).await
        }));
    }
    // The claim that won is completed only once every attempt has decided: however late a task
    // starts on a loaded machine, each one races the claim in flight, never its completion.
    let mut names = Vec::new();
    let mut winners = Vec::new();
    for task in tasks {
        let decision = task.await.unwrap();
        names.push(decision.name());
        if let Decision::Execute(guard) = decision {
            winners.push(guard);
        }
    }
    assert_eq!(
        names.iter().filter(|n| **n == "execute").count(),
        1,
        "{names:?}"
    );
    assert!(
        names.iter().all(|n| *n == "execute" || *n == "in_progress"),
        "{names:?}"
    );
    for guard in winners {
        guard.complete(&response(1, "once")).await.unwrap();
    }
    for dedup in &engines {
        expect_reason(
            &dedup.begin(&call("alice", key, json!({"n": 1}))).await,
            "replay",
        );
    }
}

pub(crate) async fn duplicate_waits_for_the_attempt_in_flight(store: Arc<dyn DedupeStore>) {
    let dedup = engine(store).wait(Duration::from_secs(60));
    let key = RequestKey::random();
    let guard = expect_execute(dedup.begin(&call("alice", key, json!({}))).await);
    let waiter = {
        let dedup = dedup.clone();
        tokio::spawn(async move { dedup.begin(&call("alice", key, json!({}))).await })
    };
    // Complete only once the duplicate has found the claim in flight and waits.
    while dedup.stats().snapshot().waited == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    guard.complete(&response(1, "done")).await.unwrap();
    expect_reason(&waiter.await.unwrap(), "replay");
    assert_eq!(dedup.stats().snapshot().waited, 1);
}

pub(crate) async fn duplicate_gets_in_progress_after_the_wait(store: Arc<dyn DedupeStore>) {
    let dedup = engine(store).wait(Duration::from_millis(200));
    let key = RequestKey::random();
    let _guard = expect_execute(dedup.begin(&call("alice", key, json!({}))).await);
    let started = Instant::now();
    let decision = dedup.begin(&call("alice", key, json!({}))).await;
    let waited = started.elapsed();
    let Decision::Refused(refusal) = &decision else {
        panic!("{decision:?}")
    };
    assert_eq!(refusal.reason(), "in_progress");
    assert!(refusal.is_retryable());
    // It waited the whole wait (never less); how much longer depends on the machine.
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    assert_eq!(dedup.stats().snapshot().waited, 1);
}

pub(crate) async fn dropped_guard_frees_the_key_only_when_its_lease_expires(
    store: Arc<dyn DedupeStore>,
) {
    // A holder that dies does not free its key: the next attempt finds it in flight.
    let long = engine(store.clone());
    let key = RequestKey::random();
    drop(expect_execute(
        long.begin(&call("alice", key, json!({}))).await,
    ));
    expect_reason(
        &long.begin(&call("alice", key, json!({}))).await,
        "in_progress",
    );
    // Once its lease has expired, the key is free: executed again, as generation 2.
    let short = engine(store).lease(SHORT_LEASE);
    let key = RequestKey::random();
    let claimed = Instant::now();
    drop(expect_execute(
        short.begin(&call("alice", key, json!({}))).await,
    ));
    tokio::time::sleep(PAST_SHORT_LEASE).await;
    let second = expect_execute(short.begin(&call("alice", key, json!({}))).await);
    assert!(claimed.elapsed() >= SHORT_LEASE);
    assert_eq!(
        second.generation(),
        2,
        "a re-execution after an expired lease is generation 2"
    );
    second.complete(&response(1, "second")).await.unwrap();
    expect_reason(&short.begin(&call("alice", key, json!({}))).await, "replay");
}

/// A store whose renewals fail, as if the holder lost its connection to the store while its
/// call runs, until it is healed; everything else (and every renewal once healed) passes through.
#[derive(Debug)]
pub(crate) struct NoRenewals {
    inner: Arc<dyn DedupeStore>,
    healed: AtomicBool,
}

impl NoRenewals {
    /// Renewals on `inner` fail until [`NoRenewals::heal`].
    pub(crate) fn new(inner: Arc<dyn DedupeStore>) -> Self {
        Self {
            inner,
            healed: AtomicBool::new(false),
        }
    }

    /// From now on renewals pass through.
    pub(crate) fn heal(&self) {
        self.healed.store(true, Ordering::SeqCst);
    }
}

impl DedupeStore for NoRenewals {
    fn claim<'a>(
        &'a self,
        key: &'a StoreKey,
        request: &'a ClaimRequest,
    ) -> StoreFuture<'a, Result<ClaimOutcome, StoreError>> {
        self.inner.claim(key, request)
    }
    fn renew<'a>(
        &'a self,
        key: &'a StoreKey,
        token: FencingToken,
        lease: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        if self.healed.load(Ordering::SeqCst) {
            self.inner.renew(key, token, lease)
        } else {
            Box::pin(async move { Err(StoreError::Timeout { after: lease }) })
        }
    }
    fn complete<'a>(
        &'a self,
        key: &'a StoreKey,
        token: FencingToken,
        outcome: &'a Completed,
        retention: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        self.inner.complete(key, token, outcome, retention)
    }
    fn release<'a>(
        &'a self,
        key: &'a StoreKey,
        token: FencingToken,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        self.inner.release(key, token)
    }
}

/// A store that never answers (unreachable, with no error to report).
#[derive(Debug)]
pub(crate) struct Silent;

impl DedupeStore for Silent {
    fn claim<'a>(
        &'a self,
        _: &'a StoreKey,
        _: &'a ClaimRequest,
    ) -> StoreFuture<'a, Result<ClaimOutcome, StoreError>> {
        Box::pin(std::future::pending())
    }
    fn renew<'a>(
        &'a self,
        _: &'a StoreKey,
        _: FencingToken,
        _: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        Box::pin(std::future::pending())
    }
    fn complete<'a>(
        &'a self,
        _: &'a StoreKey,
        _: FencingToken,
        _: &'a Completed,
        _: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        Box::pin(std::future::pending())
    }
    fn release<'a>(
        &'a self,
        _: &'a StoreKey,
        _: FencingToken,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        Box::pin(std::future::pending())
    }
}

pub(crate) async fn a_stale_guard_s_completion_is_rejected(store: Arc<dyn DedupeStore>) {
    // The first holder cannot renew (cut off from the store) and outlives its lease.
    let stalled = engine(Arc::new(NoRenewals::new(store.clone()))).lease(SHORT_LEASE);
    let healthy = engine(store);
    let key = RequestKey::random();
    let stale = expect_execute(stalled.begin(&call("alice", key, json!({}))).await);
    tokio::time::sleep(PAST_SHORT_LEASE).await;
    let current = expect_execute(healthy.begin(&call("alice", key, json!({}))).await);
    assert_ne!(current.token(), stale.token());
    assert_eq!(current.generation(), 2);
    let err = stale.complete(&response(1, "stale")).await.unwrap_err();
    assert!(matches!(err, CompleteError::LeaseLost), "{err:?}");
    assert_eq!(stalled.stats().snapshot().lease_lost, 1);
    current.complete(&response(1, "current")).await.unwrap();
    let Decision::Replay(stored) = healthy.begin(&call("alice", key, json!({}))).await else {
        panic!()
    };
    assert!(String::from_utf8_lossy(stored.json()).contains("current"));
}

pub(crate) async fn fencing_rejects_a_stale_completion(store: Arc<dyn DedupeStore>) {
    let key = call("alice", RequestKey::random(), json!({}));
    let store_key = key.store_key();
    let claim = |token| ClaimRequest {
        fingerprint: key.fingerprint(),
        token,
        lease: Duration::from_millis(200),
        retention: Duration::from_secs(60),
        on_expired_lease: LeaseExpiry::Reexecute,
    };
    let (old, new) = (FencingToken::random(), FencingToken::random());
    assert_eq!(
        store.claim(&store_key, &claim(old)).await.unwrap(),
        ClaimOutcome::Claimed { generation: 1 }
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        store.claim(&store_key, &claim(new)).await.unwrap(),
        ClaimOutcome::Claimed { generation: 2 }
    );
    let late = Completed::Stored(StoredResponse::Result("\"late\"".into()));
    assert!(
        !store
            .renew(&store_key, old, Duration::from_secs(1))
            .await
            .unwrap(),
        "stale renewal"
    );
    assert!(
        !store
            .complete(&store_key, old, &late, Duration::from_secs(60))
            .await
            .unwrap(),
        "stale completion"
    );
    assert!(
        !store.release(&store_key, old).await.unwrap(),
        "stale release"
    );
    let done = Completed::Stored(StoredResponse::Result("\"current\"".into()));
    assert!(
        store
            .complete(&store_key, new, &done, Duration::from_secs(60))
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .claim(&store_key, &claim(FencingToken::random()))
            .await
            .unwrap(),
        ClaimOutcome::Completed(done)
    );
}

/// The heartbeat test's lease: renewed every third of it, so a renewal may come up to two
/// thirds late (about 1.3 s: a loaded machine's scheduling delays are far shorter) before
/// another attempt could take over.
pub(crate) const HEARTBEAT_LEASE: Duration = Duration::from_secs(2);

pub(crate) async fn the_heartbeat_keeps_a_long_call_s_lease(store: Arc<dyn DedupeStore>) {
    let dedup = engine(store).lease(HEARTBEAT_LEASE);
    let key = RequestKey::random();
    let guard = expect_execute(dedup.begin(&call("alice", key, json!({}))).await);
    // Two and a half leases long: without renewals another attempt would take over.
    tokio::time::sleep(HEARTBEAT_LEASE * 5 / 2).await;
    expect_reason(
        &dedup.begin(&call("alice", key, json!({}))).await,
        "in_progress",
    );
    assert!(!guard.lease_lost());
    guard.complete(&response(1, "slow")).await.unwrap();
    assert_eq!(dedup.stats().snapshot().executed, 1);
}

pub(crate) async fn a_result_too_large_is_never_executed_again(store: Arc<dyn DedupeStore>) {
    let dedup = engine(store).max_result_bytes(64);
    let key = RequestKey::random();
    let guard = expect_execute(dedup.begin(&call("alice", key, json!({}))).await);
    let big = response(1, &"x".repeat(1000));
    let recorded = guard.complete(&big).await.unwrap();
    assert!(matches!(recorded, Recorded::NotStored { size } if size > 1000));
    for _ in 0..2 {
        let decision = dedup.begin(&call("alice", key, json!({}))).await;
        let Decision::Refused(refusal) = &decision else {
            panic!("{decision:?}")
        };
        assert_eq!(
            (refusal.reason(), refusal.is_retryable()),
            ("result_not_stored", false)
        );
    }
    assert_eq!(dedup.stats().snapshot().executed, 1);
}

pub(crate) async fn refuse_policy_reports_outcome_unknown(store: Arc<dyn DedupeStore>) {
    let dedup = engine(store)
        .lease(SHORT_LEASE)
        .on_expired_lease(LeaseExpiry::Refuse);
    let key = RequestKey::random();
    drop(expect_execute(
        dedup.begin(&call("alice", key, json!({}))).await,
    ));
    tokio::time::sleep(PAST_SHORT_LEASE).await;
    for _ in 0..2 {
        expect_reason(
            &dedup.begin(&call("alice", key, json!({}))).await,
            "outcome_unknown",
        );
    }
    assert_eq!(dedup.stats().snapshot().executed, 1);
}

pub(crate) async fn release_frees_the_key_at_once(store: Arc<dyn DedupeStore>) {
    let dedup = engine(store);
    let key = RequestKey::random();
    expect_execute(dedup.begin(&call("alice", key, json!({}))).await)
        .release()
        .await
        .unwrap();
    expect_execute(dedup.begin(&call("alice", key, json!({}))).await);
}

pub(crate) async fn records_expire_after_the_window(store: Arc<dyn DedupeStore>) {
    // Within the window, replayed (a window no machine outlasts here)...
    let kept = engine(store.clone()).window(Duration::from_secs(3600));
    let key = RequestKey::random();
    expect_execute(kept.begin(&call("alice", key, json!({}))).await)
        .complete(&response(1, "x"))
        .await
        .unwrap();
    expect_reason(&kept.begin(&call("alice", key, json!({}))).await, "replay");
    // ... after it, executed again.
    let brief = engine(store).window(Duration::from_millis(300));
    let key = RequestKey::random();
    expect_execute(brief.begin(&call("alice", key, json!({}))).await)
        .complete(&response(1, "x"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(450)).await;
    expect_execute(brief.begin(&call("alice", key, json!({}))).await);
}

pub(crate) async fn a_repeated_completion_with_its_token_is_accepted_once_recorded(
    store: Arc<dyn DedupeStore>,
) {
    let call = call("alice", RequestKey::random(), json!({}));
    let key = call.store_key();
    let token = FencingToken::random();
    let claim = ClaimRequest {
        fingerprint: call.fingerprint(),
        token,
        lease: Duration::from_secs(30),
        retention: Duration::from_secs(60),
        on_expired_lease: LeaseExpiry::Reexecute,
    };
    assert_eq!(
        store.claim(&key, &claim).await.unwrap(),
        ClaimOutcome::Claimed { generation: 1 }
    );
    let first = Completed::Stored(StoredResponse::Result("\"first\"".into()));
    let again = Completed::Stored(StoredResponse::Result("\"again\"".into()));
    let retention = Duration::from_secs(60);
    assert!(
        store
            .complete(&key, token, &first, retention)
            .await
            .unwrap()
    );
    // The same completion tried again (its answer was lost): accepted, nothing changes.
    assert!(
        store
            .complete(&key, token, &again, retention)
            .await
            .unwrap()
    );
    // Another token's: refused.
    assert!(
        !store
            .complete(&key, FencingToken::random(), &again, retention)
            .await
            .unwrap()
    );
    let retry = ClaimRequest {
        token: FencingToken::random(),
        ..claim
    };
    assert_eq!(
        store.claim(&key, &retry).await.unwrap(),
        ClaimOutcome::Completed(first)
    );
}
