"""Writes docs/perf/results.md and results.png from criterion's output (see scripts/bench-report).

Every ratio is of two medians measured in the same run of benches/throughput.rs.
"""

import datetime
import json
import os
import pathlib
import platform
import re
import subprocess
import sys

SIZES = ["64B", "1KiB", "64KiB", "1MiB"]
TOKENS = ["16B", "48B"]
FLOOR = "floor-crc32+sha256"


def load(root):
    """{group: {function: (median ns per iteration, throughput dict)}}"""
    results = {}
    for bench in pathlib.Path(root).glob("*/*/new/benchmark.json"):
        meta = json.loads(bench.read_text())
        estimates = json.loads((bench.parent / "estimates.json").read_text())
        results.setdefault(meta["group_id"], {})[meta["function_id"]] = (
            estimates["median"]["point_estimate"],
            meta["throughput"],
        )
    return results


def rate(entry):
    """Bytes per second (GB/s) or elements per second (M/s) of a result."""
    ns, throughput = entry
    (kind, amount), = throughput.items()
    return amount / ns if kind == "Bytes" else amount / ns * 1e3


def machine():
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    field = lambda name: next(
        (l.split(":", 1)[1].strip() for l in lscpu.splitlines() if l.startswith(name + ":")), "?"
    )
    flags = field("Flags").split()
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "cpu": field("Model name"),
        "cores": field("CPU(s)"),
        "sha_ni": "sha_ni" in flags,
        "avx512": "avx512f" in flags,
        "pclmul": "pclmulqdq" in flags,
        "rustc": rustc,
        "os": f"{platform.system()} {platform.release()}",
        "commit": commit,
    }


IMPLS = [
    ("mcp-framing-encode", "mcp-framing encode"),
    ("mcp-framing-decode-verify", "mcp-framing decode + verify (chunks)"),
    ("mcp-framing-decode-assemble", "mcp-framing decode + verify + assemble"),
    ("floor-crc32+sha256", "floor: CRC-32 + SHA-256"),
    ("floor-sha256", "floor: SHA-256"),
    ("floor-crc32", "floor: CRC-32"),
    ("floor-memcpy", "floor: memcpy"),
    ("ldc-encode", "LengthDelimitedCodec encode"),
    ("ldc-decode", "LengthDelimitedCodec decode"),
    ("aws-eventstream-encode", "aws-smithy-eventstream encode"),
    ("aws-eventstream-decode", "aws-smithy-eventstream decode"),
    ("serde_json-from_slice", "serde_json::from_slice to Value"),
]


def fmt_ratio(x):
    return "–" if x is None else f"{x:.2f}"


def ratio(results, group, a, b):
    try:
        return rate(results[group][a]) / rate(results[group][b])
    except KeyError:
        return None


def targets(results):
    """(description, measured ratio, required, aim) for every target of issue 6."""
    rows = []
    for size, need in [("1KiB", 0.9), ("64KiB", 0.95), ("1MiB", 0.95)]:
        group = f"message-{size}"
        for impl in ["mcp-framing-decode-verify", "mcp-framing-decode-assemble", "mcp-framing-encode"]:
            rows.append((f"{size}: {impl} / {FLOOR}", ratio(results, group, impl, FLOOR), need, None))
    for size in TOKENS:
        group = f"tokens-{size}"
        for impl in ["mcp-framing-decode-verify", "mcp-framing-decode-assemble"]:
            rows.append((f"tokens {size}: {impl} / ldc-decode", ratio(results, group, impl, "ldc-decode"), 0.6, 0.8))
            rows.append((f"tokens {size}: {impl} / aws-eventstream-decode", ratio(results, group, impl, "aws-eventstream-decode"), 10.0, None))
        # Encoders are reported for information: the token targets are for decoding.
        rows.append((f"tokens {size}: mcp-framing-encode / ldc-encode", ratio(results, group, "mcp-framing-encode", "ldc-encode"), None, None))
        rows.append((f"tokens {size}: mcp-framing-encode / aws-eventstream-encode", ratio(results, group, "mcp-framing-encode", "aws-eventstream-encode"), None, None))
    return rows


def ns(results, group, key):
    try:
        return results[group][key][0]
    except KeyError:
        return None


