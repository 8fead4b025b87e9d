"""toolnexus: a YAML manifest in, a ready set of tools for an LLM agent out.

```python
from toolnexus import create_toolkit

with create_toolkit("tools.yaml") as toolkit:
    result = toolkit.execute("add", '{"a": 2, "b": 3}')
```

Names are resolved lazily: `import toolnexus` loads only the light core, and heavy
dependencies (jsonschema, httpx, yaml, mcp, watchfiles) load when a feature first needs them.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

# A library logs, the application decides where it goes (no "No handlers" fallback output).
logging.getLogger("toolnexus").addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from .adapters import (
        Adapter,
        get_adapter,
    )
    from .approval import (
        ApprovalPolicy,
        ApprovalRequest,
        ApprovalRules,
        Approver,
        Decision,
        PermissionRules,
        Verdict,
        compile_permissions,
        compile_rules,
        is_known_safe_command,
        split_command,
    )
    from .base import (
        AudioPart,
        ImagePart,
        Part,
        Progress,
        ProgressCallback,
        ResourcePart,
        Result,
        TextPart,
        Tool,
        ToolCall,
        ToolContext,
        to_result,
    )
    from .curation import Curation, curate
    from .errors import (
        ApprovalDenied,
        ConfigError,
        DuplicateToolError,
        IncludeError,
        InstallError,
        InvalidArguments,
        ManifestEnvError,
        ManifestError,
        ManifestImportError,
        ManifestIssue,
        ManifestSchemaError,
        ManifestSyntaxError,
        PathRefused,
        SandboxUnavailable,
        SourceError,
        StateUnavailable,
        StrictSchemaError,
        ToolError,
        ToolnexusError,
        ToolNotFound,
        ToolTimeout,
        UsageError,
    )
    from .executor import (
        Executor,
    )
    from .function import (
        tool,
        tool_factory,
    )
    from .manifest import (
        Manifest,
        load_manifest,
        manifest_schema,
    )
    from .mcp.callbacks import ElicitationHandler, SamplingHandler, ServerRequest
    from .middleware import (
        Call,
        Middleware,
        Next,
    )
    from .registry import (
        Registry,
    )
    from .reload import (
        ReloadEvent,
    )
    from .runtime.process import (
        ProcessHandle,
        ProcessResult,
        run_process,
        start_process,
    )
    from .runtime.sandbox import (
        SandboxPolicy,
        confine_path,
    )
    from .schema import (
        sanitize_name,
    )
    from .search import (
        SearchState,
        ToolSearchSettings,
    )
    from .state import (
        StateBackend,
    )
    from .toolkit import (
        Toolkit,
        acreate_toolkit,
        create_toolkit,
    )

_EXPORTS: dict[str, str] = {
    "Adapter": "adapters",
    "ApprovalDenied": "errors",
    "ApprovalPolicy": "approval",
    "ApprovalRequest": "approval",
    "ApprovalRules": "approval",
    "Approver": "approval",
    "AudioPart": "base",
    "Call": "middleware",
    "ConfigError": "errors",
    "Curation": "curation",
    "Decision": "approval",
    "DuplicateToolError": "errors",
    "Executor": "executor",
    "ImagePart": "base",
    "Progress": "base",
    "ProgressCallback": "base",
    "TextPart": "base",
    "ServerRequest": "mcp.callbacks",
    "ElicitationHandler": "mcp.callbacks",
    "SamplingHandler": "mcp.callbacks",
    "IncludeError": "errors",
    "InstallError": "errors",
    "InvalidArguments": "errors",
    "Manifest": "manifest",
    "ManifestEnvError": "errors",
    "ManifestError": "errors",
    "ManifestImportError": "errors",
    "ManifestIssue": "errors",
    "ManifestSchemaError": "errors",
    "ManifestSyntaxError": "errors",
    "Middleware": "middleware",
    "Next": "middleware",
    "Part": "base",
    "PathRefused": "errors",
    "PermissionRules": "approval",
    "ProcessHandle": "runtime.process",
    "ProcessResult": "runtime.process",
    "Registry": "registry",
    "ReloadEvent": "reload",
    "ResourcePart": "base",
    "Result": "base",
    "SandboxPolicy": "runtime.sandbox",
    "SandboxUnavailable": "errors",
    "SearchState": "search",
    "SourceError": "errors",
    "StateBackend": "state",
    "StateUnavailable": "errors",
    "StrictSchemaError": "errors",
    "Tool": "base",
    "ToolCall": "base",
    "ToolContext": "base",
    "ToolError": "errors",
    "ToolNotFound": "errors",
    "ToolSearchSettings": "search",
    "ToolTimeout": "errors",
    "Toolkit": "toolkit",
    "ToolnexusError": "errors",
    "UsageError": "errors",
    "Verdict": "approval",
    "acreate_toolkit": "toolkit",
    "compile_permissions": "approval",
    "compile_rules": "approval",
    "confine_path": "runtime.sandbox",
    "create_toolkit": "toolkit",
    "curate": "curation",
    "get_adapter": "adapters",
    "is_known_safe_command": "approval",
    "load_manifest": "manifest",
    "manifest_schema": "manifest",
    "run_process": "runtime.process",
    "sanitize_name": "schema",
    "split_command": "approval",
    "start_process": "runtime.process",
    "to_result": "base",
    "tool": "function",
    "tool_factory": "function",
}

__all__ = [
    "Adapter",
    "ApprovalDenied",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalRules",
    "Approver",
    "AudioPart",
    "Call",
    "ConfigError",
    "Curation",
    "Decision",
    "DuplicateToolError",
    "ElicitationHandler",
    "Executor",
    "ImagePart",
    "IncludeError",
    "InstallError",
    "InvalidArguments",
    "Manifest",
    "ManifestEnvError",
    "ManifestError",
    "ManifestImportError",
    "ManifestIssue",
    "ManifestSchemaError",
    "ManifestSyntaxError",
    "Middleware",
    "Next",
    "Part",
    "PathRefused",
    "PermissionRules",
    "ProcessHandle",
    "ProcessResult",
    "Progress",
    "ProgressCallback",
    "Registry",
    "ReloadEvent",
    "ResourcePart",
    "Result",
    "SamplingHandler",
    "SandboxPolicy",
    "SandboxUnavailable",
    "SearchState",
    "ServerRequest",
    "SourceError",
    "StateBackend",
    "StateUnavailable",
    "StrictSchemaError",
    "TextPart",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolNotFound",
    "ToolSearchSettings",
    "ToolTimeout",
    "Toolkit",
    "ToolnexusError",
    "UsageError",
    "Verdict",
    "acreate_toolkit",
    "compile_permissions",
    "compile_rules",
    "confine_path",
    "create_toolkit",
    "curate",
    "get_adapter",
    "is_known_safe_command",
    "load_manifest",
    "manifest_schema",
    "run_process",
    "sanitize_name",
    "split_command",
    "start_process",
    "to_result",
    "tool",
    "tool_factory",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        # pyproject.toml is the one place the version is written; read from the installed
        # distribution's metadata on first use (importlib.metadata is not loaded by the import).
        from importlib.metadata import version

        globals()[name] = value = version("toolnexus")
        return value
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolnexus' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
