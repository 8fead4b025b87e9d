"""Resident launchers through a real toolkit: one per toolkit and policy, started on first use,
started again when found dead (the call retries), closed with the toolkit."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from toolnexus import create_toolkit
from toolnexus.runtime import resident
from toolnexus.runtime.process import run_process, start_process
from toolnexus.runtime.resident import Launchers, current_launchers
from toolnexus.runtime.sandbox import SandboxPolicy, detect

from .conftest import only_mechanism
from .test_process import _assert_gone

_MANIFEST = """
version: 1
tools:
  - name: plain
    command: ["sh", "-c", "echo plain"]
  - name: confined
    command: ["sh", "-c", "echo confined"]
    sandbox: {filesystem: read-only, network: false}
"""


def _residents() -> list[int]:
    """The resident launchers this process started (children running `reaper.resident`)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"import resident" in cmdline:
            found.append(int(entry.name))
    return sorted(found)


def _wait_dead(pid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.005)
    raise AssertionError(f"process {pid} still alive 10 s after SIGKILL")


@pytest.fixture(params=["bwrap", "landlock"])
def mechanism(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    only_mechanism(request.param, monkeypatch)
    yield request.param
    detect.cache_clear()


def test_calls_fork_from_one_launcher_per_policy_closed_with_the_toolkit(
    tmp_path: Path, mechanism: str
) -> None:
    before = _residents()
    with create_toolkit(_MANIFEST, workspace=tmp_path) as tk:
        plain = tk.execute("plain", {})
        assert (plain.content.strip(), plain.metadata["launch"]) == ("plain", "resident")
        assert len(_residents()) == len(before) + 1
        tk.execute("plain", {})
        assert len(_residents()) == len(before) + 1  # the same launcher again
        confined = tk.execute("confined", {})
        assert confined.metadata["mechanism"] == mechanism
        # Another policy, another launcher (under bwrap, another resident bwrap).
        assert confined.metadata["launch"] == "resident"
        assert len(_residents()) == len(before) + 2
        with create_toolkit(_MANIFEST, workspace=tmp_path) as other:
            other.execute("plain", {})  # another toolkit, another launcher
            assert len(_residents()) == len(before) + 3
    assert _residents() == before


def test_a_dead_launcher_is_started_again_by_the_call_that_finds_it(tmp_path: Path) -> None:
    with create_toolkit(_MANIFEST, workspace=tmp_path) as tk:
        before = _residents()
        tk.execute("plain", {})
        (first,) = set(_residents()) - set(before)
        os.kill(first, signal.SIGKILL)
        # `kill` returns before the launcher has died: a call made in that moment reaches a
        # live spare that dies with it mid-call (a dying launcher, not the dead one this is
        # about), so wait until it is dead (a zombie, reaped by the call that finds it).
        _wait_dead(first)
        result = tk.execute("plain", {})
        assert (result.content.strip(), result.is_error) == ("plain", False)
        assert result.metadata["launch"] == "resident"
        (second,) = set(_residents()) - set(before)
        assert second != first


def test_a_launcher_outlives_the_loop_and_the_thread_that_asked_for_it(tmp_path: Path) -> None:
    """A launcher's parent-death signal follows the *thread* that started it: started from a
    loop's executor thread, it died with every command it ran when `asyncio.run` shut that
    executor down. It is started on a thread that lives as long as the process."""
    launchers = Launchers()

    async def call() -> str:
        token = current_launchers.set(launchers)
        try:
            done = await run_process(["true"], cwd=tmp_path, timeout=20, max_output=100)
        finally:
            current_launchers.reset(token)
        return done.launch

    before = set(_residents())
    try:
        assert asyncio.run(call()) == "resident"
        (launcher,) = set(_residents()) - before
        time.sleep(0.3)  # a parent-death signal lands at once: leave it time to have landed
        assert set(_residents()) - before == {launcher}
        assert asyncio.run(call()) == "resident"
        assert set(_residents()) - before == {launcher}  # the same one, not a restarted one
    finally:
        launchers.close()


@pytest.mark.anyio
async def test_closing_the_launchers_stops_a_background_job_they_forked(tmp_path: Path) -> None:
    launchers = Launchers()
    token = current_launchers.set(launchers)
    try:
        job = await start_process(["sh", "-c", "echo up; sleep 300"], cwd=tmp_path)
        assert job.launch == "resident"
        with anyio.fail_after(10):
            while "up" not in job.read_new():
                await anyio.sleep(0.01)
        launchers.close()  # its forks' parent-death signal ends them
        with anyio.fail_after(10):
            await job.wait()
        assert not job.running
        # Closed launchers run nothing more: the per-call way takes over.
        done = await run_process(["true"], cwd=tmp_path, timeout=10, max_output=100)
        assert (done.exit_code, done.launch) == (0, "per-call")
    finally:
        current_launchers.reset(token)
        launchers.close()


@pytest.mark.anyio
async def test_policies_never_share_a_launcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    only_mechanism("landlock", monkeypatch)
    launchers = Launchers()
    token = current_launchers.set(launchers)
    try:
        readable = SandboxPolicy(filesystem="read-only", network=False)
        writable = SandboxPolicy(filesystem="workspace-write", network=False)
        target = tmp_path / "made"
        script = f"touch {target} 2>/dev/null; echo $?"
        denied = await run_process(
            ["sh", "-c", script], cwd=tmp_path, timeout=10, max_output=100, sandbox=readable
        )
        allowed = await run_process(
            ["sh", "-c", script], cwd=tmp_path, timeout=10, max_output=100, sandbox=writable
        )
        assert (denied.stdout, allowed.stdout) == ("1\n", "0\n")
        assert (denied.launch, allowed.launch) == ("resident", "resident")
        assert launchers.running == 2
    finally:
        current_launchers.reset(token)
        launchers.close()
        detect.cache_clear()


def test_a_launcher_starts_on_first_use_only(tmp_path: Path) -> None:
    before = _residents()
    with create_toolkit(_MANIFEST, workspace=tmp_path) as tk:
        assert tk.tools()
        assert _residents() == before


@pytest.fixture
def bwrap_launchers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Launchers]:
    only_mechanism("bwrap", monkeypatch)
    launchers = Launchers()
    token = current_launchers.set(launchers)
    try:
        yield launchers
    finally:
        current_launchers.reset(token)
        launchers.close()
        detect.cache_clear()


