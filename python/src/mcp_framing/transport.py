"""The httpx2 transport the official `mcp` SDK sends through: it opts every request in, verifies
every response as it streams, and hands the SDK only verified messages (SPEC.md §10, §11, §16,
§17.13).

The SDK's `streamable_http_client(url, http_client=...)` sends every POST, GET and DELETE through
the `httpx2.AsyncClient` it is given; `FramingTransport` sits under that client. For a JSON-RPC
request it draws a request key (§10), sends the opt-in headers and `_meta` entry, and answers the
SDK with a `text/event-stream` response of its own, whose events are exactly the messages whose
MESSAGE_END verified (no `id:` field, so the SDK never resumes a stream from unverified data).
A response that does not end clean becomes, at once, a JSON-RPC error for the request's id with
the outcome under `data["io.github.mcp-framing/outcome"]`, or a retry where §17.13 allows one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx2

from .body import BINARY_MEDIA_TYPE, Mapping, body_decoder, mapping_of_response
from .compat import CompatDecoder
from .contract import EXTENSION_KEY, ClientPolicy, ContractError, Discovery
from .decoder import json_rpc_response
from .errors import escape
from .jsonrpc import DuplicateIdError, put_id
from .limits import Limits
from .outcome import Outcome, RetryDecision, classify, decide_retry
from .report import OUTCOME_DATA_KEY
from .retry import IDEMPOTENT_METHODS, EndpointResolver, Resolution, RetrySchedule, StaticResolver
from .sse import EventStreamDecoder, is_utf8
from .telemetry import Attempt, fingerprint, logger
from .verdict import Received

__all__ = [
    "DEDUPE_DATA_KEY",
    "OUTCOME_DATA_KEY",
    "REQUEST_KEY_META",
    "DiscoveringResolver",
    "FramingTransport",
    "TransportStats",
]

#: §17.9: `data[DEDUPE_DATA_KEY]` of a deduplication refusal.
DEDUPE_DATA_KEY = "io.github.mcp-framing/dedupe"
#: §10: the request key in `params._meta`.
REQUEST_KEY_META = "io.github.mcp-framing/requestKey"
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
_HANDSHAKES = ("initialize", "server/discover")
# Headers of the SDK's request not copied to an attempt (httpx2 writes them for the new body).
_DROPPED = frozenset(["content-length", "host", "transfer-encoding"])
_ERROR_TEXT_MAX = 64 * 1024


def _new_key() -> bytes:
    while True:  # §10: never all zero
        key = os.urandom(16)
        if any(key):
            return key


#: One SSE event as the chunks of the body the SDK reads (`_Body` yields each).
Event = tuple[bytes, ...]


def _sse_event(message: bytes) -> Event:
    """One SSE `message` event carrying `message`: a line break in it (LF, CR or CRLF: in a JSON
    text only whitespace) becomes a new data line, which the SDK's parser joins with LF; a message
    without CR (every one the compatible mapping carries, §18.3) reaches it byte for byte. As the
    TypeScript package writes it. Three chunks, the message not copied: httpx2 hands the SDK's
    SSE parser each chunk as it comes (decoded incrementally, lines joined by the parser).

    >>> _sse_event(b'{"a":\\r\\n1,\\n"b":2}')
    (b'data: ', b'{"a":\\ndata: 1,\\ndata: "b":2}', b'\\n\\n')
    """
    if b"\r" in message:
        message = message.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if b"\n" in message:
        message = message.replace(b"\n", b"\ndata: ")
    return (b"data: ", message, b"\n\n")


@dataclass
class TransportStats:
    """What a transport handed the SDK and what it saw (counters, shared by its calls)."""

    #: Messages handed to the SDK, each one verified by its MESSAGE_END.
    verified_messages: int = 0
    #: Responses that ended clean.
    complete: int = 0
    #: Attempts that did not end clean (each one logged and counted).
    incomplete: int = 0
    #: Attempts sent, first ones and retries.
    attempts: int = 0
    #: Retries sent.
    retries: int = 0
    #: JSON-RPC errors handed to the SDK in place of a response.
    errors: int = 0
    #: The outcome of every attempt, in order (for tests and diagnostics).
    outcomes: list[Outcome] = field(default_factory=list)


class _Collected(EventStreamDecoder):
    """The `message` events of an unframed SSE body (a `server/discover` result, the GET stream)."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.collected: list[bytes] = []

    def _event(self, name: bytes | None, data: bytes, valid_utf8: bool) -> None:
        if name in (None, b"", b"message"):  # a message event (SPEC.md §15, §18.3)
            self.collected.append(data)


