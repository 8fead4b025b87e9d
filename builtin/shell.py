"""`shell`, `shell_output` and `shell_kill`: run bash commands in the workspace.

A command runs with `bash -c` in the workspace (or a folder inside it), inside the sandbox the
tool's policy asks for, through the toolkit's process runner: stdout and stderr are merged in
the order they were written, memory stays bounded whatever the command prints (head and tail
are kept, the middle is counted), and a timeout kills the whole process group, grandchildren
included.

Background jobs (`run_in_background`) live in the toolkit's state, at most `max_jobs` running at
once. Each keeps its last `max_buffer` bytes of output; `shell_output` returns what arrived
since the previous read and `shell_kill` stops the job's whole process tree. The jobs die with
the toolkit: the registry in `ctx.state` has an `aclose()` the toolkit calls on close, and, as a
last resort, a finalizer SIGKILLs the whole tree of every job still running (through the job's
reaper, which holds the escapees a group kill misses) when the registry is collected or the
interpreter exits.

Approval is decided from the command: a command the core knows to be read-only
(`is_known_safe_command`: `ls`, `cat`, `git status`, ... every option understood, nothing
redirected into a file) is allowed; git only in the workspace's own repository and only while
nothing in it redirects git elsewhere or configures a program (`_repository_redirected`).
Anything else gets the tool's default (`ask`), which the manifest's permission rules may
override.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import signal
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from toolnexus import (
    ConfigError,
    Decision,
    ProcessHandle,
    Result,
    Tool,
    ToolContext,
    ToolError,
    Verdict,
    is_known_safe_command,
    run_process,
    split_command,
    start_process,
)

from ._common import confine, did_you_mean, display, parse_options
from ._gitrepo import GitUnclear, environment_redirects, repository_at

__all__ = ["ShellApproval", "shell_tools"]

_JOBS_KEY = "builtin.shell.jobs"
"""`ctx.state` key of the toolkit's background-job registry (`_Jobs`)."""

_DECISIONS = ("allow", "ask", "deny")


@dataclass(frozen=True, kw_only=True)
class _ShellOptions:
    """Options of the shell tools (`builtins: {shell: {...}}`)."""

    max_output: int = 30_000
    """Characters of output returned; past it the head and the tail are kept."""
    default_timeout_ms: int = 120_000
    max_timeout_ms: int = 600_000
    """Largest `timeout_ms` a call may ask for."""
    max_jobs: int = 8
    """Background jobs running at once."""
    max_buffer: int = 1_000_000
    """Bytes of output each background job keeps until it is read."""
    default_approval: str = "ask"
    """What a command that is not known to be read-only gets: allow, ask or deny."""


def _options(options: Mapping[str, Any]) -> _ShellOptions:
    decision = options.get("default_approval", "ask")
    if decision not in _DECISIONS:
        raise ConfigError(
            f"expected one of allow, ask, deny, got {decision!r}"
            + did_you_mean(str(decision), _DECISIONS),
            field="default_approval",
        )
    rest = {k: v for k, v in options.items() if k != "default_approval"}
    opts: _ShellOptions = parse_options(rest, _ShellOptions, "shell")
    if opts.default_timeout_ms > opts.max_timeout_ms:
        raise ConfigError(
            f"default_timeout_ms ({opts.default_timeout_ms}) is above max_timeout_ms "
            f"({opts.max_timeout_ms}); lower it or raise max_timeout_ms",
            field="default_timeout_ms",
        )
    return replace(opts, default_approval=decision)


@dataclass(frozen=True, kw_only=True)
class ShellApproval:
    """The shell tool's approval policy: known read-only commands are allowed, the rest get
    `default` as an unmatched verdict, so the manifest's rules can still decide them."""

    default: Decision = Decision.ASK

    def decide(self, tool: Tool, arguments: Mapping[str, Any], workspace: Path) -> Verdict:
        command = arguments.get("command")
        if (
            isinstance(command, str)
            and is_known_safe_command(command)
            and not _git_elsewhere(command, arguments.get("cwd"), workspace)
        ):
            return Verdict(
                decision=Decision.ALLOW,
                rule="known read-only command",
                reason="every sub-command only reads and nothing is redirected into a file",
            )
        return Verdict(
            decision=self.default,
            matched=False,
            reason="the command may change files or reach the network",
        )

    def summary(self) -> str:
        """What `toolnexus list` shows for the shell's own rule."""
        return f"read-only commands allow, else {self.default.value}"


