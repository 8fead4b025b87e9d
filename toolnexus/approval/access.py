"""Per-caller policy: which callers see and run which tools (`access:`), and the `caller:`
condition of approval rules and permissions.

Both are about the callers of `serve`, whose identity comes from their OAuth access token
(`toolnexus.base.Caller`, read through `current_caller()`). A local toolkit has no caller, so
`access:` leaves it untouched and a rule with `caller:` never matches there.

`access:` semantics, chosen so that a forgotten entry cannot open a tool that one file meant to
restrict, and so that an include's policy cannot be widened by the file that includes it:

- A tool named by no entry stays open to every authenticated caller (the entries restrict; a
  team writes entries for what needs restricting, and a new tool is not silently lost).
- A tool named by entries of one file is visible and callable only to a caller who matches at
  least one of that file's entries naming it (entries of one file are alternatives).
- Entries of different files (the top manifest and each included one) must *each* let the
  caller in: deny anywhere wins, as for `permissions:`.

Separate from `rules` and `permissions` because it decides visibility, not a call's decision;
the matching of a caller (`CallerMatch`) is shared by all three.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._suggest import did_you_mean
from ..errors import ConfigError
from .names import ToolName, compile_tool_name, suggestions

if TYPE_CHECKING:
    from ..base import Caller, Tool

__all__ = [
    "AccessEntry",
    "AccessRules",
    "CallerMatch",
    "compile_caller",
    "compile_entry",
]

_CALLER_KEYS = ("subjects", "groups", "roles", "scopes")
"""What a caller is matched on; several given keys must all hold, one of each list's items."""
_ENTRY_KEYS = ("tools", *_CALLER_KEYS)
_Locate = Callable[[str], str | None]
"""A field path (`access[1]`) -> `file:line:col` (as `rules.Locate`)."""


@dataclass(frozen=True, kw_only=True)
class CallerMatch:
    """Which callers a `caller:` condition or an `access:` entry admits.

    Each given key must hold (subjects, groups, roles, scopes); within a key, one listed value
    is enough. No caller (a local toolkit) never matches.
    """

    subjects: frozenset[str] | None = None
    groups: frozenset[str] | None = None
    roles: frozenset[str] | None = None
    scopes: frozenset[str] | None = None

    def matches(self, caller: Caller | None) -> bool:
        if caller is None:
            return False
        if self.subjects is not None and caller.subject not in self.subjects:
            return False
        if self.groups is not None and self.groups.isdisjoint(caller.groups):
            return False
        if self.roles is not None and self.roles.isdisjoint(caller.roles):
            return False
        return self.scopes is None or not self.scopes.isdisjoint(caller.scopes)

    def describe(self) -> str:
        """`groups ops, dev; roles admin`: for rule texts and log lines."""
        parts = []
        for key in _CALLER_KEYS:
            values = getattr(self, key)
            if values is not None:
                parts.append(f"{key} {', '.join(sorted(values))}")
        return "; ".join(parts)


def compile_caller(spec: Any, field: str) -> CallerMatch:
    """A `caller:` mapping (`{groups: [ops], roles: [admin]}`) compiled.

    Raises:
        ConfigError: not a mapping, empty, an unknown key (with the closest one), or a value
            that is not a name or a non-empty list of names.
    """
    if not isinstance(spec, Mapping) or not spec:
        raise ConfigError(
            "expected a mapping of subjects, groups, roles or scopes to the names that match, "
            f"e.g. {{groups: [ops]}}, got {spec!r}",
            field=field,
        )
    values: dict[str, frozenset[str]] = {}
    for key, value in spec.items():
        sub = _join(field, str(key))
        if key not in _CALLER_KEYS:
            raise ConfigError(
                f"unknown key {key!r}; expected subjects, groups, roles or scopes"
                f"{did_you_mean(str(key), _CALLER_KEYS)}",
                field=sub,
            )
        values[key] = _names(value, sub)
    return CallerMatch(**values)


def _join(field: str, key: str) -> str:
    return f"{field}.{key}" if field else key


def _names(value: Any, field: str) -> frozenset[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(i, str) and i for i in items):
        raise ConfigError(
            f"expected a name or a non-empty list of names, got {value!r}", field=field
        )
    return frozenset(items)


@dataclass(frozen=True, kw_only=True)
class AccessEntry:
    """One compiled `access:` entry: the tools it names and the callers it admits to them."""

    tools: tuple[ToolName, ...]
    who: CallerMatch
    field: str
    """Where it is written in its file (`access[1]`)."""
    scope: str
    """The file it is written in: entries of one file are alternatives, files all must agree."""
    origin: str | None = None
    """`file:line:col`, for log lines."""


