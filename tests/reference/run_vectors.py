#!/usr/bin/env python3
"""Run the reference decoder over the conformance suite (tests/vectors/manifest.json).

For every vector: the verdict of the whole input must equal the manifest's "expect"; then the
verdict must not change when the input is fed one byte at a time, or cut in two at every offset
(every offset for vectors up to --all-splits-max bytes, an even sample of offsets above that).

    python3 tests/reference/run_vectors.py [--vectors DIR] [--all-splits-max N] [-v]

Prints one line per failure and "N passed, N failed"; exits 1 if anything failed.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcp_framing_ref as ref  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_VECTORS = os.path.normpath(os.path.join(HERE, "..", "vectors"))
SAMPLE_SPLITS = 256


def expected_view(expect):
    """The manifest's expectation, reduced to the fields the verdict is compared on."""
    return {
        "verdict": expect.get("verdict"),
        "sentinel_seen": expect.get("sentinel_seen"),
        "regime": expect.get("regime"),
        "messages": [
            {k: m[k] for k in ("len", "sha256", "utf8") if k in m} for m in expect.get("messages", [])
        ],
        "abort": expect.get("abort"),
        "error": expect.get("error"),
        "truncation": expect.get("truncation"),
    }


def actual_view(verdict, expect):
    """The reference verdict, with message fields limited to those the manifest states."""
    got = verdict.to_json(with_detail=False)
    keys = [set(m) for m in expect.get("messages", [])]
    msgs = []
    for i, m in enumerate(got["messages"]):
        wanted = keys[i] if i < len(keys) else {"len", "sha256", "utf8"}
        msgs.append({k: m[k] for k in ("len", "sha256", "utf8") if k in wanted})
    got["messages"] = msgs
    return got


def split_points(n, all_max):
    if n <= all_max:
        return range(n + 1)
    step = max(1, n // SAMPLE_SPLITS)
    return sorted(set(range(0, n + 1, step)) | {n, 1, n - 1, 20, 21})


def check_vector(vdir, vec, all_max):
    """Returns a list of failure strings for one manifest entry."""
    name = vec["file"]
    mapping = vec.get("mapping", "binary")
    if mapping not in ("binary", "sse", "compat"):
        return ["%s: mapping %r is not implemented by the reference decoder" % (name, mapping)]
    with open(os.path.join(vdir, name), "rb") as f:
        data = f.read()
    config = ref.config_from_json(vec.get("decoder"))
    config["mapping"] = mapping
    expect = expected_view(vec["expect"])
    whole = ref.decode(data, **config)
    got = actual_view(whole, vec["expect"])
    if got != expect:
        return ["%s: expected %s, reference decoder says %s" % (name, json.dumps(expect), json.dumps(got))]
    failures = []
    want = whole.to_json()
    bytewise = ref.decode(data, range(1, len(data)), **config).to_json()
    if bytewise != want:
        failures.append("%s: fed one byte at a time: %s" % (name, json.dumps(bytewise)))
    for cut in split_points(len(data), all_max):
        split = ref.decode(data, [cut], **config).to_json()
        if split != want:
            failures.append("%s: split at %d: %s" % (name, cut, json.dumps(split)))
            break
    failures += check_prefixes(name, data, config, vec, all_max)
    return failures


def prefix_verdict(verdict):
    """A verdict in the words of the manifest's `prefixes` (SPEC.md §14)."""
    if verdict.verdict == "clean":
        return "clean" if verdict.sentinel_seen else "delivered"
    if verdict.verdict == "aborted":
        return "aborted"
    if verdict.error == "Truncated":
        return "truncated"
    return "error %s" % verdict.error


def check_prefixes(name, data, config, vec, all_max):
    """Every prefix of a valid vector (a sample above --all-splits-max bytes, dense around each
    step) ends as the manifest's `prefixes` say (SPEC.md §7, §7.1, §14)."""
    steps = vec.get("prefixes")
    if steps is None:
        if name.startswith("valid_"):
            return ["%s: a valid vector without prefixes" % name]
        return []
    delivered = [s["from"] for s in steps if s["verdict"] == "delivered"]
    if vec.get("delivered_from") != (delivered[0] if delivered else None):
        return ["%s: delivered_from %r disagrees with prefixes" % (name, vec.get("delivered_from"))]
    n = len(data)
    cuts = set(split_points(n, all_max))
    for s in steps:
        cuts |= set(range(max(0, s["from"] - 64), min(n, s["from"] + 64) + 1))
    for cut in sorted(cuts):
        want = [s for s in steps if s["from"] <= cut][-1]["verdict"]
        got = prefix_verdict(ref.decode(data[:cut], **config))
        if got != want:
            return ["%s: prefix of %d bytes is %s, the manifest says %s" % (name, cut, got, want)]
    return []


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vectors", default=DEFAULT_VECTORS, help="directory holding manifest.json")
    p.add_argument("--all-splits-max", type=int, default=4096)
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    manifest_path = os.path.join(a.vectors, "manifest.json")
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        print("run_vectors: cannot read %s: %s" % (manifest_path, e), file=sys.stderr)
        return 2
    if manifest.get("spec_version") != 1:
        print("run_vectors: spec_version %r, expected 1" % manifest.get("spec_version"), file=sys.stderr)
        return 2
    passed = failed = 0
    for vec in manifest["vectors"]:
        failures = check_vector(a.vectors, vec, a.all_splits_max)
        if failures:
            failed += 1
            for line in failures:
                print("FAIL " + line)
        else:
            passed += 1
            if a.verbose:
                print("ok   " + vec["file"])
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
