"""Real `redis-server` processes on loopback ports for the server-side tests (one server; a
primary with a replica; a Redis Cluster joined with `redis-cli --cluster create`, as the Rust
crate's tests start theirs). Nothing skips: a missing `redis-server` or `redis-cli` fails with
the reason (scripts/test installs them)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from servers import free_port

#: Milliseconds without an answer after which a cluster counts a node as failed.
CLUSTER_NODE_TIMEOUT_MS = 2000


@dataclass
class RedisProcess:
    """One `redis-server` of a test, on `port`."""

    proc: subprocess.Popen[str]
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/"

    def cli(self, *args: str) -> str:
        """A `redis-cli` command's output against this server."""
        cli = shutil.which("redis-cli")
        assert cli, "redis-cli is needed (it comes with redis-server; scripts/test installs it)"
        command = [cli, "-p", str(self.port), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=30, check=True).stdout

    def info(self, section: str, field: str) -> str | None:
        """A field of `INFO section` (`CLUSTER INFO` for section `cluster`)."""
        command = ("CLUSTER", "INFO") if section == "cluster" else ("INFO", section)
        for line in self.cli(*command).splitlines():
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
        return None

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def start_redis(directory: Path, *extra: str) -> RedisProcess:
    """A redis-server of its own on a free loopback port (no persistence, its log in
    `directory`), once it answers `PING`."""
    server = shutil.which("redis-server")
    assert server, "redis-server is needed (scripts/test installs it)"
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    with open(directory / "redis.log", "w") as log:
        proc = subprocess.Popen(
            [*command, "--dir", str(directory), *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    server_process = RedisProcess(proc, port)

    def ready() -> bool:
        assert proc.poll() is None, "redis-server exited: " + (directory / "redis.log").read_text()[-2000:]
        try:
            return server_process.cli("PING").strip() == "PONG"
        except subprocess.CalledProcessError:
            return False

    until(ready, 30, f"redis-server answered on port {port}")
    return server_process


def until(check: Callable[[], bool], within: float, what: str) -> None:
    """Polls `check` (another process's state: no event to await) until it holds."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"{what} within {within} s"
        time.sleep(0.05)


@dataclass
class RedisCluster:
    """A Redis Cluster on loopback: every node a `RedisProcess`."""

    nodes: list[RedisProcess]

    @property
    def url(self) -> str:
        """A `redis+cluster://` URL naming every node as a seed (the Rust crate's form)."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes) + "/"

    def primaries(self) -> list[RedisProcess]:
        return [n for n in self.nodes if n.info("replication", "role") == "master"]

    def replicas(self) -> list[RedisProcess]:
        return [n for n in self.nodes if n.info("replication", "role") == "slave"]

    def wait_healthy(self, within: float) -> None:
        """Until every running node says the cluster is ok, all 16384 slots served, and serves
        them from running primaries only (a stopped primary's slots taken over by its replica)."""
        running = {n.port for n in self.nodes}

        def served_by_running(node: RedisProcess) -> bool:
            for line in node.cli("CLUSTER", "NODES").splitlines():
                fields = line.split()
                if len(fields) > 8 and "master" in fields[2]:  # a primary with slots
                    port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
                    if port not in running or "fail" in fields[2]:
                        return False
            return True

        until(
            lambda: all(
                n.info("cluster", "cluster_state") == "ok"
                and n.info("cluster", "cluster_slots_ok") == "16384"
                and served_by_running(n)
                for n in self.nodes
            ),
            within,
            "the cluster became healthy",
        )
