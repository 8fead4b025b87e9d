"""load_manifest: the happy path, units, interpolation, sources, positions."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from toolnexus.errors import (
    ConfigError,
    ManifestEnvError,
    ManifestError,
    ManifestSchemaError,
    ManifestSyntaxError,
    UsageError,
)
from toolnexus.manifest import Secret, issue_at, load_manifest

Write = Callable[[str, str], Path]

FULL = """
# yaml-language-server: $schema=../toolnexus/manifest/schema.json
version: 1
name: acme-tools
workspace: work
roots: [../data]
builtins: [read, grep]
defaults:
  approval: ask
  timeout: 30s
  max_output: 30k
  sandbox: {filesystem: workspace-write, network: false}
middleware:
  - {timeout: 2m}
  - {truncate: 30000}
  - {audit: {path: logs/calls.jsonl}}
  - retry
  - {use: "mypkg.mw:factory", with: {timeout: 5s}}
permissions:
  allow: ["shell(git status *)", "read"]
  deny: ["read(**/.env*)"]
tools:
  - name: add
    python: mypkg.math:add
    read_only: true
    timeout: 500ms
  - name: list_dir
    command: [ls, -la, "{path}"]
    parameters:
      type: object
      properties: {path: {type: string}, timeout: {type: integer}}
    approval:
      default: allow
      rules:
        - {decision: deny, when: {path: {glob: "/etc/**"}, timeout: "30"}}
    sandbox: {filesystem: read-only, max_memory: 1MiB, timeout: 1h}
    max_output: 1MB
  - name: weather
    http:
      url: "https://api.example.com/v1/weather/{city}"
      headers: {Authorization: "Bearer ${WEATHER_TOKEN}"}
      timeout: 10
      max_response: 2KiB
  - openapi: specs/petstore.yaml
    prefix: pets_
mcp_servers:
  time:
    command: mcp-server-time
    args: [--local-timezone, UTC]
    connect_timeout: 5s
  docs:
    url: "http://127.0.0.1:9000/mcp"
