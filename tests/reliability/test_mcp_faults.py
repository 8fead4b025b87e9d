"""MCP faults as a production agent meets them, over stdio and streamable HTTP.

Each case builds a real toolkit around a real misbehaving server (`tests/mcp_servers/faults.py`,
`hang.py`, `bad_tools.py`), then checks three things: the result the model sees, that the
toolkit keeps serving (a tool outside the server answers; the server itself answers again after
its restart, where it should), and that no fd, thread or child process is left (`no_leaks`).
Waits are bounded generously; how fast things happen goes to `benchmarks/`, not here.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from toolnexus import Result, Toolkit, create_toolkit, tool

from ..conftest import free_port, wait_for_port
from .conftest import SOAK

SERVERS = Path(__file__).resolve().parents[1] / "mcp_servers"
START = 60
"""connect_timeout for servers that should start: generous, the machine may be loaded."""


@tool(read_only=True)
def ping() -> str:
    """Answer pong: a tool outside every MCP server."""
    return "pong"


def stdio(script: str, *args: str, **keys: Any) -> dict[str, Any]:
    entry = {"command": sys.executable, "args": [str(SERVERS / script), *args]}
    return {"prefix": "f_", "connect_timeout": START, **entry, **keys}


@contextmanager
def toolkit(servers: dict[str, Any], **manifest: Any) -> Iterator[Toolkit]:
    source = {"version": 1, "mcp_servers": servers, **manifest}
    with create_toolkit(source, extra_tools=[ping], workspace=SERVERS) as tk:
        yield tk


def serving(tk: Toolkit, *, echo: str | None = "f_echo") -> Result | None:
    """The toolkit still answers: `ping` always, and the server's `echo` when named."""
    assert tk.execute("ping").content == "pong"
    if echo is None:
        return None
    result = tk.execute(echo, {"text": "still here"})
    assert (result.is_error, result.content) == (False, "still here"), result.content
    return result


def state(tk: Toolkit, server: str = "f") -> dict[str, Any]:
    return tk.status()[server]


@contextmanager
def http_server(
    *args: str, port: int | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """faults.py over streamable HTTP in its own process; yields its URL and the process."""
    port = port or free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVERS / "faults.py"), "--http", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc, START)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.kill()  # uvicorn's graceful stop would wait for a request held by "hang"
        proc.wait(timeout=30)


def http(url: str, **keys: Any) -> dict[str, Any]:
    return {"url": url, "prefix": "f_", "connect_timeout": START, **keys}


def wait_for_retry(tk: Toolkit, server: str = "f") -> None:
    """Until the server's restart backoff has passed (bounded)."""
    deadline = time.monotonic() + 30
    while (state(tk, server).get("retry_in") or 0) > 0 and time.monotonic() < deadline:
        time.sleep(0.05)


# -- stdio ----------------------------------------------------------------------------------------


def test_stdio_server_that_never_answers_the_handshake(no_leaks: None) -> None:
    with toolkit({"f": stdio("hang.py", connect_timeout=1)}) as tk:
        status = state(tk)
        assert status["state"] == "failed"
        assert "no answer to the MCP handshake within 1 s" in status["reason"]
        assert "f_echo" not in tk.names()
        serving(tk, echo=None)


def test_stdio_call_that_never_answers(no_leaks: None) -> None:
    with toolkit({"f": stdio("faults.py", timeout=1)}) as tk:
        result = tk.execute("f_hang")
        assert result.is_error and "timed out after 1 s" in result.content
        assert result.metadata["error_type"] == "ToolTimeout"
        serving(tk)
        assert state(tk)["state"] == "ready"


def test_stdio_server_that_exits_mid_call(no_leaks: None) -> None:
    with toolkit({"f": stdio("faults.py")}) as tk:
        result = tk.execute("f_exit_now")
        assert result.is_error and "closed the connection during 'exit_now'" in result.content
        status = state(tk)
        assert status["state"] == "crashed"  # live: not the "ready" of build time
        assert "restarted on the next call" in status["reason"]
        again = serving(tk)
        assert again is not None and again.metadata.get("restarted") is True
        assert (state(tk)["state"], state(tk)["restarts"]) == ("ready", 1)


