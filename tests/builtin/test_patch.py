"""apply_patch: the Codex reference scenarios, our own scenarios, and the behaviour around them.

Every scenario is a folder holding `input/` (the starting tree; absent means empty),
`patch.txt` and `expected/` (the exact final tree). The runner copies `input/` to a temp
folder, applies the patch there through the tool, ignores whether the call failed, and compares
the whole tree: relative paths (folders included) and bytes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from builtin.files import files_tools
from builtin.patch import patch_tools
from toolnexus import (
    ConfigError,
    Result,
    SandboxPolicy,
    Tool,
    ToolContext,
    ToolError,
    create_toolkit,
)

pytestmark = pytest.mark.anyio

REPO = Path(__file__).parents[2]
REFERENCE = REPO / ".." / "shared" / "conformance" / "codex-apply-patch"
OURS = Path(__file__).parent / "patch_scenarios"

# Upstream leaves the first hunk applied when a later one fails; ours is atomic, so the tree
# must stay exactly as `input/` was (see SOURCE.md beside the scenarios).
ATOMIC_DIFFERENCES = {"015_failure_after_partial_success_leaves_changes"}


def _cases(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


KEEP = ".gitkeep"
"""Git stores no empty folder: in our scenarios a `.gitkeep` file stands for "this folder
exists (and holds nothing else)"; it is not part of the tree."""


def _tree(root: Path) -> dict[str, bytes | None]:
    """Relative path -> bytes for files, None for folders (so empty folders count too)."""
    if not root.is_dir():
        return {}
    tree: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        if path.name == KEEP:
            continue
        rel = path.relative_to(root).as_posix()
        tree[rel] = None if path.is_dir() else path.read_bytes()
    return tree


def _ctx(workspace: Path, state: dict[str, object] | None = None) -> ToolContext:
    return ToolContext(
        call_id="call-1",
        tool_name="apply_patch",
        workspace=workspace,
        roots=(workspace,),
        state=state if state is not None else {},
    )


@pytest.fixture
def apply_patch() -> Tool:
    (tool,) = patch_tools({})
    return tool


