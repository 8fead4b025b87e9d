"""Tools from Python callables: the `@tool` decorator and its plain-function form.

```python
@tool
async def add(a: int, b: int = 1) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b

search = tool(my_search, name="search", read_only=True)
```

Everything that can be decided once is decided when the tool is built: the schema, how each
argument becomes the hinted type, where the `ToolContext` goes, and which of a few specialised
handlers runs the call. An async function with plain arguments costs one `await` and a
`to_result` per call. Sync functions run in a worker thread so that they never block the loop
(one thread per running call, see `runtime.workers`: a function stuck past its timeout holds
only its own).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast, overload

from .base import Result, Tool, ToolContext, ToolHandler, to_result
from .errors import ConfigError, UsageError
from .runtime.workers import run_in_worker
from .schema import FunctionSchema, check_name, check_schema, schema_from_function

__all__ = [
    "check_parameters",
    "is_async_callable",
    "is_tool_factory",
    "parameter_problems",
    "tool",
    "tool_factory",
]

F = TypeVar("F", bound=Callable[..., Any])


@overload
def tool(
    fn: Callable[..., Any],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    title: str | None = None,
    read_only: bool = False,
    destructive: bool = True,
    idempotent: bool = False,
    open_world: bool = True,
    concurrent: bool = False,
    inline: bool = False,
) -> Tool: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    title: str | None = None,
    read_only: bool = False,
    destructive: bool = True,
    idempotent: bool = False,
    open_world: bool = True,
    concurrent: bool = False,
    inline: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    title: str | None = None,
    read_only: bool = False,
    destructive: bool = True,
    idempotent: bool = False,
    open_world: bool = True,
    concurrent: bool = False,
    inline: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a `Tool` from a sync or async callable: `@tool`, `@tool(...)` or `tool(fn, ...)`.

    Args:
        fn: the function (or any callable); omitted when used as `@tool(...)`.
        name: the tool's name; default `fn.__name__`. Must be 1-64 of `[A-Za-z0-9_-]`.
        description: default: the docstring without its parameters section.
        parameters: an explicit JSON Schema for the arguments, used instead of the one derived
            from the type hints (it must describe an object whose properties the function takes).
        title: a display title.
        read_only, destructive, idempotent, open_world: MCP tool annotations.
        concurrent: the tool may run alongside other calls in `execute_many`.
        inline: run a *sync* function on the toolkit's event loop instead of a worker thread
            (a timeout cannot stop a thread either: a timed-out sync function runs on until it
            returns, and its result is dropped; `isolate: process` really stops one).
            Only for quick functions that never block (arithmetic, lookups in memory): it saves
            the two thread hand-offs a sync function otherwise costs (about 150 µs on our VM),
            but while it runs no other call progresses and `timeout` cannot interrupt it.

    Returns:
        The `Tool` (source "python"); `tool.meta["function"]` is the original callable.

    Raises:
        UsageError: a bad name, `*args`/`**kwargs`, a hint with no JSON Schema form, `inline`
            for an async function (it runs on the loop already).
        ConfigError: `parameters` is not a valid object schema (field `parameters`).
    """
    options: dict[str, Any] = {
        "name": name,
        "description": description,
        "parameters": parameters,
        "title": title,
        "read_only": read_only,
        "destructive": destructive,
        "idempotent": idempotent,
        "open_world": open_world,
        "concurrent": concurrent,
        "inline": inline,
    }
    if fn is None:
        return lambda f: _build(f, **options)
    return _build(fn, **options)


def tool_factory(fn: F) -> F:
    """Mark `fn` as a factory: a callable with no required arguments returning Tools.

    A manifest entry `python: module:attr` calls a factory to get its tools instead of turning
    the callable itself into one tool. A return annotation of `Tool`, `list[Tool]` (or another
    sequence of Tools) marks a factory too.
    """
    # Functions take attributes at runtime; `Callable` has no way to say so.
    cast(Any, fn).toolnexus_factory = True
    return fn


def is_tool_factory(obj: object) -> bool:
    """True when `obj` is marked by `@tool_factory` or annotated to return Tools."""
    if not callable(obj):
        return False
    if getattr(obj, "toolnexus_factory", False) is True:
        return True
    try:
        hints = inspect.get_annotations(obj, eval_str=True)
    except (NameError, TypeError, AttributeError, SyntaxError):
        return False
    return _returns_tools(hints.get("return"))


def _returns_tools(hint: Any) -> bool:
    import typing

    if hint is Tool:
        return True
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is None or not args:
        return False
    import collections.abc as cabc

    if origin in (list, tuple, cabc.Sequence, cabc.Iterable, cabc.Iterator, cabc.Collection):
        return args[0] is Tool
    return False


