"""Servers for the client-side protocol tests: `features_server.py` over stdio (both protocol
eras) and over streamable HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conftest import free_port, wait_for_port

HERE = Path(__file__).parent
FEATURES = str(HERE / "features_server.py")


def stdio_entry(legacy: bool = True, **extra: Any) -> dict[str, Any]:
    args = [FEATURES, "--legacy"] if legacy else [FEATURES]
    # A long connect_timeout: this machine is shared, and the servers import the whole SDK.
    return {"command": sys.executable, "args": args, "connect_timeout": 60, **extra}


def manifest(**servers: dict[str, Any]) -> dict[str, Any]:
    return {"version": 1, "mcp_servers": servers}


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, FEATURES, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc, 20)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)
