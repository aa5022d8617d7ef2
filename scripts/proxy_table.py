"""The table of docs/proxies.md: what real proxies make of a dying backend, one row per proxy
and failure, condensed from the tables tests/proxies.rs writes to target/proxies/ (dying.md and
slow.md). Run it after scripts/proxy-matrix (the full matrix); it prints Markdown.

For each proxy and way of dying: what the proxy sent downstream for the cut at byte 60 000 in its
default and its SSE configuration (a raw HTTP/1.1 client, the stock clients' request), what each
stock client reported for that cut (default configuration), and the framing client's verdicts
over every cut, mapping and configuration of that proxy and way, counted by kind.
"""

from __future__ import annotations

import collections
import pathlib
import re
import sys

TARGET = pathlib.Path(__file__).resolve().parent.parent / "target" / "proxies"
REPRESENTATIVE = "at byte 60 000 (in the result)"


def rows(name: str) -> list[dict[str, str]]:
    lines = (TARGET / f"{name}.md").read_text(encoding="utf-8").splitlines()
    split = lambda line: [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
    header = split(lines[0])
    return [dict(zip(header, split(line))) for line in lines[2:] if line.startswith("|")]


def proxy_and_config(label: str) -> tuple[str, str]:
    name, _, config = label.rpartition(" (")
    return name, config.rstrip(")")


def verdict_kind(cell: str) -> str | None:
    if cell in ("–", ""):
        return None
    cell = re.sub(r", [0-9.]+ s", "", cell)
    if cell.startswith("abandoned (transport error"):
        return "abandoned (transport error)"
    if cell.startswith("abandoned"):
        return "abandoned (truncated)"
    return cell


def short(cell: str) -> str:
    cell = re.sub(r"; logs (\d+)", r", logs \1", cell)
    return cell.replace("MCPError: ", "").replace("McpError: ", "")


def main() -> int:
    dying = rows("dying")
    table = [
        (
            "| proxy | backend | downstream, default config (cut at byte 60 000) | downstream, SSE config"
            " | Python `mcp` | TypeScript SDK | rmcp | framing client, every cut, mapping and config |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    order: list[tuple[str, str]] = []
    cells: dict[tuple[str, str], dict[str, object]] = {}
    for row in dying:
        proxy, config = proxy_and_config(row["proxy"])
        key = (proxy, row["backend"])
        if key not in cells:
            order.append(key)
            cells[key] = {"verdicts": collections.Counter()}
        entry = cells[key]
        if row["cut"] == REPRESENTATIVE:
            entry[f"downstream {config}"] = row["downstream (stock request)"]
            if config == "default":
                for client in ("Python", "TypeScript", "rmcp"):
                    entry[client] = short(row[client])
        for column in ("framing sse", "framing binary", "framing compat"):
            kind = verdict_kind(row[column])
            if kind:
                entry["verdicts"][kind] += 1
    for proxy, backend in order:
        entry = cells[(proxy, backend)]
        verdicts = ", ".join(f"{kind}: {n}" for kind, n in sorted(entry["verdicts"].items()))
        table.append(
            "| "
            + " | ".join(
                [
                    proxy,
                    backend,
                    str(entry.get("downstream default", "–")),
                    str(entry.get("downstream sse", "–")),
                    str(entry.get("Python", "–")),
                    str(entry.get("TypeScript", "–")),
                    str(entry.get("rmcp", "–")),
                    verdicts,
                ]
            )
            + " |"
        )
    for row in rows("slow"):
        proxy, config = proxy_and_config(row["proxy"])
        table.append(
            f"| {proxy} ({config} config) | slow: {row['backend']} | {row['downstream (stock request)']} | – | – | – | – "
            f"| {row['framing sse']} (sse mapping, {row['seconds']} s) |"
        )
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
