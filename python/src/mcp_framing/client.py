"""`framing_http_client`: the `httpx2.AsyncClient` to give the SDK's `streamable_http_client`."""

from __future__ import annotations

from typing import Any

import httpx2

from .body import Mapping
from .limits import Limits
from .retry import EndpointResolver, RetrySchedule
from .transport import FramingTransport

__all__ = ["framing_http_client", "framing_transport"]

#: The SDK's own defaults (`mcp.shared._httpx_utils`): 30 s, and 300 s to read a response stream.
_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def framing_http_client(
    *,
    mapping: Mapping = "compat",
    limits: Limits | None = None,
    accept_ambiguity: bool = False,
    retries: RetrySchedule | None = None,
    resolver: EndpointResolver | None = None,
    idle_timeout: float | None = 60.0,
    transport: httpx2.AsyncBaseTransport | None = None,
    **client_options: Any,
) -> httpx2.AsyncClient:
    """An `httpx2.AsyncClient` whose every MCP request is framed and verified (`FramingTransport`).

    Give it to the official SDK, which stays untouched::

        async with framing_http_client() as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()   # reads the server's framing contract
                    await session.call_tool("search", {"q": "framing"})

    `retries` enables automatic keyed retries (SPEC.md §17.13: only where the server declares
    deduplication for the method, or the method is idempotent); `resolver` is asked for the
    endpoint before every attempt. The other keyword arguments go to `httpx2.AsyncClient`
    (headers, auth, timeout; the SDK's timeouts by default).

    >>> client = framing_http_client(retries=RetrySchedule(max_attempts=3))
    >>> type(client._transport).__name__
    'FramingTransport'
    """
    framing = FramingTransport(
        transport,
        mapping=mapping,
        limits=limits,
        accept_ambiguity=accept_ambiguity,
        retries=retries,
        resolver=resolver,
        idle_timeout=idle_timeout,
    )
    client_options.setdefault("timeout", _TIMEOUT)
    return httpx2.AsyncClient(transport=framing, **client_options)


def framing_transport(client: httpx2.AsyncClient) -> FramingTransport:
    """The `FramingTransport` of a client `framing_http_client` built: its counters (`stats`)
    and the policy negotiated with the server (`policy`).

    >>> framing_transport(framing_http_client()).stats.attempts
    0
    """
    transport = client._transport  # httpx2 keeps the transport it was given here
    if not isinstance(transport, FramingTransport):
        raise TypeError("not a client built by framing_http_client")
    return transport
