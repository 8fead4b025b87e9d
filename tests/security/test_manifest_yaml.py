"""Hostile YAML manifests: unknown tags, alias bombs and deep nesting are refused as located
`ManifestSyntaxError`s (file:line:col), quickly, and never as a foreign exception."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolnexus import ManifestSyntaxError, create_toolkit, load_manifest

TOOL = "tools:\n  - name: t\n    command: [echo, hi]\n"


@pytest.mark.parametrize(
    ("body", "line", "column", "tag"),
    [
        ("tools:\n  - !!python/object:os.system {name: x}\n", 2, 5, "python/object:os.system"),
        ("tools:\n  - !!python/object/apply:os.system [echo pwned]\n", 2, 5, "python/object"),
        ("name: !!python/name:os.system x\n", 1, 7, "python/name"),
        ("name: !!python/str x\n", 1, 7, "python/str"),
        ("tools: !!set {a, b}\n", 1, 8, "set"),
        ("tools: !!omap [a: 1]\n", 1, 8, "omap"),
        ("name: !!binary aGVsbG8=\n", 1, 7, "binary"),
        ("name: !!timestamp 2001-12-14\n", 1, 7, "timestamp"),
        ("name: !custom x\n", 1, 7, "!custom"),
        ("tools: !local [1]\n", 1, 8, "!local"),
        ("%TAG !p! tag:yaml.org,2002:python/\n---\nname: !p!object x\n", 3, 7, "python/object"),
        ("name: !<tag:example.com,2000:x> y\n", 1, 7, "tag:example.com"),
    ],
)
def test_unknown_tags_are_located_syntax_errors(
    tmp_path: Path, body: str, line: int, column: int, tag: str
) -> None:
    path = tmp_path / "tools.yaml"
    text = body if body.startswith("%") else "version: 1\n" + body
    offset = 0 if body.startswith("%") else 1
    path.write_text(text)
    with pytest.raises(ManifestSyntaxError) as info:
        create_toolkit(path)
    issue = info.value.issues[0]
    assert (issue.file, issue.line, issue.column) == (str(path), line + offset, column)
    assert tag in issue.message
    assert "tag" in issue.message


@pytest.mark.parametrize(
    "text",
    [
        "name: !!str x\n",
        "name: ! x\n",
        "defaults: !!map {timeout: 5s}\n",
        "permissions: {deny: !!seq [shell]}\n",
        "tools:\n  - name: t\n    command: [echo, !!str 1]\n    timeout: !!int 5\n",
    ],
)
def test_core_tags_still_load(text: str) -> None:
    load_manifest("version: 1\n" + text)


def laughs(levels: int, width: int = 9) -> str:
    lines = ["version: 1", "x0: &x0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.timeout(10)
@pytest.mark.parametrize("levels", [6, 9, 30])
def test_billion_laughs_is_refused_quickly_and_located(tmp_path: Path, levels: int) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(laughs(levels))
    with pytest.raises(ManifestSyntaxError) as info:
        create_toolkit(path)
    issue = info.value.issues[0]
    assert issue.file == str(path)
    assert issue.line is not None and issue.line >= 3 and issue.column is not None
    assert "alias" in issue.message


def test_merge_key_bombs_are_refused_too() -> None:
    lines = ["version: 1", "a0: &a0 {k: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}"]
    for i in range(1, 25):
        keys = ", ".join(f"k{j}: *a{i - 1}" for j in range(10))
        lines.append(f"a{i}: &a{i} {{<<: *a{i - 1}, {keys}}}")
    with pytest.raises(ManifestSyntaxError, match="alias"):
        load_manifest("\n".join(lines) + "\n")


def test_a_few_aliases_still_load() -> None:
    text = (
        "version: 1\n"
        "defaults: &d {timeout: 5s}\n"
        "tools:\n"
        "  - &base {name: a, command: [echo, a], timeout: 5s}\n"
        "  - {<<: *base, name: b}\n"
        "  - {<<: *base, name: c}\n"
        + "".join(f"  - {{<<: *base, name: t{i}}}\n" for i in range(200))
    )
    manifest = load_manifest(text)
    assert len(manifest.tools) == 203


@pytest.mark.parametrize("depth", [300, 990])
def test_deep_nesting_is_a_located_syntax_error(depth: int) -> None:
    text = "version: 1\nx: " + "[" * depth + "]" * depth + "\n"
    with pytest.raises(ManifestSyntaxError, match="nested") as info:
        load_manifest(text)
    assert info.value.issues[0].line == 2


def test_nesting_a_schema_needs_still_loads() -> None:
    schema = '{"type": "string"}'
    for _ in range(40):
        schema = '{"type": "object", "properties": {"a": ' + schema + "}}"
    load_manifest(f"version: 1\n{TOOL}    parameters: {schema}\n")
