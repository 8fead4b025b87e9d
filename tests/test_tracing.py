"""The `trace` middleware and trace-context propagation, with the real OpenTelemetry SDK.

Spans of this process go to the SDK's in-memory exporter; processes on the far side (an MCP
server, `toolnexus serve`) write theirs to a JSON-lines file (`fixtures/tracing/spanfile.py`)
that the test reads once they are done. Everything runs for real: python, shell and HTTP tools
against 127.0.0.1, MCP servers as subprocesses over stdio.
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import anyio
import mcp
import pytest
from mcp import StdioServerParameters
from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags

from tests.conftest import QuietHandler, start_http_server, stop_http_server
from toolnexus import Result, create_toolkit, tool
from toolnexus.errors import ManifestError
from toolnexus.middleware import from_config
from toolnexus.tracing import inject_headers, trace

REPO = Path(__file__).resolve().parents[1]
SERVERS = REPO / "tests" / "mcp_servers"
TRACING = REPO / "tests" / "fixtures" / "tracing"
TOKEN = "tok-4f9a8b7c6d"
WAIT = 30.0


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    """This process's spans. The global provider can be set only once per process: an SDK
    provider set by another test module is reused."""
    provider = otel_trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        otel_trace.set_tracer_provider(provider)
    assert otel_trace.get_tracer_provider() is provider
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory
    memory.shutdown()  # later test modules' spans are not kept


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> InMemorySpanExporter:
    exporter.clear()
    return exporter


def agent_tracer() -> otel_trace.Tracer:
    return otel_trace.get_tracer("test-agent")


def tool_spans(memory: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in memory.get_finished_spans() if s.name.startswith("execute_tool ")]


def ids(span: ReadableSpan) -> tuple[int, int]:
    ctx = span.get_span_context()
    assert ctx is not None
    return ctx.trace_id, ctx.span_id


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent else None


def read_spans(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


TOOLS_PY = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def boom(text: str) -> str:
    """Always fails."""
    raise ValueError(f"cannot handle {text}")


def echo(text: str, api_key: str = "") -> str:
    """Echo the text back."""
    return f"echo: {text}"
'''


def write_manifest(folder: Path, body: str) -> Path:
    (folder / "mytools.py").write_text(TOOLS_PY)
    manifest = folder / "tools.yaml"
    manifest.write_text(textwrap.dedent(body).lstrip())
    return manifest


MANIFEST = """
version: 1
middleware:
  - trace
tools:
  - name: add
    python: mytools:add
  - name: boom
    python: mytools:boom
  - name: small_add
    python: mytools:add
    approval:
      rules:
        - {decision: deny, when: {a: {gt: 100}}, reason: too big}
  - name: careful_add
    python: mytools:add
    approval: ask
