//! `RedisStore` over a real Redis Cluster that each test starts on loopback: three primaries with
//! one replica each (`redis-server --cluster-enabled yes`, joined with `redis-cli --cluster
//! create`), a primary stopped mid-run and its replica promoted (SPEC.md §17.12). A missing
//! `redis-server` or `redis-cli` fails the tests; they never skip.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::RequestKey;
use crate::dedupe::deduplicator::CompleteError;
use crate::dedupe::{DedupeStore, Decision, Deduplicator, KeyedCall, RedisStore};
use crate::test_support::redis_servers::{Persistence, RedisCluster};
use crate::test_support::store_scenarios as s;

const PREFIX: &str = "cluster:";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

async fn connect(cluster: &RedisCluster, replicas: u32) -> RedisStore {
    connect_waiting(cluster, replicas, Duration::from_millis(500)).await
}

/// [`connect`] with a `WAIT` bound of its own. WAIT returns as soon as the replicas acknowledged,
/// so a long bound costs nothing while they are healthy: a test whose replicas must acknowledge
/// uses one long enough for a loaded machine (500 ms failed a run here at load 15).
async fn connect_waiting(cluster: &RedisCluster, replicas: u32, wait: Duration) -> RedisStore {
    RedisStore::builder(cluster.url())
        .prefix(PREFIX)
        .response_timeout(wait + Duration::from_secs(2))
        .connection_timeout(Duration::from_secs(2))
        .reconnect_attempts(3)
        .wait_for_replicas(replicas, wait)
        .connect()
        .await
        .expect("connect to the test cluster")
}

/// The Redis key of `call`'s record.
fn redis_key(store: &RedisStore, call: &KeyedCall) -> String {
    store.redis_key(&call.store_key())
}

