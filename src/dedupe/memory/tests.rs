//! `MemoryStore`: its bounds, and the deduplication engine's scenarios over it (SPEC.md §17),
//! under a paused clock; `redis/tests.rs` runs the same scenarios against a real Redis.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{MemoryStore, RECORD_OVERHEAD};
use crate::dedupe::deduplicator::{Decision, KeyedCall};
use crate::dedupe::fingerprint::Fingerprint;
use crate::dedupe::scope::Scope;
use crate::dedupe::{DedupeStore, Deduplicator, LeaseExpiry, Principal, StoreFailure};
use crate::ids::RequestKey;
use crate::test_support::store_scenarios as s;

/// A keyed call with a key of its own.
fn new_call() -> KeyedCall {
    let scope = Scope::new(Principal::from_id("load"), "tools/call", Some("t"));
    KeyedCall::new(scope, RequestKey::random(), Fingerprint::from_bytes([1; 32]))
}

/// Executes `call` and records `result` (a JSON string of `len` characters) as its answer.
async fn execute(dedup: &Deduplicator, call: &KeyedCall, len: usize) {
    let Decision::Execute(guard) = dedup.begin(call).await else {
        panic!("a new key executes")
    };
    let response = format!(r#"{{"jsonrpc":"2.0","id":1,"result":"{}"}}"#, "r".repeat(len));
    guard.complete(response.as_bytes()).await.expect("recorded");
}

#[tokio::test(start_paused = true)]
async fn the_byte_bound_counts_each_records_overhead_and_evicts_completed_records() {
    let bound = 20 * (RECORD_OVERHEAD + 1000);
    let store = Arc::new(MemoryStore::new().max_bytes(bound));
    let dedup = Deduplicator::with_shared_store(store.clone());
    for _ in 0..200 {
        execute(&dedup, &new_call(), 1000).await;
        assert!(store.bytes() <= bound, "{} bytes", store.bytes());
    }
    assert!(store.evicted() >= 180, "{} evicted", store.evicted());
}

#[tokio::test(start_paused = true)]
async fn a_full_store_records_completed_not_stored_rather_than_losing_the_call() {
    // Room for the claim but not for its result: the call still never runs twice.
    let dedup = Deduplicator::new(MemoryStore::new().max_bytes(RECORD_OVERHEAD + 10));
    let call = new_call();
    execute(&dedup, &call, 30).await;
    assert_eq!(dedup.begin(&call).await.name(), "result_not_stored");
}


fn memory() -> Arc<dyn DedupeStore> {
    Arc::new(MemoryStore::new())
}

#[tokio::test(start_paused = true)]
async fn retry_is_replayed_under_its_own_id() {
    s::retry_is_replayed_under_its_own_id(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn error_results_are_replayed() {
    s::error_results_are_replayed(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn same_key_with_other_arguments_is_a_conflict() {
    s::other_arguments_are_a_conflict(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn another_principals_key_never_matches() {
    s::another_principal_never_matches(memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claims_execute_exactly_once() {
    let store = memory();
    s::concurrent_claims_execute_once(store.clone(), store).await;
}

#[tokio::test(start_paused = true)]
async fn duplicate_waits_for_the_attempt_in_flight_and_gets_its_result() {
    s::duplicate_waits_for_the_attempt_in_flight(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn duplicate_gets_in_progress_after_the_bounded_wait() {
    s::duplicate_gets_in_progress_after_the_wait(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn dropped_guard_frees_the_key_only_when_its_lease_expires() {
    s::dropped_guard_frees_the_key_only_when_its_lease_expires(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn a_stale_guards_completion_is_rejected() {
    s::a_stale_guard_s_completion_is_rejected(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn fencing_rejects_stale_renewal_completion_and_release() {
    s::fencing_rejects_a_stale_completion(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn the_heartbeat_keeps_a_long_calls_lease() {
    s::the_heartbeat_keeps_a_long_call_s_lease(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn a_result_too_large_to_store_is_never_executed_again() {
    s::a_result_too_large_is_never_executed_again(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn refuse_policy_reports_outcome_unknown_after_an_expired_lease() {
    s::refuse_policy_reports_outcome_unknown(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn release_frees_the_key_at_once() {
    s::release_frees_the_key_at_once(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn records_expire_after_the_window() {
    s::records_expire_after_the_window(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn memory_store_bound_holds_under_100k_distinct_keys() {
    let store = Arc::new(MemoryStore::new().max_entries(10_000).max_bytes(8 << 20));
    let dedup = Deduplicator::with_shared_store(store.clone());
    let result = s::response(1, &"r".repeat(200));
    let mut peak = (0, 0);
    for i in 0..100_000u32 {
        let call = s::call("load", RequestKey::random(), json!({"i": i}));
        let guard = s::expect_execute(dedup.begin(&call).await);
        guard.complete(&result).await.expect("recorded");
        peak = (peak.0.max(store.len()), peak.1.max(store.bytes()));
    }
    assert!(peak.0 <= 10_000, "records peaked at {}", peak.0);
    assert!(peak.1 <= 8 << 20, "bytes peaked at {}", peak.1);
    assert_eq!(store.len(), 10_000, "the store stays full, not empty");
    assert_eq!(
        store.evicted(),
        90_000,
        "every record past the bound evicted one"
    );
    assert_eq!(dedup.stats().snapshot().completed, 100_000);
}

#[tokio::test(start_paused = true)]
async fn memory_store_never_evicts_claims_in_flight() {
    let store = Arc::new(MemoryStore::new().max_entries(3));
    let dedup = Deduplicator::with_shared_store(store.clone());
    let mut guards = Vec::new();
    for _ in 0..3 {
        let call = s::call("alice", RequestKey::random(), json!({}));
        guards.push(s::expect_execute(dedup.begin(&call).await));
    }
    // Full of live claims: a fourth key is refused (fail closed), not executed.
    let fourth = s::call("alice", RequestKey::random(), json!({}));
    let decision = dedup.begin(&fourth).await;
    s::expect_reason(&decision, "store_unavailable");
    let Decision::Refused(refusal) = decision else {
        unreachable!()
    };
    assert!(refusal.is_retryable());
    // Once one completes, it may be evicted to make room.
    guards
        .pop()
        .unwrap()
        .complete(&s::response(1, "x"))
        .await
        .unwrap();
    s::expect_execute(dedup.begin(&fourth).await);
    assert_eq!(store.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_store_refuses_keyed_calls_by_default() {
    let dedup = Deduplicator::new(s::Silent).store_timeout(Duration::from_millis(100));
    let decision = dedup
        .begin(&s::call("alice", RequestKey::random(), json!({})))
        .await;
    let Decision::Refused(refusal) = &decision else {
        panic!("{decision:?}")
    };
    assert_eq!(
        (refusal.reason(), refusal.code()),
        ("store_unavailable", -32084)
    );
    assert!(refusal.to_string().contains("did not answer within 100ms"));
}

#[tokio::test(start_paused = true)]
async fn fail_open_executes_unprotected_when_configured() {
    let dedup = Deduplicator::new(s::Silent)
        .store_timeout(Duration::from_millis(50))
        .on_store_failure(StoreFailure::ExecuteUnprotected);
    let decision = dedup
        .begin(&s::call("alice", RequestKey::random(), json!({})))
        .await;
    s::expect_reason(&decision, "unprotected");
    assert_eq!(dedup.stats().snapshot().unprotected, 1);
}

#[tokio::test(start_paused = true)]
async fn progress_token_and_key_do_not_change_the_fingerprint() {
    let key = RequestKey::random();
    let a = s::call("alice", key, json!({"x": [1, {"b": 2, "a": 1}]}));
    let mut request = json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
        "params": {"_meta": {"progressToken": "other", "traceparent": "00-ab-cd-01"},
                   "arguments": {"x": [1, {"a": 1, "b": 2}]}, "name": "send_email"}});
    crate::request::set_request_key(&mut request, key).unwrap();
    let b = KeyedCall::from_request(
        Principal::from_id("alice"),
        None,
        &request,
        &Default::default(),
    )
    .unwrap()
    .unwrap();
    assert_eq!(a, b);
    let _ = LeaseExpiry::default();
}

#[tokio::test(start_paused = true)]
async fn a_repeated_completion_with_its_token_is_accepted_and_changes_nothing() {
    s::a_repeated_completion_with_its_token_is_accepted_once_recorded(memory()).await;
}