class AccessRules:
    """The compiled `access:` entries of a manifest and its includes (see the module)."""

    def __init__(self, entries: Sequence[AccessEntry]) -> None:
        self.entries = tuple(entries)
        self._plans: dict[int, tuple[weakref.ref[Tool], tuple[tuple[AccessEntry, ...], ...]]] = {}

    def __repr__(self) -> str:
        return f"AccessRules({len(self.entries)} entries)"

    def allows(self, tool: Tool, caller: Caller | None) -> bool:
        """Whether `caller` may see and call `tool` (always, without a caller)."""
        return caller is None or self.refusal(tool, caller) is None

    def refusal(self, tool: Tool, caller: Caller | None) -> str | None:
        """Why `caller` may not use `tool`, for the server's log (None: it may)."""
        if caller is None:
            return None
        for naming in self._plan(tool):
            if not any(e.who.matches(caller) for e in naming):
                shown = "; ".join(
                    f"{e.origin or e.field} admits {e.who.describe()}" for e in naming
                )
                return (
                    f"caller {caller.subject!r} (groups {', '.join(caller.groups) or 'none'}) "
                    f"matches no access entry naming {tool.name!r}: {shown}"
                )
        return None

    def unmatched(self, tools: Iterable[Tool]) -> list[tuple[AccessEntry, ConfigError]]:
        """One error per tool pattern that names none of `tools`: an entry meant to restrict
        a tool that it misspells would leave that tool open to everyone."""
        known = list(tools)
        choices = suggestions(known)
        problems = []
        for entry in self.entries:
            for index, name in enumerate(entry.tools):
                if not any(name.matches(a) for t in known for a in _names_of(t)):
                    problems.append(
                        (
                            entry,
                            ConfigError(
                                f"access entry names no tool with {name.written!r}"
                                f"{did_you_mean(name.written, choices)}",
                                field=_join(entry.field, f"tools[{index}]"),
                            ),
                        )
                    )
        return problems

    def _plan(self, tool: Tool) -> tuple[tuple[AccessEntry, ...], ...]:
        """Per file whose entries name `tool`, those entries."""
        key = id(tool)
        cached = self._plans.get(key)
        if cached is not None and cached[0]() is tool:
            return cached[1]
        by_scope: dict[str, list[AccessEntry]] = {}
        names = _names_of(tool)
        for entry in self.entries:
            if any(n.matches(a) for n in entry.tools for a in names):
                by_scope.setdefault(entry.scope, []).append(entry)
        plan = tuple(tuple(v) for v in by_scope.values())
        plans = self._plans
        plans[key] = (weakref.ref(tool, lambda _ref: plans.pop(key, None)), plan)
        return plan


def _names_of(tool: Tool) -> list[Tool]:
    """`tool` under every name it had along its include chain (`prefix:` renames it): an
    included file's entries name its tools as that file does, and still restrict them."""
    aliases = tool.meta.get("aliases", ()) if tool.meta else ()
    return [tool, *(dataclasses.replace(tool, name=a) for a in aliases)]


def compile_entry(
    item: Any, *, scope: str, field: str, origin: _Locate | None = None
) -> AccessEntry:
    """One `access:` entry (`{tools: [deploy*], groups: [ops]}`) compiled.

    Args:
        item: The entry as written.
        scope: The file it is written in (entries of one file are alternatives).
        field: Its field path, for errors (`""`: errors name fields inside the entry).
        origin: Gives `file:line:col` for `field`, if known (for log lines).

    Raises:
        ConfigError: not a mapping, no `tools`, nobody it admits, or an unknown key (with the
            closest one).
    """
    if not isinstance(item, Mapping):
        raise ConfigError(
            f"expected an entry such as {{tools: [deploy*], groups: [ops]}}, got {item!r}",
            field=field,
        )
    for key in item:
        if key not in _ENTRY_KEYS:
            raise ConfigError(
                f"unknown key {key!r}; expected tools, subjects, groups, roles or scopes"
                f"{did_you_mean(str(key), _ENTRY_KEYS)}",
                field=_join(field, str(key)),
            )
    if "tools" not in item:
        raise ConfigError(
            "missing `tools`: the tool names or globs this entry is about", field=field
        )
    who = {k: v for k, v in item.items() if k != "tools"}
    if not who:
        raise ConfigError(
            "name who may use these tools: subjects, groups, roles or scopes (a tool named by "
            "no entry is open to every caller already)",
            field=field,
        )
    written = item["tools"]
    _names(written, _join(field, "tools"))
    listed = [written] if isinstance(written, str) else list(written)
    tools = tuple(
        compile_tool_name(n, allow=False, field=_join(field, f"tools[{i}]"))
        for i, n in enumerate(listed)
    )
    where = origin(field) if origin is not None else None
    return AccessEntry(
        tools=tools, who=compile_caller(who, field), field=field, scope=scope, origin=where
    )