def _build(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    parameters: Mapping[str, Any] | None,
    title: str | None,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
    concurrent: bool,
    inline: bool,
) -> Tool:
    if isinstance(fn, Tool):
        raise UsageError(
            f"{fn.name!r} is already a Tool; use dataclasses.replace(tool, ...) to change it"
        )
    if not callable(fn):
        raise UsageError(f"tool() needs a function or other callable, not {type(fn).__name__}")
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise UsageError(
            f"{_label(fn)} is a generator: a tool returns one value; collect the items into a "
            "list (or return a string) instead"
        )
    tool_name = check_name(name if name is not None else _default_name(fn))
    if inline and is_async_callable(fn):
        raise UsageError(
            f"{_label(fn)} is async: it runs on the event loop already; drop inline=True"
        )
    explicit: dict[str, Any] | None = None
    if parameters is not None:
        explicit = copy.deepcopy(dict(parameters))
        check_parameters(explicit)
    fs = schema_from_function(fn, parameters=explicit)
    return Tool(
        name=tool_name,
        handler=_handler(fn, fs, inline=inline),
        description=description if description is not None else (fs.description or ""),
        parameters=fs.parameters,
        source="python",
        title=title,
        read_only=read_only,
        destructive=destructive,
        idempotent=idempotent,
        open_world=open_world,
        concurrent=concurrent,
        origin=_origin(fn),
        meta={"function": fn, **({"worker_thread": True} if _in_worker(fn, inline) else {})},
    )


def _in_worker(fn: Callable[..., Any], inline: bool) -> bool:
    """Whether calls run `fn` on a worker thread, which a timeout cannot stop (see
    `runtime.workers`): `meta["worker_thread"]` lets the timeout say so instead of claiming the
    call was stopped."""
    return not inline and not is_async_callable(fn)


def check_parameters(parameters: object) -> None:
    """Check a tool's arguments schema: an object schema, valid Draft 2020-12, every local
    `$ref` resolving. Done at build, so that a typo (`"type": "strin"`) is reported there
    instead of failing every call as a crash blamed on the tool.

    Raises:
        ConfigError: (field `parameters`) what is wrong, with the JSON path of the bad part.
    """
    _check_object(parameters)
    check_schema(parameters, field="parameters")


def parameter_problems(parameters: object) -> list[ConfigError]:
    """What `check_parameters` finds, one error per problem, each with the field of the bad
    part (`parameters.properties.path.type`): for a manifest, which points at each one's line.
    """
    try:
        _check_object(parameters)
    except ConfigError as exc:
        return [exc]
    from .schema import schema_problems

    return [
        ConfigError(message, field="parameters" + "".join(_field_part(p) for p in path))
        for path, message in schema_problems(parameters)
    ]


def _field_part(part: str | int) -> str:
    return f"[{part}]" if isinstance(part, int) else f".{part}"


def _check_object(parameters: object) -> None:
    kind = parameters.get("type") if isinstance(parameters, Mapping) else None
    if kind != "object":
        got = f"type {kind!r}" if isinstance(parameters, Mapping) else type(parameters).__name__
        raise ConfigError(
            'a tool\'s parameters must be an object schema ({"type": "object", '
            f'"properties": {{...}}}}), got {got}',
            field="parameters",
        )


def _default_name(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__name__", None)
    if name is None:
        inner = getattr(fn, "func", None)  # functools.partial
        name = getattr(inner, "__name__", None) or type(fn).__name__
    if name == "<lambda>":
        raise UsageError("a lambda has no usable name: pass tool(fn, name=...)")
    return str(name)


def _label(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _origin(fn: Callable[..., Any]) -> str:
    target = getattr(fn, "func", fn)
    module = getattr(target, "__module__", None) or "?"
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}:{qualname}"


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """True for an async function, or a callable object whose `__call__` is async."""
    if inspect.iscoroutinefunction(fn):
        return True
    # a callable object whose __call__ is async
    return not inspect.isfunction(fn) and inspect.iscoroutinefunction(type(fn).__call__)


def _handler(fn: Callable[..., Any], fs: FunctionSchema, *, inline: bool) -> ToolHandler:
    """The cheapest handler that calls `fn` correctly for this signature."""
    plain = not fs.converters and not fs.positional and not fs.fill
    ctx_name = fs.context_param
    bind = fs.bind
    if is_async_callable(fn):
        if plain and ctx_name is None:

            async def run_async(arguments: dict[str, Any], ctx: ToolContext) -> Result:
                return to_result(await fn(**arguments))

            return run_async
        if plain and ctx_name is not None:

            async def run_async_ctx(arguments: dict[str, Any], ctx: ToolContext) -> Result:
                return to_result(await fn(**arguments, **{ctx_name: ctx}))

            return run_async_ctx

        async def run_async_bound(arguments: dict[str, Any], ctx: ToolContext) -> Result:
            args, kwargs = bind(arguments, ctx)
            return to_result(await fn(*args, **kwargs))

        return run_async_bound

    if inline and plain and ctx_name is None:

        async def run_inline(arguments: dict[str, Any], ctx: ToolContext) -> Result:
            return to_result(fn(**arguments))

        return run_inline

    async def run_sync(arguments: dict[str, Any], ctx: ToolContext) -> Result:
        args, kwargs = bind(arguments, ctx)
        if inline:
            value = fn(*args, **kwargs)
        else:
            value = await run_in_worker(fn, *args, **kwargs)
        if inspect.isawaitable(value):
            # a sync callable that hands back a coroutine (a partial of an async function...)
            value = await value
        return to_result(value)

    return run_sync