GIT_SAFETY_ENV = {
    "GIT_CONFIG_COUNT": "2",
    "GIT_CONFIG_KEY_0": "core.fsmonitor",
    "GIT_CONFIG_VALUE_0": "false",
    "GIT_CONFIG_KEY_1": "core.hooksPath",
    "GIT_CONFIG_VALUE_1": "/dev/null",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
}
"""Set for every command: repository config cannot make a read-only git command start a
program (fsmonitor hook, hooks, pager), and `git status` does not rewrite the index (a
command that only reads leaves the repository byte for byte as it was)."""


def _git_elsewhere(command: str, cwd: object, workspace: Path) -> bool:
    """True when a command runs git anywhere but in the workspace's own, unredirected
    repository.

    Read-only git commands obey the repository's files, which can name programs to run or
    send git to another repository: the model may have written them. So git is auto-allowed
    only from the workspace itself (no `cwd`, no `cd`), and only when `_repository_redirected`
    finds nothing in the repository git would use.
    """
    words = split_command(command)
    if words is None:
        return True
    programs = [w[0].rsplit("/", 1)[-1] for w in words if w]
    if "git" not in programs:
        return False
    if cwd not in (None, "", ".", "./"):
        return True
    if any(p in ("cd", "pushd", "popd") for p in programs):
        return True
    return _repository_redirected(workspace)


_HARMLESS_CONFIG = re.compile(
    r"""(?x)
    core\.(repositoryformatversion|filemode|bare|logallrefupdates|ignorecase|precomposeunicode
        |symlinks|autocrlf|eol|safecrlf|abbrev|quotepath|checkstat|trustctime|compression
        |loosecompression|bigfilethreshold|whitespace|commentchar|sparsecheckout
        |sparsecheckoutcone|splitindex|untrackedcache|preloadindex|multipackindex)
    | extensions\.objectformat
    | (user|author|committer)\.(name|email)
    | init\.defaultbranch | index\.version | feature\.manyfiles
    | remote\.[^\n]*\.(url|pushurl|fetch|push|tagopt|prune|mirror|skipdefaultupdate)
    | branch\.[^\n]*\.(remote|merge|rebase|pushremote|description)
    | (pull|push|fetch|merge|rebase|status|log|color|advice|column|blame|grep|tag|commit
        |rerere|gc|pack|format)\.[a-z0-9-]+
    | color\.(diff|status|branch|grep|decorate|interactive|remote)\.[a-z0-9-]+
    | diff\.(renames|renamelimit|algorithm|mnemonicprefix|noprefix|colormoved|context
        |interhunkcontext|indentheuristic|statgraphwidth|suppressblankempty|wserrorhighlight
        |ignoresubmodules|submodule|relative|orderfile|dirstat)
    | alias\.[^\n]*
    """
)
"""Config keys known to run nothing and to point git at nothing else (lower-cased, as `git
config --list` prints them). Every other key refuses auto-allow: `core.pager`,
`core.fsmonitor`, `core.hooksPath`, `core.worktree`, `core.sshCommand`, `diff.external`,
`diff.*.textconv`, `filter.*`, `gpg.program`, `log.showSignature`, `include.path`,
`includeIf.*`, `extensions.partialClone`... `status.*`, `log.*` and `gc.*` keys pick formats
and thresholds (`log.showsignature` is refused below); aliases never shadow the built-in
sub-commands the known-safe table allows."""
_RUNS_PROGRAM = frozenset({"log.showsignature", "status.submodulesummary", "tag.gpgsign"})


def _repository_redirected(start: Path) -> bool:
    """True when git run from `start` would not use the workspace's own, plain repository with
    a config known to run nothing.

    Where the repository is, and which config files git reads there, is asked of git itself
    (`_gitrepo.repository_at`), so every shape git accepts is judged, not only `.git` folders:
    a bare repository in the workspace or a parent, a `HEAD` plus `commondir`, a gitfile, a
    linked worktree. Git is auto-allowed only in a plain one: the work tree `top` holds a real
    `.git` folder that is both the git directory and the common one, with no `commondir`,
    alternates or per-worktree config, every config entry comes from `.git/config` and is in
    `_HARMLESS_CONFIG`, and no nested repository lies below `start` (git status descends into
    submodules with their own config). A variable of the environment that points git elsewhere,
    or a git that cannot answer, also refuses.
    """
    if environment_redirects(GIT_SAFETY_ENV) is not None:
        return True
    try:
        found = repository_at(start)
    except GitUnclear:
        return True
    if found is None:
        return False  # no repository: git refuses to run
    if found.work_tree is None:
        return True  # bare: the git directory is the folder or a parent, not a `.git`
    dot_git = found.work_tree / ".git"
    if found.git_dir != dot_git or found.common_dir != dot_git:
        return True
    if not dot_git.is_dir() or dot_git.is_symlink():
        return True
    for name in ("commondir", "objects/info/alternates", "config.worktree"):
        if (dot_git / name).exists():
            return True
    own = str(dot_git / "config")
    for origin, key in found.configs:
        if origin != own or key in _RUNS_PROGRAM or not _HARMLESS_CONFIG.fullmatch(key):
            return True
    return _nested_repository(start, skip=dot_git)


