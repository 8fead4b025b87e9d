"""`toolnexus serve`: real servers (stdio and streamable HTTP subprocesses) driven by the SDK's
client: annotations, calls, approval rules through elicitation in both protocol eras, the
bearer token, reload notifications, stateless workers."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp
import pytest
from mcp import StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ToolsListChanged

import toolnexus
from toolnexus import ConfigError, acreate_toolkit, create_toolkit
from toolnexus.serve.server import ServeOptions, app_from_env, build_server, http_app, serve

from .conftest import OutputLines, free_port

REPO = Path(toolnexus.__file__).resolve().parents[1]
TOKEN = "test-token-0123456789"
STARTUP = 60.0
"""Bound on a server's start (the machine is shared; `import mcp` alone takes a second)."""
WAIT = 30.0
"""Bound on every client interaction."""

MATH = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

MANIFEST = """
version: 1
name: team-math
tools:
  - name: add
    python: mathmod:add
    read_only: true
    idempotent: true
  - name: say
    description: Echo words
    command: [echo, "{text}"]
    destructive: true
    parameters:
      type: object
      properties: {text: {type: string}}
      required: [text]
    approval:
      default: allow
      rules:
        - {decision: deny, when: {text: {prefix: "rm"}}}
        - {decision: ask, when: {text: {prefix: "please"}}}
"""

SHOUT = """
  - name: shout
    command: [echo, "HEY"]
"""


def write_manifest(folder: Path, extra: str = "") -> Path:
    (folder / "mathmod.py").write_text(textwrap.dedent(MATH).lstrip())
    manifest = folder / "tools.yaml"
    manifest.write_text(textwrap.dedent(MANIFEST).lstrip() + extra)
    return manifest


def save_atomically(path: Path, text: str) -> None:
    """The way editors save: write a temporary file, rename it over the original."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a `toolnexus` child process: none of our `TOOLNEXUS_*` settings
    (a developer's shell must not change a test), this checkout first on PYTHONPATH, and then
    `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLNEXUS_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env | extra


def answering(action: str, approve: bool = True) -> Any:
    """An elicitation callback that gives one answer and records the questions."""
    questions: list[str] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        questions.append(params.message)
        content = {"approve": approve} if action == "accept" else None
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    callback.questions = questions  # type: ignore[attr-defined]
    return callback


# --- server processes -------------------------------------------------------------------------


@dataclass
class Served:
    url: str
    manifest: Path
    process: subprocess.Popen[str]


@contextmanager
def serving(
    args: list[str], *, cwd: Path, ready: str, count: int = 1, lines: list[str] | None = None
) -> Iterator[Any]:
    """Run `toolnexus serve ARGS` until `ready` has appeared `count` times on its stderr (the
    lines up to there go into `lines`, for a test of what serve says as it starts); stop and
    reap the whole process group afterwards."""
    process = subprocess.Popen(
        [sys.executable, "-m", "toolnexus", "serve", *args],
        cwd=cwd,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stderr is not None
    output = OutputLines(process.stderr)
    try:
        output.wait_for(lambda line: ready in line, what="server", seconds=STARTUP, count=count)
        if lines is not None:
            lines.extend(output.log)
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):  # already exited
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # already exited
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)
        output.close()


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One shared streamable HTTP server with a token and --watch."""
    folder = tmp_path_factory.mktemp("http")
    manifest = write_manifest(folder)
    port = free_port()
    args = [str(manifest), "--http", f"127.0.0.1:{port}", "--token", TOKEN, "--watch"]
    with serving(args, cwd=folder, ready="Application startup complete") as process:
        yield Served(url=f"http://127.0.0.1:{port}/mcp", manifest=manifest, process=process)


