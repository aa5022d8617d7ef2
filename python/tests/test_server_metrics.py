"""The server side's metrics (SPEC.md §17.15) under the Rust crate's names and attributes,
through the package's one telemetry hook (`mcp_framing.telemetry.instrument`): what
`FramingMiddleware` with a `Deduplicator` reports for executed, replayed, refused and waiting
calls, the store's operations, evictions and a lost lease."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from mcp_framing import telemetry
from mcp_framing.server import Deduplicator, MemoryStore, Refusal
from mcp_framing.server.dedupe import KeyedCall
from servers import serve
from test_dedupe import HEADERS, Ledger, charge


class Recorder:
    """A meter (OpenTelemetry's `create_counter` / `create_histogram`) keeping every value."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, float, dict[str, Any]]] = []

    def create_counter(self, name: str, **_: Any) -> Any:
        recorder = self

        class Instrument:
            def add(self, value: float, attributes: dict[str, Any]) -> None:
                recorder.seen.append((name, value, dict(attributes)))

            record = add

        return Instrument()

    create_histogram = create_counter

    def of(self, name: str) -> list[dict[str, Any]]:
        return [attributes for seen, _, attributes in self.seen if seen == name]


@pytest.fixture
def meter() -> Iterator[Recorder]:
    recorder = Recorder()
    telemetry.instrument(recorder)
    try:
        yield recorder
    finally:
        telemetry.instrument(None)


@pytest.mark.anyio
async def test_an_executed_a_replayed_and_a_refused_call_are_counted_and_timed_under_the_crate_names(
    meter: Recorder,
) -> None:
    ledger = Ledger()
    key = os.urandom(16).hex()
    async with serve(ledger.app(Deduplicator(MemoryStore()))) as url, httpx2.AsyncClient() as http:
        await http.post(url, json=charge(key, 1), headers=HEADERS)
        await http.post(url, json=charge(key, 2), headers=HEADERS)
        await http.post(url, json=charge(key, 3, amount=6), headers=HEADERS)
    assert meter.of("mcp_framing.dedupe.decisions") == [
        {"decision": "execute", "reason": "", "mcp.method.name": "tools/call"},
        {"decision": "replay", "reason": "", "mcp.method.name": "tools/call"},
        {"decision": "refused", "reason": "key_conflict", "mcp.method.name": "tools/call"},
    ]
    assert meter.of("mcp_framing.dedupe.completions") == [{"recorded": "stored"}]
    stores = meter.of("mcp_framing.dedupe.store.duration")
    assert all(a["outcome"] == "ok" for a in stores)
    assert [a["operation"] for a in stores].count("complete") == 1
    # The retry may come while the first call's result is being recorded: then it waited, and
    # claimed again until it found the result.
    claims = [a["operation"] for a in stores].count("claim")
    waits = meter.of("mcp_framing.dedupe.waits")
    assert (claims, waits) == (3, []) or (claims > 3 and waits == [{"decision": "replay"}])
    operations = meter.of("mcp.server.operation.duration")
    assert operations == [
        {"mcp.method.name": "tools/call", "mcp_framing.dedupe.decision": "execute"},
        {"mcp.method.name": "tools/call", "mcp_framing.dedupe.decision": "replay"},
        {
            "mcp.method.name": "tools/call",
            "mcp_framing.dedupe.decision": "refused",
            "error.type": "-32080",
            "rpc.response.status_code": "-32080",
        },
    ]
    assert all(value >= 0 for name, value, _ in meter.seen if name.endswith("duration"))
    # No key, credential or tool name in any attribute.
    assert not any(key in str(attributes) or "charge" in str(attributes) for _, _, attributes in meter.seen)


@pytest.mark.anyio
async def test_a_tool_error_and_a_stored_json_rpc_error_are_the_operations_error_type(meter: Recorder) -> None:
    dedup = Deduplicator(MemoryStore())
    calls = [KeyedCall(os.urandom(32).hex(), "0" * 64, os.urandom(16), "tools/call") for _ in range(2)]
    first = await dedup.begin(calls[0])
    second = await dedup.begin(calls[1])
    assert not isinstance(first, bytes) and not isinstance(second, bytes)
    assert await first.complete(b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}') == "stored"
    assert await second.complete(b'{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"bad"}}') == "stored"
    await dedup.begin(calls[1])  # the replay of the stored error
    errors = [a.get("error.type") for a in meter.of("mcp.server.operation.duration")]
    assert errors == ["tool_error", "-32602", "-32602"]


@pytest.mark.anyio
async def test_a_duplicate_that_waited_for_the_call_in_flight_is_counted_as_a_wait_ending_in_its_replay(
    meter: Recorder,
) -> None:
    dedup = Deduplicator(MemoryStore(), wait=5.0)
    call = KeyedCall(os.urandom(32).hex(), "0" * 64, os.urandom(16), "tools/call")
    execution = await dedup.begin(call)
    assert not isinstance(execution, bytes)
    duplicate = asyncio.ensure_future(dedup.begin(call))
    while len(meter.of("mcp_framing.dedupe.store.duration")) < 2:  # the duplicate found it in flight
        await asyncio.sleep(0)
    await execution.complete(b'{"jsonrpc":"2.0","id":1,"result":{}}')
    assert await duplicate == b"result\x00{}"
    assert meter.of("mcp_framing.dedupe.waits") == [{"decision": "replay"}]
    assert meter.of("mcp_framing.dedupe.wait.duration") == [{"decision": "replay"}]


@pytest.mark.anyio
async def test_an_eviction_a_full_store_and_a_lost_lease_are_counted(meter: Recorder) -> None:
    now = [0.0]
    store = MemoryStore(max_records=1, clock=lambda: now[0])  # the store's time, moved by hand
    dedup = Deduplicator(store, lease=0.001)
    calls = [KeyedCall(os.urandom(32).hex(), "0" * 64, os.urandom(16), "tools/call") for _ in range(3)]
    first = await dedup.begin(calls[0])
    assert not isinstance(first, bytes)
    first.abandon()
    now[0] += 0.01  # its lease (1 ms) expires: its record may be evicted
    second = await dedup.begin(calls[1])  # evicts the expired claim
    assert not isinstance(second, bytes)
    second.abandon()
    dedup.lease = 60.0
    now[0] += 0.01
    third = await dedup.begin(calls[2])  # evicts the second's expired claim
    assert not isinstance(third, bytes)
    # The third's claim is taken over: its completion finds the lease lost.
    await store.complete(calls[2].store_key, third.token, "r", b"{}", 1000)
    store._records[calls[2].store_key].fields["t"] = "another"
    assert await third.complete(b'{"jsonrpc":"2.0","id":1,"result":{}}') == "lease_lost"
    held = await dedup.begin(KeyedCall(os.urandom(32).hex(), "0" * 64, os.urandom(16), "tools/call"))
    assert not isinstance(held, bytes)  # the completed record made room
    with pytest.raises(Refusal, match="full of calls in flight") as refused:
        await dedup.begin(KeyedCall(os.urandom(32).hex(), "0" * 64, os.urandom(16), "tools/call"))
    assert refused.value.reason == "store_unavailable"
    held.abandon()
    assert meter.of("mcp_framing.dedupe.evictions") == [
        {"record": "expired_claim"},
        {"record": "expired_claim"},
        {"record": "completed"},
    ]
    assert {"detected": "completion"} in meter.of("mcp_framing.dedupe.leases_lost")
    assert {"recorded": "lease_lost"} in meter.of("mcp_framing.dedupe.completions")
    assert {"operation": "claim", "outcome": "full"} in meter.of("mcp_framing.dedupe.store.duration")
    decisions = meter.of("mcp_framing.dedupe.decisions")
    assert decisions[-1] == {"decision": "refused", "reason": "store_unavailable", "mcp.method.name": "tools/call"}
