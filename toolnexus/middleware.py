"""Middleware: `async (call, next) -> Result`, composed so that the first is outermost."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .approval import Verdict
from .tool import Result, Tool, ToolContext

__all__ = ["Call", "Middleware", "Next"]


@dataclass(kw_only=True)
class Call:
    """One validated call on its way through the middleware chain."""

    tool: Tool
    arguments: dict[str, Any]
    ctx: ToolContext
    verdict: Verdict
    """The approval decision; a denied call still passes through (so audit sees it) and the
    innermost step returns the denial without running the tool."""
    attempt: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    """Scratch space for middleware to pass facts to each other."""

    @property
    def name(self) -> str:
        return self.tool.name


Next = Callable[[Call], Awaitable[Result]]
Middleware = Callable[[Call, Next], Awaitable[Result]]
