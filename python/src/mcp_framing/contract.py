"""The framing contract (SPEC.md §11): read from an `initialize` or `server/discover` result,
negotiated into a client policy, and re-checked at every resolution (downgrades, §11.5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import CONTRACT_ERROR_KINDS
from .limits import MIN_MAX_FRAME_PAYLOAD, Limits

__all__ = [
    "EXTENSION_KEY",
    "ClientPolicy",
    "ContractError",
    "Deduplication",
    "Discovery",
    "FramingContract",
    "Negotiated",
]

#: §11: the extension key the contract is declared under.
EXTENSION_KEY = "io.github.mcp-framing/framing"
#: Wire format versions this package decodes (§8).
SUPPORTED_VERSIONS = (1,)
KNOWN_TRANSPORTS = ("compat", "binary", "sse")

Source = Literal["initialize", "server/discover"]


class ContractError(Exception):
    """The contract cannot be used: `kind` says why (the Rust crate's `ContractError` variants:
    `NotADiscoveryResult`, `Malformed`, `NoContract`, `SentinelNotRequired`, `VersionMismatch`,
    `UnsupportedChecksum`, `UnsupportedDigest`, `NoCommonTransport`, `InvalidLimit`,
    `Downgrade`). `NoContract` and `SentinelNotRequired` are Regime C: a configuration error.

    >>> ContractError("NoContract", "initialize result").regime_c
    True
    """

    def __init__(self, kind: str, message: str) -> None:
        if kind not in CONTRACT_ERROR_KINDS:
            raise ValueError(f"not a contract error kind of SPEC.md §11.7: {kind!r}")
        self.kind = kind
        super().__init__(message)

    @property
    def regime_c(self) -> bool:
        """Whether the server's setup would run in Regime C (§9, §11.3)."""
        return self.kind in ("NoContract", "SentinelNotRequired")


@dataclass(frozen=True)
class Deduplication:
    """§17.11: the server deduplicates keyed requests of these methods for `window_ms`."""

    methods: tuple[str, ...]
    window_ms: int
    scope: str

    def covers(self, method: str) -> bool:
        """Whether `method` is deduplicated."""
        return method in self.methods

    def kept_by(self, later: Deduplication) -> bool:
        """Whether a later declaration keeps every promise of this one (§17.11)."""
        return (
            all(later.covers(m) for m in self.methods)
            and later.window_ms >= self.window_ms
            and later.scope == self.scope
        )