def test_stdio_server_that_writes_garbage_mid_call(no_leaks: None) -> None:
    with toolkit({"f": stdio("faults.py", timeout=120)}) as tk:
        result = tk.execute("f_garbage")
        assert result.is_error and result.metadata["error_type"] != "ToolTimeout"
        assert "broke the MCP protocol during 'garbage'" in result.content
        assert "not JSON-RPC: 'this is not JSON-RPC'" in result.content
        assert state(tk)["state"] == "crashed"
        assert "not JSON-RPC" in state(tk)["last_error"]
        again = serving(tk)
        assert again is not None and again.metadata.get("restarted") is True


def test_stdio_invalid_utf8_byte_does_not_jam_the_server(no_leaks: None) -> None:
    with toolkit({"f": stdio("faults.py", timeout=120)}) as tk:
        assert tk.execute("f_bad_utf8").content == "after the bad byte"
        serving(tk)
        assert (state(tk)["state"], state(tk)["restarts"]) == ("ready", 0)


def test_stdio_garbage_before_the_handshake_is_reported_as_garbage(no_leaks: None) -> None:
    with toolkit({"f": stdio("faults.py", "--start-with", r"b'\xff garbage\n'")}) as tk:
        status = state(tk)
        assert status["state"] == "failed"
        assert "broke the MCP protocol on stdout" in status["reason"]
        assert "handshake" not in status["reason"]
        serving(tk, echo=None)


def test_stdio_server_that_closes_stdout_and_keeps_running(no_leaks: None) -> None:
    with toolkit({"f": stdio("faults.py", timeout=120)}) as tk:
        result = tk.execute("f_close_stdout")
        assert result.is_error and result.metadata["error_type"] != "ToolTimeout"
        assert "closed the connection during 'close_stdout'" in result.content
        assert state(tk)["state"] == "crashed"
        again = serving(tk)
        assert again is not None and again.metadata.get("restarted") is True


def test_stdio_answers_are_bounded(no_leaks: None) -> None:
    servers = {"f": stdio("faults.py", max_message=300_000)}
    with toolkit(servers, defaults={"max_output": 1000}) as tk:
        long = tk.execute("f_big", {"size": 100_000})
        assert not long.is_error and long.metadata["truncated"] is True
        assert len(long.content) < 1100 and "characters cut" in long.content
        refused = tk.execute("f_big", {"size": 400_000})
        assert refused.is_error and "larger than its max_message limit" in refused.content
        serving(tk)
        assert state(tk)["restarts"] == 0


def test_stdio_answer_of_megabytes_arrives_bounded(no_leaks: None) -> None:
    with toolkit({"f": stdio("faults.py")}) as tk:
        # 2 MB of text, twice on the wire: parsed off the event loop, cut to max_output.
        long = tk.execute("f_big", {"size": 2_000_000})
        assert not long.is_error and long.metadata["truncated"] is True
        assert len(long.content) < 30_100
        serving(tk)


def test_stdio_malformed_tools_are_skipped_and_reported(no_leaks: None) -> None:
    with toolkit({"b": stdio("bad_tools.py", prefix="")}) as tk:
        assert {"good_a", "good_b"} <= set(tk.names())
        assert tk.execute("good_a", {"x": 1}).content == "good_a got 1"
        status = state(tk, "b")
        assert status["state"] == "ready" and status["tool_count"] == 3
        skipped = {s["tool"]: s["reason"] for s in status["skipped"]}
        assert sorted(skipped) == [
            "#8",
            "bad\x07name",
            "bad_schema",
            "good_a",
            "no_schema",
            "not_object",
        ]
        serving(tk, echo=None)


# -- streamable HTTP ------------------------------------------------------------------------------


def test_http_server_that_never_answers_the_handshake(no_leaks: None, tmp_path: Path) -> None:
    gate = tmp_path / "status"
    gate.write_text("hang")
    with (
        http_server("--status-file", str(gate)) as (url, _),
        toolkit({"f": http(url, connect_timeout=2)}) as tk,
    ):
        status = state(tk)
        assert status["state"] == "failed"
        assert "no answer to the MCP handshake within 2 s" in status["reason"]
        serving(tk, echo=None)


def test_http_call_that_never_answers(no_leaks: None) -> None:
    with http_server() as (url, _), toolkit({"f": http(url, timeout=1)}) as tk:
        result = tk.execute("f_hang")
        assert result.is_error and result.metadata["error_type"] == "ToolTimeout"
        serving(tk)


