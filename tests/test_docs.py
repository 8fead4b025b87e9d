"""The docs' examples and reference tables, checked against the code.

The docs (`docs/`, built into the site) are the product's manual: these tests read their pages and
fail when a manifest example stops loading, a middleware form stops building, a builtin option
stops being accepted or a CLI flag disappears, so the manual cannot drift from the code
unnoticed. The generated parts (docs/hooks.py) are checked to cover what they are generated from,
the README to stay short, and the site to build strictly.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolnexus import ConfigError, Decision, ManifestError, create_toolkit, load_manifest
from toolnexus import middleware as mw
from toolnexus.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _page(name: str) -> str:
    """The Markdown source of the docs page `name` (e.g. "sandbox.md")."""
    return (DOCS / name).read_text(encoding="utf-8")


def _hooks() -> Any:
    """docs/hooks.py, the generator of the reference parts, as a module."""
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _yaml_blocks(section: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", section, re.S)


def _table_rows(section: str) -> list[list[str]]:
    """The cells of every body row of the Markdown tables in `section` (`\\|` kept as `|`)."""
    rows = []
    for line in section.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows.append(cells)
    return rows[1:] if rows else rows


# -- the manifest ---------------------------------------------------------------------------------


def test_the_annotated_manifest_is_valid(tmp_path: Path) -> None:
    (example,) = [b for b in _yaml_blocks(_page("manifest.md")) if "version: 1" in b]
    (tmp_path / "tools.yaml").write_text(example, encoding="utf-8")
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "base.yaml").write_text("version: 1\n", encoding="utf-8")
    (tmp_path / "vendor.yaml").write_text(
        "version: 1\ntools:\n"
        "  - {name: git_status, command: [git, status]}\n"
        "  - {name: git_push, command: [git, push]}\n"
        "  - {name: rm_all, command: [rm, -rf, .]}\n",
        encoding="utf-8",
    )
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"files": {"command": "mcp-files"}}}), encoding="utf-8"
    )

    manifest = load_manifest(
        tmp_path / "tools.yaml", env={"WEATHER_TOKEN": "w-secret", "DOCS_TOKEN": "d-secret"}
    )

    # The include's only/exclude/prefix applied; every kind of tool and server declared.
    assert [(d.name, d.kind) for d in manifest.tools] == [
        ("v_git_status", "shell"),
        ("add", "python"),
        ("list_dir", "shell"),
        ("weather", "http"),
        (None, "openapi"),
    ]
    assert sorted(s.name for s in manifest.mcp_servers) == ["docs", "files", "time"]
    assert manifest.builtins == {"read": {}, "grep": {}, "glob": {}}
    assert manifest.defaults.timeout == 30 and manifest.defaults.max_output == 30000
    assert [m.name or m.use for m in manifest.middleware] == [
        "timeout",
        "truncate",
        "audit",
        "mypkg.mw:make_limiter",
    ]
    assert len(manifest.permissions) == 6


def test_the_sandbox_block_is_valid() -> None:
    # The reference block (the page's other samples are whole manifests, loaded elsewhere).
    (block,) = [b for b in _yaml_blocks(_page("sandbox.md")) if b.startswith("sandbox:")]
    indented = "".join(f"  {line}\n" for line in block.splitlines())
    manifest = load_manifest(f"version: 1\ndefaults:\n{indented}")
    sandbox = manifest.defaults.sandbox
    assert sandbox is not None and sandbox["filesystem"] == "workspace-write"
    # The units the docs promise: MB is decimal, durations in seconds.
    assert sandbox["max_memory"] == 512_000_000 and sandbox["max_file_size"] == 100_000_000
    assert sandbox["timeout"] == 60 and sandbox["max_output"] == 1_000_000


def test_the_manifest_schema_comment_names_the_shipped_schema() -> None:
    url = re.search(r"\$schema=(\S+)", _page("manifest.md"))
    assert url is not None and url.group(1).endswith("toolnexus/manifest/schema.json")
    assert (Path(__file__).resolve().parent.parent / "toolnexus/manifest/schema.json").is_file()


# -- middleware -----------------------------------------------------------------------------------


def _middleware_rows() -> list[tuple[str, str]]:
    """(YAML form, Python form) of each row of the Middleware table."""
    out = []
    own_table = _page("middleware.md").split("\n## ")[0]  # not its subsections' tables
    for yaml_cell, python_cell, _ in _table_rows(own_table):
        forms = re.findall(r"`([^`]+)`", yaml_cell)
        pythons = re.findall(r"`([^`]+)`", python_cell) or [""] * len(forms)
        out += list(zip(forms, pythons, strict=True))
    return out


@pytest.mark.parametrize(("form", "python"), _middleware_rows())
def test_every_middleware_form_builds(form: str, python: str) -> None:
    manifest = load_manifest(f"version: 1\nmiddleware:\n  - {form}\n")
    (decl,) = manifest.middleware
    if decl.use is not None:  # your own factory: only its form is checked, it does not exist
        assert decl.use == "pkg.mod:factory"
        return
    assert callable(mw.from_config(decl.name or "", decl.options, base_dir=decl.base_dir))
    call = re.fullmatch(r"(\w+)\((.*)\)", python)
    assert call is not None, f"the Python column should read name(params), not {python!r}"
    name, params = call.groups()
    assert name == decl.name
    signature = inspect.signature(getattr(mw, name))
    for param in re.findall(r"\w+", params):
        assert param in signature.parameters, f"{name}() has no parameter {param!r}"


# -- builtin tools --------------------------------------------------------------------------------

SENSIBLE: dict[str, Any] = {
    "max_results": 10,
    "max_timeout_ms": 900_000,
    "default_timeout_ms": 60_000,
    "max_jobs": 2,
    "max_output": 1000,
    "allow_private": True,
    "allow_hosts": ["127.0.0.1"],
    "max_bytes": 1000,
    "timeout_ms": 1000,
    "max_file_bytes": 1000,
    "max_items": 10,
}
"""A value for each option the docs name without one."""


def _builtin_options() -> list[tuple[str, str, Any]]:
    """(tool, option, value) for every option the Builtin tools page names."""
    text = " ".join(_page("builtin.md").split())
    found = []
    for names, last, body in re.findall(r"((?:`\w+`/)*)`(\w+): \{([^}]*)\}`", text):
        tools = [*re.findall(r"\w+", names), last]
        for item in body.split(", "):
            option, _, shown = item.partition(": ")
            if shown:
                values = [{"false": False, "true": True}.get(v, v) for v in shown.split("|")]
                values = [int(v) if isinstance(v, str) and v.isdigit() else v for v in values]
            else:
                assert option in SENSIBLE, f"give tests/test_docs.py a value for {option!r}"
                values = [SENSIBLE[option]]
            found += [(t, option, v) for t in tools for v in values]
    return found


def test_the_docs_name_options_for_every_builtin() -> None:
    named = {tool for tool, _, _ in _builtin_options()}
    assert named == {"read", "write", "glob", "grep", "shell", "fetch", "apply_patch", "todo"}


@pytest.mark.parametrize(("tool", "option", "value"), _builtin_options())
def test_every_builtin_option_in_the_docs_is_accepted(tool: str, option: str, value: Any) -> None:
    with create_toolkit(builtins={tool: {option: value}}) as toolkit:
        assert tool in toolkit.names()


def test_the_common_builtin_options_are_accepted() -> None:
    options = {
        "approval": "ask",
        "sandbox": {"filesystem": "read-only", "network": False},
        "middleware": [{"truncate": 100}],
        "timeout": 5,
    }
    with create_toolkit(builtins={"read": options}) as toolkit:
        assert toolkit.check("read", {"path": "x"}).decision is Decision.ASK


def test_an_unknown_builtin_option_is_refused_with_a_suggestion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match="did you mean 'max_lines'"):
        create_toolkit(builtins={"read": {"max_line": 500}})
    # From a manifest it is a ManifestError located at the option.
    with pytest.raises(ManifestError, match=r"<manifest>:2:\d+: .*did you mean 'max_lines'"):
        create_toolkit("version: 1\nbuiltins: {read: {max_line: 500}}\n")
    path = tmp_path / "tools.yaml"
    path.write_text("version: 1\nbuiltins: {read: {max_line: 500}}\n", encoding="utf-8")
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:2:" in err and "builtins.read.max_line" in err
    assert "did you mean 'max_lines'" in err
    assert "Traceback" not in err


def test_the_builtin_tools_table_lists_the_builtins() -> None:
    listed = {re.sub(r"`", "", row[0]) for row in _table_rows(_page("builtin.md"))}
    with create_toolkit(builtins="all") as toolkit:
        assert set(toolkit.names()) == listed | {"shell_output", "shell_kill"}


# -- the command ----------------------------------------------------------------------------------


def _commands() -> list[tuple[str, list[str]]]:
    rows = _table_rows(_page("cli.md"))
    out = []
    for usage, _ in rows:
        words = usage.strip("`").split()
        assert words[0] == "toolnexus"
        out.append((words[1], re.findall(r"--[a-z-]+", usage)))
    return out


def test_the_docs_list_every_command() -> None:
    assert sorted(c for c, _ in _commands()) == sorted(
        [
            "validate",
            "list",
            "call",
            "schema",
            "doctor",
            "watch",
            "serve",
            "install",
            "login",
            "logout",
            "completion",
        ]
    )


@pytest.mark.parametrize(("command", "flags"), _commands())
def test_every_command_and_flag_exists(
    command: str, flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--help"]) == 0
    help_text = capsys.readouterr().out
    for flag in flags:
        assert flag in help_text


# -- the generated parts ------------------------------------------------------------------------


def test_the_cli_reference_has_every_command_and_flag_of_the_parser() -> None:
    import argparse

    from toolnexus import cli

    reference = _hooks().cli_reference()
    parser = cli._parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands.choices) == {c for c, _ in _commands()}  # and the overview table's
    for name, sub in commands.choices.items():
        assert f"### `toolnexus {name}`" in reference
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for flag in action.option_strings:
                assert f"`{flag}`" in reference
            if action.help and action.help != argparse.SUPPRESS:
                assert " ".join(action.help.split()) in reference


def _schema_keys(schema: Any, path: str = "") -> set[str]:
    """Every `properties` key of the schema, anywhere in it."""
    keys: set[str] = set()
    if isinstance(schema, dict):
        for key, sub in (schema.get("properties") or {}).items():
            keys.add(key)
            keys |= _schema_keys(sub)
        for key, sub in schema.items():
            if key != "properties":
                keys |= _schema_keys(sub)
    elif isinstance(schema, list):
        for sub in schema:
            keys |= _schema_keys(sub)
    return keys


def test_the_manifest_reference_shows_every_key_of_the_schema() -> None:
    schema = json.loads((ROOT / "toolnexus/manifest/schema.json").read_text(encoding="utf-8"))
    reference = _hooks().manifest_reference(schema)
    shown = set(re.findall(r"^\| `([^`]+)`", reference, re.M))
    assert _schema_keys(schema) - shown == set()
    for name in schema["$defs"]:
        assert f"{{#m-{name.replace('_', '-')}}}" in reference, name
    # every link in it points at a section it has
    anchors = set(re.findall(r"\{#([\w-]+)\}", reference))
    assert set(re.findall(r"\]\(#([\w-]+)\)", reference)) <= anchors


def test_the_benchmark_page_includes_every_row_of_the_results_file() -> None:
    results = (ROOT / "benchmarks/RESULTS.md").read_text(encoding="utf-8")
    included = _hooks().benchmark_results()
    rows = [line for line in results.splitlines() if line.startswith("| ")]
    assert rows and all(row in included for row in rows)
    assert "<!-- generated: benchmark-results -->" in _page("benchmarks.md")
    # No figure is typed into the page itself: its tables all come from the results file.
    assert not [line for line in _page("benchmarks.md").splitlines() if line.startswith("|")]


def _collected(folder: Path) -> int:
    """How many tests pytest collects under `folder`, by `pytest --collect-only` in a subprocess."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", folder],
        cwd=folder.parent,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    found = re.search(r"^(\d+) tests? collected", done.stdout, re.M)
    assert found, done.stdout[-2000:] + done.stderr[-2000:]
    return int(found.group(1))


