"""Python tools: a manifest entry `python: module:attr` becomes one or more tools.

```yaml
- name: add                  # optional: default the function's name
  python: mytools:add        # module:attr; the module may sit next to the manifest
  description: Add numbers   # default: the docstring
  read_only: true
- python: mytools:make_tools # a factory: called with no arguments, returns Tools
```

What `attr` may be:

- a function, async function or other callable: made into one tool with `tool()`;
- a `Tool` (from `@tool`, or built by hand);
- a list or tuple of `Tool`s;
- a **factory**: a callable marked with `@tool_factory` or annotated to return `Tool` /
  `list[Tool]` (any sequence of Tools). It is called with no arguments and returns a Tool or a
  sequence of Tools. A callable that is neither marked nor annotated is taken as a tool function.

The manifest's `name`, `description`, `parameters`, `title` and flags override what the code
says; `name`, `description` and `parameters` need a single tool.

Modules are looked up in the manifest's folder first, then on `sys.path`; the folder is on
`sys.path` only while the import runs. Local modules (files under that folder) are compiled
from source, never from a cached `.pyc` (which goes stale when a file changes twice within a
second, the normal pace of an editor and of tests), and no `__pycache__` is written next to the
manifest. A local module shadows an installed one of the same name, and a module that another
manifest folder loaded under the same name is replaced, not reused.

`sandbox:` is refused on a Python tool (in-process code cannot be confined) unless the entry
says `isolate: process`: each call then runs the callable in a fresh `python` child confined by
the entry's sandbox policy (see `_isolated_handler`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
import threading
import types
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._suggest import closest
from ..base import Result, Tool, ToolContext
from ..errors import ConfigError, ToolError, UsageError
from ..function import check_parameters, is_async_callable, is_tool_factory, tool
from . import BuildContext

__all__ = ["build_python_tools", "forget_local_modules", "load_reference"]

_FLAGS = ("read_only", "destructive", "idempotent", "open_world", "concurrent")
_LOCK = threading.RLock()
"""Imports mutate `sys.path`, `sys.meta_path` and `sys.modules`: one load at a time."""


# --------------------------------------------------------------------------------------------
# Importing `module:attr`
# --------------------------------------------------------------------------------------------


def load_reference(ref: str, base_dir: Path, *, fresh: bool = False) -> tuple[object, list[Path]]:
    """Import `module:attr` (the module may live under `base_dir`) and return the attribute.

    Args:
        ref: `package.module:attr`; `attr` may be dotted (`Class.method`).
        base_dir: the manifest's folder, searched before `sys.path`.
        fresh: forget every module loaded from under `base_dir` first, so that edited files are
            read again (hot reload). Do it once per rebuild, not once per entry: modules shared
            by several entries are then imported once.

    Returns:
        The attribute and the local source files (under `base_dir`) this import loaded, the
        module's own file first when it is local.

    Raises:
        ConfigError: (field `python`) a malformed reference, a module that does not import
            (naming the exception, with a hint), or a missing attribute (with close names).
    """
    module_name, attr = _split_reference(ref)
    base = base_dir.resolve()
    with _LOCK:
        if fresh:
            forget_local_modules(base)
        _forget_shadowed(module_name, base)
        before = set(sys.modules)
        module = _import(module_name, base)
        files: list[Path] = []
        own = _module_file(module)
        if own is not None and own.is_relative_to(base):
            files.append(own)
        for name in sorted(set(sys.modules) - before):
            path = _module_file(sys.modules.get(name))
            if path is not None and path.is_relative_to(base) and path not in files:
                files.append(path)
    return _resolve_attribute(module, module_name, attr), files


def forget_local_modules(base_dir: Path) -> list[str]:
    """Remove from `sys.modules` every module loaded from a file under `base_dir`.

    The next import of those modules reads their files again. Returns the names removed.
    """
    base = base_dir.resolve()
    with _LOCK:
        stale = [
            name
            for name, module in list(sys.modules.items())
            if (path := _module_file(module)) is not None and path.is_relative_to(base)
        ]
        for name in stale:
            sys.modules.pop(name, None)
        importlib.invalidate_caches()
    return stale


def _split_reference(ref: object) -> tuple[str, str]:
    if not isinstance(ref, str) or ref.count(":") != 1:
        raise ConfigError(
            f"expected 'module:attribute' (e.g. 'mytools:add'), got {ref!r}", field="python"
        )
    module_name, attr = (part.strip() for part in ref.split(":"))
    parts = module_name.split(".") + attr.split(".")
    if not all(part.isidentifier() for part in parts):
        raise ConfigError(
            f"{ref!r} is not 'module:attribute': both sides must be dotted Python names",
            field="python",
        )
    return module_name, attr


def _module_file(module: object) -> Path | None:
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return None
    return _resolved(file)


@functools.lru_cache(maxsize=8192)
def _resolved(file: str) -> Path | None:
    """`file` resolved once: every rebuild scans all of `sys.modules` (over a thousand modules
    in a real program), and resolving each path again dominated a reload."""
    try:
        return Path(file).resolve()
    except OSError:
        return None


def _local_candidate(module_name: str, base: Path) -> bool:
    top = module_name.split(".", maxsplit=1)[0]
    return (base / f"{top}.py").is_file() or (base / top / "__init__.py").is_file()


def _forget_shadowed(module_name: str, base: Path) -> None:
    """Drop a cached module of this name loaded from elsewhere when `base` has its own."""
    top = module_name.split(".", maxsplit=1)[0]
    cached = sys.modules.get(top)
    if cached is None or not _local_candidate(module_name, base):
        return
    path = _module_file(cached)
    if path is not None and path.is_relative_to(base):
        return
    for name in [n for n in sys.modules if n == top or n.startswith(f"{top}.")]:
        sys.modules.pop(name, None)


class _SourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles from the source file every time: never reads or writes a `.pyc`."""

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


