"""The manifest both framework suites run: builtin, shell, HTTP and MCP tools, with rules that
allow, ask and deny. The MCP server is the real `tests/mcp_servers/everything.py` over stdio;
the HTTP tool calls the real test server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

EVERYTHING = Path(__file__).resolve().parents[1] / "mcp_servers" / "everything.py"

WriteManifest = Callable[..., Path]


def _manifest(base_url: str, *, mcp: bool, extra: str) -> str:
    text = f"""\
version: 1
permissions:
  deny: ["read(**/.env*)"]
tools:
  - name: shout
    description: Echo the words back.
    command: [echo, "{{text}}"]
    parameters: {{type: object, properties: {{text: {{type: string}}}}, required: [text]}}
    read_only: true
  - name: make_file
    description: Create an empty file in the workspace.
    command: [touch, "--", "{{name}}"]
    parameters:
      type: object
      properties: {{name: {{type: string, pattern: "^[a-z]+[.]txt$"}}}}
      required: [name]
    approval: ask
  - name: nap
    description: Sleep for a while (gives up after one second).
    shell: true
    command: 'echo $$ > nap.pid; exec sleep "$1"'
    args: ["{{seconds}}"]
    parameters: {{type: object, properties: {{seconds: {{type: number}}}}, required: [seconds]}}
    timeout: 1s
  - name: long_nap
    description: Sleep for a long while.
    shell: true
    command: 'echo $$ > nap.pid; exec sleep "$1"'
    args: ["{{seconds}}"]
    parameters: {{type: object, properties: {{seconds: {{type: number}}}}, required: [seconds]}}
    timeout: 60s
    kill_grace: 0
  - name: fetch_json
    description: Fetch the JSON document.
    http: {{method: GET, url: "{base_url}/json"}}
    read_only: true
{extra}"""
    if mcp:
        servers = {
            "ev": {
                "command": sys.executable,
                "args": [str(EVERYTHING)],
                "tools": {"include": ["add", "media"]},
                "required": True,
            }
        }
        text += f"mcp_servers: {json.dumps(servers)}\n"
    return text


@pytest.fixture
def write_manifest(tmp_path: Path, http_server: Any) -> WriteManifest:
    """`write_manifest(mcp=False, extra="")` writes `tools.yaml` (plus `notes.txt` and `.env` for
    the builtin `read`) in a fresh workspace and returns its path; call it again to rewrite it.
    `extra` is YAML appended to the `tools:` list."""
    (tmp_path / "notes.txt").write_text("hello from notes\n")
    (tmp_path / ".env").write_text("TOKEN=secret\n")

    def write(*, mcp: bool = False, extra: str = "") -> Path:
        path = tmp_path / "tools.yaml"
        path.write_text(_manifest(http_server.url, mcp=mcp, extra=extra))
        return path

    return write


def wait_for_file(path: Path, seconds: float = 10.0) -> str:
    """The text of `path` once a process has written it (polled: there is no event to wait on)."""
    deadline = time.monotonic() + seconds
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} was not written in {seconds}s"
        time.sleep(0.02)
    return path.read_text().strip()


def wait_gone(pid: int, seconds: float = 10.0) -> None:
    """Until process `pid` no longer exists (reaped, or a zombie of another parent)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{pid}/stat") as stat:  # a zombie is as good as gone
            if stat.read().split(") ", 1)[1].startswith("Z"):
                return
        assert time.monotonic() < deadline, f"process {pid} still runs after {seconds}s"
        time.sleep(0.02)


MANIFEST_EXTRA_GREET = """\
  - name: greet
    description: Say hello.
    command: [echo, "hello {who}"]
    parameters: {type: object, properties: {who: {type: string}}, required: [who]}
"""
