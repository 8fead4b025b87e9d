"""The file tools keep away from git metadata that makes git run a program or read another repo.

Every vector is shown real first: with the guard lifted (`protect_git: false`) the tool writes
it and git, run for real, obeys it (runs the program, or reads the other repository). With the
default, the same call is refused and git is unaffected. Then the spellings that must not get
around the guard (`..`, symlinks, case, Unicode and Windows name tricks), every tool and verb
(write, edit, apply_patch add/update/delete/move), what stays allowed, and the option.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from builtin._gitguard import git_refusal
from builtin.files import files_tools
from builtin.patch import patch_tools
from toolnexus import ConfigError, ManifestError, Tool, ToolContext, ToolError, create_toolkit

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git to show each vector"),
]


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=30, check=False
    )


@dataclass
class Tools:
    workspace: Path
    protect_git: bool = True

    def __post_init__(self) -> None:
        options = {"require_read": False, "protect_git": self.protect_git}
        self.read, self.write, self.edit = files_tools(options)
        (self.apply_patch,) = patch_tools({"protect_git": self.protect_git})
        self.state: dict[str, object] = {}

    def ctx(self, tool: Tool) -> ToolContext:
        return ToolContext(
            call_id="c",
            tool_name=tool.name,
            workspace=self.workspace,
            roots=(self.workspace,),
            state=self.state,
        )

    async def write_file(self, path: str, content: str) -> None:
        await self.write.run({"path": path, "content": content}, self.ctx(self.write))

    async def patch(self, body: str) -> None:
        text = f"*** Begin Patch\n{body}*** End Patch"
        await self.apply_patch.run({"patch": text}, self.ctx(self.apply_patch))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    assert _git(ws, "init", "-q", ".").returncode == 0
    (ws / "a.txt").write_text("a\n")
    return ws


def _marker_program(tmp_path: Path) -> tuple[str, Path]:
    marker = tmp_path / "RAN"
    return f"touch {marker}; echo", marker


# --- each vector, shown real ----------------------------------------------------------------


@dataclass(frozen=True)
class Vector:
    name: str
    attack: Callable[[Tools, Path, Path], Awaitable[None]]
    """Writes the redirect with the tools (workspace, a scratch folder)."""
    obeyed: Callable[[Path, Path], bool]
    """Whether git, run for real, obeyed it (workspace, scratch folder)."""


async def _fsmonitor_config(tools: Tools, ws: Path, scratch: Path) -> None:
    program, _ = _marker_program(scratch)
    await tools.write_file(".git/config", f"[core]\n\tfsmonitor = {program}\n")


async def _hook(tools: Tools, ws: Path, scratch: Path) -> None:
    program, _ = _marker_program(scratch)
    await tools.write_file(".git/hooks/pre-commit", f"#!/bin/sh\n{program}\n")
    (ws / ".git/hooks/pre-commit").chmod(0o755)  # the model would chmod from the shell


def _ran(ws: Path, scratch: Path) -> bool:
    _git(ws, "status")
    _git(
        ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"
    )
    return (scratch / "RAN").exists()


def _other_repo(scratch: Path) -> Path:
    other = scratch / "other"
    if not other.exists():
        other.mkdir()
        _git(other, "init", "-q", ".")
        _git(other, "config", "tn.where", "other-repository")
    return other


async def _gitfile(tools: Tools, ws: Path, scratch: Path) -> None:
    (ws / "sub").mkdir(exist_ok=True)
    await tools.write_file("sub/.git", f"gitdir: {_other_repo(scratch)}/.git\n")


async def _commondir(tools: Tools, ws: Path, scratch: Path) -> None:
    await tools.write_file(".git/commondir", f"{_other_repo(scratch)}/.git\n")


def _reads_other(ws: Path, scratch: Path) -> bool:
    folders = [f for f in (ws, ws / "sub") if f.is_dir()]
    found = [_git(folder, "config", "tn.where").stdout.strip() for folder in folders]
    return "other-repository" in found


async def _alternates(tools: Tools, ws: Path, scratch: Path) -> None:
    other = _other_repo(scratch)
    (other / "f").write_text("from the other repository\n")
    _git(other, "add", "f")
    _git(other, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "o")
    await tools.write_file(".git/objects/info/alternates", f"{other}/.git/objects\n")


def _reads_other_objects(ws: Path, scratch: Path) -> bool:
    head = _git(scratch / "other", "rev-parse", "HEAD").stdout.strip()
    return _git(ws, "cat-file", "-e", head).returncode == 0


async def _bare_lookalike(tools: Tools, ws: Path, scratch: Path) -> None:
    program, _ = _marker_program(scratch)
    await tools.patch(
        "*** Add File: fixtures/HEAD\n+ref: refs/heads/main\n"
        "*** Add File: fixtures/objects/.keep\n+\n*** Add File: fixtures/refs/.keep\n+\n"
    )
    await tools.write_file("fixtures/config", f"[core]\n\tfsmonitor = {program}\n")


def _bare_obeyed(ws: Path, scratch: Path) -> bool:
    return "fsmonitor" in _git(ws / "fixtures", "config", "--list").stdout


VECTORS = [
    Vector(name="config-fsmonitor", attack=_fsmonitor_config, obeyed=_ran),
    Vector(name="hooks", attack=_hook, obeyed=_ran),
    Vector(name="gitfile", attack=_gitfile, obeyed=_reads_other),
    Vector(name="commondir", attack=_commondir, obeyed=_reads_other),
    Vector(name="alternates", attack=_alternates, obeyed=_reads_other_objects),
    Vector(name="bare-lookalike", attack=_bare_lookalike, obeyed=_bare_obeyed),
]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v.name)
async def test_each_vector_is_real_and_refused_by_default(
    repo: Path, tmp_path: Path, vector: Vector
) -> None:
    lifted = tmp_path / "lifted"
    shutil.copytree(repo, lifted / "ws")
    scratch_lifted = lifted / "scratch"
    scratch_lifted.mkdir()
    await vector.attack(Tools(lifted / "ws", protect_git=False), lifted / "ws", scratch_lifted)
    assert vector.obeyed(lifted / "ws", scratch_lifted), "the vector should work unguarded"

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(ToolError, match="protect_git: false"):
        await vector.attack(Tools(repo), repo, scratch)
    assert not vector.obeyed(repo, scratch)


# --- every tool and verb --------------------------------------------------------------------


async def test_every_tool_and_verb_is_refused(repo: Path) -> None:
    tools = Tools(repo)
    (repo / ".git/hooks/pre-push").write_text("#!/bin/sh\n")
    config = (repo / ".git/config").read_text()
    attempts = [
        tools.write.run({"path": ".git/config", "content": "x"}, tools.ctx(tools.write)),
        tools.edit.run(
            {"path": ".git/config", "old_string": "[core]", "new_string": "[core]\n\tx = 1"},
            tools.ctx(tools.edit),
        ),
        tools.patch("*** Add File: .git/hooks/post-checkout\n+#!/bin/sh\n"),
        tools.patch("*** Update File: .git/config\n@@\n-[core]\n+[core]\n+\tpager = x\n"),
        tools.patch("*** Delete File: .git/hooks/pre-push\n"),
        tools.patch("*** Update File: a.txt\n*** Move to: .git/hooks/pre-commit\n@@\n-a\n+b\n"),
        tools.patch("*** Update File: .git/hooks/pre-push\n*** Move to: x.sh\n@@\n-#!/bin/sh\n+\n"),
        tools.patch("*** Add File: ok.txt\n+fine\n*** Add File: vendor/lib/.git\n+gitdir: /x\n"),
    ]
    for attempt in attempts:
        with pytest.raises(ToolError, match="protect_git: false"):
            await attempt
    assert (repo / ".git/config").read_text() == config
    assert (repo / ".git/hooks/pre-push").exists()
    assert not (repo / "ok.txt").exists()  # the whole patch is refused, atomically
    assert (repo / "a.txt").read_text() == "a\n"


# --- spellings that must not get around it -------------------------------------------------

TRICKS = [
    ".git/config",
    "./.git//config",
    "sub/../.git/config",
    "nested/.git/config",
    "nested/deeper/.git/hooks/post-merge",
    ".git/hooks",
    ".git/config.worktree",
    ".git/objects/info/http-alternates",
    ".git/modules/lib/config",
    ".git/modules/lib/hooks/pre-commit",
    ".git/modules/a/b/commondir",
    ".git/worktrees/wt/commondir",
    ".git/worktrees/wt/config.worktree",
    ".git",
    "vendor/.git",
    ".GIT/config",
    ".Git/HOOKS/pre-commit",
    ".git/Config",
    ".git./config",
    ".git /config",
    "GIT~1/config",
    ".g\u200cit/config",
    ".git\ufeff/hooks/x",
    "\uff0egit/config",
    ".git::$INDEX_ALLOCATION/config",
]


@pytest.mark.parametrize("path", TRICKS)
async def test_spellings_are_refused(repo: Path, path: str) -> None:
    (repo / "sub").mkdir()
    tools = Tools(repo)
    with pytest.raises(ToolError, match="protect_git: false"):
        await tools.write_file(path, "[core]\n\tpager = x\n")
    with pytest.raises(ToolError, match="protect_git: false"):
        await tools.write_file(str(repo / path), "x")


async def test_symlinks_are_followed_before_the_check(repo: Path) -> None:
    (repo / "hooks-link").symlink_to(repo / ".git/hooks")
    (repo / "cfg").symlink_to(repo / ".git/config")
    (repo / "dangling").symlink_to(repo / ".git/hooks/not-yet")
    (repo / "outer").mkdir()
    (repo / "outer/up").symlink_to(repo)
    tools = Tools(repo)
    for path in ("hooks-link/pre-commit", "cfg", "dangling", "outer/up/.git/config"):
        with pytest.raises(ToolError, match="protect_git: false"):
            await tools.write_file(path, "x")
    assert not (repo / ".git/hooks/pre-commit").exists()


async def test_a_bare_lookalike_is_refused_in_either_order(repo: Path) -> None:
    tools = Tools(repo)
    await tools.write_file("fx/config", "[core]\n")  # a plain file named config: fine
    await tools.write_file("fx/HEAD", "ref: refs/heads/main\n")
    await tools.write_file("fx/objects/.keep", "")
    with pytest.raises(ToolError, match="looks like a git directory"):
        await tools.write_file("fx/refs/heads/main", "0" * 40 + "\n")  # the last piece
    await tools.write_file("fy/HEAD", "ref: refs/heads/main\n")
    await tools.write_file("fy/objects/.keep", "")
    await tools.write_file("fy/refs/.keep", "")
    for path in ("fy/config", "fy/hooks/pre-commit", "fy/commondir", "fy/objects/info/alternates"):
        with pytest.raises(ToolError, match="looks like a git directory"):
            await tools.write_file(path, "x")


async def test_the_users_git_configuration_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "custom.cfg"))
    tools = Tools(home)
    for path in (".gitconfig", ".config/git/config", "custom.cfg"):
        with pytest.raises(ToolError, match="user's own git configuration"):
            await tools.write_file(path, "[core]\n")
    await tools.write_file("project/.gitconfig", "[core]\n")  # a project's file: fine


# --- what stays allowed ---------------------------------------------------------------------

ALLOWED = [
    ".gitignore",
    ".gitattributes",
    ".gitmodules",
    ".github/workflows/ci.yml",
    ".git/info/exclude",
    ".git/COMMIT_EDITMSG",
    ".git/description",
    ".gitkeep",
    "src/hooks/useThing.ts",
    "src/config/settings.py",
    "config",
    "config.worktree",
    "HEAD",
    "my.git/readme",
    ".github/.git-blame-ignore-revs",
    "notes/git~/x",
]


@pytest.mark.parametrize("path", ALLOWED)
async def test_ordinary_files_stay_writable(repo: Path, path: str) -> None:
    await Tools(repo).write_file(path, "fine\n")
    assert (repo / path).read_text() == "fine\n"


def test_the_guard_is_pure_on_the_path_for_ordinary_names(tmp_path: Path) -> None:
    assert git_refusal(tmp_path / "src" / "main.py") is None
    assert git_refusal(tmp_path / ".git" / "refs" / "heads" / "main") is None
    assert git_refusal(tmp_path / ".git" / "hooks" / "x") is not None


# --- the option -----------------------------------------------------------------------------


def test_the_option_is_located_like_other_builtin_options() -> None:
    with pytest.raises(
        ManifestError, match=r"<manifest>:2:\d+: .*builtins.write.protect_git.*true or false"
    ):
        create_toolkit("version: 1\nbuiltins: {write: {protect_git: maybe}}\n")
    with pytest.raises(ConfigError, match="expected true or false"):
        patch_tools({"protect_git": "no"})


def test_the_option_lifts_the_guard_through_a_toolkit(repo: Path) -> None:
    (repo / "sub").mkdir()
    call = {"path": "sub/.git", "content": "gitdir: /elsewhere\n"}
    with create_toolkit(builtins=["write"], workspace=repo) as toolkit:
        refused = toolkit.execute("write", call)
    assert refused.is_error and "protect_git: false" in refused.content
    assert "gitfile" in refused.content
    with create_toolkit(builtins={"write": {"protect_git": False}}, workspace=repo) as toolkit:
        assert not toolkit.execute("write", call).is_error
    assert (repo / "sub/.git").read_text() == "gitdir: /elsewhere\n"


def test_protected_under_lists_what_a_sandbox_must_mount_read_only(repo: Path) -> None:
    from builtin._gitguard import protected_under

    _git(
        repo,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
    )
    (repo / "lib").mkdir()
    _git(repo / "lib", "init", "-q", ".")
    (repo / "vendor").mkdir()
    (repo / "vendor/.git").write_text("gitdir: ../.git/modules/vendor\n")
    (repo / ".git/modules/vendor/hooks").mkdir(parents=True)
    (repo / ".git/modules/vendor/HEAD").write_text("ref: refs/heads/main\n")
    for name in ("HEAD", "objects/.k", "refs/.k"):
        (repo / "fx" / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / "fx" / name).write_text("x\n")
    found = {p.relative_to(repo).as_posix() for p in protected_under(repo)}
    for want in (
        ".git",
        ".git/config",
        ".git/hooks",
        ".git/commondir",
        ".git/objects/info/alternates",
        ".git/modules/vendor/config",
        ".git/modules/vendor/hooks",
        "lib/.git",
        "lib/.git/config",
        "vendor/.git",
        "fx/config",
        "fx/hooks",
    ):
        assert want in found, want
    # Every listed path is one the file tools refuse.
    assert all(git_refusal(repo / p) is not None for p in found)
    assert not any(p.startswith(".git/objects/") and "info" not in p for p in found)
