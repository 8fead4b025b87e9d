"""Approval over MCP, attacked: what the client's user approves is exactly what runs, once.

A call a rule marks `ask` is put to the client's user (mid-call elicitation on handshake-era
connections; an `InputRequiredResult` the client answers and retries on 2026-07-28 ones). Each
test here was an attack that worked before approvals were signed and bound to the whole call:
a tail beyond what the question showed ran, characters that print as nothing hid text, and a
2026-07-28 retry carried an approval computed, replayed or kept from another call. Driven by
the SDK's client against `toolnexus serve` over streamable HTTP (a real server process), and
in process where the server's clock must move.
"""

from __future__ import annotations

import hashlib
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp
import pytest
from mcp import types
from mcp.client.streamable_http import streamable_http_client

from ..test_serve import child_env
from .served import STARTUP, serve_http

WAIT = 30.0
KEY = "toolnexus/approval"
"""Where the server puts its question in an `InputRequiredResult` (and wants the answer)."""

MANIFEST = """
version: 1
name: approvals
tools:
  - name: deploy
    command: [echo, "deployed {target}"]
    parameters:
      type: object
      properties: {target: {type: string}}
      required: [target]
    approval: {default: ask}
  - name: secret
    description: What a tool run by the server finds of the approval secret.
    command: [sh, -c, 'printf "[%s]" "$TOOLNEXUS_APPROVAL_SECRET"']
    read_only: true
"""
SECRET = "an-operator-secret-of-more-than-32-bytes"

YES = types.ElicitResult(action="accept", content={"approve": True})


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("approvals") / "tools.yaml"
    path.write_text(textwrap.dedent(MANIFEST).lstrip())
    return path


@pytest.fixture(scope="module")
def http_url(manifest: Path) -> Iterator[str]:
    """One `toolnexus serve --http` process (sessions) for the module."""
    with serve_http(manifest, child_env(TOOLNEXUS_APPROVAL_SECRET=SECRET)) as url:
        yield url


class Asked:
    """An elicitation callback that approves and keeps every question it was shown."""

    def __init__(self) -> None:
        self.questions: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.questions.append(params.message)
        return YES


@asynccontextmanager
async def client(
    url: str, headers: dict[str, str] | None = None, **options: Any
) -> AsyncIterator[mcp.Client]:
    with anyio.fail_after(STARTUP):
        async with httpx2.AsyncClient(timeout=WAIT, headers=headers) as http:
            stream = streamable_http_client(url, http_client=http)
            async with mcp.Client(stream, read_timeout_seconds=WAIT, **options) as c:
                yield c


def text(result: types.CallToolResult) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


async def first_round(c: mcp.Client, target: str) -> types.InputRequiredResult:
    """Send a call with no answer: the server's question comes back."""
    with anyio.fail_after(WAIT):
        asked = await c.session.call_tool("deploy", {"target": target}, allow_input_required=True)
    assert isinstance(asked, types.InputRequiredResult)
    assert asked.request_state
    return asked


async def retry(
    c: mcp.Client, target: str, state: str | None
) -> types.CallToolResult | types.InputRequiredResult:
    """Send a call with an approval and `state`, as a 2026-07-28 client's retry does."""
    with anyio.fail_after(WAIT):
        return await c.session.call_tool(
            "deploy",
            {"target": target},
            input_responses={KEY: YES},
            request_state=state,
            allow_input_required=True,
        )


def did_not_run(outcome: types.CallToolResult | types.InputRequiredResult) -> str:
    """The call was not run: asked again, or refused; returns what the model would read."""
    if isinstance(outcome, types.InputRequiredResult):
        return ""
    assert outcome.is_error, text(outcome)
    assert "deployed" not in text(outcome)
    return text(outcome)


# --- what the user is shown -------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_user_is_shown_every_character_of_what_runs(http_url: str, mode: str) -> None:
    """Before: the question showed the first 2,000 characters, and the tail ran unseen."""
    asked = Asked()
    target = "a" * 2500 + "-AND-THE-TAIL"
    async with client(http_url, mode=mode, elicitation_callback=asked) as c:
        with anyio.fail_after(WAIT):
            result = await c.call_tool("deploy", {"target": target})
    assert not result.is_error, text(result)
    assert text(result).strip() == f"deployed {target}"
    assert len(asked.questions) == 1
    assert target in asked.questions[0]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_call_too_long_to_show_is_refused_without_asking(http_url: str, mode: str) -> None:
    asked = Asked()
    target = "b" * 40_000
    async with client(http_url, mode=mode, elicitation_callback=asked) as c:
        with anyio.fail_after(WAIT):
            result = await c.call_tool("deploy", {"target": target})
    assert asked.questions == []
    said = did_not_run(result)
    assert "too long to show" in said and "characters" in said


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_characters_that_print_as_nothing_are_shown_escaped(http_url: str, mode: str) -> None:
    """A right-to-left override, zero-width space, terminal escape or C1 control would hide or
    reorder what the user reads; the question shows each as a JSON escape."""
    asked = Asked()
    target = "safe\u202eEVIL\u200b\x1b[2K\x9b\u2028end"
    async with client(http_url, mode=mode, elicitation_callback=asked) as c:
        with anyio.fail_after(WAIT):
            result = await c.call_tool("deploy", {"target": target})
    assert not result.is_error, text(result)
    (question,) = asked.questions
    assert all(ch.isprintable() for ch in question), ascii(question)
    for escape in ("\\u202e", "\\u200b", "\\u001b", "\\u009b", "\\u2028"):
        assert escape in question, (escape, question)


# --- 2026-07-28 retries: the approval is the server's, for this call, once --------------------


