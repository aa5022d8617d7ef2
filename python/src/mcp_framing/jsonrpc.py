"""A JSON-RPC message's top level, read once: whether it is a response (SPEC.md §7.1), and where
its top-level `id` value lies, so that a retried request's id is put back into its verified final
response by editing that value alone, every other byte as verified (§17.13; the Rust crate's
`jsonrpc` module, whose one scan serves both).

A parse and a dump would change what the server sent (member order, number spellings such as
`1.0` or `1e2`, unicode escapes, whitespace); the edit keeps all of it.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, NamedTuple

__all__ = ["DuplicateIdError", "TopLevel", "put_id", "top_level", "with_id"]

_SPACE = re.compile(r"[ \t\n\r]*")


def _no_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


# Skips one value (its extent is what counts); NaN and Infinity are not JSON (RFC 8259).
_VALUE = json.JSONDecoder(parse_constant=_no_constant)


class DuplicateIdError(ValueError):
    """The message is not one JSON object with exactly one top-level `id` member: which of
    several a reader takes is not defined, so the caller's id cannot be put back (§17.13)."""


class TopLevel(NamedTuple):
    """The top level of a JSON object: its members (values parsed; of a repeated name the last,
    as `json.loads` reads it) and where each `id` value lies in the message's bytes."""

    members: dict[str, Any]
    id_spans: list[tuple[int, int]]

    @property
    def is_response(self) -> bool:
        """§7.1: a top-level `id` and a top-level `result` or `error`, whatever their values."""
        members = self.members
        return "id" in members and ("result" in members or "error" in members)


def top_level(text: str, size: int | None = None) -> TopLevel:
    """The top level of the JSON object `text` (a message decoded from UTF-8; `size`: its length
    in bytes, when known), in one reading: each member's value is parsed once, escaped key names
    read as JSON reads them (`"\\u0069d"` is `id`).

    Raises `DuplicateIdError` (a `ValueError`) when `text` is not one JSON object, and
    `RecursionError` for nesting deeper than Python's parser goes.

    >>> top_level('{"jsonrpc":"2.0", "id":7, "result":{}}')
    TopLevel(members={'jsonrpc': '2.0', 'id': 7, 'result': {}}, id_spans=[(23, 24)])
    >>> top_level('{"id":1}{}').members
    Traceback (most recent call last):
    ...
    mcp_framing.jsonrpc.DuplicateIdError: bytes after the JSON object
    """
    i = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    if text[i : i + 1] != "{":
        raise DuplicateIdError("not a JSON object")
    i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
    members: dict[str, Any] = {}
    spans: list[tuple[int, int]] = []
    try:
        if text[i : i + 1] == "}":
            i += 1
        else:
            while True:
                if text[i : i + 1] != '"':
                    raise DuplicateIdError("not a JSON object")
                key, i = scanstring(text, i + 1, True)
                i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
                if text[i : i + 1] != ":":
                    raise DuplicateIdError("not a JSON object")
                start = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
                value, end = _VALUE.raw_decode(text, start)
                members[key] = value
                if key == "id":
                    spans.append((start, end))
                i = _SPACE.match(text, end).end()  # type: ignore[union-attr]
                if text[i : i + 1] == ",":
                    i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
                    continue
                if text[i : i + 1] != "}":
                    raise DuplicateIdError("not a JSON object")
                i += 1
                break
    except DuplicateIdError:
        raise
    except ValueError as err:  # json.JSONDecodeError
        raise DuplicateIdError(f"not a JSON object: {err}") from err
    if _SPACE.match(text, i).end() != len(text):  # type: ignore[union-attr]
        raise DuplicateIdError("bytes after the JSON object")
    if size is None or size != len(text):
        # Offsets in characters to offsets in bytes (only a message with text above ASCII
        # differs; the id member comes before the long values, so the prefix is short).
        spans = [(b := len(text[:a].encode("utf-8")), b + len(text[a:z].encode("utf-8"))) for a, z in spans]
    return TopLevel(members, spans)


def put_id(message: bytes, id_spans: list[tuple[int, int]], id_: Any) -> bytes:
    """`message` with its one top-level `id` value (at `id_spans`, as `top_level` found them)
    replaced by `id_`, every other byte unchanged.

    Raises `DuplicateIdError` when there is no `id` member or several.

    >>> put_id(b'{"id":"1~attempt-2","result":{}}', [(6, 19)], 1)
    b'{"id":1,"result":{}}'
    """
    if len(id_spans) != 1:
        raise DuplicateIdError(f"{len(id_spans)} top-level id members")
    start, end = id_spans[0]
    replacement = json.dumps(id_, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return b"".join((message[:start], replacement, message[end:]))


def with_id(message: bytes, id_: Any) -> bytes:
    """`message` (a UTF-8 JSON object) with its one top-level `id` value replaced by `id_`, every
    other byte unchanged.

    Raises `DuplicateIdError` when it has no `id` member or several, or is not one JSON object.

    >>> with_id(b'{"jsonrpc":"2.0", "id":"1~attempt-2","result":{"n":1.0,"s":"\\\\u00e9"}}', 1)
    b'{"jsonrpc":"2.0", "id":1,"result":{"n":1.0,"s":"\\\\u00e9"}}'
    >>> with_id(b'{"id":1,"id":2,"result":{}}', 1)
    Traceback (most recent call last):
    ...
    mcp_framing.jsonrpc.DuplicateIdError: 2 top-level id members
    """
    try:
        text = message.decode("utf-8")
        found = top_level(text, len(message))
    except (UnicodeDecodeError, RecursionError) as err:
        raise DuplicateIdError(f"not a JSON object: {err}") from err
    return put_id(message, found.id_spans, id_)