class DiscoveringResolver:
    """Round robin over `endpoints`, running `server/discover` (MCP 2026-07-28) on the chosen one
    before every attempt: per-request discovery, as a stateless fleet behind an autoscaler needs
    (each resolution's contract is re-checked, §11.5)."""

    def __init__(self, endpoints: list[str], transport: httpx2.AsyncBaseTransport | None = None) -> None:
        if not endpoints:
            raise ValueError("at least one endpoint")
        self.endpoints = list(endpoints)
        self._next = 0
        self._transport = transport

    def bind(self, transport: httpx2.AsyncBaseTransport) -> None:
        """Sends the discovery requests through `transport` (a `FramingTransport` binds its inner one)."""
        if self._transport is None:
            self._transport = transport

    async def resolve(self, url: str) -> Resolution:
        """The next endpoint and its `server/discover` result."""
        endpoint = self.endpoints[self._next % len(self.endpoints)]
        self._next += 1
        transport = self._transport or httpx2.AsyncHTTPTransport()
        return Resolution(endpoint, await discover(transport, endpoint))


async def discover(transport: httpx2.AsyncBaseTransport, endpoint: str) -> Discovery:
    """Runs `server/discover` on `endpoint` (unframed: discovery comes before the contract).

    Raises `ContractError` when the endpoint answers nothing usable.
    """
    body = {
        "jsonrpc": "2.0",
        "id": "mcp-framing-discover",
        "method": "server/discover",
        # MCP 2026-07-28: the version and the client's capabilities in `_meta`, the version and
        # the method in headers too (rmcp refuses the request without them)
        "params": {"_meta": {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}},
    }
    request = httpx2.Request(
        "POST",
        endpoint,
        headers={
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "server/discover",
        },
        content=json.dumps(body).encode(),
    )
    try:
        response = await transport.handle_async_request(request)
        content = await response.aread()
    except httpx2.HTTPError as err:
        raise ContractError("NotADiscoveryResult", f"server/discover at {endpoint}: {err}") from err
    for raw in _unframed_messages(response, content, Limits()):
        message = json_rpc_response(raw)
        if message is not None and "result" in message:
            return Discovery.from_result("server/discover", message["result"])
    raise ContractError(
        "NotADiscoveryResult", f"server/discover at {endpoint}: HTTP {response.status_code}, no discovery result"
    )


def _unframed_messages(response: httpx2.Response, content: bytes, limits: Limits) -> list[bytes]:
    """The JSON-RPC messages of an unframed response body (JSON, or SSE `message` events)."""
    content_type = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type == "text/event-stream":
        events = _Collected(limits)
        events.feed(content)
        events.feed(b"\n\n")
        return events.collected
    return [content] if content else []