async def _run_scenario(case: Path, tmp_path: Path, tool: Tool) -> Path:
    work = tmp_path / "work"
    if (case / "input").is_dir():
        shutil.copytree(case / "input", work)
        # The scenarios are about content; a read-only checkout of them must not make the
        # copies read-only too (apply_patch refuses read-only files).
        for path in [work, *work.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    else:
        work.mkdir()
    patch = (case / "patch.txt").read_bytes().decode("utf-8")
    # The scenarios judge the tree only, as upstream's runner does: a refusal is fine.
    with contextlib.suppress(ToolError):
        await tool.run({"patch": patch}, _ctx(work))
    return work


NO_REFERENCE = (
    f"the Codex reference scenarios live in ../shared/conformance/ beside the checkout, and "
    f"{REFERENCE.resolve()} is absent (a bare clone); our own scenarios still run"
)
needs_reference = pytest.mark.skipif(not REFERENCE.is_dir(), reason=NO_REFERENCE)


def _reference_cases() -> list[Any]:
    if not REFERENCE.is_dir():
        return [pytest.param(None, id="absent", marks=pytest.mark.skip(reason=NO_REFERENCE))]
    return [pytest.param(case, id=case.name) for case in _cases(REFERENCE)]


@needs_reference
def test_reference_scenarios_are_present() -> None:
    # Where shared/ is checked out beside the clone (CI), the conformance run is never empty.
    assert len(_cases(REFERENCE)) >= 23


@pytest.mark.parametrize("case", _reference_cases())
async def test_reference_scenario(case: Path, tmp_path: Path, apply_patch: Tool) -> None:
    work = await _run_scenario(case, tmp_path, apply_patch)
    if case.name in ATOMIC_DIFFERENCES:
        assert _tree(work) == _tree(case / "input")
    else:
        assert _tree(work) == _tree(case / "expected")


def test_own_scenarios_are_present() -> None:
    assert len(_cases(OURS)) >= 10


@pytest.mark.parametrize("case", _cases(OURS), ids=lambda p: p.name)
async def test_own_scenario(case: Path, tmp_path: Path, apply_patch: Tool) -> None:
    work = await _run_scenario(case, tmp_path, apply_patch)
    assert _tree(work) == _tree(case / "expected")


async def _apply(
    tool: Tool, workspace: Path, patch: str, state: dict[str, object] | None = None
) -> Result:
    return await tool.run({"patch": patch}, _ctx(workspace, state))


async def test_result_lists_each_file_with_its_letter(tmp_path: Path, apply_patch: Tool) -> None:
    (tmp_path / "old.txt").write_text("x\n")
    (tmp_path / "mod.txt").write_text("a\n")
    result = await _apply(
        apply_patch,
        tmp_path,
        "*** Begin Patch\n*** Add File: new.txt\n+n\n*** Delete File: old.txt\n"
        "*** Update File: mod.txt\n*** Move to: moved.txt\n@@\n-a\n+b\n*** End Patch",
    )
    assert not result.is_error
    assert result.content.splitlines() == [
        "Success. Updated the following files:",
        "A new.txt",
        "D old.txt",
        "M moved.txt",
    ]


async def test_mismatch_names_hunk_file_and_the_line_that_differs(
    tmp_path: Path, apply_patch: Tool
) -> None:
    (tmp_path / "ok.txt").write_text("fine\n")
    (tmp_path / "code.py").write_text("def f():\n    a = 1\n    b = 2\n    return a\n")
    patch = (
        "*** Begin Patch\n*** Update File: ok.txt\n@@\n-fine\n+good\n"
        "*** Update File: code.py\n@@\n def f():\n     a = 1\n-    b = 3\n+    b = 4\n"
        "*** End Patch"
    )
    with pytest.raises(ToolError) as info:
        await _apply(apply_patch, tmp_path, patch)
    message = str(info.value)
    assert "hunk 2 (Update File: code.py, patch line 6)" in message
    assert "change 1 (patch line 7)" in message
    assert "first 2 line(s) match at line 1" in message
    assert "'    b = 3'" in message
    assert "line 3 of the file is '    b = 2'" in message
    assert "Nothing was changed" in message
    assert (tmp_path / "ok.txt").read_text() == "fine\n"


async def test_missing_context_header_is_named(tmp_path: Path, apply_patch: Tool) -> None:
    (tmp_path / "m.py").write_text("class Thing:\n    x = 1\n")
    with pytest.raises(
        ToolError,
        match=r"'@@ class Thingy:' line was not found.*closest line "
        r"is line 1: 'class Thing:'",
    ):
        await _apply(
            apply_patch,
            tmp_path,
            "*** Begin Patch\n*** Update File: m.py\n@@ class Thingy:\n-    x = 1\n+    x = 2\n"
            "*** End Patch",
        )


async def test_parse_errors_give_the_patch_line(tmp_path: Path, apply_patch: Tool) -> None:
    with pytest.raises(ToolError, match=r"line 1 of the patch: the first line must be"):
        await _apply(apply_patch, tmp_path, "--- a/x\n+++ b/x\n")
    with pytest.raises(ToolError, match=r"line 3 of the patch: the last line must be"):
        await _apply(apply_patch, tmp_path, "*** Begin Patch\n*** Add File: a\n+a")
    with pytest.raises(ToolError, match=r"line 4 of the patch: unexpected line 'oops'"):
        await _apply(
            apply_patch,
            tmp_path,
            "*** Begin Patch\n*** Update File: a\n@@\noops\n*** End Patch",
        )
    assert _tree(tmp_path) == {}


@pytest.mark.parametrize(
    "header",
    [
        "*** Add File: ../escape.txt",
        "*** Add File: /tmp/toolnexus-escape.txt",
        "*** Add File: link/escape.txt",
        "*** Update File: inside.txt\n*** Move to: ../moved.txt",
    ],
    ids=["dotdot", "absolute", "symlink-out", "move-out"],
)
async def test_paths_outside_the_workspace_are_refused(
    tmp_path: Path, apply_patch: Tool, header: str
) -> None:
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "link").symlink_to(outside)
    (workspace / "inside.txt").write_text("in\n")
    body = "\n@@\n-in\n+out" if "Move" in header else "\n+x"
    with pytest.raises(ToolError):
        await _apply(apply_patch, workspace, f"*** Begin Patch\n{header}{body}\n*** End Patch")
    assert _tree(outside) == {}
    assert not Path("/tmp/toolnexus-escape.txt").exists()
    assert (workspace / "inside.txt").read_text() == "in\n"


