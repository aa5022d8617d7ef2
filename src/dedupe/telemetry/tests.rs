//! The deduplication engine's server metrics (SPEC.md §17.15), read back from `metrics-util`'s
//! debugging recorder: every decision by reason, waits, completions, leases lost, evictions,
//! store latency and `mcp.server.operation.duration`. Paused clock: nothing here depends on
//! how fast the machine runs.

use std::sync::Arc;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use serde_json::json;

use super::DECISIONS;
use crate::RequestKey;
use crate::dedupe::deduplicator::Decision;
use crate::dedupe::fingerprint::Fingerprint;
use crate::dedupe::scope::Scope;
use crate::dedupe::{
    DedupeStore, Deduplicator, KeyedCall, MemoryStore, Principal, StoreFailure,
};
use crate::test_support::metrics_support::Recorded;
use crate::test_support::store_scenarios as s;

#[test]
fn an_executed_call_is_counted_under_its_decision() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        tokio_test::block_on(async {
            let dedup = Deduplicator::new(MemoryStore::new());
            let call = KeyedCall::new(
                Scope::new(Principal::anonymous(), "tools/call", Some("t")),
                RequestKey::random(),
                Fingerprint::from_bytes([1; 32]),
            );
            let Decision::Execute(guard) = dedup.begin(&call).await else {
                panic!("a new key executes")
            };
            guard
                .complete(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
                .await
                .unwrap();
        })
    });
    let executed = snapshotter.snapshot().into_vec().into_iter().any(|(key, _, _, value)| {
        key.key().name() == DECISIONS
            && key.key().labels().any(|l| l.key() == "decision" && l.value() == "execute")
            && value == DebugValue::Counter(1)
    });
    assert!(executed);
}


fn decisions(metrics: &Recorded, decision: &str, reason: &str) -> u64 {
    metrics.counter(
        "mcp_framing.dedupe.decisions",
        &[
            ("decision", decision),
            ("reason", reason),
            ("mcp.method.name", "tools/call"),
        ],
    )
}

#[tokio::test(start_paused = true)]
async fn every_decision_completion_and_store_operation_is_counted_and_timed() {
    let metrics = Recorded::new();
    let _recording = metrics.install_local();
    let store: Arc<dyn DedupeStore> = Arc::new(MemoryStore::new());
    let dedup = s::engine(store.clone());

    // Executed and recorded, then replayed twice.
    let key = RequestKey::random();
    let call = s::call("alice", key, json!({"to": "bob"}));
    s::expect_execute(dedup.begin(&call).await)
        .complete(&s::response(1, "sent"))
        .await
        .unwrap();
    for _ in 0..2 {
        s::expect_reason(&dedup.begin(&call).await, "replay");
    }
    // A conflict.
    s::expect_reason(
        &dedup
            .begin(&s::call("alice", key, json!({"to": "eve"})))
            .await,
        "key_conflict",
    );
    // A duplicate that waits and gets the result; one that waits and is refused.
    let waiting = s::engine(store.clone()).wait(Duration::from_secs(10));
    let slow = s::call("alice", RequestKey::random(), json!({}));
    let guard = s::expect_execute(waiting.begin(&slow).await);
    let waiter = {
        let (waiting, slow) = (waiting.clone(), slow.clone());
        tokio::spawn(async move { waiting.begin(&slow).await })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let error = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"mailbox full"}}"#;
    guard.complete(error).await.unwrap();
    s::expect_reason(&waiter.await.unwrap(), "replay");
    let held = s::expect_execute(
        dedup
            .begin(&s::call("alice", RequestKey::random(), json!({})))
            .await,
    );
    let blocked = s::call("alice", RequestKey::random(), json!({}));
    let _blocker = s::expect_execute(dedup.begin(&blocked).await);
    s::expect_reason(
        &s::engine(store.clone())
            .wait(Duration::from_millis(300))
            .begin(&blocked)
            .await,
        "in_progress",
    );
    // A tool error result, and an execution that ends without a final response.
    let tool_error = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#;
    held.complete(tool_error).await.unwrap();
    drop(s::expect_execute(
        dedup
            .begin(&s::call("alice", RequestKey::random(), json!({})))
            .await,
    ));
    // A store that does not answer: refused, or executed unprotected when configured so.
    let silent = Deduplicator::new(s::Silent).store_timeout(Duration::from_millis(100));
    s::expect_reason(
        &silent
            .begin(&s::call("alice", RequestKey::random(), json!({})))
            .await,
        "store_unavailable",
    );
    s::expect_reason(
        &silent
            .clone()
            .on_store_failure(StoreFailure::ExecuteUnprotected)
            .begin(&s::call("alice", RequestKey::random(), json!({})))
            .await,
        "unprotected",
    );

    assert_eq!(decisions(&metrics, "execute", ""), 5);
    assert_eq!(decisions(&metrics, "replay", ""), 3);
    assert_eq!(decisions(&metrics, "refused", "key_conflict"), 1);
    assert_eq!(decisions(&metrics, "refused", "in_progress"), 1);
    assert_eq!(decisions(&metrics, "refused", "store_unavailable"), 1);
    assert_eq!(decisions(&metrics, "unprotected", ""), 1);
    assert_eq!(
        metrics.counter("mcp_framing.dedupe.waits", &[("decision", "replay")]),
        1
    );
    assert_eq!(
        metrics.counter("mcp_framing.dedupe.waits", &[("decision", "in_progress")]),
        1
    );
    let waits = metrics.histogram(
        "mcp_framing.dedupe.wait.duration",
        &[("decision", "replay")],
    );
    assert_eq!(waits.len(), 1);
    assert!(waits[0] >= 2.0, "the duplicate waited 2 s: {waits:?}");
    assert_eq!(
        metrics.counter("mcp_framing.dedupe.completions", &[("recorded", "stored")]),
        3
    );

    // Store latency: every operation, by outcome.
    let claims = metrics.histogram(
        "mcp_framing.dedupe.store.duration",
        &[("operation", "claim"), ("outcome", "ok")],
    );
    assert!(claims.len() >= 9, "{claims:?}");
    let timeouts = metrics.histogram(
        "mcp_framing.dedupe.store.duration",
        &[("operation", "claim"), ("outcome", "timeout")],
    );
    assert_eq!(timeouts.len(), 2);
    assert!(
        timeouts.iter().all(|t| (*t - 0.1).abs() < 1e-3),
        "{timeouts:?}"
    );
    let completes = metrics.histogram(
        "mcp_framing.dedupe.store.duration",
        &[("operation", "complete"), ("outcome", "ok")],
    );
    assert_eq!(completes.len(), 3);

    // mcp.server.operation.duration (OpenTelemetry): by decision, with error.type on failures.
    let operations = |labels: &[(&str, &str)]| {
        metrics
            .histogram("mcp.server.operation.duration", labels)
            .len()
    };
    assert_eq!(operations(&[("mcp_framing.dedupe.decision", "replay")]), 3);
    assert_eq!(
        operations(&[
            ("error.type", "-32080"),
            ("rpc.response.status_code", "-32080")
        ]),
        1,
        "the conflict"
    );
    assert_eq!(
        operations(&[("error.type", "-32000")]),
        2,
        "the stored error, and its replay"
    );
    assert_eq!(operations(&[("error.type", "tool_error")]), 1);
    assert_eq!(operations(&[("error.type", "no_final_response")]), 1);
    assert_eq!(
        operations(&[("error.type", "-32084")]),
        1,
        "store unavailable"
    );
    assert_eq!(
        operations(&[("mcp_framing.dedupe.decision", "execute")]),
        4,
        "every execution that ended (the blocker has not)"
    );
    assert_eq!(operations(&[("error.type", "-32081")]), 1, "in progress");
}

