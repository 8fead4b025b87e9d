"""Faults of the file tools: concurrent writers, full disks, races and permissions.

Each case checks what the model sees (a success or an error naming the file), that nothing a
success reported is lost, that no temp file is left, and (through `no_leaks`) that no fd, thread
or child process outlives the case.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

import builtin.files
from builtin._common import Staged
from toolnexus import ToolCall, Toolkit, create_toolkit

REPO = Path(__file__).parents[2]
WRITERS = 20
_T = TypeVar("_T")


def _leftovers(folder: Path) -> list[str]:
    """Temp and backup files the tools stage beside their targets."""
    return sorted(p.name for p in folder.rglob(".*") if p.suffix in {".tmp", ".orig"})


def _numbered(count: int) -> str:
    return "".join(f"line {i}\n" for i in range(count))


# --- concurrent writers in one process ----------------------------------------------------


def _at_once(action: Callable[[int], _T]) -> list[_T]:
    """`action(i)` for each of the WRITERS, in threads of their own let go at the same moment."""
    start = threading.Barrier(WRITERS)

    def run(i: int) -> _T:
        start.wait()
        return action(i)

    with concurrent.futures.ThreadPoolExecutor(WRITERS) as pool:
        return list(pool.map(run, range(WRITERS)))


def _each_writes(kits: list[Toolkit], path: str) -> list[tuple[bool, str]]:
    """Toolkit i writes `writer i` to `path`, all at once: (is_error, content) of each. The
    toolkits are closed after."""

    def write(i: int) -> tuple[bool, str]:
        result = kits[i].execute("write", {"path": path, "content": f"writer {i}\n"})
        return result.is_error, result.content

    try:
        return _at_once(write)
    finally:
        for kit in kits:
            kit.close()


@pytest.mark.parametrize("require_read", [True, False])
def test_concurrent_edits_in_threads_lose_nothing(
    tmp_path: Path, no_leaks: None, require_read: bool
) -> None:
    target = tmp_path / "f.txt"
    target.write_text(_numbered(WRITERS))
    builtins = {"read": {}, "edit": {"require_read": require_read}}
    with create_toolkit(builtins=builtins, workspace=tmp_path) as toolkit:
        assert not toolkit.execute("read", {"path": "f.txt"}).is_error

        def edit(i: int) -> tuple[bool, str]:
            result = toolkit.execute(
                "edit",
                {"path": "f.txt", "old_string": f"line {i}\n", "new_string": f"line {i} edited\n"},
            )
            return result.is_error, result.content

        results = _at_once(edit)
    # One toolkit: each edit sees the one before it, so every one applies.
    assert [failed for failed, _ in results] == [False] * WRITERS, results
    assert target.read_text() == "".join(f"line {i} edited\n" for i in range(WRITERS))
    assert _leftovers(tmp_path) == []


def test_concurrent_edits_through_execute_many_across_agents(
    tmp_path: Path, no_leaks: None
) -> None:
    """Agents sharing a toolkit, each sending its own batch from its own thread."""
    target = tmp_path / "f.txt"
    target.write_text(_numbered(WRITERS))
    with create_toolkit(builtins=["read", "edit"], workspace=tmp_path) as toolkit:
        toolkit.execute("read", {"path": "f.txt"})

        def agent(i: int) -> list[bool]:
            batch = [
                ToolCall(
                    name="edit",
                    arguments={"path": "f.txt", "old_string": f"line {i}\n", "new_string": "x\n"},
                    id=f"{i}-a",
                ),
                ToolCall(
                    name="edit",
                    arguments={"path": "f.txt", "old_string": "x\n", "new_string": f"agent {i}\n"},
                    id=f"{i}-b",
                ),
            ]
            return [r.is_error for r in toolkit.execute_many(batch)]

        outcomes = _at_once(agent)
    lines = target.read_text().splitlines()
    # The second edit of a batch may meet another agent's "x" first: then that agent's own second
    # edit finds no "x" (or two) and fails clearly. What must never happen: a success whose
    # change is missing, or a line lost.
    assert len(lines) == WRITERS
    first_ok = sum(not o[0] for o in outcomes)
    assert first_ok == WRITERS
    assert sum(not o[1] for o in outcomes) == sum(line.startswith("agent ") for line in lines)
    assert all(line == "x" or line.startswith("agent ") for line in lines)


def test_concurrent_writes_of_a_new_file_create_it_once(tmp_path: Path, no_leaks: None) -> None:
    """Twenty agents with their own toolkits all try to create the same file."""
    kits = [create_toolkit(builtins=["write"], workspace=tmp_path) for _ in range(WRITERS)]
    results = _each_writes(kits, "new/file.txt")
    created = [content for failed, content in results if not failed]
    assert len(created) == 1, results
    # Everyone else was told the file now exists and was not read by them.
    assert all("has not been read" in c for failed, c in results if failed)
    winner = next(i for i, (failed, _) in enumerate(results) if not failed)
    assert (tmp_path / "new/file.txt").read_text() == f"writer {winner}\n"


def test_concurrent_overwrites_of_a_read_file_let_one_through(
    tmp_path: Path, no_leaks: None
) -> None:
    """Twenty agents with their own toolkits read one file, then all overwrite it."""
    (tmp_path / "f.txt").write_text("original\n")
    kits = [create_toolkit(builtins=["read", "write"], workspace=tmp_path) for _ in range(WRITERS)]
    for kit in kits:
        kit.execute("read", {"path": "f.txt"})
    results = _each_writes(kits, "f.txt")
    winners = [i for i, (failed, _) in enumerate(results) if not failed]
    assert len(winners) == 1, results
    assert all("changed on disk since it was last read" in c for failed, c in results if failed)
    assert (tmp_path / "f.txt").read_text() == f"writer {winners[0]}\n"


def test_concurrent_patches_lose_nothing(tmp_path: Path, no_leaks: None) -> None:
    """Patches touching overlapping files in opposite orders: no deadlock, no lost change."""
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text(_numbered(WRITERS))
    with create_toolkit(builtins=["apply_patch"], workspace=tmp_path) as toolkit:

        def text(i: int) -> str:
            first, second = ("a.txt", "b.txt") if i % 2 else ("b.txt", "a.txt")
            return "*** Begin Patch\n" + "".join(
                f"*** Update File: {name}\n@@\n-line {i}\n+patched {i}\n"
                for name in (first, second)
            )

        texts = [text(i) for i in range(WRITERS)]  # built before they are let go

        def patch(i: int) -> bool:
            result = toolkit.execute("apply_patch", {"patch": texts[i] + "*** End Patch"})
            return result.is_error

        failed = _at_once(patch)
    assert failed == [False] * WRITERS
    for name in ("a.txt", "b.txt"):
        assert (tmp_path / name).read_text() == "".join(f"patched {i}\n" for i in range(WRITERS))
    assert _leftovers(tmp_path) == []


def test_edit_and_patch_and_write_interleaved(tmp_path: Path, no_leaks: None) -> None:
    target = tmp_path / "f.txt"
    target.write_text(_numbered(WRITERS))
    with create_toolkit(builtins=["read", "edit", "apply_patch"], workspace=tmp_path) as toolkit:
        toolkit.execute("read", {"path": "f.txt"})

        def change(i: int) -> bool:
            if i % 2:
                result = toolkit.execute(
                    "edit", {"path": "f.txt", "old_string": f"line {i}\n", "new_string": f"e{i}\n"}
                )
            else:
                result = toolkit.execute(
                    "apply_patch",
                    {
                        "patch": f"*** Begin Patch\n*** Update File: f.txt\n@@\n-line {i}\n+p{i}\n"
                        "*** End Patch"
                    },
                )
            return result.is_error

        failed = _at_once(change)
    assert failed == [False] * WRITERS
    want = [f"e{i}" if i % 2 else f"p{i}" for i in range(WRITERS)]
    assert target.read_text().splitlines() == want


# --- concurrent writers in two processes ----------------------------------------------------

_EDITOR = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from toolnexus import create_toolkit

    workspace, who, count, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    builtins = {"read": {}, "edit": {"require_read": mode == "edit"}, "apply_patch": {}}
    outcomes = []
    with create_toolkit(builtins=builtins, workspace=Path(workspace)) as toolkit:
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(count):
            for attempt in range(50):
                toolkit.execute("read", {"path": "f.txt"})
                old, new = f"{who} {i}\\n", f"{who} {i} done\\n"
                if mode == "apply_patch":
                    patch = f"*** Begin Patch\\n*** Update File: f.txt\\n@@\\n-{old}+{new}"
                    result = toolkit.execute("apply_patch", {"patch": patch + "*** End Patch"})
                else:
                    args = {"path": "f.txt", "old_string": old, "new_string": new}
                    result = toolkit.execute("edit", args)
                if not result.is_error:
                    break
                assert "changed on disk" in result.content, result.content
            outcomes.append(not result.is_error)
    print(json.dumps(outcomes), flush=True)
    """
)


