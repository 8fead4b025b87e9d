"""The `toolnexus` command, in-process through `main([...])` (and `watch` as a real process)."""

from __future__ import annotations

import io
import json
import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from toolnexus.cli import main
from toolnexus.manifest import manifest_schema

from .conftest import MCP_SERVERS

MANIFEST = """
version: 1
tools:
  - name: greet
    python: "greetings:greet"
    read_only: true
  - name: broken
    description: Always fails
    command: ["false"]
  - name: deploy
    description: Deploy a service
    command: [echo, "deployed {service}"]
    parameters:
      type: object
      properties: {service: {type: string}}
      required: [service]
    approval: ask
    sandbox: {filesystem: read-only, network: false}
"""

GREETINGS = '''
def greet(name: str = "world") -> str:
    """Say hello."""
    return f"hello {name}"
'''


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    (tmp_path / "greetings.py").write_text(GREETINGS)
    path = tmp_path / "tools.yaml"
    path.write_text(MANIFEST)
    return path


@pytest.fixture(autouse=True)
def no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


# -- usage ---------------------------------------------------------------------------------------


def test_help_exits_zero_and_lists_commands_and_exit_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("validate", "list", "call", "schema", "doctor", "watch", "serve"):
        assert command in out
    assert "Exit codes" in out and "130" in out


def test_no_command_or_an_unknown_one_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 2
    assert "usage: toolnexus" in capsys.readouterr().err
    assert main(["valdate", "x.yaml"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_call_help_shows_its_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", "--help"]) == 0
    out = capsys.readouterr().out
    assert "ARGS_JSON" in out and "--yes" in out


# -- validate ------------------------------------------------------------------------------------


def test_validate_ok_prints_a_summary(tools: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tools)]) == 0
    out = capsys.readouterr().out
    assert out == f"{tools}: ok (3 tools)\n"


def test_validate_reports_every_issue_located_across_files(
    tools: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        textwrap.dedent(
            """\
            version: 1
            tools:
              - {name: a, command: [echo], descripton: x}
              - {name: b, pyton: "m:f"}
            """
        )
    )
    syntax = tmp_path / "syntax.yaml"
    syntax.write_text("version: 1\ntools: [\n")
    missing = tmp_path / "missing.yaml"
    code = main(["validate", str(tools), str(bad), str(syntax), str(missing)])
    assert code == 1
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert (
        f"{bad}:3:32: tools[0].descripton: unknown key 'descripton' in tools[0]; "
        "did you mean 'description'?"
    ) in err
    assert any(line.startswith(f"{bad}:4:15: tools[1].pyton:") for line in err)
    assert any(line.startswith(f"{bad}:4:5: tools[1]:") for line in err)
    assert any(line.startswith(f"{syntax}:3:1:") for line in err), err
    assert f"{missing}: no such file" in err
    assert f"{tools}: ok" in captured.out
    assert "4 files checked: 1 ok, 3 invalid" in captured.out


def test_validate_a_tool_problem_found_at_build_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text("version: 1\ntools:\n  - {name: x, python: 'nosuchmodule:f'}\n")
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:3:") and "nosuchmodule" in err


# -- list ----------------------------------------------------------------------------------------


