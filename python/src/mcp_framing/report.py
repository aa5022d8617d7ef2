"""The outcome report of a request the transport failed (SPEC.md §11.7), and `FramingError`, the
caller's view of it, found in whatever the SDK raised.

The SDK raises the JSON-RPC error the transport answered as its `MCPError`; raised inside the
SDK's task groups (`streamable_http_client`, `ClientSession`), it reaches the caller wrapped in
one `ExceptionGroup` or more. `framing_error` finds it there and returns it as a `FramingError`.
Standard library only: the SDK's exception is recognised by its shape, not imported.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["OUTCOME_DATA_KEY", "FramingError", "framing_error"]

#: `data[OUTCOME_DATA_KEY]` of the JSON-RPC error the SDK gets for a response that did not end clean.
OUTCOME_DATA_KEY = "io.github.mcp-framing/outcome"


class FramingError(Exception):
    """A request mcp-framing failed (SPEC.md §11.7): the JSON-RPC error the transport answered in
    place of a response, with its outcome report.

    `report` holds every member (`classification`, `kind`, `detail`, `attempts`, `retryDecision`,
    and, when a response stream ended, `retryReason`, `regime`, `bytesReceived`, ...); the most
    used are attributes. `classification` says what failed: a verdict (`abandoned`, `corrupt`,
    `contract_violation`, ...) or `configuration_error`, `http_error`, ...; `retry_decision` what
    was decided. The exception the SDK raised is the `__cause__`.

    >>> err = FramingError("mcp-framing: response abandoned", {"classification": "abandoned",
    ...     "kind": "Truncated", "detail": "abandoned: truncated", "attempts": 1,
    ...     "retryDecision": "surface_to_caller"})
    >>> err.classification, err.kind, err.retry_decision, str(err)
    ('abandoned', 'Truncated', 'surface_to_caller', 'mcp-framing: response abandoned')
    """

    def __init__(self, message: str, report: Mapping[str, Any], code: int = -32603) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.report: dict[str, Any] = dict(report)

    @property
    def classification(self) -> str:
        """What failed (SPEC.md §11.7): a verdict name, or `configuration_error`, `http_error`, ..."""
        return str(self.report["classification"])

    @property
    def kind(self) -> str:
        """The precise error: `Truncated`, `NotFramed`, `NoContract`, `Send`, ..."""
        return str(self.report["kind"])

    @property
    def detail(self) -> str:
        """What happened, in words."""
        return str(self.report.get("detail", ""))

    @property
    def retry_decision(self) -> str:
        """`retry` was spent, `do_not_retry` or `surface_to_caller` (SPEC.md §11.6)."""
        return str(self.report.get("retryDecision", ""))

    def __str__(self) -> str:
        return self.message


def framing_error(exc: BaseException) -> FramingError | None:
    """The `FramingError` in `exc`: the SDK's error for a request mcp-framing failed, found in `exc`
    itself, in the exception groups around it, or in its cause. None when mcp-framing failed
    nothing there (the error is the server's own, or not a JSON-RPC error at all); the first one
    found when there are several.

    >>> class SdkError(Exception):  # the SDK's `MCPError`: `code`, `message`, `data`
    ...     def __init__(self, code, message, data):
    ...         super().__init__(message)
    ...         self.code, self.message, self.data = code, message, data
    >>> sdk = SdkError(-32603, "mcp-framing: response abandoned: ...",
    ...     {OUTCOME_DATA_KEY: {"classification": "abandoned", "kind": "Send"}})
    >>> class Group(Exception):  # what `ExceptionGroup` (or its backport) holds: `exceptions`
    ...     def __init__(self, *exceptions):
    ...         super().__init__("unhandled errors in a TaskGroup")
    ...         self.exceptions = exceptions
    >>> error = framing_error(Group(Group(sdk)))
    >>> error.kind, error.message, error.__cause__ is sdk
    ('Send', 'mcp-framing: response abandoned: ...', True)
    >>> framing_error(SdkError(-32602, "unknown tool", None)) is None
    True
    """
    for candidate in _walk(exc, depth=0):
        if isinstance(candidate, FramingError):
            return candidate
        report = _report(candidate)
        if report is not None:
            fields = getattr(candidate, "error", candidate)  # mcp 1.x keeps them in `error`
            code = getattr(fields, "code", -32603)
            message = getattr(fields, "message", None)
            error = FramingError(
                message if isinstance(message, str) else str(candidate),
                report,
                code if isinstance(code, int) else -32603,
            )
            error.__cause__ = candidate
            return error
    return None


#: How deep `framing_error` looks into groups and causes (the SDK nests two task groups).
_MAX_DEPTH = 16


def _walk(exc: BaseException, depth: int) -> Iterator[BaseException]:
    """`exc`, then the exceptions of a group, then its cause, depth first."""
    if depth > _MAX_DEPTH:
        return
    yield exc
    inner = getattr(exc, "exceptions", None)  # BaseExceptionGroup, or the `exceptiongroup` backport
    if isinstance(inner, (tuple, list)):
        for sub in inner:
            if isinstance(sub, BaseException):
                yield from _walk(sub, depth + 1)
    if exc.__cause__ is not None:
        yield from _walk(exc.__cause__, depth + 1)


def _report(exc: BaseException) -> dict[str, Any] | None:
    """The outcome report an SDK error carries under `data[OUTCOME_DATA_KEY]`, if any (`MCPError`
    of mcp 2.x has `data`; `McpError` of mcp 1.x, `error.data`)."""
    data = getattr(exc, "data", None)
    if not isinstance(data, Mapping):
        data = getattr(getattr(exc, "error", None), "data", None)
    if not isinstance(data, Mapping):
        return None
    report = data.get(OUTCOME_DATA_KEY)
    if not isinstance(report, Mapping):
        return None
    if not isinstance(report.get("classification"), str) or not isinstance(report.get("kind"), str):
        return None
    return dict(report)
