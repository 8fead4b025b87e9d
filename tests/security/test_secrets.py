"""Secrets from `${VAR}`, attacked: a token that looks like a placeholder stays a literal token,
and no secret value reaches an error message, a manifest error or an audit record.

Each secret below holds characters templates give meaning to (`{name}`, a lone brace) or
that HTTP echoes (paths, bodies), against a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolnexus import ManifestError, Toolkit, create_toolkit
from toolnexus.manifest.interpolate import Secret, interpolate, mask_secrets

from ..conftest import QuietHandler, start_http_server, stop_http_server

TOKEN = "tok{city}en-5ecret-A1"  # a placeholder-looking token
BRACE = "abc}def-5ecret-B2"  # an unbalanced brace
PATH_TOKEN = "123456:AAE-5ecret-C3"  # Telegram-style, in a URL path
QUERY_KEY = "qk-5ecret-D4"
SECRETS = (TOKEN, BRACE, PATH_TOKEN, QUERY_KEY)
ENV = {"TOKEN": TOKEN, "BRACE": BRACE, "PATH_TOKEN": PATH_TOKEN, "QUERY_KEY": QUERY_KEY}


class Server:
    """Echoes what it got, and refuses `/bot...` paths with a body that repeats the path and
    the Authorization header (as real APIs do)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                seen = {"path": self.path, "headers": dict(self.headers.items())}
                server.requests.append(seen)
                if self.path.startswith("/bot"):
                    body = f"no such bot: {self.path}, auth {self.headers['Authorization']}"
                    status = 401
                else:
                    body, status = json.dumps(seen), 200
                self.send(status, "text/plain", body.encode())

        self.httpd = start_http_server(Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        stop_http_server(self.httpd)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} leaked"
        assert secret.replace(":", "%3A") not in text, f"{secret!r} leaked encoded"


def http_tool(name: str, url: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "note": {"type": "string"}},
            "required": ["city"],
        },
        "http": {"url": url, **extra},
    }


def toolkit(tmp_path: Path, server: Server, *tools: dict[str, Any]) -> Toolkit:
    manifest = {
        "version": 1,
        "middleware": [{"audit": {"path": str(tmp_path / "audit.jsonl")}}],
        "tools": list(tools),
    }
    return create_toolkit(manifest, env=ENV, workspace=tmp_path)


def test_a_placeholder_inside_a_secret_is_literal(tmp_path: Path, server: Server) -> None:
    tool = http_tool(
        "echo",
        server.base + "/echo",
        headers={"Authorization": "Bearer ${TOKEN}", "X-Brace": "${BRACE}"},
    )
    with toolkit(tmp_path, server, tool) as tk:
        result = tk.execute("echo", {"city": "INJECTED"})
        assert not result.is_error, result.content
        description = tk.get("echo").description
    headers = server.requests[-1]["headers"]
    assert headers["Authorization"] == f"Bearer {TOKEN}"  # not "Bearer tokINJECTEDen..."
    assert headers["X-Brace"] == BRACE
    assert_clean(description)


def test_a_shell_token_with_braces_is_passed_as_is(tmp_path: Path) -> None:
    manifest = {
        "version": 1,
        "tools": [
            {
                "name": "say",
                "command": ["printf", "%s|%s", "${TOKEN}", "{city}"],
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            }
        ],
    }
    with create_toolkit(manifest, env=ENV, workspace=tmp_path) as tk:
        result = tk.execute("say", {"city": "x"})
    assert result.content.strip() == f"{TOKEN}|x"


def test_error_results_and_the_audit_file_hold_no_secret(tmp_path: Path, server: Server) -> None:
    refused = http_tool(
        "bot",
        server.base + "/bot${PATH_TOKEN}/send",
        headers={"Authorization": "Bearer ${TOKEN}"},
        query={"key": "${QUERY_KEY}"},
    )
    unreachable = http_tool(
        "down", "http://127.0.0.1:9/bot${PATH_TOKEN}/x", headers={"X-Key": "${BRACE}"}
    )
    with toolkit(tmp_path, server, refused, unreachable) as tk:
        first = tk.execute("bot", {"city": "a", "note": f"my token is {TOKEN}"})
        second = tk.execute("down", {"city": "b", "note": QUERY_KEY})
    assert first.is_error and "HTTP 401" in first.content
    assert "no such bot: /bot***/send" in first.content
    assert second.is_error and "could not connect" in second.content
    for result in (first, second):
        assert_clean(result.content)
        assert_clean(json.dumps(result.metadata, default=str))
    audit = (tmp_path / "audit.jsonl").read_text()
    assert audit.count("\n") == 2
    assert_clean(audit)
    records = [json.loads(line) for line in audit.splitlines()]
    assert records[0]["args"]["note"] == "my token is ***"
    assert records[1]["args"]["note"] == "***"


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        (http_tool("t", "http://x.test/", response={"pick": "${TOKEN}"}), "must start with"),
        (http_tool("t", "http://x.test/", headers={"A": "{${TOKEN}"}), "placeholder"),
        (http_tool("t", "http://x.test/", headers={"A": "}${BRACE}"}), "unmatched '}'"),
        (http_tool("t", "http://x.test/{city", headers={"A": "${TOKEN}"}), "unmatched '{'"),
        (http_tool("t", "${PATH_TOKEN}/x"), "http"),
    ],
)
def test_manifest_errors_hold_no_secret(
    tmp_path: Path, tool: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ManifestError) as info:
        create_toolkit({"version": 1, "tools": [tool]}, env=ENV, workspace=tmp_path)
    assert expected in str(info.value)
    assert_clean(str(info.value))
    for issue in info.value.issues:
        assert_clean(issue.message)


def test_secrets_know_their_environment_parts() -> None:
    text, problems = interpolate("Bearer ${A}-${B:-dflt}-${C:-${A}}", {"A": "s3cr3t-aaa"})
    assert problems == []
    assert isinstance(text, Secret)
    assert text == "Bearer s3cr3t-aaa-dflt-s3cr3t-aaa"
    assert [text[a:b] for a, b in text.env_spans] == ["s3cr3t-aaa", "s3cr3t-aaa"]
    assert text.masked() == "Bearer ***-dflt-***"
    assert mask_secrets("echo s3cr3t-aaa and s3cr3t%2Daaa") == "echo *** and s3cr3t%2Daaa"
    assert mask_secrets("short values like 8080 stay") == "short values like 8080 stay"


def test_script_placeholders_and_labels_skip_environment_text() -> None:
    from toolnexus.sources._template import find_script_placeholders, label, parse_template

    script, _ = interpolate("curl -H 'X: ${TOKEN}' {city}", ENV)
    assert find_script_placeholders(script, ["city"]) == ["{city}"]  # the token's is not one
    template = parse_template(interpolate("Bearer ${TOKEN} for {city}", ENV)[0], field="h")
    assert [s.name for s in template.slots] == ["city"]
    assert label(template) == "Bearer *** for {city}"
