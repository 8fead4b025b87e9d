"""The one "did you mean" of toolnexus: every message about an unknown name words it the same way.

`difflib` is imported on the first suggestion, not with the package: only a mistake needs it.
"""

from __future__ import annotations

from collections.abc import Iterable


def closest(name: str, choices: Iterable[str], *, n: int = 1) -> list[str]:
    """Up to `n` of `choices` that look like a misspelling of `name`, best first."""
    import difflib

    return difflib.get_close_matches(name, list(choices), n=n)


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`"; did you mean 'x'?"` naming the choice closest to `name`, or `""` when none is close.

    Written to follow a message directly: `f"unknown key {key!r}{did_you_mean(key, KEYS)}"`.
    """
    close = closest(name, choices)
    return f"; did you mean {close[0]!r}?" if close else ""
