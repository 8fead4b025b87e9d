"""Built-in middleware through a real executor."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolnexus import ConfigError, Executor, Registry, Result, Tool, ToolContext, ToolError
from toolnexus.middleware import (
    allow,
    audit,
    cache,
    deny,
    from_config,
    rate_limit,
    redact,
    retry,
    truncate,
)

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


def counting_tool(name: str, *, fail_times: int = 0, retryable: bool = False, **flags: Any) -> Tool:
    calls = {"n": 0}

    async def handler(args: dict[str, Any], ctx: ToolContext) -> Result:
        calls["n"] += 1
        if calls["n"] <= fail_times:
            raise ToolError(f"flaky {calls['n']}", retryable=retryable)
        return Result(content=f"{args.get('text', '')}#{calls['n']}")

    return Tool(name=name, handler=handler, parameters=SCHEMA, meta={"calls": calls}, **flags)


async def test_truncate_keeps_head_and_tail_and_says_how_much() -> None:
    async def long(args: dict[str, Any], ctx: ToolContext) -> Result:
        return Result(content="A" * 500 + "B" * 500)

    ex = Executor(Registry([Tool(name="long", handler=long)]), middleware=[truncate(200)])
    result = await ex.execute("long", {})
    assert result.content.startswith("A" * 100)
    assert result.content.endswith("B" * 100)
    assert "800 characters cut" in result.content
    assert result.metadata["truncated"] is True


async def test_retry_only_for_idempotent_tools_or_retryable_errors() -> None:
    flaky_idem = counting_tool("idem", fail_times=2, idempotent=True)
    flaky_plain = counting_tool("plain", fail_times=1)
    flaky_marked = counting_tool("marked", fail_times=1, retryable=True)
    ex = Executor(
        Registry([flaky_idem, flaky_plain, flaky_marked]),
        middleware=[retry(3, backoff=0.001)],
    )
    ok = await ex.execute("idem", {"text": "x"})
    assert ok.content == "x#3"
    assert ok.metadata["attempts"] == 3
    assert (await ex.execute("plain", {})).is_error
    assert flaky_plain.meta["calls"]["n"] == 1
    assert not (await ex.execute("marked", {})).is_error


async def test_rate_limit_makes_later_calls_wait() -> None:
    tool = counting_tool("t")
    ex = Executor(Registry([tool]), middleware=[rate_limit(2, per=0.2)])
    start = time.monotonic()
    with anyio.fail_after(5):
        for _ in range(4):
            await ex.execute("t", {})
    assert time.monotonic() - start >= 0.15
    assert tool.meta["calls"]["n"] == 4


async def test_audit_writes_json_lines_with_redacted_secrets_and_decisions(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "calls.jsonl"
    schema = {"type": "object", "properties": {"api_key": {"type": "string"}, "q": {}}}

    async def handler(args: dict[str, Any], ctx: ToolContext) -> Result:
        return Result(content="ok")

    t = Tool(name="search", handler=handler, parameters=schema)
    ex = Executor(Registry([t]), middleware=[audit(log)])
    await ex.execute("search", {"api_key": "sk-123", "q": "cats"})
    await ex.execute("search", {"q": 1})
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert lines[0]["tool"] == "search"
    assert lines[0]["args"] == {"api_key": "***", "q": "cats"}
    assert lines[0]["decision"] == "allow"
    assert lines[0]["is_error"] is False
    assert "duration_ms" in lines[0]
    assert "sk-123" not in log.read_text()


async def test_allow_and_deny_by_name_glob() -> None:
    a, b = counting_tool("git_status"), counting_tool("rm_all")
    ex = Executor(Registry([a, b]), middleware=[allow("git_*")])
    assert not (await ex.execute("git_status", {})).is_error
    assert "not enabled" in (await ex.execute("rm_all", {})).content
    ex2 = Executor(Registry([a, b]), middleware=[deny("rm_*")])
    assert (await ex2.execute("rm_all", {})).is_error
    assert b.meta["calls"]["n"] == 0


async def test_cache_serves_read_only_tools_only_and_never_errors() -> None:
    ro = counting_tool("ro", read_only=True)
    rw = counting_tool("rw")
    ex = Executor(Registry([ro, rw]), middleware=[cache(60)])
    first = await ex.execute("ro", {"text": "q"})
    second = await ex.execute("ro", {"text": "q"})
    assert first.content == second.content == "q#1"
    assert second.metadata["cached"] is True
    await ex.execute("rw", {})
    assert (await ex.execute("rw", {})).content == "#2"


async def test_redact_masks_values_in_results() -> None:
    async def leak(args: dict[str, Any], ctx: ToolContext) -> Result:
        return Result(content="token=sk-live-abc and more")

    ex = Executor(
        Registry([Tool(name="leak", handler=leak)]), middleware=[redact(values=["sk-live-abc"])]
    )
    assert (await ex.execute("leak", {})).content == "token=[REDACTED] and more"


def test_from_config_builds_builtins_and_rejects_unknown_names(tmp_path: Path) -> None:
    assert callable(from_config("timeout", 3))
    assert callable(from_config("deny", ["shell"]))
    assert callable(from_config("retry", {"attempts": 2}))
    assert callable(from_config("audit", {"path": "a.jsonl"}, base_dir=tmp_path))
    with pytest.raises(ConfigError, match="did you mean 'timeout'"):
        from_config("timeoutt", 3)
    with pytest.raises(ConfigError, match="bad options"):
        from_config("retry", {"tries": 2})


async def test_audit_to_stream() -> None:
    out = io.StringIO()
    ex = Executor(Registry([counting_tool("t")]), middleware=[audit(stream=out)])
    await ex.execute("t", {})
    assert json.loads(out.getvalue())["tool"] == "t"


async def test_timeout_lets_the_callers_own_cancellation_through() -> None:
    import asyncio

    from toolnexus.middleware import timeout

    started = asyncio.Event()

    async def slow(args: dict[str, Any], ctx: ToolContext) -> Result:
        started.set()
        await asyncio.sleep(30)
        return Result(content="late")

    ex = Executor(Registry([Tool(name="slow", handler=slow)]), middleware=[timeout(10)])
    with anyio.fail_after(5):
        task = asyncio.ensure_future(ex.execute("slow", {}))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_a_misspelt_middleware_option_is_named_with_its_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no option 'per_caler'; did you mean 'per_caller'"):
        from_config("rate_limit", {"calls": 3, "per_caler": True})
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(
        "version: 1\nmiddleware:\n  - rate_limit:\n"
        "      calls: 3\n      per_caler: true\ntools: []\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "toolnexus", "validate", str(manifest)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode != 0
    assert f"{manifest}:5:" in run.stderr + run.stdout
    assert "middleware[0].rate_limit.per_caler" in run.stderr + run.stdout
    assert "did you mean 'per_caller'" in run.stderr + run.stdout
