"""Writes docs/perf/e2e.md, e2e.png and e2e.json from benches/e2e.rs's output (see scripts/bench-report --e2e).

Every ratio divides two medians measured in the same run: a framed call by the unframed call of the
same server, size and socket setting. If docs/perf/e2e-before.json exists (a run before the
changes of issue 14), the report compares it with this run; so it does with
docs/perf/e2e-compat-before.json (a run before the compatible mapping's zero-copy pass-through in
`FramingLayer`, issue 13 §5) for the compatible mapping's rows.
"""

import datetime
import json
import pathlib
import sys

from bench_report import machine

SERVERS = [("rmcp", "rmcp `StreamableHttpService` (framed: `FramingLayer`)"), ("plain", "axum handler (framed: `FramedBody`)")]
SOCKETS = [(False, "`axum::serve` as is"), (True, "TCP_NODELAY")]
PLOT_SOCKETS = {False: "axum::serve as is (Nagle on)", True: "TCP_NODELAY on the server"}
LABELS = {
    "unframed": "unframed",
    "layer-not-opted-in": "layer, not opted in",
    "sse": "framed SSE (base64)",
    "binary": "framed binary",
    "compat": "framed compatible SSE",
    "compat-stock-client": "compatible SSE, stock client",
}
# Issue 14: latency ratio limits per mapping, at 1 KiB and from 64 KiB to 1 MiB; the absolute
# limit at 1 KiB (ms); throughput with 32 calls in flight at 64 KiB. Issue 13 §5 for the
# compatible mapping: 5% at 1 KiB, 0.9 of the unframed throughput (bytes per second of a call)
# at 1 MiB.
RATIO_LIMITS = {"binary": (1.10, 1.20), "sse": (1.35, 1.35), "compat": (1.05, None)}
MAX_EXTRA_MS_1KIB = 1.0
THROUGHPUT_LIMIT = 0.85
THROUGHPUT_LIMIT_SIZE = 64 * 1024
COMPAT_1MIB_THROUGHPUT = 0.9
MIB = 1024 * 1024
# Issue 13 §5's sizes and mappings, for its summary table.
COMPAT_SIZES = [1024, 64 * 1024, MIB]
COMPAT_FRAMINGS = ["unframed", "sse", "compat", "binary", "compat-stock-client"]


def size_name(size):
    return f"{size // (1024 * 1024)} MiB" if size % (1024 * 1024) == 0 else f"{size // 1024} KiB"


def framings(results):
    """Framing names in the order of the results (a new mapping shows up by itself)."""
    seen = []
    for row in results["latency"] + results["throughput"]:
        if row["framing"] not in seen:
            seen.append(row["framing"])
    return seen


def index(rows):
    return {(r["server"], r["framing"], r.get("size"), r["nodelay"]): r for r in rows}


def value(row, key):
    if row is None or row.get("failure") or row.get(key) is None:
        return None
    return row[key]


def fmt(x, digits=3):
    return "–" if x is None else f"{x:.{digits}f}"


def latency_table(results, server, names=None, size_list=None, with_cpu=False):
    """Median ms (ratio to unframed) per size and socket; `with_cpu` adds server / client CPU per
    call (µs). By default every framing and size of the results."""
    lat = index(results["latency"])
    names = present(results, server, framings(results) if names is None else names)
    size_list = sizes(results) if size_list is None else [s for s in size_list if s in sizes(results)]
    lines = [
        "| result size | socket | " + " | ".join(LABELS.get(f, f) for f in names) + " |",
        "|---|---|" + "---:|" * len(names),
    ]
    for size in size_list:
        for nodelay, socket in SOCKETS:
            base = value(lat.get((server, "unframed", size, nodelay)), "median_ms")
            cells = []
            for f in names:
                row = lat.get((server, f, size, nodelay))
                ms = value(row, "median_ms")
                if row is not None and row.get("failure"):
                    cells.append("**failed**")
                elif ms is None:
                    cells.append("–")
                else:
                    stalled = row.get("stalled_calls", 0)
                    notes = [] if f == "unframed" or not base else [f"{ms / base:.2f}"]
                    notes += [f"{stalled}/{row['calls']} stalled"] if stalled else []
                    note = f" ({', '.join(notes)})" if notes else ""
                    cpu = f"; {row['server_cpu_us']:.0f} / {row['client_cpu_us']:.0f} µs" if with_cpu else ""
                    cells.append(f"{ms:.3f}{note}{cpu}")
            lines.append(f"| {size_name(size)} | {socket} | " + " | ".join(cells) + " |")
    return lines


def present(results, server, names):
    have = {(r["server"], r["framing"]) for r in results["latency"]}
    return [f for f in names if (server, f) in have]