def test_http_server_that_drops_the_connection_then_comes_back(no_leaks: None) -> None:
    port = free_port()
    with http_server(port=port) as (url, proc), toolkit({"f": http(url)}) as tk:
        dropped = tk.execute("f_exit_now")
        assert dropped.is_error and "dropped the connection during 'exit_now'" in dropped.content
        assert "it was not retried because it may have run" in dropped.content
        assert state(tk)["state"] == "crashed"
        proc.wait(timeout=30)
        down = tk.execute("f_echo", {"text": "x"})
        assert down.is_error and "cannot reach" in down.content
        assert state(tk)["state"] == "failed" and "cannot reach" in state(tk)["reason"]
        serving(tk, echo=None)
        with http_server(port=port):
            wait_for_retry(tk)
            back = serving(tk)
            assert back is not None and back.metadata.get("restarted") is True
            assert state(tk)["state"] == "ready"


def test_http_server_that_restarts_and_forgets_the_session(no_leaks: None) -> None:
    port = free_port()
    with http_server("--legacy", port=port) as (url, proc), toolkit({"f": http(url)}) as tk:
        serving(tk)
        assert state(tk)["protocol_version"] == "2025-11-25"  # a session with an id
        proc.kill()
        proc.wait(timeout=30)
        with http_server("--legacy", port=port):
            # The new process answers 404 to the old session before running anything, so the
            # call is sent once more in a new session: it succeeds, and says it reconnected.
            back = serving(tk)
            assert back is not None and back.metadata.get("restarted") is True
            assert (state(tk)["state"], state(tk)["restarts"]) == ("ready", 1)
            assert "no longer knows this session" in state(tk)["last_error"]


@pytest.mark.parametrize(
    ("headers", "path", "words"),
    [
        ({}, "/mcp", ["HTTP 401", "no token was sent", 'Authorization: "Bearer ${TOKEN}"']),
        ({"Authorization": "Bearer wrong"}, "/mcp", ["HTTP 403", "token was refused"]),
        ({"Authorization": "Bearer sekrit"}, "/nope", ["HTTP 404", "URL is likely wrong"]),
    ],
)
def test_http_error_statuses_at_connect_are_named(
    no_leaks: None, headers: dict[str, str], path: str, words: list[str]
) -> None:
    with http_server("--token", "sekrit") as (url, _):
        entry = http(url.removesuffix("/mcp") + path, headers=headers)
        with toolkit({"f": entry}) as tk:
            reason = state(tk)["reason"]
            assert state(tk)["state"] == "failed"
            for word in words:
                assert word in reason
            assert "Server returned an error response" not in reason
            serving(tk, echo=None)


def test_http_error_statuses_mid_session_are_named(no_leaks: None, tmp_path: Path) -> None:
    gate = tmp_path / "status"
    with http_server("--status-file", str(gate)) as (url, _), toolkit({"f": http(url)}) as tk:
        serving(tk)
        statuses = (("500", "HTTP 500 Internal Server Error"), ("401", "no token was sent"))
        for code, words in statuses:
            gate.write_text(code)
            failed = tk.execute("f_echo", {"text": "x"})
            assert failed.is_error and words in failed.content, failed.content
        gate.unlink()
        serving(tk)


@pytest.mark.parametrize("mode", ["sse", "json"])
def test_http_answers_are_bounded(no_leaks: None, mode: str) -> None:
    args = ("--json-response",) if mode == "json" else ()
    with http_server(*args) as (url, _):
        servers = {"f": http(url, max_message=300_000, max_output=1000)}
        with toolkit(servers) as tk:
            long = tk.execute("f_big", {"size": 100_000})
            assert not long.is_error and long.metadata["truncated"] is True
            refused = tk.execute("f_big", {"size": 400_000})
            assert refused.is_error and "larger than its max_message limit" in refused.content
            serving(tk)


# -- soak (opt-in: TOOLNEXUS_SOAK=1) --------------------------------------------------------------


@pytest.mark.skipif(not SOAK, reason="soak variant: set TOOLNEXUS_SOAK=1 to run it")
def test_soak_stdio_server_crashing_again_and_again(no_leaks: None) -> None:
    faults = ("f_exit_now", "f_garbage", "f_close_stdout", "f_bad_utf8")
    with toolkit({"f": stdio("faults.py", timeout=120)}) as tk:
        for round_ in range(25):
            fault = faults[round_ % len(faults)]
            result = tk.execute(fault)
            assert result.is_error == (fault != "f_bad_utf8"), result.content
            wait_for_retry(tk)
            serving(tk)
        assert state(tk)["restarts"] >= 18
