"""Globs in approval rules, attacked: `**/` is zero or more folders everywhere, and a path
matches a deny rule on any reading (as given, normalised, or resolved).

Permission path specs are gitignore-style by design, so `pathspec` (the gitignore library the
builtin tools use) is their oracle: a deny spec matches at least what gitignore matches.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pathspec
import pytest

from toolnexus import Toolkit, create_toolkit
from toolnexus.approval import compile_permissions, compile_rules
from toolnexus.approval.paths import _permission_path_pattern
from toolnexus.base import Result, Tool, ToolContext


async def _noop(arguments: dict[str, Any], ctx: ToolContext) -> Result:
    return Result()


TOOL = Tool(
    name="read",
    handler=_noop,
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


def verdict(decision: str, matcher: dict[str, Any], value: str, ws: Path = Path("/ws")) -> bool:
    """Whether a `decision` rule with `matcher` on `path` matches `value`."""
    default = "deny" if decision == "allow" else "allow"
    rules = compile_rules(
        {"default": default, "rules": [{"decision": decision, "when": {"path": matcher}}]}
    )
    return rules.decide(TOOL, {"path": value}, ws).matched


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("**/secret*", "secret.txt", True),  # zero folders
        ("**/secret*", "a/secret.txt", True),
        ("**/secret*", "a/b/secret", True),
        ("**/secret*", "notsecret", False),
        ("**/secret*", "a/notsecret.txt", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "a/b/c.py", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("a/**/b", "ab", False),
        ("**/{a,b}.txt", "b.txt", True),
        ("**/{a,b}.txt", "x/a.txt", True),
        ("**", "", True),
        ("x/**/", "x/", True),
        ("*.py", "a/b.py", True),  # `*` spans `/` in `glob:` (as documented)
        ("***/secret", "secret", True),
    ],
)
def test_glob_double_star_slash_is_zero_or_more_folders(
    pattern: str, value: str, expected: bool
) -> None:
    for decision in ("deny", "ask", "allow"):
        assert verdict(decision, {"glob": pattern}, value) is expected, decision


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("**/secret*", "secret.txt", True),
        ("**/secret*", "a/b/secret.txt", True),
        ("**/secret*", "a/notsecret", False),
        ("a/**/b", "a/b", True),
        ("**/.env*", ".env", True),
    ],
)
def test_path_double_star_slash_is_zero_or_more_folders(
    pattern: str, value: str, expected: bool
) -> None:
    for decision in ("deny", "allow"):
        assert verdict(decision, {"path": pattern}, value) is expected, decision


# --- permission path specs against gitignore (pathspec) ---------------------------------------

SPECS = [
    "**/.env*",
    "src/**",
    "secrets",
    "*.pem",
    "a/**/b",
    "/build",
    "docs/*.md",
    "**/node_modules/**",
    "[ab].txt",
    "?.txt",
    "**/secret*",
    "x/**/y/*.c",
    "**",
]
PATHS = [
    ".env", "a/.env.local", "src/x.py", "src", "secrets/key", "x/secrets/key", "secrets",
    "k.pem", "a/k.pem", "a/b", "a/x/y/b", "ab", "build/o", "x/build/o", "build", "docs/a.md",
    "docs/x/a.md", "node_modules/x", "a/node_modules/b/c", "node_modules", "a.txt", "c.txt",
    "ab.txt", "secret.txt", "d/secret", "notsecret", "x/y/a.c", "x/q/y/a.c", "x/y/q/a.c",
]  # fmt: skip
# Where the spec names a folder's contents (`x/**`), the folder itself matches too: a deny of
# everything inside a folder also covers listing or removing the folder.
FOLDER_ITSELF = {("src/**", "src"), ("**/node_modules/**", "node_modules")}


@pytest.mark.parametrize("spec", SPECS)
def test_permission_specs_match_what_gitignore_matches(spec: str) -> None:
    oracle = pathspec.GitIgnoreSpec.from_lines([spec])
    ours = _permission_path_pattern(spec)
    for path in PATHS:
        expected = oracle.match_file(path) or (spec, path) in FOLDER_ITSELF
        assert (ours.regex.fullmatch(path) is not None) is expected, path


# --- deny by any reading: given, normalised, resolved ----------------------------------------


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "secrets").mkdir(parents=True)
    (workspace / "secrets" / "key").write_text("k")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "innocent.txt").symlink_to(workspace / "secrets" / "key")
    (workspace / "notes.txt").write_text("n")
    return workspace


def test_deny_matches_the_given_spelling(ws: Path) -> None:
    outside = ws.parent / "outside"
    outside.mkdir()
    # as given, the path is inside the denied folder (a tool that does not normalise reads it so)
    assert verdict("deny", {"path": f"{ws}/secrets/**"}, "secrets/../notes.txt", ws)
    assert not verdict("allow", {"path": "secrets/**"}, "secrets/../notes.txt", ws)
    assert verdict("allow", {"path": "**"}, "./notes.txt", ws)  # allow still reads it normalised


def test_deny_matches_the_normalised_and_resolved_spellings(ws: Path) -> None:
    assert verdict("deny", {"path": "secrets/**"}, "docs/../secrets/key", ws)  # normalised
    assert verdict("deny", {"path": "secrets/**"}, "docs/innocent.txt", ws)  # resolved
    assert verdict("deny", {"glob": "**/secret*"}, "secrets/key", ws)
    perms = compile_permissions(deny=["read(**/secret*)"], default="allow")
    for value in ("secrets/key", "docs/innocent.txt", "x/../secrets", "./secrets/key"):
        assert perms.decide(TOOL, {"path": value}, ws).decision.value == "deny", value


def toolkit(ws: Path, **manifest: Any) -> Toolkit:
    return create_toolkit({"version": 1, "builtins": ["read"], **manifest}, workspace=ws)


def test_end_to_end_read_of_a_denied_glob_is_refused(ws: Path) -> None:
    (ws / "secret.txt").write_text("TOP-SECRET")
    os.symlink(ws / "secret.txt", ws / "harmless.md")
    deny = {"decision": "deny", "when": {"path": {"glob": "**/secret*"}}}
    rules = {"default": "allow", "rules": [deny]}
    for manifest in (
        {"permissions": {"deny": ["read(**/secret*)"]}},
        {"builtins": {"read": {"approval": rules}}},
    ):
        with toolkit(ws, **manifest) as tk:
            for value in ("secret.txt", "./secret.txt", "docs/../secret.txt"):
                result = tk.execute("read", {"path": value})
                assert result.is_error and "TOP-SECRET" not in result.content, value
            if "permissions" in manifest:  # path specs also resolve symlinks
                result = tk.execute("read", {"path": "harmless.md"})
                assert result.is_error and "TOP-SECRET" not in result.content
            assert not tk.execute("read", {"path": "notes.txt"}).is_error
