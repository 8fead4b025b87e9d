"""The builtin coding-agent tools: read, write, edit, apply_patch, glob, grep, shell, fetch, todo.

A tool set like any other: registered under the `toolnexus.toolsets` entry point as `builtin`
and built only from toolnexus' public API. `builtins:` in a manifest and
`create_toolkit(builtins=...)` are shorthand for it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from toolnexus import ConfigError, Tool

from ._common import did_you_mean

__all__ = ["NAMES", "toolset"]

_MODULES: dict[str, tuple[str, str]] = {
    "read": ("files", "files_tools"),
    "write": ("files", "files_tools"),
    "edit": ("files", "files_tools"),
    "apply_patch": ("patch", "patch_tools"),
    "glob": ("search", "search_tools"),
    "grep": ("search", "search_tools"),
    "shell": ("shell", "shell_tools"),
    "fetch": ("fetch", "fetch_tools"),
    "todo": ("todo", "todo_tools"),
}
_COMPANIONS = {"shell": ("shell_output", "shell_kill")}
"""Tools that come with another one: background jobs are read and stopped by these two."""

NAMES = tuple(_MODULES)
"""Every builtin tool name a manifest may list."""


def toolset(options: Mapping[str, Mapping[str, Any]] | None = None) -> Any:
    """The builtin tools named in `options` (name -> options; `"*"` for all of them).

    Called without options, as `include: [toolset:builtin]` does, it returns the manifest of
    the tool set instead (`builtins: all`), so that an include, `builtins:` and
    `create_toolkit(builtins=...)` all end up here with options. Options of tools that share a
    module (read/write/edit, glob/grep) are merged.

    Raises:
        ConfigError: an unknown tool name (with a suggestion) or an option a tool rejects.
    """
    if options is None:
        return {"version": 1, "name": "builtin", "builtins": "all"}
    wanted = set(NAMES) if "*" in options else set()
    for name in options:
        if name == "*":
            continue
        if name not in _MODULES:
            hint = did_you_mean(name, NAMES)
            raise ConfigError(
                f"unknown builtin tool {name!r}{hint} (builtins: {', '.join(NAMES)})",
                field=f"builtins.{name}",
            )
        wanted.add(name)
    by_module: dict[tuple[str, str], dict[str, Any]] = {}
    for name in sorted(wanted):
        merged = by_module.setdefault(_MODULES[name], {})
        merged.update(options.get("*", {}))
        merged.update(options.get(name, {}))
    keep = wanted | {c for name in wanted for c in _COMPANIONS.get(name, ())}
    tools: list[Tool] = []
    for (module, factory_name), module_options in by_module.items():
        factory: Callable[[Mapping[str, Any]], list[Tool]] = getattr(
            importlib.import_module(f"{__name__}.{module}"), factory_name
        )
        try:
            made = factory(module_options)
        except ConfigError as exc:
            sharing = [n for n in sorted(wanted) if _MODULES[n] == (module, factory_name)]
            field = _option_field(exc.field, sharing, options)
            raise ConfigError(exc.message, field=field) from exc
        tools += [t for t in made if t.name in keep]
    return tools


def _option_field(field: str, sharing: list[str], options: Mapping[str, Any]) -> str:
    """`builtins.<tool>.<option>` for an option a module's factory refused: the tools of a
    module share their options, so the tool is the one whose options hold it."""
    key = field.split(".", 1)[0].split("[", 1)[0]
    for name in (*sharing, "*"):
        if key in options.get(name, {}):
            return f"builtins.{name}.{field}"
    return f"builtins.{field}"
