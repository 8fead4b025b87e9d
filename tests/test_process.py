"""run_process and start_process: exit codes, streams, limits, timeouts and cancellation with real
processes; killed process groups are checked through /proc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from toolnexus.process import run_process, start_process


def _alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a killed orphan waiting for init)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


async def _wait_gone(pids: list[int]) -> None:
    with anyio.fail_after(10):
        while any(_alive(p) for p in pids):
            await anyio.sleep(0.01)


async def _read_pids(path: Path) -> list[int]:
    """The pids a command wrote to `path` (two lines), once it has written them."""
    with anyio.fail_after(10):
        while True:
            lines = path.read_text().split() if path.exists() else []
            if len(lines) >= 2:
                return [int(x) for x in lines]
            await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_exit_code_stdout_and_stderr(tmp_path: Path) -> None:
    result = await run_process(
        ["sh", "-c", "echo out; echo err >&2; exit 3"], cwd=tmp_path, timeout=10, max_output=None
    )
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.timed_out
    assert not result.truncated
    assert result.mechanism == "none"
    assert not result.unconfined


@pytest.mark.anyio
async def test_merged_output_keeps_order(tmp_path: Path) -> None:
    script = "for i in 1 2 3; do echo out$i; echo err$i >&2; done"
    result = await run_process(
        ["sh", "-c", script], cwd=tmp_path, timeout=10, max_output=None, merge_stderr=True
    )
    assert result.stdout == "out1\nerr1\nout2\nerr2\nout3\nerr3\n"
    assert result.stderr == ""


@pytest.mark.anyio
async def test_stdin_is_piped_and_closed(tmp_path: Path) -> None:
    data = "".join(f"line {i}\n" for i in range(20_000)).encode()
    result = await run_process(["wc", "-l"], cwd=tmp_path, stdin=data, timeout=10, max_output=100)
    assert result.stdout.strip() == "20000"
    no_input = await run_process(["cat"], cwd=tmp_path, timeout=10, max_output=100)
    assert no_input.stdout == ""
    assert no_input.exit_code == 0


@pytest.mark.anyio
async def test_stdin_not_read_does_not_fail(tmp_path: Path) -> None:
    result = await run_process(
        ["true"], cwd=tmp_path, stdin=b"x" * 1_000_000, timeout=10, max_output=100
    )
    assert result.exit_code == 0


@pytest.mark.anyio
async def test_env_adds_to_the_inherited_environment(tmp_path: Path) -> None:
    result = await run_process(
        ["sh", "-c", 'echo "$GREETING:$PATH"'],
        cwd=tmp_path,
        env={"GREETING": "hi"},
        timeout=10,
        max_output=None,
    )
    assert result.stdout == f"hi:{os.environ['PATH']}\n"


@pytest.mark.anyio
async def test_missing_command_is_exit_127(tmp_path: Path) -> None:
    result = await run_process(
        ["no-such-command-toolnexus"], cwd=tmp_path, timeout=10, max_output=100
    )
    assert result.exit_code == 127
    assert "no-such-command-toolnexus" in result.stderr


@pytest.mark.anyio
async def test_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    result = await run_process(
        ["printf", "ok \\377\\376 done"], cwd=tmp_path, timeout=10, max_output=None
    )
    assert result.stdout == "ok \ufffd\ufffd done"


@pytest.mark.anyio
async def test_huge_output_keeps_head_and_tail(tmp_path: Path) -> None:
    script = (
        "import sys; w = sys.stdout.buffer.write; w(b'HEAD-' + 'é'.encode() * 10); "
        "[w(b'x' * 65536) for _ in range(3000)]; w(b'-TAIL\\n')"
    )
    result = await run_process(
        [sys.executable, "-c", script], cwd=tmp_path, timeout=60, max_output=1000
    )
    assert result.exit_code == 0
    assert result.truncated
    total = 5 + 20 + 3000 * 65536 + 6
    assert result.dropped_bytes == total - 1000
    head, _, tail = result.stdout.partition("\n[... ")
    assert head.startswith("HEAD-éééééééééé")
    assert tail.endswith("-TAIL\n")
    assert "bytes of output omitted ...]" in tail
    assert len(result.stdout) < 1100


def test_printing_a_lot_does_not_grow_memory(tmp_path: Path) -> None:
    """Peak RSS of a fresh interpreter that reads 300 MB of output stays within a few MB."""
    probe = """
