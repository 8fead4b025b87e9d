"""`toolnexus doctor --url`: a running `toolnexus serve --http --watch` read from outside, as
an operator does. The manifest's folder renamed away is a lost watch, reported with exit code
1; the folder back is a recovered watch, reported with exit code 0 (real processes, real files).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from ..conftest import free_port
from ..test_serve import child_env, serving

WAIT = 60.0
MANIFEST = """
version: 1
tools:
  - name: ping
    command: [echo, pong]
"""


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolnexus", "doctor", *args],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )


def doctor_until(url: str, wanted: str) -> subprocess.CompletedProcess[str]:
    """`doctor --url` again until its report holds `wanted` (the watcher notices a change
    on its own schedule), within `WAIT` seconds."""
    deadline = time.monotonic() + WAIT
    while True:
        report = doctor("--url", url)
        if wanted in report.stdout or time.monotonic() > deadline:
            return report
        time.sleep(0.2)  # polling another process: there is no event to wait on


def test_doctor_reports_a_lost_watch_and_its_recovery(tmp_path: Path) -> None:
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "tools.yaml").write_text(MANIFEST)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = [str(folder / "tools.yaml"), "--http", f"127.0.0.1:{port}", "--watch"]
    with serving(args, cwd=tmp_path, ready="Application startup complete"):
        report = doctor_until(url, "watching the manifest's files")
        assert report.returncode == 0, report.stdout + report.stderr
        assert f"server      http://127.0.0.1:{port}/healthz: ok  generation 1" in report.stdout

        folder.rename(tmp_path / "cfg.old")  # a deployment moving the folder away
        report = doctor_until(url, "watch     lost")
        assert report.returncode == 1, report.stdout + report.stderr
        assert "1 watched file gone" in report.stdout
        assert "the watch reloads when they are back" in report.stdout

        folder.mkdir()
        (folder / "tools.yaml").write_text(MANIFEST.replace("pong", "pong again"))
        report = doctor_until(url, "watching the manifest's files")
        assert report.returncode == 0, report.stdout + report.stderr
        reloaded = re.search(r"healthz: ok  generation (\d+)", report.stdout)
        assert reloaded and int(reloaded[1]) > 1, report.stdout  # the new manifest was loaded


def test_doctor_reports_a_server_that_does_not_answer() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    report = doctor("--url", url)
    assert report.returncode == 1
    assert f"server      {url}/healthz: unreachable" in report.stdout
