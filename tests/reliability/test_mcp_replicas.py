"""Our MCP client against a replicated server: real replicas (`tests/mcp_servers/replica.py`,
the SDK's `MCPServer` over streamable HTTP) behind a real nginx, one of them killed with
SIGKILL while calls run.

What must hold: no call is answered wrongly; a call in flight on the dead replica fails with a
clear error that says it may have run and was not retried; calls in flight on the surviving
replica finish normally; the next call reconnects without the application doing anything; the
toolkit never raises. `status()` shows the reconnect.

Two deployments are covered, as the docs recommend them: stateless replicas behind a plain
round-robin balancer (nothing lives in a replica between requests), and handshake-era sessions
pinned to a replica (`ip_hash`), where the surviving replica does not know the session and
answers 404.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from toolnexus import Result, Toolkit, create_toolkit

from ..conftest import free_port, wait_for_port

SERVERS = Path(__file__).resolve().parents[1] / "mcp_servers"
START = 60
"""connect_timeout and start-up bound: generous, the machine may be loaded."""
BOUND = 60.0
"""Every wait on another process is bounded by this many seconds."""
DROPPED = "it was not retried because it may have run"


@dataclass
class Replicas:
    url: str
    held: Path
    ports: list[int]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str, *args: str) -> None:
        port = self.ports[int(name.removeprefix("r"))]
        proc = subprocess.Popen(
            [
                sys.executable,
                str(SERVERS / "replica.py"),
                str(port),
                name,
                "--held",
                str(self.held),
                *args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.procs[name] = proc
        wait_for_port(port, proc, START)

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=BOUND)

    def holding(self, count: int) -> list[str]:
        """The `REPLICA-TEXT` markers of held calls, once `count` of them run."""
        deadline = time.monotonic() + BOUND
        while len(found := sorted(p.name for p in self.held.iterdir())) < count:
            assert time.monotonic() < deadline, f"only {found} of {count} held calls started"
            time.sleep(0.02)  # files written by other processes: nothing to wait on
        return found

    def release(self) -> None:
        (self.held / "release").write_text("")


def _nginx_conf(root: Path, listen: int, ports: list[int], balance: str) -> str:
    servers = "".join(f"server 127.0.0.1:{port} max_fails=1 fail_timeout=60s; " for port in ports)
    return f"""
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{}}
http {{
  access_log off;
  client_body_temp_path {root}/body;
  proxy_temp_path {root}/proxy;
  upstream replicas {{ {balance} {servers} }}
  server {{
    listen 127.0.0.1:{listen};
    location / {{
      proxy_pass http://replicas;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_buffering off;
      proxy_read_timeout 300s;
    }}
  }}
}}
"""


@contextmanager
def replicated(tmp_path: Path, *args: str, balance: str = "", count: int = 2) -> Iterator[Replicas]:
    """`count` replicas started with `args`, behind nginx (`balance`: its upstream method;
    round robin when empty). nginx runs in the foreground and is stopped at the end."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    assert Path(nginx).exists(), "these tests need nginx (Debian package `nginx`)"
    held = tmp_path / "held"
    held.mkdir()
    listen = free_port()
    group = Replicas(
        url=f"http://127.0.0.1:{listen}/mcp", held=held, ports=[free_port() for _ in range(count)]
    )
    proxy = None
    try:
        for i in range(count):
            group.start(f"r{i}", *args)
        conf = tmp_path / "nginx.conf"
        conf.write_text(_nginx_conf(tmp_path, listen, group.ports, balance))
        proxy = subprocess.Popen(
            [nginx, "-p", str(tmp_path), "-c", str(conf), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(listen, proxy, START)
        yield group
    finally:
        if proxy is not None:
            proxy.send_signal(signal.SIGQUIT)  # nginx's graceful stop
            try:
                proxy.wait(timeout=BOUND)
            except subprocess.TimeoutExpired:
                proxy.kill()
                proxy.wait(timeout=BOUND)
        for name in list(group.procs):
            group.kill(name)


@contextmanager
def toolkit(url: str, tmp_path: Path) -> Iterator[Toolkit]:
    entry = {"url": url, "connect_timeout": START}
    source = {"version": 1, "mcp_servers": {"r": entry}}
    with create_toolkit(source, workspace=tmp_path) as tk:
        yield tk


class Calls:
    """Calls running in threads of their own; every result is kept, and so is any exception
    (there must be none: the toolkit never raises)."""

    def __init__(self, tk: Toolkit) -> None:
        self.tk = tk
        self.results: dict[str, Result] = {}
        self.raised: list[Exception] = []
        self.threads: list[threading.Thread] = []

    def start(self, key: str, name: str, args: dict[str, str]) -> None:
        def run() -> None:
            try:
                self.results[key] = self.tk.execute(name, args)
            except Exception as exc:  # noqa: BLE001 - recorded: the test fails on any
                self.raised.append(exc)

        thread = threading.Thread(target=run)
        self.threads.append(thread)
        thread.start()

    def load(self, stop: threading.Event, prefix: str) -> None:
        """`echo` in a loop, each call with its own text, until `stop`."""

        def run() -> None:
            i = 0
            while not stop.is_set():
                key = f"{prefix}{i}"
                try:
                    self.results[key] = self.tk.execute("echo", {"text": key})
                except Exception as exc:  # noqa: BLE001 - recorded: the test fails on any
                    self.raised.append(exc)
                i += 1

        thread = threading.Thread(target=run)
        self.threads.append(thread)
        thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=BOUND)
            assert not thread.is_alive(), "a call did not come back"
        assert not self.raised, self.raised


def assert_dropped(result: Result, url: str) -> None:
    """The clear error of a call that was in flight on a server that died."""
    assert result.is_error, result.content
    assert DROPPED in result.content and url in result.content, result.content
    assert not result.metadata.get("retryable")  # the `retry` middleware leaves it alone


def assert_answered_right(results: dict[str, Result], url: str) -> int:
    """Every `echo` answered with its own text, or failed as a dropped call; the successes."""
    ok = 0
    for key, result in results.items():
        if result.is_error:
            assert_dropped(result, url)
        else:
            assert result.content == key, (key, result.content)
            ok += 1
    return ok


def test_a_replica_killed_under_load_fails_only_its_calls_in_flight(
    no_leaks: None, tmp_path: Path
) -> None:
    with replicated(tmp_path, "--stateless") as group, toolkit(group.url, tmp_path) as tk:
        calls = Calls(tk)
        for i in range(4):  # round robin: two on each replica
            calls.start(f"h{i}", "hold", {"text": f"h{i}"})
        markers = group.holding(4)
        assert {m.split("-")[0] for m in markers} == {"r0", "r1"}, markers
        stop = threading.Event()
        load = Calls(tk)
        load.load(stop, "a")
        load.load(stop, "b")
        group.kill("r0")
        on_dead = [m.split("-")[1] for m in markers if m.startswith("r0-")]
        deadline = time.monotonic() + BOUND
        while not all(key in calls.results for key in on_dead):
            assert time.monotonic() < deadline, "the calls on the dead replica did not come back"
            time.sleep(0.02)
        for key in on_dead:
            assert_dropped(calls.results[key], group.url)
        group.release()
        calls.join()
        for marker in markers:
            if marker.startswith("r1-"):  # in flight on the survivor: finished normally
                key = marker.split("-")[1]
                assert (calls.results[key].is_error, calls.results[key].content) == (False, key)
        after = [tk.execute("echo", {"text": f"after{i}"}) for i in range(4)]
        stop.set()
        load.join()
        assert [(r.is_error, r.content) for r in after] == [(False, f"after{i}") for i in range(4)]
        assert [tk.execute("whoami").content for _ in range(2)] == ["r1", "r1"]
        assert assert_answered_right(load.results, group.url) > 0
        status = tk.status()["r"]
        assert status["state"] == "ready" and status["restarts"] >= 1, status
        assert DROPPED in (status["last_error"] or ""), status


def test_a_pinned_session_moves_to_the_surviving_replica(no_leaks: None, tmp_path: Path) -> None:
    with (
        replicated(tmp_path, "--legacy", balance="ip_hash;") as group,
        toolkit(group.url, tmp_path) as tk,
    ):
        home = tk.execute("whoami").content
        assert tk.status()["r"]["protocol_version"] == "2025-11-25"  # a session with an id
        group.kill(home)
        # The survivor answers 404 to the old session before running anything: the call is
        # sent again in a new session, once, and succeeds.
        moved = tk.execute("echo", {"text": "moved"})
        assert (moved.is_error, moved.content) == (False, "moved"), moved.content
        assert moved.metadata.get("restarted") is True
        assert tk.execute("whoami").content != home
        status = tk.status()["r"]
        assert (status["state"], status["restarts"]) == ("ready", 1), status
        assert "no longer knows this session" in (status["last_error"] or ""), status


def test_a_single_server_killed_and_started_again_is_reconnected(
    no_leaks: None, tmp_path: Path
) -> None:
    for args in (("--legacy",), ()):
        run = tmp_path / ("legacy" if args else "modern")
        run.mkdir()
        with replicated(run, *args, count=1) as group, toolkit(group.url, run) as tk:
            calls = Calls(tk)
            calls.start("h", "hold", {"text": "h"})
            group.holding(1)
            group.kill("r0")
            calls.join()
            assert_dropped(calls.results["h"], group.url)
            assert tk.status()["r"]["state"] == "crashed"
            group.start("r0", *args)
            back = tk.execute("echo", {"text": "back"})
            assert (back.is_error, back.content) == (False, "back"), back.content
            assert back.metadata.get("restarted") is True
            status = tk.status()["r"]
            assert (status["state"], status["restarts"]) == ("ready", 1), status
