"""`validate` and `list` say which tools OpenAI strict mode cannot take, and why (any tool)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolnexus.cli import main

from .conftest import spec, write_spec

MANIFEST = """\
version: 1
tools:
  - name: tag
    description: Tag a thing.
    parameters:
      type: object
      properties:
        labels: {type: object, description: any labels}
      required: [labels]
    http: {method: POST, url: "https://api.example.com/tag", body: {json: "{labels}"}}
  - name: ping
    description: Ping.
    http: {url: "https://api.example.com/ping/{host}"}
  - openapi: api.json
    base_url: https://api.example.com
"""
OPS = {
    "/notes": {
        "post": {
            "operationId": "notes/create",
            "requestBody": {
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {"text": {"type": "string"}},
                            "additionalProperties": True,
                        }
                    }
                }
            },
        },
        "get": {"operationId": "notes/list"},
    }
}


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    write_spec(tmp_path, spec(OPS))
    path = tmp_path / "tools.yaml"
    path.write_text(MANIFEST)
    return path


def test_validate_names_the_tools_that_cannot_be_strict(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(manifest)]) == 0
    out = capsys.readouterr().out
    assert f"{manifest}: ok (4 tools)" in out
    assert "note: 2 tools cannot use OpenAI strict mode and will be sent non-strict:" in out
    lines = [line.strip() for line in out.splitlines()]
    tag = next(line for line in lines if line.startswith("tag:"))
    notes = next(line for line in lines if line.startswith("notes_create:"))
    assert "labels" in tag and "object" in tag
    assert "additionalProperties" in notes
    assert not any(line.startswith(("ping:", "notes_list:")) for line in lines)


def test_list_reports_them_on_stderr_and_in_json(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["list", str(manifest)]) == 0
    captured = capsys.readouterr()
    assert "notes_create" in captured.out
    assert "note: 2 tools cannot use OpenAI strict mode" in captured.err
    assert main(["list", "--json", str(manifest)]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["tools"]}
    assert rows["ping"]["strict"] is True and rows["ping"]["not_strict_because"] is None
    assert rows["tag"]["strict"] is False
    assert "labels" in rows["tag"]["not_strict_because"]


def test_a_manifest_where_every_tool_is_strict_says_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(
        "version: 1\ntools:\n  - name: ping\n    description: Ping.\n"
        '    http: {url: "https://api.example.com/ping/{host}"}\n'
    )
    assert main(["validate", str(path)]) == 0
    assert "strict" not in capsys.readouterr().out
