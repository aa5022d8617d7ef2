"""Automatic keyed retries (SPEC.md §17.13): how many attempts, how long between them, and where
each one goes (an endpoint resolver, called before every attempt)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from .contract import Discovery

__all__ = [
    "IDEMPOTENT_METHODS",
    "EndpointResolver",
    "Resolution",
    "RetrySchedule",
    "StaticResolver",
]

#: Methods retried even without deduplication: MCP's reads and lists (as the Rust crate).
IDEMPOTENT_METHODS = frozenset(
    [
        "ping",
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
    ]
)


@dataclass(frozen=True)
class RetrySchedule:
    """Bounded attempts with exponential backoff and full jitter.

    The delay before retry `n` (1 for the first) is uniform in [0, min(initial * 2^(n-1), max)],
    and at least what a retryable refusal asked for (`retryAfterMs`, §17.9).

    >>> RetrySchedule().max_attempts
    4
    >>> 0 <= RetrySchedule(initial_backoff=0.1).delay(3) <= 0.4
    True
    """

    max_attempts: int = 4
    initial_backoff: float = 0.1
    max_backoff: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def delay(self, retry: int, floor: float = 0.0) -> float:
        """Seconds to wait before retry `retry`."""
        ceiling = min(self.initial_backoff * (2 ** max(retry - 1, 0)), self.max_backoff)
        return max(random.uniform(0.0, ceiling), floor)


@dataclass(frozen=True)
class Resolution:
    """Where the next attempt goes, and what that endpoint's discovery says (None: what the
    session's own `initialize` / `server/discover` exchange established)."""

    endpoint: str
    discovery: Discovery | None = None


class EndpointResolver(Protocol):
    """Resolves the endpoint of every attempt, retries included (§11.5: under per-request
    discovery a retry may land elsewhere, and its contract is re-checked there)."""

    async def resolve(self, url: str) -> Resolution:
        """The endpoint for the next attempt of a request the SDK addressed to `url`."""
        ...


class StaticResolver:
    """Every attempt to the URL the SDK gave, with the contract the session's handshake declared.

    >>> import asyncio
    >>> asyncio.run(StaticResolver().resolve("http://127.0.0.1:1/mcp")).endpoint
    'http://127.0.0.1:1/mcp'
    """

    async def resolve(self, url: str) -> Resolution:
        """The SDK's URL."""
        return Resolution(url)
