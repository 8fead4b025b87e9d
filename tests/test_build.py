"""`create_toolkit("tools.yaml")` end to end: every kind of tool, rules, middleware, errors."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolnexus import (
    ApprovalRequest,
    Decision,
    ManifestError,
    ManifestImportError,
    ManifestSchemaError,
    Result,
    Tool,
    ToolContext,
    UsageError,
    acreate_toolkit,
    create_toolkit,
    tool,
)

from .conftest import MCP_SERVERS


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


MATH = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def test_python_shell_and_http_tools_from_one_manifest(tmp_path: Path, http_server: Any) -> None:
    write(tmp_path, "mathmod.py", MATH)
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        defaults: {timeout: 10s}
        middleware:
          - {audit: {path: logs/calls.jsonl}}
        tools:
          - name: add
            python: mathmod:add
          - name: say
            description: Echo words
            command: [echo, "{text}"]
            parameters:
              type: object
              properties: {text: {type: string}}
              required: [text]
          - name: first_item
            http:
              url: "${BASE_URL}/json"
              response: {pick: "$.data.items[0].name"}
        """,
    )
    env = {"BASE_URL": http_server.url}
    with create_toolkit(manifest, env=env) as tk:
        assert [t.name for t in tk.tools()] == ["add", "first_item", "say"]
        assert tk.get("add").description == "Add two integers."
        assert tk.execute("add", {"a": 2, "b": 40}).content == "42"
        said = tk.execute("say", {"text": "hello; rm -rf / $(id)"})
        assert said.content.strip() == "hello; rm -rf / $(id)"
        assert tk.execute("first_item").content.strip('"\n') == "a"
        assert tk.get("say").source == "shell"
    log = [json.loads(x) for x in (tmp_path / "logs" / "calls.jsonl").read_text().splitlines()]
    assert [entry["tool"] for entry in log] == ["add", "say", "first_item"]


def test_approval_rules_decide_from_arguments_and_name_their_line(tmp_path: Path) -> None:
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        tools:
          - name: show
            command: [echo, "{path}"]
            parameters:
              type: object
              properties: {path: {type: string}}
              required: [path]
            approval:
              default: allow
              rules:
                - {decision: deny, when: {path: {glob: "/etc/**"}}}
                - {decision: ask, when: {path: {prefix: "secret"}}}
        """,
    )
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    with create_toolkit(manifest, approver=approver) as tk:
        verdict = tk.check("show", {"path": "/etc/passwd"})
        assert verdict.decision is Decision.DENY
        assert verdict.origin is not None
        assert verdict.origin.startswith(f"{manifest}:12")
        denied = tk.execute("show", {"path": "/etc/passwd"})
        assert denied.is_error
        assert "tools.yaml:12" in denied.content
        assert tk.execute("show", {"path": "secret.txt"}).content.strip() == "secret.txt"
        assert asked[0].verdict.decision is Decision.ASK
        assert tk.execute("show", {"path": "notes.txt"}).content.strip() == "notes.txt"
        assert len(asked) == 1


def test_manifest_permissions_deny_wins_and_bare_deny_hides_the_tool(tmp_path: Path) -> None:
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        permissions:
          allow: ["say"]
          deny: ["say(text:*password*)", "hidden"]
        tools:
          - {name: say, command: [echo, "{text}"],
             approval: allow}
          - {name: hidden, command: [echo, hi]}
        """,
    )
    with create_toolkit(manifest) as tk:
        assert tk.names() == ["say"]
        assert tk.execute("say", {"text": "ok"}).content.strip() == "ok"
        refused = tk.execute("say", {"text": "my password is x"})
        assert refused.is_error
        assert "denied" in refused.content
        assert tk.execute("hidden").is_error
        assert tk.check("hidden").decision is Decision.DENY


