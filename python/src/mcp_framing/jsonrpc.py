"""A retried request's id put back into its verified final response by editing the top-level `id`
value alone, every other byte as verified (SPEC.md §17.13; the Rust crate's `jsonrpc::with_id`).

A parse and a dump would change what the server sent (member order, number spellings such as
`1.0` or `1e2`, unicode escapes, whitespace); the edit keeps all of it.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

__all__ = ["DuplicateIdError", "with_id"]

_SPACE = re.compile(r"[ \t\n\r]*")


def _no_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


# Skips one value (its extent is what counts); NaN and Infinity are not JSON (RFC 8259).
_VALUE = json.JSONDecoder(parse_constant=_no_constant)


class DuplicateIdError(ValueError):
    """The message is not one JSON object with exactly one top-level `id` member: which of
    several a reader takes is not defined, so the caller's id cannot be put back (§17.13)."""


def _id_spans(text: str) -> list[tuple[int, int]]:
    """Where the values of the top-level `id` members of the JSON object `text` lie (escaped key
    names read as JSON reads them: `"\\u0069d"` is `id`)."""
    i = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    if text[i : i + 1] != "{":
        raise DuplicateIdError("not a JSON object")
    i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
    spans: list[tuple[int, int]] = []
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
            _, end = _VALUE.raw_decode(text, start)
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
    if _SPACE.match(text, i).end() != len(text):  # type: ignore[union-attr]
        raise DuplicateIdError("bytes after the JSON object")
    return spans


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
        spans = _id_spans(text)
    except (UnicodeDecodeError, RecursionError) as err:
        raise DuplicateIdError(f"not a JSON object: {err}") from err
    except DuplicateIdError:
        raise
    except ValueError as err:  # json.JSONDecodeError
        raise DuplicateIdError(f"not a JSON object: {err}") from err
    if len(spans) != 1:
        raise DuplicateIdError(f"{len(spans)} top-level id members")
    start, end = spans[0]
    replacement = json.dumps(id_, separators=(",", ":"), ensure_ascii=False)
    # Valid UTF-8 decodes and encodes back to the same bytes: only the id value changed.
    return (text[:start] + replacement + text[end:]).encode("utf-8")