class FramingTransport(httpx2.AsyncBaseTransport):
    """An `httpx2.AsyncBaseTransport` that makes every MCP response self-verifying (see the module
    docs). Build it through `framing_http_client`, or wrap another transport (`inner`).

    - `mapping`: the mapping asked for: `"compat"` (default: every message stays a plain MCP
      event, SPEC.md §18), `"binary"` or `"sse"`; a response in any framed mapping is read.
    - `limits`: the client's own limits; the ones negotiated with the server's contract are sent
      with every request (`Mcp-Framing-Limits`) and enforced.
    - `accept_ambiguity`: talk to a server that declares no contract (Regime C): requests are
      still opted in, a framed response is verified as any other, and an unframed one fails as
      `ambiguous` (SPEC.md §11.3), never delivered; default False: such a server is refused.
    - `retries`: the attempt budget and backoff (default `RetrySchedule()`: 4 attempts; `False`:
      one); a request is retried only where §17.13 allows it (an idempotent method, or a keyed
      request whose method the contract declares deduplicated), to the endpoint the `resolver`
      gives (by default the SDK's URL: retries stay on it; a resolver is needed to go elsewhere).
    - `resolver`: where each attempt goes (default: the SDK's URL, with the contract of the
      session's `initialize` / `server/discover` exchange).
    - `idle_timeout`: seconds a response may go without completing a frame (None: for ever).
    """

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport | None = None,
        *,
        mapping: Mapping = "compat",
        limits: Limits | None = None,
        accept_ambiguity: bool = False,
        retries: RetrySchedule | Literal[False] | None = None,
        resolver: EndpointResolver | None = None,
        idle_timeout: float | None = 60.0,
        idempotent_methods: frozenset[str] = IDEMPOTENT_METHODS,
    ) -> None:
        if mapping not in ("compat", "binary", "sse"):
            raise ValueError(f"unknown mapping {mapping!r}")
        self.inner = inner if inner is not None else httpx2.AsyncHTTPTransport()
        self.mapping = mapping
        self.limits = limits or Limits()
        self.accept_ambiguity = accept_ambiguity
        if retries is False:
            retries = RetrySchedule(max_attempts=1)
        self.retries = retries if retries is not None else RetrySchedule()
        self.resolver = resolver or StaticResolver()
        bind = getattr(self.resolver, "bind", None)
        if bind is not None:
            bind(self.inner)
        self.idle_timeout = idle_timeout
        self.idempotent_methods = idempotent_methods
        self.policy: ClientPolicy | None = None
        self.policy_error: ContractError | None = None
        self.stats = TransportStats()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET":
            return await self._standalone(request)
        if request.method != "POST":
            return await self.inner.handle_async_request(request)
        body = await request.aread()
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if not isinstance(message, dict) or "method" not in message or "id" not in message:
            # A notification, a response to the server, a batch: nothing is awaited on it.
            return await self.inner.handle_async_request(request)
        return await _Call(self, request, message).start()

    # -- the policy ------------------------------------------------------------------------------

    def adopt(self, discovery: Discovery) -> ContractError | None:
        """Builds the policy from a discovery (the first one), or re-checks it (later ones)."""
        try:
            if self.policy is None:
                self.policy = ClientPolicy.build(discovery, self.limits, accept_ambiguity=self.accept_ambiguity)
                self.policy_error = None
                logger.info("framing contract from the %s result: Regime %s", discovery.source, self.policy.regime)
            else:
                self.policy.recheck(discovery)
        except ContractError as err:
            if self.policy is None:
                self.policy_error = err
            return err
        return None

    # -- the standalone GET stream (§16) ------------------------------------------------------------

    async def _standalone(self, request: httpx2.Request) -> httpx2.Response:
        """The GET stream answers no request and is not framed: its events pass, but a JSON-RPC
        response on it cannot be verified, so the stream ends there (§16)."""
        response = await self.inner.handle_async_request(request)
        if response.status_code != 200:
            return response
        return httpx2.Response(
            200,
            headers=[(k, v) for k, v in response.headers.items() if k.lower() not in ("content-length",)],
            stream=_Body(_standalone_events(response, self.limits)),
            request=request,
        )


async def _standalone_events(response: httpx2.Response, limits: Limits) -> AsyncIterator[Event]:
    events = _Collected(limits)
    try:
        async for chunk in response.aiter_bytes():
            events.feed(chunk)
            for data in events.collected:
                if json_rpc_response(data) is not None:
                    logger.warning("a JSON-RPC response on the GET stream cannot be verified: the stream ends")
                    return
                yield _sse_event(data)
            events.collected.clear()
            if events.error is not None:
                return
    finally:
        await response.aclose()


class _Body(httpx2.AsyncByteStream):
    """The body the SDK reads: each event's chunks in turn."""

    def __init__(self, events: AsyncIterator[Event]) -> None:
        self._events = events

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for event in self._events:
            for chunk in event:
                yield chunk

    async def aclose(self) -> None:
        close = getattr(self._events, "aclose", None)
        if close is not None:
            await close()