def test_defaults_approval_ask_fails_closed_without_an_approver(tmp_path: Path) -> None:
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        defaults: {approval: ask}
        tools:
          - {name: say, command: [echo, hi]}
        """,
    )
    with create_toolkit(manifest) as tk:
        result = tk.execute("say")
        assert result.is_error
        assert "no approver" in result.content


def test_every_build_problem_is_reported_at_once_with_its_line(tmp_path: Path) -> None:
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        tools:
          - name: one
            command: [echo, "{txt}"]
            parameters: {type: object, properties: {text: {type: string}}}
          - name: two
            python: no_such_module_here:f
          - name: three
            command: [echo, hi]
            approval:
              rules:
                - {decision: deny, when: {x: {glob_: "*"}}}
        """,
    )
    with pytest.raises(ManifestError) as err:
        create_toolkit(manifest)
    text = str(err.value)
    assert len(err.value.issues) == 3
    assert "tools.yaml:4" in text  # the placeholder
    assert "did you mean {text}" in text
    assert "tools.yaml:7" in text  # the import
    assert "no_such_module_here" in text
    assert "tools.yaml:12" in text or "tools.yaml:13" in text  # the rule
    assert "glob" in text


def test_an_import_error_alone_is_a_manifest_import_error(tmp_path: Path) -> None:
    write(tmp_path, "broken.py", "raise RuntimeError('boom at import')\n")
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        tools:
          - {name: f, python: broken:f}
        """,
    )
    with pytest.raises(ManifestImportError, match="boom at import"):
        create_toolkit(manifest)


def test_python_tool_with_a_sandbox_is_refused_at_its_line(tmp_path: Path) -> None:
    write(tmp_path, "mathmod.py", MATH)
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        tools:
          - name: add
            python: mathmod:add
            sandbox: {network: false}
        """,
    )
    with pytest.raises(ManifestSchemaError) as err:
        create_toolkit(manifest)
    assert "tools.yaml:5" in str(err.value)
    assert "isolate: process" in str(err.value)


def test_shell_tool_sandbox_is_enforced(tmp_path: Path) -> None:
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        tools:
          - name: touch
            command: [touch, "{path}"]
            sandbox: {filesystem: read-only}
        """,
    )
    with create_toolkit(manifest) as tk:
        result = tk.execute("touch", {"path": str(tmp_path / "made")})
        assert result.is_error
        assert not (tmp_path / "made").exists()


def test_tool_middleware_and_timeout_from_yaml(tmp_path: Path) -> None:
    write(
        tmp_path,
        "slow.py",
        '''
        import asyncio

        async def nap(seconds: float) -> str:
            """Sleep a while."""
            await asyncio.sleep(seconds)
            return "done"

        def shout() -> str:
            """Return a long text."""
            return "A" * 5000
        ''',
    )
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        tools:
          - {name: nap, python: slow:nap, timeout: 200ms}
          - {name: shout, python: slow:shout, middleware: [{truncate: 1000}]}
        """,
    )
    with create_toolkit(manifest) as tk:
        slow = tk.execute("nap", {"seconds": 5})
        assert slow.is_error
        assert "timed out after 200ms" in slow.content
        assert tk.execute("nap", {"seconds": 0}).content == "done"
        assert tk.execute("shout").metadata["truncated"] is True


def test_mcp_server_over_stdio_from_the_manifest(tmp_path: Path) -> None:
    manifest = write(
        tmp_path,
        "tools.yaml",
        f"""
        version: 1
        mcp_servers:
          probe:
            command: {sys.executable}
            args: ["{MCP_SERVERS / "everything.py"}"]
            prefix: probe_
            tools: {{include: [echo, add, fail]}}
            approval:
              default: allow
              rules: [{{decision: deny, when: {{a: {{gt: 100}}}}}}]
        """,
    )
    with create_toolkit(manifest) as tk:
        assert tk.names() == ["probe_add", "probe_echo", "probe_fail"]
        assert tk.execute("probe_add", {"a": 2, "b": 3}).content == "5"
        assert tk.execute("probe_add", {"a": 200, "b": 3}).is_error
        failed = tk.execute("probe_fail", {"message": "nope"})
        assert failed.is_error
        assert tk.status()["probe"]["state"] == "ready"


def test_mcp_json_file_is_accepted_as_is(tmp_path: Path) -> None:
    config = {
        "mcpServers": {
            "probe": {"command": sys.executable, "args": [str(MCP_SERVERS / "everything.py")]}
        }
    }
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps(config))
    with create_toolkit(path) as tk:
        assert "add" in tk.names()
        assert tk.execute("add", {"a": 1, "b": 1}).content == "2"


