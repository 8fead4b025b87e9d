"""HTTP tools against a real server on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolnexus.base import Result, Tool, ToolContext
from toolnexus.errors import ConfigError, ToolError
from toolnexus.manifest.interpolate import Secret
from toolnexus.runtime.sandbox import SandboxPolicy
from toolnexus.sources import BuildContext
from toolnexus.sources.http import build_http_tool, translate_httpx_error

pytestmark = pytest.mark.anyio

_SERVER_PATH = Path(__file__).parents[1] / "fixtures" / "http" / "server.py"


def _load_server_module() -> Any:
    spec = importlib.util.spec_from_file_location("toolnexus_test_http_server", _SERVER_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


server_module = _load_server_module()
SECRET = "s3cr3t-token-value"


@pytest.fixture
def server() -> Iterator[Any]:
    with server_module.serve() as running:
        yield running


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as shared:
        yield shared


@pytest.fixture
def ctx(tmp_path: Path, client: httpx.AsyncClient) -> BuildContext:
    return BuildContext(workspace=tmp_path, base_dir=tmp_path, http_client=lambda: client)


def make(
    ctx: BuildContext, http: dict[str, Any], parameters: dict[str, Any] | None = None, **entry: Any
) -> Tool:
    decl: dict[str, Any] = {"name": "t", "http": http, **entry}
    if parameters is not None:
        decl["parameters"] = parameters
    return build_http_tool(decl, ctx)


def strings(*required: str, **optional: Any) -> dict[str, Any]:
    props: dict[str, Any] = {name: {"type": "string"} for name in required}
    props.update(optional)
    return {"type": "object", "properties": props, "required": list(required)}


async def call(tool: Tool, **args: Any) -> Result:
    return await tool.run(args, ToolContext(call_id="c1", tool_name=tool.name, workspace=Path()))


def echoed(result: Result) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured, dict)
    return result.structured


# --- requests --------------------------------------------------------------------------------


async def test_get_json_is_pretty_printed_and_structured(ctx: BuildContext, server: Any) -> None:
    tool = make(ctx, {"url": f"{server.url}/json"})
    result = await call(tool)
    assert result.structured == server_module.DOCUMENT
    assert result.content == json.dumps(server_module.DOCUMENT, indent=2)
    assert result.metadata["status"] == 200
    assert tool.read_only and not tool.destructive and tool.source == "http"


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
async def test_methods_reach_the_server(ctx: BuildContext, server: Any, method: str) -> None:
    tool = make(ctx, {"method": method.lower(), "url": f"{server.url}/echo"})
    assert echoed(await call(tool))["method"] == method
    assert tool.read_only == (method == "OPTIONS")


async def test_head_returns_the_status_line(ctx: BuildContext, server: Any) -> None:
    result = await call(make(ctx, {"method": "HEAD", "url": f"{server.url}/json"}))
    assert result.content == "HTTP 200 OK"


@pytest.mark.parametrize("value", [".", ".."])
async def test_dot_segments_are_refused_in_path_values(
    ctx: BuildContext, server: Any, value: str
) -> None:
    tool = make(ctx, {"url": f"{server.url}/echo/items/{{id}}/end"}, strings("id"))
    with pytest.raises(ToolError, match="may not be"):
        await call(tool, id=value)


@pytest.mark.parametrize(
    ("value", "raw"),
    [
        ("a/b", "a%2Fb"),
        ("; rm -rf /", "%3B%20rm%20-rf%20%2F"),
        ("$(touch x)`id`", "%24%28touch%20x%29%60id%60"),
        ("q?x=1#frag&y", "q%3Fx%3D1%23frag%26y"),
        ("line\nbreak\0nul", "line%0Abreak%00nul"),
        ("ünï", "%C3%BCn%C3%AF"),
    ],
)
async def test_path_values_are_one_encoded_segment(
    ctx: BuildContext, server: Any, value: str, raw: str
) -> None:
    tool = make(ctx, {"url": f"{server.url}/echo/items/{{id}}/end"}, strings("id"))
    assert echoed(await call(tool, id=value))["path"] == f"/echo/items/{raw}/end"


async def test_query_is_templated_encoded_and_drops_absent_values(
    ctx: BuildContext, server: Any
) -> None:
    params = strings(
        "q",
        lang={"type": "string"},
        tags={"type": "array", "items": {"type": "string"}},
        n={"type": "integer", "default": 5},
    )
    query = {"q": "{q}", "lang": "{lang?}", "tag": "{tags...}", "n": "{n}", "units": "metric"}
    tool = make(ctx, {"url": f"{server.url}/echo?fixed=1", "query": query}, params)
    got = echoed(await call(tool, q="a&b=c#d e", tags=["x", "y&z"]))
    assert got["args"] == {
        "fixed": ["1"],
        "q": ["a&b=c#d e"],
        "tag": ["x", "y&z"],
        "n": ["5"],
        "units": ["metric"],
    }
    got = echoed(await call(tool, q="v", lang="fr", tags=[], n=7))
    assert got["args"] == {
        "fixed": ["1"],
        "q": ["v"],
        "lang": ["fr"],
        "n": ["7"],
        "units": ["metric"],
    }


async def test_headers_are_templated_and_secrets_never_shown(
    ctx: BuildContext, server: Any
) -> None:
    headers = {"Authorization": f"Bearer {SECRET}", "X-Trace": "{trace}"}
    tool = make(ctx, {"url": f"{server.url}/echo", "headers": headers}, strings("trace"))
    result = await call(tool, trace="t-1")
    got = echoed(result)
    assert got["headers"]["authorization"] == f"Bearer {SECRET}"
    assert got["headers"]["x-trace"] == "t-1"
    assert SECRET not in repr(result.metadata)

    failing = make(ctx, {"url": f"{server.url}/status/500", "headers": headers}, strings("trace"))
    error = await call(failing, trace="t-2")
    assert error.is_error
    assert SECRET not in error.content and SECRET not in repr(error.metadata)


async def test_the_handler_repr_shows_no_secret(ctx: BuildContext) -> None:
    # error reporters (Sentry, rich tracebacks) print the locals of failing frames, `self`
    # of the endpoint included: its URL, query, headers and body hold `${TOKEN}` values
    http = {
        "url": f"https://api.example.com/bot{SECRET}/send",
        "query": {"key": SECRET},
        "headers": {"Authorization": f"Bearer {SECRET}"},
        "method": "POST",
        "body": {"json": {"token": SECRET}},
    }
    tool = make(ctx, http, strings())
    assert SECRET not in repr(tool.handler)
    assert "api.example.com" in repr(tool.handler)


async def test_the_default_description_shows_no_interpolated_value(ctx: BuildContext) -> None:
    # the loader hands `${TOKEN}` results over as `Secret` strings (`/bot${TOKEN}/send`)
    url = Secret(f"https://api.example.com/bot{SECRET}/send")
    tool = make(ctx, {"url": url}, strings())
    assert SECRET not in tool.description


async def test_unicode_values_in_headers_and_invalid_characters(
    ctx: BuildContext, server: Any
) -> None:
    tool = make(ctx, {"url": f"{server.url}/echo/{{a}}", "headers": {"X-A": "{a}"}}, strings("a"))
    got = echoed(await call(tool, a="ü中"))
    assert got["path"] == "/echo/%C3%BC%E4%B8%AD"
    assert got["headers"]["x-a"].encode("latin-1").decode() == "ü中"
    with pytest.raises(ToolError, match="argument 'a' holds an invalid character"):
        await call(tool, a="\ud800")


async def test_a_line_break_cannot_reach_a_header(ctx: BuildContext, server: Any) -> None:
    tool = make(ctx, {"url": f"{server.url}/echo", "headers": {"X-A": "{a}"}}, strings("a"))
    with pytest.raises(ToolError, match="header X-A cannot hold a line break"):
        await call(tool, a="v\r\nX-Injected: 1")


async def test_json_body_keeps_types_and_drops_absent_keys(ctx: BuildContext, server: Any) -> None:
    params = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "count": {"type": "integer"},
            "tags": {"type": "array"},
            "meta": {"type": "object"},
            "note": {"type": "string"},
            "loud": {"type": "boolean"},
        },
        "required": ["name", "count", "tags", "meta"],
    }
    body = {
        "json": {
            "name": "{name}",
            "greeting": "hello {name}",
            "count": "{count}",
            "nested": {"tags": "{tags}", "meta": "{meta}", "list": ["{note?}", "{{lit}}", 3]},
            "note": "{note?}",
            "mode": "{loud?LOUD|quiet}",
            "fixed": True,
        }
    }
    tool = make(ctx, {"method": "POST", "url": f"{server.url}/echo", "body": body}, params)
    got = echoed(await call(tool, name='"x"', count=3, tags=["a", 1], meta={"k": None}, loud=False))
    assert got["headers"]["content-type"] == "application/json"
    assert json.loads(got["body"]) == {
        "name": '"x"',
        "greeting": 'hello "x"',
        "count": 3,
        "nested": {"tags": ["a", 1], "meta": {"k": None}, "list": ["{lit}", 3]},
        "mode": "quiet",
        "fixed": True,
    }
    got = echoed(await call(tool, name="n", count=0, tags=[], meta={}, note=None))
    body = json.loads(got["body"])
    assert body["note"] is None and body["nested"]["list"] == [None, "{lit}", 3]
    assert "mode" not in body


async def test_form_and_raw_bodies(ctx: BuildContext, server: Any) -> None:
    params = strings("text", ids={"type": "array", "items": {"type": "integer"}})
    form = make(
        ctx,
        {
            "method": "POST",
            "url": f"{server.url}/echo",
            "body": {"form": {"t": "{text}", "id": "{ids...}"}},
        },
        params,
    )
    got = echoed(await call(form, text="a&b=c", ids=[1, 2]))
    assert got["headers"]["content-type"] == "application/x-www-form-urlencoded"
    assert got["body"] == "t=a%26b%3Dc&id=1&id=2"

    raw = make(
        ctx,
        {
            "method": "PUT",
            "url": f"{server.url}/echo",
            "body": {"raw": "<p>{text}</p>", "content_type": "text/html"},
        },
        strings("text"),
    )
    got = echoed(await call(raw, text="ü & $(x)"))
    assert got["headers"]["content-type"] == "text/html"
    assert got["body"] == "<p>ü & $(x)</p>"


async def test_parameters_are_derived_when_not_declared(ctx: BuildContext, server: Any) -> None:
    tool = make(ctx, {"url": f"{server.url}/echo/{{id}}", "query": {"v": "{verbose?1}"}})
    assert tool.parameters["properties"] == {
        "id": {"type": "string"},
        "verbose": {"type": "boolean"},
    }
    assert tool.parameters["required"] == ["id"]
    assert echoed(await call(tool, id="7", verbose=True))["query"] == "v=1"


# --- responses -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pick", "expected", "content"),
    [
        ("$.data.items[0].name", "a", "a"),
        ("$.data.items[-1].id", 2, "2"),
        ("$.data.items[*].id", [1, 2], "[\n  1,\n  2\n]"),
        ("$['data'].items.*.name", ["a", "b"], '[\n  "a",\n  "b"\n]'),
        ("$.ok", True, "true"),
    ],
)
async def test_pick_selects_part_of_the_json(
    ctx: BuildContext, server: Any, pick: str, expected: Any, content: str
) -> None:
    tool = make(ctx, {"url": f"{server.url}/json", "response": {"pick": pick}})
    result = await call(tool)
    assert result.structured == expected
    assert result.content == content


async def test_pick_reports_what_is_there_when_a_key_is_missing(
    ctx: BuildContext, server: Any
) -> None:
    tool = make(ctx, {"url": f"{server.url}/json", "response": {"pick": "$.data.itemz[0]"}})
    with pytest.raises(ToolError, match=r"no key 'itemz' in \$\.data \(keys: items\)"):
        await call(tool)
    tool = make(ctx, {"url": f"{server.url}/json", "response": {"pick": "$.data.items[5]"}})
    with pytest.raises(ToolError, match=r"no item \[5\] in \$\.data\.items \(a list of 2\)"):
        await call(tool)


async def test_text_status_and_empty_responses(ctx: BuildContext, server: Any) -> None:
    text = await call(make(ctx, {"url": f"{server.url}/text"}))
    assert (text.content, text.structured) == ("plain words\n", None)
    forced = await call(make(ctx, {"url": f"{server.url}/json", "response": {"format": "text"}}))
    assert json.loads(forced.content) == server_module.DOCUMENT and forced.structured is None
    status = await call(make(ctx, {"url": f"{server.url}/json", "response": {"format": "status"}}))
    assert status.content == "HTTP 200 OK"
    empty = await call(make(ctx, {"url": f"{server.url}/empty"}))
    assert (empty.content, empty.is_error) == ("HTTP 204 No Content", False)


async def test_invalid_json_is_text_unless_json_was_required(
    ctx: BuildContext, server: Any
) -> None:
    auto = await call(make(ctx, {"url": f"{server.url}/bad-json"}))
    assert (auto.content, auto.is_error) == ("{not json", False)
    strict = await call(
        make(ctx, {"url": f"{server.url}/bad-json", "response": {"format": "json"}})
    )
    assert strict.is_error and strict.content.startswith("the response is not valid JSON")


async def test_error_status_gives_status_line_and_bounded_excerpt(
    ctx: BuildContext, server: Any
) -> None:
    result = await call(make(ctx, {"url": f"{server.url}/status/404"}))
    assert result.is_error
    first, _, excerpt = result.content.partition("\n")
    assert first == "HTTP 404 Not Found"
    assert excerpt.startswith("problem: xxx")
    assert len(excerpt) < 2_100 and "more characters cut" in excerpt
    assert result.metadata["status"] == 404 and result.metadata["retryable"] is False


@pytest.mark.parametrize("status", [429, 502, 503, 504])
async def test_overload_statuses_are_retryable(ctx: BuildContext, server: Any, status: int) -> None:
    result = await call(make(ctx, {"url": f"{server.url}/status/{status}"}))
    assert result.is_error and result.metadata["retryable"] is True
    assert result.metadata.get("retry_after") == ("7" if status in (429, 503) else None)


async def test_an_endless_body_is_cut_at_max_response(ctx: BuildContext, server: Any) -> None:
    tool = make(ctx, {"url": f"{server.url}/endless", "max_response": 100_000}, max_output=10**6)
    result = await call(tool)
    assert not result.is_error
    assert result.metadata["truncated"] is True
    body, note = result.content.split("\n")
    assert body == "y" * 100_000
    assert note == "[response cut at 100,000 bytes: it is larger than max_response]"


async def test_a_cut_json_body_cannot_be_picked(ctx: BuildContext, server: Any) -> None:
    tool = make(
        ctx,
        {"url": f"{server.url}/big-json", "max_response": 1000, "response": {"pick": "$.items[0]"}},
    )
    result = await call(tool)
    assert result.is_error and "larger than max_response (1,000 bytes)" in result.content


async def test_long_output_keeps_head_and_tail(ctx: BuildContext, server: Any) -> None:
    tool = make(ctx, {"url": f"{server.url}/big-text?n=50000"}, max_output=1000)
    result = await call(tool)
    assert result.content.startswith("HEAD") and result.content.endswith("TAIL")
    assert "[... 49,000 characters cut ...]" in result.content
    assert result.metadata["truncated"] is True


# --- redirects and hosts ---------------------------------------------------------------------


async def test_redirects_are_reported_not_followed(ctx: BuildContext, server: Any) -> None:
    target = f"{server.url}/json"
    tool = make(ctx, {"url": f"{server.url}/redirect", "query": {"to": target}})
    result = await call(tool)
    assert result.is_error
    assert result.content == (
        f"HTTP 302 Found: the server redirects to {target}; this tool does not follow redirects"
    )
    assert result.metadata["location"] == target


async def test_followed_redirects_stay_on_allowed_hosts(ctx: BuildContext, server: Any) -> None:
    http = {"url": f"{server.url}/redirect", "query": {"to": "{to}"}, "follow_redirects": True}
    tool = make(ctx, http, strings("to"))
    assert (await call(tool, to=f"{server.url}/json")).structured == server_module.DOCUMENT
    with pytest.raises(
        ToolError, match=r"host 'localhost' are not allowed .*allowed: 127\.0\.0\.1"
    ):
        await call(tool, to=f"http://localhost:{server.url.rsplit(':', 1)[1]}/json")


async def test_manifest_headers_do_not_follow_a_redirect_to_another_origin(
    ctx: BuildContext, server: Any
) -> None:
    with server_module.serve() as other:
        http = {
            "url": f"{server.url}/redirect",
            "query": {"to": f"{other.url}/echo"},
            "headers": {"X-Api-Key": SECRET, "Authorization": SECRET},
            "follow_redirects": True,
        }
        got = echoed(await call(make(ctx, http)))
    assert "x-api-key" not in got["headers"] and "authorization" not in got["headers"]


async def test_a_templated_host_must_be_allowed(ctx: BuildContext, server: Any) -> None:
    port = server.url.rsplit(":", 1)[1]
    with pytest.raises(ConfigError, match="list the hosts it may take in allow_hosts"):
        make(ctx, {"url": f"http://{{host}}:{port}/echo"}, strings("host"))
    tool = make(
        ctx, {"url": f"http://{{host}}:{port}/echo", "allow_hosts": ["127.0.0.*"]}, strings("host")
    )
    assert echoed(await call(tool, host="127.0.0.1"))["method"] == "GET"
    with pytest.raises(ToolError, match=r"requests to host 'evil\.example' are not allowed"):
        await call(tool, host="evil.example")
    whole = make(ctx, {"url": "{url}", "allow_hosts": ["127.0.0.1"]}, strings("url"))
    assert (await call(whole, url=f"{server.url}/json?a=1")).structured == server_module.DOCUMENT
    with pytest.raises(ToolError, match="must use http or https, not 'file'"):
        await call(whole, url="file:///etc/passwd")


async def test_a_sandbox_host_list_narrows_allow_hosts(tmp_path: Path, server: Any) -> None:
    port = server.url.rsplit(":", 1)[1]
    http = {"url": f"http://{{host}}:{port}/json", "allow_hosts": ["127.0.0.1", "localhost"]}
    narrow = SandboxPolicy(network=("127.0.0.*",))
    ctx = BuildContext(workspace=tmp_path, base_dir=tmp_path, sandbox=narrow)
    tool = make(ctx, http, strings("host"))
    assert (await call(tool, host="127.0.0.1")).structured == server_module.DOCUMENT
    with pytest.raises(ToolError, match=r"host 'localhost' are not allowed .*: 127\.0\.0\.\*"):
        await call(tool, host="localhost")
    cut = BuildContext(workspace=tmp_path, base_dir=tmp_path, sandbox=SandboxPolicy(network=False))
    with pytest.raises(ConfigError, match="could never make a request") as info:
        make(cut, http, strings("host"))
    assert info.value.field == "sandbox.network"


# --- failures --------------------------------------------------------------------------------


async def test_timeouts_are_retryable_tool_errors(ctx: BuildContext, server: Any) -> None:
    tool = make(ctx, {"url": f"{server.url}/hang", "timeout": 0.2})
    with pytest.raises(ToolError, match=r"GET http://127\.0\.0\.1:\d+/hang timed out") as info:
        await call(tool)
    assert info.value.retryable


async def test_a_refused_connection_is_a_retryable_tool_error(ctx: BuildContext) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    tool = make(ctx, {"url": f"http://127.0.0.1:{port}/x?key={SECRET}", "headers": {"K": SECRET}})
    with pytest.raises(ToolError, match="could not connect to the server") as info:
        await call(tool)
    assert info.value.retryable and SECRET not in str(info.value)


async def test_without_a_shared_client_each_call_makes_its_own(tmp_path: Path, server: Any) -> None:
    ctx = BuildContext(workspace=tmp_path, base_dir=tmp_path)
    assert (
        await call(make(ctx, {"url": f"{server.url}/json"}))
    ).structured == server_module.DOCUMENT


def _httpx_exception_classes() -> list[type[Exception]]:
    return [
        obj
        for name in httpx.__all__
        if isinstance(obj := getattr(httpx, name), type) and issubclass(obj, Exception)
    ]


@pytest.mark.parametrize("cls", _httpx_exception_classes(), ids=lambda c: c.__name__)
def test_every_httpx_exception_maps_to_its_own_message(cls: type[Exception]) -> None:
    from toolnexus.sources.http import _HTTPX_ERRORS

    assert cls.__name__ in _HTTPX_ERRORS, f"httpx.{cls.__name__} has no message"
    url = httpx.URL(f"https://api.example.com/v1/x?key={SECRET}")
    exc = cls.__new__(cls)
    Exception.__init__(exc, f"failed for {url} with {SECRET}")
    error = translate_httpx_error(exc, "GET", url, [SECRET])
    assert isinstance(error, ToolError)
    what, retryable = _HTTPX_ERRORS[cls.__name__]
    assert error.message.startswith(f"GET https://api.example.com/v1/x failed: {what}")
    assert error.retryable is retryable
    assert SECRET not in error.message
    assert issubclass(cls, httpx.TimeoutException) <= retryable


# --- configuration errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("http", "params", "field", "message"),
    [
        ({"url": "http://h/{pth}"}, strings("path"), "http.url", "did you mean {path}?"),
        ({"url": "http://h/{p?}"}, strings("p"), "http.url", "cannot be in the url"),
        (
            {"url": "http://h/", "query": {"a": "{o}"}},
            strings(o={"type": "string"}),
            "http.query.a",
            "write {o?} to leave the element out",
        ),
        (
            {"url": "http://h/", "headers": {"A": "{l...}"}},
            strings(l={"type": "array"}),
            "http.headers.A",
            "list spread {l...} is not allowed",
        ),
        (
            {"url": "http://h/", "query": {"a": "x{l...}"}},
            strings(l={"type": "array"}),
            "http.query.a",
            "must be the whole value",
        ),
        ({"url": "http://h/", "method": "FETCH"}, None, "http.method", "unknown method 'FETCH'"),
        ({"url": "ftp://h/x"}, None, "http.url", "must use http:// or https://"),
        (
            {"url": "http://h/", "body": {"json": {}, "form": {}}},
            None,
            "http.body",
            "exactly one of json, form or raw",
        ),
        (
            {"url": "http://h/", "response": {"pick": "data.x"}},
            None,
            "http.response.pick",
            "must start with '$'",
        ),
        (
            {"url": "http://h/", "response": {"pick": "$.a[x]"}},
            None,
            "http.response.pick",
            "cannot read '[x]'",
        ),
        (
            {"url": "http://h/", "response": {"format": "xml"}},
            None,
            "http.response.format",
            "unknown response format 'xml'",
        ),
        ({"url": "http://h/{a"}, None, "http.url", "unmatched '{'"),
        ({"url": "http://h/", "allow_hosts": "h"}, None, "http.allow_hosts", "non-empty list"),
    ],
)
def test_bad_configuration_is_a_config_error(
    tmp_path: Path, http: dict[str, Any], params: dict[str, Any] | None, field: str, message: str
) -> None:
    ctx = BuildContext(workspace=tmp_path, base_dir=tmp_path)
    with pytest.raises(ConfigError) as info:
        make(ctx, http, params)
    assert info.value.field == field
    assert message in info.value.message
