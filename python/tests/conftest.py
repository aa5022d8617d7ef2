"""Fixtures shared by the server-side tests: real `redis-server` processes (`redis_servers`)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from redis_servers import CLUSTER_NODE_TIMEOUT_MS, RedisCluster, RedisProcess, start_redis, until
from servers import free_port


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A redis-server of its own on a free loopback port (no persistence)."""
    server = start_redis(tmp_path)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_replicated(tmp_path: Path) -> Iterator[tuple[RedisProcess, RedisProcess]]:
    """A primary and one replica of it, the replica's link up."""
    primary = start_redis(tmp_path / "primary")
    replica = start_redis(tmp_path / "replica", "--replicaof", "127.0.0.1", str(primary.port))
    try:
        until(lambda: replica.info("replication", "master_link_status") == "up", 30, "the replica came online")
        yield primary, replica
    finally:
        replica.stop()
        primary.stop()


@pytest.fixture
def redis_cluster(tmp_path: Path) -> Iterator[RedisCluster]:
    """Three primaries with one replica each, every slot served and every replica online."""
    nodes: list[RedisProcess] = []
    try:
        for i in range(6):
            extra = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            extra += ["--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS)]
            extra += ["--cluster-port", str(free_port())]
            nodes.append(start_redis(tmp_path / f"node{i}", *extra))
        cli = shutil.which("redis-cli")
        assert cli, "redis-cli is needed (it comes with redis-server; scripts/test installs it)"
        create = [cli, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in nodes)]
        subprocess.run(
            [*create, "--cluster-replicas", "1", "--cluster-yes"], capture_output=True, timeout=120, check=True
        )
        cluster = RedisCluster(nodes)
        until(
            lambda: all(
                n.info("cluster", "cluster_state") == "ok" and n.info("cluster", "cluster_slots_ok") == "16384"
                for n in nodes
            ),
            60,
            "the cluster became healthy",
        )
        until(
            lambda: all(
                n.info("replication", "connected_slaves") == "1"
                if n.info("replication", "role") == "master"
                else n.info("replication", "master_link_status") == "up"
                for n in nodes
            ),
            60,
            "every replica came online",
        )
        yield cluster
    finally:
        for node in nodes:
            node.stop()