import asyncio, json, resource, sys
from pathlib import Path
from toolnexus.process import run_process
async def main():
    await run_process(["true"], cwd=Path("."), timeout=10, max_output=30000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = await run_process(["head", "-c", "300000000", "/dev/zero"], cwd=Path("."),
                          timeout=60, max_output=30000)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"grew_kb": after - before, "dropped": r.dropped_bytes}))
asyncio.run(main())
"""
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(repo)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["dropped"] == 300_000_000 - 30_000
    assert out["grew_kb"] < 8_000


@pytest.mark.anyio
async def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! > {pids}; echo $$ >> {pids}; echo started; wait"
    result = await run_process(["sh", "-c", script], cwd=tmp_path, timeout=0.5, max_output=100)
    assert result.timed_out
    assert result.stdout == "started\n"
    assert result.exit_code < 0
    assert result.killed_signal is not None
    await _wait_gone([int(p) for p in pids.read_text().split()])


@pytest.mark.anyio
async def test_term_ignoring_process_is_killed_after_grace(tmp_path: Path) -> None:
    script = "trap '' TERM; echo ready; while :; do sleep 1; done"
    result = await run_process(
        ["sh", "-c", script], cwd=tmp_path, timeout=0.3, max_output=100, kill_grace=0.2
    )
    assert result.timed_out
    assert result.killed_signal == 9
    assert result.exit_code == -9


@pytest.mark.anyio
async def test_background_leftovers_are_killed_when_the_command_ends(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 300 > /dev/null 2>&1 & echo $! > {pids}; echo $$ >> {pids}"
    result = await run_process(["sh", "-c", script], cwd=tmp_path, timeout=10, max_output=100)
    assert result.exit_code == 0
    assert not result.timed_out
    await _wait_gone([int(p) for p in pids.read_text().split()])


@pytest.mark.anyio
async def test_cancellation_kills_the_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! > {pids}.tmp; echo $$ >> {pids}.tmp; mv {pids}.tmp {pids}; wait"
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: run_process(["sh", "-c", script], cwd=tmp_path, timeout=60, max_output=100)
        )
        started = await _read_pids(pids)
        tg.cancel_scope.cancel()
    await _wait_gone(started)


@pytest.mark.anyio
async def test_background_job_reads_new_output_and_is_killed(tmp_path: Path) -> None:
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    script = f"echo first; read line < {fifo}; echo second; sleep 300"
    job = await start_process(["sh", "-c", script], cwd=tmp_path)
    assert job.running
    with anyio.fail_after(10):
        seen = ""
        while "first" not in seen:
            seen += job.read_new()
            await anyio.sleep(0.01)
    assert seen == "first\n"
    fd = os.open(fifo, os.O_WRONLY)
    os.write(fd, b"go\n")
    os.close(fd)
    with anyio.fail_after(10):
        more = ""
        while "second" not in more:
            more += job.read_new()
            await anyio.sleep(0.01)
    assert more == "second\n"
    code = await job.kill(grace=0.5)
    assert code < 0
    assert not job.running
    assert job.returncode == code
    assert job.read_new() == ""
    await _wait_gone([job.pid])


@pytest.mark.anyio
async def test_background_job_buffer_is_bounded(tmp_path: Path) -> None:
    job = await start_process(
        ["sh", "-c", "head -c 100000 /dev/zero | tr '\\0' a; echo; echo END"],
        cwd=tmp_path,
        max_buffer=1000,
    )
    assert await job.wait(timeout=10) == 0
    text = job.read_new()
    assert text.startswith("[... ")
    assert "bytes of output lost" in text
    assert text.endswith("a\nEND\n")
    assert len(text) < 1100