class _LocalFinder(importlib.abc.MetaPathFinder):
    """Finds modules under one folder, loading them with `_SourceLoader`."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if (
            spec is None
            or spec.origin is None
            or not isinstance(spec.loader, importlib.machinery.SourceFileLoader)
        ):
            return None
        if not Path(spec.origin).resolve().is_relative_to(self.base):
            return None
        spec.loader = _SourceLoader(fullname, spec.origin)
        spec.cached = None
        return spec


def _import(module_name: str, base: Path) -> types.ModuleType:
    entry = str(base)
    finder = _LocalFinder(base)
    sys.path.insert(0, entry)
    sys.meta_path.insert(0, finder)
    importlib.invalidate_caches()
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name == missing or module_name.startswith(f"{missing}."):
            raise ConfigError(_not_found(module_name, missing, base), field="python") from exc
        raise ConfigError(_import_failed(module_name, exc), field="python") from exc
    except Exception as exc:
        # Boundary: the module's own code runs here and may raise anything; it becomes a
        # configuration error that names the module and the failure.
        raise ConfigError(_import_failed(module_name, exc), field="python") from exc
    finally:
        sys.meta_path.remove(finder)
        if entry in sys.path:
            sys.path.remove(entry)


def _not_found(module_name: str, missing: str, base: Path) -> str:
    message = f"cannot import module {module_name!r}: no module named {missing!r}"
    parent, _, leaf = missing.rpartition(".")
    candidates = _local_module_names(base if not parent else base.joinpath(*parent.split(".")))
    close = closest(leaf, candidates)
    if close:
        suggestion = f"{parent}.{close[0]}" if parent else close[0]
        message += f"; did you mean {suggestion!r}?"
    message += (
        f" (looked in {base} and on sys.path; put the module next to the manifest or install "
        "its package)"
    )
    return message


def _local_module_names(folder: Path) -> list[str]:
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    names = []
    for entry in entries:
        if entry.suffix == ".py" and entry.stem.isidentifier():
            names.append(entry.stem)
        elif entry.is_dir() and (entry / "__init__.py").is_file() and entry.name.isidentifier():
            names.append(entry.name)
    return sorted(names)


def _import_failed(module_name: str, exc: BaseException) -> str:
    where = ""
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f" at {exc.filename}:{exc.lineno}"
    else:
        tb = exc.__traceback__
        frame = None
        while tb is not None:
            frame = tb
            tb = tb.tb_next
        if frame is not None:
            where = f" at {frame.tb_frame.f_code.co_filename}:{frame.tb_lineno}"
    return (
        f"importing module {module_name!r} failed: {type(exc).__name__}: {exc}{where}; "
        "fix the module (run `python -c 'import {0}'` to see the full traceback)".format(
            module_name
        )
    )


def _resolve_attribute(module: types.ModuleType, module_name: str, attr: str) -> object:
    obj: object = module
    walked = module_name
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = [n for n in dir(obj) if not n.startswith("_")]
            close = closest(part, names, n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ConfigError(
                f"{walked!r} has no attribute {part!r}{hint}", field="python"
            ) from None
        walked = f"{walked}.{part}"
    return obj


# --------------------------------------------------------------------------------------------
# Building tools
# --------------------------------------------------------------------------------------------


def build_python_tools(decl: Mapping[str, Any], ctx: BuildContext) -> list[Tool]:
    """The tools of one `python:` manifest entry.

    Raises:
        ConfigError: a bad reference or import (field `python`), an attribute that is not a
            callable, Tool or factory, a factory that fails, overrides that need a single tool,
            a sandbox without `isolate: process`, a bad explicit `parameters`.
    """
    ref = decl.get("python")
    isolate = decl.get("isolate")
    if isolate not in (None, "process"):
        raise ConfigError(f"expected 'process', got {isolate!r}", field="isolate")
    if "sandbox" in decl and isolate != "process":
        raise ConfigError(
            "a sandbox cannot confine a Python tool that runs inside the toolkit's own process; "
            "remove `sandbox`, or add `isolate: process` to run each call in a confined child "
            "process",
            field="sandbox",
        )
    if not isinstance(ref, str):
        raise ConfigError(f"expected 'module:attribute', got {ref!r}", field="python")
    if decl.get("inline") and isolate == "process":
        raise ConfigError(
            "`inline: true` runs the function on the toolkit's event loop and `isolate: process` "
            "in a child process: choose one",
            field="inline",
        )
    obj, files = load_reference(ref, ctx.base_dir)
    tools = _tools_of(obj, decl, ref)
    if not callable(obj) or isinstance(obj, Tool) or is_tool_factory(obj):
        for t in tools:  # Tools made by hand: `tool()` checked the ones it made itself
            _check_parameters(t)
    if isolate == "process":
        tools = [_isolate(t, ref, ctx) for t in tools]
    origin = ctx.origin or ref
    return [
        dataclasses.replace(
            t, origin=origin, meta={**t.meta, "files": tuple(files), "reference": ref}
        )
        for t in tools
    ]


def _tools_of(obj: object, decl: Mapping[str, Any], ref: str) -> list[Tool]:
    if "inline" in decl and (isinstance(obj, Tool | list | tuple) or is_tool_factory(obj)):
        raise ConfigError(
            f"`inline` applies to a plain function, and {ref!r} already makes Tools; pass "
            "inline=True to its @tool(...) instead",
            field="inline",
        )
    if decl.get("inline") and callable(obj) and is_async_callable(obj):
        raise ConfigError(
            f"{ref!r} is async: it runs on the event loop already; remove `inline`", field="inline"
        )
    if isinstance(obj, Tool):
        return [_override(obj, decl)]
    if isinstance(obj, list | tuple):
        found = _check_tools(obj, ref, "the list")
        return _override_many(found, decl, ref)
    if is_tool_factory(obj):
        return _override_many(_call_factory(obj, ref), decl, ref)
    if callable(obj):
        return [_from_function(obj, decl)]
    raise ConfigError(
        f"{ref!r} is a {type(obj).__name__}, not a function, a Tool, a list of Tools or a "
        "factory returning Tools",
        field="python",
    )


def _check_parameters(t: Tool) -> None:
    try:
        check_parameters(t.parameters)
    except ConfigError as exc:
        raise ConfigError(f"tool {t.name!r}: parameters: {exc.message}", field="python") from exc


def _call_factory(factory: Any, ref: str) -> list[Tool]:
    try:
        made = factory()
    except (ToolError, ConfigError, UsageError):
        raise
    except Exception as exc:
        # Boundary: user code; its failure becomes a configuration error naming the factory.
        raise ConfigError(
            f"the tool factory {ref!r} failed: {type(exc).__name__}: {exc}", field="python"
        ) from exc
    if isinstance(made, Tool):
        return [made]
    if isinstance(made, Iterable) and not isinstance(made, str | bytes | Mapping):
        return _check_tools(list(made), ref, "the factory's result")
    raise ConfigError(
        f"the tool factory {ref!r} returned {type(made).__name__}; expected a Tool or a list of "
        "Tools",
        field="python",
    )


def _check_tools(items: Sequence[object], ref: str, what: str) -> list[Tool]:
    tools = [i for i in items if isinstance(i, Tool)]
    bad = [type(i).__name__ for i in items if not isinstance(i, Tool)]
    if bad:
        raise ConfigError(
            f"{what} of {ref!r} holds {', '.join(sorted(set(bad)))} items; every item must be a "
            "Tool (wrap functions with toolnexus.tool)",
            field="python",
        )
    if not items:
        raise ConfigError(f"{what} of {ref!r} holds no tools", field="python")
    return tools


def _flag_overrides(decl: Mapping[str, Any]) -> dict[str, Any]:
    return {key: decl[key] for key in (*_FLAGS, "title") if key in decl}


def _from_function(fn: Any, decl: Mapping[str, Any]) -> Tool:
    try:
        return tool(
            fn,
            name=decl.get("name"),
            description=decl.get("description"),
            parameters=decl.get("parameters"),
            inline=bool(decl.get("inline", False)),
            **_flag_overrides(decl),
        )
    except UsageError as exc:
        # a manifest entry is configuration: report the programmer-facing problem against it
        field = "name" if "name" in str(exc) and "name" in decl else "python"
        raise ConfigError(str(exc), field=field) from exc


def _override(t: Tool, decl: Mapping[str, Any]) -> Tool:
    fn = t.meta.get("function")
    if "parameters" in decl and fn is not None:
        return _from_function(
            fn,
            {
                "name": t.name,
                "description": t.description,
                "title": t.title,
                **{flag: getattr(t, flag) for flag in _FLAGS},
                **decl,
            },
        )
    changes: dict[str, Any] = _flag_overrides(decl)
    if "name" in decl:
        from ..schema import check_name

        try:
            changes["name"] = check_name(decl["name"])
        except UsageError as exc:
            raise ConfigError(str(exc), field="name") from exc
    if "description" in decl:
        changes["description"] = decl["description"]
    if "parameters" in decl:
        from ..schema import check_schema

        check_schema(decl["parameters"], field="parameters")
        changes["parameters"] = dict(decl["parameters"])
    return dataclasses.replace(t, **changes) if changes else t


def _override_many(tools: list[Tool], decl: Mapping[str, Any], ref: str) -> list[Tool]:
    if len(tools) == 1:
        return [_override(tools[0], decl)]
    single = [key for key in ("name", "description", "parameters") if key in decl]
    if single:
        names = ", ".join(t.name for t in tools)
        raise ConfigError(
            f"{ref!r} gives {len(tools)} tools ({names}); `{single[0]}` applies to a single "
            "tool: remove it, or point `python:` at one tool",
            field=single[0],
        )
    return [_override(t, decl) for t in tools]


# --------------------------------------------------------------------------------------------
# isolate: process
# --------------------------------------------------------------------------------------------

_WORKER = r"""
import asyncio, base64, contextlib, importlib, inspect, io, json, sys, traceback
request = json.loads(sys.stdin.buffer.read())
sys.path.insert(0, request["base_dir"])
out = sys.stdout
sys.stdout = sys.stderr
def reply(payload):
    out.write("\n" + request["marker"] + json.dumps(payload) + "\n")
    out.flush()
