"""Nothing left behind after a crash: `write`, `edit`, `apply_patch` and the OAuth token store,
each killed with SIGKILL at random moments hundreds of times while rewriting 4 MB.

After every kill each target holds one whole version (the old or the new, never a mix), and
anything else in the folder is one of the tools' own temp files, which the next write there
removes: once it has run, the folder holds the targets alone. Both ways of staging are killed:
an unnamed `O_TMPFILE` linked in at the end, and the named temp file used where the filesystem
has no `O_TMPFILE`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from builtin.files import files_tools
from builtin.patch import patch_tools
from toolnexus import ToolContext
from toolnexus.mcp.tokens import TokenStore

from .crashkill import contents, fork_server

KILLS = {"write": 50, "edit": 50, "apply_patch": 150, "tokens": 150}
"""Kills of each job staging with `O_TMPFILE` (a quarter of that on the named fallback): each
class of leftover (the temp file of all three tools, the backup apply_patch used to make, the
token store's copy) is killed at about two hundred moments or more. `TOOLNEXUS_CRASH_KILLS`
sets another count for every job (fewer while iterating on a change, more for a soak)."""


def _kills(kind: str, mode: str) -> int:
    count = int(os.environ.get("TOOLNEXUS_CRASH_KILLS", KILLS[kind]))
    return count if mode == "tmpfile" else max(1, count // 4)


OURS = re.compile(r"^\..+\.toolnexus-[0-9a-f]{12}\.tmp$")
"""The tools' temp files, as the sweep recognises them (`builtin/_common.py`)."""
DELAY = {"write": 0.03, "edit": 0.04, "apply_patch": 0.06, "tokens": 0.04}
"""The longest wait before a kill: about one or two rounds of the job (a 4 MB write takes about
10 ms, a patch of two such files 50 ms), so kills land in every phase."""


def _others(folder: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


def _run(tool_name: str, folder: Path, args: dict[str, Any]) -> None:
    if tool_name == "apply_patch":
        (tool,) = patch_tools({})
    else:
        _, write, edit = files_tools({"require_read": False})
        tool = write if tool_name == "write" else edit
    ctx = ToolContext(
        call_id="after", tool_name=tool.name, workspace=folder, roots=(folder,), state={}
    )

    async def call() -> None:
        result = await tool.run(args, ctx)
        assert not result.is_error, result.content

    anyio.run(call)


@pytest.mark.parametrize("mode", ["tmpfile", "named"])
@pytest.mark.parametrize("kind", ["write", "edit", "apply_patch"])
def test_a_killed_file_tool_leaves_a_whole_version_and_nothing_the_next_write_keeps(
    tmp_path: Path, kind: str, mode: str
) -> None:
    names = ["a.txt", "b.txt"] if kind == "apply_patch" else ["a.txt"]
    versions = {contents(0), contents(1)}
    for name in names:
        (tmp_path / name).write_text(contents(0))
    with fork_server() as server:
        for _ in range(_kills(kind, mode)):
            job = {"kind": kind, "mode": mode, "folder": str(tmp_path), "names": names}
            server.kill_one(job, max_delay=DELAY[kind])
            for name in names:
                assert (tmp_path / name).read_text() in versions, f"{name} is partial"
            strays = [n for n in _others(tmp_path, set(names)) if not OURS.match(n)]
            assert strays == [], "files that are not the tools' own temp files were left"
    # The next write in the folder removes what the kills left.
    if kind == "write":
        _run("write", tmp_path, {"path": "a.txt", "content": "done\n"})
    else:
        old = "version A" if "version A" in (tmp_path / "a.txt").read_text() else "version B"
        if kind == "edit":
            _run("edit", tmp_path, {"path": "a.txt", "old_string": old, "new_string": "v"})
        else:
            _run(
                "apply_patch",
                tmp_path,
                {"patch": "*** Begin Patch\n*** Add File: c.txt\n+c\n*** End Patch\n"},
            )
            names.append("c.txt")
    assert _others(tmp_path, set(names)) == []


@pytest.mark.parametrize("mode", ["tmpfile", "named"])
def test_a_killed_token_store_update_leaves_no_copy_of_the_tokens(
    tmp_path: Path, mode: str
) -> None:
    store = tmp_path / "tokens.json"
    kept = {store.name, f".{store.name}.lock"}
    with fork_server() as server:
        for _ in range(_kills("tokens", mode)):
            job = {"kind": "tokens", "mode": mode, "folder": str(tmp_path), "path": str(store)}
            server.kill_one(job, max_delay=DELAY["tokens"])
            if store.exists():
                record = TokenStore(store).get("https://mcp.example/")
                assert record is None or record["blob"] in {contents(0), contents(1)}
            strays = [n for n in _others(tmp_path, kept) if not OURS.match(n)]
            assert strays == [], "files that are not the store's own temp files were left"
    # logout removes the login and whatever a crash left.
    assert TokenStore(store).remove("https://mcp.example/")
    assert _others(tmp_path, kept) == []


def test_the_sweep_keeps_whatever_it_cannot_be_sure_is_an_abandoned_temp_file(
    tmp_path: Path,
) -> None:
    import fcntl

    (tmp_path / "a.txt").write_text("old\n")
    abandoned = tmp_path / ".a.txt.toolnexus-00000000000a.tmp"
    abandoned.write_text("left by a crash\n")
    kept: dict[str, str | None] = {
        # Names that are not exactly ours: a user's files, an older version's temp files.
        ".a.txt.0123abcd.tmp": None,
        "a.txt.toolnexus-00000000000b.tmp": None,
        ".a.txt.toolnexus-00000000000C.tmp": None,
        ".a.txt.toolnexus-00000000000d.tmp.bak": None,
        # Ours by name, but in use, linked elsewhere too, or not a regular file.
        ".a.txt.toolnexus-00000000000e.tmp": "locked",
        ".a.txt.toolnexus-00000000000f.tmp": "linked",
        ".b.txt.toolnexus-000000000010.tmp": "folder",
    }
    if os.geteuid() == 0:  # only root can give a file away
        kept[".c.txt.toolnexus-000000000011.tmp"] = "another user's"
    held: list[Any] = []
    for name, how in kept.items():
        path = tmp_path / name
        if how == "folder":
            path.mkdir()
            continue
        path.write_text("keep me\n")
        if how == "locked":  # a live writer holds its temp file's lock
            handle = path.open()
            fcntl.flock(handle, fcntl.LOCK_EX)
            held.append(handle)
        elif how == "linked":
            os.link(path, tmp_path / "elsewhere.txt")
        elif how == "another user's":
            os.chown(path, 65534, 65534)
    try:
        _run("write", tmp_path, {"path": "a.txt", "content": "new\n"})
    finally:
        for handle in held:
            handle.close()
    assert not abandoned.exists()
    assert set(_others(tmp_path, {"a.txt", "elsewhere.txt"})) == set(kept)
    assert (tmp_path / "a.txt").read_text() == "new\n"