def _nested_repository(start: Path, skip: Path) -> bool:
    """Any `.git` (folder or file) below `start`, other than `skip`."""
    for folder, dirs, files in os.walk(start):
        if ".git" in files:
            return True
        if ".git" in dirs:
            if Path(folder) / ".git" != skip:
                return True
            dirs.remove(".git")
    return False


# --- background jobs --------------------------------------------------------------------------


def _abort_all(handles: dict[int, ProcessHandle]) -> None:
    """Last resort (finalizer, interpreter exit): SIGKILL every job's whole tree still listed.
    `abort` goes through the job's reaper, which also holds the escapees a group kill misses."""
    for handle in list(handles.values()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            handle.abort()
    handles.clear()


class _Jobs:
    """The toolkit's background jobs. The toolkit should `await aclose()` when it closes."""

    def __init__(self) -> None:
        self.jobs: dict[str, tuple[ProcessHandle, str]] = {}
        self._ids = itertools.count(1)
        self._handles: dict[int, ProcessHandle] = {}
        weakref.finalize(self, _abort_all, self._handles)

    def running(self) -> int:
        return sum(1 for handle, _ in self.jobs.values() if handle.running)

    def add(self, handle: ProcessHandle, command: str) -> str:
        job_id = f"job{next(self._ids)}"
        self.jobs[job_id] = (handle, command)
        self._handles[handle.pid] = handle
        return job_id

    def get(self, job_id: str) -> tuple[ProcessHandle, str]:
        try:
            return self.jobs[job_id]
        except KeyError:
            known = ", ".join(self.jobs) or "none"
            raise ToolError(
                f"no background job {job_id!r} (current jobs: {known}). A job is forgotten "
                "once its final output has been read."
            ) from None

    def forget(self, job_id: str) -> None:
        handle, _ = self.jobs.pop(job_id)
        self._handles.pop(handle.pid, None)

    async def aclose(self) -> None:
        """Kill every job's process group and reap it."""
        jobs, self.jobs = self.jobs, {}
        await asyncio.gather(*(handle.kill(grace=0.5) for handle, _ in jobs.values()))
        self._handles.clear()


def _jobs(ctx: ToolContext) -> _Jobs:
    jobs = ctx.state.get(_JOBS_KEY)
    if jobs is None:
        jobs = ctx.state[_JOBS_KEY] = _Jobs()
    return jobs


# --- output -----------------------------------------------------------------------------------


def _head_tail(text: str, limit: int) -> tuple[str, int]:
    """`text` cut to about `limit` characters, keeping its head and tail; and how many were
    left out."""
    if len(text) <= limit:
        return text, 0
    head = text[: limit // 2]
    tail = text[len(text) - limit // 2 :]
    dropped = len(text) - len(head) - len(tail)
    return f"{head}\n[... {dropped} characters omitted ...]\n{tail}", dropped


def _status(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    return f"exit code {code}"


# --- the tools --------------------------------------------------------------------------------


class _Shell:
    def __init__(self, opts: _ShellOptions) -> None:
        self.opts = opts

    def _cwd(self, ctx: ToolContext, cwd: str | None) -> Path:
        folder = confine(ctx, cwd or ".", write=False)
        if not folder.is_dir():
            raise ToolError(
                f"cwd {cwd!r} is not an existing folder; give a folder in the workspace"
            )
        return folder

    async def shell(self, args: dict[str, Any], ctx: ToolContext) -> Result:
        command: str = args["command"]
        if not command.strip():
            raise ToolError("the command is empty; give a bash command line")
        cwd = self._cwd(ctx, args.get("cwd"))
        if args.get("run_in_background"):
            return await self._background(ctx, command, cwd)
        timeout_ms = min(
            args.get("timeout_ms", self.opts.default_timeout_ms), self.opts.max_timeout_ms
        )
        timeout = timeout_ms / 1000
        remaining = ctx.remaining()
        if remaining is not None:
            timeout = min(timeout, remaining)
        done = await run_process(
            ["bash", "-c", command],
            cwd=cwd,
            env=GIT_SAFETY_ENV,
            timeout=timeout,
            max_output=self.opts.max_output,
            merge_stderr=True,
            sandbox=ctx.sandbox,
            workspace=ctx.workspace,
        )
        # The runner already kept head and tail bytes (with its own marker); cut characters
        # only when multi-byte text still makes it too long.
        slack = 100 if done.truncated else 0
        output, dropped = _head_tail(done.stdout, self.opts.max_output + slack)
        if done.timed_out:
            footer = (
                f"[timed out after {timeout:g} s: the command and every process it started "
                "were killed. Give a larger timeout_ms (up to "
                f"{self.opts.max_timeout_ms}), or run it with run_in_background.]"
            )
        else:
            footer = f"[{_status(done.exit_code)}, {done.duration:.2f} s]"
        if done.stopped:
            footer += (
                f"\n[{done.stopped} background process(es) it left running were stopped when "
                "it exited: use run_in_background for servers and watchers.]"
            )
        if done.truncated or dropped:
            footer += (
                "\n[The output was long: only its head and tail are shown. Redirect it to a "
                "file and search it with grep, or pipe it through head/tail.]"
            )
        body = output.rstrip("\n")
        return Result(
            content=f"{body}\n{footer}" if body else footer,
            is_error=done.timed_out,
            metadata={
                "exit_code": done.exit_code,
                "duration": done.duration,
                "timed_out": done.timed_out,
                "truncated": done.truncated or bool(dropped),
                "mechanism": done.mechanism,
                "launch": done.launch,
                "unconfined": done.unconfined,
                "stopped": done.stopped,
            },
        )

    async def _background(self, ctx: ToolContext, command: str, cwd: Path) -> Result:
        jobs = _jobs(ctx)
        if jobs.running() >= self.opts.max_jobs:
            raise ToolError(
                f"{self.opts.max_jobs} background jobs are already running; stop one with "
                f"shell_kill (jobs: {', '.join(jobs.jobs)}) or wait for one to finish."
            )
        handle = await start_process(
            ["bash", "-c", command],
            cwd=cwd,
            env=GIT_SAFETY_ENV,
            sandbox=ctx.sandbox,
            workspace=ctx.workspace,
            max_buffer=self.opts.max_buffer,
        )
        job_id = jobs.add(handle, command)
        return Result(
            content=(
                f"Started background job {job_id} (pid {handle.pid}) in {display(ctx, cwd)}. "
                f"Read its output with shell_output(id={job_id!r}); stop it with "
                f"shell_kill(id={job_id!r})."
            ),
            metadata={"job_id": job_id, "pid": handle.pid, "mechanism": handle.mechanism},
        )

    async def output(self, args: dict[str, Any], ctx: ToolContext) -> Result:
        jobs = _jobs(ctx)
        job_id: str = args["id"]
        handle, command = jobs.get(job_id)
        wait = args.get("wait_ms", 0) / 1000
        deadline = time.monotonic() + wait
        text = handle.read_new()
        while not text and handle.running and time.monotonic() < deadline:
            # Nothing new yet: look again shortly, up to wait_ms (the job has no event to wait on).
            await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
            text = handle.read_new()
        if not handle.running:
            code = await handle.wait(timeout=5)
            text += handle.read_new()
            jobs.forget(job_id)
            status = f"[job {job_id} finished: {_status(code)}; it is now forgotten]"
        else:
            elapsed = time.monotonic() - handle.started
            status = f"[job {job_id} is still running ({elapsed:.1f} s); read again later]"
        body, dropped = _head_tail(text, self.opts.max_output)
        if dropped:
            status += "\n[Only the head and tail of the new output are shown.]"
        body = body.rstrip("\n")
        return Result(
            content=f"{body}\n{status}" if body else f"(no new output)\n{status}",
            metadata={"job_id": job_id, "command": command, "exit_code": handle.returncode},
        )

    async def kill(self, args: dict[str, Any], ctx: ToolContext) -> Result:
        jobs = _jobs(ctx)
        job_id: str = args["id"]
        handle, _ = jobs.get(job_id)
        was_running = handle.running
        code = await handle.kill()
        tail = handle.read_new().rstrip("\n")
        jobs.forget(job_id)
        state = "stopped" if was_running else "had already finished"
        text = f"Job {job_id} {state} ({_status(code)})."
        if tail:
            body, _ = _head_tail(tail, self.opts.max_output)
            text = f"{body}\n{text}"
        return Result(content=text, metadata={"job_id": job_id, "exit_code": code})


_SHELL_DESCRIPTION = """\
Run a bash command in the workspace (or in `cwd`, a folder inside it) and return its output: \
stdout and stderr together, in order, followed by the exit code and the duration. A non-zero \
exit code is reported, not treated as a failure of the tool.
The command runs inside the toolkit's sandbox, which may make files read-only or cut the \
network; stdin is empty, so interactive prompts get end-of-file. Each call starts a fresh \
shell: `cd` and variables do not carry over (use cwd, or `cd dir && ...`).
Output past {max_output} characters keeps its head and tail. timeout_ms (default \
{default_timeout}, at most {max_timeout}) kills the command and everything it started.
For servers, watchers or long builds set run_in_background: you get a job id; read new output \
with shell_output and stop the job with shell_kill. Prefer the grep, glob and read tools to \
shell commands for searching and reading files."""

_OUTPUT_DESCRIPTION = """\
Read the output a background job (started by shell with run_in_background) printed since the \
previous read, and whether it is still running. wait_ms waits up to that long for new output \
or for the job to end. Once a finished job's last output has been read, its id is forgotten. \
Output the job printed faster than it was read may be lost (the note says how much)."""

_KILL_DESCRIPTION = """\
Stop a background job started by shell with run_in_background: its whole process tree gets \
SIGTERM, then SIGKILL after a short grace. Returns the output not read yet."""


def shell_tools(options: Mapping[str, Any]) -> list[Tool]:
    """The `shell`, `shell_output` and `shell_kill` tools.

    Background jobs live in the toolkit's state under `builtin.shell.jobs`, an object with
    `async aclose()` that kills them: the toolkit must await it when it closes.

    Args:
        options: `max_output`, `default_timeout_ms`, `max_timeout_ms`, `max_jobs`,
            `max_buffer` (positive integers) and `default_approval` (allow, ask or deny).

    Raises:
        ConfigError: an unknown option or a bad value.
    """
    opts = _options(options)
    shell = _Shell(opts)
    job_id = {"type": "string", "description": "The job id shell returned, e.g. 'job1'."}
    return [
        Tool(
            name="shell",
            description=_SHELL_DESCRIPTION.format(
                max_output=opts.max_output,
                default_timeout=opts.default_timeout_ms,
                max_timeout=opts.max_timeout_ms,
            ),
            parameters={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The bash command line."},
                    "timeout_ms": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": opts.max_timeout_ms,
                        "default": opts.default_timeout_ms,
                        "description": "Milliseconds before the command is killed.",
                    },
                    "cwd": {
                        "type": "string",
                        "description": "Folder to run in, inside the workspace (default: it).",
                    },
                    "run_in_background": {
                        "type": "boolean",
                        "default": False,
                        "description": "Start it as a background job and return its id at once.",
                    },
                },
                "required": ["command"],
                "additionalProperties": False,
            },
            handler=shell.shell,
            source="builtin",
            read_only=False,
            destructive=True,
            idempotent=False,
            open_world=True,
            approval=ShellApproval(default=Decision(opts.default_approval)),
        ),
        Tool(
            name="shell_output",
            description=_OUTPUT_DESCRIPTION,
            parameters={
                "type": "object",
                "properties": {
                    "id": job_id,
                    "wait_ms": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": opts.max_timeout_ms,
                        "default": 0,
                        "description": "Wait up to this long for new output or the job's end.",
                    },
                },
                "required": ["id"],
                "additionalProperties": False,
            },
            handler=shell.output,
            source="builtin",
            read_only=True,
            destructive=False,
            idempotent=False,
            open_world=False,
        ),
        Tool(
            name="shell_kill",
            description=_KILL_DESCRIPTION,
            parameters={
                "type": "object",
                "properties": {"id": job_id},
                "required": ["id"],
                "additionalProperties": False,
            },
            handler=shell.kill,
            source="builtin",
            read_only=False,
            destructive=True,
            idempotent=False,
            open_world=False,
        ),
    ]
