"""MCP servers as a tool source: one live `McpServer` per `mcp_servers:` entry.

Each entry becomes a checked `McpServerSpec` with its effective sandbox; an entry whose spec and
sandbox are unchanged since the previous generation adopts that generation's running server
instead of starting another (hot reload keeps sessions), unless it had failed. The connection
itself is `toolnexus.mcp`; the servers' tools get the manifest's approval, middleware and
include chain in `build`, as every source's tools do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._attach import Issues, effective_sandbox
from ..approval import compile_rules
from ..errors import ConfigError
from ..mcp.server import McpServer, McpServerState
from ..mcp.spec import McpServerSpec

if TYPE_CHECKING:
    from ..manifest import ServerDecl
    from ..mcp.callbacks import McpHandlers
    from ..mcp.tokens import LoginStore

__all__ = ["open_servers"]


def open_servers(
    decls: Sequence[ServerDecl],
    *,
    workspace: Path,
    protected: Sequence[str],
    previous: Mapping[Any, McpServer],
    servers: dict[Any, McpServer],
    server_decls: dict[Any, ServerDecl],
    fresh: list[McpServer],
    adopted: set[Any],
    issues: Issues,
    on_tools_changed: Callable[[McpServer], Awaitable[None]] | None,
    handlers: McpHandlers | None,
    roots: Sequence[Path],
    logins: LoginStore | None = None,
) -> None:
    """Fill `servers` and `server_decls` (keyed by spec and sandbox) with a server for each
    entry of `decls`: adopted from `previous` (its key added to `adopted`) or made anew and not
    yet connected (added to `fresh`, which the caller closes should the build fail). A bad
    entry is added to `issues` and skipped.
    """
    for decl in decls:
        try:
            entry = decl.spec
            if "timeout" not in entry and decl.defaults.timeout is not None:
                entry = {**entry, "timeout": decl.defaults.timeout}  # per call, like other tools
            if "max_output" not in entry and decl.defaults.max_output is not None:
                entry = {**entry, "max_output": decl.defaults.max_output}
            # The toolkit's, not MCP's: a change of curation alone keeps the session.
            entry = {k: v for k, v in entry.items() if k not in ("defer", "arguments")}
            spec = McpServerSpec.from_mapping(decl.name, entry, base_dir=decl.base_dir)
            if decl.namespaced:
                spec = dataclasses.replace(spec, json_syntax=True)
            stdio = "command" in decl.spec
            sandbox = effective_sandbox(
                decl.defaults.sandbox if stdio else None,
                decl.spec.get("sandbox"),
                decl.base_dir,
                protected,
            )
            if sandbox is not None:
                sandbox.check_process()
            # The approval rules are compiled now so that a bad rule is reported at load.
            if decl.spec.get("approval") is not None:
                compile_rules(decl.spec["approval"], locate=lambda f: None)
        except ConfigError as exc:
            issues.add(decl, exc)
            continue
        # SandboxPolicy holds a dict (env_set): its repr is the hashable identity.
        key = (spec, repr(sandbox))
        server_decls[key] = decl
        server = previous.get(key)
        if server is not None and server.status.state is McpServerState.FAILED:
            # Its spec is unchanged but what stopped it may not be (a login made since, a
            # server back up): a failed server is connected afresh, not carried over.
            server = None
        if server is not None:
            adopted.add(key)
        else:
            server = McpServer(
                spec,
                sandbox=sandbox,
                workspace=workspace,
                on_tools_changed=on_tools_changed,
                handlers=handlers,
                roots=roots,
                logins=logins,
            )
            fresh.append(server)
        servers[key] = server
