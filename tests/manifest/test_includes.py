"""include: relative files, package resources, entry point tool sets, adjustments, cycles."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolnexus.errors import DuplicateToolError, IncludeError
from toolnexus.manifest import apply_include_chain, load_manifest

Write = Callable[[str, str], Path]


@pytest.fixture
def clean_modules() -> Iterator[None]:
    """Forget modules a test imported from tmp_path."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_relative_include_keeps_its_own_origin_and_folder(write: Write, tmp_path: Path) -> None:
    write(
        "team/base.yaml",
        """
        version: 1
        defaults: {approval: deny, timeout: 5s, sandbox: {network: true, max_processes: 8}}
        middleware: [{audit: {path: team.jsonl}}]
        permissions: {deny: ["read(**/.env*)"]}
        tools:
          - {name: git_status, command: [git, status]}
          - {openapi: specs/api.yaml}
        builtins: [read]
    """,
    )
    top = write(
        "tools.yaml",
        """
        version: 1
        defaults: {approval: ask, sandbox: {network: false}}
        include: [team/base.yaml]
        permissions: {allow: [read]}
        tools:
          - {name: mine, python: "m:f"}
    """,
    )
    m = load_manifest(top)
    status, api, mine = m.tools
    assert api.kind == "openapi" and api.include_chain == status.include_chain
    assert status.where.file == str(tmp_path / "team/base.yaml") and status.where.line == 6
    assert status.base_dir == tmp_path / "team"
    assert [step.ref for step in status.include_chain] == ["team/base.yaml"]
    assert mine.include_chain == () and mine.base_dir == tmp_path
    # the includer's defaults win; the stricter approval wins; gaps come from the include
    assert status.defaults.approval == "deny"
    assert status.defaults.timeout == 5.0
    assert status.defaults.sandbox == {"network": False, "max_processes": 8}
    assert [mw.name for mw in status.scope_middleware] == ["audit"]
    assert mine.scope_middleware == () and m.middleware == ()
    assert [(p.decision, p.text, p.where.file) for p in m.permissions] == [
        ("allow", "read", str(top)),
        ("deny", "read(**/.env*)", str(tmp_path / "team/base.yaml")),
    ]
    assert m.builtins == {"read": {}}
    assert set(m.files) == {top, tmp_path / "team/base.yaml", tmp_path / "team/specs/api.yaml"}


def test_only_exclude_prefix_and_override(write: Write) -> None:
    write(
        "git.yaml",
        """
        version: 1
        tools:
          - {name: git_status, command: [git, status]}
          - {name: git_push, command: [git, push]}
          - {name: rm_all, command: [rm, -rf, /]}
          - {openapi: x.yaml, prefix: api_}
    """,
    )
    top = write(
        "tools.yaml",
        """
        version: 1
        include:
          - path: git.yaml
            only: ["git_*", "api_*"]
            exclude: [git_push]
            prefix: x_
            override: {"git_*": {approval: ask, sandbox: {network: false}}}
    """,
    )
    m = load_manifest(top)
    status, api = m.tools
    assert status.name == "x_git_status" and status.spec["name"] == "x_git_status"
    (override,) = status.overrides
    assert (override.glob, override.approval, override.sandbox) == (
        "git_*",
        "ask",
        {"network": False},
    )
    assert override.where.line == 7
    # tools named at build time go through the same chain
    assert api.name is None
    assert apply_include_chain(api.include_chain, "api_list") == ("x_api_list", ())
    assert apply_include_chain(api.include_chain, "other") is None
    assert m.includes[0].only == ("git_*", "api_*")


def test_nested_includes_apply_innermost_first(write: Write) -> None:
    write("c.yaml", "version: 1\ntools: [{name: t, command: [ls]}, {name: u, command: [ls]}]\n")
    write("b.yaml", "version: 1\ninclude: [{path: c.yaml, prefix: c_}]\n")
    top = write("a.yaml", "version: 1\ninclude: [{path: b.yaml, prefix: b_, only: [c_t]}]\n")
    (tool,) = load_manifest(top).tools
    assert tool.name == "b_c_t"
    assert [step.depth for step in tool.include_chain] == [1, 2]


def test_cycles_show_the_chain(write: Write) -> None:
    write("b.yaml", "version: 1\ninclude: [c.yaml]\n")
    write("c.yaml", "version: 1\ninclude: [a.yaml]\n")
    top = write("a.yaml", "version: 1\ninclude: [b.yaml]\n")
    with pytest.raises(IncludeError) as err:
        load_manifest(top)
    (issue,) = err.value.issues
    assert issue.file.endswith("c.yaml") and issue.line == 2
    assert issue.message.startswith(f"include cycle: {top} -> ")
    assert issue.message.split(": ")[1].split(";")[0].split(" -> ")[1:] == [
        str(top.parent / "b.yaml"),
        str(top.parent / "c.yaml"),
        str(top.parent / "a.yaml"),
    ]


