"""Which tools the `Name` of a permission string covers: our names, Claude Code's, MCP forms.

Rules are copied from Claude Code's settings, so its tool names mean here what they mean there
(`Bash(rm *)` is about the builtin `shell`; `Edit(...)` about every tool that edits files), and
its MCP forms (`mcp__server`, `mcp__server__tool`, `mcp__server__*`) name a server's tools by
the server and the tool's own name, whatever the toolkit calls them (a `.mcp.json` server's
tools keep their bare names; a manifest server may add a prefix). A rule that covered nothing
would be worse than no rule, so the builder checks every rule against the toolkit's tools.

Separate from `permissions` because it is the one place that decides what a name means; the
matching of a rule's specifier stays there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .paths import _glob_regex

if TYPE_CHECKING:
    from ..base import Tool

__all__ = [
    "CLAUDE_CODE_TOOLS",
    "MCP_PREFIX",
    "ToolName",
    "compile_tool_name",
    "mcp_names",
    "suggestions",
]

CLAUDE_CODE_TOOLS: Mapping[str, tuple[str, ...]] = {
    "Bash": ("shell",),
    "Read": ("read",),
    "Edit": ("edit", "write", "apply_patch"),
    "MultiEdit": ("edit",),
    "Write": ("write",),
    "Glob": ("glob",),
    "Grep": ("grep",),
    "WebFetch": ("fetch",),
}
"""Claude Code's tool name -> the builtin tools it stands for. Written as Claude Code writes
them (case matters: `edit` is our edit tool alone, `Edit` every tool that edits files, as
Claude Code's "Edit rules apply to all built-in tools that edit files"). `MultiEdit` is our
`edit`, which takes several edits at once."""

MCP_PREFIX = "mcp__"
_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolName:
    """The `Name` part of one permission string, compiled."""

    written: str
    glob: re.Pattern[str]
    """The name as a case-insensitive glob over tool names (our own names)."""
    builtins: frozenset[str] = frozenset()
    """The builtin tools a Claude Code name stands for."""
    mcp: bool = False
    """Written in Claude Code's MCP form: also matched against `mcp__SERVER[__TOOL]`."""

    def matches(self, tool: Tool) -> bool:
        """Whether the rule is about `tool`."""
        if tool.name in self.builtins or self.glob.fullmatch(tool.name):
            return True
        return self.mcp and any(self.glob.fullmatch(n) for n in mcp_names(tool))


def mcp_names(tool: Tool) -> tuple[str, ...]:
    """The names Claude Code's rules give an MCP tool: `mcp__SERVER` (every tool of it) and
    `mcp__SERVER__TOOL`, with the server's and the tool's names as written and as made valid
    tool names (Claude Code writes them the second way)."""
    meta = tool.meta
    server = meta.get("server")
    if tool.source != "mcp" or not isinstance(server, str):
        return ()
    from ..schema import sanitize_name

    own = meta.get("mcp_name")
    name = own if isinstance(own, str) else tool.name
    servers = dict.fromkeys((server, sanitize_name(server)))
    tools = dict.fromkeys((name, sanitize_name(name)))
    out = [f"{MCP_PREFIX}{s}" for s in servers]
    out += [f"{MCP_PREFIX}{s}__{t}" for s in servers for t in tools]
    return tuple(out)


def compile_tool_name(written: str, *, allow: bool, field: str) -> ToolName:
    """Compile a rule's `Name` (`read`, `mcp_time_*`, `Bash`, `mcp__github__*`).

    Raises:
        ConfigError: an allow rule in the MCP form whose server part is a glob: Claude Code
            requires the literal server (`mcp__<server>`) there, so copied settings that
            allowed nothing there must not allow every MCP tool here.
    """
    glob = re.compile(_glob_regex(written, segments=False), re.IGNORECASE)
    mcp = written.lower().startswith(MCP_PREFIX)
    if mcp and allow:
        server = written[len(MCP_PREFIX) :].split("__", 1)[0]
        if not server or _GLOB_CHARS.search(server):
            raise ConfigError(
                f"{written!r}: an allow rule for MCP tools names its server, as in Claude Code: "
                "write mcp__<server> (all its tools) or mcp__<server>__<tool> (a tool glob may "
                "follow the server); a glob over servers is for deny and ask",
                field=field,
            )
    return ToolName(
        written=written,
        glob=glob,
        builtins=frozenset(CLAUDE_CODE_TOOLS.get(written, ())),
        mcp=mcp,
    )


def suggestions(tools: Iterable[Tool]) -> list[str]:
    """What a rule could have named: the tools' names, the Claude Code names of the builtins
    present, and `mcp__SERVER` of each MCP server (for "did you mean")."""
    tools = list(tools)
    names = {t.name for t in tools}
    out = list(names)
    out += [cc for cc, ours in CLAUDE_CODE_TOOLS.items() if names.intersection(ours)]
    out += sorted({n for t in tools for n in mcp_names(t)})
    return out