@pytest.mark.parametrize("mode", ["edit", "edit-unguarded", "apply_patch"])
def test_two_processes_editing_one_file_lose_nothing(
    tmp_path: Path, no_leaks: None, mode: str
) -> None:
    count = 15
    target = tmp_path / "f.txt"
    target.write_text("".join(f"{who} {i}\n" for i in range(count) for who in ("p", "q")))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _EDITOR, str(tmp_path), who, str(count), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for who in ("p", "q")
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
    assert [p.returncode for p in procs] == [0, 0], outputs
    for output in outputs:
        # A stale edit is retried after a fresh read: every one of them lands in the end.
        assert json.loads(output.splitlines()[-1]) == [True] * count
    want = "".join(f"{who} {i} done\n" for i in range(count) for who in ("p", "q"))
    assert target.read_text() == want
    assert _leftovers(tmp_path) == []


def test_a_writer_held_up_by_another_process_gives_up_with_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    """Another toolnexus process holds the folder's lock: the call waits, then says so."""
    import builtin._common

    monkeypatch.setattr(builtin._common, "LOCK_WAIT_S", 0.5)
    target = tmp_path / "f.txt"
    target.write_text("old\n")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.readline()",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with create_toolkit(builtins={"edit": {"require_read": False}}, workspace=tmp_path) as kit:
            args = {"path": "f.txt", "old_string": "old", "new_string": "new"}
            result = kit.execute("edit", args)
            assert result.is_error
            assert "another process is writing in the folder '.'" in result.content
            assert target.read_text() == "old\n"
            holder.communicate("go\n", timeout=30)
            assert not kit.execute("edit", args).is_error
    finally:
        holder.kill()
        holder.wait()
    assert target.read_text() == "new\n"


