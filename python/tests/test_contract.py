"""The framing contract (SPEC.md §11) read from the discovery fixtures of tests/fixtures/discovery/,
negotiated (§11.3) and re-checked against later resolutions (§11.5)."""

from __future__ import annotations

import json

import pytest

from mcp_framing import ClientPolicy, ContractError, Discovery, FramingContract, Limits
from support import FIXTURES, contract


def fixture(name: str) -> Discovery:
    method = "initialize" if name.startswith("initialize") else "server/discover"
    return Discovery.from_result(method, json.loads((FIXTURES / f"{name}.json").read_text()))


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("initialize_no_contract", "NoContract"),
        ("discover_no_contract", "NoContract"),
        ("initialize_sentinel_not_required", "SentinelNotRequired"),
        ("discover_sentinel_not_required", "SentinelNotRequired"),
        ("initialize_version_mismatch", "VersionMismatch"),
        ("discover_version_mismatch", "VersionMismatch"),
        ("discover_digest_md5", "UnsupportedDigest"),
    ],
)
def test_a_contract_that_cannot_be_used_is_refused_by_name(name: str, kind: str) -> None:
    with pytest.raises(ContractError) as raised:
        ClientPolicy.build(fixture(name))
    assert raised.value.kind == kind
    assert raised.value.regime_c == (kind in ("NoContract", "SentinelNotRequired"))


def test_a_malformed_contract_is_an_error_when_read() -> None:
    with pytest.raises(ContractError) as raised:
        fixture("initialize_malformed_contract")
    assert raised.value.kind == "Malformed"


@pytest.mark.parametrize(
    "name", ["initialize_framed", "discover_framed", "discover_framed_future_fields", "discover_framed_in_experimental"]
)
def test_a_declared_contract_negotiates_regime_a(name: str) -> None:
    policy = ClientPolicy.build(fixture(name))
    assert policy.regime == "A"
    assert policy.negotiated is not None and policy.negotiated.version == 1


def test_negotiated_limits_are_the_smaller_of_both_sides() -> None:
    policy = ClientPolicy.build(fixture("discover_framed_small_limits"), Limits(max_message_size=2 << 20))
    limits = policy.decoder_limits()
    assert (limits.max_frame_payload, limits.max_message_size) == (16384, 1 << 20)
    assert policy.negotiated is not None and policy.negotiated.transports == ("sse",)


def test_accepting_ambiguity_builds_a_regime_c_policy_that_accepts_any_resolution() -> None:
    policy = ClientPolicy.build(fixture("initialize_no_contract"), accept_ambiguity=True)
    assert policy.regime == "C"
    policy.recheck(fixture("discover_no_contract"))


def declared(**changes: object) -> Discovery:
    return Discovery("server/discover", FramingContract.parse(contract(**changes)), sticky=False)


DEDUPE = {"methods": ["tools/call"], "windowMs": 60000, "scope": "principal"}


@pytest.mark.parametrize(
    ("later", "change"),
    [
        (Discovery("server/discover", None), "no longer declared"),
        (declared(sentinelRequired=False), "no longer requires the sentinel"),
        (declared(versions=[2]), "version 1 is no longer offered"),
        (declared(frameChecksum="adler32"), "checksum changed"),
        (declared(transports=["smoke"]), "none of the negotiated transports"),
        (declared(deduplication={**DEDUPE, "windowMs": 10}), "deduplication"),
        (declared(), "deduplication"),
    ],
)
def test_a_resolution_that_weakens_the_contract_is_a_downgrade(later: Discovery, change: str) -> None:
    policy = ClientPolicy.build(declared(deduplication=DEDUPE))
    assert policy.deduplicates("tools/call") and not policy.deduplicates("tools/list")
    with pytest.raises(ContractError) as raised:
        policy.recheck(later)
    assert raised.value.kind == "Downgrade"
    assert change in str(raised.value)


def test_smaller_limits_in_a_later_resolution_are_not_a_downgrade() -> None:
    policy = ClientPolicy.build(declared())
    policy.recheck(declared(maxFramePayload=2048, maxMessageSize=4096))