@pytest.mark.anyio
@pytest.mark.parametrize("network", [False, True])
async def test_under_bwrap_each_command_has_its_own_tmp_dev_and_processes(
    tmp_path: Path, bwrap_launchers: Launchers, network: bool
) -> None:
    """A resident bwrap is shared by the calls of one policy; what bwrap gave each command
    (a /tmp and /dev of its own, a pid namespace, no capabilities) is still per command."""
    policy = SandboxPolicy(network=network)
    job = await start_process(["sh", "-c", "echo up; exec sleep 300"], cwd=tmp_path, sandbox=policy)
    try:
        with anyio.fail_after(10):
            while "up" not in job.read_new():
                await anyio.sleep(0.01)
        write = "echo x > /tmp/left; echo y > /dev/shm/left; echo done"
        first = await run_process(
            ["sh", "-c", write], cwd=tmp_path, timeout=10, max_output=1000, sandbox=policy
        )
        look = (
            "ls /tmp/left /dev/shm/left 2>&1 | grep -c 'No such'; "
            "cat /proc/[0-9]*/comm | sort -u | tr '\\n' ' '; echo; grep CapEff /proc/self/status"
        )
        second = await run_process(
            ["sh", "-c", look], cwd=tmp_path, timeout=10, max_output=1000, sandbox=policy
        )
    finally:
        await job.kill()
    assert (job.launch, first.launch, second.launch) == ("resident",) * 3
    assert (first.exit_code, first.stdout) == (0, "done\n")
    assert bwrap_launchers.running == 1  # one resident bwrap served all three
    gone, processes, caps = second.stdout.splitlines()
    assert gone == "2"  # the files the first command left are not there for the second
    assert "sleep" not in processes.split()  # nor the job that runs beside it
    assert caps.split()[1] == "0000000000000000"