async def test_an_absolute_path_inside_the_workspace_works(
    tmp_path: Path, apply_patch: Tool
) -> None:
    target = tmp_path / "abs.txt"
    patch = f"*** Begin Patch\n*** Add File: {target}\n+a\n*** End Patch"
    await _apply(apply_patch, tmp_path, patch)
    assert target.read_text() == "a\n"


async def test_permissions_are_kept_and_no_temp_files_remain(
    tmp_path: Path, apply_patch: Tool
) -> None:
    script = tmp_path / "run.sh"
    script.write_text("echo one\n")
    script.chmod(0o751)
    await _apply(
        apply_patch,
        tmp_path,
        "*** Begin Patch\n*** Update File: run.sh\n@@\n-echo one\n+echo two\n*** End Patch",
    )
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]


async def test_a_failed_rename_restores_the_files_already_changed(
    tmp_path: Path, apply_patch: Tool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rename after successful staging almost never fails for real (not even as root with a
    # full disk), so the failure is injected: the second rename raises.
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "b.txt").write_text("b\n")
    (tmp_path / "c.txt").write_text("c\n")
    real_replace = os.replace
    calls: list[str] = []

    def flaky_replace(src: os.PathLike[str] | str, dst: os.PathLike[str] | str) -> None:
        calls.append(str(dst))
        if len(calls) == 2:
            raise OSError(5, "Input/output error", str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky_replace)
    before = _tree(tmp_path)
    with pytest.raises(ToolError, match="already changed were restored"):
        await _apply(
            apply_patch,
            tmp_path,
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n*** Update File: b.txt\n@@\n"
            "-b\n+B\n*** Delete File: c.txt\n*** Add File: d/new.txt\n+d\n*** End Patch",
        )
    assert _tree(tmp_path) == before


async def test_patched_files_count_as_read_for_edit(tmp_path: Path, apply_patch: Tool) -> None:
    # apply_patch checks its context lines itself; afterwards the model knows the new text, so
    # an edit may follow without another read.
    _read, _write, edit = files_tools({})
    state: dict[str, object] = {}
    (tmp_path / "f.txt").write_text("one\ntwo\n")
    await _apply(
        apply_patch,
        tmp_path,
        "*** Begin Patch\n*** Update File: f.txt\n@@\n-one\n+uno\n*** End Patch",
        state,
    )
    ctx = _ctx(tmp_path, state)
    await edit.run({"path": "f.txt", "old_string": "two", "new_string": "dos"}, ctx)
    assert (tmp_path / "f.txt").read_text() == "uno\ndos\n"


async def test_binary_files_are_not_updated(tmp_path: Path, apply_patch: Tool) -> None:
    (tmp_path / "blob.bin").write_bytes(b"a\x00b\n")
    with pytest.raises(ToolError, match="binary file"):
        await _apply(
            apply_patch,
            tmp_path,
            "*** Begin Patch\n*** Update File: blob.bin\n@@\n-a\n+b\n*** End Patch",
        )


def test_tool_flags_and_schema() -> None:
    (tool,) = patch_tools({})
    assert tool.name == "apply_patch"
    assert tool.source == "builtin"
    assert (tool.read_only, tool.destructive, tool.open_world) == (False, True, False)
    assert tool.parameters["required"] == ["patch"]
    assert "*** Begin Patch" in tool.description


def test_unknown_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="did you mean 'max_file_bytes'"):
        patch_tools({"max_file_byte": 10})


