"""shell, shell_output and shell_kill with real bash processes in tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from builtin.shell import shell_tools
from toolnexus import (
    ConfigError,
    Decision,
    Result,
    SandboxPolicy,
    Tool,
    ToolContext,
    ToolError,
    acreate_toolkit,
)

pytestmark = pytest.mark.anyio


class Kit:
    """The three tools sharing one toolkit state, as a toolkit would run them."""

    def __init__(self, workspace: Path, **options: Any) -> None:
        self.tools = {t.name: t for t in shell_tools(options)}
        self.workspace = workspace
        self.state: dict[str, Any] = {}

    async def call(self, name: str, sandbox: SandboxPolicy | None = None, **args: Any) -> Result:
        tool = self.tools[name]
        ctx = ToolContext(
            call_id="c1",
            tool_name=name,
            workspace=self.workspace,
            roots=(self.workspace,),
            state=self.state,
            sandbox=sandbox,
        )
        return await tool.run(args, ctx)

    async def close(self) -> None:
        jobs = self.state.get("builtin.shell.jobs")
        if jobs is not None:
            await jobs.aclose()


@pytest.fixture
async def kit(tmp_path: Path) -> Any:
    k = Kit(tmp_path)
    yield k
    await k.close()


async def test_output_keeps_stdout_and_stderr_in_order_with_exit_code(kit: Kit) -> None:
    result = await kit.call("shell", command="echo one; echo two >&2; echo three; exit 3")
    lines = result.content.splitlines()
    assert lines[:3] == ["one", "two", "three"]
    assert lines[3].startswith("[exit code 3, ")
    assert result.metadata["exit_code"] == 3
    assert result.metadata["duration"] >= 0
    assert not result.is_error


async def test_long_output_keeps_head_and_tail(tmp_path: Path) -> None:
    kit = Kit(tmp_path, max_output=1000)
    result = await kit.call("shell", command="seq 1 100000")
    assert result.content.startswith("1\n2\n3\n")
    assert "100000\n[exit code 0" in result.content
    assert "bytes of output omitted" in result.content
    assert "only its head and tail are shown" in result.content
    assert len(result.content) < 1500
    assert result.metadata["truncated"]


async def test_timeout_kills_the_whole_process_group(tmp_path: Path, kit: Kit) -> None:
    marker = tmp_path / "grandchild.pid"
    command = f"(sleep 30 & echo $! > {marker}; wait) & wait"
    result = await kit.call("shell", command=command, timeout_ms=1000)
    assert result.is_error
    assert "timed out after 1 s" in result.content
    assert "run_in_background" in result.content
    pid = int(marker.read_text())
    with anyio.fail_after(5):
        while _alive(pid):
            await anyio.sleep(0.01)  # reaping by init may lag the kill by a moment


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def test_cwd_is_confined_to_the_workspace(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "sub").mkdir()
    result = await kit.call("shell", command="pwd", cwd="sub")
    assert result.content.splitlines()[0] == str((tmp_path / "sub").resolve())
    with pytest.raises(ToolError, match="outside the workspace"):
        await kit.call("shell", command="pwd", cwd="..")
    with pytest.raises(ToolError, match="not an existing folder"):
        await kit.call("shell", command="pwd", cwd="missing")


async def test_read_only_sandbox_cannot_write(tmp_path: Path, kit: Kit) -> None:
    policy = SandboxPolicy(filesystem="read-only")
    result = await kit.call("shell", sandbox=policy, command="echo hi > f.txt; echo rc=$?")
    # bwrap mounts the workspace read-only (EROFS); Landlock refuses the write (EACCES).
    reason = {"bwrap": "Read-only file system", "landlock": "Permission denied"}
    assert reason[result.metadata["mechanism"]] in result.content
    assert "rc=1" in result.content
    assert not (tmp_path / "f.txt").exists()
    assert result.metadata["mechanism"] != "none"


async def test_background_job_lifecycle(tmp_path: Path, kit: Kit) -> None:
    started = await kit.call(
        "shell",
        command="echo first; while [ ! -e go ]; do sleep 0.02; done; echo second >&2; exit 4",
        run_in_background=True,
    )
    job = started.metadata["job_id"]
    assert f"shell_output(id={job!r})" in started.content
    seen = await kit.call("shell_output", id=job, wait_ms=10_000)
    assert seen.content.startswith("first\n")
    assert "still running" in seen.content
    (tmp_path / "go").touch()
    rest = ""
    with anyio.fail_after(10):
        while "finished" not in rest:
            rest += (await kit.call("shell_output", id=job, wait_ms=5_000)).content
    assert "second" in rest
    assert "first" not in rest  # only output since the previous read
    assert "finished: exit code 4" in rest
    with pytest.raises(ToolError, match="no background job 'job1'"):
        await kit.call("shell_output", id=job)


async def test_shell_kill_stops_a_job_and_its_children(tmp_path: Path, kit: Kit) -> None:
    started = await kit.call("shell", command="sleep 30 & echo $!; wait", run_in_background=True)
    job = started.metadata["job_id"]
    printed = await kit.call("shell_output", id=job, wait_ms=10_000)
    child = int(printed.content.splitlines()[0])
    killed = await kit.call("shell_kill", id=job)
    assert f"Job {job} stopped (killed by SIGTERM)" in killed.content
    with anyio.fail_after(5):
        while _alive(child):
            await anyio.sleep(0.01)
    with pytest.raises(ToolError, match="no background job"):
        await kit.call("shell_kill", id=job)


async def test_background_jobs_are_capped_and_killed_on_close(tmp_path: Path) -> None:
    kit = Kit(tmp_path, max_jobs=2)
    pids = []
    for _ in range(2):
        started = await kit.call("shell", command="sleep 30", run_in_background=True)
        pids.append(started.metadata["pid"])
    with pytest.raises(ToolError, match="2 background jobs are already running"):
        await kit.call("shell", command="sleep 30", run_in_background=True)
    await kit.close()
    assert not any(_alive(pid) for pid in pids)


async def test_known_read_only_commands_are_allowed_others_ask(tmp_path: Path) -> None:
    toolkit = await acreate_toolkit(extra_tools=shell_tools({}), workspace=tmp_path)
    async with toolkit:
        safe = toolkit.check("shell", {"command": "ls -la && git status | head -5"})
        assert safe.decision is Decision.ALLOW
        assert safe.rule == "known read-only command"
        for command in ("rm -rf build", "ls > files.txt", "find . -delete", "echo $(id)"):
            verdict = toolkit.check("shell", {"command": command})
            assert verdict.decision is Decision.ASK, command
            assert not verdict.matched
        refused = await toolkit.aexecute("shell", {"command": "touch x"})
        assert refused.is_error  # ask without an approver is refused (fail closed)
        assert not (tmp_path / "x").exists()


async def test_default_approval_option_and_flags() -> None:
    tools = {t.name: t for t in shell_tools({"default_approval": "deny"})}
    shell = tools["shell"]
    assert shell.approval is not None
    verdict = shell.approval.decide(shell, {"command": "make"}, Path("."))
    assert verdict.decision is Decision.DENY
    assert (shell.read_only, shell.destructive, shell.open_world) == (False, True, True)
    assert tools["shell_output"].read_only
    with pytest.raises(ConfigError, match="did you mean 'ask'"):
        shell_tools({"default_approval": "asc"})
    with pytest.raises(ConfigError, match="above max_timeout_ms"):
        shell_tools({"default_timeout_ms": 700_000})


def test_schema_caps_the_timeout() -> None:
    shell: Tool = {
        t.name: t for t in shell_tools({"max_timeout_ms": 1000, "default_timeout_ms": 1000})
    }["shell"]
    assert shell.parameters["properties"]["timeout_ms"]["maximum"] == 1000


@pytest.mark.parametrize(
    ("command", "cwd"),
    [
        ("git status", "sub"),
        ("cd sub && git status", None),
        ("git -C sub status", None),
        ("git --git-dir=sub/.git log", None),
        ("git -c core.fsmonitor=x status", None),
        ("git -Csub status", None),
    ],
)
def test_git_in_another_repository_is_not_auto_allowed(
    command: str, cwd: str | None, tmp_path: Path
) -> None:
    # A nested repository's config (which the model may have written) can make read-only git
    # start programs; only git in the workspace's own repository runs unasked.
    (shell,) = [t for t in shell_tools({}) if t.name == "shell"]
    assert shell.approval is not None
    args = {"command": command, **({"cwd": cwd} if cwd else {})}
    verdict = shell.approval.decide(shell, args, tmp_path)
    assert verdict.decision is not Decision.ALLOW or not verdict.matched
    plain = shell.approval.decide(shell, {"command": "git status"}, tmp_path)
    assert plain.decision is Decision.ALLOW and plain.matched


@pytest.mark.anyio
async def test_git_config_cannot_start_a_program_from_a_read_only_command(tmp_path: Path) -> None:
    import subprocess

    repo = tmp_path
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    marker = tmp_path / "fsmonitor-ran"
    hook = tmp_path / "monitor.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    subprocess.run(["git", "-C", str(repo), "config", "core.fsmonitor", str(hook)], check=True)
    (shell,) = [t for t in shell_tools({}) if t.name == "shell"]
    ctx = ToolContext(call_id="c", tool_name="shell", workspace=repo, roots=(repo,), state={})
    result = await shell.run({"command": "git status"}, ctx)
    assert "exit code" not in result.content or result.metadata.get("exit_code") == 0
    assert not marker.exists()


async def test_a_command_that_leaves_a_child_running_answers_and_says_it_was_stopped(
    tmp_path: Path, kit: Kit
) -> None:
    done = await kit.call("shell", command="sleep 100 & echo started", timeout_ms=20_000)
    assert done.content.startswith("started\n")
    assert "1 background process(es) it left running were stopped" in done.content
    assert done.metadata["stopped"] == 1 and not done.metadata["timed_out"]


async def test_the_last_resort_finalizer_kills_escapees_of_a_job(tmp_path: Path) -> None:
    """Jobs collected without `aclose` (the toolkit never closed): the finalizer stops the
    whole tree through the job's reaper, including a child in a session of its own that a
    process-group kill would miss."""
    import gc

    kit = Kit(tmp_path)
    await kit.call(
        "shell", command="setsid sh -c 'echo $$ > escapee; exec sleep 100' & sleep 100",
        run_in_background=True,
    )
    pid_file = tmp_path / "escapee"
    with anyio.fail_after(10):
        while not pid_file.exists() or not pid_file.read_text().strip():
            await anyio.sleep(0.02)
    escapee = int(pid_file.read_text())
    kit.state.clear()  # drop the only reference to the jobs registry
    gc.collect()
    with anyio.fail_after(10):
        while _alive(escapee):
            await anyio.sleep(0.02)


def test_git_approval_reads_an_unchanged_config_once_and_a_changed_one_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config check is on every git approval: its verdict is kept by the config's bytes
    (git is asked once per content), and new bytes, such as an fsmonitor the model wrote,
    are read again and refuse auto-allow."""
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (shell,) = [t for t in shell_tools({}) if t.name == "shell"]
    assert shell.approval is not None
    runs: list[object] = []
    real_run = subprocess.run

    def counting_run(*args: Any, **kwargs: Any) -> Any:
        runs.append(args)
        return real_run(*args, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting_run)  # every git started, from any module
    for _ in range(3):
        verdict = shell.approval.decide(shell, {"command": "git status"}, tmp_path)
        assert verdict.decision is Decision.ALLOW and verdict.matched
    assert len(runs) <= 1
    config = tmp_path / ".git" / "config"
    config.write_text(config.read_text() + "\tfsmonitor = /tmp/x\n")
    verdict = shell.approval.decide(shell, {"command": "git status"}, tmp_path)
    assert verdict.decision is not Decision.ALLOW or not verdict.matched
