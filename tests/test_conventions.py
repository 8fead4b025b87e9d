"""Conventions turned into tests: the public API, the error tree, lazy imports, layering."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

import toolnexus
from toolnexus import errors

ROOT = Path(__file__).resolve().parents[1]


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert toolnexus.__all__ == sorted(toolnexus.__all__)
    for name in toolnexus.__all__:
        assert getattr(toolnexus, name) is not None, name


def test_every_exception_is_exported_and_inherits_from_the_base() -> None:
    classes = [
        obj
        for obj in vars(errors).values()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and obj.__module__ == errors.__name__
    ]
    for cls in classes:
        if cls.__name__.startswith("_"):
            continue
        assert issubclass(cls, errors.ToolnexusError), cls
        assert cls.__name__ in toolnexus.__all__, cls


def test_public_dataclasses_are_keyword_only() -> None:
    for name in toolnexus.__all__:
        obj = getattr(toolnexus, name)
        if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
            params = dataclasses.fields(obj)
            assert all(f.kw_only for f in params if f.init), name


def test_import_toolnexus_loads_no_heavy_dependency() -> None:
    heavy = ("mcp", "watchfiles", "httpx", "jsonschema", "yaml", "prometheus_client")
    code = f"import sys, toolnexus; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_builtin_imports_only_top_level_toolnexus() -> None:
    for path in (ROOT / "builtin").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                assert not node.module.startswith("toolnexus."), f"{path}: {node.module}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("toolnexus."), f"{path}: {alias.name}"


def test_core_does_not_import_builtin() -> None:
    for path in (ROOT / "toolnexus").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert node.module.split(".")[0] != "builtin", path
            if isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] != "builtin" for a in node.names), path
