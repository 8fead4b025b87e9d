"""Stdio MCP servers are started before the SDK is imported, so that `import mcp` (most of a
second) overlaps the servers' own start-up. Checked by behaviour, in a fresh interpreter: when
the first `mcp` module starts importing, the server processes already exist."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import toolnexus

REPO = Path(toolnexus.__file__).resolve().parents[1]
ECHO = REPO / "benchmarks" / "fixtures" / "echo_server.py"

PROBE = """
import json, sys
from toolnexus.runtime.reaper import descendants

seen = []

class Probe:
    '''Records the live child processes when the first module of the SDK is looked up.'''

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("mcp", "mcp_types") and not seen:
            seen.append({"module": name, "children": len(descendants())})
        return None

sys.meta_path.insert(0, Probe())

from toolnexus import create_toolkit

manifest = json.loads(sys.argv[1])
with create_toolkit(manifest) as tk:
    answers = [tk.execute(name, {"text": name}).content for name in tk.names()]
print(json.dumps({"first_import": seen[0], "answers": answers}))
"""


def run_probe(manifest: dict[str, object]) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLNEXUS_")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE), json.dumps(manifest)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def server(*args: str) -> dict[str, object]:
    return {"command": sys.executable, "args": [str(ECHO), *args]}


def test_the_server_process_runs_before_the_sdk_is_imported() -> None:
    found = run_probe({"version": 1, "mcp_servers": {"one": server()}})
    assert found["answers"] == ["echo"]  # the server answered afterwards
    first = found["first_import"]
    assert isinstance(first, dict)
    assert first["children"] >= 1, f"mcp was imported before any server started: {first}"


def test_every_stdio_server_is_started_before_the_sdk_is_imported() -> None:
    manifest = {
        "version": 1,
        "mcp_servers": {"a": {**server(), "prefix": "a_"}, "b": {**server(), "prefix": "b_"}},
    }
    found = run_probe(manifest)
    assert found["answers"] == ["a_echo", "b_echo"]
    first = found["first_import"]
    assert isinstance(first, dict)
    assert first["children"] >= 2, f"not every server had started: {first}"
