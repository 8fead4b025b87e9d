"""The one place that reads bash: the grammar (`grammar`), command patterns matched by any
reading (`match`), and the known-safe table (`safe`). Approval and the builtin shell use it."""

from .grammar import analyze, split_command
from .match import CommandPattern, command_matches, compile_command_pattern
from .safe import is_known_safe_command

__all__ = [
    "CommandPattern",
    "analyze",
    "command_matches",
    "compile_command_pattern",
    "is_known_safe_command",
    "split_command",
]