def bounds(results):
    """What the targets leave room for, from the same run's floors and peers."""
    lines = ["", "## Bounds from the same run", ""]
    for size in SIZES:
        group = f"message-{size}"
        floor, copy = ns(results, group, FLOOR), ns(results, group, "floor-memcpy")
        if floor and copy:
            lines.append(
                f"- {size}: an encoder (which writes the payload out) or an assembling decoder "
                f"(which copies it once) pays CRC-32 + SHA-256 + one memcpy at least: at most "
                f"{floor / (floor + copy):.3f} of the CRC-32 + SHA-256 floor even if framing were free."
            )
    for size in TOKENS:
        group = f"tokens-{size}"
        aws, ldc, floor = (ns(results, group, k) for k in ("aws-eventstream-decode", "ldc-decode", FLOOR))
        if aws and ldc and floor:
            frames = 100_000
            lines.append(
                f"- tokens {size}: 10x aws-smithy-eventstream's decode is "
                f"{10 * frames / aws * 1e3:.1f} M frames/s, i.e. {aws / 10 / frames:.1f} ns a frame; "
                f"LengthDelimitedCodec, which checks nothing, takes {ldc / frames:.1f} ns a frame and "
                f"CRC-32 + streamed SHA-256 alone take {floor / frames:.1f} ns a frame."
            )
    return lines


def write_markdown(results, info, out):
    lines = [
        "# Performance results",
        "",
        "Generated by `scripts/bench-report` from `benches/throughput.rs` (criterion). "
        "Every number is a criterion median; every ratio divides two medians measured in the same run.",
        "",
        f"- Machine: {info['cpu']}, {info['cores']} cores "
        f"(SHA-NI: {'yes' if info['sha_ni'] else 'no'}, PCLMULQDQ: {'yes' if info['pclmul'] else 'no'}, "
        f"AVX-512: {'yes' if info['avx512'] else 'no'}), {info['os']}",
        f"- Toolchain: {info['rustc']}; commit {info['commit']}; "
        f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        "- Clock: the bench thread's CPU time (`BENCH_CLOCK=wall` for wall time); the machine was "
        "shared with other builds while this ran.",
        "- Messages: JSON-RPC responses of the given size; each iteration handles 256 KiB of them "
        "(one 1 MiB message) as one stream with the default frame sizes (encoder 16 KiB frames, "
        "decoder limit 64 KiB). Tokens: one message streamed as 100,000 chunks, one DATA frame each.",
        "",
        "## Messages: throughput in GB/s (ratio to the CRC-32 + SHA-256 floor)",
        "",
        "| | " + " | ".join(SIZES) + " |",
        "|---|" + "---:|" * len(SIZES),
    ]
    for key, name in IMPLS:
        cells = []
        for size in SIZES:
            group = results.get(f"message-{size}", {})
            if key not in group:
                cells.append("–")
                continue
            r = ratio(results, f"message-{size}", key, FLOOR)
            cells.append(f"{rate(group[key]):.3f} ({fmt_ratio(r)})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Token streaming: frames per second in millions (ratio to LengthDelimitedCodec, to aws-smithy-eventstream)",
        "",
        "| | " + " | ".join(f"{t} chunks" for t in TOKENS) + " |",
        "|---|" + "---:|" * len(TOKENS),
    ]
    for key, name in IMPLS:
        if key == "serde_json-from_slice":
            continue
        cells = []
        for size in TOKENS:
            group = results.get(f"tokens-{size}", {})
            if key not in group:
                cells.append("–")
                continue
            op = "encode" if "encode" in key else "decode"
            if key.startswith("mcp-framing") or key.startswith("floor"):
                r1 = ratio(results, f"tokens-{size}", key, f"ldc-{op}")
                r2 = ratio(results, f"tokens-{size}", key, f"aws-eventstream-{op}")
                cells.append(f"{rate(group[key]):.2f} ({fmt_ratio(r1)}, {fmt_ratio(r2)})")
            else:
                cells.append(f"{rate(group[key]):.2f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Floor rows here CRC each chunk and stream it into one SHA-256 (what a verifying decoder "
        "must at least do per frame); their ratios are to the decoders.",
        "",
        "## Targets",
        "",
        "| target | ratio | required | met |",
        "|---|---:|---:|:---:|",
    ]
    for desc, measured, need, aim in targets(results):
        if measured is None:
            met = "not run"
        elif need is None:
            lines.append(f"| {desc} | {fmt_ratio(measured)} | (info) | – |")
            continue
        elif measured >= need:
            met = "yes" if aim is None or measured >= aim else f"yes (aim {aim})"
        else:
            met = "**no**"
        lines.append(f"| {desc} | {fmt_ratio(measured)} | ≥ {need} | {met} |")
    lines += bounds(results)
    lines += ["", "![throughput plot](results.png)", ""]
    (out / "results.md").write_text("\n".join(lines))
    return lines


