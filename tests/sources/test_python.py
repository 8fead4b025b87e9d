"""Python tools from manifest entries: `python: module:attr` next to the manifest."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from toolnexus.base import Tool, ToolContext
from toolnexus.errors import ConfigError, ToolError, ToolTimeout
from toolnexus.runtime.sandbox import SandboxPolicy
from toolnexus.sources import BuildContext
from toolnexus.sources.python import build_python_tools, forget_local_modules, load_reference

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pytools"

MODULE = '''
from toolnexus.function import tool, tool_factory
from toolnexus.base import Tool, ToolContext
from toolnexus.errors import ToolError


def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


async def shout(text: str, ctx: ToolContext) -> str:
    """Shout it."""
    return f"{text.upper()} ({ctx.tool_name})"


@tool(read_only=True)
def mul(a: int, b: int) -> int:
    """Multiply."""
    return a * b


def sub(a: int, b: int) -> int:
    return a - b


def make() -> list[Tool]:
    return [tool(add, name="plus"), tool(sub)]


@tool_factory
def one():
    return tool(sub, name="minus")


@tool_factory
def broken():
    raise RuntimeError("no database")


@tool_factory
def wrong():
    return "nope"


def refuse(city: str) -> str:
    raise ToolError(f"no weather for {city}")


def thread_name() -> str:
    import threading

    return threading.current_thread().name


TOOLS = [mul, tool(sub)]
NOT_A_TOOL = 42
'''


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def project(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A manifest folder with its own module, under a name unique to the test."""
    folder = tmp_path / "project"
    module = f"tools_{request.node.name.replace('[', '_').replace(']', '_').replace('-', '_')}"
    _write(folder, f"{module}.py", MODULE)
    (folder / "module_name").write_text(module)
    return folder


def _ctx(folder: Path, **extra: Any) -> BuildContext:
    return BuildContext(workspace=folder, base_dir=folder, **extra)


def _mod(folder: Path) -> str:
    return (folder / "module_name").read_text()


def _call_ctx(folder: Path, name: str) -> ToolContext:
    return ToolContext(call_id="c1", tool_name=name, workspace=folder)


def _build(folder: Path, **decl: Any) -> list[Tool]:
    decl["python"] = decl["python"].replace("MOD", _mod(folder))
    return build_python_tools(decl, _ctx(folder, origin="tools.yaml:3"))


@pytest.mark.anyio
async def test_a_function_next_to_the_manifest_becomes_a_tool(project: Path) -> None:
    [add] = _build(project, python="MOD:add")
    assert add.name == "add"
    assert add.description == "Add two numbers."
    assert add.source == "python"
    assert add.origin == "tools.yaml:3"
    assert add.meta["files"] == ((project / f"{_mod(project)}.py").resolve(),)
    assert add.meta["reference"] == f"{_mod(project)}:add"
    assert (await add.run({"a": 2}, _call_ctx(project, "add"))).content == "3"
    # the folder was on sys.path only for the import
    assert str(project.resolve()) not in sys.path
    # local modules are compiled from source: no bytecode cache appears next to the manifest
    assert not (project / "__pycache__").exists()


@pytest.mark.anyio
async def test_an_async_function_with_context(project: Path) -> None:
    [shout] = _build(project, python="MOD:shout", name="yell", description="Loud")
    assert (shout.name, shout.description) == ("yell", "Loud")
    assert "ctx" not in shout.parameters["properties"]
    assert (await shout.run({"text": "hi"}, _call_ctx(project, "yell"))).content == "HI (yell)"


@pytest.mark.anyio
async def test_a_decorated_tool_and_manifest_overrides(project: Path) -> None:
    [mul] = _build(project, python="MOD:mul")
    assert mul.read_only
    [renamed] = _build(
        project, python="MOD:mul", name="times", title="Times", read_only=False,
        idempotent=True, description="Multiply two integers",
    )
    assert (renamed.name, renamed.title, renamed.description) == (
        "times", "Times", "Multiply two integers"
    )
    assert (renamed.read_only, renamed.idempotent) == (False, True)
    assert (await renamed.run({"a": 3, "b": 4}, _call_ctx(project, "times"))).content == "12"


