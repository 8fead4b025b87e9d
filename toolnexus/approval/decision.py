"""Decisions: allow | ask | deny, the `Verdict` that carries the rule behind one, combining them.

The executor asks every policy that applies (the toolkit-wide permissions, then the tool's own
rules) and keeps the strongest decision: deny beats ask beats allow (`combine_verdicts`). A
decision carries the rule that made it, so audit logs and approvers can show *why*. `ask` goes to
the `Approver`; with no approver configured it is refused (fail closed), and so is any policy or
approver that crashes.

Separate because these are the types every other part speaks: the executor, middleware and the
MCP server use them without needing the rule compilers.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..base import Tool

__all__ = [
    "ALLOW_BY_DEFAULT",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Approver",
    "Decision",
    "Verdict",
    "combine_verdicts",
]


class Decision(enum.StrEnum):
    """What to do with a call. Ordered by strength: ALLOW < ASK < DENY."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"

    @property
    def strength(self) -> int:
        return _STRENGTH[self]


_STRENGTH = {Decision.ALLOW: 0, Decision.ASK: 1, Decision.DENY: 2}


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """A decision and the rule that made it."""

    decision: Decision
    rule: str | None = None
    """The rule in its written form, e.g. `deny read(**/.env*)`; None for a default."""
    origin: str | None = None
    """Where the rule was written (`tools.yaml:14`), for audit logs and approval prompts."""
    reason: str = ""
    """A sentence for the model or the approver: why this decision."""
    matched: bool = True
    """False when no rule matched and this is the policy's default."""

    def describe(self) -> str:
        """`deny by rule 'read(**/.env*)' (tools.yaml:14)`-style text."""
        text = self.decision.value
        if self.rule:
            text += f" by rule {self.rule!r}"
        if self.origin:
            text += f" ({self.origin})"
        if self.reason:
            text += f": {self.reason}"
        return text


ALLOW_BY_DEFAULT = Verdict(decision=Decision.ALLOW, matched=False, reason="no rule applies")


class ApprovalPolicy(Protocol):
    """Anything that can decide on a call. Must be cheap and must not do I/O beyond `stat`."""

    def decide(self, tool: Tool, arguments: Mapping[str, Any], workspace: Path) -> Verdict: ...


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """What an approver is shown: the call and the rule that asked."""

    tool: Tool
    arguments: Mapping[str, Any]
    verdict: Verdict
    call_id: str


Approver = Callable[[ApprovalRequest], bool | Awaitable[bool]]
"""Says yes (True) or no (False) to a call a rule marked `ask`; sync or async."""


def combine_verdicts(verdicts: Sequence[Verdict]) -> Verdict:
    """The strongest matched verdict; if none matched, the last default (the most specific).

    Policies are passed general first (toolkit permissions) and specific last (the tool's own
    rules), so a tool's `default:` beats the toolkit's when no rule matched anywhere.
    """
    best: Verdict | None = None
    for verdict in verdicts:
        if verdict.matched and (best is None or verdict.decision.strength > best.decision.strength):
            best = verdict
    if best is not None:
        return best
    for verdict in reversed(verdicts):
        return verdict
    return ALLOW_BY_DEFAULT
