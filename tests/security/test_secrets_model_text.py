"""Secrets never reach what the model reads: `${VAR}` is filled in only where a value is sent
to a program or a server, and is a located load error in a tool's name, title, description,
parameter schema (any text in it), a name prefix, or an approval rule's reason (which refusals
quote to the model).

Before, each of these manifests loaded, and the model saw the variable's value unmasked.
Included files and packaged tool sets go through the same loader: a tool set someone else wrote
cannot pull the user's secret into the model's context either.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from toolnexus import ManifestError, create_toolkit
from toolnexus.manifest import load_manifest

SECRET = "sk-live-0123456789abcdef"
ENV = {"API_TOKEN": SECRET, "REGION": "eu-west-1-secret"}


def write(folder: Path, text: str, name: str = "tools.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def refused(path: Path, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ManifestError) as caught:
        load_manifest(path, env=ENV if env is None else env)
    message = str(caught.value)
    assert SECRET not in message
    return message


TOOL = """
version: 1
tools:
  - name: deploy
    command: [echo, deployed]
    {field}
"""

CASES = {
    "description": ("description: 'Deploys with ${API_TOKEN}'", "tools[0].description", 5, 18),
    "title": ("title: 'Deploy (${API_TOKEN})'", "tools[0].title", 5, 12),
    "schema description": (
        "parameters: {type: object, properties: {t: {type: string, description: '${API_TOKEN}'}}}",
        "tools[0].parameters.properties.t.description",
        5,
        76,
    ),
    "schema enum": (
        "parameters: {type: object, properties: {t: {enum: ['${API_TOKEN}', b]}}}",
        "tools[0].parameters.properties.t.enum[0]",
        5,
        56,
    ),
    "schema default": (
        "parameters: {type: object, properties: {t: {type: string, default: '${API_TOKEN}'}}}",
        "tools[0].parameters.properties.t.default",
        5,
        72,
    ),
    "schema examples": (
        "parameters: {type: object, properties: {t: {examples: ['${API_TOKEN}']}}}",
        "tools[0].parameters.properties.t.examples[0]",
        5,
        60,
    ),
    "a default is still an environment read": (
        "description: 'Deploys to ${REGION:-eu}'",
        "tools[0].description",
        5,
        18,
    ),
    "approval reason": (
        "approval: {rules: [{decision: deny, when: {}, reason: 'ask ${API_TOKEN}'}]}",
        "tools[0].approval.rules[0].reason",
        5,
        59,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_environment_reference_in_text_the_model_reads_is_a_located_error(
    tmp_path: Path, case: str
) -> None:
    field, where, line, column = CASES[case]
    path = write(tmp_path, TOOL.format(field=field))
    message = refused(path)
    assert f"tools.yaml:{line}:{column}: {where}:" in message, message
    assert "text the model reads" in message
    assert "$${" in message  # the fix for a literal ${


def test_a_tool_name_and_a_prefix_are_read_by_the_model_too(tmp_path: Path) -> None:
    write(tmp_path, "version: 1\ntools:\n  - {name: inner, command: [echo, hi]}\n", "inner.yaml")
    path = write(
        tmp_path,
        """
        version: 1
        include:
          - {path: inner.yaml, prefix: "${API_TOKEN}_"}
        tools:
          - name: "t${API_TOKEN}"
            command: [echo, hi]
        mcp_servers:
          s: {command: echo, prefix: "${API_TOKEN}"}
        """,
    )
    message = refused(path)
    for where in ("include[0].prefix", "tools[0].name", "mcp_servers.s.prefix"):
        assert f"{where}:" in message, message


def test_an_included_file_cannot_pull_a_secret_into_a_description(tmp_path: Path) -> None:
    write(
        tmp_path,
        """
        version: 1
        tools:
          - name: leak
            description: "Token: ${API_TOKEN}"
            command: [echo, hi]
        """,
        "shared.yaml",
    )
    path = write(tmp_path, "version: 1\ninclude: [shared.yaml]\n")
    message = refused(path)
    assert "shared.yaml:4:18: tools[0].description:" in message, message


def test_a_packaged_tool_set_cannot_pull_a_secret_into_a_description(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACME_LEAK_TOKEN", SECRET)
    path = write(tmp_path, "version: 1\ninclude: ['package:acme_tools/leaky.yaml']\n")
    with pytest.raises(ManifestError) as caught, create_toolkit(path):
        pass
    message = str(caught.value)
    assert "leaky.yaml:5:18: tools[0].description:" in message, message
    assert SECRET not in message


def test_values_sent_to_programs_and_literal_dollars_still_work(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        version: 1
        tools:
          - name: deploy
            description: "Costs $$5; runs with $${TOKEN} set; see $HOME"
            command: [sh, -c, 'printf "%s" "$TOKEN"']
            env: {TOKEN: "${API_TOKEN}"}
        """,
    )
    manifest = load_manifest(path, env=ENV)
    (tool,) = manifest.tools
    assert tool.spec["description"] == "Costs $$5; runs with ${TOKEN} set; see $HOME"
    assert str(tool.spec["env"]["TOKEN"]) == SECRET
