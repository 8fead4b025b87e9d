"""`toolnexus serve` passes a served call's progress and its servers' questions on to its own
client: a real `mcp.Client` with callbacks, in front of a served toolkit whose MCP server
reports progress, elicits and samples."""

from __future__ import annotations

from typing import Any

import mcp
import mcp_types as types
import pytest

from toolnexus import acreate_toolkit
from toolnexus.serve.forward import refuse_unforwarded
from toolnexus.serve.server import build_server

from .conftest import manifest, stdio_entry

pytestmark = pytest.mark.anyio


async def test_progress_elicitation_and_sampling_reach_the_serve_client() -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    asked: list[types.ElicitRequestParams] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="tl;dr"), model="client-model"
        )

    ask = refuse_unforwarded
    async with await acreate_toolkit(
        manifest(f=stdio_entry()), elicitation=ask, sampling=ask
    ) as toolkit:
        server = build_server(toolkit)
        async with mcp.Client(
            server, mode="legacy", elicitation_callback=elicit, sampling_callback=sample
        ) as client:
            worked = await client.call_tool("work", {"steps": 2}, progress_callback=on_progress)
            named = await client.call_tool("ask_name", {})
            summed = await client.call_tool("summarize", {"text": "long"})
    assert worked.content[0].text == "did 2 steps"  # type: ignore[union-attr]
    assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]
    assert named.content[0].text == "hello Grace"  # type: ignore[union-attr]
    assert asked[0].message == "What is your name?"
    assert summed.content[0].text == "model client-model said: tl;dr"  # type: ignore[union-attr]


async def test_a_client_without_the_capability_gets_a_clear_refusal() -> None:
    ask = refuse_unforwarded
    async with (
        await acreate_toolkit(manifest(f=stdio_entry()), elicitation=ask, sampling=ask) as toolkit,
        mcp.Client(build_server(toolkit), mode="legacy") as client,
    ):
        named = await client.call_tool("ask_name", {})
        after = await client.call_tool("work", {"steps": 1})
    assert named.is_error
    text = named.content[0].text  # type: ignore[union-attr]
    assert "cannot be forwarded to the client of toolnexus serve" in text
    assert "did not declare elicitation" in text
    assert not after.is_error


async def test_a_url_question_is_not_forwarded_to_a_client_that_takes_only_forms(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client declaring form-only elicitation (`elicitation: {}` means that too, as clients
    before 2025-11-25 send it) must not be sent a URL-mode question (the spec's MUST NOT); a
    form question still reaches it."""
    from mcp.client.session import ClientSession

    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    ask = refuse_unforwarded
    async with await acreate_toolkit(manifest(f=stdio_entry()), elicitation=ask) as toolkit:
        build = ClientSession._build_capabilities

        def form_only(self: ClientSession, version: str) -> types.ClientCapabilities:
            declared = build(self, version)
            return declared.model_copy(update={"elicitation": types.ElicitationCapability()})

        # The SDK's own client always declares both modes; this one declares what older
        # clients do. Patched after the toolkit connected, so only the serve client has it.
        monkeypatch.setattr(ClientSession, "_build_capabilities", form_only)
        server = build_server(toolkit)
        async with mcp.Client(server, mode="legacy", elicitation_callback=elicit) as client:
            url = await client.call_tool("ask_url", {})
            form = await client.call_tool("ask_name", {})
    assert [p.mode for p in asked] == ["form"]
    assert form.content[0].text == "hello Grace"  # type: ignore[union-attr]
    text = url.content[0].text  # type: ignore[union-attr]
    assert "cannot be forwarded to the client of toolnexus serve" in text, text
    assert "URL mode" in text
