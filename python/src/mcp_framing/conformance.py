"""The conformance batch entry point: `python -m mcp_framing.conformance --batch < jobs.json`.

It speaks the batch protocol of `tests/reference/mcp_framing_ref.py` (SPEC.md §14), which
`tests/reference_decoder.rs` uses to compare external decoders with the Rust crate:

    jobs: [{"file": PATH | "hex": HEX, "mapping": "binary" | "sse" | "compat", "decoder": {...},
            "splits": [[i, j, ...], ...], "chunks": [n, ...]}, ...]

prints, per job, the verdicts for each split list, then for each chunk size, as JSON:
``[[verdict, ...], ...]``, each verdict in the manifest's `expect` shape.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from .body import Mapping, body_decoder
from .limits import Limits
from .verdict import StreamVerdict

__all__ = ["decode", "decoder_config", "main"]

_BOUNDS = (
    "max_stream_bytes",
    "max_messages",
    "max_keepalives_in_a_row",
    "max_ignorable_in_a_row",
    "max_sse_comments_in_a_row",
)


def decoder_config(cfg: dict[str, Any] | None) -> tuple[Limits, bytes | None, int | None]:
    """Limits, request key and event bound from a manifest `decoder` object (fields optional).

    >>> decoder_config({"max_message_size": 6, "request_key": "00" * 15 + "01"})[0].max_message_size
    6
    """
    cfg = cfg or {}
    fields = {name: cfg[name] for name in ("max_frame_payload", "max_message_size", *_BOUNDS) if name in cfg}
    key = cfg.get("request_key")
    return Limits(**fields), None if key is None else bytes.fromhex(key), cfg.get("max_event_data")


def decode(data: bytes, mapping: Mapping, cfg: dict[str, Any] | None, cuts: Iterable[int] = ()) -> StreamVerdict:
    """Decodes `data` fed in pieces cut at the ascending offsets `cuts`."""
    limits, key, max_event_data = decoder_config(cfg)
    decoder = body_decoder(mapping, limits, key, max_event_data)
    prev = 0
    for cut in cuts:
        decoder.feed(data[prev:cut])
        prev = cut
    decoder.feed(data[prev:])
    return decoder.finish()


def _batch(jobs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    out = []
    for job in jobs:
        if "hex" in job:
            data = bytes.fromhex(job["hex"])
        else:
            with open(job["file"], "rb") as f:
                data = f.read()
        mapping = job.get("mapping", "binary")
        feeds: list[Iterable[int]] = [sorted(s) for s in job.get("splits", [[]])]
        feeds += [range(n, len(data), n) for n in job.get("chunks", [])]
        out.append([decode(data, mapping, job.get("decoder"), cuts).to_manifest() for cuts in feeds])
    return out


_USAGE = "usage: python -m mcp_framing.conformance --batch < jobs.json"


def main(argv: list[str] | None = None) -> int:
    """`--batch`: read the job list on stdin, print the verdicts on stdout; `--help`: say so.

    >>> main(["--help"])  # doctest: +ELLIPSIS
    usage: python -m mcp_framing.conformance --batch < jobs.json
    ...
    0
    """
    args = sys.argv[1:] if argv is None else argv
    if "-h" in args or "--help" in args:
        print(_USAGE)
        print()
        print(__doc__.split("\n\n", 1)[1].strip())
        return 0
    if args != ["--batch"]:
        print(f"{_USAGE}\n(--help for more)", file=sys.stderr)
        return 2
    json.dump(_batch(json.load(sys.stdin)), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