README_START = "<!-- bench-report:start (written by scripts/bench-report) -->"
README_END = "<!-- bench-report:end -->"


def update_readme(lines, info, readme, out):
    """Replaces the README block between the markers with the tables of this run."""
    if not readme.exists():
        return
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        return
    rel = os.path.relpath(out, readme.parent)
    body = [
        README_START,
        f"Measured on {info['cpu']}, {info['cores']} cores (SHA-NI: {'yes' if info['sha_ni'] else 'no'}), "
        f"{info['rustc']}, commit {info['commit']}. Full report: [{rel}/results.md]({rel}/results.md).",
        "",
    ]
    keep = False
    for line in lines:
        if line.startswith("## "):
            keep = True
            line = "#" + line  # one level down inside the "## The codec" section of docs/performance.md
        if line.startswith("![throughput plot]"):
            break
        if keep:
            body.append(line)
    body += [f"![Throughput of mcp-framing against the hashing floor and peers]({rel}/results.png)", README_END]
    start = text.index(README_START)
    end = text.index(README_END) + len(README_END)
    readme.write_text(text[:start] + "\n".join(body) + text[end:])


def plot(results, info, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.5), gridspec_kw={"width_ratios": [3, 2]})
    styles = {
        "mcp-framing-encode": ("tab:blue", "-", "o"),
        "mcp-framing-decode-verify": ("tab:green", "-", "o"),
        "mcp-framing-decode-assemble": ("tab:olive", "-", "s"),
        "floor-crc32+sha256": ("black", "--", None),
        "ldc-decode": ("tab:gray", ":", "^"),
        "aws-eventstream-decode": ("tab:red", ":", "v"),
        "serde_json-from_slice": ("tab:purple", "-.", "x"),
    }
    names = dict(IMPLS)
    xs = range(len(SIZES))
    for key, (color, ls, marker) in styles.items():
        ys = [rate(results[f"message-{s}"][key]) if key in results.get(f"message-{s}", {}) else None for s in SIZES]
        pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
        if pts:
            left.plot([p[0] for p in pts], [p[1] for p in pts], color=color, linestyle=ls, marker=marker, label=names[key])
    left.set_xticks(list(xs), SIZES)
    left.set_yscale("log")
    left.set_xlabel("message size")
    left.set_ylabel("GB/s (log)")
    left.set_title("Messages: throughput (median)")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)

    keys = ["mcp-framing-decode-verify", "mcp-framing-decode-assemble", "ldc-decode", "aws-eventstream-decode",
            "mcp-framing-encode", "ldc-encode", "aws-eventstream-encode"]
    colors = ["tab:green", "tab:olive", "tab:gray", "tab:red", "tab:blue", "silver", "salmon"]
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        ys = [rate(results[f"tokens-{t}"][key]) if key in results.get(f"tokens-{t}", {}) else 0 for t in TOKENS]
        right.bar([j + i * width for j in range(len(TOKENS))], ys, width, label=names[key], color=colors[i])
    right.set_xticks([j + 0.4 - width / 2 for j in range(len(TOKENS))], [f"{t} chunks" for t in TOKENS])
    right.set_ylabel("million frames per second")
    right.set_title("Token streaming: 100,000 chunks (median)")
    right.grid(True, axis="y", alpha=0.3)
    right.set_ylim(top=right.get_ylim()[1] * 1.45)
    right.legend(fontsize=7, loc="upper right", ncol=2)

    fig.suptitle(f"mcp-framing {info['commit']} on {info['cpu']} ({info['cores']} cores), thread CPU time")
    fig.tight_layout()
    fig.savefig(out / "results.png", dpi=110)


def main():
    root, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    results = load(root)
    if not results:
        sys.exit(f"no criterion results under {root}: run the benches first")
    info = machine()
    lines = write_markdown(results, info, out)
    plot(results, info, out)
    update_readme(lines, info, pathlib.Path("docs/performance.md"), out)
    print(f"wrote {out / 'results.md'} and {out / 'results.png'}")


if __name__ == "__main__":
    main()
