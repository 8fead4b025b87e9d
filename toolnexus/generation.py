"""A Generation: one immutable build of a toolkit, and the options it was built from.

Below both `build` (which makes generations) and `toolkit` (which holds the current one and
swaps in the next): the data they share lives here so that neither imports the other.
Calls in flight finish on the generation they started on; its resources close once it is
retired and idle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import current_caller

if TYPE_CHECKING:
    from .approval import AccessRules, ApprovalPolicy, Approver
    from .base import Caller, Tool
    from .errors import ManifestIssue
    from .executor import Executor
    from .mcp.callbacks import ElicitationHandler, SamplingHandler
    from .middleware import Middleware
    from .registry import Registry
    from .search import ToolSearchSettings
    from .state import StateBackend

__all__ = ["Generation", "Source", "ToolkitOptions"]

Source = str | Path | Mapping[str, Any] | None
"""What `create_toolkit` builds from: a manifest path, YAML text, a mapping (a `Manifest` is
taken too), or None for a toolkit of `extra_tools` and `builtins` only."""


@dataclass(kw_only=True, eq=False)
class Generation:
    """One immutable build of a toolkit. Calls in flight finish on the generation they
    started on; its resources close once it is retired and idle."""

    number: int
    registry: Registry
    executor: Executor
    resources: AsyncExitStack = field(default_factory=AsyncExitStack)
    """Closes the generation's live resources (MCP sessions, the HTTP client), last first."""
    status: dict[str, Any] = field(default_factory=dict)
    """Per source (MCP server...) status, for `Toolkit.status()`."""
    files: tuple[Path, ...] = ()
    """Every file this generation was built from (manifests, OpenAPI specs, Python modules)."""
    hidden: frozenset[str] = frozenset()
    """Tools denied outright by the permissions: callable never, listed never."""
    name: str | None = None
    """The manifest's `name:` (None without one)."""
    carry: dict[str, Any] = field(default_factory=dict)
    """Resources the next generation may adopt (MCP sessions keyed by their configuration)."""
    tool_search: ToolSearchSettings | None = None
    """The toolkit-wide tool search settings (applied again when an MCP server's tools
    change)."""
    pending: tuple[ManifestIssue, ...] = ()
    """Rules and include entries that met no tool, where a tool an MCP server lists could
    still meet them: logged as warnings at build, errors for `validate --connect`."""
    access: AccessRules | None = None
    """The `access:` entries: which callers see and call which tools (None: everyone)."""
    inflight: int = 0
    retired: bool = False
    _idle: asyncio.Event | None = field(default=None, init=False, repr=False)

    def enter(self) -> None:
        self.inflight += 1

    def leave(self) -> None:
        self.inflight -= 1
        if self.inflight == 0 and self._idle is not None:
            self._idle.set()

    async def wait_idle(self) -> None:
        if self.inflight == 0:
            return
        self._idle = asyncio.Event()
        if self.inflight:
            await self._idle.wait()

    def tools(self) -> list[Tool]:
        """The tools the current caller may see (`current_caller()`; every one without)."""
        caller = current_caller() if self.access is not None else None
        if not self.hidden and caller is None:
            return list(self.registry.tools())
        return [
            t
            for t in self.registry.tools()
            if t.name not in self.hidden and (caller is None or self.refusal(t, caller) is None)
        ]

    def refusal(self, tool: Tool, caller: Caller | None) -> str | None:
        """Why `caller` may not see or call `tool` (for the log only), or None."""
        return None if self.access is None else self.access.refusal(tool, caller)

    def invisible(self, name: str) -> str | None:
        """Why the current caller may not use the tool called `name`, or None (it may, or
        there is no such tool)."""
        if self.access is None:
            return None
        tool = self.registry.get(name)
        return None if tool is None else self.access.refusal(tool, current_caller())


@dataclass(frozen=True, kw_only=True)
class ToolkitOptions:
    """Everything `create_toolkit` was given, kept so a reload can rebuild the same way."""

    source: Source = None
    extra_tools: tuple[Tool, ...] = ()
    middleware: tuple[Middleware, ...] = ()
    approver: Approver | None = None
    permissions: ApprovalPolicy | None = None
    builtins: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Builtin name (`"*"` for all) -> its options, from `builtins=` (see `builtin_options`)."""
    workspace: Path | None = None
    env: Mapping[str, str] | None = None
    tool_search: Any = None
    """`tool_search=` as given (True, a mapping like the manifest's block, or None)."""
    elicitation: ElicitationHandler | None = None
    """Answers MCP servers' `elicitation/create`; None: the capability is not declared."""
    sampling: SamplingHandler | None = None
    """Answers MCP servers' `sampling/createMessage`; None: the capability is not declared."""
    state: StateBackend | None = None
    """The state store every generation shares (rate limits, cache); None: in-process."""
