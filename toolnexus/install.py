"""`toolnexus install`: write the MCP server entry of a manifest into an MCP client's config.

Each client keeps its servers in a file of its own shape (checked against each client's
documentation, December 2026):

- Claude Code: project `.mcp.json`, `mcpServers`; HTTP: `type: http`, `url`, `headers` with
  `${VAR}`.
- Claude Desktop: `claude_desktop_config.json`, `mcpServers`; stdio only (Anthropic: remote
  servers are added under Settings > Connectors, not in this file).
- Cursor: `~/.cursor/mcp.json` or `.cursor/mcp.json`, `mcpServers`; HTTP: `url`, `headers` with
  `${env:VAR}`.
- VS Code: `.vscode/mcp.json`, `servers`, `type: stdio | http`; headers with `${env:VAR}`.
- Codex: `~/.codex/config.toml` (`$CODEX_HOME`) or `.codex/config.toml`, `[mcp_servers.NAME]`
  with `command`, `args`; HTTP: `url`, `bearer_token_env_var`.

Why the edit is careful: these files are the user's, full of other servers and settings. Only
the one entry changes; every other key keeps its value and its order (JSON), and every comment,
table and layout survives (TOML, through `tomlkit`, a style-preserving TOML writer: a textual
edit of one table would have to re-implement TOML's quoting of keys, dotted keys, inline tables
and multi-line strings to find where a table ends). The new text is parsed back before it is
written, an existing file is copied to a timestamped backup first, and the write is a temporary
file renamed over the old one, with its mode kept, so a crash leaves the old file or the new one.

A secret is never written: a bearer token is referred to by the name of an environment variable
(`--token-env`), in the client's own syntax for it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .errors import InstallError

__all__ = ["CLIENTS", "Change", "InstallRequest", "install"]

CLIENTS = ("claude-code", "claude-desktop", "cursor", "vscode", "codex")
"""The clients `install` knows, as named on the command line."""

_NAME = re.compile(r"[A-Za-z0-9_-]+")
_ENV_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

JSON = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class InstallRequest:
    """What `toolnexus install` was asked for (the parsed command line)."""

    client: str
    manifest: Path
    http: str | None = None
    token_env: str | None = None
    name: str | None = None
    config: Path | None = None
    project: bool = False
    force: bool = False
    dry_run: bool = False


@dataclass(frozen=True, kw_only=True)
class Change:
    """What `install` did (or, with `dry_run`, would do) to one config file."""

    file: Path
    name: str
    entry: JSON
    action: str
    """`added` or `replaced`."""
    created: bool
    """The file did not exist before."""
    backup: Path | None
    dry_run: bool
    shown: str
    """The entry as it reads in the file (JSON, or the TOML table for Codex)."""

    def describe(self) -> str:
        """The lines `toolnexus install` prints: the file, the entry, and what happened."""
        verb = f"would be {self.action}" if self.dry_run else self.action
        lines = [
            f"{self.file}: server {self.name!r} {verb}" + (" (new file)" if self.created else "")
        ]
        lines += ["  " + line for line in self.shown.splitlines()]
        if self.backup is not None:
            lines.append(f"backup: {self.backup}")
        if self.dry_run:
            lines.append("dry run: nothing written")
        return "\n".join(lines) + "\n"


def install(
    request: InstallRequest, *, home: Path | None = None, cwd: Path | None = None
) -> Change:
    """Add (or with `force`, replace) the manifest's server entry in the client's config file.

    The manifest must already have been checked (the CLI runs `validate`'s check first).

    Raises:
        InstallError: the entry exists without `force`, the file does not parse, or an option
            does not fit the client (`usage`).
    """
    if request.client not in CLIENTS:
        raise InstallError(
            f"unknown client {request.client!r}",
            hint=f"Choose one of: {', '.join(CLIENTS)}.",
            usage=True,
        )
    home = home or Path.home()
    cwd = cwd or Path.cwd()
    name = _server_name(request)
    entry = _entry(request)
    path = _config_path(request, home, cwd)
    target = path.resolve() if path.is_symlink() else path  # keep a dotfile symlink a symlink
    try:
        old = target.read_text(encoding="utf-8") if target.exists() else None
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(f"{path}: cannot read it ({exc}); left unchanged") from None
    editor = _edit_toml if request.client == "codex" else _edit_json
    text, replaced = editor(request, path, old, name, entry)
    backup = None
    if not request.dry_run:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if old is not None:
                backup = _backup(target)
            _write_atomically(target, text)
        except OSError as exc:
            raise InstallError(f"{path}: cannot write it ({exc})") from None
    return Change(
        file=path,
        name=name,
        entry=entry,
        action="replaced" if replaced else "added",
        created=old is None,
        backup=backup,
        dry_run=request.dry_run,
        shown=_toml_table(name, entry)
        if request.client == "codex"
        else json.dumps(entry, indent=2),
    )


# -- what to write ---------------------------------------------------------------------------------


def _server_name(request: InstallRequest) -> str:
    """`--name`, else the manifest's `name:`, else its file's stem, sanitised."""
    if request.name is not None:
        if not _NAME.fullmatch(request.name):
            raise InstallError(
                f"server name {request.name!r} has characters clients do not all accept",
                hint=f"Use letters, digits, '-' and '_', e.g. --name {_sanitise(request.name)}.",
                usage=True,
            )
        return request.name
    declared = _declared_name(request.manifest)
    return _sanitise(declared or request.manifest.stem)


def _declared_name(manifest: Path) -> str | None:
    from .manifest import load_manifest

    name = getattr(load_manifest(manifest), "name", None)
    return name if isinstance(name, str) and name.strip() else None


def _sanitise(text: str) -> str:
    """Letters, digits, `-` and `_`: a name every client takes as a key (and Claude Code in
    `mcp__NAME__tool` permission rules)."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-_")
    return cleaned or "toolnexus"