@pytest.mark.anyio
async def test_under_bwrap_a_new_denied_file_gets_a_new_resident_that_hides_it(
    tmp_path: Path, bwrap_launchers: Launchers
) -> None:
    secret = tmp_path / "secret"
    policy = SandboxPolicy(deny_read=(str(secret),), network=False)
    cat = ["sh", "-c", f"cat {secret} 2>/dev/null || echo refused"]
    before = await run_process(cat, cwd=tmp_path, timeout=10, max_output=1000, sandbox=policy)
    assert (before.stdout, before.launch) == ("refused\n", "resident")
    secret.write_text("token\n")
    after = await run_process(cat, cwd=tmp_path, timeout=10, max_output=1000, sandbox=policy)
    assert (after.stdout, after.launch) == ("refused\n", "resident")
    assert bwrap_launchers.running == 2  # the binds changed: the first resident was not used


@pytest.mark.anyio
@pytest.mark.parametrize("mechanism", ["none", "bwrap", "landlock"])
async def test_starting_a_launcher_does_not_hold_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    """The first call of a policy starts its launcher; other tasks on the loop go on meanwhile
    (a start-up made half a second long here, so that a blocked loop could not tick at all)."""
    if mechanism != "none":
        only_mechanism(mechanism, monkeypatch)
    monkeypatch.setattr(resident, "_BOOT", "import time; time.sleep(0.5); " + resident._BOOT)
    launchers = Launchers()
    token = current_launchers.set(launchers)
    ticks = 0
    result = None

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(ticker)
            await anyio.sleep(0)
            policy = None if mechanism == "none" else SandboxPolicy(network=False)
            result = await run_process(
                ["true"], cwd=tmp_path, timeout=20, max_output=100, sandbox=policy
            )
            tasks.cancel_scope.cancel()
        assert result is not None
        assert (result.exit_code, result.launch) == (0, "resident")
        assert ticks >= 10  # some 50 ticks fit in the start-up; a blocked loop makes none
    finally:
        current_launchers.reset(token)
        launchers.close()
        detect.cache_clear()


_STALE = """
import os, sys
from toolnexus.runtime import launcher as lx
folder = sys.argv[1]
abi = lx.landlock_abi()
config = {"abi": abi, "fs": lx.handled_fs(abi), "unix": {"allow": [], "private": None},
          "rules": [["/", lx.read_rights(abi) | lx.EXECUTE],
                    [folder, lx.read_rights(abi) | lx.write_rights(abi)]]}
prepared = lx.Supervised(config)
print(prepared.current(), flush=True)
os.rename(folder, folder + ".old")
os.mkdir(folder)
print(prepared.current(), flush=True)
child = os.fork()
if child == 0:  # confined now, it may write to the new folder
    os._exit(lx.Supervised(config).run(["sh", "-c", f"echo x > {folder}/new"], dict(os.environ)))
print(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]), flush=True)
sys.exit(prepared.run(["sh", "-c", f"echo x > {folder}/made"], dict(os.environ)))
"""


def test_a_command_confined_in_advance_knows_when_its_folders_were_swapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resident launcher's fork confines the next command's process before its request
    comes, and Landlock grants rights on the inode a path named then: once a deployment swaps
    a folder the rules name, that process is stale (it refuses writes to the new folder), and
    `current()` says so, so that the request runs the usual way (`reaper._await_command`)."""
    only_mechanism("landlock", monkeypatch)
    folder = tmp_path / "ws"
    folder.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _STALE, str(folder)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.stdout.split() == ["True", "False", "0"], done.stderr
    assert (folder / "new").exists()
    assert done.returncode != 0  # the stale process was refused the new folder
    assert not (folder / "made").exists()


_LOOKUP = """
import os, sys
from toolnexus.runtime import launcher as lx
how, search = sys.argv[1], sys.argv[2]
try:
    if how == "ours":
        lx.execvpe(["tool"], {"PATH": search})
    else:
        os.execvpe("tool", ["tool"], {"PATH": search})
except OSError as exc:
    print(type(exc).__name__, os.fsdecode(exc.filename))
