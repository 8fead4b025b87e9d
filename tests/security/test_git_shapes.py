"""Every shape git accepts as a repository: the file tools cannot make one, and known-safe git
does not run unasked in one whose configuration was not checked.

Git takes a folder for a git directory when it holds a valid `HEAD` and, in its common
directory (itself, or the folder its `commondir` file names), `objects/` and `refs/`
(`is_git_directory` in git's setup.c); it finds one from a working folder through `.git` (a
folder or a gitfile) or by taking the folder itself, or any parent, as a bare repository. Each
shape below is first shown real: laid out directly, real git run in it obeys a config key that
names a program (a textconv driver that leaves a marker file). Then the file tools, in either
order of writes, refuse to lay it out; and the shell's known-safe check refuses to auto-allow
git in it, also through a whole toolkit whose shell runs sandboxed (run this file once as is,
bwrap, and once with `TOOLNEXUS_SANDBOX_DISABLE=bwrap`, Landlock).

The objects and refs git needs are copied in by the test (project content the tools may write:
loose objects are just files); what the tools are asked to write is the metadata.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from builtin.files import files_tools
from builtin.patch import patch_tools
from builtin.shell import GIT_SAFETY_ENV, shell_tools
from toolnexus import (
    Decision,
    SandboxPolicy,
    Tool,
    ToolContext,
    ToolError,
    create_toolkit,
    run_process,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git to show each shape"),
]

MARKER = "RAN"
"""The file the textconv driver creates in the workspace when git runs it."""


def _config(ws: Path) -> str:
    return f'[diff "x"]\n\ttextconv = "touch {ws / MARKER}; cat"\n'


ATTRIBUTES = "* diff=x\n"
HEAD = "ref: refs/heads/main\n"


@dataclass(frozen=True)
class Shape:
    name: str
    metadata: dict[str, str]
    """What the tools are asked to write (relative to the workspace); `{config}` is the
    program-naming config, `{ws}` the workspace."""
    store: str
    """Where the test copies a real repository's objects and refs (relative)."""
    run_from: str = "."
    """The folder git is run from."""
    extra: dict[str, str] = field(default_factory=dict)
    """Plain project files the tools may write (an included config file)."""


SHAPES = [
    Shape(
        "root-commondir",  # the case seen for real: HEAD + commondir at the workspace's top
        {"HEAD": HEAD, "commondir": "store\n", "store/config": "{config}",
         "store/info/attributes": ATTRIBUTES},
        store="store",
    ),
    Shape(
        "root-bare",  # the workspace itself is a bare repository
        {"HEAD": HEAD, "config": "{config}", "info/attributes": ATTRIBUTES},
        store=".",
    ),
    Shape(
        "sub-commondir",
        {"sub/HEAD": HEAD, "sub/commondir": "../store\n", "store/config": "{config}",
         "store/info/attributes": ATTRIBUTES},
        store="store",
        run_from="sub",
    ),
    Shape(
        "sub-bare",
        {"fx/HEAD": HEAD, "fx/config": "{config}", "fx/info/attributes": ATTRIBUTES},
        store="fx",
        run_from="fx",
    ),
    Shape(
        "gitfile-to-bare",
        {".git": "gitdir: store\n", "store/HEAD": HEAD, "store/config": "{config}",
         "store/info/attributes": ATTRIBUTES},
        store="store",
    ),
    Shape(
        "gitfile-linked-worktree",  # worktrees/<id> with HEAD, commondir and gitdir
        {".git": "gitdir: store/worktrees/w\n", "store/worktrees/w/HEAD": HEAD,
         "store/worktrees/w/commondir": "../..\n", "store/worktrees/w/gitdir": "{ws}/.git\n",
         "store/config": "{config}", "store/info/attributes": ATTRIBUTES},
        store="store",
    ),
    Shape(
        "worktrees-folder",  # a linked worktree's git directory, used as a bare one
        {"store/worktrees/w/HEAD": HEAD, "store/worktrees/w/commondir": "../..\n",
         "store/config": "{config}", "store/info/attributes": ATTRIBUTES},
        store="store",
        run_from="store/worktrees/w",
    ),
    Shape(
        "root-config-worktree",  # extensions.worktreeConfig reads config.worktree too
        {"HEAD": HEAD,
         "config": "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = true\n",
         "config.worktree": "{config}", "info/attributes": ATTRIBUTES},
        store=".",
    ),
    Shape(
        "root-include",  # include.path reads a plain file the tools may write
        {"HEAD": HEAD, "config": "[include]\n\tpath = inc.cfg\n",
         "info/attributes": ATTRIBUTES},
        store=".",
        extra={"inc.cfg": "{config}"},
    ),
]
ROOT_SHAPES = [s for s in SHAPES if s.run_from == "."]


