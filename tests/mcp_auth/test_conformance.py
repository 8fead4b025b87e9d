"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
tests/fixtures/conformance) run against the toolnexus MCP client: for each client scenario the
suite starts its own MCP server (and authorization server) on localhost, runs
tests/fixtures/conformance/client.py with the server's URL, and checks every request the
client made. Cross-app access (enterprise-managed authorization) is not asked of the client.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent.parent / "fixtures" / "conformance"
SUITE = FIXTURE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

SCENARIOS = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
]
"""The client scenarios of the pinned suite of the released specification versions and the
authorization ones, with the client-credentials extension. Left out: sse-retry, which passes but
whose check is a timing (the reconnect within 450-700 ms of the stream's end: a busy machine
misses it, and tests assert no timings); the other extensions (enterprise-managed authorization,
DPoP, workload identity) and the draft's non-auth scenarios, which toolnexus does not do yet
(docs/mcp-client.md, Conformance)."""

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(
        not SUITE.exists(),
        reason="the conformance suite is missing: run npm ci in tests/fixtures/conformance",
    ),
]


def _run(scenario: str) -> tuple[int, str]:
    """One scenario through the suite: its exit status and what it printed."""
    env = dict(os.environ)
    # Node 20 has no fs.globSync, which the suite imports; the preload supplies it.
    env["NODE_OPTIONS"] = f"{env.get('NODE_OPTIONS', '')} --import ./globsync-stub.mjs".strip()
    env.pop("TOOLNEXUS_TOKEN_STORE", None)  # the client keeps its logins in a folder of its own
    run = subprocess.run(
        [
            "node",
            str(SUITE),
            "client",
            "--scenario",
            scenario,
            "--command",
            f"{sys.executable} client.py",
        ],
        check=False,
        cwd=FIXTURE,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return run.returncode, run.stdout + run.stderr


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest) -> Iterator[dict[str, Future[tuple[int, str]]]]:
    """The selected scenarios, started together (three at a time): each is a few processes
    that partly wait on one another, so overlapping them shortens the module (on a busy
    two-core machine, 75 s one after another, 60 s three at a time, for 24 scenarios)."""
    here = Path(__file__)
    wanted = [
        str(item.callspec.params["scenario"])
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.path == here
    ]
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {scenario: pool.submit(_run, scenario) for scenario in wanted}
        yield futures
        for future in futures.values():
            future.cancel()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_client_scenario(scenario: str, outcomes: dict[str, Future[tuple[int, str]]]) -> None:
    status, output = outcomes[scenario].result()
    assert status == 0 and "OVERALL: PASSED" in output, output[-6000:]