class _Verifier:
    """What one attempt's body gives the SDK, without I/O: `feed` each read of the body, then
    `finish`. The transport's `_read` drives it as the body streams, and python/bench.py drives
    it to measure the path a response really takes to the SDK.

    The verified messages that are not the final response become SSE events at once; the final
    response (§7.1), or the candidate for it, is held (`final`) until the end of input decides
    (a candidate that was no response is then handed on in turn, in order); a message the SDK
    cannot be handed unchanged (`_unfit`), or one after the final response (§1), stops the body.

    What is read of the final response (SPEC.md §7.1, the decoder's lazy reading): a stream that
    ends with its sentinel has its final response's head read (`jsonrpc.response_head`: the top
    level up to `result`), all that the transport uses of it (`error.data` of a refusal,
    `error.code`, §17.9) unless `finish(whole=True)`: a handshake's contract (§11.2) and a
    retry's id (§17.13) need every byte read. The rest of a head is handed to the SDK unread:
    were it not JSON, the SDK's parser fails the request (a parse error for its id), as it did
    when such a message was handed on as no response; nothing else depends on it.
    """

    __slots__ = ("decoder", "failure", "final", "final_id_spans", "final_value", "held", "late")

    def __init__(self, decoder: Any) -> None:
        self.decoder = decoder
        self.final: bytes | None = None
        self.held: int | None = None  # the index of `final`
        self.final_value: Any = None
        self.final_id_spans: list[tuple[int, int]] = []
        self.failure: Outcome | None = None
        self.late: list[Event] = []  # events `finish` found (a candidate that was no response)

    @property
    def stopped(self) -> bool:
        """Whether nothing more of the body can change the outcome (a failure, a decode error)."""
        return self.failure is not None or self.decoder.error is not None

    def feed(self, chunk: bytes) -> list[Event]:
        """The SSE events (verified messages) for the SDK that `chunk` completes."""
        decoder = self.decoder
        first = len(decoder.messages)
        messages = decoder.feed(chunk)
        events: list[Event] = []
        self._release(events)
        for index, message in enumerate(messages, first):
            problem = _unfit(decoder, message)
            if problem is not None:
                self.failure = problem
                break
            at = decoder.response_index
            if at == index:
                self.final, self.held = message, index  # §7.1: held until the end of input decides
            elif at is not None and at < index:
                # §1: nothing may follow the final response (this one is not delivered)
                self.failure = Outcome.client_side(
                    "abandoned",
                    "MessageAfterFinalResponse",
                    "a message followed the final response: the stream answers nothing",
                    decoder.received(),
                )
                break
            else:
                events.append(_sse_event(message))
        return events

    def _release(self, events: list[Event]) -> None:
        """The held candidate, handed on if the decoder read it whole and found no response."""
        if self.held is not None and self.decoder.response_index != self.held:
            events.append(_sse_event(self.final))  # type: ignore[arg-type]
            self.final = self.held = None

    def finish(self, ended: Outcome | None = None, whole: bool = False) -> Outcome:
        """The attempt's outcome: `ended` if the body was abandoned (idle, failed), else the
        failure `feed` found, else the decoder's verdict (§7); clean only with a final response.
        `whole`: the final response is read whole (see the class docs)."""
        decoder = self.decoder
        failure = ended if ended is not None else self.failure
        if failure is None:
            failure = classify(decoder.finish())
        if self.held is not None and (whole or not failure.is_clean):
            # read whole where the outcome does not rest on it (a failure hands on a candidate
            # that was no response, as it would have been handed on had it been read at once)
            _ = decoder.final_response
            self._release(self.late)
        if failure.is_clean and self.final is None:
            # §1: a complete stream must end with its response: it answers nothing
            detail = "the stream is complete but carries no final response"
            failure = Outcome.client_side("abandoned", "NoFinalResponse", detail, failure.received)
        elif failure.is_clean:
            top = decoder.response_head
            self.final_value = top.members
            self.final_id_spans = top.id_spans
        if not failure.is_clean:
            self.final = self.held = None
        return failure


@dataclass
class _Attempt:
    """One attempt whose framed body is being read."""

    response: httpx2.Response
    decoder: Any
    telemetry: Attempt
    #: The parsed final response, once the attempt ended clean (§7.1).
    final_value: Any = None
    #: Where its top-level `id` values lie (as §7.1 read them).
    final_id_spans: list[tuple[int, int]] = field(default_factory=list)


