"""Prometheus metrics of a served toolkit, at `GET /metrics` of `toolnexus serve --http`.

The exporter is `prometheus_client` (the `metrics` extra), imported only when an HTTP app is
built, never by `import toolnexus`. Each app has its own `CollectorRegistry`, not the process's
global one: several apps in one process (tests, an application mounting two) would otherwise
register the same metric names twice, which `prometheus_client` refuses.

The `tool` label is the name of a tool the toolkit has, or `(unknown)`: the name comes from the
client, and one label value per name a client can invent would grow without bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ..base import Result
    from ..toolkit import Toolkit

__all__ = ["INSTALL_HINT", "METRICS_PATH", "Metrics", "answer_label", "outcome"]

METRICS_PATH: Final = "/metrics"
"""Where the exposition is served (the same authentication as `/mcp`, unless made public)."""
INSTALL_HINT: Final = 'metrics need prometheus_client: pip install "toolnexus[metrics]"'
UNKNOWN_TOOL: Final = "(unknown)"

_OUTCOMES: Final = {
    # the executor's error types (`Result.metadata["error_type"]`) -> outcome label
    "ApprovalDenied": "denied",
    "ToolTimeout": "timeout",
    "InvalidArguments": "invalid",
    "ToolNotFound": "invalid",
}


def outcome(result: Result) -> str:
    """`ok`, `denied`, `timeout`, `invalid` (bad arguments, unknown tool) or `error`."""
    if not result.is_error:
        return "ok"
    return _OUTCOMES.get(str(result.metadata.get("error_type", "")), "error")


def answer_label(action: str, content: dict[str, Any] | None) -> str:
    """How the user answered an approval question: `approved`, `declined` (decline, or accept
    with approve: false), `cancelled` (dismissed), or `invalid` (accept without an approval)."""
    if action == "decline":
        return "declined"
    if action == "cancel":
        return "cancelled"
    approve = (content or {}).get("approve")
    if approve is True:
        return "approved"
    return "declined" if approve is False else "invalid"


@dataclass
class Metrics:
    """The counters and the histogram of one app, in its own registry."""

    registry: Any
    calls: Any
    duration: Any
    asked: Any
    answered: Any
    denials: Any

    @classmethod
    def create(cls) -> Metrics | None:
        """A fresh set, or None when `prometheus_client` is not installed (then `/metrics`
        answers 501 with `INSTALL_HINT`, and serving works as before)."""
        try:
            from prometheus_client import CollectorRegistry, Counter, Histogram
        except ImportError:
            return None
        registry = CollectorRegistry(auto_describe=True)
        return cls(
            registry=registry,
            calls=Counter(
                "toolnexus_calls",
                "Tool calls answered, by tool and outcome (ok, error, denied, timeout, invalid).",
                ["tool", "outcome"],
                registry=registry,
            ),
            duration=Histogram(
                "toolnexus_call_duration_seconds",
                "Time from a tools/call request to its answer, approval included.",
                ["tool"],
                registry=registry,
            ),
            asked=Counter(
                "toolnexus_approvals_asked",
                "Approval questions put to the client's user.",
                ["tool"],
                registry=registry,
            ),
            answered=Counter(
                "toolnexus_approvals_answered",
                "Approval questions answered (approved, declined, cancelled, invalid, timeout).",
                ["tool", "answer"],
                registry=registry,
            ),
            denials=Counter(
                "toolnexus_denials",
                "Calls refused: a deny rule, a declined or impossible approval.",
                ["tool"],
                registry=registry,
            ),
        )

    def call(self, tool: str, result_outcome: str, seconds: float) -> None:
        self.calls.labels(tool, result_outcome).inc()
        self.duration.labels(tool).observe(seconds)
        if result_outcome == "denied":
            self.denials.labels(tool).inc()

    def render(self) -> tuple[bytes, str]:
        """The exposition in the text format, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def tool_label(toolkit: Toolkit, name: str) -> str:
    """`name` if the toolkit has that tool, else `UNKNOWN_TOOL` (see the module docstring)."""
    return name if toolkit.get(name) is not None else UNKNOWN_TOOL