def test_cycle_chain_with_relative_paths(
    write: Write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("b.yaml", "version: 1\ninclude: [a.yaml]\n")
    write("a.yaml", "version: 1\ninclude: [b.yaml]\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(IncludeError, match=r"include cycle: a\.yaml -> b\.yaml -> a\.yaml"):
        load_manifest("a.yaml")


def test_duplicates_across_includes_name_both_origins(write: Write) -> None:
    write("base.yaml", "version: 1\ntools:\n  - {name: ls, command: [ls]}\n")
    top = write(
        "tools.yaml",
        """
        version: 1
        include: [base.yaml]
        tools:
          - {name: ls, command: [ls, -la]}
    """,
    )
    with pytest.raises(DuplicateToolError) as err:
        load_manifest(top)
    (issue,) = err.value.issues
    assert issue.line == 4 and issue.file == str(top)
    base = top.parent / "base.yaml"
    assert issue.message == (
        f"tool 'ls' is defined twice: first at {base}:3:5 (included via base.yaml at {top}:2:11),"
        f" again at {top}:4:5; rename one (or use an include's prefix or exclude)"
    )


def test_a_diamond_include_is_not_a_duplicate(write: Write) -> None:
    write("base.yaml", "version: 1\ntools: [{name: ls, command: [ls]}]\n")
    write("x.yaml", "version: 1\ninclude: [base.yaml]\n")
    write("y.yaml", "version: 1\ninclude: [base.yaml]\n")
    top = write("top.yaml", "version: 1\ninclude: [x.yaml, y.yaml]\n")
    assert [t.name for t in load_manifest(top).tools] == ["ls"]


def test_problems_in_included_files_are_reported_with_the_rest(write: Write) -> None:
    write("base.yaml", "version: 1\ntools: [{name: ls, comand: [ls]}]\n")
    top = write("top.yaml", "version: 1\ninclude: [base.yaml, missing.yaml]\nnme: x\n")
    with pytest.raises(Exception) as err:
        load_manifest(top)
    files = {(i.file.rsplit("/", 1)[-1], i.kind) for i in err.value.issues}  # type: ignore[attr-defined]
    assert files == {("top.yaml", "include"), ("top.yaml", "schema"), ("base.yaml", "schema")}


def test_package_resource(
    write: Write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    write("site/tmp_toolset_pkg/__init__.py", "")
    write(
        "site/tmp_toolset_pkg/sets/tools.yaml",
        """
        version: 1
        tools: [{name: acme, python: "tmp_toolset_pkg.impl:run"}]
    """,
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    top = write("tools.yaml", "version: 1\ninclude: [package:tmp_toolset_pkg/sets/tools.yaml]\n")
    (tool,) = load_manifest(top).tools
    assert tool.base_dir == tmp_path / "site/tmp_toolset_pkg/sets"
    assert tool.include_chain[0].file == tmp_path / "site/tmp_toolset_pkg/sets/tools.yaml"
    with pytest.raises(IncludeError, match="package 'acme_toolz' is not installed"):
        load_manifest("version: 1\ninclude: [package:acme_toolz/sets/tools.yaml]\n")
    with pytest.raises(IncludeError, match=r"package 'tmp_toolset_pkg' has no file 'nope\.yaml'"):
        load_manifest("version: 1\ninclude: [package:tmp_toolset_pkg/nope.yaml]\n")


def _dist(site: Path, entry_points: str) -> None:
    info = site / "acme_sets-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-sets\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[toolnexus.toolsets]\n" + entry_points)


def test_entry_point_toolsets_in_every_form(
    write: Write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    site = tmp_path / "site"
    write(
        "site/acme_sets/__init__.py",
        """
        from pathlib import Path

        PATH = str(Path(__file__).with_name("set.yaml"))

        def mapping():
            return {"version": 1, "tools": [{"name": "from_mapping", "command": ["ls"]}]}
    """,
    )
    write("site/acme_sets/set.yaml", "version: 1\ntools: [{name: from_path, command: [ls]}]\n")
    write("site/acme_sets/mod.py", "MANIFEST = 'set.yaml'\n")
    write("site/acme_sets/broken.py", "raise RuntimeError('boom')\n")
    _dist(
        site,
        "by_path = acme_sets:PATH\nby_call = acme_sets:mapping\n"
        "by_module = acme_sets.mod\nbroken = acme_sets.broken\n",
    )
    monkeypatch.syspath_prepend(str(site))
    top = write(
        "tools.yaml",
        """
        version: 1
        include:
          - toolset:by_path
          - {path: "toolset:by_call", prefix: m_}
    """,
    )
    m = load_manifest(top)
    assert [t.name for t in m.tools] == ["from_path", "m_from_mapping"]
    assert m.tools[1].base_dir == site / "acme_sets"
    assert m.tools[1].where.file == "toolset:by_call"
    assert site / "acme_sets/set.yaml" in m.files
    relative = load_manifest("version: 1\ninclude: [toolset:by_module]\n")
    assert [t.name for t in relative.tools] == ["from_path"]
    with pytest.raises(IncludeError, match="did you mean 'by_call'"):
        load_manifest("version: 1\ninclude: ['toolset:by_cal']\n")
    with pytest.raises(IncludeError, match=r"failed to load: RuntimeError: boom"):
        load_manifest("version: 1\ninclude: ['toolset:broken']\n")
