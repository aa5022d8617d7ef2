"""Runs the Python package's encoder (python/src/mcp_framing/encoder.py) over a job list, for
tests/encoders/python_encoder.rs: `python3 driver.py < jobs.json > bodies.json`.

A job: {"mapping", "frame_size", "max_message_size", "request_key": HEX | null, "attempt_id": HEX,
"ops": [["message", HEX] | ["push", HEX] | ["finish"] | ["keepalive"] | ["end"] |
["abort", CODE, REASON], ...]}. Its answer: {"body": HEX, "error": KIND | null}; on the first
`EncodeError` the stream ends with the ABORT it calls for (`MappingEncoder.fail`), as a server does.

A message is written when the next operation comes, so that the last one and the `end` after it
leave together (`message(..., final=True)`: in the compatible mapping STREAM_END rides in the
message's record); an `abort` right after a message in the compatible mapping drops it, which
never had a frame written (the Rust crate's `MappingEncoder` holds it the same way).
"""

from __future__ import annotations

import json
import sys

from mcp_framing.encoder import EncodeError, MappingEncoder, StreamEncoder


def run(job: dict) -> dict:
    key = job.get("request_key")
    enc = MappingEncoder(
        job["mapping"],
        StreamEncoder(
            bytes.fromhex(key) if key else None,
            bytes.fromhex(job["attempt_id"]),
            job["frame_size"],
            job["max_message_size"],
        ),
    )
    out: list[bytes] = []
    held: bytes | None = None
    try:
        for op in job["ops"]:
            name = op[0]
            if held is not None:
                message, held = held, None
                if name == "end":
                    out.append(enc.message(message, final=True))
                    continue
                if name == "abort" and enc.mapping == "compat":
                    pass  # never framed: dropped
                else:
                    out.append(enc.message(message))
            if name == "message":
                data = bytes.fromhex(op[1])
                if enc.mapping == "compat" or len(data) > enc.encoder.max_message_size:
                    enc.encoder.check_message(len(data))  # what the Rust encoder checks at once
                held = data
            elif name == "push":
                out.append(enc.push(bytes.fromhex(op[1])))
            elif name == "finish":
                out.append(enc.finish_message())
            elif name == "keepalive":
                out.append(enc.keep_alive())
            elif name == "end":
                out.append(enc.end())
            elif name == "abort":
                out.append(enc.abort(op[1], op[2]))
            else:
                raise ValueError(f"unknown operation {name!r}")
        if held is not None:
            out.append(enc.message(held))
    except EncodeError as err:
        out.append(enc.fail(err))
        return {"body": b"".join(out).hex(), "error": err.kind}
    return {"body": b"".join(out).hex(), "error": None}


def main() -> int:
    json.dump([run(job) for job in json.load(sys.stdin)], sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