"""


def _lookup_tree(root: Path) -> dict[str, str]:
    """Folders for PATH lookups: the same `tool` found missing, not executable, executable."""
    (root / "noexec").mkdir()
    (root / "noexec" / "tool").write_text("#!/bin/sh\necho noexec\n")
    for name in ("good", "later"):
        (root / name).mkdir()
        (root / name / "tool").write_text(f"#!/bin/sh\necho {name}\n")
        (root / name / "tool").chmod(0o755)
    (root / "afile").write_text("")
    return {name: str(root / name) for name in ("noexec", "good", "later", "afile", "missing")}


@pytest.mark.parametrize(
    "order",
    [
        ["missing", "afile", "noexec", "good", "later"],
        ["later", "good"],
        ["noexec", "missing"],
        ["missing", "afile"],
        [""],
    ],
)
def test_the_launchers_path_lookup_is_os_execvpe(tmp_path: Path, order: list[str]) -> None:
    """`launcher.execvpe` (which spares each launch the import `os.execvpe` makes) finds the
    same program, or fails with the same error, as `os.execvpe` on every kind of PATH entry:
    missing, not a folder, not executable, empty (the current folder)."""
    where = _lookup_tree(tmp_path)
    search = os.pathsep.join(where.get(name, name) for name in order)
    outcomes = [
        subprocess.run(
            [sys.executable, "-c", _LOOKUP, how, search],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            cwd=where["good"],
        ).stdout
        for how in ("ours", "os")
    ]
    assert outcomes[0] == outcomes[1]
    assert outcomes[0].strip()


@pytest.mark.anyio
@pytest.mark.parametrize("mechanism", ["none", "bwrap", "landlock"])
async def test_a_resident_launch_looks_the_command_up_on_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    """Through a resident launcher, a command is looked up on the PATH it was given: folders
    without it or where it is not executable are passed over; found nowhere it is exit 127,
    found only unrunnable it is 126."""
    if mechanism != "none":
        only_mechanism(mechanism, monkeypatch)
    where = _lookup_tree(tmp_path)
    policy = None if mechanism == "none" else SandboxPolicy(network=False)
    launchers = Launchers()
    token = current_launchers.set(launchers)
    try:
        got = []
        for order in (["missing", "afile", "noexec", "good"], ["missing"], ["noexec"]):
            search = os.pathsep.join([where[name] for name in order] + ["/usr/bin", "/bin"])
            done = await run_process(
                ["tool"], cwd=tmp_path, env={"PATH": search}, timeout=20, max_output=1000,
                sandbox=policy,
            )  # fmt: skip
            assert done.launch == "resident"
            got.append((done.exit_code, done.stdout.strip()))
        assert got[0] == (0, "good")
        assert got[1][0] == 127
        assert got[2][0] == 126
    finally:
        current_launchers.reset(token)
        launchers.close()
        detect.cache_clear()


@pytest.mark.anyio
async def test_a_command_confined_in_advance_ends_its_call_with_its_own_status(
    tmp_path: Path, mechanism: str
) -> None:
    """A command whose process was confined in advance (read-only, network off: a supervisor
    and no per-call folders) has its status told to its reaper before the supervisor exits:
    the call reports the command's code, a death by signal as every launch reports it, and
    a background child it left is still stopped (and, outside bwrap, counted and gone)."""
    policy = SandboxPolicy(filesystem="read-only", network=False)
    launchers = Launchers()
    token = current_launchers.set(launchers)

    async def run(script: str) -> tuple[int, str, int]:
        done = await run_process(
            ["sh", "-c", script], cwd=tmp_path, timeout=20, max_output=1000, sandbox=policy
        )
        assert (done.mechanism, done.launch) == (mechanism, "resident")
        return done.exit_code, done.stdout, done.stopped

    try:
        for _ in range(3):  # the first call confines at the request; later ones in advance
            assert await run("echo hi; exit 3") == (3, "hi\n", 0)
        code, out, _ = await run("echo before; kill -KILL $$")
        assert (code, out) == (128 + 9 if mechanism == "bwrap" else -9, "before\n")
        code, out, stopped = await run("sleep 300 & echo $!")
        assert code == 0
        if mechanism == "landlock":  # under bwrap the pid means nothing out here
            assert stopped == 1
            await _assert_gone([int(out)])
    finally:
        current_launchers.reset(token)
        launchers.close()
