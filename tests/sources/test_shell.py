"""Shell tools: real subprocesses, argv templating, hostile values, limits and sandboxing."""

from __future__ import annotations

import json
import os
import select
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolnexus import create_toolkit
from toolnexus.base import Result, Tool, ToolContext
from toolnexus.errors import ConfigError, ManifestSchemaError, ToolError
from toolnexus.manifest import load_manifest
from toolnexus.manifest.interpolate import Secret
from toolnexus.runtime.sandbox import SandboxPolicy, detect
from toolnexus.sources import BuildContext
from toolnexus.sources.shell import build_shell_tool

pytestmark = pytest.mark.anyio

PY = sys.executable
DUMP = [PY, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]
"""A command that prints the argv it received as JSON."""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


def make(
    ws: Path,
    params: dict[str, Any] | None = None,
    *,
    timeout: float | None = None,
    sandbox: SandboxPolicy | None = None,
    **entry: Any,
) -> Tool:
    decl: dict[str, Any] = {"name": "t", **entry}
    if params is not None:
        decl["parameters"] = params
    ctx = BuildContext(workspace=ws, base_dir=ws, timeout=timeout, sandbox=sandbox)
    return build_shell_tool(decl, ctx)


def schema(required: tuple[str, ...] = (), **props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required)}


STR = {"type": "string"}


async def call(tool: Tool, ws: Path, **args: Any) -> Result:
    ctx = ToolContext(call_id="c1", tool_name=tool.name, workspace=ws)
    return await tool.run(args, ctx)


async def argv_of(tool: Tool, ws: Path, **args: Any) -> list[str]:
    result = await call(tool, ws, **args)
    assert not result.is_error, result.content
    return json.loads(result.content)


def hostile(marker: Path) -> list[str]:
    """Values that would create `marker` if anything interpreted them as shell text."""
    m = str(marker)
    return [
        f"; touch {m}",
        f"&& touch {m}",
        f"| touch {m}",
        f"$(touch {m})",
        f"`touch {m}`",
        f"x\ntouch {m}",
        f"'; touch {m}; echo '",
        f'"; touch {m}; echo "',
        f"> {m}",
        "*",
        "~",
        "$HOME",
        "{other}",
        "-rf",
        "--help",
        "",
        "  spaced  out  ",
    ]


# --- argv templating -------------------------------------------------------------------------


async def test_hostile_values_stay_one_inert_argv_element(ws: Path) -> None:
    marker = ws / "pwned"
    (ws / "a.txt").write_text("a file a glob would find")
    tool = make(ws, schema(("v",), v=STR), command=[*DUMP, "{v}", "--name={v}", "x{v}y"])
    for value in hostile(marker):
        assert await argv_of(tool, ws, v=value) == [value, f"--name={value}", f"x{value}y"]
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt"]


async def test_a_leading_dash_is_one_element_and_double_dash_protects_it(ws: Path) -> None:
    tool = make(ws, schema(("v",), v=STR), command=["ls", "--", "{v}"])
    result = await call(tool, ws, v="-la")
    # ls looked for a file named "-la" instead of reading it as options.
    assert result.is_error and "-la" in result.content and result.metadata["exit_code"] == 2


async def test_a_nul_character_is_refused_cleanly(ws: Path) -> None:
    tool = make(ws, schema(("v",), v=STR), command=[*DUMP, "{v}"])
    with pytest.raises(ToolError, match="argv element 3 would contain a NUL character"):
        await call(tool, ws, v="a\0b")
    env_tool = make(ws, schema(("v",), v=STR), command=["true"], env={"V": "{v}"})
    with pytest.raises(ToolError, match="environment variable V would contain a NUL"):
        await call(env_tool, ws, v="\0")
    with pytest.raises(ToolError, match="argument 'v' holds an invalid character"):
        await call(tool, ws, v="\udc80")


async def test_optional_flags_spreads_and_literal_braces(ws: Path) -> None:
    params = schema(
        ("path",),
        path=STR,
        name={"type": "string"},
        verbose={"type": "boolean"},
        color={"type": "boolean"},
        files={"type": "array", "items": {"type": "string"}},
        dirs={"type": "array", "items": {"type": "string"}},
    )
    command = [
        *DUMP,
        "{verbose?--verbose}",
        "{color?--color|--no-color}",
        "--name={name?}",
        "-I{dirs...}",
        "{{literal}}",
        "{path}",
        "{files...}",
    ]
    tool = make(ws, params, command=command)
    assert await argv_of(tool, ws, path="p") == ["{literal}", "p"]
    full = await argv_of(
        tool, ws, path="p", name="n m", verbose=True, color=False, files=["a b", "-c"], dirs=["x"]
    )
    assert full == ["--verbose", "--no-color", "--name=n m", "-Ix", "{literal}", "p", "a b", "-c"]
    off = await argv_of(tool, ws, path="p", verbose=False, color=True, name=None, files=[])
    assert off == ["--color", "{literal}", "p"]


