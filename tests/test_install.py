"""`toolnexus install`, run as a real process with HOME and the working folder in tmp_path.

Each client's file is created from nothing and merged into a file the user already has (other
servers, other keys, TOML comments and tables kept); an existing entry is refused without
`--force` and replaced with a backup with it; `--dry-run` writes nothing; an invalid manifest
is refused; a token is referred to by its variable, never written; and the stdio entry, read
back from the file, starts a server an MCP client lists the tools of.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest
from mcp import StdioServerParameters

STARTUP = 60.0
"""Bound on a server's start and listing (the machine is shared; `import mcp` takes a second)."""

MANIFEST = """\
version: 1
name: "Team Tools!"
tools:
  - name: hello
    description: Say hello
    command: [echo, hello]
    read_only: true
"""

FILES = {
    "claude-code": ".mcp.json",
    "claude-desktop": "home/.config/Claude/claude_desktop_config.json",
    "cursor": "home/.cursor/mcp.json",
    "vscode": ".vscode/mcp.json",
    "codex": "home/.codex/config.toml",
}
"""Where each client's file lands, relative to tmp_path (HOME is tmp_path/home, on Linux)."""

KEYS = {"vscode": "servers", "codex": "mcp_servers"}


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.yaml"
    path.write_text(MANIFEST, encoding="utf-8")
    (tmp_path / "home").mkdir()
    return path


