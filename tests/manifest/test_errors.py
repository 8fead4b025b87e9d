"""Every manifest error class, with the message a user sees; all problems reported at once."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from toolnexus.errors import (
    DuplicateToolError,
    IncludeError,
    ManifestEnvError,
    ManifestError,
    ManifestSchemaError,
    ManifestSyntaxError,
)
from toolnexus.manifest import SCHEMA_PATH, load_manifest, manifest_schema
from toolnexus.manifest.validate import Violation, compile_schema

Write = Callable[[str, str], Path]


def test_syntax_error(write: Write) -> None:
    path = write("t.yaml", "version: 1\ntools: [a\n")
    with pytest.raises(ManifestSyntaxError) as err:
        load_manifest(path)
    assert str(err.value) == (
        f"{path}:3:1: did not find expected ',' or ']' (while parsing a flow sequence at line 2)"
    )


def test_duplicate_yaml_keys_are_an_error_not_last_wins(write: Write) -> None:
    path = write(
        "t.yaml",
        """
        version: 1
        tools:
          - name: a
            command: [ls]
            name: b
    """,
    )
    with pytest.raises(ManifestSyntaxError) as err:
        load_manifest(path)
    (issue,) = err.value.issues
    assert (issue.line, issue.column, issue.field) == (5, 5, "tools[0].name")
    assert issue.message == (
        "duplicate key 'name' (first written at line 3); YAML keys must be unique: "
        "remove or rename one"
    )


def test_unknown_key_did_you_mean_at_the_key(write: Write) -> None:
    path = write(
        "t.yaml",
        """
        version: 1
        tools:
          - name: ls
            command: [ls]
          - name: cat
            comand: [cat]
    """,
    )
    with pytest.raises(ManifestSchemaError) as err:
        load_manifest(path)
    kind, unknown = err.value.issues
    assert str(kind) == (
        f"{path}:5:5: tools[1]: expected one of the keys python, command, http, openapi; found none"
    )
    assert str(unknown) == (
        f"{path}:6:5: tools[1].comand: unknown key 'comand' in tools[1]; did you mean 'command'?"
    )


def test_two_kinds_in_one_entry() -> None:
    with pytest.raises(
        ManifestSchemaError,
        match="exactly one of the keys python, command, http, openapi; got 'python' and 'command'",
    ):
        load_manifest({"version": 1, "tools": [{"name": "x", "python": "m:f", "command": "ls"}]})


def test_all_problems_of_a_file_are_reported_at_once(write: Write) -> None:
    path = write(
        "t.yaml",
        """
        version: 2
        defaults: {approval: alow, timeout: soon}
        middleware: [retyr]
        tools:
          - name: "bad name"
            command: ls
            timout: 3
          - name: w
            http: {url: "x", methd: GET}
        mcp_servers:
          s: {args: [x]}
        extra: 1
    """,
    )
    with pytest.raises(ManifestSchemaError) as err:
        load_manifest(path)
    got = [(i.line, i.field, i.message) for i in err.value.issues]
    assert got == [
        (1, "version", "expected 1; got 2"),
        (
            2,
            "defaults.approval",
            "expected one of allow, ask, deny; got 'alow'; did you mean 'allow'?",
        ),
        (
            2,
            "defaults.timeout",
            "expected a number of seconds or a duration such as 500ms, 30s, 2m or 1h",
        ),
        (
            3,
            "middleware[0]",
            "expected one of timeout, truncate, retry, rate_limit, audit, redact, allow, deny, "
            "cache, trace; got 'retyr'; did you mean 'retry'?",
        ),
        (5, "tools[0].name", "expected 1 to 64 letters, digits, _ or -; got 'bad name'"),
        (7, "tools[0].timout", "unknown key 'timout' in tools[0]; did you mean 'timeout'?"),
        (9, "tools[1].http.methd", "unknown key 'methd' in tools[1].http; did you mean 'method'?"),
        (11, "mcp_servers.s", "expected one of the keys command, url; found none"),
        (
            12,
            "extra",
            "unknown key 'extra'; expected one of $schema, access, builtins, defaults, include, "
            "mcp_servers, middleware, name, permissions, roots, serve, tool_search, tools, "
            "version, workspace",
        ),
    ]


def test_mixed_kinds_raise_the_base_class(write: Write) -> None:
    path = write("t.yaml", "version: 1\nname: ${NOPE}\ntools: 3\n")
    with pytest.raises(ManifestError) as err:
        load_manifest(path, env={})
    assert type(err.value) is ManifestError
    assert [i.kind for i in err.value.issues] == ["env", "schema"]
    assert str(err.value).startswith("2 problems in manifest:\n")


def test_version_is_required(write: Write) -> None:
    with pytest.raises(ManifestSchemaError, match="missing required key 'version'"):
        load_manifest(write("t.yaml", "tools: []\n"))


def test_env_error_message() -> None:
    with pytest.raises(ManifestEnvError) as err:
        load_manifest("version: 1\nname: ${TEAM}\n", env={})
    assert str(err.value) == (
        "<manifest>:2:7: name: environment variable TEAM is not set; set it, or give a default "
        "with ${TEAM:-default}"
    )


def test_include_error_message(write: Write) -> None:
    write("base.yaml", "version: 1\n")
    path = write("t.yaml", "version: 1\ninclude: [bsae.yaml]\n")
    with pytest.raises(IncludeError) as err:
        load_manifest(path)
    assert str(err.value) == (
        f"{path}:2:11: include[0]: file not found: {path.parent}/bsae.yaml; "
        "did you mean 'base.yaml'?"
    )


def test_duplicate_tool_error_message(write: Write) -> None:
    path = write(
        "t.yaml",
        """
        version: 1
        tools:
          - {name: a, command: [ls]}
          - {name: a, python: "m:f"}
    """,
    )
    with pytest.raises(DuplicateToolError) as err:
        load_manifest(path)
    assert str(err.value) == (
        f"{path}:4:5: tools[1]: tool 'a' is defined twice: first at {path}:3:5, again at "
        f"{path}:4:5; rename one (or use an include's prefix or exclude)"
    )


def test_shipped_schema_is_valid_2020_12_and_agrees_with_jsonschema() -> None:
    schema = manifest_schema()
    assert schema == json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    good = {
        "version": 1,
        "builtins": "all",
        "include": [
            "a.yaml",
            {
                "path": "toolset:x",
                "only": ["g*"],
                "prefix": "p_",
                "override": {"g*": {"approval": "ask"}},
            },
        ],
        "middleware": ["retry", {"timeout": "30s"}, {"use": "m:f", "with": {}}],
        "tools": [
            {"name": "a", "python": "m:f", "isolate": "process"},
            {"name": "b", "command": "echo $1", "shell": True, "args": ["{x}"]},
            {"name": "c", "http": {"url": "u", "body": {"json": {"a": "{x}"}}}},
            {"openapi": "s.yaml", "operations": {"include": ["list*"]}},
        ],
        "mcp_servers": {"from": ".mcp.json", "s": {"url": "http://x", "transport": "sse"}},
    }
    bad = [
        {**good, "version": 2},
        {**good, "tools": [{"name": "a"}]},
        {**good, "tools": [{"name": "a", "command": "ls", "python": "m:f"}]},
        {**good, "middleware": [{"retry": {}, "audit": {}}]},
        {**good, "mcp_servers": {"s": {"command": "x", "url": "y"}}},
        {**good, "defaults": {"approval": "maybe"}},
        {**good, "tools": [{"name": "c", "http": {"url": "u", "body": {}}}]},
    ]
    check = compile_schema(schema)
    for doc in [good, *bad]:
        found: list[Violation] = []
        check(doc, (), found)
        assert validator.is_valid(doc) == (found == []), doc
    assert validator.is_valid(good)