def test_builtins_from_the_manifest_use_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("one\ntwo\n")
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        builtins: [read, todo]
        """,
    )
    with create_toolkit(manifest) as tk:
        assert tk.names() == ["read", "todo"]
        assert "two" in tk.execute("read", {"path": "notes.txt"}).content
        outside = tk.execute("read", {"path": "/etc/passwd"})
        assert outside.is_error


def test_custom_middleware_by_import_path_with_options(tmp_path: Path) -> None:
    write(tmp_path, "mathmod.py", MATH)
    write(
        tmp_path,
        "stamps.py",
        '''
        def make(label: str):
            async def stamp(call, nxt):
                result = await nxt(call)
                return result.with_metadata(stamped=label)
            return stamp
        ''',
    )
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        middleware:
          - {use: "stamps:make", with: {label: team-a}}
        tools:
          - {name: add, python: mathmod:add}
        """,
    )
    with create_toolkit(manifest) as tk:
        assert tk.execute("add", {"a": 1, "b": 1}).metadata["stamped"] == "team-a"


def test_unknown_middleware_is_located(tmp_path: Path) -> None:
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        middleware: [{timeoutt: 3s}]
        tools:
          - {name: say, command: [echo, hi]}
        """,
    )
    with pytest.raises(ManifestError, match=r"tools.yaml:2.*did you mean 'timeout'"):
        create_toolkit(manifest)


@pytest.mark.anyio
async def test_closing_the_toolkit_kills_background_shell_jobs(tmp_path: Path) -> None:
    unique = f"{30 + (os.getpid() % 1000) / 1000:.3f}"  # a sleep no other test runs
    kept: list[dict[str, Any]] = []

    @tool
    def keep_state(ctx: ToolContext) -> str:
        """Hold on to the toolkit's state, as an application may (so no finalizer runs)."""
        kept.append(ctx.state)
        return "kept"

    tk = await acreate_toolkit(builtins=["shell"], extra_tools=[keep_state], workspace=tmp_path)
    try:
        await tk.aexecute("keep_state")
        started = await tk.aexecute(
            "shell",
            {"command": f"sleep {unique}; echo done", "run_in_background": True},
            approver=lambda request: True,
        )
        assert not started.is_error, started.content
        assert started.metadata["job_id"]
        assert _wait_for(lambda: bool(_running(f"sleep {unique}")))
    finally:
        await tk.aclose()  # the event loop keeps running: only the toolkit can stop the job
    assert _wait_for(lambda: not _running(f"sleep {unique}"))


def _running(command: str) -> list[Path]:
    return [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p) == command]


def _wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll a condition that no event can signal (another process's state), bounded."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def test_builtin_fetch_is_not_cut_off_by_the_process_sandbox_defaults(
    tmp_path: Path, http_server: Any
) -> None:
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        defaults:
          sandbox: {filesystem: workspace-write, network: false}   # meant for processes
        builtins:
          fetch: {allow_hosts: [127.0.0.1]}
          read: {}
        """,
    )
    with create_toolkit(manifest) as tk:
        fetched = tk.execute("fetch", {"url": f"{http_server.url}/text", "format": "text"})
        assert not fetched.is_error, fetched.content
        read = tk.get("read")
        assert read is not None and read.sandbox is not None  # file tools do use the policy


@pytest.mark.parametrize(
    ("top", "where", "field", "message"),
    [
        (
            """
            version: 1
            builtins:
              fetch:
                allow_hosts: [127.0.0.1]
                allow_privat: true
            """,
            "tools.yaml:5",
            "builtins.fetch.allow_privat",
            "did you mean 'allow_private'",
        ),
        (
            """
            version: 1
            builtins:
              read: {}
              shell:
                approval:
                  rules: [{when: nonsense, action: allow}]
            """,
            "tools.yaml:6",
            "builtins.shell.approval.rules[0]",
            "unknown key 'action'",
        ),
        (
            """
            version: 1
            include: [team.yaml]
            """,
            "team.yaml:4",
            "builtins.gerp",
            "did you mean 'grep'",
        ),
    ],
)
def test_bad_builtin_options_name_the_file_line_and_field(
    tmp_path: Path, top: str, where: str, field: str, message: str
) -> None:
    write(tmp_path, "team.yaml", "version: 1\nbuiltins:\n  - grep\n  - gerp\n")
    manifest = write(tmp_path, "tools.yaml", top)
    with pytest.raises(ManifestError) as err:
        create_toolkit(manifest)
    (issue,) = err.value.issues
    assert f"{issue.file}:{issue.line}" == str(tmp_path / where)
    assert issue.field.startswith(field)
    assert message in issue.message


def test_a_manifest_python_tool_can_run_inline(tmp_path: Path) -> None:
    write(
        tmp_path,
        "quick.py",
        """
        import threading

        def where() -> str:
            return threading.current_thread().name
        """,
    )
    manifest = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        tools:
          - {python: quick:where, name: inline_where, inline: true}
          - {python: quick:where, name: threaded_where}
          - {python: quick:where, name: both, inline: true, isolate: process}
        """,
    )
    with pytest.raises(ManifestError, match=r"tools.yaml:5:\d+: tools\[2\].inline: .*choose one"):
        create_toolkit(manifest)
    manifest.write_text(manifest.read_text().rsplit("\n", 2)[0] + "\n")
    with create_toolkit(manifest) as tk:
        assert tk.execute("inline_where").content == "toolnexus-loop"
        assert tk.execute("threaded_where").content != "toolnexus-loop"


