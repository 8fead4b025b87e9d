"""Reading descriptions: JSON by content, YAML through libyaml with the manifest's guards."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from toolnexus.errors import SourceError
from toolnexus.openapi import text as _spec_text
from toolnexus.openapi.text import parse_spec_text

from .conftest import build, spec

PETS = spec(
    {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "parameters": [
                    {"name": "mode", "in": "query", "schema": {"enum": ["on", "off", "no"]}},
                    {"name": "since", "in": "query", "schema": {"default": "2024-01-01"}},
                ],
            }
        }
    },
    servers=[{"url": "https://pets.example/v1"}],
)


@pytest.mark.parametrize("name", ["api.json", "api.yaml", "api"])
def test_json_is_read_by_content_whatever_the_name(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text(json.dumps(PETS, indent=2))
    tools = build({"openapi": name}, tmp_path)
    assert tools["listPets"].meta["url"] == "https://pets.example/v1/pets"


def test_yaml_named_json_and_a_flow_mapping_still_load(tmp_path: Path) -> None:
    (tmp_path / "api.json").write_text(yaml.safe_dump(PETS))
    assert "listPets" in build({"openapi": "api.json"}, tmp_path)
    flow = "{openapi: 3.0.0, info: {title: t, version: '1'}, paths: {}}"
    assert parse_spec_text(flow, "flow")["openapi"] == "3.0.0"


def test_yaml_and_json_read_the_same(tmp_path: Path) -> None:
    text = yaml.safe_dump(PETS)
    assert parse_spec_text(text.encode(), "y") == parse_spec_text(json.dumps(PETS), "j") == PETS


def test_scalars_follow_yaml_12_as_openapi_reads_them() -> None:
    doc = parse_spec_text(
        "a: [on, off, yes, no, y, 2024-01-01, 0x1F, 1_000, .5, ~, true, 010]\n200: x\n", "s"
    )
    assert doc == {
        "a": ["on", "off", "yes", "no", "y", "2024-01-01", 31, "1_000", 0.5, None, True, 10],
        "200": "x",
    }


def test_a_billion_laughs_document_is_refused_quickly() -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]")
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"bomb.yaml: line \d+: aliases expand to more than"):
        parse_spec_text("\n".join(lines), "bomb.yaml")
    assert time.monotonic() - started < 5  # refused while counting, never expanded


def test_aliases_within_the_budget_load() -> None:
    doc = parse_spec_text("base: &b {type: string}\nuse: *b\nmerged: {<<: *b, title: t}\n", "ok")
    assert doc == {
        "base": {"type": "string"},
        "use": {"type": "string"},
        "merged": {"type": "string", "title": "t"},
    }


@pytest.mark.parametrize(
    "text",
    [
        "a: !!python/object/apply:os.system ['echo pwned']\n",
        "a: !!binary aGVsbG8=\n",
        "a: !!timestamp 2024-01-01\n",
        "a: !local thing\n",
        "a: !!python/name:os.system {}\n",
    ],
)
def test_tags_outside_the_core_schema_are_refused(text: str) -> None:
    with pytest.raises(SourceError, match="unsupported tag"):
        parse_spec_text(text, "t.yaml")


def test_nesting_and_size_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    deep = "[" * 300 + "]" * 300
    with pytest.raises(SourceError, match="nested deeper than 256"):
        parse_spec_text("a: " + deep, "deep.yaml")
    monkeypatch.setattr(_spec_text, "MAX_DOCUMENT_BYTES", 100)
    with pytest.raises(SourceError, match="101 bytes, more than the 100 read"):
        parse_spec_text(b"x" * 101, "big.yaml")


def test_broken_text_names_the_line() -> None:
    with pytest.raises(SourceError, match=r"b.yaml: not valid YAML: line 3: did not find"):
        parse_spec_text("a: 1\nb: [\n", "b.yaml")
    with pytest.raises(SourceError, match=r"j.json: not valid JSON"):
        parse_spec_text('{"a": 1,,}', "j.json")


@pytest.mark.parametrize("text", ["? [a, b]\n: c\n", "? {a: 1}\n: c\n", "k: &k [1]\n*k : v\n"])
def test_a_mapping_key_must_be_plain_text(text: str) -> None:
    with pytest.raises(SourceError, match="a mapping key must be plain text"):
        parse_spec_text(text, "k.yaml")