"""


# --- spans and their attributes ---------------------------------------------------------------


def test_span_names_attributes_and_parent_through_the_sync_api(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    toolkit = create_toolkit(write_manifest(tmp_path, MANIFEST))
    try:
        with agent_tracer().start_as_current_span("agent turn") as agent:
            result = toolkit.execute("add", {"a": 2, "b": 3}, call_id="call_42")
        assert result.content == "5"
    finally:
        toolkit.close()
    (span,) = tool_spans(spans)
    assert span.name == "execute_tool add"
    assert span.kind is SpanKind.INTERNAL
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call_42",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add two integers.",
        "toolnexus.tool.source": "python",
        "toolnexus.approval.decision": "allow",
        "toolnexus.sandbox.mechanism": "none",
    }
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "toolnexus"
    # The call ran on the toolkit's private loop thread, yet its span is the agent's child.
    agent_ctx = agent.get_span_context()
    assert ids(span)[0] == agent_ctx.trace_id
    assert parent_id(span) == agent_ctx.span_id


def test_the_caller_is_named_in_the_span(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    from toolnexus.base import Caller, acting_as

    alice = Caller(subject="alice", issuer="https://id", client_id="cli", groups=("ops", "dev"))
    toolkit = create_toolkit(write_manifest(tmp_path, MANIFEST))
    try:
        with acting_as(alice):  # what `serve` does for each request of an OAuth caller
            toolkit.execute("add", {"a": 2, "b": 3})
        toolkit.execute("add", {"a": 2, "b": 3})
    finally:
        toolkit.close()
    served, local = tool_spans(spans)
    attributes = dict(served.attributes or {})
    assert attributes["enduser.id"] == "alice"
    assert attributes["toolnexus.caller.subject"] == "alice"
    assert attributes["toolnexus.caller.groups"] == ("ops", "dev")
    assert attributes["toolnexus.caller.client_id"] == "cli"
    assert not any(k.startswith(("enduser.", "toolnexus.caller.")) for k in local.attributes or {})


@pytest.mark.anyio
async def test_async_call_from_another_loop_keeps_the_parent(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    toolkit = create_toolkit(write_manifest(tmp_path, MANIFEST))  # its own loop thread
    try:
        with agent_tracer().start_as_current_span("agent turn") as agent:
            results = await toolkit.aexecute_many([("add", {"a": 1, "b": 1}, "c1")])
            single = await toolkit.aexecute("add", {"a": 1, "b": 2}, call_id="c2")
        assert [r.content for r in results] == ["2"]
        assert single.content == "3"
    finally:
        await toolkit.aclose()
    found = {str(dict(s.attributes or {})["gen_ai.tool.call.id"]): s for s in tool_spans(spans)}
    assert sorted(found) == ["c1", "c2"]
    for span in found.values():
        assert parent_id(span) == agent.get_span_context().span_id


def test_denied_calls_get_error_spans_with_the_rule_and_its_line(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    toolkit = create_toolkit(write_manifest(tmp_path, MANIFEST))
    try:
        denied = toolkit.execute("small_add", {"a": 101, "b": 2})
        unasked = toolkit.execute("careful_add", {"a": 1, "b": 2})  # ask, and no approver
    finally:
        toolkit.close()
    assert denied.is_error and unasked.is_error
    by_name = {s.name: s for s in tool_spans(spans)}
    span = by_name["execute_tool small_add"]
    attrs = dict(span.attributes or {})
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description is not None and "denied" in span.status.description
    assert attrs["error.type"] == "ApprovalDenied"
    assert attrs["toolnexus.approval.decision"] == "deny"
    assert attrs["toolnexus.approval.rule"] == 'deny when {"a": {"gt": 100}}'
    assert str(attrs["toolnexus.approval.origin"]).endswith("tools.yaml:13:11")  # the rule's line
    assert "toolnexus.sandbox.mechanism" not in attrs  # it never ran
    asked = dict(by_name["execute_tool careful_add"].attributes or {})
    assert asked["toolnexus.approval.decision"] == "deny"
    assert asked["error.type"] == "ApprovalDenied"
    assert "tools.yaml:16:" in str(asked["toolnexus.approval.origin"])


def test_an_approved_ask_keeps_the_rule_that_asked(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    toolkit = create_toolkit(write_manifest(tmp_path, MANIFEST), approver=lambda request: True)
    try:
        assert toolkit.execute("careful_add", {"a": 1, "b": 2}).content == "3"
    finally:
        toolkit.close()
    (span,) = tool_spans(spans)
    attrs = dict(span.attributes or {})
    assert span.status.status_code is StatusCode.UNSET
    assert attrs["toolnexus.approval.decision"] == "allow"
    assert attrs["toolnexus.approval.rule"] == "approval: ask"
    assert "tools.yaml:16:" in str(attrs["toolnexus.approval.origin"])
    assert "error.type" not in attrs


def test_failed_call_gets_an_error_span(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    toolkit = create_toolkit(write_manifest(tmp_path, MANIFEST))
    try:
        result = toolkit.execute("boom", {"text": "this"})
    finally:
        toolkit.close()
    assert result.is_error
    (span,) = tool_spans(spans)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description is not None
    assert "ValueError: cannot handle this" in span.status.description
    attrs = dict(span.attributes or {})
    assert attrs["error.type"] == "ValueError"
    assert attrs["toolnexus.approval.decision"] == "allow"
    assert "gen_ai.tool.call.arguments" not in attrs  # not asked for
    assert "gen_ai.tool.call.result" not in attrs


def test_a_timeout_inside_is_an_error_span(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    @tool
    async def slow() -> str:
        """Sleeps."""
        await anyio.sleep(5)
        return "late"

    toolkit = create_toolkit(
        extra_tools=[slow], middleware=[trace(), from_config("timeout", "50ms")]
    )
    try:
        with agent_tracer().start_as_current_span("agent turn") as agent:  # carried across
            result = toolkit.execute("slow", {})
    finally:
        toolkit.close()
    assert result.metadata["error_type"] == "ToolTimeout"
    (span,) = tool_spans(spans)
    assert parent_id(span) == agent.get_span_context().span_id
    assert dict(span.attributes or {})["error.type"] == "ToolTimeout"
    assert span.status.status_code is StatusCode.ERROR


def test_shell_tool_reports_the_sandbox_that_ran_it(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        version: 1
        middleware: [trace]
        tools:
          - name: hello
            command: [echo, hi]
            sandbox: {filesystem: read-only, network: false, required: false}
        """,
    )
    toolkit = create_toolkit(manifest)
    try:
        result = toolkit.execute("hello", {})
    finally:
        toolkit.close()
    assert result.content.strip() == "hi", result.content
    (span,) = tool_spans(spans)
    attrs = dict(span.attributes or {})
    assert attrs["toolnexus.tool.source"] == "shell"
    assert attrs["toolnexus.sandbox.mechanism"] == result.metadata["mechanism"]
    assert attrs["toolnexus.sandbox.mechanism"] in ("bwrap", "landlock", "none")


