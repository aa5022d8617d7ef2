"""`RedisStore` against real Redis topologies (SPEC.md §17.12): `WAIT` for replicas after claims
and completions (a claim too few replicas acknowledged is given back and its call refused before
it executes), and a Redis Cluster of three primaries with a replica each (records on every
primary, the scripts declared writes, replays across two clients, with `WAIT` on the node that
wrote)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from mcp_framing.server import Deduplicator, RedisStore, Refusal, StoreError
from mcp_framing.server.dedupe import DEFAULT_PREFIX, KeyedCall
from redis_servers import RedisCluster, RedisProcess


def call() -> KeyedCall:
    return KeyedCall(os.urandom(32).hex(), os.urandom(32).hex(), os.urandom(16), "tools/call")


RESPONSE = b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}'


@pytest.mark.anyio
async def test_a_claim_and_a_completion_count_once_the_replica_has_them(
    redis_replicated: tuple[RedisProcess, RedisProcess],
) -> None:
    primary, replica = redis_replicated
    client = aioredis.from_url(primary.url)
    try:
        store = RedisStore(client, wait_for_replicas=(1, 5.0))
        dedup = Deduplicator(store, store_timeout=10.0)  # a loaded machine: WAIT's 5 s within it
        keyed = call()
        execution = await dedup.begin(keyed)
        assert not isinstance(execution, bytes)
        # WAIT answered: the replica holds the claim already, not "soon".
        assert replica.cli("HGET", DEFAULT_PREFIX + keyed.store_key, "s").strip() == "f"
        assert await execution.complete(RESPONSE) == "stored"
        assert replica.cli("HGET", DEFAULT_PREFIX + keyed.store_key, "s").strip() == "r"
        assert await dedup.begin(keyed) == b'result\x00{"content":[]}'
    finally:
        await client.aclose()


@pytest.mark.anyio
async def test_a_claim_no_replica_acknowledged_is_given_back_and_its_call_refused_before_it_executes(
    redis_replicated: tuple[RedisProcess, RedisProcess],
) -> None:
    primary, replica = redis_replicated
    client = aioredis.from_url(primary.url)
    replica.proc.send_signal(signal.SIGSTOP)  # a replica that stopped acknowledging
    try:
        dedup = Deduplicator(RedisStore(client, wait_for_replicas=(1, 0.2)))
        keyed = call()
        with pytest.raises(Refusal) as refused:
            await dedup.begin(keyed)
        assert refused.value.reason == "store_unavailable"
        assert "0 of 1 replicas acknowledged" in str(refused.value)
        assert await client.exists(DEFAULT_PREFIX + keyed.store_key) == 0  # given back
        # Asking for more replicas than there are fails the same way, never executes.
        with pytest.raises(StoreError) as err:
            await RedisStore(client, wait_for_replicas=(2, 0.1)).claim(
                keyed.store_key, "0" * 64, "1" * 32, 1000, 1000, True
            )
        assert err.value.kind == "not_replicated"
    finally:
        replica.proc.send_signal(signal.SIGCONT)
        await client.aclose()


@pytest.mark.anyio
async def test_a_completion_too_few_replicas_acknowledged_is_reported_as_a_store_error(
    redis_replicated: tuple[RedisProcess, RedisProcess],
) -> None:
    primary, replica = redis_replicated
    client = aioredis.from_url(primary.url)
    try:
        dedup = Deduplicator(RedisStore(client, wait_for_replicas=(1, 0.2)))
        execution = await dedup.begin(call())
        assert not isinstance(execution, bytes)
        replica.proc.send_signal(signal.SIGSTOP)
        # The result is on the primary; a failover now could lose it: reported, not hidden.
        assert await execution.complete(RESPONSE) == "store_error"
    finally:
        replica.proc.send_signal(signal.SIGCONT)
        await client.aclose()


@pytest.mark.anyio
async def test_a_replay_or_a_refusal_behind_a_primary_without_its_replicas_does_not_wait_for_them(
    redis_url: str,
) -> None:
    # A primary whose replicas are gone (here: none at all), with claims waiting for one. A call
    # recorded before (by a store that does not wait) is replayed at once, and a call reusing its
    # key with other arguments refused at once: neither wrote anything, so nothing waits on
    # replicas for them. Sent with the claim script, `WAIT` held each for its whole timeout.
    client = aioredis.from_url(redis_url)
    wait = 20.0
    try:
        keyed = call()
        recorder = await Deduplicator(RedisStore(client)).begin(keyed)
        assert not isinstance(recorder, bytes)
        assert await recorder.complete(RESPONSE) == "stored"
        waiting = Deduplicator(RedisStore(client, wait_for_replicas=(1, wait)), store_timeout=wait + 10)
        started = time.monotonic()
        assert await waiting.begin(keyed) == b'result\x00{"content":[]}'
        other_arguments = KeyedCall(keyed.store_key, os.urandom(32).hex(), keyed.request_key, keyed.method)
        with pytest.raises(Refusal) as refused:
            await waiting.begin(other_arguments)
        assert refused.value.reason == "key_conflict"
        elapsed = time.monotonic() - started
        assert elapsed < wait / 2, f"the replay and the refusal took {elapsed:.1f} s: they waited on replicas"
        # A claim still waits, and with no replica to acknowledge it is given back and refused.
        fresh = call()
        with pytest.raises(Refusal, match="0 of 1 replicas acknowledged"):
            await Deduplicator(RedisStore(client, wait_for_replicas=(1, 0.2))).begin(fresh)
        assert await client.exists(DEFAULT_PREFIX + fresh.store_key) == 0
        # A claim whose `WAIT` failed (here: its connection closed by the server while it
        # waited) is given back and refused the same way.
        fresh = call()
        claiming = asyncio.create_task(
            Deduplicator(RedisStore(client, wait_for_replicas=(1, wait)), store_timeout=wait + 10).begin(fresh)
        )
        waiting_client = await _blocked_in_wait(client)
        await client.execute_command("CLIENT", "KILL", "ID", waiting_client)
        with pytest.raises(Refusal, match="WAIT") as refused:
            await claiming
        assert refused.value.reason == "store_unavailable"
        assert await client.exists(DEFAULT_PREFIX + fresh.store_key) == 0
    finally:
        await client.aclose()


async def _blocked_in_wait(client: Any) -> str:
    """The id of the client connection blocked in `WAIT` (the server's state: polled)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for entry in await client.client_list():
            if entry.get("cmd") == "wait":
                return str(entry["id"])
        await asyncio.sleep(0.01)
    raise AssertionError("no client blocked in WAIT within 30 s")


def test_several_hosts_without_the_cluster_scheme_are_refused_as_the_rust_crate_refuses_them() -> None:
    with pytest.raises(ValueError, match="redis\\+cluster://"):
        RedisStore.from_url("redis://127.0.0.1:7000,127.0.0.1:7001/")
    assert not RedisStore.from_url("redis://127.0.0.1:7000/").cluster


@pytest.mark.anyio
async def test_a_cluster_store_keeps_records_on_every_primary_and_two_clients_replay_each_others(
    redis_cluster: RedisCluster,
) -> None:
    stores = [RedisStore.from_url(redis_cluster.url, wait_for_replicas=(1, 5.0)) for _ in range(2)]
    try:
        assert all(store.cluster for store in stores)
        first, second = (Deduplicator(store, store_timeout=10.0) for store in stores)
        calls = [call() for _ in range(24)]
        for keyed in calls:
            execution = await first.begin(keyed)
            assert not isinstance(execution, bytes)
            assert await execution.complete(RESPONSE) == "stored"
        for keyed in calls:
            assert await second.begin(keyed) == b'result\x00{"content":[]}'
        held = [int(node.cli("DBSIZE")) for node in redis_cluster.primaries()]
        assert sum(held) == len(calls) and all(n > 0 for n in held), held
        # WAIT answered on the node that wrote: every replica holds its primary's records.
        assert sum(int(node.cli("DBSIZE")) for node in redis_cluster.replicas()) == len(calls)
        # The scripts ran as declared writes (Redis 7 `#!lua`), as the Rust crate's cluster form.
        claim = stores[0]._scripts["claim"]
        assert claim.code.startswith("#!lua\n")
        assert all(node.cli("SCRIPT", "EXISTS", claim.sha1).strip() == "1" for node in redis_cluster.primaries())
    finally:
        for store in stores:
            await store.client.aclose()
            await store.aclose()


@pytest.mark.anyio
async def test_a_cluster_client_given_directly_is_detected_as_a_cluster(redis_cluster: RedisCluster) -> None:
    from redis.asyncio.cluster import RedisCluster as Client

    client: Any = Client(host="127.0.0.1", port=redis_cluster.nodes[0].port)
    try:
        store = RedisStore(client)
        assert store.cluster
        keyed = call()
        assert await store.claim(keyed.store_key, keyed.fingerprint, "1" * 32, 10_000, 60_000, True) == ["claimed", 1]
        assert await store.complete(keyed.store_key, "1" * 32, "r", b"{}", 60_000)
    finally:
        await client.aclose()


@pytest.mark.anyio
async def test_records_written_with_wait_survive_their_primarys_failover_and_are_replayed(
    redis_cluster: RedisCluster,
) -> None:
    # WAIT's timeout under the store's: a shard left without a replica answers in time.
    store = RedisStore.from_url(redis_cluster.url, wait_for_replicas=(1, 1.5))
    try:
        dedup = Deduplicator(store, store_timeout=5.0)
        calls = [call() for _ in range(12)]
        for keyed in calls:
            execution = await dedup.begin(keyed)
            assert not isinstance(execution, bytes)
            assert await execution.complete(RESPONSE) == "stored"
        victim_port = _on(store, calls[0])
        victim = next(node for node in redis_cluster.nodes if node.port == victim_port)
        on_victim = [keyed for keyed in calls if _on(store, keyed) == victim_port]
        victim.proc.kill()  # an outage, not a shutdown: its replica is promoted by the cluster
        victim.proc.wait()
        redis_cluster.nodes.remove(victim)
        await asyncio.to_thread(redis_cluster.wait_healthy, 60)
        # Every record the replica acknowledged is replayed from the promoted replica; while the
        # client learns the new layout a call may be refused "store unavailable" (retryable).
        for keyed in on_victim:
            for _ in range(20):
                try:
                    decided = await dedup.begin(keyed)
                    break
                except Refusal as refusal:
                    assert refusal.reason == "store_unavailable", refusal
                    last = refusal
            else:
                raise AssertionError(f"the store stayed unavailable after the failover: {last}")
            assert decided == b'result\x00{"content":[]}'
        # A new call on that shard is refused until it has a replica again: no replica could
        # acknowledge its claim, so it does not execute (fail closed).
        fresh = next(k for k in (call() for _ in range(1000)) if _on(store, k) == _on(store, on_victim[0]))
        with pytest.raises(Refusal, match="0 of 1 replicas acknowledged"):
            await dedup.begin(fresh)
    finally:
        await store.client.aclose()
        await store.aclose()


def _on(store: RedisStore, keyed: KeyedCall) -> int:
    """The port of the primary serving a call's record, as the store's client knows it."""
    return int(store.client.get_node_from_key(DEFAULT_PREFIX + keyed.store_key).port)