def test_list_prints_a_table(tools: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", str(tools)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "SOURCE", "FLAGS", "APPROVAL", "SANDBOX"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["greet"] == ["greet", "python", "read-only,open-world", "default", "-"]
    assert rows["deploy"] == [
        "deploy",
        "shell",
        "destructive,open-world",
        "ask",
        "read-only,no-net",
    ]
    assert sorted(rows) == ["broken", "deploy", "greet"]
    assert "\x1b[" not in "\n".join(lines)  # not a terminal: no colour


def test_list_json(tools: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", str(tools), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in data["tools"]] == ["broken", "deploy", "greet"]
    deploy = data["tools"][1]
    assert deploy["approval"] == "ask" and deploy["sandbox"] == "read-only,no-net"
    assert deploy["description"] == "Deploy a service"
    assert data["status"] == {}


def test_list_of_a_broken_or_missing_manifest_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text("version: 2\n")
    assert main(["list", str(path)]) == 1
    assert f"{path}:1:10: version:" in capsys.readouterr().err
    assert main(["list", str(tmp_path / "nope.yaml")]) == 1
    err = capsys.readouterr().err
    assert "Error:" in err and "no such file" in err


def test_colour_only_on_a_terminal_and_never_with_no_color(
    tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["list", str(tools)]) == 0
    assert terminal.getvalue().startswith("\x1b[1mNAME")

    monkeypatch.setenv("NO_COLOR", "1")
    plain = Terminal()
    monkeypatch.setattr(sys, "stdout", plain)
    assert main(["list", str(tools)]) == 0
    assert "\x1b[" not in plain.getvalue()


# -- call ----------------------------------------------------------------------------------------


def test_call_prints_the_result(tools: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", str(tools), "greet", '{"name": "cli"}']) == 0
    assert capsys.readouterr().out == "hello cli\n"
    assert main(["call", str(tools), "greet"]) == 0  # ARGS_JSON defaults to {}
    assert capsys.readouterr().out == "hello world\n"


def test_call_json_output(tools: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", str(tools), "greet", "{}", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["content"] == "hello world" and data["is_error"] is False


def test_call_error_result_exits_one(tools: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", str(tools), "broken"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "exit" in captured.err.lower()
    assert main(["call", str(tools), "gret"]) == 1
    assert "did you mean 'greet'" in capsys.readouterr().err


def test_call_bad_args_json_is_a_usage_error(
    tools: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["call", str(tools), "greet", "{name: x}"]) == 2
    err = capsys.readouterr().err
    assert "Error: ARGS_JSON is not valid JSON" in err and "Quote it" in err
    assert main(["call", str(tools), "greet", "[1, 2]"]) == 2
    assert "must be a JSON object" in capsys.readouterr().err


def test_call_ask_rule_approved_by_yes(tools: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", str(tools), "deploy", '{"service": "web"}', "--yes"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "deployed web\n"
    assert "approved by --yes: deploy" in captured.err


def test_call_ask_rule_refused_without_a_terminal(
    tools: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # not a terminal: never read
    assert main(["call", str(tools), "deploy", '{"service": "web"}']) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no terminal to ask; pass --yes" in captured.err
    assert "denied" in captured.err


@pytest.mark.parametrize(("answer", "code"), [("y\n", 0), ("n\n", 1), ("\n", 1)])
def test_call_ask_rule_asks_on_a_terminal(
    tools: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    code: int,
) -> None:
    monkeypatch.setattr(sys, "stdin", Terminal(answer))
    assert main(["call", str(tools), "deploy", '{"service": "web"}']) == code
    captured = capsys.readouterr()
    assert 'Allow deploy({"service": "web"})?' in captured.err and "[y/N]" in captured.err
    assert (captured.out == "deployed web\n") is (code == 0)


# -- schema and doctor ---------------------------------------------------------------------------


def test_schema_prints_the_manifest_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema == manifest_schema()
    assert "version" in schema["properties"] and "tools" in schema["properties"]


def test_doctor_reports_mechanisms_and_ripgrep(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^sandbox +(bwrap|landlock|none) +best mechanism$", out, re.M), out
    assert "  bwrap " in out and "  landlock " in out
    assert re.search(r"^ripgrep +(ok|missing) ", out, re.M), out
    assert re.search(r"^launch +ok +resident launcher per toolkit and policy", out, re.M), out


def test_doctor_with_a_manifest_checks_its_mcp_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tools.yaml"
    server = f"{{command: {sys.executable}, args: ['{MCP_SERVERS / 'everything.py'}']"
    path.write_text(
        "version: 1\nmcp_servers:\n"
        f"  good: {server}, tools: {{include: [echo, add]}}}}\n"
        f"  gone: {{command: {tmp_path / 'no-such-server'}, connect_timeout: 5s}}\n"
    )
    assert main(["doctor", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:\n" in out and "\n  2 tools\n" in out
    good = next(line for line in out.splitlines() if "mcp good" in line)
    assert good.split()[2] == "ok" and good.split()[4:] == ["2", "tools"]
    assert re.fullmatch(r"\d+\.\ds", good.split()[3])  # how long it took to start
    gone = next(line for line in out.splitlines() if "mcp gone" in line)
    assert gone.split()[2] == "failed"


# -- watch ---------------------------------------------------------------------------------------


def test_watch_prints_each_reload_until_terminated(tmp_path: Path) -> None:
    (tmp_path / "greetings.py").write_text(GREETINGS)
    path = tmp_path / "tools.yaml"
    path.write_text("version: 1\ntools:\n  - {name: greet, python: 'greetings:greet'}\n")
    env = {**os.environ, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolnexus", "watch", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: queue.Queue[tuple[str, str]] = queue.Queue()

    def pump(name: str, stream: io.TextIOBase) -> None:
        for line in stream:
            lines.put((name, line.rstrip("\n")))

    readers = [
        threading.Thread(target=pump, args=(name, stream), daemon=True)
        for name, stream in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for r in readers:
        r.start()
    try:
        assert lines.get(timeout=30) == (
            "out",
            f"watching {path}: generation 1, greet; Ctrl-C to stop",
        )
        tmp = tmp_path / ".tools.yaml.tmp"
        tmp.write_text(
            "version: 1\ntools:\n  - {name: greet, python: 'greetings:greet'}\n"
            "  - {name: hello, python: 'greetings:greet'}\n"
        )
        os.replace(tmp, path)
        assert lines.get(timeout=10) == ("out", "✓ generation 2: +hello")
        path.write_text("version: 1\ntools: [\n")
        stream, text = lines.get(timeout=10)
        assert stream == "err"
        assert text.startswith(f"✗ reload failed, generation 2 kept: {path}:3:1:")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=10)
    assert code == 143


def test_validate_counts_mcp_servers_apart_from_tools(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).parents[1] / "configs" / "example.yaml"
    assert main(["validate", str(example)]) == 0
    assert "9 tools, 1 MCP server (not started)" in capsys.readouterr().out


def test_call_prints_mixed_content_in_the_order_it_was_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Text after an image (a `TextPart`) is printed where it came, and `--json` shows it."""
    server = f"{{command: {sys.executable}, args: ['{MCP_SERVERS / 'everything.py'}']}}"
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(f"version: 1\nmcp_servers:\n  every: {server}\n")
    assert main(["call", str(manifest), "media"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == ["first", "[ImagePart image/png]", "[AudioPart audio/wav]", "second"]
    assert main(["call", str(manifest), "media", "--json"]) == 0
    parts = json.loads(capsys.readouterr().out)["parts"]
    assert parts[:3] == [
        {"type": "ImagePart", "mime_type": "image/png"},
        {"type": "AudioPart", "mime_type": "audio/wav"},
        {"type": "TextPart", "text": "second"},
    ]
