"""The `mcp` 1.x line's seam (FastMCP 3.x and gateways such as mcp-proxy pin it): its clients send
through `httpx` (not `httpx2`), built by the factory given to
`streamablehttp_client(url, httpx_client_factory=...)`. `framing_httpx_client_factory` gives
that factory an `httpx.AsyncClient` whose transport hands every request to the same
`FramingTransport` the 2.x line uses (its own connections on `httpx2`): only the conversion
between the two libraries' request and response objects is this module's.

    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client
    from mcp_framing.httpx1 import framing_httpx_client_factory

    factory = framing_httpx_client_factory()
    async with streamablehttp_client(url, httpx_client_factory=factory) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()

Needs `httpx` (which `mcp` 1.x installs).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import httpx2

from .transport import FramingTransport

__all__ = ["HttpxBridge", "framing_httpx_client_factory"]


class _Stream(httpx.AsyncByteStream):
    def __init__(self, response: httpx2.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_raw():
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


class HttpxBridge(httpx.AsyncBaseTransport):
    """An `httpx.AsyncBaseTransport` in front of a `FramingTransport` (an `httpx2` transport):
    each request goes over as it is (method, URL, headers, body, timeouts), each response comes
    back streaming. An `httpx2` transport error is raised as the `httpx` error of the same name
    (`httpx.ReadTimeout` for `httpx2.ReadTimeout`, ...)."""

    def __init__(self, framing: FramingTransport) -> None:
        self.framing = framing

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        extensions = {k: v for k, v in request.extensions.items() if k == "timeout"}
        inner = httpx2.Request(
            request.method, str(request.url), headers=request.headers.raw, content=body, extensions=extensions
        )
        try:
            response = await self.framing.handle_async_request(inner)
        except httpx2.HTTPError as err:
            kind = getattr(httpx, type(err).__name__, None)
            if isinstance(kind, type) and issubclass(kind, httpx.HTTPError):
                if issubclass(kind, httpx.RequestError):
                    raise kind(str(err), request=request) from err
                raise httpx.TransportError(str(err)) from err
            raise httpx.TransportError(str(err)) from err
        return httpx.Response(
            response.status_code,
            headers=response.headers.raw,
            stream=_Stream(response),
            request=request,
        )

    async def aclose(self) -> None:
        await self.framing.aclose()


def framing_httpx_client_factory(
    *,
    transport: httpx2.AsyncBaseTransport | None = None,
    on_transport: Callable[[FramingTransport], None] | None = None,
    **options: Any,
) -> Callable[..., httpx.AsyncClient]:
    """The `httpx_client_factory` for `mcp` 1.x's `streamablehttp_client` (and `mcp-proxy`'s,
    FastMCP 3.x's, which take the same callable): every client it builds verifies every response
    through a `FramingTransport` built with `options` (`mapping`, `limits`, `accept_ambiguity`,
    `retries`, `resolver`, `idle_timeout`, as `framing_http_client` takes them) over `transport`
    (the `httpx2` transport that reaches the network, by default a new one). `on_transport`
    receives each client's `FramingTransport` (its `stats` and `policy`).

    >>> client = framing_httpx_client_factory(mapping="binary")(headers={"x-a": "1"})
    >>> type(client._transport).__name__, client._transport.framing.mapping
    ('HttpxBridge', 'binary')
    """

    def factory(
        headers: dict[str, str] | None = None, timeout: httpx.Timeout | None = None, auth: httpx.Auth | None = None
    ) -> httpx.AsyncClient:
        framing = FramingTransport(transport, **options)
        if on_transport is not None:
            on_transport(framing)
        client: dict[str, Any] = {"follow_redirects": True, "transport": HttpxBridge(framing)}
        # The SDK's own defaults (`mcp.shared._httpx_utils.create_mcp_http_client`): 30 s, 300 s to read.
        client["timeout"] = timeout if timeout is not None else httpx.Timeout(30.0, read=300.0)
        if headers is not None:
            client["headers"] = headers
        if auth is not None:
            client["auth"] = auth
        return httpx.AsyncClient(**client)

    return factory