@pytest.mark.anyio
async def test_manifest_parameters_replace_the_derived_schema(project: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer", "maximum": 10}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    [mul] = _build(project, python="MOD:mul", parameters=schema)
    assert mul.parameters == schema
    assert mul.read_only  # the decorator's flags survive a schema override
    assert (await mul.run({"a": 2, "b": 5}, _call_ctx(project, "mul"))).content == "10"
    with pytest.raises(ConfigError, match=r"parameters: .*\$\.properties\.a\.maximum"):
        _build(project, python="MOD:add",
               parameters={"type": "object", "properties": {"a": {"maximum": "ten"}}})


def test_factories_lists_and_their_limits(project: Path) -> None:
    assert [t.name for t in _build(project, python="MOD:make")] == ["plus", "sub"]
    assert [t.name for t in _build(project, python="MOD:one")] == ["minus"]
    assert [t.name for t in _build(project, python="MOD:one", name="less")] == ["less"]
    assert [t.name for t in _build(project, python="MOD:TOOLS")] == ["mul", "sub"]
    flagged = _build(project, python="MOD:make", concurrent=True)
    assert all(t.concurrent for t in flagged)
    with pytest.raises(ConfigError, match=r"gives 2 tools \(plus, sub\); `name` applies") as err:
        _build(project, python="MOD:make", name="x")
    assert err.value.field == "name"
    with pytest.raises(ConfigError, match=r"factory .*broken' failed: RuntimeError: no database"):
        _build(project, python="MOD:broken")
    with pytest.raises(ConfigError, match="returned str; expected a Tool or a list"):
        _build(project, python="MOD:wrong")
    with pytest.raises(ConfigError, match="is a int, not a function"):
        _build(project, python="MOD:NOT_A_TOOL")


def test_missing_modules_and_attributes_suggest_close_names(project: Path) -> None:
    module = _mod(project)
    with pytest.raises(ConfigError) as err:
        build_python_tools({"python": f"{module[:-1]}:add"}, _ctx(project))
    assert err.value.field == "python"
    assert f"did you mean {module!r}?" in str(err.value)
    assert str(project.resolve()) in str(err.value)
    with pytest.raises(ConfigError, match=r"has no attribute 'ad'; did you mean 'add'"):
        build_python_tools({"python": f"{module}:ad"}, _ctx(project))
    for bad in ("no_colon", "a:b:c", "a-b:c", ":x", 5):
        with pytest.raises(ConfigError, match="module:attribute"):
            build_python_tools({"python": bad}, _ctx(project))


def test_a_module_that_fails_to_import_is_reported_with_its_exception(tmp_path: Path) -> None:
    _write(tmp_path, "raising_mod_x1.py", "import os\nraise ValueError('bad config')\n")
    _write(tmp_path, "syntax_mod_x1.py", "def f(:\n    pass\n")
    _write(tmp_path, "deps_mod_x1.py", "import not_installed_pkg_zz\n")
    with pytest.raises(ConfigError) as err:
        build_python_tools({"python": "raising_mod_x1:f"}, _ctx(tmp_path))
    message = str(err.value)
    assert "importing module 'raising_mod_x1' failed: ValueError: bad config" in message
    assert "raising_mod_x1.py:2" in message
    with pytest.raises(ConfigError, match=r"SyntaxError: .* at .*syntax_mod_x1\.py:1"):
        build_python_tools({"python": "syntax_mod_x1:f"}, _ctx(tmp_path))
    # a module found but missing one of *its* imports is an import failure, not "not found"
    with pytest.raises(ConfigError, match="importing module 'deps_mod_x1' failed: ModuleNotF"):
        build_python_tools({"python": "deps_mod_x1:f"}, _ctx(tmp_path))
    assert str(tmp_path.resolve()) not in sys.path


@pytest.mark.anyio
async def test_inline_runs_a_sync_function_on_the_loop(project: Path) -> None:
    import threading

    [inline] = _build(project, python="MOD:thread_name", inline=True)
    [threaded] = _build(project, python="MOD:thread_name")
    here = threading.current_thread().name
    assert (await inline.run({}, _call_ctx(project, "thread_name"))).content == here
    assert (await threaded.run({}, _call_ctx(project, "thread_name"))).content != here


@pytest.mark.parametrize(
    ("decl", "message"),
    [
        ({"python": "MOD:add", "isolate": "process"}, "choose one"),
        ({"python": "MOD:mul"}, "already makes Tools"),
        ({"python": "MOD:TOOLS"}, "already makes Tools"),
        ({"python": "MOD:one"}, "already makes Tools"),
        ({"python": "MOD:shout"}, "is async"),
    ],
    ids=["isolated", "a_tool", "a_list", "a_factory", "async"],  # ids name the test's module
)
def test_inline_where_it_cannot_apply_is_refused(
    project: Path, decl: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        _build(project, inline=True, **decl)
    assert err.value.field == "inline"


def test_a_sandbox_needs_process_isolation(project: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot confine a Python tool.*isolate: process") as err:
        _build(project, python="MOD:add", sandbox={"network": False})
    assert err.value.field == "sandbox"
    with pytest.raises(ConfigError, match="expected 'process'") as err:
        _build(project, python="MOD:add", isolate="thread")
    assert err.value.field == "isolate"


def test_fresh_loads_see_edits_and_list_every_local_file(tmp_path: Path) -> None:
    helper = _write(tmp_path, "fresh_helper_q7.py", "VALUE = 1\n")
    main = _write(
        tmp_path, "fresh_main_q7.py",
        "from fresh_helper_q7 import VALUE\ndef get() -> int:\n    return VALUE\n",
    )
    get, files = load_reference("fresh_main_q7:get", tmp_path, fresh=True)
    assert get() == 1  # type: ignore[operator]
    assert files == [main.resolve(), helper.resolve()]
    # same size, same second: a timestamp-validated .pyc would hide this edit
    helper.write_text("VALUE = 2\n")
    stale, _ = load_reference("fresh_main_q7:get", tmp_path)
    assert stale() == 1  # type: ignore[operator]
    fresh, files = load_reference("fresh_main_q7:get", tmp_path, fresh=True)
    assert fresh() == 2  # type: ignore[operator]
    assert files == [main.resolve(), helper.resolve()]
    assert set(forget_local_modules(tmp_path)) == {"fresh_main_q7", "fresh_helper_q7"}
    assert "fresh_main_q7" not in sys.modules


def test_each_manifest_folder_gets_its_own_module_of_a_shared_name(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    _write(one, "shared_name_k3.py", "def which() -> str:\n    return 'one'\n")
    _write(two, "shared_name_k3.py", "def which() -> str:\n    return 'two'\n")
    first, _ = load_reference("shared_name_k3:which", one)
    second, _ = load_reference("shared_name_k3:which", two)
    assert (first(), second()) == ("one", "two")  # type: ignore[operator]


def test_packages_and_dotted_attributes(tmp_path: Path) -> None:
    _write(tmp_path, "pkg_z9/__init__.py", "")
    _write(
        tmp_path,
        "pkg_z9/math.py",
        "class Ops:\n    @staticmethod\n    def neg(x: int) -> int:\n        return -x\n",
    )
    [neg] = build_python_tools({"python": "pkg_z9.math:Ops.neg"}, _ctx(tmp_path))
    assert neg.name == "neg"
    assert [p.name for p in neg.meta["files"]] == ["math.py", "__init__.py"]
    with pytest.raises(ConfigError, match=r"'pkg_z9.maths'; did you mean 'pkg_z9.math'"):
        build_python_tools({"python": "pkg_z9.maths:x"}, _ctx(tmp_path))


def test_an_installed_module_is_found_on_sys_path(tmp_path: Path) -> None:
    [dumps] = build_python_tools({"python": "json:dumps", "name": "to_json",
                                  "parameters": {"type": "object", "properties": {"obj": {}},
                                                 "required": ["obj"]}}, _ctx(tmp_path))
    assert dumps.meta["files"] == ()


def test_fixture_package_with_a_factory() -> None:
    [greet, count] = build_python_tools({"python": "fixture_tools:toolset"}, _ctx(FIXTURES))
    assert (greet.name, count.name) == ("greet", "count_words")
    assert count.read_only


@pytest.mark.anyio
async def test_isolated_calls_run_in_a_child_process(project: Path) -> None:
    _write(project, "iso_mod_p1.py", """
        import os
        from toolnexus.errors import ToolError

        def pid(tag: str = "x") -> dict:
            return {"pid": os.getpid(), "tag": tag}

        def fail(kind: str) -> str:
            if kind == "tool":
                raise ToolError("the model should read this")
            raise KeyError(kind)
        """)
    ctx = _ctx(project, timeout=30.0)
    [pid] = build_python_tools({"python": "iso_mod_p1:pid", "isolate": "process"}, ctx)
    result = await pid.run({"tag": "t"}, _call_ctx(project, "pid"))
    assert result.structured["tag"] == "t"
    assert result.structured["pid"] != os.getpid()
    assert result.metadata["isolated"] is True
    [fail] = build_python_tools({"python": "iso_mod_p1:fail", "isolate": "process"}, ctx)
    tool_error = await fail.run({"kind": "tool"}, _call_ctx(project, "fail"))
    assert (tool_error.is_error, tool_error.content) == (True, "the model should read this")
    crash = await fail.run({"kind": "boom"}, _call_ctx(project, "fail"))
    assert crash.is_error
    assert crash.content == "KeyError: 'boom'"
    assert "Traceback" in crash.metadata["traceback"]


@pytest.mark.anyio
async def test_an_isolated_call_past_its_timeout_is_said_to_be_killed(project: Path) -> None:
    _write(project, "iso_mod_slow.py", """
        import time

        def slow() -> str:
            time.sleep(60)
            return "late"
        """)
    [slow] = build_python_tools(
        {"python": "iso_mod_slow:slow", "isolate": "process"}, _ctx(project, timeout=0.5)
    )
    assert "worker_thread" not in slow.meta  # a process is really stopped
    with pytest.raises(ToolTimeout, match=r"ran past its timeout \(500ms\) in its isolated "
                       r"process, which was killed"):
        await slow.run({}, _call_ctx(project, "slow"))


@pytest.mark.anyio
async def test_isolated_calls_are_confined_by_the_sandbox(project: Path) -> None:
    from toolnexus.runtime.sandbox import detect

    _write(project, "iso_write_p2.py", """
        from pathlib import Path

        def write(name: str) -> str:
            Path(name).write_text("x")
            return "written"
        """)
    policy = SandboxPolicy.from_mapping({"filesystem": "read-only"}, base_dir=project)
    if detect().best == "none":
        pytest.skip("no sandbox mechanism on this machine (bubblewrap or Landlock needed)")
    ctx = _ctx(project, sandbox=policy, timeout=30.0)
    [write] = build_python_tools(
        {
            "python": "iso_write_p2:write",
            "isolate": "process",
            "sandbox": {"filesystem": "read-only"},
        },
        ctx,
    )
    result = await write.run({"name": str(project / "out.txt")}, _call_ctx(project, "write"))
    assert result.is_error
    assert "Read-only file system" in result.content or "Permission denied" in result.content
    assert not (project / "out.txt").exists()


def test_tool_errors_from_plain_functions_propagate(project: Path) -> None:
    [refuse] = _build(project, python="MOD:refuse")
    import asyncio

    with pytest.raises(ToolError, match="no weather for Oslo"):
        asyncio.run(refuse.run({"city": "Oslo"}, _call_ctx(project, "refuse")))
