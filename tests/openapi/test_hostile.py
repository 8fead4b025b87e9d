"""Hostile inputs to OpenAPI tools: path values that a server might read as another path,
external `$ref`s that try to leave the description, and YAML that must read as PyYAML reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Api, call
from .test_calls import tools_for

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
