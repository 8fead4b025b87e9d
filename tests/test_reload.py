"""Hot reload through real file edits: in-place and atomic saves, tools added and removed, broken
manifests and modules that keep the last good generation, includes, calls in flight, MCP
sessions carried over, restarted or closed, and a stress run under concurrent calls."""

from __future__ import annotations

import logging
import os
import sys
import textwrap
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from toolnexus import Toolkit, acreate_toolkit, create_toolkit
from toolnexus.errors import ManifestImportError, ManifestSchemaError, ManifestSyntaxError
from toolnexus.reload import ReloadEvent

from .conftest import MCP_SERVERS

EVERYTHING = MCP_SERVERS / "everything.py"


# -- helpers -------------------------------------------------------------------------------------


def write(path: Path, text: str) -> None:
    """An in-place save: truncate and write the same inode."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(text))


def save_atomic(path: Path, text: str) -> None:
    """How editors save: write a temp file beside it, then rename it over the original."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(textwrap.dedent(text), encoding="utf-8")
    os.replace(tmp, path)


def manifest(*names: str, extra: str = "") -> str:
    tools = "".join(f"  - {{name: {n}, python: 'mod:{n}'}}\n" for n in names)
    return f"version: 1\ntools:\n{tools}{extra}"


class Seen:
    """Collects reload events from any thread and waits (bounded) for one that matches."""

    def __init__(self) -> None:
        self.events: list[ReloadEvent] = []
        self._cond = threading.Condition()
        self._wakeup: anyio.Event | None = None

    def __call__(self, event: ReloadEvent) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()
        if self._wakeup is not None:  # only set for a toolkit on the test's own loop
            self._wakeup.set()

    def wait(self, match: Callable[[ReloadEvent], bool], timeout: float = 10) -> ReloadEvent:
        """The first event matching; for a toolkit on its own loop thread (sync API)."""
        found: list[ReloadEvent] = []

        def ready() -> bool:
            found[:] = [e for e in self.events if match(e)]
            return bool(found)

        with self._cond:
            assert self._cond.wait_for(ready, timeout), f"no such reload; saw {self.events}"
        return found[0]

    async def await_(
        self, match: Callable[[ReloadEvent], bool], timeout: float = 10
    ) -> ReloadEvent:
        """The same for a toolkit on the test's own loop, where the callbacks run."""
        with anyio.fail_after(timeout):
            while True:
                for event in self.events:
                    if match(event):
                        return event
                self._wakeup = anyio.Event()
                await self._wakeup.wait()


@pytest.fixture
def forget_modules(tmp_path: Path) -> Iterator[None]:
    """Drop modules the test imported from tmp_path (they share names like `mod`); only those:
    forgetting a library such as `yaml` would split its classes from its C extension's."""
    yield
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and Path(file).is_relative_to(tmp_path):
            del sys.modules[name]


MODULE = """
def one() -> str:
    return "one"


def two() -> str:
    return "two"


def three() -> str:
    return "three"
"""


# -- saves ---------------------------------------------------------------------------------------


def test_in_place_and_atomic_saves_are_each_seen(tmp_path: Path, forget_modules: None) -> None:
    (tmp_path / "mod.py").write_text(MODULE)
    path = tmp_path / "tools.yaml"
    write(path, manifest("one"))
    seen = Seen()
    with create_toolkit(path, watch=True) as tk:
        tk.on_reload.append(seen)
        assert tk.names() == ["one"] and tk.generation == 1
        # Each save adds a tool and removes the other; the atomic ones replace the inode, which
        # is what blinds a watch on the file itself after the first time.
        states = [("one", "two"), ("one", "three"), ("two", "three")]
        for round_ in range(3):
            for save in (write, save_atomic):
                keep, new = states[(2 * round_ + (save is save_atomic)) % 3]
                before = tk.generation
                save(path, manifest(keep, new))
                seen.wait(lambda e, n=before: e.ok and e.generation > n)
                assert tk.names() == sorted([keep, new])
                assert tk.execute(new).content == new
        assert [e.kind for e in seen.events].count("error") == 0
        # Every save was seen: each produced at least one new generation.
        assert tk.generation >= 7


def test_tools_changed_event_names_added_and_removed(tmp_path: Path, forget_modules: None) -> None:
    (tmp_path / "mod.py").write_text(MODULE)
    path = tmp_path / "tools.yaml"
    write(path, manifest("one", "two"))
    seen = Seen()
    with create_toolkit(path, watch=True) as tk:
        tk.on_reload.append(seen)
        save_atomic(path, manifest("one", "three"))
        event = seen.wait(lambda e: e.kind == "tools_changed")
        assert (event.added, event.removed, event.changed) == (("three",), ("two",), ())
        assert event.generation == tk.generation == 2
        assert event.trigger == (str(path.resolve()),)
        assert event.describe() == "generation 2: +three -two"
        assert tk.last_reload is event
        result = tk.execute("two")
        assert result.is_error and result.metadata["error_type"] == "ToolNotFound"

        save_atomic(
            path,
            manifest("one", "three").replace("'mod:three'", "'mod:three', description: Say three"),
        )
        event = seen.wait(lambda e: e.changed == ("three",))
        assert event.added == event.removed == ()


