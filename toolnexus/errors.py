"""Every exception toolnexus raises, in one place.

```
ToolnexusError
 ├── ManifestError            a manifest (or include) cannot be loaded; carries every problem found
 │    ├── ManifestSyntaxError       the YAML/JSON itself does not parse
 │    ├── ManifestSchemaError       a field is unknown, missing or of the wrong kind
 │    ├── ManifestEnvError          `${VAR}` is unset (secrets never appear in the message)
 │    ├── ManifestImportError       a `python:`/middleware `module:attr` does not import
 │    ├── IncludeError              include cycle, missing include, loosening an included rule
 │    └── DuplicateToolError        two tools (maybe from different files) share a name
 ├── ToolError                a failure meant for the model: raised by tools, read by the model
 │    ├── ToolNotFound
 │    ├── InvalidArguments
 │    ├── ApprovalDenied
 │    ├── PathRefused         a file tool's path is outside the workspace or denied
 │    └── ToolTimeout
 ├── ConfigError              a tool or server configuration value is invalid (`field`)
 ├── SourceError              a tool source (MCP server, HTTP endpoint, OpenAPI file) failed
 ├── SandboxUnavailable       a sandbox was asked for and cannot be enforced here
 ├── InstallError             `toolnexus install` cannot write a client's config (names file, entry)
 ├── StateUnavailable         the shared state store (Redis) cannot be reached
 └── UsageError               a programmer mistake (wrong call, closed toolkit, bad name)
      └── StrictSchemaError     a schema OpenAI's strict mode cannot express
```

`ToolError` messages are written for a model: they say what went wrong and what to do next.
Everything else is written for the developer who configured the toolkit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ApprovalDenied",
    "ConfigError",
    "DuplicateToolError",
    "IncludeError",
    "InstallError",
    "InvalidArguments",
    "ManifestEnvError",
    "ManifestError",
    "ManifestImportError",
    "ManifestIssue",
    "ManifestSchemaError",
    "ManifestSyntaxError",
    "PathRefused",
    "SandboxUnavailable",
    "SourceError",
    "StateUnavailable",
    "StrictSchemaError",
    "ToolError",
    "ToolNotFound",
    "ToolTimeout",
    "ToolnexusError",
    "UsageError",
]


class ToolnexusError(Exception):
    """Base class of every error raised by toolnexus."""


@dataclass(frozen=True, kw_only=True)
class ManifestIssue:
    """One problem found in a manifest, located precisely enough to jump to it."""

    message: str
    """What is wrong and what was expected (never contains a secret's value)."""
    file: str | None = None
    """The manifest file, as given or resolved; None for a manifest built from a mapping."""
    line: int | None = None
    """1-based line of the offending node."""
    column: int | None = None
    """1-based column of the offending node."""
    field: str = ""
    """Dotted path of the field, e.g. `tools[2].command` or `mcp_servers.time.timeout`."""
    kind: str = "schema"
    """Which `ManifestError` subclass this issue belongs to: syntax, schema, env, import,
    include or duplicate."""

    def location(self) -> str:
        """`file:line:col` (as much of it as is known)."""
        parts = [self.file or "<manifest>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def __str__(self) -> str:
        where = self.location()
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class ManifestError(ToolnexusError):
    """A manifest cannot be loaded. `issues` lists every problem found, not just the first."""

    def __init__(self, issues: Sequence[ManifestIssue] | str) -> None:
        if isinstance(issues, str):
            issues = [ManifestIssue(message=issues)]
        self.issues: tuple[ManifestIssue, ...] = tuple(issues)
        super().__init__(self._render())

    def _render(self) -> str:
        if len(self.issues) == 1:
            return str(self.issues[0])
        lines = [f"{len(self.issues)} problems in manifest:"]
        lines += [f"  {issue}" for issue in self.issues]
        return "\n".join(lines)

    @property
    def file(self) -> str | None:
        return self.issues[0].file if self.issues else None

    @property
    def line(self) -> int | None:
        return self.issues[0].line if self.issues else None

    @property
    def column(self) -> int | None:
        return self.issues[0].column if self.issues else None

    @property
    def field(self) -> str:
        return self.issues[0].field if self.issues else ""


class ManifestSyntaxError(ManifestError):
    """The file is not valid YAML (or JSON for `.mcp.json`)."""


class ManifestSchemaError(ManifestError):
    """A field is unknown, missing, or holds a value of the wrong kind."""


class ManifestEnvError(ManifestError):
    """`${VAR}` names an unset variable and gives no default."""


class ManifestImportError(ManifestError):
    """A `module:attr` reference (python tool, middleware factory) cannot be imported."""


class IncludeError(ManifestError):
    """An include is missing, cyclic, or tries to loosen the rules of its includer."""


class DuplicateToolError(ManifestError):
    """Two tools share a name; the message names both origins."""


def manifest_error(issues: Sequence[ManifestIssue]) -> ManifestError:
    """The most specific `ManifestError` for a batch of issues (all of one kind, or the base)."""
    kinds = {issue.kind for issue in issues}
    cls: type[ManifestError] = ManifestError
    if len(kinds) == 1:
        cls = _KIND_TO_CLASS.get(next(iter(kinds)), ManifestError)
    return cls(issues)


_KIND_TO_CLASS: dict[str, type[ManifestError]] = {
    "syntax": ManifestSyntaxError,
    "schema": ManifestSchemaError,
    "env": ManifestEnvError,
    "import": ManifestImportError,
    "include": IncludeError,
    "duplicate": DuplicateToolError,
}


class ToolError(ToolnexusError):
    """A failure meant for the model to read and recover from.

    Tools raise it (or a subclass) when the model should see the message as is. `retryable`
    tells the `retry` middleware that trying again may succeed (a flaky upstream, a rate limit).
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


class ToolNotFound(ToolError):
    """The model asked for a tool that does not exist (the message lists close names)."""


class InvalidArguments(ToolError):
    """The arguments do not decode or do not match the tool's schema.

    `problems` holds `(json_path, message)` pairs, one per violation.
    """

    def __init__(self, message: str, problems: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


class ApprovalDenied(ToolError):
    """The call was denied by a rule, by the approver, or because nobody could approve it."""


class PathRefused(ToolError):
    """A file tool was asked for a path the workspace confinement or the sandbox policy refuses."""


class ToolTimeout(ToolError):
    """The call ran past its deadline and was cancelled."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


class ConfigError(ToolnexusError, ValueError):
    """A configuration value (a tool entry, a server entry, a sandbox or approval block) is bad.

    Raised by the builders in `sources/`, `approval.py` and `sandbox.py`; the manifest loader
    turns it into a `ManifestSchemaError` located at `field` (relative to the entry it checked).
    """

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.message = message
        self.field = field


class SourceError(ToolnexusError):
    """A tool source failed: an MCP server did not start, an OpenAPI file did not parse..."""


class SandboxUnavailable(ToolnexusError):
    """A sandbox was required but no mechanism can enforce it here; the message says how to fix."""


class InstallError(ToolnexusError):
    """`toolnexus install` cannot write a client's MCP entry: the entry exists (and no `--force`),
    the config file does not parse, or the option does not fit the client. The message names the
    file and the entry; `usage` says the command line itself was wrong (the CLI's exit code 2)."""

    def __init__(self, message: str, *, hint: str | None = None, usage: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.usage = usage


class StateUnavailable(ToolnexusError):
    """The shared state store (`state="redis://..."`) did not answer.

    Never papered over by counting in-process instead: N replicas each counting alone would let
    N times the limit through. Middleware turns it into an error result; `/healthz` fails.
    """


class UsageError(ToolnexusError, RuntimeError):
    """The library was used in a way it does not support (the message says what to do instead)."""


class StrictSchemaError(UsageError):
    """A JSON Schema that OpenAI's strict mode cannot express without changing what it accepts
    (free-form maps, values of any type, `allOf` of several schemas, remote `$ref`s...)."""
