"""`FramingMiddleware`: a pure ASGI middleware that frames the responses of an MCP server
(SPEC.md §15, §16, §18) for the requests that opted in (and, with
`frame_all_responses="compat"`, every POST), and declares its framing contract in the
`initialize` and `server/discover` results passing through it (§11.2). The Rust crate's
`FramingLayer`, for ASGI apps."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Literal

from ..encoder import (
    ABORT_INTERNAL_ERROR,
    ABORT_UPSTREAM_FAILED,
    DEFAULT_FRAME_SIZE,
    EncodeError,
    MappingEncoder,
    StreamEncoder,
)
from ..limits import DEFAULT_MAX_MESSAGE_SIZE, MIN_MAX_FRAME_PAYLOAD
from .declare import MAX_DISCOVERY_REQUEST, Contract, Declaration, discovery_method
from .dedupe import Deduplicator, Execution, KeyedCall, MalformedRequest, Refusal, parse_request, replay
from .opt_in import (
    OptIn,
    OptInError,
    accepts_event_stream,
    content_essence,
    header_values,
    parse_request_key,
    response_headers,
)
from .relay import JsonRelay, SseRelay

__all__ = ["FramingMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_log = logging.getLogger("mcp_framing.server")
_FRAMING_HEADERS = {
    b"content-type",
    b"mcp-framing",
    b"cache-control",
    b"x-accel-buffering",
    b"content-length",
    b"content-encoding",
}


class FramingMiddleware:
    """Frames an MCP server's responses, as the Rust crate's `FramingLayer` does.

    - A request that opted in (`Mcp-Framing: 1`, §16) gets its `200` response framed in the
      mapping it asked for: binary if its `Accept` lists `application/vnd.mcp-framing`, the
      compatible SSE mapping if it sent `Mcp-Framing-Mapping: compat`, else the SSE mapping; a
      JSON answer becomes one framed message, an SSE answer is framed event by event as the app
      sends it (nothing buffered but the event being read), and the stream's STREAM_END leaves
      with its final response. A request with a malformed key or limits header is answered `400`.
    - Other requests are answered exactly as the app answers, unless `frame_all_responses` is
      `"compat"`: then every POST is answered in the compatible mapping (its messages stay plain
      MCP events; a JSON answer becomes a one-event stream when the client's `Accept` lists
      `text/event-stream`), which the contract declares (`alwaysFramed`, §18.8).
    - The contract (§11.1) is written into every `initialize` and `server/discover` result.
    - An app that raises, or whose body ends, before its final response: the stream ends with an
      ABORT (code 4, upstream failed), never with a clean end; a message over the limits: ABORT
      code 5.
    - Error statuses, `202 Accepted`, other content types, websocket and lifespan scopes pass
      through unchanged. `Content-Length` is dropped from framed responses and recomputed for a
      declared JSON result. The app behind it never compresses a response that is to be framed
      (the request's `Accept-Encoding` is not passed on for them); a compressing middleware in
      front of it compresses the framed bytes, which clients decode before the frames (§16).

    >>> async def app(scope, receive, send): ...
    >>> FramingMiddleware(app, frame_size=4096).contract.max_frame_payload
    4096
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        frame_size: int = DEFAULT_FRAME_SIZE,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        frame_all_responses: Literal["compat"] | None = None,
        dedupe: Deduplicator | None = None,
    ) -> None:
        if frame_all_responses not in (None, "compat"):
            raise ValueError('frame_all_responses is None or "compat" (the only mapping a client reads unasked)')
        if not 0 < frame_size <= 0xFFFFFFFF:
            raise ValueError(f"frame_size must be in 1..=4294967295, got {frame_size}")
        self.app = app
        self.frame_size = frame_size
        self.max_message_size = max_message_size
        self.frame_all_responses = frame_all_responses
        self.dedupe = dedupe
        declared = None if dedupe is None else (dedupe.methods, dedupe.window_ms)
        self.contract = Contract(
            max(frame_size, MIN_MAX_FRAME_PAYLOAD), max_message_size, frame_all_responses, declared
        )

    def encoder(self, opt_in: OptIn | None, mapping: str) -> MappingEncoder:
        """The encoder of one response: within the smaller of this middleware's limits and the
        request's (`Mcp-Framing-Limits`, §11.3, §16)."""
        frame, message = self.frame_size, self.max_message_size
        key = None
        if opt_in is not None:
            key = opt_in.request_key
            if opt_in.max_frame_payload is not None:
                frame = min(frame, opt_in.max_frame_payload)
            if opt_in.max_message_size is not None:
                message = min(message, opt_in.max_message_size)
        return MappingEncoder(mapping, StreamEncoder(key, frame_size=frame, max_message_size=message))  # type: ignore[arg-type]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # lifespan, websocket: as they are
            return
        headers = scope.get("headers") or []
        try:
            opt_in = OptIn.from_headers(headers)
        except OptInError as err:
            await send({"type": "http.response.start", "status": 400, "headers": []})
            await send({"type": "http.response.body", "body": str(err).encode()})
            return
        unsolicited = opt_in is None and self.frame_all_responses is not None and scope.get("method") == "POST"
        if opt_in is not None or unsolicited:
            # The app must not compress what is to be framed: the frames go around its bytes.
            scope = dict(scope, headers=[(k, v) for k, v in headers if k.lower() != b"accept-encoding"])
        response = _Response(self, send, opt_in, unsolicited and accepts_event_stream(headers), unsolicited)
        if self.dedupe is not None and scope.get("method") == "POST":
            await _deduplicated(self, self.dedupe, scope, receive, send, response)
            return
        try:
            await self.app(scope, response.receive_from(receive), response.send)  # type: ignore[arg-type]
        except BaseException as exc:
            await response.fail(exc)
            raise
        await response.fail(None)


