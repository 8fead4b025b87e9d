"""One `mcp_servers:` entry, checked and frozen: `McpServerSpec`.

Hot reload keeps the session of a server whose spec compares equal, so a spec is a frozen
value holding everything that decides the connection (transport, command or URL, filters,
limits, auth) and nothing live. Parsing here reports each bad key with the server's name and a
suggestion; the connection itself is `server.McpServer`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .._suggest import did_you_mean
from ..errors import ConfigError, UsageError
from .auth import AuthSettings, parse_auth
from .callbacks import log_level_of

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_MESSAGE",
    "DEFAULT_MAX_OUTPUT",
    "McpServerSpec",
    "redact_url",
]

DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds a server gets to start, answer the handshake and list its tools."""
DEFAULT_MAX_OUTPUT = 30_000
"""Characters of a tool's answer the model sees (head and tail), as for shell and HTTP tools."""
DEFAULT_MAX_MESSAGE = 16 * 1024 * 1024
"""Bytes of one message read from a server; a longer answer is refused unread."""

_KEYS = (
    "type",
    "transport",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "prefix",
    "tools",
    "timeout",
    "connect_timeout",
    "max_output",
    "max_message",
    "required",
    "approval",
    "sandbox",
    "auth",
    "reset_timeout_on_progress",
    "max_total_timeout",
    "log_level",
)
_TYPES = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamableHttp": "http",
}


