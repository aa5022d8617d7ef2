"""Speed of verification against the same run's floor (issue 19): a 1 MiB response in the
binary and the compatible mapping taken the way the transport takes it to the SDK, as medians,
divided by the median of `hashlib.sha256` + `zlib.crc32` of the same body bytes. Goals: binary
at most 1.5x, compatible at most 2x.

    python python/bench.py [--rounds N] [--chunk BYTES] [--clock wall|cpu]

`--clock cpu` times with `time.process_time` (the CPU time of this process), which the other
processes of a loaded machine do not add to, as they add to the wall clock's medians; the goals
are stated for the wall clock (the default) on a quiet machine.

The body is fed in reads of `--chunk` bytes (64 KiB, as an HTTP client hands it over) to the
transport's own per-attempt path (`transport._Verifier`): a decoder that expects the request key
(so §7.1 looks for the final response as the transport's decoder does: lazily, the response's
head read, the rest only where it decides, which a clean stream with its sentinel never needs),
the UTF-8 check of what the SDK is handed, and the SSE events it is handed (the final
response's included, as the chunks the SDK reads). (Until this bench drove that path it decoded
without a request key, which leaves out §7.1's reading of the response.)
The frame verification alone (no request key) is printed beside it. Two messages: JSON text that
is pure ASCII, and JSON text with UTF-8 on every line (the compatible mapping validates it, as an
SSE parser decodes the event as UTF-8, SPEC.md §18.3).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "src"), str(HERE / "tests")]

from mcp_framing import body_decoder  # noqa: E402
from mcp_framing.transport import _sse_event, _Verifier  # noqa: E402
from support import KEY, Writer  # noqa: E402

MIB = 1 << 20


def message(utf8: bool) -> bytes:
    line = 'line {i:06} "quoted" back\\slash\ttab caf\u00e9 \u2713 {run}\n' if utf8 else "line {i:06} text {run}\n"
    lines, size, i = [], 0, 0
    while size < MIB - 200:
        text = line.format(i=i, run="x" * (i % 64))
        lines.append(text)
        size += len(text.encode())
        i += 1
    result = {"content": [{"type": "text", "text": "".join(lines)}]}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}, ensure_ascii=False, separators=(",", ":"))
    return body.encode()


def median(run, rounds: int, clock=time.perf_counter) -> float:
    times = []
    for _ in range(rounds):
        start = clock()
        run()
        times.append(clock() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--chunk", type=int, default=64 * 1024)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    print(
        f"{'case':<28}{'bytes':>10}{'path ms':>9}{'frames ms':>11}{'floor ms':>10}{'ratio':>8}{'frames':>8}{'goal':>6}"
    )
    for utf8 in (False, True):
        m = message(utf8)
        for mapping, goal in (("binary", 1.5), ("compat", 2.0)):
            writer = Writer()
            body = writer.binary([m]) if mapping == "binary" else writer.compat([m])
            chunks = [body[i : i + args.chunk] for i in range(0, len(body), args.chunk)]

            def path(chunks=chunks, mapping=mapping) -> None:
                verifier = _Verifier(body_decoder(mapping, request_key=KEY))
                for chunk in chunks:
                    verifier.feed(chunk)
                assert verifier.finish().is_clean and verifier.final is not None
                _sse_event(verifier.final)  # the event the SDK reads it from

            def frames(chunks=chunks, mapping=mapping) -> None:
                decoder = body_decoder(mapping)
                for chunk in chunks:
                    decoder.feed(chunk)
                assert decoder.finish().is_clean

            def floor(body=body) -> None:
                hashlib.sha256(body).digest()
                zlib.crc32(body)

            path()
            frames()
            p = median(path, args.rounds, clock)
            d = median(frames, args.rounds, clock)
            f = median(floor, args.rounds, clock)
            case = f"{mapping}, {'UTF-8' if utf8 else 'ASCII'} JSON"
            print(
                f"{case:<28}{len(body):>10}{p * 1e3:>9.3f}{d * 1e3:>11.3f}{f * 1e3:>10.3f}"
                f"{p / f:>8.2f}{d / f:>8.2f}{goal:>6.1f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