# -- broken manifests ------------------------------------------------------------------------------


def test_broken_manifest_keeps_serving_and_reports_file_and_line(
    tmp_path: Path, forget_modules: None, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "mod.py").write_text(MODULE)
    path = tmp_path / "tools.yaml"
    write(path, manifest("one"))
    seen = Seen()
    caplog.set_level(logging.INFO, logger="toolnexus.reload")
    with create_toolkit(path, watch=True) as tk:
        tk.on_reload.append(seen)

        save_atomic(path, "version: 1\ntools:\n  - {name: one, python: 'mod:one'\n")
        bad = seen.wait(lambda e: e.kind == "error")
        assert isinstance(bad.error, ManifestSyntaxError)
        assert bad.error.file == str(path) and bad.error.line is not None
        assert bad.generation == tk.generation == 1
        assert tk.last_reload is bad
        assert tk.execute("one").content == "one"  # the last good generation still serves
        logged = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert logged and f"{path}:{bad.error.line}" in logged[-1].getMessage()
        assert "generation 1 kept" in logged[-1].getMessage()

        save_atomic(path, "version: 1\ntools:\n  - {name: one, python: 'mod:one', descripton: x}\n")
        unknown = seen.wait(lambda e: isinstance(e.error, ManifestSchemaError))
        assert unknown.error is not None
        issue = unknown.error.issues[0]  # type: ignore[attr-defined]
        assert (issue.file, issue.line) == (str(path), 3)
        assert "did you mean 'description'" in issue.message
        assert f"{path}:3:" in caplog.records[-1].getMessage()
        assert tk.execute("one").content == "one" and tk.generation == 1

        save_atomic(path, manifest("one", "two"))
        fixed = seen.wait(lambda e: e.ok)
        assert fixed.added == ("two",) and tk.generation == 2
        assert tk.last_reload is fixed and tk.execute("two").content == "two"
        assert "generation 2: +two" in caplog.records[-1].getMessage()


def test_listener_errors_do_not_stop_reloads(
    tmp_path: Path, forget_modules: None, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "mod.py").write_text(MODULE)
    path = tmp_path / "tools.yaml"
    write(path, manifest("one"))
    seen = Seen()

    def broken(event: ReloadEvent) -> None:
        raise RuntimeError("listener bug")

    with create_toolkit(path, watch=True) as tk:
        tk.on_reload += [broken, seen]
        save_atomic(path, manifest("one", "two"))
        assert seen.wait(lambda e: e.ok).added == ("two",)
    assert any("on_reload callback failed" in r.getMessage() for r in caplog.records)


# -- Python modules ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_edited_module_is_imported_fresh_and_a_failing_one_keeps_the_old(
    tmp_path: Path, forget_modules: None
) -> None:
    module = tmp_path / "calc.py"
    module.write_text("def value() -> int:\n    return 1\n")
    path = tmp_path / "tools.yaml"
    write(path, "version: 1\ntools:\n  - {name: value, python: 'calc:value'}\n")
    seen = Seen()
    async with await acreate_toolkit(path, watch=True) as tk:
        tk.on_reload.append(seen)
        assert (await tk.aexecute("value")).content == "1"

        # Same size, same second: a cached .pyc keyed on mtime and size would go stale.
        save_atomic(module, "def value() -> int:\n    return 2\n")
        event = await seen.await_(lambda e: e.ok)
        assert event.kind == "unchanged" and event.trigger == (str(module.resolve()),)
        assert event.code_changed == ("value",)
        assert event.describe() == f"generation {event.generation}: value: code changed"
        assert (await tk.aexecute("value")).content == "2"

        write(module, "def value() -> int:\n    return 3\n\nraise RuntimeError('half-edited')\n")
        bad = await seen.await_(lambda e: not e.ok)
        assert isinstance(bad.error, ManifestImportError)
        assert f"{module.resolve()}:4" in str(bad.error) and "half-edited" in str(bad.error)
        assert f"{path}:3" in str(bad.error)
        assert (await tk.aexecute("value")).content == "2"

        save_atomic(module, "def value() -> int:\n    return 4\n")
        await seen.await_(lambda e: e.ok and e.generation == 3)
        assert (await tk.aexecute("value")).content == "4"