@dataclass(frozen=True, kw_only=True, repr=False)
class McpServerSpec:
    """One MCP server's configuration, validated. Two specs compare equal exactly when a
    running session of one can serve the other (hot reload keeps such sessions)."""

    name: str
    """The key under `mcp_servers:`; names the server in statuses, messages and `Tool.origin`."""
    command: str | None = None
    """stdio: the executable (found on PATH, or a path resolved against the manifest folder)."""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    """stdio: variables added to the child's minimal environment, sorted by name. Values may be
    secrets: `repr` shows names only."""
    cwd: Path | None = None
    """stdio: the child's working directory (default: the manifest's folder)."""
    url: str | None = None
    """streamable HTTP: the endpoint, e.g. `http://127.0.0.1:9000/mcp`."""
    headers: tuple[tuple[str, str], ...] = ()
    """HTTP: headers sent with every request, sorted by name (values hidden from `repr`)."""
    prefix: str = ""
    """Prepended to every tool name (before sanitizing)."""
    include: tuple[str, ...] = ()
    """Globs over the server's own tool names; empty keeps every tool."""
    exclude: tuple[str, ...] = ()
    """Globs over the server's own tool names; a match drops the tool."""
    timeout: float | None = None
    """Seconds per call; None leaves it to the call's deadline."""
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    max_output: int = DEFAULT_MAX_OUTPUT
    """Characters of a call's text the model sees; longer text keeps its head and tail."""
    max_message: int = DEFAULT_MAX_MESSAGE
    """Bytes of one message from the server; a call whose answer is longer fails unread."""
    required: bool = False
    """True: toolkit creation fails when this server does not connect."""
    auth: AuthSettings | None = None
    """HTTP: OAuth (`auth: oauth`, a stored user login) or client credentials."""
    reset_timeout_on_progress: bool = False
    """Each progress notification of a call restarts its `timeout` (the TypeScript SDK's
    `resetTimeoutOnProgress`); `max_total_timeout` and the call's deadline still bound it."""
    max_total_timeout: float | None = None
    """Seconds a call may take in all, however much progress it reports."""
    log_level: str | None = None
    """The lowest MCP log level the server should send (`logging/setLevel`); None: its own."""
    json_syntax: bool = field(default=False, compare=False)
    """Declared in a `.mcp.json` file (the `mcpServers` format): hints about the entry are
    written in JSON, not in the manifest's YAML."""

    @property
    def sends_token(self) -> bool:
        """An `Authorization` header is configured: a 401 means the token was refused."""
        return any(key.lower() == "authorization" for key, _ in self.headers)

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise UsageError(
                f"McpServerSpec {self.name!r} needs exactly one of `command` (stdio) and `url` "
                "(HTTP); McpServerSpec.from_mapping checks a manifest entry"
            )
        if self.auth is not None and self.url is None:
            raise UsageError(f"McpServerSpec {self.name!r}: `auth` needs an HTTP server (`url`)")

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def __repr__(self) -> str:
        shown = [f"name={self.name!r}"]
        if self.command is not None:
            shown += [f"command={self.command!r}", f"args={list(self.args)!r}"]
            if self.env:
                shown.append("env={" + ", ".join(f"{k!r}: '***'" for k, _ in self.env) + "}")
            if self.cwd is not None:
                shown.append(f"cwd={str(self.cwd)!r}")
        else:
            shown.append(f"url={redact_url(self.url or '')!r}")
            if self.headers:
                shown.append(
                    "headers={" + ", ".join(f"{k!r}: '***'" for k, _ in self.headers) + "}"
                )
        for key in ("prefix", "include", "exclude", "timeout"):
            value = getattr(self, key)
            if value:
                shown.append(f"{key}={value!r}")
        if self.connect_timeout != DEFAULT_CONNECT_TIMEOUT:
            shown.append(f"connect_timeout={self.connect_timeout!r}")
        if self.max_output != DEFAULT_MAX_OUTPUT:
            shown.append(f"max_output={self.max_output!r}")
        if self.max_message != DEFAULT_MAX_MESSAGE:
            shown.append(f"max_message={self.max_message!r}")
        if self.required:
            shown.append("required=True")
        if self.auth is not None:
            shown.append(f"auth={self.auth!r}")
        for key in ("reset_timeout_on_progress", "max_total_timeout", "log_level"):
            value = getattr(self, key)
            if value:
                shown.append(f"{key}={value!r}")
        return f"McpServerSpec({', '.join(shown)})"

    @classmethod
    def from_mapping(cls, name: str, spec: Mapping[str, Any], *, base_dir: Path) -> McpServerSpec:
        """Check one `mcp_servers:` entry (durations already in seconds, `${VAR}` expanded).

        Also accepts the `.mcp.json` shape (`type: stdio | http`). `approval` and `sandbox` are
        read by the toolkit builder; here a `sandbox` on an HTTP server is refused.

        Raises:
            ConfigError: a value is missing, unknown or of the wrong kind (`field` names it).
        """
        if not isinstance(spec, Mapping):
            raise ConfigError(
                f"expected a mapping with `command` (stdio) or `url` (HTTP), got {_kind(spec)}"
            )
        for key in spec:
            if key not in _KEYS:
                raise ConfigError(f"unknown key {key!r}{_did_you_mean(str(key), _KEYS)}", field=key)
        kind = _transport_type(spec)
        if kind == "stdio":
            if "url" in spec or "headers" in spec or "auth" in spec:
                bad = next(k for k in ("url", "headers", "auth") if k in spec)
                raise ConfigError(
                    f"`{bad}` belongs to HTTP servers; this entry runs `command` (stdio)", field=bad
                )
            command = spec.get("command")
            if not isinstance(command, str) or not command.strip():
                raise ConfigError(
                    f"expected the server's executable as a non-empty string, got {_kind(command)}",
                    field="command",
                )
            if "/" in command and not Path(command).expanduser().is_absolute():
                command = str(base_dir / command)
            cwd_value = spec.get("cwd")
            if cwd_value is not None and not isinstance(cwd_value, str | Path):
                raise ConfigError(f"expected a folder path, got {_kind(cwd_value)}", field="cwd")
            cwd = base_dir / Path(cwd_value).expanduser() if cwd_value is not None else base_dir
            stdio: dict[str, Any] = {
                "command": command,
                "args": _strings(spec.get("args", []), "args"),
                "env": _pairs(spec.get("env", {}), "env"),
                "cwd": cwd,
            }
        else:
            for bad in ("command", "args", "env", "cwd", "sandbox"):
                if bad in spec:
                    raise ConfigError(
                        f"`{bad}` belongs to stdio servers; this entry connects to `url` (HTTP)",
                        field=bad,
                    )
            stdio = {
                "url": _url(spec.get("url")),
                "headers": _pairs(spec.get("headers", {}), "headers"),
                "auth": parse_auth(spec.get("auth")),
            }
            if stdio["auth"] is not None and any(
                k.lower() == "authorization" for k, _ in stdio["headers"]
            ):
                raise ConfigError(
                    "give either `auth:` or an Authorization header, not both", field="auth"
                )
        prefix = spec.get("prefix", "")
        if not isinstance(prefix, str):
            raise ConfigError(f"expected a string, got {_kind(prefix)}", field="prefix")
        include, exclude = _filters(spec.get("tools"))
        timeout = spec.get("timeout")
        required = spec.get("required", False)
        if not isinstance(required, bool):
            raise ConfigError(f"expected true or false, got {_kind(required)}", field="required")
        reset = spec.get("reset_timeout_on_progress", False)
        if not isinstance(reset, bool):
            raise ConfigError(
                f"expected true or false, got {_kind(reset)}", field="reset_timeout_on_progress"
            )
        max_total = spec.get("max_total_timeout")
        log_level = spec.get("log_level")
        return cls(
            name=name,
            prefix=prefix,
            include=include,
            exclude=exclude,
            timeout=None if timeout is None else _seconds(timeout, "timeout"),
            connect_timeout=_seconds(
                spec.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT), "connect_timeout"
            ),
            max_output=_size(spec.get("max_output", DEFAULT_MAX_OUTPUT), "max_output"),
            max_message=_size(spec.get("max_message", DEFAULT_MAX_MESSAGE), "max_message"),
            required=required,
            reset_timeout_on_progress=reset,
            max_total_timeout=(
                None if max_total is None else _seconds(max_total, "max_total_timeout")
            ),
            log_level=None if log_level is None else log_level_of(log_level),
            **stdio,
        )