@pytest.mark.parametrize(
    ("builtins", "names"),
    [
        (False, []),
        (None, []),
        ("read", ["read"]),
        (["read", "grep"], ["grep", "read"]),
        (("todo",), ["todo"]),
        ({"read": {"max_lines": 5}, "todo": None}, ["read", "todo"]),
    ],
    ids=["false", "none", "name", "list", "tuple", "mapping"],
)
def test_builtins_takes_every_documented_shape(builtins: Any, names: list[str]) -> None:
    with create_toolkit(builtins=builtins) as tk:
        assert tk.names() == names


@pytest.mark.parametrize("builtins", [True, "all"])
def test_builtins_true_and_all_give_every_builtin(builtins: Any) -> None:
    with create_toolkit(builtins=builtins) as tk:
        assert {"read", "write", "edit", "grep", "shell", "todo"} <= set(tk.names())


@pytest.mark.parametrize(
    ("builtins", "got"),
    [
        (3, "got int 3"),
        (b"read", "got bytes"),
        (["read", 3], "builtins[1] is int 3"),
        ({"read": "fast"}, "builtins['read'] is str 'fast'"),
        ({3: {}}, "builtins key 3"),
    ],
)
def test_builtins_of_another_shape_is_refused_naming_the_shapes(builtins: Any, got: str) -> None:
    with pytest.raises(UsageError) as caught:
        create_toolkit(builtins=builtins)
    message = str(caught.value)
    assert message.startswith("builtins=")
    assert got in message
    assert "a list of names" in message and "False or None" in message


async def _echo_handler(arguments: dict[str, Any], ctx: ToolContext) -> Result:
    return Result(content="ran")


@pytest.mark.parametrize(
    ("parameters", "needle"),
    [
        (
            {"type": "object", "properties": {"path": {"type": "strin"}}},
            "$.properties.path.type: unknown type 'strin'",
        ),
        ({"type": "array"}, "must be an object schema"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}}, "points to nothing"),
    ],
    ids=["typo", "not-object", "dangling-ref"],
)
def test_extra_tools_schemas_are_checked_at_build(parameters: dict[str, Any], needle: str) -> None:
    bad = Tool(name="bad", handler=_echo_handler, parameters=parameters)
    with pytest.raises(UsageError) as caught:
        create_toolkit(extra_tools=[bad])
    message = str(caught.value)
    assert message.startswith("extra_tools[0]: tool 'bad': parameters: ")
    assert needle in message


def test_a_hand_made_tool_in_a_python_module_has_its_schema_checked(tmp_path: Path) -> None:
    write(
        tmp_path,
        "handmade.py",
        """
        from toolnexus import Result, Tool

        async def _run(arguments, ctx):
            return Result(content="ran")

        TOOLS = [Tool(name="bad", handler=_run,
                      parameters={"type": "object", "properties": {"n": {"type": "integr"}}})]
        """,
    )
    manifest = write(tmp_path, "tools.yaml", "version: 1\ntools:\n  - python: handmade:TOOLS\n")
    with pytest.raises(ManifestError) as caught:
        create_toolkit(manifest)
    message = str(caught.value)
    assert "tools.yaml:3:" in message
    assert "tool 'bad': parameters: " in message and "unknown type 'integr'" in message