@pytest.mark.anyio
async def test_an_approval_for_one_call_does_not_run_another(http_url: str) -> None:
    """Before: the state was a hash of the cut question, so a call differing after the cut
    took the approval of the one the user saw."""
    seen = "c" * 2100
    async with client(http_url, elicitation_callback=Asked()) as c:
        question = await first_round(c, seen + "-harmless-")
        outcome = await retry(c, seen + "-AND-WORSE", question.request_state)
    said = did_not_run(outcome)
    assert said == "" or "another call" in said


@pytest.mark.anyio
async def test_an_approval_computed_by_the_client_is_refused(http_url: str) -> None:
    """Before: the state was a plain hash of the question; a client could compute it for a
    call its user never saw."""
    async with client(http_url, elicitation_callback=Asked()) as c:
        question = await first_round(c, "staging")
        shown = question.input_requests[KEY].params.message  # type: ignore[union-attr]
        forged_question = shown.replace('"staging"', '"production"')
        forged = hashlib.sha256(forged_question.encode()).hexdigest()[:32]
        outcome = await retry(c, "production", forged)
    said = did_not_run(outcome)
    assert said == "" or "not issued by this server" in said


@pytest.mark.anyio
async def test_an_approval_runs_its_call_once(http_url: str) -> None:
    async with client(http_url, elicitation_callback=Asked()) as c:
        question = await first_round(c, "once")
        first = await retry(c, "once", question.request_state)
        assert isinstance(first, types.CallToolResult) and not first.is_error, first
        assert text(first).strip() == "deployed once"
        again = await retry(c, "once", question.request_state)
    said = did_not_run(again)
    assert said == "" or "already used" in said


@pytest.mark.anyio
async def test_an_approval_given_to_one_caller_does_not_run_for_another(http_url: str) -> None:
    """The caller is the credential the request carried: bob cannot use the approval alice's
    user gave, for the very same call."""
    alice = {"Authorization": "Bearer alice"}
    async with client(http_url, headers=alice, elicitation_callback=Asked()) as c:
        question = await first_round(c, "shared")
    bob = {"Authorization": "Bearer bob"}
    async with client(http_url, headers=bob, elicitation_callback=Asked()) as c:
        outcome = await retry(c, "shared", question.request_state)
    assert "another call" in did_not_run(outcome)
    async with client(http_url, headers=alice, elicitation_callback=Asked()) as c:
        ran = await retry(c, "shared", question.request_state)
    assert isinstance(ran, types.CallToolResult) and not ran.is_error, ran


@pytest.mark.anyio
async def test_an_answer_without_the_servers_state_is_not_an_approval(http_url: str) -> None:
    async with client(http_url, elicitation_callback=Asked()) as c:
        outcome = await retry(c, "no-state", None)
    did_not_run(outcome)


@pytest.mark.anyio
async def test_the_tools_a_server_runs_never_see_its_approval_secret(http_url: str) -> None:
    async with client(http_url) as c:
        with anyio.fail_after(WAIT):
            result = await c.call_tool("secret", {})
    assert not result.is_error and SECRET not in text(result)
    assert text(result).strip() == "[]"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"approval_timeout": 0}, "--approval-timeout: must be a positive number"),
        ({"approval_timeout": float("nan")}, "--approval-timeout: must be a positive number"),
    ],
)
def test_serve_refuses_a_bad_approval_timeout(
    manifest: Path, options: dict[str, Any], message: str
) -> None:
    from toolnexus import ConfigError
    from toolnexus.serve.server import ServeOptions, serve

    with pytest.raises(ConfigError, match=message):
        serve(ServeOptions(manifest=manifest, **options))


def test_a_secret_too_short_to_be_one_is_refused(
    manifest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolnexus import ConfigError
    from toolnexus.serve.server import ServeOptions, serve

    monkeypatch.setenv("TOOLNEXUS_APPROVAL_SECRET", "hunter2")
    with pytest.raises(ConfigError, match="TOOLNEXUS_APPROVAL_SECRET: is 7 bytes long"):
        serve(ServeOptions(manifest=manifest, http="127.0.0.1:0"))


# --- in process: the server's clock, and what binds an approval -------------------------------


@asynccontextmanager
async def served(manifest: Path, **options: Any) -> AsyncIterator[mcp.Client]:
    """A 2026-07-28 client of `build_server` over the SDK's in-process transport."""
    from toolnexus import acreate_toolkit
    from toolnexus.serve.server import build_server

    async with await acreate_toolkit(manifest) as toolkit:
        server = build_server(toolkit, **options)
        async with mcp.Client(server, elicitation_callback=Asked()) as c:
            assert c.protocol_version == "2026-07-28"
            yield c


@pytest.mark.anyio
async def test_an_approval_expires(manifest: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: an approval never expired. Now it holds for the approval timeout."""
    import time

    from toolnexus.serve import approvals

    async with served(manifest, approval_timeout=60) as c:
        question = await first_round(c, "later")
        later = time.time() + 61
        monkeypatch.setattr(approvals, "_now", lambda: later)
        outcome = await retry(c, "later", question.request_state)
    said = did_not_run(outcome)
    assert "expired" in said and "60 s" in said


@pytest.mark.anyio
async def test_servers_sharing_a_secret_do_not_share_approvals(
    manifest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers share the secret; two different servers under one secret still bind each
    approval to the server (its name) that asked."""
    monkeypatch.setenv("TOOLNEXUS_APPROVAL_SECRET", "s" * 40)
    async with served(manifest, name="first") as c:
        question = await first_round(c, "there")
    async with served(manifest, name="second") as c:
        outcome = await retry(c, "there", question.request_state)
    assert "another call" in did_not_run(outcome)
