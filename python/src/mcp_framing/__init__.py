"""mcp-framing for Python: verify framed MCP responses (SPEC.md) under the official `mcp` SDK.

The sans-I/O core (no I/O, standard library only):

- `StreamDecoder`: the frame decoder (§2–§7); `SseDecoder` (§15) and `CompatDecoder` (§18) read
  the SSE mappings; `body_decoder` picks one by mapping, `mapping_of_response` from a response's
  headers.
- `StreamVerdict`: what a decoder saw at the end of input, in the conformance manifest's shape;
  `DecodeError`: the first rule a stream broke, by SPEC.md's name.
- `classify` / `Outcome` (§11.4) and `decide_retry` (§11.6); `ClientPolicy`, `Discovery`,
  `ContractError` (§11).
- `framing_error(exc)`: the `FramingError` (the outcome report of §11.7) in whatever the SDK
  raised for a request mcp-framing failed, exception groups included.

The SDK seam (needs `httpx2`, imported on first use so that the core needs nothing but the
standard library): `framing_http_client`, `FramingTransport`, `DiscoveringResolver`,
`RetrySchedule`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .body import MAPPINGS, BodyDecoder, Mapping, body_decoder, mapping_of_response
from .compat import CompatDecoder
from .contract import ClientPolicy, ContractError, Discovery, FramingContract
from .decoder import StreamDecoder
from .errors import DecodeError
from .limits import Limits
from .outcome import Outcome, RetryDecision, classify, decide_retry
from .report import OUTCOME_DATA_KEY, FramingError, framing_error
from .retry import EndpointResolver, Resolution, RetrySchedule, StaticResolver
from .sse import SseDecoder
from .verdict import Abort, Received, StreamVerdict

if TYPE_CHECKING:  # the SDK seam, imported on first use (it needs httpx2)
    from .client import framing_http_client, framing_transport
    from .transport import DiscoveringResolver, FramingTransport, TransportStats

_LAZY = {
    "framing_http_client": "client",
    "framing_transport": "client",
    "FramingTransport": "transport",
    "DiscoveringResolver": "transport",
    "TransportStats": "transport",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcp_framing' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "MAPPINGS",
    "OUTCOME_DATA_KEY",
    "Abort",
    "BodyDecoder",
    "ClientPolicy",
    "CompatDecoder",
    "ContractError",
    "DecodeError",
    "DiscoveringResolver",
    "Discovery",
    "EndpointResolver",
    "FramingContract",
    "FramingError",
    "FramingTransport",
    "Limits",
    "Mapping",
    "Outcome",
    "Received",
    "Resolution",
    "RetryDecision",
    "RetrySchedule",
    "SseDecoder",
    "StaticResolver",
    "StreamDecoder",
    "StreamVerdict",
    "TransportStats",
    "body_decoder",
    "classify",
    "decide_retry",
    "framing_error",
    "framing_http_client",
    "framing_transport",
    "mapping_of_response",
]
