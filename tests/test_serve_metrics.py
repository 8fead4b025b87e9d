"""`GET /metrics` of a served toolkit: real calls (ok, denied, invalid, approved and declined
through elicitation in both protocol eras), then a scrape parsed with prometheus_client's own
parser; the token it needs by default, `--metrics-public`, and 501 without the extra."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp
import pytest
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from toolnexus import acreate_toolkit
from toolnexus.serve.server import http_app

from .conftest import free_port
from .test_serve import STARTUP, TOKEN, WAIT, answering, serving, write_manifest

BASE = "http://127.0.0.1:8000"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition: (name, sorted labels) -> value."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@asynccontextmanager
async def running(app: Any) -> AsyncIterator[httpx2.ASGITransport]:
    transport = httpx2.ASGITransport(app)
    async with app.router.lifespan_context(app):
        yield transport


@asynccontextmanager
async def client(transport: httpx2.ASGITransport, **options: Any) -> AsyncIterator[mcp.Client]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(transport=transport, base_url=BASE, headers=headers) as http:
        streams = streamable_http_client(f"{BASE}/mcp", http_client=http)
        async with mcp.Client(streams, read_timeout_seconds=WAIT, **options) as session:
            yield session


@pytest.mark.anyio
async def test_metrics_count_calls_outcomes_approvals_and_denials(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path)
    async with await acreate_toolkit(manifest) as toolkit:
        app = http_app(toolkit, token=TOKEN)
        with anyio.fail_after(WAIT):
            async with running(app) as transport:
                async with client(transport) as session:
                    assert not (await session.call_tool("add", {"a": 1, "b": 2})).is_error
                    assert not (await session.call_tool("add", {"a": 3, "b": 4})).is_error
                    assert (await session.call_tool("say", {"text": "rm -rf"})).is_error
                    assert (await session.call_tool("add", {"a": "x"})).is_error
                    assert (await session.call_tool("no_such_tool", {})).is_error
                yes = answering("accept")
                async with client(transport, elicitation_callback=yes) as session:
                    approved = await session.call_tool("say", {"text": "please wave"})
                    assert not approved.is_error
                no = answering("decline")
                async with client(transport, elicitation_callback=no) as session:
                    declined = await session.call_tool("say", {"text": "please stop"})
                    assert declined.is_error
                assert len(yes.questions) == len(no.questions) == 1
                async with httpx2.AsyncClient(transport=transport, base_url=BASE) as http:
                    assert (await http.get("/metrics")).status_code == 401  # like /mcp
                    scraped = await http.get(
                        "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
                    )
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    got = samples(scraped.text)
    calls = {
        labels: value for (name, labels), value in got.items() if name == "toolnexus_calls_total"
    }
    assert calls == {
        (("outcome", "ok"), ("tool", "add")): 2,
        (("outcome", "denied"), ("tool", "say")): 2,  # the deny rule, and the declined ask
        (("outcome", "ok"), ("tool", "say")): 1,  # approved
        (("outcome", "invalid"), ("tool", "add")): 1,
        # a name the client made up is never a label value of its own
        (("outcome", "invalid"), ("tool", "(unknown)")): 1,
    }
    assert got[("toolnexus_call_duration_seconds_count", (("tool", "add"),))] == 3
    assert got[("toolnexus_call_duration_seconds_count", (("tool", "say"),))] == 3
    assert got[("toolnexus_approvals_asked_total", (("tool", "say"),))] == 2
    answered = (("answer", "approved"), ("tool", "say"))
    assert got[("toolnexus_approvals_answered_total", answered)] == 1
    assert got[("toolnexus_approvals_answered_total", (("answer", "declined"), ("tool", "say")))]
    assert got[("toolnexus_denials_total", (("tool", "say"),))] == 2


@pytest.mark.anyio
async def test_two_apps_in_one_process_keep_their_own_counts(tmp_path: Path) -> None:
    """Each app has its own registry: a second app neither clashes nor sees the first's."""
    manifest = write_manifest(tmp_path)
    async with await acreate_toolkit(manifest) as toolkit:
        first, second = http_app(toolkit, token=TOKEN), http_app(toolkit, token=TOKEN)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with anyio.fail_after(WAIT):
            async with running(first) as transport, client(transport) as session:
                await session.call_tool("add", {"a": 1, "b": 2})
            async with running(second) as transport, httpx2.AsyncClient(
                transport=transport, base_url=BASE, headers=headers
            ) as http:
                text = (await http.get("/metrics")).text
    assert not [key for key in samples(text) if key[0] == "toolnexus_calls_total"]


@pytest.mark.anyio
async def test_without_prometheus_client_metrics_answer_501_with_the_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import raises ImportError
    manifest = write_manifest(tmp_path)
    async with await acreate_toolkit(manifest) as toolkit:
        app = http_app(toolkit, token=TOKEN)
        with anyio.fail_after(WAIT):
            async with running(app) as transport:
                async with client(transport) as session:  # serving works without it
                    assert not (await session.call_tool("add", {"a": 1, "b": 2})).is_error
                headers = {"Authorization": f"Bearer {TOKEN}"}
                async with httpx2.AsyncClient(
                    transport=transport, base_url=BASE, headers=headers
                ) as http:
                    answer = await http.get("/metrics")
    assert answer.status_code == 501
    assert 'pip install "toolnexus[metrics]"' in answer.json()["detail"]


@pytest.mark.anyio
async def test_metrics_public_flag_of_a_real_server(tmp_path: Path) -> None:
    """`toolnexus serve --http --token T --metrics-public`: a scraper needs no token, `/mcp`
    still does; a handshake-era client's approval is counted too."""
    manifest = write_manifest(tmp_path)
    port = free_port()
    args = [str(manifest), "--http", f"127.0.0.1:{port}", "--token", TOKEN, "--metrics-public"]
    url = f"http://127.0.0.1:{port}"
    with serving(args, cwd=tmp_path, ready="Application startup complete"):
        with anyio.fail_after(STARTUP):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx2.AsyncClient(headers=headers, timeout=WAIT) as http:
                streams = streamable_http_client(f"{url}/mcp", http_client=http)
                yes = answering("accept")
                async with mcp.Client(
                    streams, read_timeout_seconds=WAIT, mode="legacy", elicitation_callback=yes
                ) as session:  # the mid-call question (in process, ASGITransport cannot stream)
                    assert not (await session.call_tool("add", {"a": 1, "b": 2})).is_error
                    assert not (await session.call_tool("say", {"text": "please wave"})).is_error
            async with httpx2.AsyncClient(timeout=WAIT) as anonymous:
                scraped = await anonymous.get(f"{url}/metrics")
                refused = await anonymous.post(f"{url}/mcp", json={})
    assert scraped.status_code == 200
    calls = (("outcome", "ok"), ("tool", "add"))
    got = samples(scraped.text)
    assert got[("toolnexus_calls_total", calls)] == 1
    assert got[("toolnexus_approvals_asked_total", (("tool", "say"),))] == 1
    answered = (("answer", "approved"), ("tool", "say"))
    assert got[("toolnexus_approvals_answered_total", answered)] == 1
    assert refused.status_code == 401
