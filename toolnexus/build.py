"""Build one Generation: tools from every source, approval and middleware attached, the
executor wired. Called by `create_toolkit` and again by every reload."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import Tool
from .executor import Executor
from .registry import Registry

if TYPE_CHECKING:
    from .toolkit import Generation, ToolkitOptions

__all__ = ["build_generation", "load_toolset"]


async def build_generation(
    options: ToolkitOptions, *, number: int, previous: Generation | None
) -> Generation:
    """A complete, ready generation, or an exception with nothing left open."""
    from .toolkit import Generation

    stack = AsyncExitStack()
    try:
        workspace = (options.workspace or Path.cwd()).resolve()
        tools: list[Tool] = list(options.extra_tools)
        if options.builtins is not None:
            tools += load_toolset("builtin", _builtin_options(options.builtins))
        registry = Registry(tools)
        executor = Executor(
            registry,
            middleware=options.middleware,
            permissions=options.permissions,
            approver=options.approver,
            workspace=workspace,
            state=previous.executor.state if previous is not None else None,
        )
        return Generation(number=number, registry=registry, executor=executor, resources=stack)
    except BaseException:
        await stack.aclose()
        raise


def _builtin_options(spec: Any) -> dict[str, Mapping[str, Any]]:
    """`"all"`, a list of names, or a mapping name -> options, as a mapping."""
    if spec == "all" or spec is True:
        return {"*": {}}
    if isinstance(spec, Mapping):
        return {str(k): dict(v or {}) for k, v in spec.items()}
    return {str(name): {} for name in spec}


def load_toolset(name: str, options: Mapping[str, Mapping[str, Any]]) -> list[Tool]:
    """Tools of a packaged tool set registered under the `toolnexus.toolsets` entry point.

    The entry point's object is called with `options` (tool name -> its options; `"*"` for
    all) and returns `Tool`s.
    """
    from importlib.metadata import entry_points

    from .errors import UsageError

    found = entry_points(group="toolnexus.toolsets", name=name)
    if not found:
        raise UsageError(
            f"no tool set named {name!r} is installed (entry point group toolnexus.toolsets); "
            "install the package that provides it"
        )
    factory = next(iter(found)).load()
    return list(factory(options))
