"""Request-key deduplication (SPEC.md §17): the store key (§17.2), the fingerprint (§17.3, the
canonical JSON of §17.12.1), the claim with its lease and fencing token (§17.4, §17.5), the
completion and replay (§17.6), the window and size (§17.7), waiting and a store that cannot be
reached (§17.8) and the refusals (§17.9); with an in-memory store and a Redis store
(`RedisStore`, redis-py's asyncio client, the `[redis]` extra) in the record format every
implementation shares (§17.12.1), so that Rust and Python servers on one Redis are one fleet."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, ClassVar, Literal, Protocol

from .. import telemetry

__all__ = [
    "DEDUPE_DATA_KEY",
    "DEFAULT_PREFIX",
    "Deduplicator",
    "KeyedCall",
    "MalformedRequest",
    "MemoryStore",
    "RedisStore",
    "Refusal",
    "StoreError",
    "canonical_json",
    "parse_request",
    "store_key",
]

_log = logging.getLogger("mcp_framing.dedupe")
#: §17.12.1: the default key prefix every instance of a fleet shares.
DEFAULT_PREFIX = "mcp-framing:dedupe:"
#: §17.9: where a refusal's details go in the error's `data`.
DEDUPE_DATA_KEY = "io.github.mcp-framing/dedupe"
REQUEST_KEY_META = "io.github.mcp-framing/requestKey"
_DOMAIN = b"mcp-framing/dedupe/v1\x00"
#: §17.10: arrays and objects nested this deep are refused.
MAX_DEPTH = 128


class MalformedRequest(ValueError):
    """A request body that is not one JSON text read strictly (§17.10): answered `400`."""


class StoreError(Exception):
    """The store failed or answered out of format (§17.8: "store unavailable", never "no record").
    `kind` names it as the Rust crate's `StoreError::kind` does (the `outcome` of the store's
    metric): `timeout`, `full`, `corrupt`, `not_replicated`, `redis`, or `other` for a store of
    the application's that raised something else."""

    def __init__(self, message: str, kind: str = "redis") -> None:
        super().__init__(message)
        self.kind = kind


# -- canonical JSON (§17.3, §17.12.1)


class _Int(int):
    """A number token without fraction or exponent in [-2^63, 2^64-1]: an integer."""


def _parse_int(token: str) -> Any:
    if token == "-0":
        return -0.0
    value = int(token)
    if -(1 << 63) <= value <= (1 << 64) - 1:
        return _Int(value)
    return _parse_float(token)


def _parse_float(token: str) -> float:
    value = float(token)
    if math.isinf(value):
        raise MalformedRequest(f"the number {token} is past the largest double")
    return value


def _constant(name: str) -> Any:
    raise MalformedRequest(f"{name} is not JSON")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise MalformedRequest(f"duplicate member {key!r}")
        out[key] = value
    return out


_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_constant
)


def _depth_ok(body: bytes) -> None:
    """Arrays and objects nested at most 127 deep (strings skipped)."""
    depth = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth >= MAX_DEPTH:
                raise MalformedRequest(f"nested more than {MAX_DEPTH - 1} deep")
        elif byte in (0x5D, 0x7D):
            depth -= 1


def _no_surrogates(value: Any) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise MalformedRequest("a lone surrogate escape") from None
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def parse_request(body: bytes) -> Any:
    """A request body read strictly (§17.10, §17.12.1): UTF-8, one JSON text, nested at most 127
    deep, no duplicate member names, no lone surrogate escapes, no number past the largest double.

    >>> parse_request(b'{"a":1,"a":2}')
    Traceback (most recent call last):
    ...
    mcp_framing.server.dedupe.MalformedRequest: duplicate member 'a'
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise MalformedRequest(f"not UTF-8: {err}") from None
    if len(body) >= 2 * MAX_DEPTH - 2:
        _depth_ok(body)
    try:
        value = _DECODER.decode(text)
    except MalformedRequest:
        raise
    except (ValueError, RecursionError) as err:
        raise MalformedRequest(str(err)) from None
    _no_surrogates(value)
    return value


def _double(value: float) -> str:
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    text = repr(abs(value))
    mantissa, _, exp = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    k = len(whole) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    k -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    n = len(digits)
    if n <= k <= 16:
        out = digits + "0" * (k - n) + ".0"
    elif 0 < k < n:
        out = digits[:k] + "." + digits[k:]
    elif -4 <= k <= 0:
        out = "0." + "0" * (-k) + digits
    else:
        e = k - 1
        out = digits[0] + ("." + digits[1:] if n > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + out


def canonical_json(value: Any) -> str:
    """§17.3's canonical JSON of a value `parse_request` read.

    >>> canonical_json(parse_request(b'{"b":1e2, "a":[1.0,"\\\\u00e9\\\\n"], "c":-0}'))
    '{"a":[1.0,"é\\\\n"],"b":100.0,"c":-0.0}'
    """
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-8"))
        return "{" + ",".join(_string(k) + ":" + canonical_json(v) for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    if isinstance(value, str):
        return _string(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, _Int):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    return _double(float(value))


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def fingerprint(params: Any, covered_meta: Iterable[str] = ()) -> str:
    """§17.3: SHA-256 (hex) of the canonical JSON of `params` without `_meta` (or with only the
    covered entries of an object `_meta`)."""
    if isinstance(params, dict) and "_meta" in params:
        meta = params["_meta"]
        params = {k: v for k, v in params.items() if k != "_meta"}
        if isinstance(meta, dict):
            kept = {k: v for k, v in meta.items() if k in set(covered_meta)}
            if kept:
                params["_meta"] = kept
    return hashlib.sha256(canonical_json(params).encode("utf-8")).hexdigest()


def store_key(principal: bytes | None, method: str, tool: str | None, request_key: bytes) -> str:
    """§17.2: the store key (hex) of a principal's digest (None: anonymous), a method, a tool and
    a request key."""
    out = bytearray(_DOMAIN)
    out += b"\x00" if principal is None else b"\x01" + principal
    m = method.encode("utf-8")
    out += len(m).to_bytes(8, "big") + m
    if tool is None:
        out += bytes(8)
    else:
        t = tool.encode("utf-8")
        out += (1).to_bytes(8, "big") + b"\x01" + len(t).to_bytes(8, "big") + t
    out += request_key
    return hashlib.sha256(bytes(out)).hexdigest()


def authorization_principal(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The default principal (§17.2, §17.12.1): SHA-256 of the `Authorization` values joined by
    `,`, in order; None (anonymous) without one."""
    values = [v for k, v in headers if k.lower() == b"authorization"]
    return hashlib.sha256(b",".join(values)).digest() if values else None


