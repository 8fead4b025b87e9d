"""`operations: {include, exclude}` of an `openapi:` entry: which operations become tools.

A pattern (an fnmatch glob or a plain name) matches an operation by any of its names: the
operationId as the description writes it (`repos/get`), the sanitized one that `toolnexus
list` shows (`repos_get`), or the tool name with the entry's prefix (`gh_repos_get`). A plain
name that matches no operation is a mistake (a typo, or an operation the API removed) and is
reported with the closest names; so is a filter that selects nothing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field

from .._suggest import closest
from ..errors import ConfigError

__all__ = ["Selection"]

_GLOB = frozenset("*?[")
_SHOWN = 10
"""Names listed when a filter selects nothing (then "and N more")."""


@dataclass(kw_only=True)
class Selection:
    """The filters of one entry, and the names of the operations it was asked about."""

    include: Sequence[str]
    exclude: Sequence[str]
    label: str
    ids: frozenset[str] = frozenset()
    """Every operationId the description writes: a plain pattern equal to one of them selects
    that operation only, not another whose sanitized or generated name happens to be the same
    (`repos_get` is not `repos/get` when both ids exist)."""
    names: list[str] = field(default_factory=list, init=False)
    """Every operation's shown name (sanitized operationId), in document order."""
    _used: set[int] = field(default_factory=set, init=False)
    _exclude_used: set[int] = field(default_factory=set, init=False)
    _all_names: set[str] = field(default_factory=set, init=False)
    _everything: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._everything = list(self.include) == ["*"] and not self.exclude
        if self._everything:
            self._used.add(0)

    def selects(self, *names: str, own_id: str | None = None) -> bool:
        """Whether the operation known by `names` (its shown name first) becomes a tool;
        `own_id` is the operationId it is written with (None: it has none)."""
        self.names.append(names[0])
        self._all_names.update(names)
        if self._everything:
            return True
        included = False
        for i, pattern in enumerate(self.include):
            if self._matches(pattern, names, own_id):
                self._used.add(i)
                included = True
        for i, pattern in enumerate(self.exclude):
            if self._matches(pattern, names, own_id):
                self._exclude_used.add(i)
                included = False
        return included

    def _matches(self, pattern: str, names: tuple[str, ...], own_id: str | None) -> bool:
        if _GLOB & set(pattern):
            return any(fnmatch.fnmatchcase(n, pattern) for n in names)
        if pattern in self.ids:
            return pattern == own_id
        return pattern in names

    def check(self, selected: int) -> None:
        """After every operation was seen: refuse unknown names and an empty selection.

        Raises:
            ConfigError: located at the unknown name, or at `operations`.
        """
        for which, patterns, used in (
            ("include", self.include, self._used),
            ("exclude", self.exclude, self._exclude_used),
        ):
            for i, pattern in enumerate(patterns):
                if i in used or _GLOB & set(pattern):
                    continue
                raise ConfigError(
                    f"no operation of {self.label} is named {pattern!r}{self._hint(pattern)}",
                    field=f"operations.{which}[{i}]",
                )
        if selected:
            return
        hints = [h for p in self.include if (h := self._hint(p, listing=False))]
        listed = ", ".join(self.names[:_SHOWN]) or "none"
        more = len(self.names) - _SHOWN
        if more > 0:
            listed += f" and {more:,} more"
        raise ConfigError(
            f"no operation of {self.label} is selected (include {list(self.include)}, exclude "
            f"{list(self.exclude)}){''.join(hints)}; its operations are: {listed}",
            field="operations",
        )

    def _hint(self, pattern: str, *, listing: bool = True) -> str:
        plain = pattern.replace("*", "").replace("?", "")
        close = closest(plain, self._all_names, n=3) if plain else []
        if close:
            return f"; did you mean {' or '.join(repr(c) for c in close)}?"
        if not listing:
            return ""
        listed = ", ".join(self.names[:_SHOWN])
        more = len(self.names) - _SHOWN
        return f"; its operations are: {listed}" + (f" and {more:,} more" if more > 0 else "")