def _entry(request: InstallRequest) -> JSON:
    """The server entry in the client's shape: stdio runs this interpreter (so the client finds
    the same install of toolnexus, venv included: the path is made absolute, not resolved, as a
    venv's python is a symlink whose target lacks the venv), HTTP points at `--http`."""
    client = request.client
    if request.token_env is not None:
        if request.http is None:
            raise InstallError(
                "--token-env goes with --http", hint="Give the server's URL.", usage=True
            )
        if not _ENV_VAR.fullmatch(request.token_env):
            raise InstallError(
                f"--token-env {request.token_env!r} is not an environment variable name",
                hint="Name the variable holding the token (e.g. TOOLNEXUS_TOKEN), not the token.",
                usage=True,
            )
    if request.http is None:
        command = os.path.abspath(sys.executable)
        args = ["-m", "toolnexus", "serve", str(request.manifest.resolve())]
        stdio: JSON = {"command": command, "args": args}
        return {"type": "stdio", **stdio} if client == "vscode" else stdio
    url = request.http
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InstallError(
            f"--http {url!r} is not an http(s) URL",
            hint="Give the served endpoint, e.g. https://tools.example.com/mcp.",
            usage=True,
        )
    var = request.token_env
    if client == "claude-desktop":
        raise InstallError(
            "Claude Desktop does not connect to remote servers written in "
            "claude_desktop_config.json",
            hint=f"Add {url} in Claude Desktop under Settings > Connectors, or install the stdio "
            "entry (without --http).",
            usage=True,
        )
    if client == "codex":
        return {"url": url, **({"bearer_token_env_var": var} if var else {})}
    reference = {"claude-code": "${%s}", "cursor": "${env:%s}", "vscode": "${env:%s}"}[client]
    headers = {"headers": {"Authorization": "Bearer " + reference % var}} if var else {}
    kind = {} if client == "cursor" else {"type": "http"}
    return {**kind, "url": url, **headers}


def _config_path(request: InstallRequest, home: Path, cwd: Path) -> Path:
    """`--config`, else where the client reads it (project files in the current folder)."""
    client = request.client
    if request.project and client not in ("cursor", "codex"):
        raise InstallError(
            f"--project applies to cursor and codex; {client} has one config file",
            hint="Drop --project (or give --config PATH).",
            usage=True,
        )
    if request.config is not None:
        return request.config.absolute()
    if client == "claude-code":
        return cwd / ".mcp.json"
    if client == "vscode":
        return cwd / ".vscode" / "mcp.json"
    if client == "cursor":
        return (cwd if request.project else home) / ".cursor" / "mcp.json"
    if client == "codex":
        if request.project:
            return cwd / ".codex" / "config.toml"
        codex_home = os.environ.get("CODEX_HOME")
        return (Path(codex_home) if codex_home else home / ".codex") / "config.toml"
    folder = "Library/Application Support/Claude" if sys.platform == "darwin" else ".config/Claude"
    if sys.platform == "win32":
        appdata = os.environ.get("APPDATA")
        return (
            Path(appdata or home / "AppData" / "Roaming") / "Claude" / "claude_desktop_config.json"
        )
    return home / folder / "claude_desktop_config.json"


# -- editing the files ---------------------------------------------------------------------------