"""


def test_a_full_manifest_loads_into_plain_normalised_data(write: Write, tmp_path: Path) -> None:
    path = write("tools.yaml", FULL)
    m = load_manifest(path, env={"WEATHER_TOKEN": "tok-123"})
    assert m.version == 1 and m.name == "acme-tools"
    assert m.source == path
    assert m.workspace == tmp_path / "work"
    assert m.roots == (tmp_path.parent / "data",)
    assert m.builtins == {"read": {}, "grep": {}}
    assert (m.defaults.approval, m.defaults.timeout, m.defaults.max_output) == ("ask", 30.0, 30000)
    assert m.defaults.sandbox == {"filesystem": "workspace-write", "network": False}
    assert [(d.name, d.use, d.options) for d in m.middleware] == [
        ("timeout", None, 120.0),
        ("truncate", None, 30000),
        ("audit", None, {"path": "logs/calls.jsonl"}),
        ("retry", None, None),
        (None, "mypkg.mw:factory", {"timeout": "5s"}),  # a factory's own options stay raw
    ]
    assert [(p.decision, p.text, p.where.line) for p in m.permissions] == [
        ("allow", "shell(git status *)", 19),
        ("allow", "read", 19),
        ("deny", "read(**/.env*)", 20),
    ]
    add, ls, weather, pets = m.tools
    assert (add.name, add.kind, add.spec["timeout"], add.where.line) == ("add", "python", 0.5, 22)
    assert ls.kind == "shell" and ls.spec["max_output"] == 1_000_000
    assert ls.spec["sandbox"] == {
        "filesystem": "read-only",
        "max_memory": 1_048_576,
        "timeout": 3600.0,
    }
    # argument schemas and matchers are the user's data: a `timeout` there is not a duration
    assert ls.spec["parameters"]["properties"]["timeout"] == {"type": "integer"}
    assert ls.spec["approval"]["rules"][0]["when"]["timeout"] == "30"
    assert weather.kind == "http"
    assert weather.spec["http"]["timeout"] == 10.0
    assert weather.spec["http"]["max_response"] == 2048
    assert weather.spec["http"]["headers"]["Authorization"] == "Bearer tok-123"
    assert pets.kind == "openapi" and pets.name is None
    assert tmp_path / "specs" / "petstore.yaml" in m.files
    assert all(t.base_dir == tmp_path for t in m.tools)
    time, docs = m.mcp_servers
    assert time.spec["transport"] == "stdio" and time.spec["connect_timeout"] == 5.0
    assert docs.spec["transport"] == "http"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("500ms", 0.5), ("30s", 30.0), ("2m", 120.0), ("1h", 3600.0), (3, 3.0), ("1.5s", 1.5)],
)
def test_durations_become_float_seconds(text: object, expected: float) -> None:
    m = load_manifest({"version": 1, "defaults": {"timeout": text}})
    assert m.defaults.timeout == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1MB", 1_000_000),
        ("1MiB", 1_048_576),
        ("30k", 30_000),
        ("30KB", 30_000),
        (512, 512),
        ("2GiB", 2 * 1024**3),
    ],
)
def test_sizes_become_ints(text: object, expected: int) -> None:
    assert (
        load_manifest({"version": 1, "defaults": {"max_output": text}}).defaults.max_output
        == expected
    )


def test_a_bad_unit_names_the_expected_form_and_line(write: Write) -> None:
    path = write(
        "t.yaml",
        """
        version: 1
        defaults:
          timeout: 30 seconds
          max_output: lots
    """,
    )
    with pytest.raises(ManifestSchemaError) as err:
        load_manifest(path)
    first, second = err.value.issues
    assert (first.line, first.column, first.field) == (3, 12, "defaults.timeout")
    assert "500ms, 30s, 2m or 1h" in first.message
    assert (second.line, second.field) == (4, "defaults.max_output")
    assert "1MB or 1MiB" in second.message


def test_env_interpolation_forms(write: Write) -> None:
    m = load_manifest(
        {
            "version": 1,
            "name": "${A}-${MISSING:-fallback}-${EMPTY:-d}-${EMPTY-kept}-$${LITERAL}-$1 ${B}",
        },
        env={"A": "a", "EMPTY": "", "B": "${NOT_EXPANDED}"},
    )
    assert m.name == "a-fallback-d--${LITERAL}-$1 ${NOT_EXPANDED}"


def test_an_unset_variable_names_file_line_and_variable_not_values(write: Write) -> None:
    path = write(
        "t.yaml",
        """
        version: 1
        tools:
          - name: w
            http:
              url: "https://x/${HOST}"
              headers: {Authorization: "Bearer ${TOKEN:?ask the admin for a token}"}
    """,
    )
    with pytest.raises(ManifestEnvError) as err:
        load_manifest(path, env={"OTHER": "sekrit"})
    host, token = err.value.issues
    assert (host.file, host.line, host.field) == (str(path), 5, "tools[0].http.url")
    assert "HOST is not set" in host.message
    assert token.line == 6 and "TOKEN is not set: ask the admin for a token" in token.message
    assert "sekrit" not in str(err.value)


def test_interpolated_values_are_masked_in_repr_and_in_messages() -> None:
    env = {"TOKEN": "tok-very-secret", "MODE": "tok-very-secret"}
    m = load_manifest(
        {"version": 1, "tools": [{"name": "t", "command": ["curl", "-H", "${TOKEN}"]}]}, env=env
    )
    assert "tok-very-secret" not in repr(m)
    assert isinstance(m.tools[0].spec["command"][2], Secret)
    assert repr(m.tools[0].spec["command"][2]) == "Secret('***')"
    assert f"{m.tools[0].spec['command'][2]}" == "tok-very-secret"
    with pytest.raises(ManifestSchemaError) as err:
        load_manifest({"version": 1, "defaults": {"approval": "${MODE}"}}, env=env)
    assert "tok-very-secret" not in str(err.value)
    assert "an interpolated value" in str(err.value)


def test_malformed_reference_suggests_the_escape() -> None:
    with pytest.raises(ManifestEnvError, match=r"write \$\$\{ for a literal"):
        load_manifest({"version": 1, "name": "echo ${1}"})


def test_yaml_text_and_mapping_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    from_text = load_manifest("version: 1\nname: t\n")
    from_map = load_manifest({"version": 1, "name": "t"})
    assert from_text.name == from_map.name == "t"
    assert from_text.source is None and from_text.workspace == tmp_path


def test_wrong_source_type_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="takes a path"):
        load_manifest(42)  # type: ignore[arg-type]


def test_a_missing_file_is_a_manifest_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read the manifest: file not found"):
        load_manifest(tmp_path / "nope.yaml")


def test_yaml_12_scalars_and_anchors(write: Write) -> None:
    path = write(
        "t.yaml",
        """
        version: 1
        tools:
          - &base {name: a, command: [echo, no, on], read_only: true}
          - {<<: *base, name: b, read_only: false}
    """,
    )
    a, b = load_manifest(path).tools
    assert a.spec["command"] == ["echo", "no", "on"]  # YAML 1.2: no/on are strings
    assert (b.name, b.spec["read_only"], b.spec["command"]) == ("b", False, ["echo", "no", "on"])


def test_positions_locate_sub_fields_and_builder_errors(write: Write) -> None:
    path = write(
        "t.yaml",
        """
        version: 1
        tools:
          - name: ls
            command: [ls]
            approval:
              default: allow
              rules:
                - {decision: deny, when: {path: {glob: "/etc/**"}}}
                - {decision: ask, when: {path: {regx: "x"}}}
    """,
    )
    (ls,) = load_manifest(path).tools
    assert (ls.where.line, ls.where.column, ls.where.field) == (3, 5, "tools[0]")
    rule = ls.locate("approval.rules[1]")
    assert (rule.line, rule.column, rule.field) == (9, 11, "tools[0].approval.rules[1]")
    # a field left out (a default) is located at its closest parent
    assert ls.locate("timeout").line == 3
    issue = issue_at(ls, ConfigError("unknown matcher 'regx'", field="approval.rules[1].when.path"))
    assert (issue.file, issue.line, issue.column) == (str(path), 9, 40)
    assert (
        str(issue) == f"{path}:9:40: tools[0].approval.rules[1].when.path: unknown matcher 'regx'"
    )


def test_syntax_error_has_line_and_column(write: Write) -> None:
    path = write("t.yaml", "version: 1\ntools:\n  - name: [a\n")
    with pytest.raises(ManifestSyntaxError) as err:
        load_manifest(path)
    assert err.value.line == 4 and err.value.file == str(path)


def test_tabs_are_explained(write: Write) -> None:
    path = write("t.yaml", "version: 1\ntools:\n\t- name: a\n")
    with pytest.raises(ManifestSyntaxError, match="not tabs") as err:
        load_manifest(path)
    assert (err.value.line, err.value.column) == (3, 1)


def test_importing_the_package_loads_neither_yaml_nor_jsonschema() -> None:
    code = (
        "import sys, toolnexus.manifest\n"
        "print(sorted(m for m in ('yaml', 'jsonschema') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    assert out.stdout.strip() == "[]"