# -- includes ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_included_manifests_are_watched_including_a_new_one(
    tmp_path: Path, forget_modules: None
) -> None:
    (tmp_path / "mod.py").write_text(MODULE)
    team = tmp_path / "team"
    team.mkdir()
    (team / "mod.py").write_text(MODULE)
    write(team / "base.yaml", manifest("one"))
    path = tmp_path / "tools.yaml"
    write(path, "version: 1\ninclude: [team/base.yaml]\n")
    seen = Seen()
    async with await acreate_toolkit(path, watch=True) as tk:
        tk.on_reload.append(seen)
        save_atomic(team / "base.yaml", manifest("one", "two"))
        event = await seen.await_(lambda e: e.ok)
        assert event.added == ("two",)
        assert event.trigger == (str((team / "base.yaml").resolve()),)

        # A new include in a folder nobody watched yet: watched before the listener hears of it,
        # so an edit made right away is seen.
        other = tmp_path / "other"
        other.mkdir()
        (other / "mod.py").write_text(MODULE)
        write(other / "more.yaml", manifest("three"))
        save_atomic(path, "version: 1\ninclude: [team/base.yaml, other/more.yaml]\n")
        assert (await seen.await_(lambda e: "three" in e.added)).ok
        save_atomic(other / "more.yaml", "version: 1\ntools: []\n")
        gone = await seen.await_(lambda e: "three" in e.removed)
        assert tk.names() == ["one", "two"] and gone.generation == tk.generation


# -- calls in flight -----------------------------------------------------------------------------


@pytest.fixture
def gate() -> Iterator[types.SimpleNamespace]:
    """A module the tools import to wait on the test: `entered`, then `release`."""
    module = types.ModuleType("reload_gate")
    module.entered = anyio.Event()  # type: ignore[attr-defined]
    module.release = anyio.Event()  # type: ignore[attr-defined]
    sys.modules["reload_gate"] = module
    yield module  # type: ignore[misc]
    del sys.modules["reload_gate"]


GATED = """
import reload_gate


async def hold() -> str:
    reload_gate.entered.set()
    await reload_gate.release.wait()
    return "finished on {generation}"


def ping() -> str:
    return "ping {generation}"
"""


@pytest.mark.anyio
async def test_calls_in_flight_finish_on_the_generation_they_started_on(
    tmp_path: Path, forget_modules: None, gate: types.SimpleNamespace
) -> None:
    module = tmp_path / "gated.py"
    module.write_text(GATED.format(generation="old"))
    path = tmp_path / "tools.yaml"
    write(
        path,
        "version: 1\ntools:\n  - {name: hold, python: 'gated:hold'}\n"
        "  - {name: ping, python: 'gated:ping'}\n",
    )
    seen = Seen()
    results: list[str] = []
    async with await acreate_toolkit(path, watch=True) as tk, anyio.create_task_group() as tg:
        tk.on_reload.append(seen)

        async def call() -> None:
            results.append((await tk.aexecute("hold")).content)

        tg.start_soon(call)
        with anyio.fail_after(5):
            await gate.entered.wait()
        # The new generation drops `hold` and changes `ping`'s code.
        module.write_text(GATED.format(generation="new"))
        save_atomic(path, "version: 1\ntools:\n  - {name: ping, python: 'gated:ping'}\n")
        event = await seen.await_(lambda e: e.ok and e.removed == ("hold",))
        assert (await tk.aexecute("ping")).content == "ping new"
        assert (await tk.aexecute("hold")).metadata["error_type"] == "ToolNotFound"
        assert results == []
        gate.release.set()
    assert results == ["finished on old"]
    assert event.generation == 2


# -- MCP sessions --------------------------------------------------------------------------------


def children() -> dict[int, str]:
    """This process's child processes: pid -> command line."""
    me = os.getpid()
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # it exited meanwhile
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me:
            found[int(entry.name)] = cmdline
    return found


def server_pid(tag: str) -> int:
    pids = [pid for pid, cmd in children().items() if f"/marker-{tag} " in f"{cmd} "]
    assert len(pids) == 1, f"expected one server {tag}, found {children()}"
    return pids[0]


def servers(spec: dict[str, str]) -> str:
    """`mcp_servers:` for everything.py servers named by tag, each with an env value."""
    out = "mcp_servers:\n"
    for tag, value in spec.items():
        out += (
            f"  {tag}:\n    command: {sys.executable}\n"
            f"    args: ['{EVERYTHING}', --refuse-start-if, '/nonexistent/marker-{tag}']\n"
            f"    env: {{TAG: {value}}}\n    prefix: {tag}_\n    required: true\n"
            f"    tools: {{include: [env, echo]}}\n"
        )
    return out


async def exited(pidfd: int) -> None:
    """Wait (bounded) until a child process exits: its pidfd becomes readable."""
    try:
        with anyio.fail_after(10):
            await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.anyio