def run(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m toolnexus install ARGV` with HOME and the working folder in tmp_path."""
    child = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME", "APPDATA", "NO_COLOR")}
    child |= {"HOME": str(tmp_path / "home"), "NO_COLOR": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", "toolnexus", "install", *argv],
        check=False,
        cwd=tmp_path,
        env=child,
        capture_output=True,
        text=True,
        timeout=STARTUP,
    )


def read(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)


def servers(client: str, path: Path) -> dict[str, Any]:
    return read(path)[KEYS.get(client, "mcpServers")]


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".*.bak"))


# -- created from nothing ------------------------------------------------------------------------


@pytest.mark.parametrize("client", sorted(FILES))
def test_each_client_file_is_created_with_the_stdio_entry(
    client: str, tools: Path, tmp_path: Path
) -> None:
    done = run(tmp_path, client, "tools.yaml")

    assert done.returncode == 0, done.stderr
    path = tmp_path / FILES[client]
    entry = servers(client, path)["Team-Tools"]  # the manifest's name:, sanitised
    # The interpreter running now, by an absolute path, and the manifest's absolute path.
    assert entry["command"] == os.path.abspath(sys.executable)
    assert entry["args"] == ["-m", "toolnexus", "serve", str(tools.resolve())]
    assert entry.get("type") == ("stdio" if client == "vscode" else None)
    assert f"{path}: server 'Team-Tools' added (new file)" in done.stdout
    assert backups(path) == []


def test_the_default_name_is_the_file_stem_without_a_manifest_name(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "my tools.v2.yaml").write_text("version: 1\n", encoding="utf-8")

    done = run(tmp_path, "claude-code", "my tools.v2.yaml")

    assert done.returncode == 0, done.stderr
    assert list(servers("claude-code", tmp_path / ".mcp.json")) == ["my-tools-v2"]


def test_project_files_and_an_explicit_config(tools: Path, tmp_path: Path) -> None:
    assert run(tmp_path, "cursor", "tools.yaml", "--project").returncode == 0
    assert "Team-Tools" in servers("cursor", tmp_path / ".cursor" / "mcp.json")
    assert run(tmp_path, "codex", "tools.yaml", "--project").returncode == 0
    assert "Team-Tools" in servers("codex", tmp_path / ".codex" / "config.toml")
    other = tmp_path / "elsewhere" / "desktop.json"
    assert run(tmp_path, "claude-desktop", "tools.yaml", "--config", str(other)).returncode == 0
    assert "Team-Tools" in servers("claude-desktop", other)
    assert not (tmp_path / FILES["claude-desktop"]).exists()


# -- merged into what is there -------------------------------------------------------------------


@pytest.mark.parametrize("client", ["claude-code", "claude-desktop", "cursor", "vscode"])
def test_json_keeps_every_other_entry_and_key_in_order(
    client: str, tools: Path, tmp_path: Path
) -> None:
    path = tmp_path / FILES[client]
    path.parent.mkdir(parents=True, exist_ok=True)
    key = KEYS.get(client, "mcpServers")
    before = {
        "inputs": [{"type": "promptString", "id": "k", "password": True}],
        key: {"zeta": {"command": "z"}, "alpha": {"url": "https://a/mcp"}},
        "globalShortcut": "Ctrl+Space",
    }
    path.write_text(json.dumps(before, indent=4), encoding="utf-8")

    done = run(tmp_path, client, "tools.yaml", "--name", "mine")

    assert done.returncode == 0, done.stderr
    after = read(path)
    assert list(after) == ["inputs", key, "globalShortcut"]
    assert after["inputs"] == before["inputs"] and after["globalShortcut"] == "Ctrl+Space"
    assert list(after[key]) == ["zeta", "alpha", "mine"]
    assert after[key]["zeta"] == {"command": "z"} and after[key]["alpha"] == {
        "url": "https://a/mcp"
    }
    (backup,) = backups(path)
    assert json.loads(backup.read_text(encoding="utf-8")) == before


CODEX_CONFIG = """\
# my Codex settings
model = "gpt-5"  # the one I like

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]  # pinned later

[mcp_servers.docs.env]
DOCS_LANG = "en"

[profiles.fast]
model = "gpt-5-mini"
"""


def test_toml_keeps_comments_other_servers_and_tables(tools: Path, tmp_path: Path) -> None:
    path = tmp_path / FILES["codex"]
    path.parent.mkdir(parents=True)
    path.write_text(CODEX_CONFIG, encoding="utf-8")

    done = run(tmp_path, "codex", "tools.yaml")

    assert done.returncode == 0, done.stderr
    text = path.read_text(encoding="utf-8")
    for line in CODEX_CONFIG.splitlines():
        assert line in text  # every line, comments included, is still there
    after = tomllib.loads(text)
    before = tomllib.loads(CODEX_CONFIG)
    assert after["model"] == "gpt-5" and after["profiles"] == before["profiles"]
    assert after["mcp_servers"]["docs"] == before["mcp_servers"]["docs"]
    assert after["mcp_servers"]["Team-Tools"]["args"][-1] == str(tools.resolve())
    assert [b.read_text(encoding="utf-8") for b in backups(path)] == [CODEX_CONFIG]


def test_toml_keys_that_need_quoting_and_inline_tables(tools: Path, tmp_path: Path) -> None:
    path = tmp_path / FILES["codex"]
    path.parent.mkdir(parents=True)
    path.write_text('mcp_servers = { "a b" = { command = "x" } }\n', encoding="utf-8")

    done = run(tmp_path, "codex", "tools.yaml")

    assert done.returncode == 0, done.stderr
    after = tomllib.loads(path.read_text(encoding="utf-8"))["mcp_servers"]
    assert after["a b"] == {"command": "x"} and "Team-Tools" in after


# -- an existing entry ---------------------------------------------------------------------------


@pytest.mark.parametrize("client", sorted(FILES))
def test_an_existing_entry_is_refused_without_force(
    client: str, tools: Path, tmp_path: Path
) -> None:
    assert run(tmp_path, client, "tools.yaml").returncode == 0
    path = tmp_path / FILES[client]
    before = path.read_bytes()

    argv = ("--http", "https://tools.example.com/mcp") if client != "claude-desktop" else ()
    done = run(tmp_path, client, "tools.yaml", *argv)

    assert done.returncode == 1
    assert str(path) in done.stderr and "'Team-Tools'" in done.stderr and "--force" in done.stderr
    assert path.read_bytes() == before and backups(path) == []


@pytest.mark.parametrize("client", sorted(FILES))
def test_force_replaces_and_backs_up_keeping_the_mode(
    client: str, tools: Path, tmp_path: Path
) -> None:
    assert run(tmp_path, client, "tools.yaml").returncode == 0
    path = tmp_path / FILES[client]
    path.chmod(0o600)
    before = path.read_text(encoding="utf-8")

    done = run(tmp_path, client, "tools.yaml", "--force", "--name", "Team-Tools", "--dry-run")
    assert done.returncode == 0 and "would be replaced" in done.stdout
    assert backups(path) == []

    url = "http://127.0.0.1:8765/mcp"
    argv = ("--http", url) if client != "claude-desktop" else ()
    done = run(tmp_path, client, "tools.yaml", "--force", *argv)

    assert done.returncode == 0, done.stderr
    assert "'Team-Tools' replaced" in done.stdout
    (backup,) = backups(path)
    assert backup.read_text(encoding="utf-8") == before and f"backup: {backup}" in done.stdout
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    entry = servers(client, path)["Team-Tools"]
    assert entry.get("url") == (url if argv else None)
    assert list(servers(client, path)) == ["Team-Tools"]
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


# -- writing nothing -----------------------------------------------------------------------------


@pytest.mark.parametrize("client", sorted(FILES))
def test_dry_run_writes_nothing(client: str, tools: Path, tmp_path: Path) -> None:
    done = run(tmp_path, client, "tools.yaml", "--dry-run")

    assert done.returncode == 0, done.stderr
    assert "would be added" in done.stdout and "nothing written" in done.stdout
    assert str(tools.resolve()) in done.stdout  # the entry is shown, in the file's own format
    assert ("[mcp_servers.Team-Tools]" in done.stdout) == (client == "codex")
    assert not (tmp_path / FILES[client]).exists()
    assert not (tmp_path / FILES[client]).parent.exists() or client == "claude-code"


def test_an_invalid_manifest_is_refused(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "tools.yaml").write_text(
        "version: 1\ntools:\n  - name: x\n    comand: [echo]\n", encoding="utf-8"
    )

    done = run(tmp_path, "claude-code", "tools.yaml")

    assert done.returncode == 1
    assert "tools.yaml:4:5" in done.stderr and "did you mean 'command'" in done.stderr
    assert not (tmp_path / ".mcp.json").exists()


def test_a_missing_manifest_is_refused(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    done = run(tmp_path, "cursor", "nope.yaml")
    assert done.returncode == 1 and "nope.yaml: no such file" in done.stderr


def test_a_file_that_is_not_plain_json_is_left_alone(tools: Path, tmp_path: Path) -> None:
    path = tmp_path / ".vscode" / "mcp.json"
    path.parent.mkdir()
    text = '{\n  // my servers\n  "servers": {}\n}\n'
    path.write_text(text, encoding="utf-8")

    done = run(tmp_path, "vscode", "tools.yaml")

    assert done.returncode == 1
    assert f"{path}:2:3: not plain JSON" in done.stderr
    assert path.read_text(encoding="utf-8") == text and backups(path) == []


def test_a_config_path_that_is_a_folder_is_an_error_not_a_traceback(
    tools: Path, tmp_path: Path
) -> None:
    (tmp_path / ".mcp.json").mkdir()
    done = run(tmp_path, "claude-code", "tools.yaml")
    assert done.returncode == 1
    assert f"{tmp_path / '.mcp.json'}: cannot read it" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_symlinked_config_stays_a_symlink(tools: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text('{"mcpServers": {}}', encoding="utf-8")
    link = tmp_path / "home" / ".cursor" / "mcp.json"
    link.parent.mkdir()
    link.symlink_to(real)

    assert run(tmp_path, "cursor", "tools.yaml").returncode == 0
    assert link.is_symlink() and "Team-Tools" in servers("cursor", real)


# -- usage errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["claude-desktop", "--http", "https://t.example/mcp"], "Settings > Connectors"),
        (["cursor", "--token-env", "TOK"], "--token-env goes with --http"),
        (["cursor", "--http", "https://t/mcp", "--token-env", "s3cr3t-token!"], "not an environ"),
        (["cursor", "--http", "ftp://t/mcp"], "is not an http(s) URL"),
        (["cursor", "--name", "my tools"], "e.g. --name my-tools"),
        (["vscode", "--project"], "--project applies to cursor and codex"),
        (["emacs"], "invalid choice"),
    ],
)
def test_usage_errors_exit_2_and_write_nothing(
    argv: list[str], message: str, tools: Path, tmp_path: Path
) -> None:
    done = run(tmp_path, argv[0], "tools.yaml", *argv[1:])

    assert done.returncode == 2
    assert message in done.stderr
    assert [p.name for p in tmp_path.rglob("*.json")] == []


# -- HTTP entries and tokens ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("client", "expected"),
    [
        (
            "claude-code",
            {"type": "http", "url": "U", "headers": {"Authorization": "Bearer ${TEAM_TOKEN}"}},
        ),
        ("cursor", {"url": "U", "headers": {"Authorization": "Bearer ${env:TEAM_TOKEN}"}}),
        (
            "vscode",
            {"type": "http", "url": "U", "headers": {"Authorization": "Bearer ${env:TEAM_TOKEN}"}},
        ),
        ("codex", {"url": "U", "bearer_token_env_var": "TEAM_TOKEN"}),
    ],
)
def test_http_entries_name_the_token_variable_never_the_token(
    client: str, expected: dict[str, Any], tools: Path, tmp_path: Path
) -> None:
    url = "https://tools.example.com/mcp"
    done = run(
        tmp_path,
        client,
        "tools.yaml",
        "--http",
        url,
        "--token-env",
        "TEAM_TOKEN",
        TEAM_TOKEN="tok-do-not-write",
        TOOLNEXUS_TOKEN="tok-do-not-write",
    )

    assert done.returncode == 0, done.stderr
    path = tmp_path / FILES[client]
    assert servers(client, path)["Team-Tools"] == json.loads(json.dumps(expected).replace("U", url))
    assert "tok-do-not-write" not in path.read_text(encoding="utf-8") + done.stdout


# -- the written entry runs ----------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("client", ["claude-code", "codex"])
async def test_the_written_stdio_entry_starts_a_working_server(
    client: str, tools: Path, tmp_path: Path
) -> None:
    done = run(tmp_path, client, "tools.yaml")
    assert done.returncode == 0, done.stderr
    entry = servers(client, tmp_path / FILES[client])["Team-Tools"]
    elsewhere = tmp_path / "elsewhere"  # clients start servers in a folder of their own
    elsewhere.mkdir()

    # As a client does: the command and args as written, the SDK's default environment (no
    # PYTHONPATH, no virtualenv activation), another working folder.
    params = StdioServerParameters(command=entry["command"], args=entry["args"], cwd=elsewhere)
    with anyio.fail_after(STARTUP):
        async with mcp.Client(params, mode="legacy", read_timeout_seconds=STARTUP) as session:
            listed = (await session.list_tools()).tools
            assert [t.name for t in listed] == ["hello"]
            result = await session.call_tool("hello", {})
            assert not result.is_error
            assert result.content[0].text.strip() == "hello"  # type: ignore[union-attr]