#[tokio::test(start_paused = true)]
async fn leases_lost_and_evictions_are_counted() {
    let metrics = Recorded::new();
    let _recording = metrics.install_local();
    let memory: Arc<dyn DedupeStore> = Arc::new(MemoryStore::new());

    // A holder cut off from the store outlives its lease; another attempt takes over; the
    // holder's heartbeat then finds the lease gone, and its completion is rejected.
    let flaky = Arc::new(s::NoRenewals::new(memory.clone()));
    let stalled = s::engine(flaky.clone()).lease(s::SHORT_LEASE);
    let call = s::call("alice", RequestKey::random(), json!({}));
    let stale = s::expect_execute(stalled.begin(&call).await);
    tokio::time::sleep(s::PAST_SHORT_LEASE).await;
    let current = s::expect_execute(s::engine(memory.clone()).begin(&call).await);
    flaky.heal();
    tokio::time::sleep(s::SHORT_LEASE).await; // the next renewal is refused
    assert!(stale.lease_lost());
    assert!(stale.complete(&s::response(1, "stale")).await.is_err());
    current.complete(&s::response(1, "current")).await.unwrap();
    assert_eq!(
        metrics.counter(
            "mcp_framing.dedupe.leases_lost",
            &[("detected", "heartbeat")]
        ),
        1
    );
    assert_eq!(
        metrics.counter(
            "mcp_framing.dedupe.leases_lost",
            &[("detected", "completion")]
        ),
        1
    );
    assert_eq!(
        metrics.counter(
            "mcp_framing.dedupe.completions",
            &[("recorded", "lease_lost")]
        ),
        1
    );

    // A store bounded to two records evicts the completed one closest to its expiry.
    let small = s::engine(Arc::new(MemoryStore::new().max_entries(2)));
    for _ in 0..3 {
        s::expect_execute(
            small
                .begin(&s::call("alice", RequestKey::random(), json!({})))
                .await,
        )
        .complete(&s::response(1, "x"))
        .await
        .unwrap();
    }
    assert_eq!(
        metrics.counter("mcp_framing.dedupe.evictions", &[("record", "completed")]),
        1
    );
}