def test_a_writer_held_up_in_this_process_gives_up_with_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    import builtin._common
    from toolnexus import ToolContext

    monkeypatch.setattr(builtin._common, "LOCK_WAIT_S", 0.5)
    target = tmp_path / "f.txt"
    target.write_text("old\n")
    ctx = ToolContext(call_id="c", tool_name="edit", workspace=tmp_path, roots=(tmp_path,))
    with create_toolkit(builtins={"edit": {"require_read": False}}, workspace=tmp_path) as kit:
        args = {"path": "f.txt", "old_string": "old", "new_string": "new"}
        with builtin._common.write_lock(ctx, [target.resolve()]):  # another toolkit's writer
            result = kit.execute("edit", args)
        assert result.is_error
        assert "'f.txt' is being changed by another call" in result.content
        assert target.read_text() == "old\n"
        assert not kit.execute("edit", args).is_error
    assert target.read_text() == "new\n"
    assert builtin._common._locks == {}  # no lock entry outlives its users


# --- full disk ------------------------------------------------------------------------------


@contextlib.contextmanager
def _tiny_tmpfs(folder: Path) -> Iterator[Path]:
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs needs root (the RLIMIT_FSIZE cases run everywhere)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.parametrize("tool", ["write", "edit", "apply_patch"])
def test_a_full_disk_leaves_the_old_file_and_no_temp(
    tmp_path: Path, no_leaks: None, tool: str
) -> None:
    with _tiny_tmpfs(tmp_path / "disk") as disk:
        target = disk / "f.txt"
        target.write_text("old content\n")
        big = "x" * 200_000 + "\n"
        with create_toolkit(
            builtins=["read", "write", "edit", "apply_patch"], workspace=disk
        ) as toolkit:
            toolkit.execute("read", {"path": "f.txt"})
            if tool == "write":
                result = toolkit.execute("write", {"path": "f.txt", "content": big})
            elif tool == "edit":
                result = toolkit.execute(
                    "edit", {"path": "f.txt", "old_string": "old content\n", "new_string": big}
                )
            else:
                patch = f"*** Begin Patch\n*** Update File: f.txt\n@@\n-old content\n+{big}"
                result = toolkit.execute("apply_patch", {"patch": patch + "*** End Patch"})
            assert result.is_error
            assert "f.txt" in result.content
            assert "No space left on device" in result.content
            assert target.read_text() == "old content\n"
            assert sorted(p.name for p in disk.iterdir()) == ["f.txt"]
            # The toolkit keeps serving, and the file is still editable once space is back.
            edited = toolkit.execute(
                "edit", {"path": "f.txt", "old_string": "old", "new_string": "new"}
            )
            assert not edited.is_error, edited.content
        assert target.read_text() == "new content\n"


