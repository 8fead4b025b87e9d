"""Codex's command-safety cases (`../shared/conformance/codex-command-safety/`, see its
SOURCE.md): no command Codex calls unsafe may be known-safe here, unless it is listed below with
the reason. A case Codex calls safe that we refuse is only a missed convenience (counted, not
asserted)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from toolnexus import is_known_safe_command

CASES = Path(__file__).resolve().parents[2] / ".." / "shared" / "conformance"
CASES = CASES / "codex-command-safety" / "cases.jsonl"

DIFFERENCES = {
    'echo "hi ${USER}"': "echo only prints: a variable's value cannot make it do anything else",
    'echo "$HOME"': "echo only prints: a variable's value cannot make it do anything else",
    "echo $HOME": "echo only prints: a variable's value cannot make it do anything else",
    'echo "hi $USER"': "echo only prints: a variable's value cannot make it do anything else",
    "echo hi & echo bye": "a background job of a read-only program still only reads",
}
"""Scripts Codex asks for that we run unasked, and why that is safe."""


def _cases() -> list[tuple[bool, list[str]]]:
    if not CASES.is_file():
        pytest.skip(f"Codex command-safety cases not found at {CASES} (../shared is absent)")
    lines = CASES.read_text().splitlines()
    return [(c["safe"], c["argv"]) for c in map(json.loads, lines) if c]


def _readings(argv: list[str]) -> list[str]:
    """The command as a line of bash, and for `bash -lc SCRIPT` the script alone."""
    readings = [shlex.join(argv)]
    if len(argv) == 3 and argv[0] in ("bash", "zsh", "sh") and argv[1] in ("-c", "-lc"):
        readings.append(argv[2])
    return readings


def test_no_case_codex_calls_unsafe_is_known_safe() -> None:
    cases = _cases()
    unsafe = [argv for safe, argv in cases if not safe]
    assert len(unsafe) > 50  # the file is the one SOURCE.md describes
    bypasses = [
        (argv, reading)
        for argv in unsafe
        for reading in _readings(argv)
        if is_known_safe_command(reading) and reading not in DIFFERENCES
    ]
    assert bypasses == []


def test_every_listed_difference_is_a_case_and_still_differs() -> None:
    scripts = {argv[-1] for safe, argv in _cases() if not safe}
    for script in DIFFERENCES:
        assert script in scripts, script
        assert is_known_safe_command(script), script


def test_most_cases_codex_calls_safe_stay_known_safe() -> None:
    """Not a guard, a measure of convenience: wrappers (`bash -lc`, `zsh -lc`), `git -C .`
    and macOS-only forms are refused here on purpose."""
    safe = [argv for ok, argv in _cases() if ok]
    allowed = [argv for argv in safe if any(map(is_known_safe_command, _readings(argv)))]
    assert len(allowed) >= 0.9 * len(safe), [a for a in safe if a not in allowed]
