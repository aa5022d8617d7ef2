"""Fixtures shared by the server-side tests."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from servers import free_port


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A redis-server of its own on a free loopback port (no persistence)."""
    server = shutil.which("redis-server")
    assert server, "redis-server is needed (scripts/test installs it)"
    port = free_port()
    proc = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "Ready to accept connections" in line:
            break
    try:
        yield f"redis://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        proc.wait()