# --- YAML and Python forms --------------------------------------------------------------------


def test_yaml_forms_per_tool_true_false_and_options(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        version: 1
        tools:
          - name: on
            python: mytools:add
            middleware: [{trace: true}]
          - name: off
            python: mytools:add
            middleware: [{trace: false}]
          - name: recorded
            python: mytools:echo
            middleware: [{trace: {record_arguments: true, max_chars: 20}}]
        """,
    )
    toolkit = create_toolkit(manifest)
    try:
        toolkit.execute("on", {"a": 1, "b": 2})
        toolkit.execute("off", {"a": 1, "b": 2})
        toolkit.execute("recorded", {"text": "a long text that will be cut"})
    finally:
        toolkit.close()
    by_name = {s.name: dict(s.attributes or {}) for s in tool_spans(spans)}
    assert sorted(by_name) == ["execute_tool on", "execute_tool recorded"]
    recorded = by_name["execute_tool recorded"]
    assert recorded["gen_ai.tool.call.arguments"] == '{"text": "a long tex'  # cut at 20
    assert "gen_ai.tool.call.result" not in recorded


def test_yaml_option_typo_is_a_located_manifest_error(tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        version: 1
        middleware:
          - trace: {record_argument: true}
        tools:
          - name: add
            python: mytools:add
        """,
    )
    with pytest.raises(ManifestError) as caught:
        create_toolkit(manifest)
    text = str(caught.value)
    assert "tools.yaml:3" in text
    assert "record_argument" in text


def test_python_form_with_its_own_provider(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    own = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(own))

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    toolkit = create_toolkit(extra_tools=[add], middleware=[trace(tracer_provider=provider)])
    try:
        assert toolkit.execute("add", {"a": 1, "b": 2}).content == "3"
    finally:
        toolkit.close()
    assert [s.name for s in own.get_finished_spans()] == ["execute_tool add"]
    assert tool_spans(spans) == []  # not the global provider's


def test_bad_python_options_are_config_errors() -> None:
    from toolnexus.errors import ConfigError

    with pytest.raises(ConfigError, match="max_chars"):
        trace(max_chars=0)
    with pytest.raises(ConfigError, match="bad options for middleware 'trace'"):
        from_config("trace", {"record_everything": True})


# --- opt-in recording, masked -----------------------------------------------------------------


class _EchoHeaders(QuietHandler):
    """Answers with the Authorization header it got; keeps every request's headers."""

    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        type(self).seen.append({k.lower(): v for k, v in self.headers.items()})
        body = f"auth={self.headers.get('Authorization')} path={self.path}".encode()
        self.send(200, "text/plain", body)


@pytest.fixture
def echo_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    _EchoHeaders.seen = []
    httpd = start_http_server(_EchoHeaders)
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", _EchoHeaders.seen
    finally:
        stop_http_server(httpd)


def http_manifest(tmp_path: Path, base: str, middleware: str) -> Path:
    return write_manifest(
        tmp_path,
        f"""
        version: 1
        tools:
          - name: ping
            http:
              method: GET
              url: "{base}/ping/{{note}}"
              headers: {{Authorization: "Bearer ${{TRACE_TEST_TOKEN}}"}}
            parameters:
              type: object
              properties: {{note: {{type: string}}, api_key: {{type: string}}}}
              required: [note]
            middleware: {middleware}
        """,
    )