class _Response:
    """One request's response on its way out."""

    def __init__(
        self, layer: FramingMiddleware, send: Send, opt_in: OptIn | None, json_to_sse: bool, unsolicited: bool
    ) -> None:
        self.layer = layer
        self.downstream = send
        self.opt_in = opt_in
        self.json_to_sse = json_to_sse
        self.unsolicited = unsolicited
        self.request_body: list[bytes] = []
        self.request_len = 0
        self.method: str | None = None
        self.start: Message | None = None
        self.mode = "pass"
        self.sse: SseRelay | None = None
        self.json: JsonRelay | None = None
        self.encoder: MappingEncoder | None = None
        self.declaration: Declaration | None = None
        self.complete = False

    def receive_from(self, receive: Receive) -> Receive:
        """`receive`, reading the request body as it passes to find the discovery requests."""

        async def wrapped() -> Message:
            message = await receive()
            if message["type"] == "http.request" and self.request_len <= MAX_DISCOVERY_REQUEST:
                chunk = message.get("body", b"")
                self.request_len += len(chunk)
                if self.request_len <= MAX_DISCOVERY_REQUEST:
                    self.request_body.append(chunk)
                if not message.get("more_body", False):
                    self.method = discovery_method(b"".join(self.request_body))
                    self.request_body = []
            return message

        return wrapped

    async def _send(self, body: bytes, more: bool) -> None:
        if self.start is not None:
            start, self.start = self.start, None
            await self.downstream(start)
        if body or not more:
            await self.downstream({"type": "http.response.body", "body": body, "more_body": more})
        if not more:
            self.complete = True

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if self.complete:
            return  # the framed stream ended; the rest of the app's body is not this request's
        if kind == "http.response.start":
            await self._started(message)
        elif kind == "http.response.body":
            await self._body(message.get("body", b""), bool(message.get("more_body", False)))
        else:
            await self.downstream(message)

    def _inner(self, message: Message) -> str | None:
        """`sse` or `json` for a `200` response the middleware can read, else None (§16)."""
        if message["status"] != 200:
            return None
        headers = message.get("headers") or []
        types = header_values(headers, b"content-type")
        essence = content_essence(types[0] if types else None)
        if essence not in ("text/event-stream", "application/json"):
            return None
        coding = [v for v in header_values(headers, b"content-encoding") if v.strip().lower() != "identity"]
        if coding:
            return "coded"
        return "sse" if essence == "text/event-stream" else "json"

    async def _started(self, message: Message) -> None:
        layer = self.layer
        inner = self._inner(message)
        if self.method is not None and inner in ("sse", "json"):
            self.declaration = Declaration(layer.contract, self.method)
        mapping: str | None = None
        if inner is not None:
            if self.opt_in is not None:
                mapping = self.opt_in.mapping
            elif self.unsolicited and (inner == "sse" or self.json_to_sse):
                mapping = "compat"
        if mapping is None and self.declaration is None:
            await self.downstream(message)
            return
        headers = list(message.get("headers") or [])
        if inner == "coded":
            # A content coding behind the middleware: the frames cannot go around bytes it cannot
            # read (SPEC.md §16). Said once, loudly; a client that opted in gets an ABORT.
            _log.error(
                "FramingMiddleware: the app compressed a response that is to be framed; put the "
                "compression middleware in front of FramingMiddleware, not behind it"
            )
            if self.opt_in is None:
                await self.downstream(message)
                return
            self.encoder = layer.encoder(self.opt_in, mapping or "sse")
            self.mode = "refused"
            self.start = dict(message, headers=_framed(headers, self.encoder.mapping))
            reason = "the response is content-coded behind the framing middleware"
            await self._send(self.encoder.abort(ABORT_INTERNAL_ERROR, reason), False)
            return
        if mapping is None:
            # Not framed: the contract declared in the discovery result (§11.2).
            self.mode = "declare-" + (inner or "")
            if inner == "sse":
                self.sse = SseRelay(None, layer.max_message_size, self.declaration)
                message = dict(message, headers=[(k, v) for k, v in headers if k.lower() != b"content-length"])
                await self.downstream(message)
            else:
                self.json = JsonRelay(layer.max_message_size)
                self.start = dict(message)
            return
        self.encoder = layer.encoder(self.opt_in, mapping)
        max_message = self.encoder.encoder.max_message_size
        if inner == "sse":
            self.mode = "sse"
            self.sse = SseRelay(self.encoder, max_message, self.declaration)
            # The head goes now: a long tool call gets its status at once, frames as they come.
            await self.downstream(dict(message, headers=_framed(headers, mapping)))
        else:
            self.mode = "json"
            self.json = JsonRelay(max_message)
            self.start = dict(message, headers=_framed(headers, mapping))
            self.original_start = dict(message)

    async def _body(self, body: bytes, more: bool) -> None:
        mode = self.mode
        if mode == "pass":
            await self.downstream({"type": "http.response.body", "body": body, "more_body": more})
            if not more:
                self.complete = True
            return
        if self.sse is not None:
            out = self.sse.feed(body) if body else b""
            if not more:
                out += self.sse.end()
            ended = self.sse.done and not self.sse.awaiting_lf
            await self._send(out, more and not ended)
            return
        relay = self.json
        assert relay is not None
        if relay.too_large:
            await self._send(body, more)  # passing on, unchanged
            return
        if relay.feed(body) and more:
            return
        if relay.too_large:
            await self._json_too_large(more)
        else:
            await self._json_whole()

    async def _json_too_large(self, more: bool) -> None:
        relay = self.json
        assert relay is not None
        if self.mode == "declare-json":
            assert self.declaration is not None
            self.declaration.not_declared(f"the response holds more than {relay.max_message} bytes")
            await self._send(relay.body(), more)
            return
        encoder = self.encoder
        assert encoder is not None
        if self.opt_in is None:
            # Not opted in: the body as it came (a client reads it as JSON), head and all.
            self.start = self.original_start
            await self._send(relay.body(), more)
            return
        err = EncodeError(
            "MessageTooLarge", f"message of at least {relay.length} bytes exceeds the limit of {relay.max_message}"
        )
        await self._send(encoder.fail(err), False)

    async def _json_whole(self) -> None:
        relay = self.json
        assert relay is not None
        body = relay.body()
        if self.declaration is not None:
            declared = self.declaration.apply_bytes(body)
            if declared is not None:
                body = declared
        if self.mode == "declare-json":
            assert self.start is not None
            headers = [(k, v) for k, v in self.start.get("headers") or [] if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            self.start = dict(self.start, headers=headers)
            await self._send(body, False)
            return
        encoder = self.encoder
        assert encoder is not None
        try:
            out = encoder.message(body, final=True)
        except EncodeError as err:
            if self.opt_in is None:
                # An event cannot carry it: the client gets it as it was (§18.8).
                self.start = self.original_start
                await self._send(relay.body(), False)
                return
            out = encoder.fail(err)
        await self._send(out, False)

    async def fail(self, exc: BaseException | None) -> None:
        """The app raised (`exc`) or returned (None) before its response ended: a framed stream
        ends with an ABORT, never with a clean end (§3.1)."""
        if self.complete or self.encoder is None or (self.start is None and self.mode == "pass"):
            return
        if self.start is not None and self.mode in ("json", "declare-json") and exc is not None:
            return  # nothing sent yet: the server answers the exception (a 500)
        # The app failed (or was cancelled) before its final response: code 4, upstream failed
        # (SPEC.md §3.1), as the Rust layer says of its inner service.
        code = ABORT_UPSTREAM_FAILED
        if exc is None:
            reason = "the application returned before its response ended"
        else:
            reason = f"upstream body failed: {type(exc).__name__}: {exc}"
        out = self.sse.fail(code, reason) if self.sse is not None else self.encoder.abort(code, reason)
        try:
            await self._send(out, False)
        except Exception:  # the connection is gone: nothing more to tell
            _log.debug("the ABORT of a failed response could not be sent", exc_info=True)


def _framed(headers: list[tuple[bytes, bytes]], mapping: str) -> list[tuple[bytes, bytes]]:
    kept = [(k, v) for k, v in headers if k.lower() not in _FRAMING_HEADERS]
    return kept + response_headers(mapping)


async def _plain(send: Send, status: int, text: str, content_type: bytes = b"text/plain; charset=utf-8") -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type)]})
    await send({"type": "http.response.body", "body": text.encode()})