async def test_non_string_values_render_as_json_scalars(ws: Path) -> None:
    params = schema(
        ("n", "f", "b", "o"),
        n={"type": "integer"},
        f={"type": "number"},
        b={"type": "boolean"},
        o={"type": "object"},
    )
    tool = make(ws, params, command=[*DUMP, "{n}", "--f={f}", "{b}", "{o}", 7])
    got = await argv_of(tool, ws, n=3, f=2.5, b=True, o={"k": [1, "ü"]})
    assert got == ["3", "--f=2.5", "true", '{"k":[1,"ü"]}', "7"]


async def test_defaults_fill_absent_arguments(ws: Path) -> None:
    params = schema(n={"type": "integer", "default": 10})
    tool = make(ws, params, command=[*DUMP, "-n", "{n}"])
    assert await argv_of(tool, ws) == ["-n", "10"]
    assert await argv_of(tool, ws, n=2) == ["-n", "2"]


async def test_parameters_are_derived_from_placeholders(ws: Path) -> None:
    tool = make(ws, command=[*DUMP, "{path}", "{all?-a}", "{extra...}", "{name?}"])
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "all": {"type": "boolean"},
            "extra": {"type": "array", "items": {"type": "string"}},
            "name": {"type": "string"},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    assert await argv_of(tool, ws, path="p", all=True, extra=["1"]) == ["p", "-a", "1"]


# --- cwd, env, stdin -------------------------------------------------------------------------


async def test_cwd_is_templated_and_confined_to_the_workspace(ws: Path, tmp_path: Path) -> None:
    (ws / "sub").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "link").symlink_to(outside)
    tool = make(
        ws, schema(dir=STR), command=[PY, "-c", "import os; print(os.getcwd())"], cwd="{dir?}"
    )
    assert (await call(tool, ws, dir="sub")).content == str(ws / "sub")
    assert (await call(tool, ws)).content == str(ws)
    for escape in ("..", "/etc", "link", "sub/../../outside"):
        with pytest.raises(ToolError, match="outside the workspace"):
            await call(tool, ws, dir=escape)
    with pytest.raises(ToolError, match="'missing' is not an existing folder"):
        await call(tool, ws, dir="missing")


async def test_env_values_are_one_variable_each(ws: Path) -> None:
    marker = ws / "pwned"
    code = "import json, os; print(json.dumps([os.environ.get(k) for k in ('A', 'B', 'C')]))"
    tool = make(
        ws,
        schema(("v",), v=STR, o=STR),
        command=[PY, "-c", code],
        env={"A": "{v}", "B": "x={v}", "C": "{o?}"},
    )
    for value in hostile(marker):
        result = await call(tool, ws, v=value)
        assert json.loads(result.content) == [value, f"x={value}", None]
    assert json.loads((await call(tool, ws, v="1", o="2")).content) == ["1", "x=1", "2"]
    assert not marker.exists()


async def test_stdin_comes_from_an_argument(ws: Path) -> None:
    tool = make(ws, schema(("text",), text=STR), command=["cat"], stdin="{text}")
    text = "line 1\n$(touch x)\n"
    assert (await call(tool, ws, text=text)).content == text.rstrip("\n")
    no_stdin = make(ws, schema(text=STR), command=["cat"], stdin="{text?}")
    assert (await call(no_stdin, ws)).content == "(no output)"


# --- results ---------------------------------------------------------------------------------


async def test_a_failing_command_reports_stdout_stderr_and_exit_code(ws: Path) -> None:
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    result = await call(make(ws, command=[PY, "-c", code]), ws)
    assert result.is_error
    assert result.content == "out\n[stderr]\nerr\nexit code 3"
    meta = result.metadata
    assert (meta["exit_code"], meta["timed_out"], meta["truncated"]) == (3, False, False)
    assert meta["mechanism"] == "none" and meta["duration"] > 0


async def test_ok_exit_codes_are_not_errors(ws: Path) -> None:
    code = "import sys; print('no match'); sys.exit(1)"
    result = await call(make(ws, command=[PY, "-c", code], ok_exit_codes=[0, 1]), ws)
    assert not result.is_error and result.content == "no match"
    assert result.metadata["exit_code"] == 1


async def test_a_missing_program_is_an_error_result(ws: Path) -> None:
    result = await call(make(ws, command=["no-such-program-tnx"]), ws)
    assert result.is_error and result.metadata["exit_code"] == 127
    assert "no-such-program-tnx" in result.content