async def test_mcp_servers_carry_over_restart_on_change_and_close_when_idle(
    tmp_path: Path, forget_modules: None, gate: types.SimpleNamespace
) -> None:
    (tmp_path / "gated.py").write_text(GATED.format(generation="old"))
    path = tmp_path / "tools.yaml"
    held = "version: 1\ntools:\n  - {name: hold, python: 'gated:hold'}\n"
    write(path, held + servers({"a": "one", "b": "one", "c": "one"}))
    seen = Seen()
    children_before = children()
    async with await acreate_toolkit(path, watch=True) as tk, anyio.create_task_group() as tg:
        tk.on_reload.append(seen)
        before = {tag: server_pid(tag) for tag in "abc"}
        assert (await tk.aexecute("b_env", {"name": "TAG"})).content == "one"

        tg.start_soon(tk.aexecute, "hold")  # keeps the first generation busy
        with anyio.fail_after(5):
            await gate.entered.wait()
        # a: unchanged, b: its env changed, c: removed.
        save_atomic(path, held + servers({"a": "one", "b": "two"}))
        event = await seen.await_(lambda e: e.ok, timeout=30)
        assert set(event.removed) == {"c_echo", "c_env"}

        assert server_pid("a") == before["a"]  # same process, same session
        assert (await tk.aexecute("a_echo", {"text": "still"})).content == "still"
        assert (await tk.aexecute("b_env", {"name": "TAG"})).content == "two"
        assert (await tk.aexecute("c_env", {"name": "TAG"})).metadata["error_type"] == (
            "ToolNotFound"
        )
        # The old generation still runs a call: its own servers stay up until it is idle.
        assert alive(before["b"]) and alive(before["c"])
        ends = [os.pidfd_open(before[tag]) for tag in "bc"]
        gate.release.set()
        for pidfd in ends:
            await exited(pidfd)
        assert server_pid("a") == before["a"]
        assert server_pid("b") != before["b"]
    assert children() == children_before  # closing the toolkit ended its servers


# -- stress --------------------------------------------------------------------------------------


def test_stress_reloads_while_threads_call(tmp_path: Path, forget_modules: None) -> None:
    """100 reloads alternating valid and invalid manifests, tools added and removed, an MCP
    server carried over (and restarted twice), while 4 threads call tools through the sync API."""
    (tmp_path / "mod.py").write_text(MODULE)
    path = tmp_path / "tools.yaml"

    def version(i: int) -> str:
        if i % 4 == 1:
            return "version: 1\ntools:\n  - {name: one, python: 'mod:one'\n"  # syntax error
        if i % 4 == 3:
            return "version: 1\ntols: []\n"  # unknown key
        extra = "two" if i % 8 == 0 else "three"
        return manifest("one", extra) + servers({"srv": f"v{i // 34}"})

    threads_before = set(threading.enumerate())
    children_before = children()
    save_atomic(path, version(0))
    failures: list[str] = []
    calls = [0]
    stop = threading.Event()
    seen = Seen()

    def caller(tk: Toolkit, index: int) -> None:
        names = ["one", "two", "three", "srv_echo"]
        n = index
        while not stop.is_set():
            name = names[n % len(names)]
            n += 1
            args = {"text": "hi"} if name == "srv_echo" else {}
            result = tk.execute(name, args)
            calls[0] += 1
            if not result.is_error:
                continue
            removable = name in ("two", "three")
            if not (removable and result.metadata.get("error_type") == "ToolNotFound"):
                failures.append(f"{name}: {result.metadata.get('error_type')}: {result.content}")

    tk = create_toolkit(path)
    try:
        tk.watch(debounce_ms=10)
        tk.on_reload.append(seen)
        workers = [threading.Thread(target=caller, args=(tk, i)) for i in range(4)]
        for w in workers:
            w.start()
        for i in range(1, 101):
            done = len(seen.events)
            save_atomic(path, version(i))
            expect_ok = i % 2 == 0
            event = seen.wait(lambda e, d=done: e is seen.events[-1] and len(seen.events) > d)
            assert event.ok is expect_ok, (i, event.describe())
        stop.set()
        for w in workers:
            w.join(timeout=10)
            assert not w.is_alive()
        assert failures == []
        assert calls[0] > 100
        assert tk.generation == 51
        names = sorted(t.name for t in threading.enumerate() if t not in threads_before)
        assert names.count("toolnexus-watch") <= 2  # the live feed (and one still stopping)
        assert names.count("toolnexus-loop") == 1
    finally:
        stop.set()
        tk.close()
    # Everything the toolkit started ends: threads (joined, bounded) and child processes.
    for t in set(threading.enumerate()) - threads_before:
        t.join(timeout=5)
    assert set(threading.enumerate()) - threads_before == set()
    assert children() == children_before