@asynccontextmanager
async def http_client(
    url: str, token: str | None = TOKEN, statuses: list[int] | None = None, **options: Any
) -> AsyncIterator[mcp.Client]:
    """An SDK client over streamable HTTP; `statuses` collects every HTTP status it got."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def record(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    hooks = {"response": [record]}
    async with httpx2.AsyncClient(headers=headers, timeout=WAIT, event_hooks=hooks) as http:
        transport = streamable_http_client(url, http_client=http)
        async with mcp.Client(transport, read_timeout_seconds=WAIT, **options) as client:
            yield client


def stdio_params(manifest: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolnexus", "serve", str(manifest), *extra],
        env={"PYTHONPATH": child_env()["PYTHONPATH"]},
        cwd=manifest.parent,
    )


# --- stdio ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_stdio_serves_annotated_tools_rules_and_reloads(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path)
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    approve = answering("accept")
    with anyio.fail_after(STARTUP):
        client = mcp.Client(
            stdio_params(manifest, "--watch"),
            mode="legacy",
            read_timeout_seconds=WAIT,
            message_handler=on_message,
            elicitation_callback=approve,
        )
        async with client:
            assert client.server_info.name == "team-math"  # the manifest's name
            assert client.server_capabilities is not None
            assert client.server_capabilities.tools is not None
            assert client.server_capabilities.tools.list_changed is True

            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert sorted(tools) == ["add", "say"]
            add = tools["add"].annotations
            assert add is not None and add.read_only_hint is True and add.idempotent_hint is True
            say = tools["say"].annotations
            assert say is not None and say.destructive_hint is True and not say.read_only_hint
            assert tools["say"].input_schema["required"] == ["text"]

            added = await client.call_tool("add", {"a": 2, "b": 40})
            assert not added.is_error
            assert added.content[0].text == "42"  # type: ignore[union-attr]
            said = await client.call_tool("say", {"text": "hello $(id)"})
            assert said.content[0].text.strip() == "hello $(id)"  # type: ignore[union-attr]

            denied = await client.call_tool("say", {"text": "rm -rf /"})
            assert denied.is_error
            assert "denied by rule" in denied.content[0].text  # type: ignore[union-attr]
            assert approve.questions == []
            unknown = await client.call_tool("ad", {"a": 1, "b": 2})
            assert unknown.is_error
            assert "did you mean 'add'" in unknown.content[0].text  # type: ignore[union-attr]

            asked = await client.call_tool("say", {"text": "please wave"})
            assert not asked.is_error
            assert asked.content[0].text.strip() == "please wave"  # type: ignore[union-attr]
            assert len(approve.questions) == 1
            assert "'say'" in approve.questions[0] and "please wave" in approve.questions[0]
            assert "tools.yaml:" in approve.questions[0]  # the rule's origin is shown

            save_atomically(manifest, manifest.read_text() + SHOUT)
            await changed.wait()
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == ["add", "say", "shout"]
            shout = await client.call_tool("shout", {})
            assert shout.content[0].text.strip() == "HEY"  # type: ignore[union-attr]


# --- streamable HTTP --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_http_requires_the_bearer_token(http_server: Served) -> None:
    with anyio.fail_after(WAIT):
        async with httpx2.AsyncClient(timeout=WAIT) as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            bare = await http.post(http_server.url, json=body)
            assert bare.status_code == 401
            assert bare.headers["www-authenticate"].startswith("Bearer")
            wrong = await http.post(
                http_server.url, json=body, headers={"Authorization": f"Bearer {TOKEN}x"}
            )
            assert wrong.status_code == 401
            health = await http.get(http_server.url.replace("/mcp", "/healthz"))
            assert health.status_code == 200
            assert health.json()["status"] == "ok"

        statuses: list[int] = []
        with pytest.raises(ExceptionGroup) as failure:  # the SDK's task groups wrap it
            async with http_client(http_server.url, token=None, statuses=statuses) as client:
                await client.list_tools()
        assert failure.group_contains(mcp.MCPError)
        assert statuses and set(statuses) == {401}

        async with http_client(http_server.url) as client:
            assert client.server_info.name == "team-math"
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"add", "say"} <= names
            added = await client.call_tool("add", {"a": 1, "b": 2})
            assert added.content[0].text == "3"  # type: ignore[union-attr]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_http_ask_goes_to_the_clients_user(http_server: Served, mode: str) -> None:
    """auto negotiates 2026-07-28 (the question comes back as an InputRequiredResult), legacy
    the 2025 handshake (the server sends elicitation/create mid-call)."""
    yes, no, cancel = answering("accept"), answering("decline"), answering("cancel")
    unticked = answering("accept", approve=False)
    call = {"text": "please deploy"}
    with anyio.fail_after(WAIT):
        async with http_client(http_server.url, mode=mode, elicitation_callback=yes) as client:
            expected = "2026-07-28" if mode == "auto" else "2025-11-25"
            assert client.protocol_version == expected
            result = await client.call_tool("say", call)
            assert not result.is_error
            assert result.content[0].text.strip() == "please deploy"  # type: ignore[union-attr]
            assert len(yes.questions) == 1 and "please deploy" in yes.questions[0]
            plain = await client.call_tool("say", {"text": "hello"})
            assert not plain.is_error and len(yes.questions) == 1  # no rule asked: no question

        refusals = {
            no: "the user declined this call",
            cancel: "dismissed the approval question without answering",
            unticked: "without approving the call",
        }
        for refuser, refusal in refusals.items():
            async with http_client(
                http_server.url, mode=mode, elicitation_callback=refuser
            ) as client:
                result = await client.call_tool("say", call)
                assert result.is_error
                assert refusal in result.content[0].text  # type: ignore[union-attr]
                assert len(refuser.questions) == 1

        async with http_client(http_server.url, mode=mode) as client:
            result = await client.call_tool("say", call)
            assert result.is_error
            text = result.content[0].text  # type: ignore[union-attr]
            assert "needs the user's approval" in text
            assert "did not declare elicitation" in text


@pytest.mark.anyio
async def test_http_watch_tells_listening_clients(http_server: Served) -> None:
    with anyio.fail_after(WAIT):
        async with http_client(http_server.url) as client:
            before = {t.name for t in (await client.list_tools()).tools}
            assert "shout" not in before
            async with client.listen(tools_list_changed=True) as events:
                manifest = http_server.manifest
                save_atomically(manifest, manifest.read_text() + SHOUT)
                async for event in events:
                    assert isinstance(event, ToolsListChanged)
                    break
            after = {t.name for t in (await client.list_tools()).tools}
            assert after == before | {"shout"}


def test_http_on_a_public_address_needs_a_token(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "toolnexus", "serve", str(manifest), "--http", "0.0.0.0:8000"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=STARTUP,
        check=False,
    )
    assert done.returncode == 2
    assert "not a loopback address" in done.stderr
    assert "--token" in done.stderr and "TOOLNEXUS_TOKEN" in done.stderr


@pytest.mark.anyio
async def test_stateless_workers_serve_calls_and_approvals(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = [str(manifest), "--http", f"127.0.0.1:{port}", "--workers", "2", "--stateless"]
    with serving(args, cwd=tmp_path, ready="Application startup complete", count=2):
        with anyio.fail_after(WAIT):
            approve = answering("accept")
            async with http_client(url, token=None, elicitation_callback=approve) as client:
                results = [await client.call_tool("add", {"a": i, "b": 1}) for i in range(6)]
                assert [r.content[0].text for r in results] == [  # type: ignore[union-attr]
                    str(i + 1) for i in range(6)
                ]
                # The answer comes back in a second request, which any worker may serve.
                asked = await client.call_tool("say", {"text": "please scale"})
                assert not asked.is_error and len(approve.questions) == 1

            async with http_client(
                url, token=None, mode="legacy", elicitation_callback=approve
            ) as client:
                added = await client.call_tool("add", {"a": 20, "b": 22})
                assert added.content[0].text == "42"  # type: ignore[union-attr]
                refused = await client.call_tool("say", {"text": "please scale"})
                assert refused.is_error
                assert "stateless HTTP" in refused.content[0].text  # type: ignore[union-attr]


# --- the library API, in process ---------------------------------------------------------------


@pytest.mark.anyio
async def test_build_server_announces_reloads_of_a_toolkit_on_another_loop(tmp_path: Path) -> None:
    """A sync toolkit runs on its own loop thread; the server's clients are told all the same,
    on both protocol eras."""
    manifest = write_manifest(tmp_path)
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    toolkit = create_toolkit(manifest)
    try:
        server = build_server(toolkit, name="team-tools")
        with anyio.fail_after(WAIT):
            async with (
                mcp.Client(server, mode="legacy", message_handler=on_message) as legacy,
                mcp.Client(server) as modern,
            ):
                assert legacy.server_info.name == "team-tools"
                assert [t.name for t in (await legacy.list_tools()).tools] == ["add", "say"]
                async with modern.listen(tools_list_changed=True) as events:
                    save_atomically(manifest, manifest.read_text() + SHOUT)
                    event = await anyio.to_thread.run_sync(toolkit.reload)
                    assert event.kind == "tools_changed" and event.added == ("shout",)
                    async for update in events:
                        assert isinstance(update, ToolsListChanged)
                        break
                await changed.wait()
                names = [t.name for t in (await modern.list_tools()).tools]
                assert names == ["add", "say", "shout"]
    finally:
        toolkit.close()


@pytest.mark.anyio
async def test_an_unanswered_approval_question_refuses_the_call_in_time(tmp_path: Path) -> None:
    """A handshake-era client whose user never answers: the call is refused after the
    server's approval timeout, with a message the model can act on, and nothing runs."""
    manifest = write_manifest(tmp_path)
    asked = anyio.Event()

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with await acreate_toolkit(manifest) as toolkit:
        server = build_server(toolkit, approval_timeout=0.2)
        with anyio.fail_after(WAIT):
            async with mcp.Client(server, mode="legacy", elicitation_callback=never) as client:
                assert client.server_info.name == "team-math"
                result = await client.call_tool("say", {"text": "please wave"})
                assert asked.is_set()
                assert result.is_error
                text = result.content[0].text  # type: ignore[union-attr]
                assert "nobody answered the approval question within 0.2 s" in text
                allowed = await client.call_tool("say", {"text": "hello"})
                assert not allowed.is_error


