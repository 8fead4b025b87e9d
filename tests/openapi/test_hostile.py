"""Hostile inputs to OpenAPI tools: path values that a server might read as another path,
external `$ref`s that try to leave the description, and YAML that must read as PyYAML reads it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolnexus.errors import ConfigError, SourceError

from ..conftest import QuietHandler, start_http_server, stop_http_server
from .conftest import Api, build, call
from .test_calls import tools_for
from .test_refs import _entry_with_ref

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "value",
    [
        "\uff0e\uff0e/x",  # fullwidth full stops: NFKC makes them `..`
        "a/\u2024\u2024/b",  # one dot leaders
        "\u2025/x",  # the two dot leader is `..` once normalised
        "a/%c0%ae%c0%ae/b",  # overlong UTF-8 dots, read as `.` by lax decoders
        "a%c0%af..%c0%afb",  # overlong slashes around `..`
        "..;/admin",  # `;` starts a path parameter (Tomcat, Spring): the segment is `..`
        "a/..%3Bx/b",
        "..\x00/x",  # a C server ends the string at NUL
    ],
)
async def test_disguised_dot_segments_are_refused(tmp_path: Path, api: Api, value: str) -> None:
    tool = tools_for(tmp_path, api)["repos_get-content"]
    result = await call(tool, owner="o", path=value)
    assert result.is_error and "argument 'path'" in result.content, result.content
    assert api.seen == []


@pytest.mark.parametrize("value", ["../..", "..%2F..%2Fadmin", "x\\..\\..", "\uff0e\uff0e"])
async def test_a_one_segment_value_may_not_hide_dot_segments(
    tmp_path: Path, api: Api, value: str
) -> None:
    # `/` goes out as `%2F`, which many servers and proxies decode before resolving `..`
    tool = tools_for(tmp_path, api)["repos_get-blob"]
    result = await call(tool, owner="o", path=value)
    assert result.is_error and "argument 'path'" in result.content, result.content
    assert api.seen == []


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        ("/", "/repos/o/contents//"),
        ("//evil.example/x", "/repos/o/contents///evil.example/x"),
        ("a;b/c?d#e", "/repos/o/contents/a%3Bb/c%3Fd%23e"),
        ("@evil.example:80/x", "/repos/o/contents/%40evil.example%3A80/x"),
        ("v1.2..3/\u00e9", "/repos/o/contents/v1.2..3/%C3%A9"),
    ],
)
async def test_odd_but_harmless_values_stay_on_the_path(
    tmp_path: Path, api: Api, value: str, sent: str
) -> None:
    tool = tools_for(tmp_path, api)["repos_get-content"]
    result = await call(tool, owner="o", path=value)
    assert not result.is_error, result.content
    assert api.seen[-1]["path"] == sent and api.seen[-1]["query"] == ""


# --- external references -----------------------------------------------------------------


def _build_soon(entry: dict[str, Any], folder: Path, unblock: Callable[[], None]) -> Any:
    """`build(entry, folder)`'s outcome (a result or the exception), failing the test rather
    than hanging it when the build blocks: `unblock` then frees the stuck thread."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(build(entry, folder))
        except (ConfigError, SourceError) as exc:  # the outcome under test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():
        unblock()
        thread.join(10)
        pytest.fail("building blocked on the referenced file")
    return outcome[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_reference_to_a_named_pipe_is_refused_not_waited_on(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe.yaml"
    os.mkfifo(pipe)

    def unblock() -> None:
        with open(pipe, "w") as f:
            f.write("X: {}\n")

    outcome = _build_soon(_entry_with_ref(tmp_path, "pipe.yaml#/X"), tmp_path, unblock)
    assert isinstance(outcome, ConfigError), outcome
    assert "not a regular file" in str(outcome)


@pytest.fixture
def redirector(api: Api) -> Iterator[str]:
    """A second server whose `/spec/` files redirect to the first one's `/files/`: another
    host, as a description's own server would send a reference elsewhere."""

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            if self.path == "/spec/api.yaml":
                self.send(200, "application/yaml", _MAIN_WITH_REF)
            else:
                self.send(302, "text/plain", b"", Location=f"{api.url}/files/secret.yaml")

    httpd = start_http_server(Handler)
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        stop_http_server(httpd)


_MAIN_WITH_REF = (
    b"openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    post:\n"
    b"      operationId: a\n      requestBody:\n        content:\n          application/json:\n"
    b"            schema: {$ref: './common.yaml#/X'}\n"
)


def test_a_remote_reference_may_not_redirect_out_of_the_folder(
    tmp_path: Path, api: Api, redirector: str
) -> None:
    api.files["secret.yaml"] = b"X: {type: object, properties: {secret: {type: string}}}\n"
    entry = {"openapi": f"{redirector}/spec/api.yaml", "base_url": api.url, "remote_refs": True}
    with pytest.raises(ConfigError, match="outside the folder the description was down"):
        build(entry, tmp_path)
    assert api.seen == []  # the redirect was not followed
