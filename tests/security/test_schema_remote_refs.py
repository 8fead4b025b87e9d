"""A tool definition cannot make the toolkit fetch a URL: a `$ref` that leaves the schema's own
document is refused at build (manifest tools, `extra_tools`) or its tool skipped with the reason
(MCP servers), and validation never resolves one, whatever built the schema.

Each test runs a real HTTP server on 127.0.0.1 that serves a schema and records every request:
before, each of these fetched it when a call was validated.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolnexus import ManifestError, Result, Tool, UsageError, create_toolkit
from toolnexus.errors import ConfigError
from toolnexus.schema import check_schema, compile_validator

from ..conftest import QuietHandler, start_http_server, stop_http_server

SERVERS = Path(__file__).parents[1] / "mcp_servers"


class Recorder:
    """Serves `{"type": "integer"}` at every path and remembers each path asked for."""

    def __init__(self) -> None:
        self.fetched: list[str] = []
        recorder = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                recorder.fetched.append(self.path)
                self.send(200, "application/schema+json", b'{"type": "integer"}')

        self.httpd = start_http_server(Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/item.json"


@pytest.fixture
def remote() -> Iterator[Recorder]:
    recorder = Recorder()
    try:
        yield recorder
    finally:
        stop_http_server(recorder.httpd)


def schema_pointing_at(url: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": {"$ref": url}}}


async def echo(args: dict[str, Any], ctx: Any) -> Result:
    return Result(content=json.dumps(args))


# --- build --------------------------------------------------------------------------------------


def test_extra_tools_with_a_remote_ref_are_refused_with_the_tool_and_path(
    remote: Recorder,
) -> None:
    tool = Tool(
        name="fetcher", description="d", parameters=schema_pointing_at(remote.url), handler=echo
    )
    with (
        pytest.raises(UsageError) as caught,
        create_toolkit({"version": 1}, extra_tools=[tool]) as toolkit,
    ):
        toolkit.execute("fetcher", {"x": 1})
    message = str(caught.value)
    assert "extra_tools[0]" in message and "'fetcher'" in message
    assert "$.properties.x.$ref" in message and remote.url in message
    assert "never fetched" in message and "$defs" in message
    assert remote.fetched == []


def test_a_manifest_tool_with_a_remote_ref_is_a_located_error(
    remote: Recorder, tmp_path: Path
) -> None:
    (tmp_path / "mod.py").write_text("def f(x: int = 0) -> str:\n    return str(x)\n")
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            tools:
              - name: fetcher
                python: mod:f
                parameters:
                  type: object
                  properties:
                    x: {{$ref: "{remote.url}"}}
            """
        )
    )
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(ManifestError) as caught, create_toolkit(manifest) as toolkit:
            toolkit.execute("fetcher", {"x": 1})
    finally:
        sys.path.remove(str(tmp_path))
    message = str(caught.value)
    # Located at the reference's own line, with its field path.
    assert "tools.yaml:8:" in message
    assert "tools[0].parameters.properties.x.$ref" in message and "never fetched" in message
    assert remote.fetched == []


def test_an_mcp_servers_tool_with_a_remote_ref_is_skipped_with_the_reason(
    remote: Recorder,
) -> None:
    server = {
        "command": sys.executable,
        "args": [str(SERVERS / "remote_ref.py"), remote.url],
        "connect_timeout": 60,
    }
    with create_toolkit({"version": 1, "mcp_servers": {"r": server}}) as toolkit:
        assert not toolkit.execute("plain", {"x": 1}).is_error
        called = toolkit.execute("fetches", {"x": 1})
        skipped = toolkit.status()["r"]["skipped"]
    assert called.is_error
    assert [s["tool"] for s in skipped] == ["fetches"]
    assert "$.properties.x.$ref" in skipped[0]["reason"]
    assert "never fetched" in skipped[0]["reason"]
    assert remote.fetched == []


@pytest.mark.parametrize(
    "where",
    [
        lambda url: {"$ref": url},
        lambda url: {"$dynamicRef": url},
        lambda url: {"items": {"$ref": url}},
        lambda url: {"allOf": [{"$ref": url}]},
        # Relative to the schema's own `$id`: still another document.
        lambda url: {"$id": url.rsplit("/", 1)[0] + "/root.json", "$ref": "item.json"},
    ],
)
def test_check_schema_refuses_every_reference_leaving_the_document(
    remote: Recorder, where: Any
) -> None:
    schema = {"type": "object", "properties": {"x": where(remote.url)}}
    with pytest.raises(ConfigError, match="never fetched"):
        check_schema(schema)
    assert remote.fetched == []


@pytest.mark.parametrize(
    "schema",
    [
        {"$defs": {"n": {"type": "integer"}}, "properties": {"x": {"$ref": "#/$defs/n"}}},
        # A resource of the document itself, named by its `$id`.
        {"properties": {"x": {"$ref": "urn:item"}, "y": {"$id": "urn:item", "type": "integer"}}},
        {
            "$id": "https://example.org/s.json",
            "properties": {"x": {"$ref": "s.json#/$defs/n"}},
            "$defs": {"n": {"type": "integer"}},
        },
        # The meta-schema ships with jsonschema: validating against it fetches nothing.
        {"properties": {"x": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}},
    ],
)
def test_references_inside_the_document_are_kept(schema: dict[str, Any]) -> None:
    check_schema({"type": "object", **schema})


# --- validation -----------------------------------------------------------------------------------


def test_validation_never_fetches_a_remote_ref(remote: Recorder) -> None:
    """Whatever skipped the build check (a schema given straight to the validator), a call is
    refused with a message, and nothing is fetched."""
    validator = compile_validator(schema_pointing_at(remote.url))
    assert not validator.is_valid({"x": 1})
    ((path, message),) = validator.errors({"x": 1})
    assert path == "$" and "not fetched" in message and remote.url in message
    assert remote.fetched == []


def test_a_shell_tools_hand_written_schema_never_fetches(remote: Recorder) -> None:
    manifest = {
        "version": 1,
        "tools": [
            {
                "name": "say",
                "command": ["echo", "{x}"],
                "parameters": {**schema_pointing_at(remote.url), "required": ["x"]},
            }
        ],
    }
    try:
        with create_toolkit(manifest) as toolkit:
            result = toolkit.execute("say", {"x": 1})
        assert result.is_error and "deployed" not in result.content
    except (ManifestError, UsageError) as exc:  # refused at build: better still
        assert "never fetched" in str(exc)
    assert remote.fetched == []