def cpu_table(results, server):
    lat = index(results["latency"])
    names = [f for f in framings(results) if any(r["server"] == server and r["framing"] == f for r in results["latency"])]
    lines = [
        "| result size | " + " | ".join(LABELS.get(f, f) for f in names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for size in sizes(results):
        cells = []
        for f in names:
            # TCP_NODELAY rows: the same work without stalls.
            row = lat.get((server, f, size, True))
            s, c = value(row, "server_cpu_us"), value(row, "client_cpu_us")
            cells.append("–" if s is None else f"{s:.0f} / {c:.0f}")
        lines.append(f"| {size_name(size)} | " + " | ".join(cells) + " |")
    return lines


def throughput_table(results, size):
    tp = index(results["throughput"])
    names = framings(results)
    lines = [
        "| server | socket | " + " | ".join(LABELS.get(f, f) for f in names) + " |",
        "|---|---|" + "---:|" * len(names),
    ]
    for server, _ in SERVERS:
        for nodelay, socket in SOCKETS:
            base = value(tp.get((server, "unframed", size, nodelay)), "calls_per_s")
            cells = []
            for f in names:
                row = tp.get((server, f, size, nodelay))
                rate = value(row, "calls_per_s")
                if row is None:
                    cells.append("–")
                elif rate is None:
                    cells.append("**failed**")
                else:
                    ratio = f" ({rate / base:.2f})" if f != "unframed" and base else ""
                    cells.append(f"{rate:.0f}{ratio}, {row['server_cpu_us']:.0f} µs")
            lines.append(f"| {server} | {socket} | " + " | ".join(cells) + " |")
    return lines


def tp_sizes(results):
    return sorted({r["size"] for r in results["throughput"]})


def concurrency(results):
    return results["throughput"][0]["concurrency"] if results["throughput"] else 32


def sizes(results):
    return sorted({r["size"] for r in results["latency"]})


def floors(results):
    return {f["size"]: f for f in results.get("floors", [])}


def bound_ms(results, size, framing, overlap):
    """The least a framed call can add to the unframed one: each side's own work per byte,
    CRC-32 + SHA-256, plus for the SSE mapping base64 (encoding on the server, decoding on the
    client; the compatible mapping base64-encodes only the frame headers: nothing per byte).
    Serial: both sides one after the other. With `overlap` (a pipeline on two cores: the server
    hashes a frame while the client verifies the one before): the larger of the two sides."""
    floor = floors(results).get(size)
    if floor is None:
        return None
    server = client = floor["crc32_sha256_us"]
    if framing == "sse":
        server += floor["base64_encode_us"]
        client += floor["base64_decode_us"]
    return (max(server, client) if overlap else server + client) / 1e3


def throughput_bound(results, server, framing, size, nodelay):
    """With every core busy, calls per second go as 1 / CPU per call: the best throughput ratio
    is the unframed call's CPU (server + client, same run) over that plus the floor's."""
    base = index(results["throughput"]).get((server, "unframed", size, nodelay))
    extra = bound_ms(results, size, framing, overlap=False)
    if value(base, "server_cpu_us") is None or extra is None:
        return None
    cpu = base["server_cpu_us"] + base["client_cpu_us"]
    return cpu / (cpu + extra * 1e3)


def goals(results):
    """(goal, server, socket, measured, limit, met, bound, shown) rows for issue 14 (and 13 §5)."""
    lat = index(results["latency"])
    rows = []
    for server, _ in SERVERS:
        for nodelay, socket in SOCKETS:
            for size in sizes(results):
                base = value(lat.get((server, "unframed", size, nodelay)), "median_ms")
                for framing, (small, large) in RATIO_LIMITS.items():
                    row = lat.get((server, framing, size, nodelay))
                    if row is None:
                        continue
                    ms = value(row, "median_ms")
                    limit = small if size <= 1024 else large
                    if size == 1024:
                        # "No Nagle stall": the median within 1 ms of unframed, and no stalled call
                        # (the unframed rmcp call itself may stall, which would hide ours).
                        extra = None if ms is None or base is None else ms - base
                        stalled = row.get("stalled_calls", 0)
                        met = extra is not None and extra <= MAX_EXTRA_MS_1KIB and stalled == 0
                        rows.append((f"{size_name(size)} {LABELS[framing]}: extra latency (ms), stalled calls", server, socket,
                                     extra, f"≤ {MAX_EXTRA_MS_1KIB}, 0", met, None, f"{fmt(extra, 2)}, {stalled}"))
                    if limit is None:
                        continue
                    ratio = None if ms is None or not base else ms / base
                    extra = bound_ms(results, size, framing, overlap=False)
                    bound = None if extra is None or not base else (base + extra) / base
                    overlapped = bound_ms(results, size, framing, overlap=True)
                    bound_o = None if overlapped is None or not base else (base + overlapped) / base
                    base_stalls = (lat.get((server, "unframed", size, nodelay)) or {}).get("stalled_calls", 0)
                    shown = f"{fmt(ratio, 2)} (unframed: {base_stalls} stalled)" if base_stalls else None
                    rows.append((f"{size_name(size)} {LABELS[framing]}: latency ratio", server, socket,
                                 ratio, f"≤ {limit}", ratio is not None and ratio <= limit, (bound, bound_o), shown))
                if size == MIB and lat.get((server, "compat", size, nodelay)) is not None:
                    # Issue 13 §5: bytes per second of one call, compat over unframed; the bound
                    # is the unframed call over that plus the hashing floor.
                    ms = value(lat.get((server, "compat", size, nodelay)), "median_ms")
                    ratio = None if ms is None or not base else base / ms
                    bound = tuple(
                        None if x is None or not base else base / (base + x)
                        for x in (bound_ms(results, size, "compat", False), bound_ms(results, size, "compat", True)))
                    rows.append((f"{size_name(size)} {LABELS['compat']}: throughput of a call", server, socket,
                                 ratio, f"≥ {COMPAT_1MIB_THROUGHPUT}", ratio is not None and ratio >= COMPAT_1MIB_THROUGHPUT,
                                 bound, None))
            for size in tp_sizes(results):
                # Issue 14: the SSE and binary mappings at 64 KiB; issue 13 §5: compat at 1 MiB.
                limits = {"sse": THROUGHPUT_LIMIT, "binary": THROUGHPUT_LIMIT} if size == THROUGHPUT_LIMIT_SIZE else {}
                if size == MIB:
                    limits["compat"] = COMPAT_1MIB_THROUGHPUT
                for framing, limit in limits.items():
                    rows += throughput_goal(results, server, framing, size, nodelay, limit)
    return rows


def throughput_goal(results, server, framing, size, nodelay, limit):
    """The goal row of a throughput ratio with `limit` (none if not measured)."""
    tp = index(results["throughput"])
    row = tp.get((server, framing, size, nodelay))
    if row is None:
        return []
    base = value(tp.get((server, "unframed", size, nodelay)), "calls_per_s")
    rate = value(row, "calls_per_s")
    ratio = None if rate is None or not base else rate / base
    bound = throughput_bound(results, server, framing, size, nodelay)
    socket = dict(SOCKETS)[nodelay]
    return [(f"{size_name(size)} x{row['concurrency']} {LABELS[framing]}: throughput ratio", server, socket,
             ratio, f"≥ {limit}", ratio is not None and ratio >= limit, None if bound is None else (bound, None), None)]


def goal_lines(results, only=None):
    """The goals table; `only`: a text the goal's name must contain."""
    rows = [g for g in goals(results) if only is None or only in g[0]]
    return goal_table(rows, "serial hashing / both cores", "goals met in this run.")


def goal_table(rows, bound_title, summary):
    """A goals table of (goal, server, socket, measured, limit, met, bound, shown) rows."""
    lines = [
        f"| goal | server | socket | measured | limit | met | bound ({bound_title}) |",
        "|---|---|---|---:|---:|:---:|---:|",
    ]
    for goal, server, socket, measured, limit, met, bound, shown in rows:
        b = "" if bound is None else " / ".join(fmt(x, 2) for x in bound if x is not None)
        shown = shown or fmt(measured, 2)
        lines.append(f"| {goal} | {server} | {socket} | {shown} | {limit} | {'yes' if met else '**no**'} | {b} |")
    met = sum(1 for g in rows if g[5])
    lines += ["", f"{met} of {len(rows)} {summary}"]
    return lines


def bytes_table(results, server, only_sizes=None):
    """Bytes per call: the response body (ratio to unframed) and what the server wrote to the
    socket (HTTP head, chunked framing, body). TCP_NODELAY rows: the bytes do not depend on it."""
    lat = index(results["latency"])
    names = [f for f in present(results, server, framings(results)) if f != "layer-not-opted-in"]
    lines = [
        "| result size | " + " | ".join(LABELS[f] for f in names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for size in [s for s in sizes(results) if only_sizes is None or s in only_sizes]:
        base = value(lat.get((server, "unframed", size, True)), "body_bytes")
        cells = []
        for f in names:
            row = lat.get((server, f, size, True))
            body, wire = value(row, "body_bytes"), value(row, "wire_bytes")
            if body is None:
                cells.append("–")
                continue
            ratio = f" ({body / base:.3f})" if base and f != "unframed" else ""
            cells.append(f"{body:,.0f}{ratio} · {wire:,.0f}" if wire is not None else f"{body:,.0f}{ratio}")
        lines.append(f"| {size_name(size)} | " + " | ".join(cells) + " |")
    return lines


def compat_bound_lines(results):
    """Issue 13 §5 at 1 MiB: what the hashing floor alone allows, from this run."""
    floor = floors(results).get(MIB)
    lat = index(results["latency"])
    if floor is None:
        return []
    lines = []
    for server, title in SERVERS:
        base = value(lat.get((server, "unframed", MIB, True)), "median_ms")
        if not base:
            continue
        serial = base / (base + bound_ms(results, MIB, "compat", False))
        both = base / (base + bound_ms(results, MIB, "compat", True))
        verdict = "out of reach on this machine" if both < COMPAT_1MIB_THROUGHPUT else "within reach"
        lines.append(
            f"- {server}, TCP_NODELAY: the unframed 1 MiB call takes {base:.2f} ms; CRC-32 + SHA-256 of 1 MiB takes "
            f"{floor['crc32_sha256_us'] / 1e3:.2f} ms on each side, so even a mapping that cost nothing but its "
            f"checksums keeps at most {serial:.2f} of the unframed throughput of a call ({both:.2f} with the two "
            f"sides hashing at once on the two cores): the goal of {COMPAT_1MIB_THROUGHPUT} is {verdict}.")
    return lines


def floor_lines(results):
    lines = [
        "| result size | CRC-32 + SHA-256 (µs, each side) | base64 encode (µs) | base64 decode (µs) |",
        "|---|---:|---:|---:|",
    ]
    for size, f in sorted(floors(results).items()):
        lines.append(f"| {size_name(size)} | {f['crc32_sha256_us']:.1f} | {f['base64_encode_us']:.1f} | {f['base64_decode_us']:.1f} |")
    return lines


def before_after(before, after):
    """Median latency and server CPU per call, before and after, for the framed rows."""
    b, a = index(before["latency"]), index(after["latency"])
    lines = [
        f"Before: commit {before.get('machine', {}).get('commit', '?')}; after: commit {after['machine']['commit']}. "
        "Each ratio is to the unframed call of its own run.",
        "",
        "| call | size | socket | before: ms (ratio), server µs | after: ms (ratio), server µs |",
        "|---|---|---|---:|---:|",
    ]
    for server, _ in SERVERS:
        for framing in [f for f in framings(after) if f not in ("unframed",)]:
            for size in sizes(after):
                for nodelay, socket in SOCKETS:
                    cells = []
                    for run in (b, a):
                        row, base = run.get((server, framing, size, nodelay)), run.get((server, "unframed", size, nodelay))
                        ms, base_ms = value(row, "median_ms"), value(base, "median_ms")
                        if row is not None and row.get("failure"):
                            cells.append("failed")
                        elif ms is None:
                            cells.append("–")
                        else:
                            ratio = f" ({ms / base_ms:.2f})" if base_ms else ""
                            cells.append(f"{ms:.3f}{ratio}, {row['server_cpu_us']:.0f}")
                    if cells != ["–", "–"]:
                        lines.append(f"| {server} {LABELS.get(framing, framing)} | {size_name(size)} | {socket} | " + " | ".join(cells) + " |")
    tb, ta = index(before["throughput"]), index(after["throughput"])
    lines += ["", "| throughput x32, 64 KiB | socket | before: calls/s (ratio) | after: calls/s (ratio) |", "|---|---|---:|---:|"]
    for server, _ in SERVERS:
        for framing in framings(after):
            for nodelay, socket in SOCKETS:
                cells = []
                for run in (tb, ta):
                    size = THROUGHPUT_LIMIT_SIZE
                    rate = value(run.get((server, framing, size, nodelay)), "calls_per_s")
                    base = value(run.get((server, "unframed", size, nodelay)), "calls_per_s")
                    cells.append("–" if rate is None else f"{rate:.0f}" + (f" ({rate / base:.2f})" if base and framing != "unframed" else ""))
                if cells != ["–", "–"]:
                    lines.append(f"| {server} {LABELS.get(framing, framing)} | {socket} | " + " | ".join(cells) + " |")
    return lines


ISSUE_ROWS = [(1024, False), (1024, True), (64 * 1024, True), (128 * 1024, True), (200 * 1024, True), (1024 * 1024, True)]


def issue_table(before, after):
    """Issue 14's table (rmcp behind FramingLayer), before and after: median ms (ratio)."""
    lines = [
        "| result size | unframed | framed SSE (ratio) | framed binary (ratio) |",
        "|---|---:|---:|---:|",
    ]
    for size, nodelay in ISSUE_ROWS:
        label = f"{size_name(size)}, {'TCP_NODELAY' if nodelay else '`axum::serve` as is'}"
        for name, run in (("before", before), ("after", after)):
            lat = index(run["latency"])
            unframed = lat.get(("rmcp", "unframed", size, nodelay))
            base = value(unframed, "median_ms")
            stalled = (unframed or {}).get("stalled_calls", 0)
            note = f" ({stalled}/{unframed['calls']} stalled)" if stalled else ""
            cells = ["–" if base is None else f"{base:.3f}{note}"]
            for framing in ("sse", "binary"):
                row = lat.get(("rmcp", framing, size, nodelay))
                ms = value(row, "median_ms")
                if row is not None and row.get("failure"):
                    cells.append("failed")
                elif ms is None or not base:
                    cells.append("–")
                else:
                    stalled = row.get("stalled_calls", 0)
                    note = f", {stalled}/{row['calls']} stalled" if stalled else ""
                    cells.append(f"{ms:.3f} ({ms / base:.2f}{note})")
            lines.append(f"| {label}, {name} | " + " | ".join(cells) + " |")
    return lines


def compat_before_after(before, after):
    """The compatible mapping through `FramingLayer` before and after a change (TCP_NODELAY):
    median ms (ratio to the unframed call of its own run), server / client CPU per call."""
    b, a = index(before["latency"]), index(after["latency"])
    lines = [
        f"rmcp behind `FramingLayer`, TCP_NODELAY. Before: commit {before['machine']['commit']} "
        f"({before['machine'].get('date', '?')}); after: commit {after['machine']['commit']}. "
        "Each cell: median ms (ratio to the unframed call of its own run); server / client CPU per call.",
        "",
        "| call | size | before | after |",
        "|---|---|---:|---:|",
    ]
    for framing in ("compat", "compat-stock-client", "binary"):
        for size in COMPAT_SIZES:
            cells = []
            for run in (b, a):
                row, base = run.get(("rmcp", framing, size, True)), run.get(("rmcp", "unframed", size, True))
                ms, base_ms = value(row, "median_ms"), value(base, "median_ms")
                if ms is None or not base_ms:
                    cells.append("–")
                else:
                    cells.append(f"{ms:.3f} ({ms / base_ms:.2f}); {row['server_cpu_us']:.0f} / {row['client_cpu_us']:.0f} µs")
            lines.append(f"| {LABELS[framing]} | {size_name(size)} | " + " | ".join(cells) + " |")
    return lines


# Issue 21: the framing layer's own CPU cost (per framed call, over the unframed call of the same
# server, size and socket, in units of this run's CRC-32 + SHA-256 floor of one side), latency
# ratios through rmcp, and throughput with 32 calls in flight at 64 KiB.
ISSUE21_SIZES = [64 * 1024, MIB]
ISSUE21_CPU_LIMIT = 1.3
ISSUE21_MAPPINGS = ["binary", "sse", "compat", "compat-stock-client"]
ISSUE21_LATENCY_LIMITS = {(MIB, "binary"): 1.40, (MIB, "compat"): 1.40, (64 * 1024, "binary"): 1.25,
                          (64 * 1024, "compat"): 1.25, (1024, "compat-stock-client"): 1.10}
ISSUE21_THROUGHPUT_LIMIT = 0.80
ISSUE21_THROUGHPUT_MAPPINGS = ["binary", "compat", "sse"]


def extra_cpu(results, server, framing, size, nodelay, side):
    """A framed call's CPU on `side` ("server" or "client") beyond the unframed call's, in
    units of the one-side hashing floor of this run."""
    lat = index(results["latency"])
    floor = floors(results).get(size)
    row, base = lat.get((server, framing, size, nodelay)), lat.get((server, "unframed", size, nodelay))
    cpu, base_cpu = value(row, f"{side}_cpu_us"), value(base, f"{side}_cpu_us")
    if cpu is None or base_cpu is None or floor is None:
        return None
    return (cpu - base_cpu) / floor["crc32_sha256_us"]


def issue21_goals(results):
    """(goal, server, socket, measured, limit, met, bound, shown) rows for issue 21."""
    lat = index(results["latency"])
    rows = []
    for server, _ in SERVERS:
        for nodelay, socket in SOCKETS:
            for size in [s for s in ISSUE21_SIZES if s in sizes(results)]:
                for framing in ISSUE21_MAPPINGS:
                    sides = ["server"] + (["client"] if framing == "compat" else [])
                    for side in sides:
                        if lat.get((server, framing, size, nodelay)) is None:
                            continue
                        x = extra_cpu(results, server, framing, size, nodelay, side)
                        rows.append((f"{size_name(size)} {LABELS[framing]}: {side} CPU beyond unframed, in hashing floors",
                                     server, socket, x, f"≤ {ISSUE21_CPU_LIMIT}", x is not None and x <= ISSUE21_CPU_LIMIT,
                                     None, None))
            for (size, framing), limit in ISSUE21_LATENCY_LIMITS.items():
                if server != "rmcp" or lat.get((server, framing, size, nodelay)) is None:
                    continue
                base = value(lat.get((server, "unframed", size, nodelay)), "median_ms")
                ms = value(lat.get((server, framing, size, nodelay)), "median_ms")
                ratio = None if ms is None or not base else ms / base
                bound = None
                if base:
                    pipeline, serial = (bound_ms(results, size, framing, overlap) for overlap in (True, False))
                    if pipeline is not None:
                        bound = ((base + serial) / base, (base + pipeline) / base)
                rows.append((f"{size_name(size)} {LABELS[framing]}: latency ratio", server, socket, ratio, f"≤ {limit}",
                             ratio is not None and ratio <= limit, bound, None))
            for framing in ISSUE21_THROUGHPUT_MAPPINGS:
                rows += throughput_goal(results, server, framing, THROUGHPUT_LIMIT_SIZE, nodelay, ISSUE21_THROUGHPUT_LIMIT)
    return rows


def cpu_extra_table(results, server):
    """Server / client CPU per call beyond the unframed call, µs, and in hashing floors."""
    lat = index(results["latency"])
    names = [f for f in present(results, server, framings(results)) if f not in ("unframed",)]
    lines = [
        "| result size | socket | hashing floor (µs) | " + " | ".join(LABELS.get(f, f) for f in names) + " |",
        "|---|---|---:|" + "---:|" * len(names),
    ]
    for size in [s for s in sizes(results) if s in ISSUE21_SIZES]:
        floor = floors(results).get(size)
        for nodelay, socket in SOCKETS:
            base = lat.get((server, "unframed", size, nodelay))
            cells = []
            for f in names:
                row = lat.get((server, f, size, nodelay))
                parts = []
                for side in ("server", "client"):
                    cpu, base_cpu = value(row, f"{side}_cpu_us"), value(base, f"{side}_cpu_us")
                    if cpu is None or base_cpu is None:
                        parts.append("–")
                        continue
                    extra = cpu - base_cpu
                    units = f" ({extra / floor['crc32_sha256_us']:.2f})" if floor else ""
                    parts.append(f"{extra:+.0f}{units}")
                cells.append(" / ".join(parts))
            floor_cell = fmt(floor["crc32_sha256_us"], 0) if floor else "–"
            lines.append(f"| {size_name(size)} | {socket} | {floor_cell} | " + " | ".join(cells) + " |")
    return lines


def tail_table(results, server):
    """The tail (last body byte received to the response in hand), median µs, TCP_NODELAY rows;
    the one-side hashing floor beside it: what a client that hashes after the transfer adds."""
    lat = index(results["latency"])
    names = present(results, server, [f for f in framings(results) if f != "layer-not-opted-in"])
    lines = [
        "| result size | hashing floor (µs) | " + " | ".join(LABELS.get(f, f) for f in names) + " |",
        "|---|---:|" + "---:|" * len(names),
    ]
    for size in sizes(results):
        floor = floors(results).get(size)
        cells = []
        for f in names:
            tail = value(lat.get((server, f, size, True)), "tail_median_ms")
            cells.append("–" if tail is None else f"{tail * 1e3:.0f}")
        lines.append(f"| {size_name(size)} | {fmt(floor['crc32_sha256_us'], 0) if floor else '–'} | " + " | ".join(cells) + " |")
    return lines


def per_server(servers, table, results):
    """`table` of each server, under its title."""
    return [line for server, title in servers for line in [f"{title}:", ""] + table(results, server) + [""]]


def issue21_lines(results):
    lines = ["## The framing layer's own cost, and the overlap", "",
             "CPU per call beyond the unframed call of the same server, size and socket: server / client, µs "
             "(in units of this run's CRC-32 + SHA-256 floor of one side). The goal: at most 1.3 floors on the "
             "server in every mapping, and on the client in the compatible mapping.", ""]
    served = [(server, title) for server, title in SERVERS if present(results, server, ["unframed"])]
    lines += per_server(served, cpu_extra_table, results)
    lines += ["The tail: from the last body byte the client received to the response in hand (unframed: its "
              "event or body complete; framed: the final response verified), median µs, TCP_NODELAY. A client "
              "that verifies frames as they arrive has only its digest comparison left; one that hashes the "
              "message after the transfer shows about the hashing floor.", ""]
    lines += per_server(served, tail_table, results)
    lines += ["Latency bounds from this run's floors, as ratios to this run's unframed call: the sequential bound "
              "(first figure) is the unframed latency plus CRC-32 + SHA-256 on both sides one after the other "
              "(plus base64 both ways for the SSE mapping); the pipeline bound (second figure) is the unframed "
              "latency plus the larger of one side's hashing (the server hashing a frame while the client verifies "
              "the one before and the kernel carries a third, on two cores).", ""]
    lines += goal_table(issue21_goals(results), "sequential / pipeline",
                        "goals met in this run (the codec ratios are `scripts/bench-report`'s).") + [""]
    return lines


def write_markdown(results, before, out, compat_before=None):
    info = results["machine"]
    lines = [
        "# End-to-end cost of framing: `tools/call` over loopback",
        "",
        "Generated by `scripts/bench-report --e2e` from `benches/e2e.rs`. Every number is a median of one run; "
        "every ratio divides two medians of that run (framed / unframed, same server, size and socket setting).",
        "",
        f"- Machine: {info['cpu']}, {info['cores']} cores (SHA-NI: {'yes' if info['sha_ni'] else 'no'}), {info['os']}; "
        "server and client share the cores, and the machine was shared with other builds "
        f"(load average {fmt(results.get('load_average', [None])[0], 1)} at the start, {fmt(results.get('load_average', [None, None])[-1], 1)} at the end).",
        f"- Toolchain: {info['rustc']}; commit {info['commit']}; {info['date']}",
        f"- Calls: {results['rounds']} rounds of {results['batch']} calls per configuration, interleaved; "
        f"{results['frame_size'] // 1024} KiB frames. The server runs in its own process (tokio, 2 workers); the client "
        "is one thread (reqwest).",
        "- Latency: until the response is in hand. Unframed: its SSE event (rmcp) or JSON body (plain) complete, "
        "when a stock client hands it over. Framed: verified by `VerifiedResponse` up to the sentinel and the body end, "
        "when a framing client hands it over. *Stalled* counts calls of 30 ms or more (a delayed ACK met Nagle's algorithm).",
        "- CPU per call: server process (sum of its threads' on-CPU time) and client thread, median over batches. "
        "The server's is the kernel's run time of each thread (`/proc/<pid>/task/<tid>/schedstat`, user and kernel time "
        "alike, the loopback delivery of what a thread writes included), read before and after each batch; the "
        "client's is its thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`), the same counter. `perf stat -e task-clock` "
        "counts the same time: over a server's whole life the two agree within 5% "
        "(`docs/perf/e2e-profile.md`). A framed call's extra over the unframed one moves by several tenths of a "
        "millisecond at 1 MiB between runs on a shared machine: compare it within one run, not across runs.",
        "",
    ]
    lines += ["## The compatible SSE mapping end to end", "",
              "Unframed, the base64 SSE mapping, the compatible SSE mapping and the binary mapping, each verified by "
              "`VerifiedResponse` on the client; the last column is the compatible mapping as a stock client reads it "
              "(`FramingLayer::frame_all_responses`, not opted in, `sse-stream` skipping the records). "
              "Each cell: median ms (ratio to unframed); server / client CPU per call.", ""]
    for server, title in SERVERS:
        lines += [f"{title}:", ""] + latency_table(results, server, COMPAT_FRAMINGS, COMPAT_SIZES, with_cpu=True) + [""]
    lines += ["Bytes per call: response body (ratio to unframed) · bytes the server wrote to the socket "
              "(HTTP head, chunked framing and body).", ""]
    for server, title in SERVERS:
        lines += [f"{title}:", ""] + bytes_table(results, server, COMPAT_SIZES) + [""]
    lines += goal_lines(results, only=LABELS["compat"]) + [""] + compat_bound_lines(results) + [""]
    lines += issue21_lines(results)
    if compat_before is not None and compat_before.get("machine", {}).get("commit") != info["commit"]:
        lines += ["## The compatible mapping through `FramingLayer`, before and after its zero-copy pass-through", ""]
        lines += compat_before_after(compat_before, results) + [""]
    for server, title in SERVERS:
        lines += [f"## Latency, {title}: median ms (ratio to unframed)", ""] + latency_table(results, server) + [""]
    lines += ["## CPU per call, µs: server / client (TCP_NODELAY rows)", ""]
    for server, title in SERVERS:
        lines += [f"{title}:", ""] + cpu_table(results, server) + [""]
    lines += ["## Bytes per call: response body (ratio to unframed) · written to the socket", ""]
    for server, title in SERVERS:
        lines += [f"{title}:", ""] + bytes_table(results, server) + [""]
    for size in tp_sizes(results):
        lines += [
            f"## Throughput: {concurrency(results)} calls in flight, {size_name(size)} results: "
            "calls/s (ratio), server CPU per call",
            "",
        ] + throughput_table(results, size) + [""]
    lines += ["## The physical cost of framing, same run", ""] + floor_lines(results) + [""]
    lines += ["## Goals", "",
              "The bound is the best ratio framing allows, from this run's floors. Latency: the unframed call plus "
              "CRC-32 + SHA-256 on both sides, one after the other or (second figure) on the two cores at once, plus "
              "base64 both ways for SSE. Throughput (every core busy, so calls per second go as 1 / CPU per call): the "
              "unframed call's server and client CPU over that plus the same floor.",
              ""] + goal_lines(results) + [""]
    if before is not None and before.get("machine", {}).get("commit") != info["commit"]:
        lines += ["## rmcp behind `FramingLayer`, an earlier commit and this run", "",
                  f"rmcp behind `FramingLayer`, median ms (ratio to unframed in the same run). Before: commit "
                  f"{before['machine']['commit']} ({before['machine'].get('date', '?')}); after: commit {info['commit']}.",
                  ""] + issue_table(before, results) + [""]
        lines += ["## Before and after, every configuration", ""] + before_after(before, results) + [""]
    lines += ["![end-to-end latency ratios and throughput](e2e.png)", ""]
    (out / "e2e.md").write_text("\n".join(lines))
    return lines


README_START = "<!-- bench-e2e:start (written by scripts/bench-report --e2e) -->"
README_END = "<!-- bench-e2e:end -->"


def update_readme(lines, results, readme):
    if not readme.exists():
        return
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        return
    info = results["machine"]
    body = [README_START,
            f"Measured on {info['cpu']}, {info['cores']} cores, commit {info['commit']}. "
            "Full report: [perf/e2e.md](perf/e2e.md).", ""]
    keep = False
    for line in lines:
        if line.startswith("## "):
            keep = line.startswith(("## The compatible SSE mapping end to end", "## Latency", "## Throughput"))
            line = "#" + line  # inside the "## End to end" section of docs/performance.md
        if line.startswith("![end-to-end"):
            break
        if keep:
            body.append(line)
    body += ["![End-to-end latency ratios and throughput](perf/e2e.png)", README_END]
    start = text.index(README_START)
    end = text.index(README_END) + len(README_END)
    readme.write_text(text[:start] + "\n".join(body) + text[end:])


def plot(results, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lat, tp = index(results["latency"]), index(results["throughput"])
    fig, axes = plt.subplots(1, 3, figsize=(16, 5), gridspec_kw={"width_ratios": [2, 2, 1.4]})
    styles = {"rmcp": "-", "plain": "--"}
    colors = {"layer-not-opted-in": "tab:gray", "sse": "tab:orange", "binary": "tab:blue", "compat": "tab:green",
              "compat-stock-client": "tab:olive"}
    xs = sizes(results)
    for ax, (nodelay, socket) in zip(axes[:2], SOCKETS):
        for server, _ in SERVERS:
            for framing, color in colors.items():
                pts = []
                for size in xs:
                    ms = value(lat.get((server, framing, size, nodelay)), "median_ms")
                    base = value(lat.get((server, "unframed", size, nodelay)), "median_ms")
                    if ms is not None and base:
                        pts.append((xs.index(size), ms / base))
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], styles[server], color=color, marker="o",
                            label=f"{server} {LABELS[framing]}")
        pts = []
        for size in xs:
            base = value(lat.get(("rmcp", "unframed", size, nodelay)), "median_ms")
            extra = bound_ms(results, size, "binary", overlap=False)
            if base and extra is not None:
                pts.append((xs.index(size), (base + extra) / base))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ":", color="black", marker="_",
                    label="bound: rmcp + CRC-32/SHA-256 on both sides")
        for framing, (small, large) in RATIO_LIMITS.items():
            if large and any(r["framing"] == framing for r in results["latency"]):
                ax.axhline(large, color=colors[framing], linestyle=":", linewidth=1)
        if any(r["framing"] == "compat" for r in results["latency"]):
            # Issue 13 §5 at 1 MiB: 0.9 of the unframed bytes per second, a latency ratio of 1/0.9.
            ax.axhline(1 / COMPAT_1MIB_THROUGHPUT, color=colors["compat"], linestyle=":", linewidth=1)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(xs)), [size_name(s) for s in xs])
        ax.set_xlabel("result size")
        ax.set_ylabel("latency / unframed (median, log)")
        ax.set_title(f"Latency ratio, {PLOT_SOCKETS[nodelay]}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    # Throughput with 32 calls in flight, as a ratio to unframed (same server, socket and size).
    ax = axes[2]
    names = [f for f in framings(results) if f != "unframed"]
    width = 0.8 / max(1, len(names))
    groups = [(s, n, z) for z in tp_sizes(results) for s, _ in SERVERS for n, _ in SOCKETS]
    for i, framing in enumerate(names):
        ys = []
        for s, n, z in groups:
            rate = value(tp.get((s, framing, z, n)), "calls_per_s")
            base = value(tp.get((s, "unframed", z, n)), "calls_per_s")
            ys.append(rate / base if rate and base else 0)
        ax.bar([j + i * width for j in range(len(groups))], ys, width, label=LABELS.get(framing, framing),
               color=colors.get(framing, "black"))
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(THROUGHPUT_LIMIT, color="black", linestyle=":", linewidth=1)
    ax.axhline(COMPAT_1MIB_THROUGHPUT, color=colors["compat"], linestyle=":", linewidth=1)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(groups))],
                  [f"{s}\n{'nodelay' if n else 'as is'}\n{size_name(z)}" for s, n, z in groups], fontsize=7)
    ax.set_ylabel("calls per second / unframed (median)")
    ax.set_title(f"Throughput ratio, {concurrency(results)} calls in flight")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    info = results["machine"]
    fig.suptitle(f"mcp-framing {info['commit']}: tools/call over loopback on {info['cpu']} ({info['cores']} cores)")
    fig.tight_layout()
    fig.savefig(out / "e2e.png", dpi=100)


def main():
    source, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    results = json.loads(source.read_text())
    if "machine" not in results:
        results["machine"] = machine()
        results["machine"]["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    (out / "e2e.json").write_text(json.dumps(results, indent=1) + "\n")
    before_path = out / "e2e-before.json"
    before = json.loads(before_path.read_text()) if before_path.exists() else None
    compat_before_path = out / "e2e-compat-before.json"
    compat_before = json.loads(compat_before_path.read_text()) if compat_before_path.exists() else None
    lines = write_markdown(results, before, out, compat_before)
    plot(results, out)
    update_readme(lines, results, pathlib.Path("docs/performance.md"))
    print(f"wrote {out / 'e2e.md'}, {out / 'e2e.png'} and {out / 'e2e.json'}")


if __name__ == "__main__":
    main()
