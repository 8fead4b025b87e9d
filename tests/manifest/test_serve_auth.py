"""`serve: {auth: ...}`: read into a `ServeAuth`, secrets interpolated and hidden, and every bad
value reported at its line with what to write instead."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from toolnexus import ManifestError
from toolnexus.manifest import ServeAuth, load_manifest

Write = Callable[[str, str], Path]


def test_the_block_is_read_with_secrets_hidden(write: Write) -> None:
    path = write(
        "tools.yaml",
        """
        version: 1
        serve:
          auth:
            issuer: https://login.example.com/realms/team
            audience: https://tools.example.com/mcp
            required_scopes: [mcp, tools]
            groups_claim: realm_access.groups
            introspection: {client_id: tools-rs, client_secret: "${RS_SECRET}"}
        """,
    )
    auth = load_manifest(path, env={"RS_SECRET": "s3cret-value"}).serve_auth
    assert auth == ServeAuth(
        issuer="https://login.example.com/realms/team",
        audience="https://tools.example.com/mcp",
        required_scopes=("mcp", "tools"),
        groups_claim="realm_access.groups",
        client_id="tools-rs",
        client_secret="s3cret-value",
    )
    assert "s3cret" not in repr(auth)


def test_no_block_means_no_auth(write: Write) -> None:
    assert load_manifest(write("t.yaml", "version: 1\n")).serve_auth is None


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        (
            "issuer: http://login.example.com\n    audience: https://t.example.com/mcp",
            "4:13: serve.auth.issuer",
            "plain http on a host other than this machine; use https",
        ),
        (
            "issuer: login.example.com\n    audience: https://t.example.com/mcp",
            "4:13: serve.auth.issuer",
            "expected an absolute http(s) URL, got 'login.example.com'",
        ),
        (
            "issuer: https://l.example.com\n    audience: https://t.example.com/mcp#x",
            "5:15: serve.auth.audience",
            "expected a URL without a fragment",
        ),
        (
            "issuer: https://l.example.com\n    audience: https://t.example.com/mcp\n"
            "    jwks_url: http://10.0.0.1/keys",
            "6:15: serve.auth.jwks_url",
            "plain http on a host other than this machine",
        ),
        (
            "isuer: https://l.example.com\n    audience: https://t.example.com/mcp",
            "4:5: serve.auth.isuer",
            "unknown key 'isuer' in serve.auth; did you mean 'issuer'?",
        ),
        (
            "issuer: https://l.example.com",
            "serve.auth",
            "missing required key 'audience'",
        ),
        (
            "issuer: https://l.example.com\n    audience: https://t.example.com/mcp\n"
            "    introspection: {client_id: rs}",
            "serve.auth.introspection",
            "missing required key 'client_secret'",
        ),
        (
            "issuer: https://l.example.com\n    audience: https://t.example.com/mcp\n"
            "    required_scopes: [mcp, 'two words']",
            "6:28: serve.auth.required_scopes[1]",
            "expected a scope name (no spaces, quotes or backslashes), got 'two words'",
        ),
    ],
)
def test_a_bad_value_is_reported_at_its_line(
    write: Write, body: str, where: str, message: str
) -> None:
    path = write("tools.yaml", f"version: 1\nserve:\n  auth:\n    {body}\n")
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    text = str(err.value)
    assert where in text and message in text, text


def test_an_included_manifest_may_not_set_serve(write: Write) -> None:
    write(
        "team.yaml",
        "version: 1\nserve:\n  auth: {issuer: https://l.example.com, audience: https://t/mcp}\n",
    )
    path = write("tools.yaml", "version: 1\ninclude: [team.yaml]\n")
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    assert "team.yaml:3:3: serve: applies to the top manifest only" in str(err.value)
