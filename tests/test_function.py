"""`@tool` and `tool(fn, ...)`: building tools from callables and running them."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import functools
import threading
from pathlib import Path
from typing import Any, TypedDict

import pydantic
import pytest

from toolnexus.base import ImagePart, Result, Tool, ToolContext
from toolnexus.errors import ConfigError, InvalidArguments, ToolError, UsageError
from toolnexus.function import is_tool_factory, tool, tool_factory
from toolnexus.toolkit import acreate_toolkit


def _ctx(tmp_path: Path, name: str = "t") -> ToolContext:
    return ToolContext(call_id="call-1", tool_name=name, workspace=tmp_path)


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


@dataclasses.dataclass
class Place:
    city: str
    unit: Unit = Unit.C


class Filter(TypedDict):
    places: list[Place]


class Query(pydantic.BaseModel):
    text: str
    limit: int = 5

    @pydantic.field_validator("text")
    @classmethod
    def no_shouting(cls, value: str) -> str:
        if value.isupper():
            raise ValueError("do not shout")
        return value


def test_bare_decorator_uses_the_function_name_and_docstring() -> None:
    @tool
    def add(a: int, b: int = 1) -> int:
        """Add two numbers.

        Args:
            a: the first
        """
        return a + b

    assert isinstance(add, Tool)
    assert add.name == "add"
    assert add.description == "Add two numbers."
    assert add.source == "python"
    assert add.parameters["required"] == ["a"]
    assert add.parameters["properties"]["a"]["description"] == "the first"
    assert add.meta["function"].__name__ == "add"
    assert add.origin is not None
    assert add.origin.startswith(f"{__name__}:")
    assert add.origin.endswith("<locals>.add")


def test_decorator_with_options_and_the_plain_form() -> None:
    def lookup(key: str) -> str:
        return key

    @tool(name="find", description="Find it", title="Find", read_only=True, destructive=False,
          idempotent=True, open_world=False, concurrent=True)
    def find(key: str) -> str:
        return key

    plain = tool(lookup, name="look_up", read_only=True)
    assert (find.name, find.description, find.title) == ("find", "Find it", "Find")
    flags = (find.read_only, find.destructive, find.idempotent, find.open_world, find.concurrent)
    assert flags == (True, False, True, False, True)
    assert plain.name == "look_up" and plain.read_only and plain.destructive
    assert plain.description == ""


@pytest.mark.parametrize("bad", ["has space", "", "x" * 65, "dots.dots"])
def test_bad_names_are_usage_errors(bad: str) -> None:
    def f() -> None: ...

    with pytest.raises(UsageError, match="invalid tool name"):
        tool(f, name=bad)


def test_a_lambda_needs_a_name() -> None:
    with pytest.raises(UsageError, match="lambda"):
        tool(lambda x: x)
    assert tool(lambda x: x, name="ident").name == "ident"


def test_generators_and_non_callables_are_refused() -> None:
    def gen() -> Any:
        yield 1

    async def agen() -> Any:
        yield 1

    for fn in (gen, agen):
        with pytest.raises(UsageError, match="generator"):
            tool(fn)
    with pytest.raises(UsageError, match="callable"):
        tool(42)  # type: ignore[call-overload]


def test_an_explicit_schema_overrides_derivation_and_is_checked() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "maxLength": 3}},
              "required": ["q"], "additionalProperties": False}

    @tool(parameters=schema)
    def search(q):  # type: ignore[no-untyped-def]
        return q

    assert search.parameters == schema
    assert search.parameters is not schema  # copied: later edits of the caller's dict do not leak

    def f(q: str) -> None: ...

    with pytest.raises(ConfigError, match=r"parameters: .*\$\.properties\.q\.type.*'string'"):
        tool(f, parameters={"type": "object", "properties": {"q": {"type": "strng"}}})
    with pytest.raises(ConfigError, match="object schema"):
        tool(f, parameters={"type": "string"})


@pytest.mark.anyio
async def test_async_function_runs_on_the_loop(tmp_path: Path) -> None:
    loop_thread = threading.get_ident()

    @tool
    async def where(x: int) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"x": x, "same_thread": threading.get_ident() == loop_thread}

    result = await where.run({"x": 3}, _ctx(tmp_path))
    assert result.structured == {"x": 3, "same_thread": True}
    assert result.content == '{"x": 3, "same_thread": true}'  # compact JSON: fewer tokens


@pytest.mark.anyio
async def test_sync_function_runs_in_a_worker_thread(tmp_path: Path) -> None:
    loop_thread = threading.get_ident()
    release = threading.Event()

    @tool
    def blocking(x: int) -> str:
        # blocks until the loop (still free to run) sets the event
        assert release.wait(5)
        return f"{x} off-loop={threading.get_ident() != loop_thread}"

    task = asyncio.create_task(blocking.run({"x": 1}, _ctx(tmp_path)))
    await asyncio.sleep(0)
    release.set()
    result = await asyncio.wait_for(task, 5)
    assert result.content == "1 off-loop=True"


def test_a_timed_out_sync_function_is_said_to_run_on_and_its_result_dropped() -> None:
    from toolnexus import create_toolkit
    from toolnexus.middleware import timeout

    release = threading.Event()
    finished = threading.Event()

    @tool
    def stuck() -> str:
        """Block until released."""
        release.wait(30)
        finished.set()
        return "late"

    with create_toolkit(extra_tools=[stuck], middleware=[timeout(0.2)]) as tk:
        result = tk.execute("stuck")
        assert result.is_error and result.metadata["error_type"] == "ToolTimeout"
        assert "was stopped" not in result.content
        assert "keeps running in its worker thread until it returns" in result.content
        assert "its result will be dropped" in result.content
        assert "isolate: process" in result.content
        assert result.metadata["still_running"] is True
        assert not finished.is_set()
        release.set()
        assert finished.wait(5)


def test_a_timed_out_async_function_is_stopped() -> None:
    from toolnexus import create_toolkit
    from toolnexus.middleware import timeout

    @tool
    async def slow() -> str:
        """Sleep for long."""
        await asyncio.sleep(30)
        return "late"

    with create_toolkit(extra_tools=[slow], middleware=[timeout(0.1)]) as tk:
        result = tk.execute("slow")
    assert "timed out after 100ms and was stopped" in result.content
    assert "still_running" not in result.metadata


@pytest.mark.anyio
async def test_an_inline_sync_function_runs_on_the_loop(tmp_path: Path) -> None:
    loop_thread = threading.get_ident()

    @tool(inline=True)
    def quick(x: int) -> str:
        return f"{x} on-loop={threading.get_ident() == loop_thread}"

    @tool(inline=True)
    def quick_ctx(ctx: ToolContext, x: int, /, y: int = 2) -> str:  # the bound-call path
        return f"{x + y} {ctx.tool_name} on-loop={threading.get_ident() == loop_thread}"

    assert (await quick.run({"x": 1}, _ctx(tmp_path))).content == "1 on-loop=True"
    assert (await quick_ctx.run({"x": 1}, _ctx(tmp_path))).content.endswith("on-loop=True")
    assert (await quick_ctx.run({"x": 1}, _ctx(tmp_path))).content.startswith("3 ")


def test_inline_is_for_sync_functions_only() -> None:
    async def already(x: int) -> int:
        return x

    with pytest.raises(UsageError, match="async: it runs on the event loop already"):
        tool(already, inline=True)


@pytest.mark.anyio
async def test_the_context_is_injected(tmp_path: Path) -> None:
    @tool
    async def who(ctx: ToolContext, greeting: str = "hi") -> str:
        return f"{greeting} {ctx.call_id} {ctx.tool_name}"

    @tool
    def who_sync(greeting: str, ctx: ToolContext) -> str:
        return f"{greeting} {ctx.workspace == tmp_path}"

    assert "ctx" not in who.parameters["properties"]
    assert (await who.run({}, _ctx(tmp_path, "who"))).content == "hi call-1 who"
    assert (await who_sync.run({"greeting": "yo"}, _ctx(tmp_path))).content == "yo True"


@pytest.mark.anyio
async def test_arguments_become_the_hinted_types(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    @tool
    async def weather(*, place: Place, filt: Filter, query: Query, units: list[Unit],
                      tags: set[str], pair: tuple[int, int], maybe: Place | None = None) -> str:
        seen.update(place=place, filt=filt, query=query, units=units, tags=tags, pair=pair,
                    maybe=maybe)
        return "ok"

    args = {
        "place": {"city": "Oslo"},
        "filt": {"places": [{"city": "Rome", "unit": "fahrenheit"}]},
        "query": {"text": "sun"},
        "units": ["celsius", "fahrenheit"],
        "tags": ["a", "b"],
        "pair": [1, 2],
        "maybe": None,
    }
    assert (await weather.run(args, _ctx(tmp_path))).content == "ok"
    assert seen["place"] == Place(city="Oslo", unit=Unit.C)
    assert seen["filt"] == {"places": [Place(city="Rome", unit=Unit.F)]}
    assert seen["query"] == Query(text="sun", limit=5)
    assert seen["units"] == [Unit.C, Unit.F]
    assert seen["tags"] == {"a", "b"}
    assert seen["pair"] == (1, 2)
    assert seen["maybe"] is None


@pytest.mark.anyio
async def test_a_value_the_type_refuses_is_invalid_arguments(tmp_path: Path) -> None:
    @tool
    async def ask(query: Query) -> str:
        return query.text

    with pytest.raises(InvalidArguments) as err:
        await ask.run({"query": {"text": "LOUD"}}, _ctx(tmp_path))
    assert err.value.problems == (("$.query.text", "Value error, do not shout"),)
    assert str(err.value) == "argument 'query': $.query.text: Value error, do not shout"

    @tool
    def when(day: datetime.date) -> str:
        return day.isoformat()

    with pytest.raises(InvalidArguments, match=r"argument 'day': \$\.day: Invalid isoformat"):
        await when.run({"day": "yesterday"}, _ctx(tmp_path))


@pytest.mark.anyio
async def test_positional_only_parameters_and_partials(tmp_path: Path) -> None:
    @tool
    def power(base: int, exp: int = 2, /, *, mod: int | None = None) -> int:
        value = base**exp
        return value % mod if mod else value

    assert (await power.run({"base": 3}, _ctx(tmp_path))).content == "9"
    assert (await power.run({"base": 3, "exp": 3, "mod": 5}, _ctx(tmp_path))).content == "2"

    async def scaled(x: int, factor: int) -> int:
        return x * factor

    triple = tool(functools.partial(scaled, factor=3), name="triple")
    assert triple.parameters["required"] == ["x"]
    assert (await triple.run({"x": 2}, _ctx(tmp_path))).content == "6"


@pytest.mark.anyio
async def test_return_values_map_to_results(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 8

    @tool
    def text() -> str:
        return "plain"

    @tool
    def image() -> bytes:
        return png

    @tool
    async def as_is() -> Result:
        return Result(content="mine", metadata={"k": 1})

    @tool
    def nothing() -> None:
        return None

    assert (await text.run({}, _ctx(tmp_path))).content == "plain"
    assert (await image.run({}, _ctx(tmp_path))).parts == (ImagePart(data=png),)
    assert (await as_is.run({}, _ctx(tmp_path))).metadata == {"k": 1}
    assert (await nothing.run({}, _ctx(tmp_path))) == Result()


@pytest.mark.anyio
async def test_exceptions_propagate_to_the_executor(tmp_path: Path) -> None:
    @tool
    async def fails() -> str:
        raise ToolError("try another city")

    @tool
    def crashes() -> str:
        raise KeyError("boom")

    with pytest.raises(ToolError, match="try another city"):
        await fails.run({}, _ctx(tmp_path))
    with pytest.raises(KeyError):
        await crashes.run({}, _ctx(tmp_path))


@pytest.mark.anyio
async def test_a_sync_callable_returning_a_coroutine_is_awaited(tmp_path: Path) -> None:
    async def inner(x: int) -> int:
        return x + 1

    def outer(x: int) -> Any:
        return inner(x)

    assert (await tool(outer).run({"x": 1}, _ctx(tmp_path))).content == "2"


@pytest.mark.anyio
async def test_a_callable_object_with_async_call(tmp_path: Path) -> None:
    class Greeter:
        async def __call__(self, who: str) -> str:
            return f"hello {who}"

    greet = tool(Greeter(), name="greet")
    assert greet.parameters["required"] == ["who"]
    assert (await greet.run({"who": "bob"}, _ctx(tmp_path))).content == "hello bob"


@pytest.mark.anyio
async def test_through_the_toolkit_validation_ctx_and_strict_nulls(tmp_path: Path) -> None:
    @tool
    async def book(ctx: ToolContext, place: Place, nights: int = 1) -> str:
        return f"{place.city} x{nights} ({ctx.tool_name})"

    async with await acreate_toolkit(extra_tools=[book], workspace=tmp_path) as toolkit:
        ok = await toolkit.aexecute("book", '{"place": {"city": "Oslo"}, "nights": null}')
        assert (ok.is_error, ok.content) == (False, "Oslo x1 (book)")
        bad = await toolkit.aexecute("book", {"place": {"city": 3, "unit": "kelvin"}})
        assert bad.is_error
        assert "$.place.city" in bad.content and "$.place.unit" in bad.content


def test_tool_factory_marks_and_return_annotations() -> None:
    @tool_factory
    def marked():  # type: ignore[no-untyped-def]
        return []

    def annotated() -> list[Tool]:
        return []

    def single() -> Tool:
        raise AssertionError

    def plain() -> list[str]:
        return []

    assert is_tool_factory(marked)
    assert is_tool_factory(annotated)
    assert is_tool_factory(single)
    assert not is_tool_factory(plain)
    assert not is_tool_factory(42)