@pytest.mark.anyio
async def test_http_app_serves_a_toolkit_with_a_token(tmp_path: Path) -> None:
    """`http_app(toolkit)` as a library user mounts it: any ASGI server, here in process."""
    manifest = write_manifest(tmp_path)
    async with await acreate_toolkit(manifest) as toolkit:
        app = http_app(toolkit, token=TOKEN)
        transport = httpx2.ASGITransport(app)
        base = "http://127.0.0.1:8000"
        with anyio.fail_after(WAIT):
            async with app.router.lifespan_context(app):
                async with httpx2.AsyncClient(transport=transport, base_url=base) as http:
                    health = await http.get("/healthz")
                    assert health.json() == {"status": "ok", "generation": 1}
                    assert (await http.post("/mcp", json={})).status_code == 401
                headers = {"Authorization": f"bearer {TOKEN}"}  # the scheme is case-insensitive
                async with httpx2.AsyncClient(
                    transport=transport, base_url=base, headers=headers
                ) as http:
                    streams = streamable_http_client(f"{base}/mcp", http_client=http)
                    async with mcp.Client(streams) as client:
                        added = await client.call_tool("add", {"a": 3, "b": 4})
                        assert added.content[0].text == "7"  # type: ignore[union-attr]
        assert not toolkit.closed  # the caller owns the toolkit it passed
        assert toolkit.on_reload == []  # and the app stopped listening to its reloads


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"workers": 2}, "--workers: applies to streamable HTTP only"),
        ({"stateless": True}, "--stateless: applies to streamable HTTP only"),
        ({"http": "127.0.0.1:8000", "workers": 0}, "--workers: must be at least 1"),
        ({"http": "127.0.0.1:8000", "workers": 2}, "several workers need --stateless"),
        ({"http": "localhost"}, "'localhost' is not HOST:PORT"),
        ({"http": "127.0.0.1:99999"}, "not a number from 0 to 65535"),
        ({"http": "[::1]8000"}, "IPv6 host in brackets"),
        ({"http": "10.1.2.3:8000"}, "10.1.2.3, which is not a loopback address"),
        ({"http": "[::]:8000"}, "on ::, which is not a loopback address"),
        ({"http": "example.org:8000"}, "example.org, which is not a loopback address"),
    ],
)
def test_serve_refuses_bad_options_before_starting(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    manifest = write_manifest(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(message)):
        serve(ServeOptions(manifest=manifest, **options))


def test_app_from_env_names_the_missing_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLNEXUS_SERVE_MANIFEST", raising=False)
    with pytest.raises(ConfigError, match="TOOLNEXUS_SERVE_MANIFEST is not set"):
        app_from_env()
