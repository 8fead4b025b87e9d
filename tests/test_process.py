"""run_process and start_process: exit codes, streams, limits, timeouts and cancellation with real
processes; killed process groups are checked through /proc."""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from toolnexus.runtime import process
from toolnexus.runtime.process import run_process, start_process
from toolnexus.runtime.resident import Launchers
from toolnexus.runtime.sandbox import SandboxPolicy, detect

from .conftest import only_mechanism


@pytest.fixture(autouse=True, params=["per-call", "resident"])
def launch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Every test runs twice: with a reaper started per command (no toolkit), and forked by a
    resident launcher (what a toolkit's calls use), whose guarantees must be the same."""
    if request.param == "per-call":
        yield "per-call"
        return
    launchers = Launchers()
    var = contextvars.ContextVar("launchers", default=launchers)
    monkeypatch.setattr(process, "current_launchers", var)
    try:
        yield "resident"
    finally:
        launchers.close()


def _expected_launch(launch: str, mechanism: str = "none") -> str:
    del mechanism  # under bwrap too: a resident bwrap per exact set of binds
    return launch


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
async def test_exit_code_stdout_and_stderr(tmp_path: Path, launch: str) -> None:
    result = await run_process(
        ["sh", "-c", "echo out; echo err >&2; exit 3"], cwd=tmp_path, timeout=10, max_output=None
    )
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert result.launch == launch
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
@pytest.mark.parametrize("mechanism", ["none", "bwrap", "landlock"])
async def test_a_missing_working_folder_is_named_not_the_program(
    tmp_path: Path, mechanism: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mechanism != "none":
        only_mechanism(mechanism, monkeypatch)
    policy = None if mechanism == "none" else SandboxPolicy(filesystem="workspace-write")
    missing = tmp_path / "gone"
    result = await run_process(
        ["echo", "hi"], cwd=missing, sandbox=policy, workspace=tmp_path, timeout=10,
        max_output=100,
    )  # fmt: skip
    assert result.exit_code == 126
    assert f"its working folder {str(missing)!r} does not exist" in result.stderr
    assert "echo" in result.stderr  # what was not run, but the folder is the cause
    with pytest.raises(NotADirectoryError, match="working folder"):
        await start_process(["echo", "hi"], cwd=missing, sandbox=policy, workspace=tmp_path)


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


def test_printing_a_lot_does_not_grow_memory(tmp_path: Path, launch: str) -> None:
    """Peak RSS of a fresh interpreter that reads 300 MB of output stays within a few MB."""
    probe = """
import asyncio, json, resource, sys
from pathlib import Path
from toolnexus.runtime.process import run_process
from toolnexus.runtime.resident import Launchers, current_launchers
async def main():
    if RESIDENT:
        current_launchers.set(Launchers())
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
        [sys.executable, "-c", probe.replace("RESIDENT", str(launch == "resident"))],
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
    started: list[int] = []
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


# --- no process outlives its call -------------------------------------------------------------
# Escapees (setsid, double fork) leave the process group and, orphaned, are re-parented away
# from the toolkit: each test has the command write their pids, checks they are gone, and
# SIGKILLs any survivor so that a failure leaks nothing.


def _children(parent: int | None = None) -> list[int]:
    """The live children of `parent` (default: this process): the leaders of commands still
    running. A resident launcher is not one, but its children (forked reapers) are."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == (parent or os.getpid()) and fields[0] not in ("Z", "X"):
            if b"import resident" in cmdline:
                found += _children(int(entry.name))
            else:
                found.append(int(entry.name))
    return found


def _kill_survivors(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def _assert_gone(pids: list[int]) -> None:
    try:
        await _wait_gone(pids)
    except TimeoutError:
        alive = [p for p in pids if _alive(p)]
        _kill_survivors(alive)
        raise AssertionError(f"processes outlived their call: {alive}") from None


@pytest.fixture(params=["none", "bwrap", "landlock"])
def mechanism(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run with no sandbox, or with only this sandbox mechanism enabled (as test_sandbox.py)."""
    name: str = request.param
    if name != "none":
        only_mechanism(name, monkeypatch)
    yield name
    detect.cache_clear()


def _policy(mechanism: str) -> SandboxPolicy | None:
    return None if mechanism == "none" else SandboxPolicy(filesystem="workspace-write")


@pytest.mark.anyio
async def test_a_background_child_holding_the_pipes_does_not_hold_the_call(
    tmp_path: Path, mechanism: str, launch: str
) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! > {pids}; echo started"
    result = await run_process(
        ["sh", "-c", script], cwd=tmp_path, timeout=20, max_output=100, sandbox=_policy(mechanism)
    )
    assert result.mechanism == mechanism
    assert result.launch == _expected_launch(launch, mechanism)
    assert (result.exit_code, result.stdout, result.timed_out) == (0, "started\n", False)
    assert result.killed_signal is None
    if mechanism != "bwrap":  # bwrap's pid namespace SIGKILLs leftovers uncounted
        assert result.stopped == 1
    if mechanism != "bwrap":  # inside bwrap's namespace the pid means nothing out here
        await _assert_gone([int(pids.read_text())])


_ESCAPE = {
    "setsid": "setsid sleep 300 > /dev/null 2>&1 & echo $! > {pids}",
    "double fork": "(setsid sh -c 'echo $$ > {pids}; exec sleep 300' > /dev/null 2>&1 &)",
}


async def _escapee(pids: Path) -> list[int]:
    with anyio.fail_after(10):
        while not (pids.exists() and pids.read_text().strip()):
            await anyio.sleep(0.01)
    await anyio.sleep(0.05)  # the pid is written before the exec: let it happen
    return [int(pids.read_text())]


@pytest.mark.anyio
@pytest.mark.parametrize("how", sorted(_ESCAPE))
async def test_escapees_are_stopped_when_the_command_exits(tmp_path: Path, how: str) -> None:
    pids = tmp_path / "pids"
    script = _ESCAPE[how].format(pids=pids) + "; sleep 0.2; echo done"
    result = await run_process(["sh", "-c", script], cwd=tmp_path, timeout=20, max_output=100)
    assert (result.exit_code, result.stdout, result.timed_out) == (0, "done\n", False)
    assert result.stopped >= 1
    await _assert_gone(await _escapee(pids))


@pytest.mark.anyio
@pytest.mark.parametrize("how", sorted(_ESCAPE))
async def test_escapees_are_killed_with_a_timed_out_command(
    tmp_path: Path, how: str, mechanism: str
) -> None:
    pids = tmp_path / "pids"
    script = _ESCAPE[how].format(pids=pids) + "; echo started; sleep 300"
    result = await run_process(
        ["sh", "-c", script],
        cwd=tmp_path,
        timeout=1,
        max_output=100,
        sandbox=_policy(mechanism),
        kill_grace=0.5,
    )
    assert result.timed_out
    assert result.stdout == "started\n"
    assert result.killed_signal == signal.SIGTERM
    if mechanism != "bwrap":
        await _assert_gone(await _escapee(pids))


@pytest.mark.anyio
async def test_escapees_are_killed_when_the_call_is_cancelled(
    tmp_path: Path, mechanism: str
) -> None:
    pids = tmp_path / "pids"
    script = f"setsid sh -c 'echo $$ > {pids}.tmp; mv {pids}.tmp {pids}; exec sleep 300' & wait"
    escaped: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: run_process(
                ["sh", "-c", script],
                cwd=tmp_path,
                timeout=60,
                max_output=100,
                sandbox=_policy(mechanism),
            )
        )
        escaped = await _escapee(pids)
        tg.cancel_scope.cancel()
    if mechanism != "bwrap":
        await _assert_gone(escaped)
    await _wait_gone(_children())  # the cancelled call's leader too
    await anyio.sleep(0.05)  # and let the child watcher tell the loop it was reaped


@pytest.mark.anyio
async def test_a_background_job_takes_its_escapees_with_it(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    job = await start_process(
        ["sh", "-c", _ESCAPE["setsid"].format(pids=pids) + "; sleep 300"], cwd=tmp_path
    )
    escaped = await _escapee(pids)
    assert await job.kill(grace=0.5) == -signal.SIGTERM
    await _assert_gone([*escaped, job.pid])


@pytest.mark.anyio
async def test_a_finished_background_job_stops_what_it_left(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    job = await start_process(["sh", "-c", f"sleep 300 & echo $! > {pids}; echo hi"], cwd=tmp_path)
    assert await job.wait(timeout=20) == 0
    assert job.stopped == 1
    assert job.read_new() == "hi\n"
    await _assert_gone([int(pids.read_text())])


@pytest.mark.anyio
async def test_a_missing_background_command_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no-such-command-toolnexus"):
        await start_process(["no-such-command-toolnexus"], cwd=tmp_path)


@pytest.mark.anyio
async def test_a_command_killed_by_a_signal_reports_it(tmp_path: Path, mechanism: str) -> None:
    result = await run_process(
        ["sh", "-c", "echo before; kill -KILL $$"],
        cwd=tmp_path,
        timeout=20,
        max_output=100,
        sandbox=_policy(mechanism),
    )
    # bwrap reports a signal death the way a shell does, as 128 + N.
    expected = 128 + 9 if mechanism == "bwrap" else -9
    assert (result.exit_code, result.stdout, result.timed_out) == (expected, "before\n", False)


def test_the_tree_dies_with_the_toolkit_process(tmp_path: Path, launch: str) -> None:
    """A toolkit SIGKILLed mid-call cannot clean up: the reaper notices its parent's death
    (PR_SET_PDEATHSIG) and kills the tree, escapees included (forked by a resident launcher,
    the launcher dies with the toolkit and the reaper with it)."""
    pids = tmp_path / "pids"
    resident = launch == "resident"
    probe = f"""
import asyncio
from pathlib import Path
from toolnexus.runtime.process import run_process
from toolnexus.runtime.resident import Launchers, current_launchers
if {resident}:
    current_launchers.set(Launchers())
script = "setsid sh -c 'echo $$ > {pids}.tmp; mv {pids}.tmp {pids}; exec sleep 300' & wait"
asyncio.run(run_process(["sh", "-c", script], cwd=Path("."), timeout=60, max_output=100))
"""
    repo = Path(__file__).resolve().parents[1]
    toolkit = subprocess.Popen(
        [sys.executable, "-c", probe], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(repo)}
    )
    try:
        escaped = anyio.run(_escapee, pids)
        toolkit.kill()
        toolkit.wait()
        anyio.run(_assert_gone, escaped)
    finally:
        toolkit.kill()
        toolkit.wait()