# -- the records


class Store(Protocol):
    """The four atomic operations of §17.4–§17.6 on one record (the Redis scripts' contracts)."""

    async def claim(
        self, key: str, fp: str, token: str, lease_ms: int, retention_ms: int, reexecute: bool
    ) -> list[Any]:
        """["claimed", g] | ["conflict", fp] | ["in_flight", ms] | ["abandoned"] | ["done", s, r]."""
        ...

    async def renew(self, key: str, token: str, lease_ms: int) -> bool:
        """Extends the lease; False if it was lost."""
        ...

    async def complete(self, key: str, token: str, state: str, payload: bytes, retention_ms: int) -> bool:
        """Records the outcome; False if the lease was lost."""
        ...

    async def release(self, key: str, token: str) -> bool:
        """Deletes the claim; False if it was lost."""
        ...


@dataclass
class _Record:
    fields: dict[str, Any]
    expires: float  # ms, monotonic


class MemoryStore:
    """A store in this process (§17.12): bounded in records; to make room it removes expired
    records first, then claims whose lease expired, then completed records closest to their
    expiry; full of claims in flight, it refuses new claims (fail closed)."""

    def __init__(self, max_records: int = 100_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_records = max_records
        self._clock = clock
        self._records: dict[str, _Record] = {}
        self.evictions = 0

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def _get(self, key: str) -> _Record | None:
        record = self._records.get(key)
        if record is not None and record.expires <= self._now():
            del self._records[key]
            return None
        return record

    def _room(self) -> None:
        if len(self._records) < self.max_records:
            return
        now = self._now()
        for key in [k for k, r in self._records.items() if r.expires <= now]:
            del self._records[key]
        if len(self._records) < self.max_records:
            return
        expired = [k for k, r in self._records.items() if r.fields["s"] == "f" and r.fields["l"] <= now]
        done = sorted((r.expires, k) for k, r in self._records.items() if r.fields["s"] in ("r", "e", "n", "a"))
        for key in expired + [k for _, k in done]:
            if len(self._records) < self.max_records:
                return
            state = self._records.pop(key).fields["s"]
            self.evictions += 1
            telemetry.dedupe_eviction("expired_claim" if state == "f" else "completed")
        if len(self._records) >= self.max_records:
            raise StoreError("the in-memory store is full of calls in flight", "full")

    async def claim(
        self, key: str, fp: str, token: str, lease_ms: int, retention_ms: int, reexecute: bool
    ) -> list[Any]:
        now = self._now()
        record = self._get(key)
        if record is None:
            self._room()
            fields = {"s": "f", "fp": fp, "t": token, "g": 1, "l": now + lease_ms}
            self._records[key] = _Record(fields, now + retention_ms)
            return ["claimed", 1]
        f = record.fields
        if f["fp"] != fp:
            return ["conflict", f["fp"]]
        if f["s"] == "f":
            left = f["l"] - now
            if left > 0:
                return ["in_flight", left]
            if reexecute:
                f.update(t=token, g=f["g"] + 1, l=now + lease_ms)
                record.expires = now + retention_ms
                return ["claimed", f["g"]]
            f["s"] = "a"
            f.pop("t", None)
            f.pop("l", None)
            return ["abandoned"]
        if f["s"] == "a":
            return ["abandoned"]
        return ["done", f["s"], f["r"]]

    async def renew(self, key: str, token: str, lease_ms: int) -> bool:
        record = self._get(key)
        if record is None or record.fields["s"] != "f" or record.fields.get("t") != token:
            return False
        record.fields["l"] = self._now() + lease_ms
        return True

    async def complete(self, key: str, token: str, state: str, payload: bytes, retention_ms: int) -> bool:
        record = self._get(key)
        if record is None or record.fields.get("t") != token:
            return False
        if record.fields["s"] != "f":
            return True
        record.fields.update(s=state, r=payload)
        record.fields.pop("l", None)
        record.expires = self._now() + retention_ms
        return True

    async def release(self, key: str, token: str) -> bool:
        record = self._get(key)
        if record is None or record.fields["s"] != "f" or record.fields.get("t") != token:
            return False
        del self._records[key]
        return True


def _script(name: str) -> str:
    return (resources.files(__package__) / "redis_scripts" / f"{name}.lua").read_text("utf-8")


class RedisStore:
    """The Redis / Valkey store (§17.12, §17.12.1): one hash per record under `prefix`, one Lua
    script per operation (the same files as the Rust crate's, byte for byte), times from the
    server's clock. Each operation is one round trip (`EVALSHA`; the script's text only when the
    server does not know it yet), and a claim that waits for replicas one more.

    `client` is a redis-py asyncio client (the `[redis]` extra): `redis.asyncio.Redis` for one
    server, or `redis.asyncio.RedisCluster` for a Redis Cluster (Redis 7 or Valkey). In a cluster
    each record is one key, so it lives on one slot, and the scripts declare themselves writes
    (`#!lua`): a node that serves the slot only as a replica (a primary demoted by a failover the
    client has not noticed yet) redirects them with `MOVED` instead of failing them. `cluster`
    is detected from the client; `from_url` reads the Rust crate's URLs
    (`redis+cluster://host:port,host:port/` names a cluster's seed nodes).

    `wait_for_replicas=(count, timeout)` (seconds) makes every claim and every completion wait
    until `count` replicas acknowledged the write (`WAIT count timeout`, on the connection that
    wrote: in the completion's round trip, and after a claim once the script claimed, so a
    replay or a refusal never waits on replicas): a claim fewer acknowledged is given back and
    fails with `StoreError` kind `not_replicated` (the call does not execute: fail closed; a
    claim whose `WAIT` failed is given back too); a completion fewer acknowledged fails the same
    way (the result is on the primary; a failover now could lose it). As the Redis
    documentation says, `WAIT` narrows what a failover can lose but does not make Redis strongly
    consistent (§17.12). Keep the timeout well under the `Deduplicator`'s `store_timeout` (2 s):
    a shard left without a replica by a failover then still replays its records at once and
    refuses new calls until it has a replica again. In a cluster, the store keeps a connection
    of its own to each primary it waits on (`WAIT` counts the writes of its connection);
    `aclose()` closes them.

    >>> RedisStore.scripts()["claim"].startswith("local t = redis.call('TIME')")
    True
    """

    def __init__(
        self,
        client: Any,
        prefix: str = DEFAULT_PREFIX,
        cluster: bool | None = None,
        wait_for_replicas: tuple[int, float] | None = None,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.cluster = _is_cluster(client) if cluster is None else cluster
        if wait_for_replicas is not None:
            count, timeout = wait_for_replicas
            if count < 0 or timeout <= 0:
                raise ValueError("wait_for_replicas is (count >= 0, timeout > 0 seconds)")
            wait_for_replicas = (count, timeout) if count > 0 else None
        self.wait_for_replicas = wait_for_replicas
        head = "#!lua\n" if self.cluster else ""
        self._scripts = {name: _Lua(head + text) for name, text in self.scripts().items()}
        self._nodes: dict[str, Any] = {}  # cluster with WAIT: a client per primary, by name

    @classmethod
    def from_url(
        cls, url: str, prefix: str = DEFAULT_PREFIX, wait_for_replicas: tuple[int, float] | None = None
    ) -> RedisStore:
        """A store on the server or cluster a URL names, as the Rust crate's
        `RedisStore::builder(url)` reads it: `redis://` or `rediss://` one server,
        `redis+cluster://` or `rediss+cluster://` a cluster's seed nodes (`host:port` separated
        by commas; any one reachable is enough).

        >>> RedisStore.from_url("redis+cluster://127.0.0.1:7000,127.0.0.1:7001/").cluster
        True
        """
        scheme, sep, rest = url.partition("://")
        if not sep:
            raise ValueError("a Redis URL starts with redis:// or rediss://")
        cluster = scheme.endswith("+cluster")
        scheme = scheme.removesuffix("+cluster")
        authority, slash, path = rest.partition("/")
        user, at, hosts = authority.rpartition("@")
        seeds = [f"{scheme}://{user}{at}{host}{slash}{path}" for host in hosts.split(",") if host]
        if not seeds:
            raise ValueError("a Redis URL names no host")
        if cluster:
            from urllib.parse import unquote, urlsplit

            from redis.asyncio.cluster import ClusterNode, RedisCluster

            parts = [urlsplit(seed) for seed in seeds]
            client: Any = RedisCluster(
                startup_nodes=[ClusterNode(p.hostname or "127.0.0.1", p.port or 6379) for p in parts],
                username=unquote(parts[0].username) if parts[0].username else None,
                password=unquote(parts[0].password) if parts[0].password else None,
                ssl=scheme == "rediss",
            )
        else:
            if len(seeds) > 1:
                raise ValueError("several hosts in a Redis URL name a cluster: use redis+cluster://")
            import redis.asyncio as aioredis

            client = aioredis.from_url(seeds[0])
        return cls(client, prefix, cluster, wait_for_replicas)

    @staticmethod
    def scripts() -> dict[str, str]:
        """The four scripts' texts."""
        return {name: _script(name) for name in ("claim", "renew", "complete", "release")}

    async def _eval(
        self, name: str, key: str, argv: tuple[Any, ...], wait: _Wait | None
    ) -> tuple[Any, int | Exception | None]:
        """The script's reply, and (with `wait_for_replicas`) how many replicas acknowledged it
        when `wait` sends a `WAIT` for that reply (`_Wait`), or why that `WAIT` failed; None
        when no `WAIT` was sent."""
        script = self._scripts[name]
        redis_key = self.prefix + key
        args = [str(a) if isinstance(a, int) else a for a in argv]
        try:
            if wait is not None and self.wait_for_replicas is not None:
                return await self._eval_waiting(script, redis_key, args, wait)
            try:
                return await self.client.evalsha(script.sha1, 1, redis_key, *args), None
            except Exception as err:
                if not _no_script(err):
                    raise
                return await self.client.eval(script.code, 1, redis_key, *args), None
        except StoreError:
            raise
        except Exception as err:  # any redis error: the store failed (§17.8)
            raise StoreError(f"{name}: {err}") from err

    async def _eval_waiting(
        self, script: _Lua, redis_key: str, args: list[Any], wait: _Wait
    ) -> tuple[Any, int | Exception | None]:
        """The script, then `WAIT` as `wait` says, on one connection: `WAIT` counts the
        replicas that acknowledged the writes of the connection it is sent on. In a cluster, on a
        connection of this store's own to the primary that serves the key: a `MOVED` (a failover
        the client had not seen) or a primary that cannot be reached makes it learn the layout
        again and send the script again, to the node that serves the slot now."""
        assert self.wait_for_replicas is not None
        count, timeout = self.wait_for_replicas
        wait_command = ("WAIT", count, max(1, int(timeout * 1000)))
        for command in ("EVALSHA", "EVAL"):
            body = script.sha1 if command == "EVALSHA" else script.code
            for attempt in range(_CLUSTER_TRIES):
                target = await self._primary(redis_key) if self.cluster else self.client
                try:
                    reply, acknowledged = await _script_then_wait(
                        target.connection_pool, (command, body, 1, redis_key, *args), wait, wait_command
                    )
                except Exception as err:
                    if not self.cluster or not _unreachable(err) or attempt + 1 == _CLUSTER_TRIES:
                        raise
                    await self._relearn(target)
                    continue
                if self.cluster and _moved(reply) and attempt + 1 < _CLUSTER_TRIES:
                    await self._relearn(None)
                    continue
                break
            if command == "EVALSHA" and isinstance(reply, Exception) and _no_script(reply):
                continue
            if isinstance(reply, Exception):
                raise reply
            if acknowledged is not None and not isinstance(acknowledged, (int, Exception)):
                raise StoreError(f"WAIT: unexpected reply {acknowledged!r}", "corrupt")
            return reply, acknowledged
        raise StoreError("the script is unknown to the server even after EVAL", "corrupt")

    async def _primary(self, redis_key: str) -> Any:
        """A client of this store's own for the primary that serves `redis_key` now."""
        await self.client.initialize()  # the slots' layout, once (again after `_relearn`)
        node = self.client.get_node_from_key(redis_key)
        client = self._nodes.get(node.name)
        if client is None:
            import redis.asyncio as aioredis

            options = {
                k: v
                for k, v in self.client.connection_kwargs.items()
                if k not in ("response_callbacks", "redis_connect_func")
            }
            pool = aioredis.ConnectionPool(host=node.host, port=node.port, **options)
            client = self._nodes[node.name] = aioredis.Redis(connection_pool=pool)
        return client

    async def _relearn(self, gone: Any) -> None:
        """The cluster's layout asked for again (a node failed or a slot moved); a client of
        this store's to a node that could not be reached is closed."""
        if gone is not None:
            for name, client in list(self._nodes.items()):
                if client is gone:
                    del self._nodes[name]
                    await client.aclose()
        await self.client.nodes_manager.initialize()

    async def aclose(self) -> None:
        """Closes the connections this store opened itself (in a cluster with
        `wait_for_replicas`, one client per primary); the client it was given stays open."""
        nodes, self._nodes = list(self._nodes.values()), {}
        for client in nodes:
            await client.aclose()

    def _replicated(self, name: str, acknowledged: int | Exception | None) -> None:
        if self.wait_for_replicas is None or acknowledged is None:
            return
        if isinstance(acknowledged, Exception):
            raise StoreError(f"{name}: WAIT: {acknowledged}") from acknowledged
        count, timeout = self.wait_for_replicas
        if acknowledged < count:
            raise StoreError(
                f"{name}: {acknowledged} of {count} replicas acknowledged the deduplication record within {timeout} s",
                "not_replicated",
            )

    async def claim(
        self, key: str, fp: str, token: str, lease_ms: int, retention_ms: int, reexecute: bool
    ) -> list[Any]:
        argv = (fp, token, max(1, lease_ms), max(1, retention_ms), "1" if reexecute else "0")
        # Only a claim is waited for, once the script claimed: its other answers (a replay, a
        # refusal) wrote nothing, and behind a primary that lost its replicas a `WAIT` sent with
        # them would hold each for the whole timeout.
        reply, acknowledged = await self._eval("claim", key, argv, "if_claimed")
        if not isinstance(reply, list) or not reply:
            raise StoreError(f"claim: unexpected reply {reply!r}", "corrupt")
        state = _text(reply[0])
        if state in ("claimed", "in_flight") and len(reply) == 2 and isinstance(reply[1], int):
            if state == "claimed":
                try:
                    self._replicated("claim", acknowledged)
                except StoreError:
                    # Not durable enough to execute on: the claim given back (best effort; else
                    # it expires with its lease), and the call refused (fail closed).
                    try:
                        await self._eval("release", key, (token,), None)
                    except StoreError:
                        _log.debug("a claim too few replicas acknowledged could not be released", exc_info=True)
                    raise
            return [state, reply[1]]
        if state == "conflict" and len(reply) == 2:
            return [state, _text(reply[1])]
        if state == "abandoned" and len(reply) == 1:
            return [state]
        if state == "done" and len(reply) == 3 and _text(reply[1]) in ("r", "e", "n"):
            payload = reply[2] if isinstance(reply[2], bytes) else str(reply[2]).encode()
            return [state, _text(reply[1]), payload]
        raise StoreError(f"claim: unexpected reply {reply!r}", "corrupt")

    async def _flag(self, name: str, key: str, argv: tuple[Any, ...], wait: _Wait | None) -> bool:
        reply, acknowledged = await self._eval(name, key, argv, wait)
        if not isinstance(reply, int):
            raise StoreError(f"{name}: unexpected reply {reply!r}", "corrupt")
        if reply == 1:
            self._replicated(name, acknowledged)
        return reply == 1

    async def renew(self, key: str, token: str, lease_ms: int) -> bool:
        return await self._flag("renew", key, (token, max(1, lease_ms)), None)

    async def complete(self, key: str, token: str, state: str, payload: bytes, retention_ms: int) -> bool:
        # The completion's `WAIT` goes with the script, in its round trip.
        return await self._flag("complete", key, (token, state, payload, max(1, retention_ms)), "with_script")

    async def release(self, key: str, token: str) -> bool:
        return await self._flag("release", key, (token,), None)


@dataclass(frozen=True)
class _Lua:
    """A script's text and SHA-1 (the name `EVALSHA` runs it by)."""

    code: str
    sha1: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha1", hashlib.sha1(self.code.encode("utf-8")).hexdigest())


def _is_cluster(client: Any) -> bool:
    try:
        from redis.asyncio.cluster import RedisCluster
    except ImportError:
        return False
    return isinstance(client, RedisCluster)


def _no_script(err: BaseException) -> bool:
    try:
        from redis.exceptions import NoScriptError
    except ImportError:
        return False
    return isinstance(err, NoScriptError)


#: When a script's `WAIT` is sent: in the script's own round trip ("with_script", a completion),
#: or after it, only once the claim script claimed ("if_claimed": its other answers wrote nothing).
_Wait = Literal["with_script", "if_claimed"]


def _claimed(reply: Any) -> bool:
    """Whether the claim script's reply is a claim (the one answer that wrote)."""
    return isinstance(reply, list) and len(reply) > 0 and reply[0] in (b"claimed", "claimed")


async def _script_then_wait(
    pool: Any, script: tuple[Any, ...], wait: _Wait, wait_command: tuple[Any, ...]
) -> tuple[Any, int | Exception | None]:
    """`script` on one connection of `pool`, held, then `wait_command` on the same connection as
    `wait` says: `WAIT` counts the writes of its connection, so neither a command of another
    connection nor a retry on a new one (the client's own retries) may stand in for it. With
    "with_script" both go in one round trip. An error reply comes back as the exception, not raised;
    a `WAIT` that failed comes back as its exception (the script's write stands)."""
    connection = await pool.get_connection()
    try:
        together = wait == "with_script"
        if together:
            await connection.send_packed_command(connection.pack_commands([script, wait_command]))
        else:
            await connection.send_command(*script)
        reply = await _reply(connection)
        if not together and not _claimed(reply):
            return reply, None
        try:
            if not together:
                await connection.send_command(*wait_command)
            return reply, await _reply(connection)
        except Exception as err:
            await connection.disconnect()
            return reply, err
    except BaseException:
        await connection.disconnect()  # nothing half read is left for the connection's next user
        raise
    finally:
        await pool.release(connection)


async def _reply(connection: Any) -> Any:
    """The next reply on `connection`; an error reply (`NOSCRIPT`, `MOVED`, ...) as its exception."""
    from redis.exceptions import ResponseError

    try:
        return await connection.read_response()
    except ResponseError as err:
        return err


#: Tries of a script and its `WAIT` in a cluster, learning the layout again between them.
_CLUSTER_TRIES = 4


def _unreachable(err: BaseException) -> bool:
    from redis.exceptions import ConnectionError, TimeoutError

    return isinstance(err, (ConnectionError, TimeoutError, OSError))


def _moved(reply: Any) -> bool:
    from redis.exceptions import AskError, MovedError, TryAgainError

    return isinstance(reply, (MovedError, AskError, TryAgainError))


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("ascii", "replace")
    return str(value)


# -- the engine


@dataclass(frozen=True)
class KeyedCall:
    """One keyed JSON-RPC request (§17.1): its store key, fingerprint and request key."""

    store_key: str
    fingerprint: str
    request_key: bytes
    method: str

    @classmethod
    def from_request(
        cls,
        request: dict[str, Any],
        principal: bytes | None,
        header_key: bytes | None,
        covered_meta: Iterable[str] = (),
    ) -> KeyedCall | None:
        """The call of a request with a key (header or `_meta`, equal if both), None without one;
        `MalformedRequest` for a malformed `_meta` key or one that differs from the header's."""
        params = request.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        meta_key = meta.get(REQUEST_KEY_META) if isinstance(meta, dict) else None
        key = header_key
        if meta_key is not None:
            try:
                from .opt_in import parse_request_key

                parsed = parse_request_key(meta_key) if isinstance(meta_key, str) else None
            except ValueError:
                parsed = None
            if parsed is None or (header_key is not None and parsed != header_key):
                raise MalformedRequest(
                    "the request key in params._meta is malformed or differs from the Mcp-Framing-Request-Key header"
                )
            key = parsed
        if key is None:
            return None
        method = request["method"]
        tool = params.get("name") if method == "tools/call" and isinstance(params, dict) else None
        tool = tool if isinstance(tool, str) else None
        return cls(store_key(principal, method, tool, key), fingerprint(params, covered_meta), key, method)


class Refusal(Exception):
    """A keyed call refused (§17.9), answered as a JSON-RPC error under the attempt's id."""

    CODES: ClassVar[dict[str, tuple[int, bool, str]]] = {
        "key_conflict": (-32080, False, "the request key was already used with different parameters"),
        "in_progress": (-32081, True, "an earlier attempt with this request key is still executing"),
        "result_not_stored": (
            -32082,
            False,
            "the call with this request key completed, but its result was too large to store",
        ),
        "outcome_unknown": (
            -32083,
            False,
            "an earlier attempt with this request key stopped without a result: outcome unknown",
        ),
        "store_unavailable": (-32084, True, "the deduplication store is unavailable"),
        "lease_lost": (-32085, False, "the execution's lease was taken over before its result was recorded"),
    }

    def __init__(self, reason: str, detail: str = "", **data: Any) -> None:
        code, retryable, text = self.CODES[reason]
        super().__init__(text + (f": {detail}" if detail else ""))
        self.reason = reason
        self.code = code
        self.retryable = retryable
        self.data = data

    def to_response(self, id_: Any, request_key: bytes) -> bytes:
        """The JSON-RPC error response under `id_`."""
        data = {"reason": self.reason, "retryable": self.retryable, "requestKey": request_key.hex(), **self.data}
        error = {"code": self.code, "message": f"mcp-framing: {self}", "data": {DEDUPE_DATA_KEY: data}}
        return json.dumps({"jsonrpc": "2.0", "id": id_, "error": error}, separators=(",", ":")).encode()


@dataclass
class Execution:
    """A claimed call: renew its lease while it runs, then `complete` (or `release`) it once."""

    dedup: Deduplicator
    call: KeyedCall
    token: str
    _heartbeat: asyncio.Task[None] | None = field(default=None, repr=False)
    lease_lost: bool = False
    #: When the deduplicator began deciding (`time.monotonic`), for the operation's duration.
    started: float = field(default_factory=time.monotonic)
    _finished: bool = field(default=False, repr=False)

    def start(self) -> None:
        self._heartbeat = asyncio.ensure_future(self._renew())

    async def _renew(self) -> None:
        d = self.dedup
        while True:
            await asyncio.sleep(d.lease / 3)
            try:
                if not await d._store("renew", d.store.renew(self.call.store_key, self.token, d.lease_ms)):
                    self.lease_lost = True
                    telemetry.dedupe_lease_lost("heartbeat")
                    _log.warning("the lease of a deduplicated call was taken over while it ran")
                    return
            except StoreError:  # a renewal that fails is tried again at the next beat
                _log.debug("lease renewal failed", exc_info=True)

    def _stop(self, ended: Callable[[], tuple[str | None, int | None]] | None) -> None:
        """Ends the heartbeat, and with `ended` times the call (once) with how it ended."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        if ended is not None and not self._finished:
            self._finished = True
            elapsed = time.monotonic() - self.started
            telemetry.server_operation(self.call.method, "execute", elapsed, ended)

    async def complete(self, response: bytes) -> str:
        """Records the final response (`stored`, `not_stored`, `lease_lost`, `store_error`, or
        `no_final_response` when it is not a JSON-RPC response)."""
        d = self.dedup
        found = _final_member(response)
        if found is None:
            self._stop(lambda: ("no_final_response", None))
            _log.warning("the response ended without a final response; the claim expires with its lease")
            return "no_final_response"
        state, payload = found
        recorded = "stored"
        if len(payload) > d.max_result_bytes:
            state, payload, recorded = "n", str(len(payload)).encode(), "not_stored"
        self._stop(None)
        recorded = await self._record(state, payload, recorded)
        # Timed until the result is recorded (or could not be), as the Rust crate times it.
        self._stop(lambda: _ended(found[0], found[1]) if state in ("r", "e") else (None, None))
        return recorded

    async def _record(self, state: str, payload: bytes, recorded: str) -> str:
        """The completion written, tried again while the lease holds if the store failed."""
        d = self.dedup
        deadline = time.monotonic() + d.lease
        pause = 0.02
        while True:
            try:
                done = await d._store(
                    "complete", d.store.complete(self.call.store_key, self.token, state, payload, d.window_ms)
                )
            except StoreError as err:
                if err.kind in ("timeout", "redis") and time.monotonic() + pause < deadline:
                    _log.warning("recording the result of a deduplicated call failed; trying again: %s", err)
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 0.5)
                    continue
                _log.error("the completion of a deduplicated call could not be recorded", exc_info=True)
                telemetry.dedupe_completion("store_error")
                return "store_error"
            if not done:
                telemetry.dedupe_completion("lease_lost")
                telemetry.dedupe_lease_lost("completion")
                _log.error("result not recorded: the lease was taken over (the call may have executed twice)")
                return "lease_lost"
            telemetry.dedupe_completion(recorded)
            return recorded

    async def release(self) -> None:
        """Gives the claim back (the handler refused the request before running it)."""
        self._stop(lambda: ("released", None))
        try:
            await self.dedup._store("release", self.dedup.store.release(self.call.store_key, self.token))
        except StoreError:
            _log.warning("a claim could not be released; it expires with its lease", exc_info=True)

    def abandon(self) -> None:
        """No final response: the claim expires with its lease (§17.10)."""
        self._stop(lambda: ("no_final_response", None))


def _ended(state: str, payload: bytes) -> tuple[str | None, int | None]:
    """How a call whose final member is `payload` ended, for `mcp.server.operation.duration`
    (the error type, the JSON-RPC error code), as the Rust crate reads it: an `error` member's
    `code` (`invalid_error` without an integer one), `tool_error` for a result whose `isError`
    is `true`."""
    from .declare import _members, _NotAnObject

    try:
        text = payload.decode("utf-8")
        members, _ = _members(text, 0)
    except (UnicodeDecodeError, _NotAnObject):
        return ("invalid_error", None) if state == "e" else (None, None)
    values = {key: text[start:end] for key, start, end in members}
    if state == "e":
        code = values.get("code", "")
        if code.lstrip("-").isdigit() and -(1 << 63) <= int(code) < (1 << 63):
            return None, int(code)
        return "invalid_error", None
    return ("tool_error", None) if values.get("isError") == "true" else (None, None)


def _final_member(response: bytes) -> tuple[str, bytes] | None:
    """The `result` or `error` member's exact bytes of a JSON-RPC response (§17.6)."""
    from .declare import _members, _NotAnObject

    try:
        text = response.decode("utf-8")
        members, _ = _members(text, 0)
    except (UnicodeDecodeError, _NotAnObject):
        return None
    names = {m[0] for m in members}
    if "id" not in names:
        return None
    for key, start, end in reversed(members):
        if key in ("result", "error"):
            return ("r" if key == "result" else "e"), text[start:end].encode("utf-8")
    return None


class Deduplicator:
    """Deduplicates keyed calls (§17) on `store` (a `MemoryStore`, a `RedisStore`).

    Defaults as the Rust crate's: `methods` `tools/call`, a 24 h window, a 30 s lease renewed every
    third of it, a 5 s wait for a duplicate in flight (polling 5 ms doubling to 200 ms), results
    up to 1 MiB stored, a 2 s store timeout, `on_expired_lease="reexecute"` (or `"refuse"`).
    `principal` maps a request's ASGI headers to the caller's digest (default: SHA-256 of its
    `Authorization` values; None is anonymous); `covered_meta` names `_meta` entries that are part
    of the call (§17.3).
    """

    def __init__(
        self,
        store: Store,
        *,
        methods: Iterable[str] = ("tools/call",),
        window: float = 86_400.0,
        lease: float = 30.0,
        wait: float = 5.0,
        max_result_bytes: int = 1 << 20,
        store_timeout: float = 2.0,
        on_expired_lease: Literal["reexecute", "refuse"] = "reexecute",
        principal: Callable[[Iterable[tuple[bytes, bytes]]], bytes | None] = authorization_principal,
        covered_meta: Iterable[str] = (),
        max_request_bytes: int = 16 << 20,
    ) -> None:
        self.store = store
        self.methods = tuple(methods)
        self.window = window
        self.lease = lease
        self.wait = wait
        self.max_result_bytes = max_result_bytes
        self.store_timeout = store_timeout
        self.reexecute = on_expired_lease == "reexecute"
        self.principal = principal
        self.covered_meta = tuple(covered_meta)
        self.max_request_bytes = max_request_bytes

    @property
    def window_ms(self) -> int:
        return max(1, int(self.window * 1000))

    @property
    def lease_ms(self) -> int:
        return max(1, int(self.lease * 1000))

    async def _store(self, operation: str, pending: Awaitable[Any]) -> Any:
        """One store operation, bounded by `store_timeout` and timed (§17.15); every failure a
        `StoreError` with its kind."""
        started = time.monotonic()
        outcome = "ok"
        try:
            return await asyncio.wait_for(pending, self.store_timeout)
        except asyncio.TimeoutError:
            outcome = "timeout"
            raise StoreError(f"{operation}: no answer within {self.store_timeout} s", "timeout") from None
        except StoreError as err:
            outcome = err.kind
            raise
        except Exception as err:  # a store of the application's
            outcome = "other"
            raise StoreError(f"{operation}: {err}", "other") from err
        finally:
            telemetry.dedupe_store_operation(operation, time.monotonic() - started, outcome)

    async def begin(self, call: KeyedCall) -> Execution | bytes:
        """Claims `call`: an `Execution` to run it, or the stored final member to replay (as the
        replay's JSON-RPC response is built by `replay`); raises `Refusal`. Each decision is
        counted, and a replay or a refusal timed, as SPEC.md §17.15 says (an execution is timed
        until its result)."""
        started = time.monotonic()
        decided, waited = await self._decide(call, started)
        elapsed = time.monotonic() - started
        wait = elapsed if waited else None
        if isinstance(decided, Refusal):
            refusal = decided
            telemetry.dedupe_decision("refused", refusal.reason, call.method, wait)
            telemetry.server_operation(call.method, "refused", elapsed, lambda: (None, refusal.code))
            raise refusal
        if isinstance(decided, Execution):
            telemetry.dedupe_decision("execute", "", call.method, wait)
            return decided
        telemetry.dedupe_decision("replay", "", call.method, wait)
        kind, _, payload = decided.partition(b"\x00")
        state = "r" if kind == b"result" else "e"
        telemetry.server_operation(call.method, "replay", elapsed, lambda: _ended(state, payload))
        return decided

    async def _decide(self, call: KeyedCall, started: float) -> tuple[Execution | bytes | Refusal, bool]:
        """`begin`'s decision, and whether it waited for an attempt in flight (§17.8)."""
        waited = 0.0
        delay = 0.005
        while True:
            token = os.urandom(16).hex()
            claim = self.store.claim(
                call.store_key, call.fingerprint, token, self.lease_ms, self.window_ms, self.reexecute
            )
            try:
                reply = await self._store("claim", claim)
            except StoreError as err:
                refusal = Refusal("store_unavailable", str(err), retryAfterMs=1000)
                refusal.__cause__ = err
                return refusal, waited > 0
            state = reply[0]
            if state == "claimed":
                execution = Execution(self, call, token, started=started)
                execution.start()
                return execution, waited > 0
            if state == "conflict":
                return Refusal("key_conflict"), waited > 0
            if state == "abandoned":
                return Refusal("outcome_unknown"), waited > 0
            if state == "done":
                kind, payload = reply[1], reply[2]
                if kind == "n":
                    return Refusal("result_not_stored", resultBytes=int(payload)), waited > 0
                member = "result" if kind == "r" else "error"
                return member.encode() + b"\x00" + payload, waited > 0
            # in flight: wait (bounded), never past the lease's end
            left = reply[1] / 1000
            if waited >= self.wait:
                return Refusal("in_progress", retryAfterMs=int(min(left, 1.0) * 1000)), True
            pause = min(delay, self.wait - waited, max(left, 0.001))
            await asyncio.sleep(pause)
            waited += pause
            delay = min(delay * 2, 0.2)


def replay(stored: bytes, id_: Any) -> bytes:
    """The replay of a stored final member (`Deduplicator.begin`) under the retry's id (§17.6)."""
    member, _, payload = stored.partition(b"\x00")
    id_text = json.dumps(id_, separators=(",", ":"), ensure_ascii=False).encode()
    return b'{"jsonrpc":"2.0","id":' + id_text + b',"' + member + b'":' + payload + b"}"
