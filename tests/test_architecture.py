"""The house: one package per concern and imports that only point one way.

The layout is the architecture page of the docs; these tests keep the code to it. An import
cycle is counted with the imports written inside functions (a late import hides a cycle, it
does not remove it); only imports under `if TYPE_CHECKING:` are left out, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "toolnexus"


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__) for every module of toolnexus."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, path: Path, is_package: bool, known: set[str]) -> set[str]:
    """The toolnexus modules `module` imports when it runs, wherever the import is written."""
    edges: set[str] = set()

    def add(target: str) -> None:
        parts = target.split(".")
        while parts:  # `from a.b import c` imports a.b.c when that is a module, else a.b
            name = ".".join(parts)
            if name in known:
                if name != module:
                    edges.add(name)
                return
            parts.pop()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            for alias in node.names:
                full = f"{origin}.{alias.name}"
                add(full if full in known else origin)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return edges


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, pkg, known) for name, (path, pkg) in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_cycle_finder_counts_late_imports_and_skips_type_checking(tmp_path: Path) -> None:
    # The finder itself: an import inside a function is an edge, one under TYPE_CHECKING is not.
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import x\n"
        "if TYPE_CHECKING:\n    from .y import Y\n"
        "def f():\n    from .z import g\n",
        encoding="utf-8",
    )
    known = {"toolnexus.pkg.m", "toolnexus.pkg.x", "toolnexus.pkg.y", "toolnexus.pkg.z"}
    edges = _imports("toolnexus.pkg.m", module, False, known)
    assert edges == {"toolnexus.pkg.x", "toolnexus.pkg.z"}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_in_toolnexus() -> None:
    cycles = _cycles(_graph())
    assert cycles == [], "import cycles (function-level imports count): " + "; ".join(
        " <-> ".join(c) for c in cycles
    )


def test_at_most_four_private_modules_sit_at_the_top() -> None:
    dunder = ("__init__.py", "__main__.py")
    private = sorted(p.name for p in PACKAGE.glob("_*.py") if p.name not in dunder)
    assert len(private) <= 4, private


@pytest.mark.parametrize(
    ("what", "where"),
    [
        ("a call", "executor.py"),
        ("a manifest", "manifest/loader.py"),
        ("an MCP session", "mcp/server.py"),
        ("a served request", "serve/server.py"),
        ("a sandboxed process", "runtime/sandbox.py"),
        ("the process reaper", "runtime/reaper.py"),
        ("the private loop thread", "runtime/loop.py"),
        ("the MCP token store", "mcp/tokens.py"),
    ],
)
def test_each_concern_has_its_room(what: str, where: str) -> None:
    assert (PACKAGE / where).is_file(), f"{what} should live in toolnexus/{where}"


def test_sources_hold_one_module_per_kind_of_tool() -> None:
    modules = (PACKAGE / "sources").glob("*.py")
    public = sorted(p.stem for p in modules if not p.stem.startswith("_"))
    assert public == ["http", "mcp", "openapi", "python", "shell"]


def test_scripts_run_in_children_import_nothing_from_toolnexus() -> None:
    # The reaper and the Landlock launcher run as `python -I -S file.py` in a child process,
    # where the package is not importable: a toolnexus import there would fail at run time.
    known = set(_modules())
    for name in ("toolnexus.runtime.reaper", "toolnexus.runtime.launcher"):
        path, pkg = _modules()[name]
        assert _imports(name, path, pkg, known) == set(), name


def test_only_the_toolkit_touches_its_private_state() -> None:
    # `reload` and `build` reach the toolkit through functions it hands them, not its insides.
    offenders = []
    for name, (path, _) in _modules().items():
        if name == "toolnexus.toolkit":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and node.value.id == "toolkit"
            ):
                offenders.append(f"{name}:{node.lineno}: toolkit.{node.attr}")
    assert offenders == []


def test_the_architecture_page_names_every_room() -> None:
    # The docs' architecture page is the picture of this tree: a package or a top-level module
    # added, moved or removed without it fails here.
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    layout = page[page.index("```text\ntoolnexus/") : page.index("```", page.index("```text") + 7)]
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    modules = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__main__.py")
    missing = [f"{p}/" for p in packages if f"  {p}/" not in layout]
    missing += [m for m in modules if m not in layout]
    assert missing == [], f"docs/architecture.md does not show: {missing}"
