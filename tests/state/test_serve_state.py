"""Real `toolnexus serve --http` replicas sharing one real Redis (`--state`): one rate limit
across processes and workers, and a `/healthz` that fails while Redis is away."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest

from ..conftest import free_port
from ..test_serve import http_client, serving
from .conftest import LIMITED, RedisServer

pytestmark = pytest.mark.anyio

WAIT = 60.0



async def test_replicas_sharing_redis_hold_one_rate_limit_and_report_its_health(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(LIMITED)
    ports = free_port(), free_port()
    ready = "Application startup complete"
    one = [str(manifest), "--http", f"127.0.0.1:{ports[0]}", "--workers", "2"]
    two = [str(manifest), "--http", f"127.0.0.1:{ports[1]}", "--stateless"]
    state = ["--state", redis_server.url]
    urls = [f"http://127.0.0.1:{p}/mcp" for p in ports]
    health = [u.replace("/mcp", "/healthz") for u in urls]
    with (
        serving([*one, *state], cwd=tmp_path, ready=ready, count=2),
        serving([*two, *state], cwd=tmp_path, ready=ready),
    ):
        with anyio.fail_after(WAIT):
            texts: list[str] = []
            async with http_client(urls[0], token=None) as a, http_client(urls[1], token=None) as b:
                for _ in range(4):
                    for client in (a, b):
                        result = await client.call_tool("ping", {})
                        texts.append(result.content[0].text)  # type: ignore[union-attr]
            assert sum(t.strip() == "pong" for t in texts) == 3, texts
            assert sum("rate limit reached for 'ping'" in t for t in texts) == 5, texts

            async with httpx2.AsyncClient(timeout=WAIT) as http:
                for url in health:
                    assert (await http.get(url)).status_code == 200

                redis_server.stop()
                for url in health:
                    response = await http.get(url)
                    assert response.status_code == 503
                    assert response.json() == {
                        "status": "unavailable",
                        "reason": "state store unreachable",
                    }
                async with http_client(urls[1], token=None) as client:
                    result = await client.call_tool("ping", {})
                text = result.content[0].text  # type: ignore[union-attr]
                assert (
                    result.is_error and "rate limit state unavailable: cannot reach redis" in text
                )

                redis_server.start()
                for url in health:
                    assert (await http.get(url)).status_code == 200
                async with http_client(urls[1], token=None) as client:
                    result = await client.call_tool("ping", {})
                assert not result.is_error  # an empty Redis: a fresh bucket


def test_serve_refuses_an_unknown_state_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolnexus.cli import main

    manifest = tmp_path / "tools.yaml"
    manifest.write_text(LIMITED)
    code = main(["serve", str(manifest), "--http", "127.0.0.1:0", "--state", "redis//x:1"])
    assert code == 2
    assert "unknown state store 'redis//x:1'" in capsys.readouterr().err
