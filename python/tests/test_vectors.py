"""Every vector of the conformance manifest (SPEC.md §14), decoded whole, one byte at a time and
cut in two at every offset (a sample of offsets above 4 KiB), reaches the manifest's verdict."""

from __future__ import annotations

import pytest

from mcp_framing.conformance import decode
from support import VECTORS, manifest

VECTOR_LIST = manifest()
ALL_SPLITS_MAX = 4096


FIELDS = ("verdict", "sentinel_seen", "regime", "messages", "abort", "error", "truncation")


def expected(vector: dict) -> dict:
    expect = vector["expect"]
    out = {k: expect[k] for k in FIELDS if k in expect}
    out["messages"] = [{k: m[k] for k in ("len", "sha256", "utf8") if k in m} for m in expect["messages"]]
    return out


def shown(verdict: dict, vector: dict) -> dict:
    """The verdict reduced to the fields the manifest states (a manifest written before SPEC.md
    §7.1 has no `sentinel_seen` and `regime`)."""
    keys = [set(m) for m in vector["expect"]["messages"]]
    verdict = {k: v for k, v in verdict.items() if k in vector["expect"]}
    verdict["messages"] = [
        {k: m[k] for k in ("len", "sha256", "utf8") if i >= len(keys) or k in keys[i]}
        for i, m in enumerate(verdict["messages"])
    ]
    return verdict


def split_points(n: int) -> list[int]:
    if n <= ALL_SPLITS_MAX:
        return list(range(n + 1))
    step = max(1, n // 256)
    return sorted(set(range(0, n + 1, step)) | {1, 19, 20, 21, n - 1, n})


def test_the_manifest_lists_every_mapping() -> None:
    assert {v["mapping"] for v in VECTOR_LIST} == {"binary", "sse", "compat"}
    assert len(VECTOR_LIST) > 100


@pytest.mark.parametrize("vector", VECTOR_LIST, ids=[v["file"] for v in VECTOR_LIST])
def test_every_vector_reaches_its_manifest_verdict_whole_bytewise_and_at_every_split(vector: dict) -> None:
    data = (VECTORS / vector["file"]).read_bytes()
    mapping, cfg = vector["mapping"], vector["decoder"]
    whole = decode(data, mapping, cfg).to_manifest()
    assert shown(whole, vector) == expected(vector)
    assert decode(data, mapping, cfg, range(1, len(data))).to_manifest() == whole, "fed one byte at a time"
    for cut in split_points(len(data)):
        assert decode(data, mapping, cfg, [cut]).to_manifest() == whole, f"cut at {cut}"


def prefix_verdict(verdict: dict) -> str:
    """A verdict in the words of the manifest's `prefixes` (§14)."""
    if verdict["verdict"] == "clean":
        return "clean" if verdict["sentinel_seen"] else "delivered"
    if verdict["verdict"] == "aborted":
        return "aborted"
    return "truncated" if verdict["error"] == "Truncated" else f"error {verdict['error']}"


@pytest.mark.parametrize("vector", [v for v in VECTOR_LIST if "prefixes" in v], ids=lambda v: v["file"])
def test_every_prefix_of_a_valid_vector_reaches_the_verdict_the_manifest_states(vector: dict) -> None:
    data = (VECTORS / vector["file"]).read_bytes()
    steps = vector["prefixes"]
    for end in split_points(len(data)):
        want = [s["verdict"] for s in steps if s["from"] <= end][-1]
        got = prefix_verdict(decode(data[:end], vector["mapping"], vector["decoder"]).to_manifest())
        assert got == want, f"prefix of {end} bytes"
    delivered = [s["from"] for s in steps if s["verdict"] == "delivered"]
    assert vector.get("delivered_from") == (delivered[0] if delivered else None)


@pytest.mark.parametrize(
    "vector",
    [v for v in VECTOR_LIST if v["expect"]["verdict"] == "clean" and v["mapping"] == "binary"],
    ids=lambda v: v["file"],
)
def test_no_strict_prefix_of_a_clean_binary_vector_is_clean_for_a_receiver_without_a_key(vector: dict) -> None:
    # Without a request key §7 row 4 does not apply: only STREAM_END then the end of input is clean.
    # (An SSE body may end with comments after its last event: there a prefix can be clean.)
    data = (VECTORS / vector["file"]).read_bytes()
    cfg = {k: v for k, v in (vector["decoder"] or {}).items() if k != "request_key"}
    for end in split_points(len(data))[:-1]:
        verdict = decode(data[:end], vector["mapping"], cfg)
        assert verdict.verdict != "clean", f"prefix of {end} bytes"
        assert verdict.error is not None
