"""Tool names of `.mcp.json` servers that clash get namespaced per server: `mcp__SERVER__TOOL`.

A file in the `mcpServers` format (Claude Desktop, Claude Code, Cursor...) has no place for a
prefix, and two servers that both offer `echo` are normal there: the clients that read those
files namespace every MCP tool per server. A toolkit loads such a file as it is, so a name one
of its servers shares with another tool is namespaced the way those clients do it, and every
other name stays as the server gives it:

- only clashing names change, so a one-server file (the common case) keeps the names its
  server documents and prompts mention, and adding a second server renames only what clashes;
- every clashing copy from such a file is renamed, not just the later one, so the names do not
  depend on the order of the servers in the file; a tool declared in a toolnexus manifest keeps
  its name (it was written on purpose), and a clash between two such tools stays the located
  "defined twice" error;
- the bare name stays an alias for the toolkit's permission rules, as for include prefixes:
  `deny: [echo]` still holds for `mcp__a__echo` and `mcp__b__echo`.

A name longer than the providers' 64 characters keeps `mcp__`, at most 16 characters of the
server, as much of the tool as fits, and `_` plus 8 hex digits of a hash of both full names:
deterministic, and distinct for different servers or tools. The same hashed form is used when
`mcp__SERVER__TOOL` would still clash: two servers whose names differ only in characters that
become `_` (`my.srv`, `my_srv`), or a tool of another server already called that.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from ..base import Tool
from ..schema import sanitize_name

if TYPE_CHECKING:
    from ..manifest import ServerDecl

__all__ = ["mcp_json_servers", "namespace_clashes", "namespaced_name"]

PREFIX = "mcp__"
SEPARATOR = "__"
_MAX = 64
_SERVER_KEPT = 16
"""Characters of the server name kept when the whole name is too long."""
_HASH = 8
_FROM = "namespaced_from"
"""`Tool.meta` key: the name the tool had before it was namespaced."""


def namespaced_name(server: str, tool: str) -> str:
    """`mcp__SERVER__TOOL`, each part made a valid name, shortened to 64 characters with a
    hash when longer."""
    s = sanitize_name(server)
    t = sanitize_name(tool)
    full = f"{PREFIX}{s}{SEPARATOR}{t}"
    if len(full) <= _MAX:
        return full
    return _hashed(server, tool)


def _hashed(server: str, tool: str) -> str:
    """The 64-character form with a hash of both full names (see the module doc)."""
    s = sanitize_name(server)
    t = sanitize_name(tool)
    digest = hashlib.sha256(f"{server}\0{tool}".encode("utf-8", "surrogatepass")).hexdigest()
    head = s[:_SERVER_KEPT].rstrip("_-")
    room = _MAX - len(PREFIX) - len(head) - len(SEPARATOR) - 1 - _HASH
    return f"{PREFIX}{head}{SEPARATOR}{t[:room].rstrip('_-')}_{digest[:_HASH]}"


def mcp_json_servers(decls: Iterable[ServerDecl]) -> frozenset[str]:
    """The names of the servers declared in files in the `mcpServers` format."""
    return frozenset(d.name for d in decls if d.namespaced)


def namespace_clashes(tools: Iterable[Tool], servers: Collection[str]) -> list[Tool]:
    """`tools` with every name that a tool of one of `servers` (the `.mcp.json` ones) shares
    with another tool namespaced; names namespaced before are worked out afresh (a server's
    tool list may have changed since)."""
    bare = [_bare(t) for t in tools]
    if not servers:
        return bare
    counts = Counter(t.name for t in bare)
    out: list[Tool] = []
    for t in bare:
        server = t.meta.get("server")
        if counts[t.name] > 1 and t.source == "mcp" and server in servers:
            aliases = tuple(t.meta.get("aliases", ()))
            t = dataclasses.replace(
                t,
                name=namespaced_name(str(server), t.name),
                meta={**t.meta, _FROM: t.name, "aliases": (*aliases, t.name)},
            )
        out.append(t)
    final = Counter(t.name for t in out)
    return [_distinct(t) if final[t.name] > 1 and _FROM in t.meta else t for t in out]


def _distinct(t: Tool) -> Tool:
    """A namespaced tool whose `mcp__SERVER__TOOL` still clashes, under the hashed form."""
    return dataclasses.replace(t, name=_hashed(str(t.meta["server"]), t.meta[_FROM]))


def _bare(t: Tool) -> Tool:
    """The tool under the name it had before `namespace_clashes` renamed it."""
    name = t.meta.get(_FROM)
    if not isinstance(name, str):
        return t
    meta = {k: v for k, v in t.meta.items() if k != _FROM}
    aliases = tuple(a for a in meta.get("aliases", ()) if a != name)
    if aliases:
        meta["aliases"] = aliases
    else:
        meta.pop("aliases", None)
    return dataclasses.replace(t, name=name, meta=meta)