try:
    from toolnexus.base import Tool, to_result
    from toolnexus.function import tool, is_tool_factory
    module_name, attr = request["ref"].split(":")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, Tool):
        tools = [obj]
    elif isinstance(obj, (list, tuple)):
        tools = list(obj)
    elif is_tool_factory(obj):
        made = obj()
        tools = [made] if isinstance(made, Tool) else list(made)
    else:
        tools = [tool(obj, name=request["name"])]
    if len(tools) == 1:
        chosen = tools[0]
    else:
        chosen = next(t for t in tools if t.name == request["name"])
    result = asyncio.run(chosen.run(request["arguments"], None))
    reply({
        "content": result.content,
        "structured": result.structured,
        "is_error": result.is_error,
        "images": [[p.mime_type, base64.b64encode(p.data).decode()]
                   for p in result.parts if hasattr(p, "data") and p.data is not None
                   and p.mime_type.startswith("image/")],
    })
except BaseException as exc:
    from toolnexus.errors import ToolError
    reply({"error": f"{type(exc).__name__}: {exc}", "tool_error": isinstance(exc, ToolError),
           "message": str(exc), "traceback": traceback.format_exc()})
"""


def _isolate(t: Tool, ref: str, ctx: BuildContext) -> Tool:
    """`t` with a handler that runs each call in a fresh, sandboxed `python` child."""
    from ..runtime.process import run_process

    package_root = str(Path(__file__).resolve().parents[2])
    base_dir = str(ctx.base_dir.resolve())
    sandbox = ctx.sandbox
    timeout = ctx.timeout
    name = t.name
    marker = f"@@toolnexus-result-{id(t):x}@@"

    async def handler(arguments: dict[str, Any], call: ToolContext) -> Result:
        request = {
            "ref": ref,
            "base_dir": base_dir,
            "name": name,
            "arguments": arguments,
            "marker": marker,
        }
        done = await run_process(
            [
                sys.executable,
                "-I",
                "-c",
                f"import sys; sys.path.insert(0, {package_root!r})\n" + _WORKER,
            ],
            cwd=call.workspace,
            stdin=json.dumps(request).encode(),
            timeout=timeout,
            max_output=None,
            sandbox=sandbox,
            workspace=ctx.workspace,
        )
        return _worker_result(done, marker, name, timeout)

    meta = {k: v for k, v in t.meta.items() if k != "worker_thread"}  # a process is killed
    return dataclasses.replace(t, handler=handler, meta={**meta, "isolate": "process"})


def _worker_result(done: Any, marker: str, name: str, timeout: float | None) -> Result:
    from ..errors import ToolTimeout
    from ..middleware import _seconds  # the timeout middleware's wording of a duration

    if done.timed_out:
        limit = "" if timeout is None else f" ({_seconds(timeout)})"
        raise ToolTimeout(
            f"tool {name!r} ran past its timeout{limit} in its isolated process, which was "
            "killed; try a smaller request or a narrower input"
        )
    _, found, payload = done.stdout.rpartition(marker)
    if not found:
        detail = (done.stderr or done.stdout).strip()[-2000:]
        raise ToolError(
            f"tool {name!r} crashed in its isolated process (exit code {done.exit_code})"
            + (f": {detail}" if detail else "")
        )
    reply = json.loads(payload.strip().splitlines()[0])
    if "error" in reply:
        # the child's exception crosses the process boundary as text: the model reads it as a
        # ToolError would read; the child's traceback goes to the application's metadata
        message = reply["message"] if reply["tool_error"] else reply["error"]
        return Result.error(message, traceback=reply["traceback"], isolated=True)
    import base64

    from ..base import ImagePart

    parts = tuple(
        ImagePart(data=base64.b64decode(data), mime_type=mime) for mime, data in reply["images"]
    )
    return Result(
        content=reply["content"],
        structured=reply["structured"],
        is_error=reply["is_error"],
        parts=parts,
        metadata={
            "isolated": True,
            "exit_code": done.exit_code,
            "mechanism": done.mechanism,
            "launch": done.launch,
        },
    )
