"""The framing contract a server declares (SPEC.md §11.1), written into the `initialize` and
`server/discover` results passing through it (§11.2) by an edit of the result's JSON text: the
member goes after the last member of its object, every other byte stays as the handler wrote it;
a contract the handler declared stays if it has the same values and is replaced otherwise."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from ..contract import EXTENSION_KEY, ContractError, FramingContract

__all__ = ["MAX_DISCOVERY_REQUEST", "Contract", "Declaration", "discovery_method"]

_log = logging.getLogger("mcp_framing.contract")
_SPACE = re.compile(r"[ \t\n\r]*")
_VALUE = json.JSONDecoder()
#: §11.2: a request body over 64 KiB is no discovery request.
MAX_DISCOVERY_REQUEST = 64 * 1024


@dataclass(frozen=True)
class Contract:
    """What a framing server declares (§11.1): version 1, the sentinel required, CRC-32 and
    SHA-256, its limits, the three mappings, and optionally `alwaysFramed` and `deduplication`.

    >>> Contract(16384, 1 << 20).to_json()[:60]
    '{"versions":[1],"sentinelRequired":true,"frameChecksum":"crc'
    """

    max_frame_payload: int
    max_message_size: int
    always_framed: str | None = None
    #: (methods, window in ms); the scope is always "principal" (§17.2).
    deduplication: tuple[tuple[str, ...], int] | None = None

    def to_object(self) -> dict[str, Any]:
        """The contract object, members in the Rust crate's order."""
        transports = ["binary", "sse", "compat"]
        out: dict[str, Any] = {
            "versions": [1],
            "sentinelRequired": True,
            "frameChecksum": "crc32",
            "messageDigest": "sha256",
            "maxFramePayload": self.max_frame_payload,
            "maxMessageSize": self.max_message_size,
            "transports": transports,
        }
        if self.always_framed is not None:
            out["alwaysFramed"] = self.always_framed
        if self.deduplication is not None:
            methods, window = self.deduplication
            out["deduplication"] = {"methods": list(methods), "windowMs": window, "scope": "principal"}
        return out

    def to_json(self) -> str:
        """The contract as compact JSON, as the Rust crate writes it."""
        return json.dumps(self.to_object(), separators=(",", ":"), ensure_ascii=False)

    def parsed(self) -> FramingContract:
        """The contract as a client reads it (to compare a handler's own declaration by value)."""
        return FramingContract.parse(self.to_object())


def discovery_method(body: bytes) -> str | None:
    """`initialize` or `server/discover` if `body` (a whole request body) is such a request.

    >>> discovery_method(b'{"jsonrpc":"2.0","id":1,"method":"initial\\\\u0069ze"}')
    'initialize'
    >>> discovery_method(b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}') is None
    True
    """
    if len(body) > MAX_DISCOVERY_REQUEST:
        return None
    # Most requests are tool calls: a scan for what the method names hold spares them the parse.
    if b"initialize" not in body and b"discover" not in body and b"\\u" not in body:
        return None
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return None
    method = request.get("method") if isinstance(request, dict) else None
    return method if method in ("initialize", "server/discover") else None


class _NotAnObject(ValueError):
    pass


def _members(text: str, start: int) -> tuple[list[tuple[str, int, int]], int]:
    """The members (key, value start, value end) of the object at `start`, and its end."""
    i = _SPACE.match(text, start).end()  # type: ignore[union-attr]
    if text[i : i + 1] != "{":
        raise _NotAnObject
    i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
    members: list[tuple[str, int, int]] = []
    if text[i : i + 1] == "}":
        return members, i + 1
    try:
        while True:
            if text[i : i + 1] != '"':
                raise _NotAnObject
            key, i = scanstring(text, i + 1, True)
            i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
            if text[i : i + 1] != ":":
                raise _NotAnObject
            value_start = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
            _, end = _VALUE.raw_decode(text, value_start)
            members.append((key, value_start, end))
            i = _SPACE.match(text, end).end()  # type: ignore[union-attr]
            if text[i : i + 1] == ",":
                i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
                continue
            if text[i : i + 1] != "}":
                raise _NotAnObject
            return members, i + 1
    except (ValueError, RecursionError) as err:
        if isinstance(err, _NotAnObject):
            raise
        raise _NotAnObject from err


def _locate(text: str, path: list[str], value: str) -> tuple[int, int, str | None]:
    """Where `path`'s value lies (start, end, None), or where to insert it and what (at, at,
    text), the way the Rust crate's `json_text::locate` does; `_NotAnObject` otherwise."""
    start, end = 0, len(text)
    whole = True
    for depth, key in enumerate(path):
        members, object_end = _members(text, start)
        if whole and _SPACE.match(text, object_end).end() != end:  # type: ignore[union-attr]
            raise _NotAnObject  # trailing bytes after the top-level object
        whole = False
        found = next((m for m in reversed(members) if m[0] == key), None)
        if found is None:
            if members:
                at, comma = members[-1][2], ","
            else:
                at, comma = text.index("{", start) + 1, ""
            pieces = [comma]
            for n, name in enumerate(path[depth:]):
                if n:
                    pieces.append("{")
                pieces.append(json.dumps(name, ensure_ascii=False) + ":")
            pieces.append(value)
            pieces.append("}" * (len(path) - depth - 1))
            return at, at, "".join(pieces)
        if depth + 1 == len(path):
            return found[1], found[2], None
        start, end = found[1], found[2]
    raise _NotAnObject


class Declaration:
    """Writes `contract` into the discovery result of one `method` (`initialize`:
    `capabilities.experimental`, `server/discover`: `capabilities.extensions`, §11.2).

    >>> d = Declaration(Contract(16384, 1 << 20), "initialize")
    >>> d.apply('{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{}},"serverInfo":{}}}')[:80]
    '{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{},"experimental":{"io'
    >>> d.apply('{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"no"}}') is None
    True
    """

    def __init__(self, contract: Contract, method: str) -> None:
        self.contract = contract
        self.method = method
        self.field = "experimental" if method == "initialize" else "extensions"

    def not_declared(self, reason: str) -> None:
        """Logs why the contract could not be declared in the response."""
        _log.warning("the framing contract could not be declared in the %s response: %s", self.method, reason)

    def apply_bytes(self, response: bytes) -> bytes | None:
        """`apply` on bytes: the new text as UTF-8, None if unchanged."""
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            self.not_declared("the response is not UTF-8")
            return None
        out = self.apply(text)
        return None if out is None else out.encode("utf-8")

    def apply(self, response: str) -> str | None:
        """The response text with the contract declared, None if it stays as it is (already
        declared with these values, or not a result the member can go into: logged)."""
        value = self.contract.to_json()
        try:
            start, end, _ = _locate(response, ["result"], "{}")
            if _ is not None:
                raise _NotAnObject  # an error response, or no result
            start, end, insert = _locate(response, ["result", "capabilities", self.field, EXTENSION_KEY], value)
        except _NotAnObject:
            self.not_declared(f"not a {self.method} result")
            return None
        if insert is not None:
            return response[:start] + insert + response[start:]
        previous = response[start:end]
        try:
            if FramingContract.parse(json.loads(previous)) == self.contract.parsed():
                return None
        except (ContractError, ValueError, RecursionError):
            pass
        _log.warning(
            "the handler declared another framing contract in the %s result; the middleware's, which says "
            "what it does, replaces it: %s",
            self.method,
            previous,
        )
        return response[:start] + value + response[end:]