async def test_output_is_cut_to_head_and_tail(ws: Path) -> None:
    code = "print('HEAD' + 'm' * 100000 + 'TAIL')"
    result = await call(make(ws, command=[PY, "-c", code], max_output=1000), ws)
    assert not result.is_error
    assert result.content.startswith("HEAD") and result.content.endswith("TAIL")
    assert "bytes of output omitted" in result.content and len(result.content) < 1100
    assert result.metadata["truncated"] is True


async def test_timeout_kills_the_whole_process_group(ws: Path) -> None:
    pidfile = ws / "child.pid"
    script = f"sleep 30 & echo $! > {pidfile}; wait"
    tool = make(ws, command=["sh", "-c", script], timeout=0.5)
    result = await call(tool, ws)
    assert result.is_error and result.metadata["timed_out"] is True
    assert "timed out after 0.5s" in result.content
    grandchild = int(pidfile.read_text())
    try:
        fd = os.pidfd_open(grandchild)
    except ProcessLookupError:
        return  # already gone and reaped
    try:
        readable, _, _ = select.select([fd], [], [], 5)
        assert readable, "the background child survived the timeout"
    finally:
        os.close(fd)


# SIGTERM is trapped: the script says so, takes 0.3 s to clean up, and exits 3. With a grace
# longer than that it finishes its clean-up; with none it is SIGKILLed first.
_CLEANUP = (
    "trap 'echo term; sleep 0.3; echo cleaned; exit 3' TERM; echo ready; "
    "while :; do sleep 0.05; done"
)


@pytest.mark.parametrize(("grace", "cleaned"), [(30, True), (0, False)])
async def test_kill_grace_is_the_time_between_sigterm_and_sigkill(
    ws: Path, grace: float, cleaned: bool
) -> None:
    tool = make(ws, command=["sh", "-c", _CLEANUP], timeout=0.5, kill_grace=grace)
    result = await call(tool, ws)
    assert result.is_error and result.metadata["timed_out"] is True
    assert result.content.startswith("ready")
    assert ("cleaned" in result.content) is cleaned
    assert result.metadata["exit_code"] == (3 if cleaned else -9)


async def test_a_background_child_is_stopped_when_the_command_exits(ws: Path) -> None:
    pidfile = ws / "child.pid"
    tool = make(ws, command=["sh", "-c", f"sleep 300 & echo $! > {pidfile}; echo started"])
    result = await call(tool, ws)
    assert not result.is_error
    assert result.metadata["timed_out"] is False
    assert result.metadata["stopped"] == 1
    assert result.content == (
        "started\nnote: 1 background process was still running when the command exited and "
        "was stopped (no process outlives its tool call)"
    )
    with pytest.raises(ProcessLookupError):
        for _ in range(1000):  # reaped by the reaper before the call returned
            os.kill(int(pidfile.read_text()), 0)
            await anyio.sleep(0.01)


def test_kill_grace_comes_from_the_entry_or_the_defaults(tmp_path: Path) -> None:
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(
        """
version: 1
defaults:
  kill_grace: 30s
  timeout: 500ms
tools:
  - name: inherits
    command: ["sh", "-c", "CLEANUP"]
  - name: own
    command: ["sh", "-c", "CLEANUP"]
    kill_grace: 0ms
""".replace("CLEANUP", _CLEANUP.replace('"', '\\"'))
    )
    with create_toolkit(manifest, workspace=tmp_path) as tk:
        inherits, own = tk.execute("inherits", {}), tk.execute("own", {})
    assert "cleaned" in inherits.content and inherits.metadata["exit_code"] == 3
    assert "cleaned" not in own.content and own.metadata["exit_code"] == -9


def test_a_bad_kill_grace_is_located_in_the_manifest(tmp_path: Path) -> None:
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(
        "version: 1\ndefaults:\n  kill_grace: soon\ntools:\n"
        "  - name: t\n    command: [ls]\n    kill_grace: -2\n"
    )
    with pytest.raises(ManifestSchemaError) as err:
        load_manifest(manifest)
    first, second = err.value.issues
    assert (first.line, first.field) == (3, "defaults.kill_grace")
    assert "500ms, 30s, 2m or 1h" in first.message
    assert (second.line, second.field) == (7, "tools[0].kill_grace")


# --- shell: true -----------------------------------------------------------------------------


async def test_script_arguments_arrive_as_positional_parameters_and_env(ws: Path) -> None:
    marker = ws / "pwned"
    tool = make(
        ws,
        schema(("a",), a=STR, b=STR, items={"type": "array", "items": STR}),
        shell=True,
        command='printf "%s\\n" "$0" "$1" "$2" "$#" "$GREETING"',
        args=["{a}", "{b?}", "{items...}"],
        env={"GREETING": "hi {a}"},
    )
    for value in hostile(marker):
        result = await call(tool, ws, a=value)
        assert result.content == f"t\n{value}\n\n1\nhi {value}"
    assert not marker.exists()
    many = await call(tool, ws, a="1", b="2", items=["3", "4"])
    assert many.content == "t\n1\n2\n4\nhi 1"