def test_a_toolkit_runs_apply_patch_and_reports_errors_as_results(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    with create_toolkit(builtins=["apply_patch"], workspace=tmp_path) as toolkit:
        ok = toolkit.execute(
            "apply_patch",
            {"patch": "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+two\n*** End Patch"},
        )
        assert ok.content.endswith("M a.txt")
        failed = toolkit.execute(
            "apply_patch", {"patch": "*** Begin Patch\n*** Delete File: nope\n*** End Patch"}
        )
        assert failed.is_error
        assert "hunk 1 (Delete File: nope" in failed.content
    assert (tmp_path / "a.txt").read_text() == "two\n"


async def test_the_sandbox_policy_applies_to_every_hunk(tmp_path: Path, apply_patch: Tool) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    ctx = _ctx(tmp_path)
    ctx.sandbox = SandboxPolicy(deny_read=("/**/.env",))
    with pytest.raises(ToolError, match="deny_read"):
        await apply_patch.run(
            {
                "patch": "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n"
                "*** Add File: .env\n+TOKEN=x\n*** End Patch"
            },
            ctx,
        )
    assert _tree(tmp_path) == {"a.txt": b"a\n"}


async def test_read_only_files_are_refused_for_every_change(
    tmp_path: Path, apply_patch: Tool
) -> None:
    (tmp_path / "ok.txt").write_text("a\n")
    locked = tmp_path / "locked.txt"
    locked.write_text("a\n")
    locked.chmod(0o444)
    patches = {
        "update": "*** Update File: locked.txt\n@@\n-a\n+b\n",
        "delete": "*** Delete File: locked.txt\n",
        "overwrite": "*** Add File: locked.txt\n+b\n",
        "move": "*** Update File: locked.txt\n*** Move to: moved.txt\n@@\n-a\n+b\n",
    }
    for verb, body in patches.items():
        patch = f"*** Begin Patch\n*** Update File: ok.txt\n@@\n-a\n+b\n{body}*** End Patch"
        with pytest.raises(ToolError, match=rf"refusing to {verb} 'locked.txt': it is read-only"):
            await _apply(apply_patch, tmp_path, patch)
    with pytest.raises(ToolError, match=r"refusing to overwrite 'locked.txt': it is read-only"):
        await _apply(
            apply_patch,
            tmp_path,
            "*** Begin Patch\n*** Update File: ok.txt\n*** Move to: locked.txt\n@@\n-a\n+b\n"
            "*** End Patch",
        )
    assert _tree(tmp_path) == {"locked.txt": b"a\n", "ok.txt": b"a\n"}


async def test_a_read_only_folder_is_refused(tmp_path: Path, apply_patch: Tool) -> None:
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    (frozen / "f.txt").write_text("a\n")
    frozen.chmod(0o555)
    try:
        with pytest.raises(ToolError, match=r"its folder 'frozen' is read-only"):
            await _apply(
                apply_patch,
                tmp_path,
                "*** Begin Patch\n*** Delete File: frozen/f.txt\n*** End Patch",
            )
        with pytest.raises(ToolError, match=r"its folder 'frozen' is read-only"):
            await _apply(
                apply_patch,
                tmp_path,
                "*** Begin Patch\n*** Add File: frozen/g/h.txt\n+x\n*** End Patch",
            )
    finally:
        frozen.chmod(0o755)
    assert _tree(tmp_path) == {"frozen": None, "frozen/f.txt": b"a\n"}
