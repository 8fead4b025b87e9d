"""What a client is told when `toolnexus serve --http --token` refuses it: no token and a wrong
token are told apart (in the 401's body and challenge, never naming the token expected), our
MCP client says which in the syntax of the file that declared the server, and a denial names
the rule's file relative to the manifest's folder, not the server's absolute path."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import mcp
import pytest
from mcp.client.streamable_http import streamable_http_client

from toolnexus import create_toolkit

from ..test_serve import child_env
from .served import serve_http

TOKEN = "serve-token-0123456789"
WAIT = 30.0

MANIFEST = """\
version: 1
tools:
  - name: hello
    description: Say hello
    command: [echo, hello]
    read_only: true
  - name: wipe
    description: Wipe everything
    command: [echo, wiped]
    approval: deny
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`toolnexus serve --http --token` on a manifest given by its absolute path, run from
    another folder (as an MCP client's config runs it)."""
    folder = tmp_path_factory.mktemp("served")
    manifest = folder / "tools.yaml"
    manifest.write_text(MANIFEST)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    with serve_http(manifest, child_env(), "--token", TOKEN, cwd=elsewhere) as url:
        yield url


def test_the_401_says_whether_no_token_came_or_it_was_refused(served: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    with httpx2.Client(timeout=WAIT) as http:
        bare = http.post(served, json=body)
        wrong = http.post(served, json=body, headers={"Authorization": "Bearer nope"})
    assert bare.status_code == wrong.status_code == 401
    assert "no token was sent" in bare.json()["detail"]
    assert "error=" not in bare.headers["www-authenticate"]  # RFC 6750: no error without one
    assert wrong.json() == {"error": "invalid_token", "detail": "the token was refused"}
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert TOKEN not in bare.text + wrong.text + json.dumps(dict(wrong.headers))


def _state(manifest: Path) -> dict[str, object]:
    with create_toolkit(manifest) as toolkit:
        return toolkit.status()["srv"]


def test_our_client_tells_missing_from_refused_in_yaml(served: str, tmp_path: Path) -> None:
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(f"version: 1\nmcp_servers:\n  srv: {{url: '{served}'}}\n")
    missing = str(_state(manifest)["reason"])
    assert "HTTP 401" in missing and "no token was sent" in missing
    assert '`headers: {Authorization: "Bearer ${TOKEN}"}` in its manifest entry' in missing

    manifest.write_text(
        "version: 1\nmcp_servers:\n"
        f"  srv: {{url: '{served}', headers: {{Authorization: 'Bearer wrong'}}}}\n"
    )
    refused = str(_state(manifest)["reason"])
    assert "the token was refused" in refused and "no token was sent" not in refused


def test_the_hint_for_a_mcp_json_server_is_in_json(served: str, tmp_path: Path) -> None:
    manifest = tmp_path / ".mcp.json"
    manifest.write_text(json.dumps({"mcpServers": {"srv": {"type": "http", "url": served}}}))
    reason = str(_state(manifest)["reason"])
    assert "no token was sent" in reason
    assert '`"headers": {"Authorization": "Bearer ${TOKEN}"}` in its .mcp.json entry' in reason
    assert "headers: {Authorization" not in reason


@pytest.mark.anyio
async def test_a_denial_over_mcp_names_the_manifest_relative_to_its_folder(served: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with anyio.fail_after(WAIT):
        async with httpx2.AsyncClient(headers=headers, timeout=WAIT) as http:
            transport = streamable_http_client(served, http_client=http)
            async with mcp.Client(transport, read_timeout_seconds=WAIT) as client:
                denied = await client.call_tool("wipe", {})
    text = denied.content[0].text  # type: ignore[union-attr]
    assert denied.is_error and "denied" in text
    assert "(tools.yaml:10:" in text, text
    assert os.sep + "served" not in text  # no absolute path of the server's
