"""Hostile inputs to OpenAPI tools: path values that a server might read as another path,
external `$ref`s that try to leave the description, and YAML that must read as PyYAML reads it."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from toolnexus.errors import ConfigError, SourceError
from toolnexus.openapi.text import parse_spec_text

from ..conftest import QuietHandler, start_http_server, stop_http_server
from .conftest import Api, build, call, spec, write_spec
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


# --- the description's text ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper"),
        ('{"openapi": ' + "1" * 5000 + "}", "digits"),
        ("openapi: " + "1" * 5000 + "\n", "line 1: .*digits"),
        ("openapi: 3.0.3\nx: [" + "-" + "9" * 5000 + "]\n", "line 2: .*digits"),
    ],
)
def test_text_python_cannot_hold_is_a_source_error(text: str, message: str) -> None:
    with pytest.raises(SourceError, match=message):
        parse_spec_text(text, "api.yaml")


_YAML12_NUMBER = re.compile(
    r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
    r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)"
)
"""Plain scalars YAML 1.2's core schema reads as numbers (PyYAML, a 1.1 reader, writes some of
them unquoted as strings: `082`, `1e5`, `0o17`; there the two readers rightly differ)."""
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=10),
    st.from_regex(r"[-+.0-9eExo_:~<a-zA-Z ]{1,8}", fullmatch=True),
)
_DOCUMENTS = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=25,
)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DOCUMENTS, st.sampled_from([None, True, False]))
def test_the_fast_reader_reads_what_safe_load_reads(value: Any, flow: bool | None) -> None:
    assume(not any(_YAML12_NUMBER.fullmatch(s) for s in _strings(value)))
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True)
    assert parse_spec_text(text, "api.yaml") == yaml.safe_load(text)


@pytest.mark.parametrize(
    "text",
    [
        "b: &b {x: 1, y: 2}\nc: &c {y: 3, z: 4}\nd: {<<: [*b, *c], x: 0}\n",
        "b: &b {x: 1}\nd:\n  x: 0\n  <<: *b\n",
        "d: {<<: {x: 1}, <<: {y: 2}}\n",
        "'<<': {a: 1}\n",  # a quoted `<<` is a plain key, not a merge
        '"<<": {a: 1}\nb: {"<<": [1]}\n',
        "a: &a [1, {k: &k v}]\nb: [*a, *k]\n",
        "a: |\n  x\n  y\nb: >-\n  p\n  q\n",
        "a: !!str 1\nb: !!float 1\nc: !!int '3'\n",
        "? a\n: 1\n",
        "a: 1\na: 2\n",
        "a: &s str\n*s : v\n",
        "a: 0x1F\nc: .inf\nd: -.Inf\ne: +12\nj: ~\nk: Null\nl: -0\nn: .5\n",
    ],
)
def test_anchors_merges_and_tags_read_as_safe_load_reads_them(text: str) -> None:
    assert parse_spec_text(text, "api.yaml") == yaml.safe_load(text)


# --- defaults ------------------------------------------------------------------------------


async def test_form_and_header_defaults_are_not_sent(tmp_path: Path, api: Api) -> None:
    write_spec(
        tmp_path,
        spec(
            {
                "/login": {
                    "post": {
                        "operationId": "login",
                        "parameters": [
                            {"name": "X-Mode", "in": "header", "schema": {"default": "fast"}},
                        ],
                        "requestBody": {
                            "content": {
                                "application/x-www-form-urlencoded": {
                                    "schema": {
                                        "type": "object",
                                        "properties": {
                                            "user": {"type": "string"},
                                            "remember": {"type": "boolean", "default": True},
                                        },
                                    }
                                }
                            }
                        },
                    }
                }
            }
        ),
    )
    tool = build({"openapi": "api.json", "base_url": api.url}, tmp_path)["login"]
    result = await call(tool, user="ann")
    assert not result.is_error, result.content
    assert api.seen[-1]["body"] == "user=ann"
    assert "x-mode" not in api.headers[-1]
    await call(tool, user="ann", remember=False, **{"X-Mode": "slow"})
    assert api.seen[-1]["body"] == "user=ann&remember=false"
    assert api.headers[-1]["x-mode"] == "slow"


# --- filters -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("include", "selected"),
    [
        (["repos_get"], ["GET /b"]),  # the operation whose own id it is, not `repos/get`
        (["repos/get"], ["GET /a"]),
        (["get_c"], ["POST /d"]),  # not the operation without an id named after its route
        (["repos_*"], ["GET /a", "GET /b"]),
        (["get_*"], ["GET /c", "POST /d"]),
    ],
)
def test_an_exact_operation_id_selects_that_operation_only(
    tmp_path: Path, include: list[str], selected: list[str]
) -> None:
    paths = {
        "/a": {"get": {"operationId": "repos/get"}},
        "/b": {"get": {"operationId": "repos_get"}},
        "/c": {"get": {}},
        "/d": {"post": {"operationId": "get_c"}},
    }
    write_spec(tmp_path, spec(paths))
    entry = {"openapi": "api.json", "base_url": "http://h", "operations": {"include": include}}
    tools = build(entry, tmp_path).values()
    assert sorted(f"{t.meta['method']} {t.meta['path']}" for t in tools) == selected


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("a%00.yaml#/X", "NUL"),
        (".#/X", "not a regular file"),
        ("file:///etc/passwd#/X", "POST /a refers to 'file:///etc/passwd#/X'"),
    ],
)
def test_odd_references_are_config_errors_naming_the_operation(
    tmp_path: Path, ref: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        build(_entry_with_ref(tmp_path, ref), tmp_path)
