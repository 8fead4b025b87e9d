"""`toolnexus serve --http` as a real process for a test module: started, waited for, reaped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from ..conftest import free_port, wait_for_port

STARTUP = 60.0
"""Seconds a server may take to start (imports, the toolkit's build) on a loaded machine."""


@contextlib.contextmanager
def serve_http(
    manifest: Path, env: dict[str, str], *args: str, cwd: Path | None = None
) -> Iterator[str]:
    """Serve `manifest` over streamable HTTP on a free port (with more `args` for `serve`), run
    from `cwd` (the manifest's folder unless given: a client's config may run it elsewhere);
    yield the endpoint's URL; stop the whole process group afterwards (SIGTERM, then SIGKILL if
    it lingers)."""
    port = free_port()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "toolnexus", "serve", str(manifest)),
            *("--http", f"127.0.0.1:{port}", *args),
        ],
        cwd=manifest.parent if cwd is None else cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_port(port, process, STARTUP)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)