/// Asks again while the decision is "store unavailable" (the cluster client's view of the
/// layout catches up with a failover), up to a generous bound; returns the first other one.
async fn begin_until_reachable(dedup: &Deduplicator, call: &KeyedCall) -> Decision {
    let started = Instant::now();
    loop {
        let decision = dedup.begin(call).await;
        if decision.name() != "store_unavailable" || started.elapsed() > Duration::from_secs(60) {
            return decision;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn the_engine_scenarios_hold_on_a_cluster_with_records_on_every_primary() {
    let cluster = RedisCluster::start(3, 1, Persistence::None);
    runtime().block_on(async {
        let store = connect(&cluster, 0).await;
        assert!(store.is_cluster());
        let shared: Arc<dyn DedupeStore> = Arc::new(store.clone());
        s::retry_is_replayed_under_its_own_id(shared.clone()).await;
        s::error_results_are_replayed(shared.clone()).await;
        s::other_arguments_are_a_conflict(shared.clone()).await;
        s::another_principal_never_matches(shared.clone()).await;
        s::a_result_too_large_is_never_executed_again(shared.clone()).await;
        s::fencing_rejects_a_stale_completion(shared.clone()).await;
        s::a_repeated_completion_with_its_token_is_accepted_once_recorded(shared.clone()).await;
        s::release_frees_the_key_at_once(shared.clone()).await;
        // Two cluster connections: two backends sharing the cluster.
        let other: Arc<dyn DedupeStore> = Arc::new(connect(&cluster, 0).await);
        s::concurrent_claims_execute_once(shared.clone(), other).await;
        // Enough records that every primary holds some (one key per record: one slot each).
        let dedup = s::engine(shared);
        for i in 0..60 {
            let call = s::call("spread", RequestKey::random(), json!({"i": i}));
            s::expect_execute(dedup.begin(&call).await)
                .complete(&s::response(1, "x"))
                .await
                .expect("recorded");
        }
    });
    let per_primary = cluster.keys_per_primary();
    assert_eq!(per_primary.len(), 3, "three primaries: {per_primary:?}");
    assert!(
        per_primary.iter().all(|(_, keys)| *keys > 0),
        "records on every primary: {per_primary:?}"
    );
}

#[test]
fn a_primary_stopped_mid_run_is_replaced_by_its_replica_and_no_completed_call_runs_again() {
    let mut cluster = RedisCluster::start(3, 1, Persistence::None);
    let runtime = runtime();
    // Every claim and completion acknowledged by the replica before it counts.
    let store = runtime.block_on(connect_waiting(&cluster, 1, Duration::from_secs(5)));
    let dedup = s::engine(Arc::new(store.clone())).store_timeout(Duration::from_secs(10));
    let calls: Vec<KeyedCall> = (0..60)
        .map(|i| s::call("alice", RequestKey::random(), json!({"i": i})))
        .collect();
    runtime.block_on(async {
        for call in &calls {
            s::expect_execute(dedup.begin(call).await)
                .complete(&s::response(1, "before the failover"))
                .await
                .expect("recorded and replicated");
        }
    });
    // The victim: the primary of the first record; a call on it is in flight when it stops.
    let victim = cluster.primary_of(&redis_key(&store, &calls[0]));
    let [replica] = cluster.replicas_of(victim)[..] else {
        panic!("one replica per primary")
    };
    let on_victim = calls
        .iter()
        .filter(|call| cluster.primary_of(&redis_key(&store, call)) == victim)
        .count();
    let in_flight = std::iter::repeat_with(|| s::call("alice", RequestKey::random(), json!({})))
        .find(|call| cluster.primary_of(&redis_key(&store, call)) == victim)
        .expect("a key on the victim");
    let guard = runtime.block_on(async { s::expect_execute(dedup.begin(&in_flight).await) });

    cluster.nodes[victim].stop();
    // The cluster notices (node timeout) and promotes the replica by itself.
    cluster.wait_healthy(Duration::from_secs(90));
    assert_eq!(
        cluster.nodes[replica]
            .info_field("replication", "role")
            .as_deref(),
        Some("master"),
        "the replica was promoted"
    );
    assert_eq!(cluster.primary_of(&redis_key(&store, &calls[0])), replica);

    runtime.block_on(async {
        // Every retry, on the promoted replica's records too, is replayed (none executes).
        for call in &calls {
            let decision = begin_until_reachable(&dedup, call).await;
            s::expect_reason(&decision, "replay");
        }
    });
    // The promoted primary has no replica yet: a completion now would be reported not
    // replicated. The stopped node comes back, as the promoted one's replica.
    assert!(
        cluster.nodes[victim].start_again(),
        "the stopped node restarts"
    );
    cluster.wait_healthy(Duration::from_secs(90));
    cluster.wait_replicas_online(1, Duration::from_secs(90));
    runtime.block_on(async {
        // The call that was in flight across the failover completes (its claim was on the
        // replica before it executed) ...
        guard
            .complete(&s::response(1, "across the failover"))
            .await
            .expect("recorded on the promoted replica, acknowledged by the returned node");
        // ... and its retry is replayed.
        s::expect_reason(&begin_until_reachable(&dedup, &in_flight).await, "replay");
    });
    let stats = dedup.stats().snapshot();
    assert_eq!(stats.executed, 61, "one execution per call: {stats:?}");
    assert_eq!(stats.replayed, 61);
    println!(
        "failover: {on_victim} of 60 completed records and 1 in flight on the stopped primary; \
         all replayed from its promoted replica"
    );
}

#[test]
fn a_failover_to_a_replica_that_missed_the_write_runs_the_retry_again_unless_claims_wait() {
    let mut cluster = RedisCluster::start(3, 1, Persistence::None);
    let runtime = runtime();
    let (fast, waiting) = runtime.block_on(async {
        (
            s::engine(Arc::new(connect(&cluster, 0).await)),
            s::engine(Arc::new(connect(&cluster, 1).await)),
        )
    });
    let probe = runtime.block_on(connect(&cluster, 0));
    let first = s::call("alice", RequestKey::random(), json!({"n": 1}));
    let primary = cluster.primary_of(&redis_key(&probe, &first));
    let [replica] = cluster.replicas_of(primary)[..] else {
        panic!("one replica per primary")
    };
    let second = std::iter::repeat_with(|| s::call("alice", RequestKey::random(), json!({"n": 2})))
        .find(|call| cluster.primary_of(&redis_key(&probe, call)) == primary)
        .expect("a key on the same primary");

    // The replica stops receiving (frozen), and its socket buffers fill up with 32 MiB of other
    // writes (loopback buffers hold a few MiB): what the primary writes next stays in the
    // primary's own memory, acknowledged by the primary alone.
    cluster.nodes[replica].pause();
    let filler = "f".repeat(8 << 20);
    for i in 0..4 {
        // On the same primary: keys tagged with the record's slot.
        let key = format!("{{{}}}filler-{i}", redis_key(&probe, &first));
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(&filler)
            .query(&mut cluster.nodes[primary].connection())
            .expect("a filler write on the primary");
    }
    runtime.block_on(async {
        // Without WAIT: executed and recorded, on the primary only.
        s::expect_execute(fast.begin(&first).await)
            .complete(&s::response(1, "only on the primary"))
            .await
            .expect("acknowledged by the primary");
        // With WAIT: the claim is not acknowledged by a replica, so the call does not run.
        let decision = waiting.begin(&second).await;
        let Decision::Refused(refusal) = &decision else {
            panic!("a claim no replica acknowledged must be refused, got {decision:?}")
        };
        assert_eq!(refusal.reason(), "store_unavailable");
        assert!(
            refusal.to_string().contains("0 of 1 replicas acknowledged"),
            "{refusal}"
        );
    });
    assert_eq!(waiting.stats().snapshot().executed, 0);

    // The primary dies before the replica got the record; the replica takes over.
    cluster.nodes[primary].stop();
    cluster.nodes[replica].resume();
    let _: String = cluster.nodes[replica].command(&["CLUSTER", "FAILOVER", "TAKEOVER"]);
    cluster.wait_healthy(Duration::from_secs(90));

    runtime.block_on(async {
        // The documented loss (SPEC.md §17.12): the record is gone, the retry executes again.
        let decision = begin_until_reachable(&fast, &first).await;
        let guard = s::expect_execute(decision);
        assert_eq!(guard.generation(), 1, "a new record, not a takeover");
        drop(guard);
    });
    // The promoted primary has no replica until the old one comes back (as its replica): until
    // then a waiting claim is refused, then it executes, once.
    assert!(
        cluster.nodes[primary].start_again(),
        "the old primary restarts"
    );
    cluster.wait_healthy(Duration::from_secs(90));
    // A backend whose WAIT bound suits a loaded machine (the short one above is for the refusal
    // only): its claim and completion must be acknowledged by the returned replica.
    let patient = runtime.block_on(async {
        s::engine(Arc::new(
            connect_waiting(&cluster, 1, Duration::from_secs(5)).await,
        ))
        .store_timeout(Duration::from_secs(10))
    });
    runtime.block_on(async {
        let decision = begin_until_reachable(&patient, &second).await;
        s::expect_execute(decision)
            .complete(&s::response(1, "after the failover"))
            .await
            .expect("recorded and acknowledged by the returned replica");
        s::expect_reason(&waiting.begin(&second).await, "replay");
    });
    assert_eq!(waiting.stats().snapshot().executed, 0);
    assert_eq!(patient.stats().snapshot().executed, 1);
}

#[test]
fn a_completion_no_replica_acknowledged_is_reported_not_replicated() {
    let cluster = RedisCluster::start(3, 1, Persistence::None);
    let runtime = runtime();
    // The claim must be acknowledged before the replica is paused: a bound for a loaded machine.
    let store = runtime.block_on(connect_waiting(&cluster, 1, Duration::from_secs(2)));
    let dedup = s::engine(Arc::new(store.clone())).store_timeout(Duration::from_secs(10));
    let call = s::call("alice", RequestKey::random(), json!({}));
    let primary = cluster.primary_of(&redis_key(&store, &call));
    let [replica] = cluster.replicas_of(primary)[..] else {
        panic!("one replica per primary")
    };
    let guard = runtime.block_on(async { s::expect_execute(dedup.begin(&call).await) });
    cluster.nodes[replica].pause();
    let result = runtime.block_on(guard.complete(&s::response(1, "done")));
    cluster.nodes[replica].resume();
    let Err(CompleteError::Store(err)) = result else {
        panic!("expected NotReplicated, got {result:?}")
    };
    assert_eq!(err.kind(), "not_replicated", "{err}");
    // The result is on the primary: a retry (no failover) is replayed.
    runtime.block_on(async {
        s::expect_reason(&dedup.begin(&call).await, "replay");
    });
}