@dataclass(frozen=True)
class FramingContract:
    """The contract object of §11.1 (unknown fields are ignored)."""

    versions: tuple[int, ...]
    sentinel_required: bool
    frame_checksum: str
    message_digest: str
    transports: tuple[str, ...]
    max_frame_payload: int = 65_536
    max_message_size: int = 16_777_216
    always_framed: str | None = None
    deduplication: Deduplication | None = None

    @classmethod
    def parse(cls, raw: Any, source: Source = "initialize") -> FramingContract:
        """Reads a contract object; `ContractError("Malformed")` if it does not follow §11.1.

        >>> FramingContract.parse({"versions": [1], "sentinelRequired": True, "frameChecksum": "crc32",
        ...     "messageDigest": "sha256", "transports": ["compat"]}).max_frame_payload
        65536
        >>> try:
        ...     FramingContract.parse({"versions": [1]})
        ... except ContractError as err:
        ...     print(err.kind, str(err).endswith("missing field sentinelRequired"))
        Malformed True
        """

        def malformed(reason: str) -> ContractError:
            return ContractError(
                "Malformed", f'malformed framing contract under "{EXTENSION_KEY}" in the {source} result: {reason}'
            )

        if not isinstance(raw, dict):
            raise malformed("not an object")

        def get(name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
            if name not in raw:
                if default is ...:
                    raise malformed(f"missing field {name}")
                return default
            value = raw[name]
            if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
                raise malformed(f"field {name} has the wrong type")
            return value

        def integers(name: str, low: int, high: int) -> tuple[int, ...]:
            values = get(name, list)
            if not all(isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in values):
                raise malformed(f"field {name} holds a value out of range")
            return tuple(values)

        def strings(name: str, values: list[Any]) -> tuple[str, ...]:
            if not all(isinstance(v, str) for v in values):
                raise malformed(f"field {name} holds a value that is not a string")
            return tuple(values)

        max_frame = get("maxFramePayload", int, 65_536)
        max_message = get("maxMessageSize", int, 16_777_216)
        if not 0 <= max_frame <= 0xFFFFFFFF or max_message < 0:
            raise malformed("a limit is out of range")
        dedupe = None
        if "deduplication" in raw:
            d = raw["deduplication"]
            if not isinstance(d, dict):
                raise malformed("field deduplication is not an object")
            try:
                methods, window, scope = d["methods"], d["windowMs"], d["scope"]
            except KeyError as missing:
                raise malformed(f"missing field deduplication.{missing.args[0]}") from None
            if not isinstance(methods, list) or not isinstance(window, int) or not isinstance(scope, str) or window < 0:
                raise malformed("field deduplication has the wrong type")
            dedupe = Deduplication(strings("deduplication.methods", methods), window, scope)
        always = raw.get("alwaysFramed")
        return cls(
            versions=integers("versions", 0, 255),
            sentinel_required=get("sentinelRequired", bool),
            frame_checksum=get("frameChecksum", str),
            message_digest=get("messageDigest", str),
            transports=strings("transports", get("transports", list)),
            max_frame_payload=max_frame,
            max_message_size=max_message,
            always_framed=always if isinstance(always, str) else None,
            deduplication=dedupe,
        )


@dataclass(frozen=True)
class Discovery:
    """What one resolution said: where it came from and its contract (None: none declared).

    `sticky` is True for an `initialize` handshake (a session), False for per-request discovery
    (`server/discover`, MCP 2026-07-28), which the Regime C error names (§11.4).
    """

    source: Source
    contract: FramingContract | None
    sticky: bool = True

    @classmethod
    def from_result(cls, method: str, result: Any) -> Discovery:
        """Reads an `initialize` or `server/discover` result (a JSON-RPC response's `result`, or
        the response itself) (§11.2).

        >>> Discovery.from_result("initialize", {"capabilities": {}}).contract is None
        True
        """
        source: Source = "server/discover" if method == "server/discover" else "initialize"
        if isinstance(result, dict) and "jsonrpc" in result and "result" in result:
            result = result["result"]
        capabilities = result.get("capabilities") if isinstance(result, dict) else None
        if not isinstance(capabilities, dict):
            raise ContractError("NotADiscoveryResult", f"not an MCP {source} result: no capabilities object")
        places = ("extensions", "experimental") if source == "server/discover" else ("experimental",)
        for place in places:
            holder = capabilities.get(place)
            if isinstance(holder, dict) and EXTENSION_KEY in holder:
                return cls(source, FramingContract.parse(holder[EXTENSION_KEY], source), source == "initialize")
        return cls(source, None, source == "initialize")


@dataclass(frozen=True)
class Negotiated:
    """What client and server agreed (§11.3)."""

    version: int
    max_frame_payload: int
    max_message_size: int
    transports: tuple[str, ...]
    deduplication: Deduplication | None


@dataclass(frozen=True)
class ClientPolicy:
    """The client's policy, built from the first resolution (§11.3); `negotiated` is None when
    the user accepted ambiguity and the server declares no contract (Regime C)."""

    negotiated: Negotiated | None
    limits: Limits = field(default_factory=Limits)
    sticky: bool = True

    @classmethod
    def build(
        cls,
        discovery: Discovery,
        limits: Limits | None = None,
        transports: tuple[str, ...] = KNOWN_TRANSPORTS,
        accept_ambiguity: bool = False,
    ) -> ClientPolicy:
        """Negotiates with `discovery`'s contract (§11.3).

        Raises `ContractError` for Regime C (no contract, or `sentinelRequired` false) unless
        `accept_ambiguity`, and for a contract that cannot be used.

        >>> try:
        ...     ClientPolicy.build(Discovery("initialize", None))
        ... except ContractError as err:
        ...     print(err.kind, err.regime_c)
        NoContract True
        >>> ClientPolicy.build(Discovery("initialize", None), accept_ambiguity=True).regime
        'C'
        """
        limits = limits or Limits()
        contract = discovery.contract
        if contract is None or not contract.sentinel_required:
            if accept_ambiguity:
                return cls(None, limits, discovery.sticky)
            if contract is None:
                raise ContractError(
                    "NoContract",
                    f"configuration error: the {discovery.source} result declares no framing contract under "
                    f'"{EXTENSION_KEY}", so a clean end and an abandoned response stream would be '
                    "indistinguishable (Regime C); put a framing layer in front of the server (mcp-frame proxy, "
                    "or FramingLayer in a Rust server), connect without mcp-framing, or pass "
                    "accept_ambiguity=True to fail every close as ambiguous",
                )
            raise ContractError(
                "SentinelNotRequired",
                f"configuration error: the framing contract in the {discovery.source} result has "
                "sentinelRequired false, so a clean end and an abandoned response stream would be "
                "indistinguishable (Regime C); require the sentinel on the server, connect without mcp-framing, "
                "or pass accept_ambiguity=True to fail every close as ambiguous",
            )
        _check_algorithms(contract)
        common = [v for v in SUPPORTED_VERSIONS if v in contract.versions]
        if not common:
            raise ContractError(
                "VersionMismatch",
                f"framing version mismatch: client accepts {list(SUPPORTED_VERSIONS)}, server offers "
                f"{list(contract.versions)}",
            )
        if contract.max_frame_payload < MIN_MAX_FRAME_PAYLOAD:
            raise ContractError(
                "InvalidLimit",
                f"declared maxFramePayload {contract.max_frame_payload} is below the minimum of 1026 bytes",
            )
        shared = tuple(t for t in transports if t in contract.transports)
        if not shared:
            raise ContractError(
                "NoCommonTransport",
                f"no common framing transport: client reads {list(transports)}, server offers "
                f"{list(contract.transports)}",
            )
        negotiated = Negotiated(
            version=max(common),
            max_frame_payload=min(limits.max_frame_payload, contract.max_frame_payload),
            max_message_size=min(limits.max_message_size, contract.max_message_size),
            transports=shared,
            deduplication=contract.deduplication,
        )
        return cls(negotiated, limits, discovery.sticky)

    @property
    def regime(self) -> Literal["A", "C"]:
        """A with a negotiated contract, C when ambiguity was accepted."""
        return "A" if self.negotiated is not None else "C"

    def decoder_limits(self) -> Limits:
        """The limits every response is decoded with (and announced in `Mcp-Framing-Limits`)."""
        n = self.negotiated
        if n is None:
            return self.limits
        return self.limits.with_(max_frame_payload=n.max_frame_payload, max_message_size=n.max_message_size)

    def deduplicates(self, method: str) -> bool:
        """Whether the server declared deduplication for `method` (§17.11)."""
        n = self.negotiated
        return n is not None and n.deduplication is not None and n.deduplication.covers(method)

    def recheck(self, discovery: Discovery) -> None:
        """§11.5: raises `ContractError("Downgrade")` if `discovery` weakens the negotiated contract.

        A policy that accepted ambiguity accepts any resolution.
        """
        n = self.negotiated
        if n is None:
            return
        contract = discovery.contract

        def downgrade(change: str) -> ContractError:
            return ContractError(
                "Downgrade",
                f"framing downgrade detected in a {discovery.source} result: {change}; failing closed "
                "instead of falling into Regime C",
            )

        if contract is None:
            raise downgrade("the framing contract is no longer declared")
        if not contract.sentinel_required:
            raise downgrade("the contract no longer requires the sentinel")
        if contract.frame_checksum != "crc32":
            raise downgrade(f"the frame checksum changed from crc32 to {contract.frame_checksum!r}")
        if contract.message_digest != "sha256":
            raise downgrade(f"the message digest changed from sha256 to {contract.message_digest!r}")
        if n.version not in contract.versions:
            raise downgrade(f"the negotiated format version {n.version} is no longer offered")
        if not any(t in contract.transports for t in n.transports):
            raise downgrade(f"none of the negotiated transports {list(n.transports)} is offered any more")
        if n.deduplication is not None and (
            contract.deduplication is None or not n.deduplication.kept_by(contract.deduplication)
        ):
            raise downgrade("request-key deduplication is no longer declared as negotiated")


def _check_algorithms(contract: FramingContract) -> None:
    if contract.frame_checksum != "crc32":
        raise ContractError(
            "UnsupportedChecksum", f'unsupported frame checksum {contract.frame_checksum!r} (expected "crc32")'
        )
    if contract.message_digest != "sha256":
        raise ContractError(
            "UnsupportedDigest", f'unsupported message digest {contract.message_digest!r} (expected "sha256")'
        )