async def test_a_script_naming_a_placeholder_is_refused(ws: Path) -> None:
    with pytest.raises(ConfigError, match=r'the script mentions \{path\}.*use "\$1"') as info:
        make(ws, schema(("path",), path=STR), shell=True, command="cat {path}", args=["{path}"])
    assert info.value.field == "command"
    # Shell syntax with braces is not a placeholder.
    tool = make(
        ws,
        schema(("path",), path=STR),
        shell=True,
        command="echo ${1} | awk '{print $1}'; { echo done; }",
        args=["{path}"],
    )
    assert (await call(tool, ws, path="p")).content == "p\ndone"


# --- sandbox ---------------------------------------------------------------------------------


def test_a_host_list_cannot_sandbox_a_process(ws: Path) -> None:
    with pytest.raises(ConfigError, match="a list of hosts cannot be enforced for a process"):
        make(ws, command=["true"], sandbox=SandboxPolicy(network=("example.com",)))


async def test_the_sandbox_confines_the_command(ws: Path) -> None:
    if detect().best == "none":
        pytest.skip("no sandbox mechanism works on this machine (bubblewrap or Landlock)")
    target = ws / "written"
    tool = make(ws, command=["touch", str(target)], sandbox=SandboxPolicy(filesystem="read-only"))
    result = await call(tool, ws)
    assert result.is_error and not target.exists()
    assert result.metadata["mechanism"] != "none"
    writable = make(ws, command=["touch", str(target)], sandbox=SandboxPolicy())
    assert not (await call(writable, ws)).is_error and target.exists()


# --- configuration errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "params", "field", "message"),
    [
        (
            {"command": ["ls", "-la", "{pth}"]},
            schema(("path",), path=STR),
            "command[2]",
            "placeholder {pth} in command[2] names no parameter; did you mean {path}?",
        ),
        ({"command": "ls -la"}, None, "command", "set shell: true to run it as a sh script"),
        ({"command": ["ls"], "args": ["x"]}, None, "args", "args is only for shell: true"),
        ({"command": []}, None, "command", "non-empty list"),
        ({"shell": True, "command": ["ls"]}, None, "command", "must be the script text"),
        ({"command": ["ls", "{p}"]}, schema(p=STR), "command[1]", "write {p?} to leave"),
        (
            {"command": ["ls"], "cwd": "{d...}"},
            schema(d={"type": "array"}),
            "cwd",
            "list spread {d...} is not allowed in cwd",
        ),
        (
            {"command": ["ls", "{v?-v}"]},
            schema(v=STR),
            "command[1]",
            "needs a boolean parameter, but 'v' is string",
        ),
        (
            {"command": ["ls", "{a...}{b...}"]},
            schema(a={"type": "array"}, b={"type": "array"}),
            "command[1]",
            "2 list spreads",
        ),
        (
            {"command": ["find", ".", "-exec", "rm", "{}", ";"]},
            None,
            "command[4]",
            "'{}' is not a placeholder",
        ),
        ({"command": ["ls", "{x"]}, None, "command[1]", "unmatched '{'"),
        ({"command": ["ls"], "env": {"A-B": "1"}}, None, "env.A-B", "not a valid variable name"),
        ({"command": ["ls"], "ok_exit_codes": ["0"]}, None, "ok_exit_codes", "are integers"),
        ({"command": ["ls"], "kill_grace": -1}, None, "kill_grace", "zero or more seconds"),
        ({"command": ["ls"], "kill_grace": True}, None, "kill_grace", "zero or more seconds"),
    ],
)
def test_bad_configuration_is_a_config_error(
    ws: Path, entry: dict[str, Any], params: dict[str, Any] | None, field: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        make(ws, params, **entry)
    assert info.value.field == field
    assert message in info.value.message


def test_the_handler_repr_shows_no_secret(ws: Path) -> None:
    # error reporters print the locals of failing frames: argv, env, stdin and cwd may hold
    # `${TOKEN}` values from the manifest
    secret = "s3cr3t-token-value"
    tool = make(
        ws,
        schema(),
        command=["curl", "-H", f"Authorization: {secret}"],
        env={"TOKEN": secret},
        stdin=secret,
    )
    assert secret not in repr(tool.handler)
    assert "name='t'" in repr(tool.handler)


def test_the_default_description_shows_no_interpolated_value(ws: Path) -> None:
    # the loader hands `${TOKEN}` results over as `Secret` strings; the description the model
    # reads is made from the command line, and must not carry them
    tool = make(ws, schema(), command=["curl", "-H", Secret("Authorization: s3cr3t-token-value")])
    assert "s3cr3t-token-value" not in tool.description
    assert tool.description == "Run: curl -H ***"