async def _answer(response: _Response, body: bytes, decision: str) -> None:
    """A replay or a refusal, answered as the app would answer with JSON: framed afresh for a
    client that opted in (SPEC.md §17.6, §17.10)."""
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"mcp-framing-dedupe", decision.encode()),
    ]
    await response.send({"type": "http.response.start", "status": 200, "headers": headers})
    await response.send({"type": "http.response.body", "body": body, "more_body": False})


async def _deduplicated(
    layer: FramingMiddleware, dedup: Deduplicator, scope: Scope, receive: Receive, send: Send, response: _Response
) -> None:
    """A POST where the middleware deduplicates (SPEC.md §17.10): the body read (bounded) and
    strictly, a keyed call claimed before the app sees it, executed independently of the client
    connection and recorded, or replayed, or refused."""
    headers = scope.get("headers") or []
    declared = header_values(headers, b"content-length")
    limit = dedup.max_request_bytes
    if declared and declared[0].strip().isdigit() and int(declared[0]) > limit:
        await _plain(send, 413, f"request body: larger than {limit} bytes")
        return
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            await _plain(send, 413, f"request body: larger than {limit} bytes")
            return
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    keys = header_values(headers, b"mcp-framing-request-key")
    try:
        header_key = parse_request_key(keys[0]) if keys else None
    except OptInError as err:
        await _plain(send, 400, str(err))
        return
    try:
        request = parse_request(body)
    except MalformedRequest as err:
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"Parse error: {err}"}}
        await _plain(send, 400, json.dumps(error), b"application/json")
        return
    call: KeyedCall | None = None
    if isinstance(request, dict) and "id" in request and request.get("method") in dedup.methods:
        try:
            call = KeyedCall.from_request(request, dedup.principal(headers), header_key, dedup.covered_meta)
        except MalformedRequest as err:
            await _plain(send, 400, str(err))
            return
    replayed = False

    async def replay_body() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        if call is None:
            return await receive()  # an unprotected request sees the client go away as before
        # A keyed call runs to its end whatever the client does (SPEC.md §17.10): it never
        # hears of a disconnect; the app cancels this wait when it is done.
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    app_receive = response.receive_from(replay_body)
    if call is None:
        try:
            await layer.app(scope, app_receive, response.send)  # type: ignore[arg-type]
        except BaseException as exc:
            await response.fail(exc)
            raise
        await response.fail(None)
        return
    try:
        decision = await dedup.begin(call)
    except Refusal as refusal:
        await _answer(response, refusal.to_response(request["id"], call.request_key), refusal.reason)
        return
    if isinstance(decision, bytes):
        await _answer(response, replay(decision, request["id"]), "replay")
        return
    task = asyncio.ensure_future(_execute(layer, decision, scope, app_receive, response))
    await asyncio.shield(task)


