"""The README's examples and reference tables, checked against the code.

The README is the product's manual: these tests read it and fail when a manifest example stops
loading, a middleware form stops building, a builtin option stops being accepted or a CLI flag
disappears, so the manual cannot drift from the code unnoticed.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

from toolnexus import ConfigError, Decision, ManifestError, create_toolkit, load_manifest
from toolnexus import middleware as mw
from toolnexus.cli import main

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    """The text of the `## title` section, up to the next `## ` heading."""
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else len(README)]


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
    (example,) = [b for b in _yaml_blocks(_section("The manifest")) if "version: 1" in b]
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
    (block,) = _yaml_blocks(_section("Sandbox"))
    indented = "".join(f"  {line}\n" for line in block.splitlines())
    manifest = load_manifest(f"version: 1\ndefaults:\n{indented}")
    sandbox = manifest.defaults.sandbox
    assert sandbox is not None and sandbox["filesystem"] == "workspace-write"
    # The units the README promises: MB is decimal, durations in seconds.
    assert sandbox["max_memory"] == 512_000_000 and sandbox["max_file_size"] == 100_000_000
    assert sandbox["timeout"] == 60 and sandbox["max_output"] == 1_000_000


def test_the_manifest_schema_comment_names_the_shipped_schema() -> None:
    url = re.search(r"\$schema=(\S+)", _section("The manifest"))
    assert url is not None and url.group(1).endswith("toolnexus/manifest/schema.json")
    assert (Path(__file__).resolve().parent.parent / "toolnexus/manifest/schema.json").is_file()


# -- middleware -----------------------------------------------------------------------------------


def _middleware_rows() -> list[tuple[str, str]]:
    """(YAML form, Python form) of each row of the Middleware table."""
    out = []
    own_table = _section("Middleware").split("\n### ")[0]  # not its subsections' tables
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
"""A value for each option the README names without one."""


def _builtin_options() -> list[tuple[str, str, Any]]:
    """(tool, option, value) for every option the README's Builtin tools section names."""
    text = " ".join(_section("Builtin tools").split())
    found = []
    for names, last, body in re.findall(r"((?:`\w+`/)*)`(\w+): \{([^}]*)\}`", text):
        tools = [*re.findall(r"\w+", names), last]
        for item in body.split(", "):
            option, _, shown = item.partition(": ")
            if shown:
                values = [{"false": False, "true": True}.get(v, v) for v in shown.split("|")]
                values = [int(v) if isinstance(v, str) and v.isdigit() else v for v in values]
            else:
                assert option in SENSIBLE, f"give tests/test_readme.py a value for {option!r}"
                values = [SENSIBLE[option]]
            found += [(t, option, v) for t in tools for v in values]
    return found


def test_the_readme_names_options_for_every_builtin() -> None:
    named = {tool for tool, _, _ in _builtin_options()}
    assert named == {"read", "write", "glob", "grep", "shell", "fetch", "apply_patch", "todo"}


@pytest.mark.parametrize(("tool", "option", "value"), _builtin_options())
def test_every_builtin_option_in_the_readme_is_accepted(tool: str, option: str, value: Any) -> None:
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
    listed = {re.sub(r"`", "", row[0]) for row in _table_rows(_section("Builtin tools"))}
    with create_toolkit(builtins="all") as toolkit:
        assert set(toolkit.names()) == listed | {"shell_output", "shell_kill"}


# -- the command ----------------------------------------------------------------------------------


def _commands() -> list[tuple[str, list[str]]]:
    rows = _table_rows(_section("The `toolnexus` command"))
    out = []
    for usage, _ in rows:
        words = usage.strip("`").split()
        assert words[0] == "toolnexus"
        out.append((words[1], re.findall(r"--[a-z-]+", usage)))
    return out


def test_the_readme_lists_every_command() -> None:
    assert sorted(c for c, _ in _commands()) == sorted(
        ["validate", "list", "call", "schema", "doctor", "watch", "serve", "login", "logout"]
    )


@pytest.mark.parametrize(("command", "flags"), _commands())
def test_every_command_and_flag_exists(
    command: str, flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--help"]) == 0
    help_text = capsys.readouterr().out
    for flag in flags:
        assert flag in help_text