def test_opt_in_arguments_and_results_keep_secrets_masked(
    tmp_path: Path, spans: InMemorySpanExporter, echo_server: tuple[str, list[dict[str, str]]]
) -> None:
    base, _ = echo_server
    middleware = "[{trace: {record_arguments: true, record_results: true}}]"
    manifest = http_manifest(tmp_path, base, middleware)
    toolkit = create_toolkit(manifest, env={"TRACE_TEST_TOKEN": TOKEN})
    try:
        result = toolkit.execute("ping", {"note": TOKEN, "api_key": "k-1"})
    finally:
        toolkit.close()
    assert TOKEN in result.content  # the server echoed it: the model's text is not our concern
    (span,) = tool_spans(spans)
    attrs = dict(span.attributes or {})
    arguments = json.loads(str(attrs["gen_ai.tool.call.arguments"]))
    assert arguments == {"note": "***", "api_key": "***"}  # interpolated value; secret key
    recorded = str(attrs["gen_ai.tool.call.result"])
    assert TOKEN not in recorded
    assert "auth=Bearer ***" in recorded
    assert TOKEN not in json.dumps({k: str(v) for k, v in attrs.items()})
    assert attrs["toolnexus.tool.source"] == "http"
    assert attrs["toolnexus.sandbox.mechanism"] == "none"


# --- propagation: HTTP headers ----------------------------------------------------------------


def test_http_tools_send_the_span_as_traceparent(
    tmp_path: Path, spans: InMemorySpanExporter, echo_server: tuple[str, list[dict[str, str]]]
) -> None:
    base, seen = echo_server
    toolkit = create_toolkit(
        http_manifest(tmp_path, base, "[trace]"), env={"TRACE_TEST_TOKEN": TOKEN}
    )
    try:
        with agent_tracer().start_as_current_span("agent turn"):
            assert not toolkit.execute("ping", {"note": "a"}).is_error
        assert not toolkit.execute("ping", {"note": "b"}).is_error  # no agent span this time
    finally:
        toolkit.close()
    first, second = tool_spans(spans)
    for span, headers in ((first, seen[0]), (second, seen[1])):
        ctx = span.get_span_context()
        assert ctx is not None
        expected = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
        assert headers["traceparent"] == expected
        assert headers["authorization"] == f"Bearer {TOKEN}"


def test_inject_headers_keeps_the_manifests_own_and_is_a_no_op_without_a_span(
    spans: InMemorySpanExporter,
) -> None:
    assert inject_headers([("Accept", "x")]) == [("Accept", "x")]  # no current span
    with agent_tracer().start_as_current_span("agent turn"):
        mine = [("TraceParent", "00-" + "1" * 32 + "-" + "2" * 16 + "-01")]
        assert inject_headers(mine) == mine
        added = dict(inject_headers([]))
    assert set(added) == {"traceparent"}


# --- propagation: MCP, both ways --------------------------------------------------------------


