"""A JSON-RPC message's top level, read once: whether it is a response (SPEC.md §7.1), and where
its top-level `id` value lies, so that a retried request's id is put back into its verified final
response by editing that value alone, every other byte as verified (§17.13; the Rust crate's
`jsonrpc` module, whose one scan serves both).

A parse and a dump would change what the server sent (member order, number spellings such as
`1.0` or `1e2`, unicode escapes, whitespace); the edit keeps all of it.

What is read when (SPEC.md §7.1 read lazily, `decoder.StreamDecoder`):

- `response_head`, at a long message's MESSAGE_END: the top level of its first 4 KiB, member by
  member, up to the first point where it is known to hold a top-level `id` and `result` or
  `error` (before the value of `result`, or at the comma after the value of `id` or `error`,
  whichever came second). Every member before that
  point is read exactly (its value parsed, an escaped name read as JSON reads it); what follows
  is not read. A message it does not decide (a long value before `id`, a short message, bytes in
  it that are not UTF-8 or not JSON) is read whole at once (`top_level`).
- `top_level`, the whole message: where the reading decides a verdict (the input ended without
  STREAM_END, §7 row 4; a message follows the candidate), where every value is used (a
  handshake's contract, §11.2), and where the id is put back (a retry's response, §17.13).
"""

from __future__ import annotations

import codecs
import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, NamedTuple

__all__ = ["HEAD_BYTES", "UNREAD", "DuplicateIdError", "TopLevel", "put_id", "response_head", "top_level", "with_id"]

_SPACE = re.compile(r"[ \t\n\r]*")
#: Bytes of a message `response_head` reads (the members before the long value of a response).
HEAD_BYTES = 4096
#: The value of a member `response_head` did not read (no JSON value is `...`).
UNREAD: Any = ...


def _no_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


# Skips one value (its extent is what counts); NaN and Infinity are not JSON (RFC 8259).
_VALUE = json.JSONDecoder(parse_constant=_no_constant)


class DuplicateIdError(ValueError):
    """The message is not one JSON object with exactly one top-level `id` member: which of
    several a reader takes is not defined, so the caller's id cannot be put back (§17.13)."""


class TopLevel(NamedTuple):
    """The top level of a JSON object: its members (values parsed; of a repeated name the last,
    as `json.loads` reads it) and where each `id` value lies in the message's bytes; `complete`
    False for a head (`response_head`): the members up to where it stopped, `result` (if read
    up to) `UNREAD`."""

    members: dict[str, Any]
    id_spans: list[tuple[int, int]]
    complete: bool = True

    @property
    def is_response(self) -> bool:
        """§7.1: a top-level `id` and a top-level `result` or `error`, whatever their values."""
        members = self.members
        return "id" in members and ("result" in members or "error" in members)


def top_level(text: str, size: int | None = None, head: bool = False) -> TopLevel:
    """The top level of the JSON object `text` (a message decoded from UTF-8; `size`: its length
    in bytes, when known), in one reading: each member's value is parsed once, escaped key names
    read as JSON reads them (`"\\u0069d"` is `id`). With `head`, the reading stops where the
    top level is known to hold `id` and `result` or `error` (`response_head`; `complete` False).

    Raises `DuplicateIdError` (a `ValueError`) when `text` is not one JSON object, and
    `RecursionError` for nesting deeper than Python's parser goes.

    >>> top_level('{"jsonrpc":"2.0", "id":7, "result":{}}')
    TopLevel(members={'jsonrpc': '2.0', 'id': 7, 'result': {}}, id_spans=[(23, 24)], complete=True)
    >>> top_level('{"id":7, "result":[1, 2', head=True)
    TopLevel(members={'id': 7, 'result': Ellipsis}, id_spans=[(6, 7)], complete=False)
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
                if head and key == "result" and "id" in members:
                    members[key] = UNREAD  # §7.1 holds (if the rest is JSON): not read here
                    return _spans_in_bytes(text, size, members, spans, complete=False)
                value, end = _VALUE.raw_decode(text, start)
                members[key] = value
                if key == "id":
                    spans.append((start, end))
                i = _SPACE.match(text, end).end()  # type: ignore[union-attr]
                if text[i : i + 1] == ",":
                    i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
                    if head and "id" in members and ("error" in members or "result" in members):
                        # every value read ended before a comma: none was cut by the head's end
                        return _spans_in_bytes(text, size, members, spans, complete=False)
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
    return _spans_in_bytes(text, size, members, spans)


def _spans_in_bytes(
    text: str, size: int | None, members: dict[str, Any], spans: list[tuple[int, int]], complete: bool = True
) -> TopLevel:
    if size is None or size != len(text):
        # Offsets in characters to offsets in bytes (only a message with text above ASCII
        # differs; the id member comes before the long values, so the prefix is short).
        spans = [(b := len(text[:a].encode("utf-8")), b + len(text[a:z].encode("utf-8"))) for a, z in spans]
    return TopLevel(members, spans, complete)


def response_head(message: bytes) -> TopLevel | None:
    """§7.1 read no further than needed: the head of `message` (`top_level` with `head`, on its
    first `HEAD_BYTES`) when those bytes show a top-level `id` and a top-level `result` or
    `error`, else None: they do not decide (the message is short, or has a long value before
    `id`, or is not UTF-8 or not a JSON object there), and the whole message is to be read.

    A head is exact for every member it read; the message is a JSON-RPC response if the rest
    of it is JSON (one JSON text: what only the whole reading checks, `top_level`).

    >>> response_head(b'{"jsonrpc":"2.0","id":1,"result":{"text":"' + b"x" * 5000 + b'"}}')
    TopLevel(members={'jsonrpc': '2.0', 'id': 1, 'result': Ellipsis}, id_spans=[(22, 23)], complete=False)
    >>> response_head(b'{"jsonrpc":"2.0","result":{"text":"' + b"x" * 5000 + b'"},"id":1}') is None
    True
    """
    if len(message) <= HEAD_BYTES:
        return None
    try:
        # a sequence cut at the end of the first bytes is left out (final=False), not an error
        text, _ = codecs.utf_8_decode(message[:HEAD_BYTES], "strict", False)
        found = top_level(text, None, head=True)
    except (ValueError, RecursionError):  # UnicodeDecodeError, DuplicateIdError: the cut decides nothing
        return None
    return None if found.complete else found


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