def test_the_suite_size_estimate_counts_every_shape_it_reads(tmp_path: Path) -> None:
    folder = tmp_path / "tests"
    (folder / "deep").mkdir(parents=True)
    (folder / "conftest.py").write_text(
        "import pytest\n@pytest.fixture(params=[1, 2, 3])\ndef three(request): return 1\n"
    )
    (folder / "test_a.py").write_text(
        inspect.cleandoc(
            """
            import pytest
            BASE = ["a", "b"]
            MORE = BASE + ["c"]
            TABLE = {"x": BASE, "y": ["d", "e", "f"]}
            @pytest.fixture(autouse=True, params=["p", "q"])
            def twice(request): return 1
            def test_plain(): pass
            @pytest.mark.parametrize("v", MORE)
            @pytest.mark.parametrize("w", [v for v in TABLE.items()])
            def test_grid(v, w): pass
            @pytest.mark.parametrize("c", [c for k, cs in TABLE.items() for c in cs])
            def test_nested(c, three): pass
            class TestGroup:
                def test_method(self): pass
                def helper(self): pass
            """
        )
        + "\n"
    )
    (folder / "deep" / "test_b.py").write_text(
        "import pytest\n@pytest.mark.parametrize('n', list(range(4)))\ndef test_r(n): pass\n"
        "def test_three(three): pass\n"
    )
    # 2 x (1 + 3*2 + 5*3 + 1) in test_a; range() is computed, so test_r counts once (of 4), + 3
    assert _hooks().count_tests(folder) == 2 * (1 + 6 + 15 + 1) + 1 + 3
    assert _collected(folder) == 2 * (1 + 6 + 15 + 1) + 4 + 3