def test_one_trace_spans_agent_toolkit_and_mcp_server(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    server_spans = tmp_path / "server-spans.jsonl"
    manifest = write_manifest(
        tmp_path,
        f"""
        version: 1
        middleware: [trace]
        mcp_servers:
          traced:
            command: {json.dumps(sys.executable)}
            args: [{json.dumps(str(SERVERS / "traced.py"))}, {json.dumps(str(server_spans))}]
            connect_timeout: {WAIT}
        """,
    )
    toolkit = create_toolkit(manifest)
    try:
        (name,) = [t.name for t in toolkit.tools() if t.name.endswith("where")]
        with agent_tracer().start_as_current_span("agent turn") as agent:
            result = toolkit.execute(name, {"label": "x"})
    finally:
        toolkit.close()
    assert not result.is_error, result.content
    received = json.loads(result.content)
    agent_trace = agent.get_span_context().trace_id
    version, trace_hex, parent_hex, flags = received["traceparent"].split("-")
    assert version == "00" and int(flags, 16) & 1  # sampled
    assert int(trace_hex, 16) == agent_trace
    # The traceparent's parent is our execute_tool span or a client span beneath it.
    (ours,) = tool_spans(spans)
    assert parent_id(ours) == agent.get_span_context().span_id
    local = {ids(s)[1]: s for s in spans.get_finished_spans()}
    chain, cursor = [], int(parent_hex, 16)
    while cursor in local and cursor != ids(ours)[1]:
        chain.append(local[cursor].name)
        cursor = parent_id(local[cursor]) or 0
    assert cursor == ids(ours)[1], chain
    # The server's own span is a child of what it received, in the agent's trace.
    remote = read_spans(server_spans)
    work = [s for s in remote if s["name"] == "server work x"]
    assert len(work) == 1, remote
    assert work[0]["trace_id"] == trace_hex
    assert work[0]["parent_id"] == parent_hex
    assert work[0]["span_id"] == received["work_span_id"]
    # ... and so is the span the mcp SDK's server opened for the request.
    (handler,) = [s for s in remote if s["name"] == "tools/call where"]
    assert handler["kind"] == "SERVER"
    assert (handler["trace_id"], handler["parent_id"]) == (trace_hex, parent_hex)


@pytest.mark.anyio
async def test_serve_continues_the_callers_trace(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    server_spans = tmp_path / "serve-spans.jsonl"
    manifest = write_manifest(
        tmp_path,
        """
        version: 1
        name: traced-serve
        middleware: [trace]
        tools:
          - name: add
            python: mytools:add
        """,
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(TRACING / "serve_traced.py"), str(server_spans), "serve", str(manifest)],
        env={"PYTHONPATH": str(REPO)},
        cwd=tmp_path,
    )
    caller = SpanContext(
        trace_id=0x5B8EFFF798038103D269B633813FC60C,
        span_id=0xEEE19B7EC3C1B174,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    token = otel_context.attach(otel_trace.set_span_in_context(NonRecordingSpan(caller)))
    try:
        with anyio.fail_after(WAIT):
            async with mcp.Client(params, mode="legacy", read_timeout_seconds=WAIT) as client:
                answer = await client.call_tool("add", {"a": 4, "b": 5})
    finally:
        otel_context.detach(token)
    assert not answer.is_error
    remote = read_spans(server_spans)
    (executed,) = [s for s in remote if s["name"] == "execute_tool add"]
    assert executed["trace_id"] == f"{caller.trace_id:032x}"
    assert executed["attributes"]["gen_ai.tool.name"] == "add"
    assert str(executed["attributes"]["gen_ai.tool.call.id"]).startswith("mcp-")
    # execute_tool < the SDK's server span < this process's client span < the caller's span.
    server = {s["span_id"]: s for s in remote}
    handler = server[executed["parent_id"]]
    assert handler["kind"] == "SERVER" and handler["name"] == "tools/call add"
    local = {f"{ids(s)[1]:016x}": s for s in spans.get_finished_spans()}
    sent = local[handler["parent_id"]]
    assert sent.kind is SpanKind.CLIENT
    assert parent_id(sent) == caller.span_id


# --- cost: nothing loaded, nothing done -------------------------------------------------------


def _run_python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_no_opentelemetry_module_is_imported_without_the_middleware() -> None:
    out = _run_python(
        """
        import sys
        import toolnexus
        loaded = lambda: sorted(m for m in sys.modules if m.startswith("opentelemetry"))
        assert loaded() == [], loaded()
        from toolnexus import create_toolkit, tool

        @tool
        def add(a: int, b: int) -> int:
            "Add."
            return a + b

        toolkit = create_toolkit(
            {"version": 1, "middleware": [{"timeout": "5s"}, "audit"]}, extra_tools=[add]
        )
        assert toolkit.execute("add", {"a": 1, "b": 2}).content == "3"
        toolkit.close()
        print(loaded())
        """
    )
    assert out == "[]"


def test_without_a_provider_the_middleware_does_nothing_until_one_is_set() -> None:
    out = _run_python(
        """
        from toolnexus import create_toolkit, tool
        from toolnexus.tracing import trace

        @tool
        def add(a: int, b: int) -> int:
            "Add."
            return a + b

        toolkit = create_toolkit(extra_tools=[add], middleware=[trace(record_results=True)])
        before = toolkit.execute("add", {"a": 1, "b": 2}).content

        from opentelemetry import trace as api
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        memory = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        assert memory.get_finished_spans() == ()
        api.set_tracer_provider(provider)
        after = toolkit.execute("add", {"a": 1, "b": 2}).content
        toolkit.close()
        print(before, after, [s.name for s in memory.get_finished_spans()])
        """
    )
    assert out == "3 3 ['execute_tool add']"


def test_disabled_trace_is_a_plain_pass_through() -> None:
    middleware = trace(False)

    async def nxt(call: Any) -> Result:
        return Result(content="inner")

    async def main() -> Result:
        return await middleware(None, nxt)  # type: ignore[arg-type]

    assert anyio.run(main).content == "inner"


def test_the_readme_attribute_table_matches_the_spans(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    page = (REPO / "docs" / "middleware.md").read_text(encoding="utf-8")
    start = page.index("## Tracing (OpenTelemetry)")
    end = page.find("\n## ", start + 1)
    section = page[start : end if end != -1 else len(page)]
    documented = {
        name
        for line in section.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`([a-z_]+\.[a-z_.]+)`", line.split("|")[1])
    }
    manifest = write_manifest(
        tmp_path,
        """
        version: 1
        middleware: [{trace: {record_arguments: true, record_results: true}}]
        tools:
          - name: boom
            python: mytools:boom
            approval: {rules: [{decision: allow, when: {text: {prefix: x}}}]}
        """,
    )
    toolkit = create_toolkit(manifest)
    try:
        toolkit.execute("boom", {"text": "xyz"})
    finally:
        toolkit.close()
    (span,) = tool_spans(spans)
    emitted = set(span.attributes or {})
    source = (REPO / "toolnexus" / "tracing.py").read_text(encoding="utf-8")
    assert emitted <= documented, emitted - documented
    assert {name for name in documented if f'"{name}"' not in source} == set()


@pytest.mark.anyio
async def test_a_cancelled_call_ends_its_span_as_an_error(spans: InMemorySpanExporter) -> None:
    from toolnexus import acreate_toolkit

    started = anyio.Event()

    @tool
    async def wait() -> str:
        """Waits until cancelled."""
        started.set()
        await anyio.sleep(30)
        return "never"

    toolkit = await acreate_toolkit(extra_tools=[wait], middleware=[trace()])
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(toolkit.aexecute, "wait", {})
            await started.wait()
            group.cancel_scope.cancel()
    finally:
        await toolkit.aclose()
    (span,) = tool_spans(spans)
    assert span.end_time is not None
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "CancelledError"


def test_without_opentelemetry_installed_trace_is_a_config_error(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, "version: 1\nmiddleware: [trace]\n")
    out = _run_python(
        f"""
        import sys
        sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
        from toolnexus import create_toolkit
        from toolnexus.errors import ToolnexusError
        try:
            create_toolkit({str(manifest)!r})
        except ToolnexusError as exc:
            print(exc)
        """
    )
    assert "opentelemetry-api" in out
    assert "toolnexus[otel]" in out
    assert "tools.yaml:2" in out


def test_a_refused_sync_call_inside_a_span_leaves_no_unawaited_coroutine(
    spans: InMemorySpanExporter,
) -> None:
    holder: list[Any] = []

    @tool
    async def reenter() -> str:
        """Calls the sync API from the toolkit's own loop: refused."""
        return holder[0].execute("reenter", {}).content

    toolkit = create_toolkit(extra_tools=[reenter], middleware=[trace()])
    holder.append(toolkit)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = toolkit.execute("reenter", {})
            gc.collect()
    finally:
        toolkit.close()
    assert "called from the event loop that runs the toolkit" in result.content
    assert [str(w.message) for w in caught] == []


def test_a_secret_argument_echoed_by_an_error_stays_out_of_the_span(
    spans: InMemorySpanExporter,
) -> None:
    """The error text is always recorded (span status): a value under a secret-looking key that
    the tool echoes in its error is masked there, as `record_arguments` masks it."""
    key = "sk-live-5e1f0a9b"

    @tool
    def login(user: str, api_key: str) -> str:
        """Log in."""
        raise ValueError(f"key {api_key} rejected for {user}")

    toolkit = create_toolkit(extra_tools=[login], middleware=[trace(record_results=True)])
    try:
        result = toolkit.execute("login", {"user": "ada", "api_key": key})
    finally:
        toolkit.close()
    assert key in result.content  # what the model reads is not the trace's business
    (span,) = tool_spans(spans)
    description = span.status.description or ""
    assert "key *** rejected for ada" in description
    attrs = {k: str(v) for k, v in (span.attributes or {}).items()}
    assert key not in json.dumps(attrs)
    assert "key *** rejected for ada" in attrs["gen_ai.tool.call.result"]