def _neutral() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {**env, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**_neutral(), **GIT_SAFETY_ENV}
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=30, check=False
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real repository with one commit on `main`: its objects and refs are copied around."""
    src = tmp_path_factory.mktemp("source")
    for args in (
        ("init", "-q", "-b", "main", "."),
        ("add", "."),
        ("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one"),
    ):
        (src / "a.txt").write_text("hello\n")
        assert _git(src, *args).returncode == 0
    return src / ".git"


def _workspace(tmp_path: Path, source: Path, shape: Shape) -> Path:
    ws = tmp_path / "ws"
    store = ws / shape.store
    store.mkdir(parents=True)
    for name in ("objects", "refs"):
        shutil.copytree(source / name, store / name)
    (ws / shape.run_from).mkdir(parents=True, exist_ok=True)
    return ws


def _files(shape: Shape, ws: Path) -> list[tuple[str, str]]:
    wanted = {**shape.extra, **shape.metadata}
    return [(p, c.format(config=_config(ws), ws=ws)) for p, c in wanted.items()]


def _lay_out(shape: Shape, ws: Path) -> None:
    for path, content in _files(shape, ws):
        (ws / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / path).write_text(content)


def _program_ran(shape: Shape, ws: Path) -> bool:
    _git(ws / shape.run_from, "show", "HEAD")
    return (ws / MARKER).exists()


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_each_shape_is_a_repository_git_uses(tmp_path: Path, source: Path, shape: Shape) -> None:
    ws = _workspace(tmp_path, source, shape)
    folder = ws / shape.run_from
    assert _git(folder, "rev-parse", "--git-dir").returncode != 0  # not one before
    _lay_out(shape, ws)
    assert _git(folder, "rev-parse", "--git-dir").returncode == 0
    assert _program_ran(shape, ws)


# --- the file tools -------------------------------------------------------------------------


class Tools:
    def __init__(self, workspace: Path, *, protect_git: bool = True) -> None:
        self.workspace = workspace
        options = {"require_read": False, "protect_git": protect_git}
        _, self.write, _ = files_tools(options)
        (self.apply_patch,) = patch_tools({"protect_git": protect_git})

    def ctx(self, tool: Tool) -> ToolContext:
        ws = self.workspace
        return ToolContext(call_id="c", tool_name=tool.name, workspace=ws, roots=(ws,), state={})

    async def write_each(self, files: list[tuple[str, str]]) -> list[str]:
        """Write every file, one call each; the paths refused."""
        refused = []
        for path, content in files:
            try:
                await self.write.run({"path": path, "content": content}, self.ctx(self.write))
            except ToolError as exc:
                assert "protect_git: false" in str(exc)
                refused.append(path)
        return refused

    async def patch(self, files: list[tuple[str, str]]) -> None:
        body = "".join(
            f"*** Add File: {p}\n" + "".join(f"+{line}\n" for line in c.splitlines())
            for p, c in files
        )
        text = f"*** Begin Patch\n{body}*** End Patch"
        await self.apply_patch.run({"patch": text}, self.ctx(self.apply_patch))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
async def test_the_tools_can_make_each_shape_only_with_the_guard_lifted(
    tmp_path: Path, source: Path, shape: Shape
) -> None:
    ws = _workspace(tmp_path, source, shape)
    assert await Tools(ws, protect_git=False).write_each(_files(shape, ws)) == []
    assert _program_ran(shape, ws)


@pytest.mark.parametrize("order", ["forward", "backward"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
async def test_the_file_tools_refuse_to_make_each_shape(
    tmp_path: Path, source: Path, shape: Shape, order: str
) -> None:
    ws = _workspace(tmp_path, source, shape)
    files = _files(shape, ws)
    if order == "backward":
        files.reverse()
    refused = await Tools(ws).write_each(files)
    assert refused, "some write must be refused"
    assert not _program_ran(shape, ws)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
async def test_apply_patch_refuses_each_shape_whole(
    tmp_path: Path, source: Path, shape: Shape
) -> None:
    ws = _workspace(tmp_path, source, shape)
    with pytest.raises(ToolError, match="protect_git: false"):
        await Tools(ws).patch(_files(shape, ws))
    assert not _program_ran(shape, ws)


# --- the known-safe check -------------------------------------------------------------------


def _shell() -> Tool:
    (shell,) = [t for t in shell_tools({}) if t.name == "shell"]
    return shell


def _auto_allowed(workspace: Path, command: str = "git show HEAD") -> bool:
    shell = _shell()
    assert shell.approval is not None
    verdict = shell.approval.decide(shell, {"command": command}, workspace)
    return verdict.decision is Decision.ALLOW and verdict.matched


@pytest.mark.parametrize("shape", ROOT_SHAPES, ids=lambda s: s.name)
def test_known_safe_git_is_not_auto_allowed_in_each_shape(
    tmp_path: Path, source: Path, shape: Shape
) -> None:
    ws = _workspace(tmp_path, source, shape)
    assert _auto_allowed(ws)  # no repository yet: git would refuse to run
    _lay_out(shape, ws)
    assert not _auto_allowed(ws)
    assert not _auto_allowed(ws, "git status")


@pytest.mark.parametrize("shape", ROOT_SHAPES, ids=lambda s: s.name)
def test_known_safe_git_never_runs_the_program_through_a_sandboxed_toolkit(
    tmp_path: Path, source: Path, shape: Shape
) -> None:
    ws = _workspace(tmp_path, source, shape)
    _lay_out(shape, ws)
    manifest = (
        "version: 1\nbuiltins: [shell]\n"
        "defaults: {sandbox: {filesystem: workspace-write, network: false}}\n"
    )
    with create_toolkit(manifest, workspace=ws) as toolkit:
        result = toolkit.execute("shell", {"command": "git show HEAD"})
    assert result.is_error, result.content
    assert not (ws / MARKER).exists()


def test_a_parent_of_the_workspace_that_is_a_bare_repository_is_checked(
    tmp_path: Path, source: Path
) -> None:
    outer = tmp_path / "outer"
    outer.mkdir()
    for name in ("objects", "refs"):
        shutil.copytree(source / name, outer / name)
    ws = outer / "ws"
    ws.mkdir()
    (outer / "HEAD").write_text(HEAD)
    (outer / "config").write_text(_config(ws))
    (outer / "info").mkdir()
    (outer / "info/attributes").write_text(ATTRIBUTES)
    _git(ws, "show", "HEAD")
    assert (ws / MARKER).exists()  # git found the parent and ran the program
    (ws / MARKER).unlink()
    assert not _auto_allowed(ws)


@pytest.mark.parametrize("variable", ["GIT_DIR", "GIT_COMMON_DIR"])
def test_git_told_where_the_repository_is_by_the_environment_is_not_auto_allowed(
    tmp_path: Path, source: Path, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    store = tmp_path / "store"
    shutil.copytree(source, store)
    (store / "config").write_text(_config(ws))
    (store / "info").mkdir(exist_ok=True)
    (store / "info/attributes").write_text(ATTRIBUTES)
    if variable == "GIT_COMMON_DIR":
        monkeypatch.setenv("GIT_DIR", str(source))
    monkeypatch.setenv(variable, str(store))
    assert not _auto_allowed(ws)


def test_doubt_never_allows_when_git_cannot_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-folder"))
    assert not _auto_allowed(ws)


# --- the sandbox ----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
async def test_a_sandboxed_command_cannot_change_the_config_of_an_existing_shape(
    tmp_path: Path, source: Path, shape: Shape
) -> None:
    """A repository in any shape that is already there when a sandboxed command starts keeps
    its config, hooks and commondir read-only, as `.git` folders do."""
    ws = _workspace(tmp_path, source, shape)
    _lay_out(shape, ws)
    targets = [p for p, _ in _files(shape, ws) if p.rsplit("/", 1)[-1] in ("config", "HEAD")]
    targets += [p.rsplit("HEAD", 1)[0] + "hooks/pre-commit" for p in targets if "HEAD" in p]
    if shape.run_from != ".":
        targets.append(f"{shape.run_from}/commondir")
    before = {p: (ws / p).read_bytes() if (ws / p).exists() else None for p in targets}
    script = "; ".join(f"(echo evil >> '{p}') 2>/dev/null && echo WROTE {p}" for p in targets)
    done = await run_process(
        ["sh", "-c", script + "; echo ok > plain.txt && echo OK"],
        cwd=ws,
        timeout=30,
        max_output=100_000,
        sandbox=SandboxPolicy(),
        workspace=ws,
    )
    assert done.mechanism in ("bwrap", "landlock")
    assert "WROTE" not in done.stdout, done.stdout
    assert done.stdout.strip().endswith("OK")
    for path, content in before.items():
        now = (ws / path).read_bytes() if (ws / path).exists() else None
        assert now == content, path