class _Call:
    """One JSON-RPC request the SDK sent: its attempts, and the body the SDK reads."""

    def __init__(self, transport: FramingTransport, request: httpx2.Request, message: dict[str, Any]) -> None:
        self.t = transport
        self.request = request
        self.message = message
        self.id = message["id"]
        self.method = str(message["method"])
        params = message.get("params")
        self.tool = params.get("name") if self.method == "tools/call" and isinstance(params, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        given = meta.get(REQUEST_KEY_META) if isinstance(meta, dict) else None
        key = None
        if isinstance(given, str) and len(given) == 32:
            try:
                key = bytes.fromhex(given)
            except ValueError:
                key = None
        self.key = key if key is not None and any(key) else _new_key()
        self.handshake = self.method in _HANDSHAKES
        self.idempotent = self.method in transport.idempotent_methods
        self.attempt = 0
        self.sent = 0  # attempts actually sent (a refused one is not)
        self.started = time.monotonic()
        self.session = request.headers.get("mcp-session-id")
        self.retry_after = 0.0
        self.mapping: Mapping = transport.mapping  # the mapping of the last attempt's response

    # -- sending -------------------------------------------------------------------------------

    def _body(self, opt_in: bool) -> bytes:
        message = dict(self.message)
        if self.attempt > 1:
            message["id"] = f"{self.id}~attempt-{self.attempt}"  # §10: a retry is a new request
        if opt_in:
            params = dict(message.get("params") or {})
            meta = dict(params.get("_meta") or {})
            meta[REQUEST_KEY_META] = self.key.hex()
            if META_PROTOCOL_VERSION in meta:
                # §16: a 2026-07-28 request declares the extension in its capabilities
                capabilities = dict(meta.get(META_CLIENT_CAPABILITIES) or {})
                extensions = dict(capabilities.get("extensions") or {})
                extensions[EXTENSION_KEY] = {"versions": [1]}
                capabilities["extensions"] = extensions
                meta[META_CLIENT_CAPABILITIES] = capabilities
            params["_meta"] = meta
            message["params"] = params
        return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()

    def _headers(self, limits: Limits) -> list[tuple[str, str]]:
        t = self.t
        headers = [(k, v) for k, v in self.request.headers.items() if k.lower() not in _DROPPED]
        headers = [(k, v) for k, v in headers if not k.lower().startswith("mcp-framing") and k.lower() != "accept"]
        accept = "application/json, text/event-stream"
        if t.mapping == "binary":
            accept = f"{BINARY_MEDIA_TYPE}, {accept}"
        headers += [
            ("accept", accept),
            ("mcp-framing", "1"),
            ("mcp-framing-request-key", self.key.hex()),
            ("mcp-framing-limits", f"frame={limits.max_frame_payload}, message={limits.max_message_size}"),
        ]
        if t.mapping == "compat":
            headers.append(("mcp-framing-mapping", "compat"))
        return headers

    def _telemetry(self, endpoint: str) -> Attempt:
        return Attempt(self.method, self.key, endpoint, self.attempt, self.tool)

    async def _send(self) -> tuple[str, Any]:
        """Attempt `self.attempt + 1`: ("stream", _Attempt), ("failed", (Outcome, Attempt)),
        ("status", response) for an HTTP error status, ("refused", ContractError)."""
        t = self.t
        self.attempt += 1
        policy = t.policy
        url = str(self.request.url)
        if policy is None and t.policy_error is not None and not self.handshake:
            return "refused", t.policy_error
        endpoint = url
        if not self.handshake:
            if self.session is None:
                try:
                    resolution = await t.resolver.resolve(url)
                except ContractError as err:
                    return "refused", err
                endpoint = resolution.endpoint
                discovery = resolution.discovery
            else:
                discovery = None  # an attempt carrying a session stays on its endpoint
            if discovery is None and t.policy is None:
                try:
                    discovery = await discover(t.inner, endpoint)
                except ContractError as err:
                    t.policy_error = ContractError(
                        "NoContract", f"configuration error: no framing contract known ({err})"
                    )
                    return "refused", t.policy_error
            if discovery is not None:
                err = t.adopt(discovery)
                if err is not None:
                    return "refused", err
            policy = t.policy
            assert policy is not None
            # Regime C, accepted (no negotiated contract): still opted in, so that a response
            # that arrives framed proves itself; an unframed one is ambiguous (§11.3).
        limits = policy.decoder_limits() if policy is not None else t.limits
        telemetry = self._telemetry(endpoint)
        request = httpx2.Request(
            "POST",
            endpoint,
            headers=self._headers(limits),
            content=self._body(opt_in=True),
            extensions=self.request.extensions,
        )
        t.stats.attempts += 1
        self.sent += 1
        try:
            response = await t.inner.handle_async_request(request)
        except httpx2.HTTPError as err:
            # It may or may not have reached the server: abandoned, nothing received.
            outcome = Outcome.client_side("abandoned", "Send", f"the request could not be sent: {err}")
            return "failed", (outcome, telemetry)
        status = response.status_code
        if status >= 300 or status == 202:
            if status >= 500:
                text = await _error_text(response)
                return "failed", (_http_status(status, text), telemetry)
            if status == 202:
                return "accepted", response
            text = await _error_text(response)
            return "failed", (_http_status(status, text), telemetry)
        mapping = mapping_of_response(response.headers.get("mcp-framing"), response.headers.get("content-type"))
        if mapping is None:
            if t.accept_ambiguity and (policy is None or policy.negotiated is None):
                # §11.3: under an accept-ambiguity policy an unframed body is Regime C, its close
                # completion-ambiguous whatever it held, and nothing in it is delivered.
                await response.aclose()
                detail = f"the response is not framed (content type {response.headers.get('content-type')!r})"
                return "failed", (Outcome.client_side("ambiguous", "NotFramed", detail), telemetry)
            # An unframed handshake too (SPEC.md §11.3, §16): it fails at once, as the Rust engine
            # fails it, and nothing in it reaches the SDK. Its message says what to do.
            await response.aclose()
            detail = _not_framed_detail(response.headers.get("content-type"))
            return "failed", (Outcome.client_side("contract_violation", "NotFramed", detail), telemetry)
        decoder = body_decoder(mapping, limits, self.key)
        self.mapping = mapping
        return "stream", _Attempt(response, decoder, telemetry)

    # -- the SDK's response -----------------------------------------------------------------------

    async def start(self) -> httpx2.Response:
        what, value = await self._send()
        if what == "accepted" and self.attempt == 1:
            return value  # type: ignore[no-any-return]
        headers = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]
        if what == "stream":
            session = value.response.headers.get("mcp-session-id")
            if session is not None:
                headers.append(("mcp-session-id", session))
        return httpx2.Response(200, headers=headers, stream=_Body(self._events(what, value)), request=self.request)

    async def _events(self, what: str, value: Any) -> AsyncIterator[Event]:
        t = self.t
        while True:
            if what == "refused":
                yield self._refusal(value)
                return
            if what == "accepted":
                await value.aclose()
                outcome = Outcome.client_side("abandoned", "NoFinalResponse", "202 Accepted for a request")
                yield self._failure(outcome, RetryDecision("do_not_retry", "would_repeat"))
                return
            if what == "stream":
                attempt: _Attempt = value
                final: list[bytes] = []
                async for event in self._read(attempt, final):
                    yield event
                outcome = t.stats.outcomes[-1]
                telemetry = attempt.telemetry
                if outcome.is_clean and final:
                    value = attempt.final_value
                    after = self._retryable_refusal(value, telemetry)
                    if after is None:
                        t.stats.complete += 1  # the stream ended clean (what follows may still fail)
                        yield self._deliver(final[0], value, attempt.final_id_spans, telemetry)
                        return
                    self.retry_after = after
                    decision = RetryDecision("retry", "keyed")
                else:
                    decision = self._decide(outcome, telemetry)
                    if not decision.is_retry:
                        yield self._failure(outcome, decision)
                        return
            else:  # "failed"
                outcome, telemetry = value
                t.stats.outcomes.append(outcome)
                t.stats.incomplete += 1
                telemetry.record_outcome(outcome)
                decision = self._decide(outcome, telemetry)
                if not decision.is_retry:
                    yield self._failure(outcome, decision)
                    return
            t.stats.retries += 1
            delay = t.retries.delay(self.attempt, self.retry_after)
            self.retry_after = 0.0
            logger.info(
                "retrying %s with the same request key %s in %.0f ms (attempt %d)",
                self.method,
                fingerprint(self.key),
                delay * 1000,
                self.attempt + 1,
            )
            await anyio.sleep(delay)
            what, value = await self._send()

    async def _read(self, attempt: _Attempt, final: list[bytes]) -> AsyncIterator[Event]:
        """Verifies one attempt's body as it streams (`_Verifier`): yields the verified messages
        that are not the final response (notifications, server requests) at once; keeps the
        final response in `final` until the end of input decides (§7); records the outcome."""
        t = self.t
        verifier = _Verifier(attempt.decoder)
        decoder = attempt.decoder
        chunks = attempt.response.aiter_bytes().__aiter__()
        idle = t.idle_timeout
        frames = 0
        deadline = time.monotonic() + idle if idle is not None else None
        ended: Outcome | None = None
        try:
            while True:
                try:
                    if deadline is None:
                        chunk = await chunks.__anext__()
                    else:
                        with anyio.fail_after(max(deadline - time.monotonic(), 0.0)):
                            chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    ended = Outcome.client_side(
                        "abandoned", "IdleTimeout", f"no frame for {idle} s", decoder.received()
                    )
                    break
                except httpx2.HTTPError as err:
                    ended = Outcome.client_side("abandoned", "Body", f"the body failed: {err}", decoder.received())
                    break
                events = verifier.feed(chunk)
                for event in events:
                    t.stats.verified_messages += 1
                    yield event
                if verifier.stopped:
                    break
                if deadline is not None and decoder.frames_decoded != frames:
                    frames = decoder.frames_decoded
                    deadline = time.monotonic() + idle  # type: ignore[operator]
        finally:
            await attempt.response.aclose()
        outcome = verifier.finish(ended, whole=self.handshake or self.attempt > 1)
        for event in verifier.late:
            t.stats.verified_messages += 1
            yield event
        if outcome.is_clean:
            assert verifier.final is not None
            final.append(verifier.final)
            attempt.final_value = verifier.final_value
            attempt.final_id_spans = verifier.final_id_spans
        t.stats.outcomes.append(outcome)
        attempt.telemetry.record_outcome(outcome)
        if not outcome.is_clean:
            t.stats.incomplete += 1

    def _decide(self, outcome: Outcome, telemetry: Attempt) -> RetryDecision:
        t = self.t
        policy = t.policy
        deduplicated = policy is not None and policy.deduplicates(self.method)
        if outcome.http_status is not None and outcome.http_status < 500:
            decision = RetryDecision("do_not_retry", "would_repeat")  # the server refused: final
        else:
            decision = decide_retry(outcome, idempotent=self.idempotent, keyed=True, deduplicated=deduplicated)
        if decision.is_retry and self.attempt >= t.retries.max_attempts:
            decision = decision.surfaced()
        telemetry.record_decision(decision)
        return decision

    def _retryable_refusal(self, final: dict[str, Any], telemetry: Attempt) -> float | None:
        """§17.9: a retryable deduplication refusal, retried like a cut while attempts are left:
        the least delay (seconds) before the retry, or None to deliver the response."""
        try:
            data = final["error"]["data"][DEDUPE_DATA_KEY]
        except (TypeError, KeyError):
            return None
        if not isinstance(data, dict) or data.get("retryable") is not True:
            return None
        # decided as a stream of which nothing was received (the Rust engine's rule)
        cut = Outcome("abandoned", "B", None, f"deduplication refusal: {data.get('reason')}", Received())
        decision = self._decide(cut, telemetry)
        if not decision.is_retry:
            return None
        after = data.get("retryAfterMs", 0)
        return min(float(after) / 1000.0, 10.0) if isinstance(after, (int, float)) else 0.0

    def _deliver(
        self, final: bytes, message: dict[str, Any], id_spans: list[tuple[int, int]], telemetry: Attempt
    ) -> Event:
        """The verified final response, under the SDK's own id (or the failure that stands for it)."""
        if self.attempt > 1:
            # A retry's response answers the retry's id: the SDK's own goes back into the id
            # member alone, every other byte as verified (§17.13).
            try:
                final = put_id(final, id_spans, self.id)  # where §7.1 read it: no second parse
            except DuplicateIdError as err:
                detail = f"attempt {self.attempt}: the final response's id cannot be put back: {err}"
                outcome = Outcome.client_side("corrupt", "DuplicateId", detail)
                return self._failure(outcome, RetryDecision("do_not_retry", "complete"))
        telemetry.record_operation(time.monotonic() - self.started, _error_type(message))
        self.t.stats.verified_messages += 1
        if self.handshake and self.t.policy is None and "result" in message:
            # the handshake carries the contract (§11.2)
            try:
                discovery = Discovery.from_result(self.method, message["result"])
            except ContractError as err:
                return self._refusal(err)
            refused = self.t.adopt(discovery)
            if refused is not None:
                return self._refusal(refused)
        return _sse_event(final)

    # -- the errors the SDK gets ------------------------------------------------------------------

    def _error_event(self, message: str, data: dict[str, Any]) -> Event:
        self.t.stats.errors += 1
        error = {
            "jsonrpc": "2.0",
            "id": self.id,
            "error": {"code": -32603, "message": f"mcp-framing: {message}", "data": {OUTCOME_DATA_KEY: data}},
        }
        return _sse_event(json.dumps(error, separators=(",", ":")).encode())

    def _failure(self, outcome: Outcome, decision: RetryDecision) -> Event:
        """The report of §11.7 for a request whose last attempt did not end clean."""
        received = outcome.received
        kind = outcome.kind
        classification: str = outcome.classification
        if outcome.error is not None and outcome.error.is_mapping_error:
            kind = "Sse" if self.mapping == "sse" else "Compat"  # the precise name is in `detail`
        if kind == "HttpStatus":
            classification = "http_error"
        elif kind in ("InvalidUtf8", "DuplicateId"):
            classification = "invalid_message"
        data: dict[str, Any] = {
            "classification": classification,
            "kind": kind,
            "detail": outcome.detail,
            "requestKeyFingerprint": fingerprint(self.key),
            "attempts": self.sent,
            "retryDecision": decision.action,
        }
        if classification == outcome.classification:
            data.update(
                retryReason=decision.reason,
                regime=outcome.regime,
                framesReceived=received.frames,
                bytesReceived=received.bytes,
                messagesVerified=received.messages,
                openMessageBytes=received.open_message_bytes,
            )
        if received.attempt_id is not None:
            data["attemptId"] = received.attempt_id.hex()
        if outcome.http_status is not None:
            data["httpStatus"] = outcome.http_status
        telemetry = self._telemetry(str(self.request.url))
        telemetry.record_operation(time.monotonic() - self.started, classification)
        message = f"response {outcome.message}" if classification == outcome.classification else outcome.detail
        return self._error_event(message, data)

    def _refusal(self, err: ContractError) -> Event:
        """The report of §11.7 for a request refused before any attempt: no usable contract."""
        data = {
            "classification": "configuration_error",
            "kind": err.kind,
            "detail": str(err),
            "requestKeyFingerprint": fingerprint(self.key),
            "attempts": self.sent,
            "retryDecision": "do_not_retry",
        }
        logger.warning("mcp-framing: %s (%s, request key %s)", err, self.method, fingerprint(self.key))
        return self._error_event(str(err), data)