_FSIZE = textwrap.dedent(
    """
    import json, resource, signal, sys
    from pathlib import Path
    from toolnexus import create_toolkit

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    out = []
    tools = ["read", "write", "edit", "apply_patch"]
    with create_toolkit(builtins=tools, workspace=Path(sys.argv[1])) as kit:
        kit.execute("read", {"path": "f.txt"})
        big = "x" * 100_000 + "\\n"
        PATCH = "*** Begin Patch\\n*** Update File: f.txt\\n@@\\n-old content\\n+"
        for name, args in [
            ("write", {"path": "f.txt", "content": big}),
            ("edit", {"path": "f.txt", "old_string": "old", "new_string": big}),
            ("apply_patch", {"patch": PATCH + big + "*** End Patch"}),
            ("write", {"path": "new.txt", "content": big}),
        ]:
            r = kit.execute(name, args)
            out.append([r.is_error, r.content])
    print(json.dumps(out))
    """
)


def test_a_file_size_limit_fault_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("old content\n")
    done = subprocess.run(
        [sys.executable, "-c", _FSIZE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    for failed, content in results:
        assert failed
        assert ".txt" in content and "File too large" in content, content
    assert target.read_text() == "old content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


# --- races and permissions ------------------------------------------------------------------


def test_a_file_replaced_by_a_folder_while_being_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    target = tmp_path / "f.txt"
    target.write_text("old\n")
    real_write_temp = builtin.files.write_temp

    def swap_then_write(path: Path, data: bytes) -> Staged:
        # Another program replaces the file by a folder after the tool read it.
        path.unlink()
        path.mkdir()
        (path / "inside.txt").write_text("keep me\n")
        return real_write_temp(path, data)

    monkeypatch.setattr(builtin.files, "write_temp", swap_then_write)
    with create_toolkit(builtins=["read", "edit"], workspace=tmp_path) as toolkit:
        toolkit.execute("read", {"path": "f.txt"})
        result = toolkit.execute("edit", {"path": "f.txt", "old_string": "old", "new_string": "x"})
    assert result.is_error
    assert "'f.txt'" in result.content
    assert (target / "inside.txt").read_text() == "keep me\n"
    assert _leftovers(tmp_path) == []


def test_a_file_changed_by_another_program_while_being_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    target = tmp_path / "f.txt"
    target.write_text("old\n")
    real_write_temp = builtin.files.write_temp

    def change_then_write(path: Path, data: bytes) -> Staged:
        path.write_text("the user's change, longer\n")
        return real_write_temp(path, data)

    monkeypatch.setattr(builtin.files, "write_temp", change_then_write)
    with create_toolkit(builtins=["read", "edit"], workspace=tmp_path) as toolkit:
        toolkit.execute("read", {"path": "f.txt"})
        result = toolkit.execute("edit", {"path": "f.txt", "old_string": "old", "new_string": "x"})
    assert result.is_error
    assert "'f.txt' changed on disk while" in result.content
    assert target.read_text() == "the user's change, longer\n"
    assert _leftovers(tmp_path) == []


@contextlib.contextmanager
def _unwritable(folder: Path) -> Iterator[None]:
    """`folder` made unwritable for us: a read-only bind mount as root (root ignores modes),
    mode 0555 otherwise."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.parametrize("tool", ["write", "edit", "apply_patch", "write-new"])
def test_a_permission_error_names_the_file_and_changes_nothing(
    tmp_path: Path, no_leaks: None, tool: str
) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    target = folder / "f.txt"
    target.write_text("theirs\n")
    calls = {
        "write": ("write", {"path": "f.txt", "content": "mine\n"}),
        "write-new": ("write", {"path": "new.txt", "content": "mine\n"}),
        "edit": ("edit", {"path": "f.txt", "old_string": "theirs", "new_string": "mine"}),
        "apply_patch": (
            "apply_patch",
            {"patch": "*** Begin Patch\n*** Delete File: f.txt\n*** End Patch"},
        ),
    }
    name, args = calls[tool]
    with create_toolkit(builtins=["read", "write", "edit", "apply_patch"], workspace=folder) as kit:
        kit.execute("read", {"path": "f.txt"})
        with _unwritable(folder):
            result = kit.execute(name, args)
        assert result.is_error
        assert str(args.get("path", "f.txt")) in result.content
        assert (
            "read-only" in result.content.lower() or "permission denied" in result.content.lower()
        )
        # Writable again: the same call now works.
        assert not kit.execute(name, args).is_error
    assert sorted(p.name for p in folder.iterdir()) == (
        ["f.txt", "new.txt"] if tool == "write-new" else [] if tool == "apply_patch" else ["f.txt"]
    )