async def _execute(
    layer: FramingMiddleware, execution: Execution, scope: Scope, receive: Receive, response: _Response
) -> None:
    """Runs a claimed call to its end, relays its response while the client listens, and records
    its final response (or releases the claim for a 4xx, or lets it expire without one)."""
    capture = _Capture(layer.max_message_size)
    downstream = response.downstream

    async def relay(message: Message) -> None:
        if capture.client_gone:
            return
        try:
            await downstream(message)
        except Exception:
            capture.client_gone = True  # the call goes on: its result is recorded for the retry

    response.downstream = relay

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = dict(message, headers=[*(message.get("headers") or []), (b"mcp-framing-dedupe", b"execute")])
        capture.see(message)
        await response.send(message)

    try:
        await layer.app(scope, receive, send)  # type: ignore[arg-type]
    except BaseException as exc:
        execution.abandon()
        await response.fail(exc)
        raise
    await response.fail(None)
    if capture.status is not None and 400 <= capture.status < 500:
        await execution.release()
    elif capture.final is not None:
        await execution.complete(capture.final)
    else:
        execution.abandon()


class _Capture:
    """What the app answered a claimed call: its status and its final JSON-RPC response."""

    def __init__(self, max_message: int) -> None:
        self.status: int | None = None
        self.final: bytes | None = None
        self.client_gone = False
        self._json: list[bytes] | None = None
        self._sse: SseRelay | None = None
        self._max = max_message

    def _found(self, message: bytes, final: bool) -> None:
        if final and self.final is None:
            self.final = message

    def see(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            types = header_values(message.get("headers") or [], b"content-type")
            essence = content_essence(types[0] if types else None)
            if self.status == 200 and essence == "text/event-stream":
                self._sse = SseRelay(None, self._max, None, self._found)
            elif self.status == 200 and essence == "application/json":
                self._json = []
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            if self._sse is not None:
                self._sse.feed(body)
            elif self._json is not None:
                self._json.append(body)
                if not message.get("more_body", False):
                    whole = b"".join(self._json)
                    self._json = None
                    self._found(whole, True)