def _refuse_existing(path: Path, key: str, name: str) -> InstallError:
    return InstallError(
        f"{path}: {key} already has a server named {name!r}",
        hint="Pass --force to replace it (the old file is backed up), or --name to add another.",
    )


def _edit_json(
    request: InstallRequest, path: Path, old: str | None, name: str, entry: JSON
) -> tuple[str, bool]:
    key = "servers" if request.client == "vscode" else "mcpServers"
    data: Any = {}
    if old is not None and old.strip():
        try:
            data = json.loads(old)
        except json.JSONDecodeError as exc:
            raise InstallError(
                f"{path}:{exc.lineno}:{exc.colno}: not plain JSON ({exc.msg}); left unchanged",
                hint="Fix the file (comments and trailing commas are not rewritten), or "
                "give another file with --config.",
            ) from None
    if not isinstance(data, dict):
        raise InstallError(f"{path}: the top level is not a JSON object; left unchanged")
    servers = data.setdefault(key, {})
    if not isinstance(servers, dict):
        raise InstallError(f"{path}: {key} is not a JSON object; left unchanged")
    replaced = name in servers
    if replaced and not request.force:
        raise _refuse_existing(path, key, name)
    servers[name] = entry  # an existing key keeps its place; a new one goes last
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n", replaced


def _edit_toml(
    request: InstallRequest, path: Path, old: str | None, name: str, entry: JSON
) -> tuple[str, bool]:
    import tomllib

    try:
        import tomlkit
        from tomlkit.exceptions import TOMLKitError
        from tomlkit.items import InlineTable, Table
    except ImportError:
        raise InstallError(
            "writing Codex's config.toml needs tomlkit",
            hint="pip install 'toolnexus[install]'",
        ) from None
    try:
        doc = tomlkit.parse(old or "")
        before = tomllib.loads(old or "")
    except (TOMLKitError, tomllib.TOMLDecodeError) as exc:
        raise InstallError(f"{path}: not valid TOML ({exc}); left unchanged") from None
    servers = doc.get("mcp_servers")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc["mcp_servers"] = servers
    if not isinstance(servers, Table | InlineTable):
        raise InstallError(f"{path}: mcp_servers is not a table; left unchanged")
    replaced = name in servers
    if replaced and not request.force:
        raise _refuse_existing(path, "mcp_servers", name)
    if isinstance(servers, InlineTable):
        item: Any = tomlkit.inline_table()
        item.update(entry)
    else:
        item = tomlkit.table()
        item.update(entry)
        item.add(tomlkit.nl())
    if replaced:
        del servers[name]
    servers[name] = item
    text = tomlkit.dumps(doc)
    if not (old or "").strip():
        text = text.lstrip("\n")  # a new file starts with its table, not a blank line
    _check_toml(path, text, before, name, entry)
    return text, replaced


def _toml_table(name: str, entry: JSON) -> str:
    """The entry as its own `[mcp_servers.NAME]` table (what to paste, if need be)."""
    import tomlkit

    servers = tomlkit.table(is_super_table=True)
    servers[name] = entry
    return tomlkit.dumps({"mcp_servers": servers}).strip("\n")


def _check_toml(path: Path, text: str, before: JSON, name: str, entry: JSON) -> None:
    """Parse the new text with the standard reader: the entry reads back as written and nothing
    else changed, or nothing is written."""
    import tomllib

    after = tomllib.loads(text)
    expected = dict(before)
    expected["mcp_servers"] = {**before.get("mcp_servers", {}), name: entry}
    if after != expected:
        raise InstallError(
            f"{path}: could not add mcp_servers.{name} without changing other settings; "
            "left unchanged",
            hint="Add the entry by hand (`toolnexus install --dry-run` prints it).",
        )


def _backup(path: Path) -> Path:
    """Copy `path` beside itself as `NAME.YYYYmmdd-HHMMSS.bak` (never over an older backup)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.{stamp}.bak")
    n = 1
    while backup.exists():
        backup = path.with_name(f"{path.name}.{stamp}-{n}.bak")
        n += 1
    _write_atomically(backup, path.read_text(encoding="utf-8"), mode_from=path)
    return backup


def _write_atomically(path: Path, text: str, *, mode_from: Path | None = None) -> None:
    """Write a temporary file beside `path`, then rename it over: a reader (the client) sees the
    old file or the new one, never half of one. The mode is the old file's (a config holding
    tokens stays private), or the umask's default for a new file."""
    source = mode_from or path
    mode = source.stat().st_mode & 0o7777 if source.exists() else _default_mode()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