def _kind(value: object) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"[:80]


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    return did_you_mean(word, choices) or f"; expected one of {', '.join(choices)}"


def _transport_type(spec: Mapping[str, Any]) -> Literal["stdio", "http"]:
    # `type` is how .mcp.json files say it; the manifest loader normalises it to `transport`.
    key = "transport" if spec.get("transport") is not None else "type"
    declared = spec.get(key)
    both = spec.get("type") is not None and spec.get("transport") is not None
    if both and _TYPES.get(spec["type"]) != _TYPES.get(spec["transport"], spec["transport"]):
        raise ConfigError(
            f"`type: {spec['type']}` and `transport: {spec['transport']}` disagree; give one",
            field="transport",
        )
    if declared is not None:
        if declared == "sse":
            raise ConfigError(
                "the SSE transport is not supported; use the server's streamable HTTP endpoint "
                "(`url:` ending in /mcp) or run it over stdio (`command:`)",
                field=key,
            )
        if declared not in _TYPES:
            raise ConfigError(
                f"unknown transport {declared!r}{_did_you_mean(str(declared), _TYPES)}",
                field=key,
            )
        kind = _TYPES[declared]
        wanted = "command" if kind == "stdio" else "url"
        if wanted not in spec:
            raise ConfigError(f"`{key}: {declared}` needs `{wanted}`", field=wanted)
        return "stdio" if kind == "stdio" else "http"
    if "command" in spec and "url" in spec:
        raise ConfigError(
            "give either `command` (a stdio server) or `url` (an HTTP server), not both",
            field="url",
        )
    if "command" in spec:
        return "stdio"
    if "url" in spec:
        return "http"
    raise ConfigError(
        "expected `command` (a stdio server to start) or `url` (a streamable HTTP endpoint)",
        field="command",
    )


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise ConfigError(f"expected a list of strings, got {_kind(value)}", field=where)
    out: list[str] = []
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise ConfigError(f"expected a string, got {_kind(item)}", field=f"{where}[{i}]")
        out.append(str(item))
    return tuple(out)


def _pairs(value: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"expected a mapping of names to strings, got {_kind(value)}", field=where
        )
    out: list[tuple[str, str]] = []
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"expected a non-empty name, got {_kind(key)}", field=where)
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            # Never echo the value: it is often a token.
            raise ConfigError(
                f"expected a string value, got {type(item).__name__}", field=f"{where}.{key}"
            )
        out.append((key, str(item)))
    return tuple(sorted(out))


def _url(value: object) -> str:
    from urllib.parse import urlsplit

    if not isinstance(value, str) or not value:
        raise ConfigError(f"expected an http(s) URL, got {_kind(value)}", field="url")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"expected an http:// or https:// URL with a host, got {redact_url(value)!r}",
            field="url",
        )
    return value


def redact_url(url: str) -> str:
    """The URL without its userinfo (`user:token@`), which is a secret."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


def _filters(value: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if value is None:
        return (), ()
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"expected {{include: [globs], exclude: [globs]}}, got {_kind(value)}", field="tools"
        )
    for key in value:
        if key not in ("include", "exclude"):
            raise ConfigError(
                f"unknown key {key!r}{_did_you_mean(str(key), ('include', 'exclude'))}",
                field=f"tools.{key}",
            )
    globs: list[tuple[str, ...]] = []
    for key in ("include", "exclude"):
        item = value.get(key, [])
        if isinstance(item, str):
            item = [item]
        if not isinstance(item, list | tuple) or not all(isinstance(g, str) and g for g in item):
            raise ConfigError(
                f"expected a list of glob strings, got {_kind(item)}", field=f"tools.{key}"
            )
        globs.append(tuple(item))
    return globs[0], globs[1]


def _seconds(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"expected a number of seconds, got {_kind(value)}", field=where)
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"expected a positive number of seconds, got {value!r}", field=where)
    return float(value)


def _size(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(
            f"expected a positive whole number (or a size such as 16MB), got {_kind(value)}",
            field=where,
        )
    return value