def test_the_suite_size_in_the_docs_is_generated_and_close_to_pytests_count() -> None:
    page = _page("development.md")
    assert "<!-- generated: suite-size -->" in page
    # No size or time of the suite is typed into the page.
    assert not re.search(r"\d[\d,]* tests|\d+ (?:s|seconds|minutes)\b", page)
    estimate, collected = _hooks().count_tests(ROOT / "tests"), _collected(ROOT / "tests")
    assert 0.9 * collected <= estimate <= 1.05 * collected, (estimate, collected)
    shown = re.search(r"about ([\d,]+) tests", _hooks().render(page))
    assert shown and int(shown.group(1).replace(",", "")) == round(estimate, -2)


def test_an_unknown_generated_marker_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown generated part 'cli-refrence'"):
        _hooks().render("<!-- generated: cli-refrence -->\n")


# -- the README and the site ----------------------------------------------------------------------


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move the detail to docs/"


def test_the_readme_links_to_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links and [link for link in links if not (ROOT / link).is_file()] == []


def test_the_readme_keeps_the_two_set_up_commands_verbatim() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci/run").read_text(encoding="utf-8")
    example = (
        'python3 -m venv .venv && .venv/bin/pip install -q -e ".[builtin]" '
        "&& .venv/bin/python configs/example/demo.py"
    )
    tests = ci.rstrip().splitlines()[-1]
    assert f"```sh\n{example}\n```" in readme
    assert f"```sh\n{tests}\n```" in readme  # the command CI runs last


def test_every_docs_page_is_in_the_navigation() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert {p for p in pages if p not in config} == set()


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs is not installed (pip install -e '.[docs]')",
)
@pytest.mark.timeout(300)
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "cli" / "index.html").is_file()
    cli = (tmp_path / "site" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "toolnexus serve" in cli and "--stateless" in cli  # the generated part is in