#: What to do about a response that is not framed, in the Rust crate's words (`MappingViolation`):
#: at the handshake this is what a server without framing, or a gateway that re-encodes
#: responses, looks like to a client that opted in.
_NOT_FRAMED_HINT = (
    "the server does not frame its responses, or a proxy or gateway on the way removed the framing: "
    "put a framing layer in front of the server (mcp-frame proxy, or FramingLayer in a Rust server), "
    "or connect without mcp-framing (the SDK's stock transport)"
)


def _not_framed_detail(content_type: str | None) -> str:
    """The `NotFramed` message (SPEC.md §16), as every client of the repository words it.

    >>> _not_framed_detail("application/json").split(": ")[0]
    'response is not framed (content-type "application/json") although framing was requested'
    >>> _not_framed_detail(None).startswith("response is not framed (no content-type)")
    True
    """
    what = "no content-type" if content_type is None else f"content-type {json.dumps(content_type)}"
    return f"response is not framed ({what}) although framing was requested: {_NOT_FRAMED_HINT}"


def _http_status(status: int, text: str = "") -> Outcome:
    detail = f"HTTP {status}" + (f": {text}" if text else "")
    return Outcome.client_side("abandoned", "HttpStatus", detail, http_status=status)


async def _error_text(response: httpx2.Response) -> str:
    """At most 512 bytes of an error response's body, as escaped diagnostic text (never trusted)."""
    out = bytearray()
    try:
        async for chunk in response.aiter_bytes():
            out += chunk
            if len(out) >= 512:
                break
    except httpx2.HTTPError:
        pass
    finally:
        await response.aclose()
    return escape(out[:512].decode("utf-8", "replace"))


def _error_type(final: dict[str, Any]) -> str | None:
    """`error.type` of a request answered with a JSON-RPC error: its code."""
    error = final.get("error")
    return str(error.get("code")) if isinstance(error, dict) else None


def _unfit(decoder: Any, message: bytes) -> Outcome | None:
    """A verified message the SDK cannot be handed unchanged: not UTF-8 (the SDK's parser would
    replace bytes). Never altered: the request fails (SPEC.md §11.7, as the Rust engine).

    A compatible-mapping message is its event's data as dispatched, which the event's UTF-8
    check produced (§18.3); another one is validated here (`is_utf8`)."""
    if isinstance(decoder, CompatDecoder) or is_utf8(message):
        return None
    try:
        message.decode("utf-8")
        where = -1
    except UnicodeDecodeError as err:
        where = err.start
    return Outcome.client_side(
        "corrupt", "InvalidUtf8", f"a verified message is not valid UTF-8 (invalid byte at offset {where})"
    )


# Keep `Received` importable from here for type checkers of callers building outcomes.
_ = Received
