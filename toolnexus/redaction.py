"""Which argument values are secrets by their key, and the copy of arguments that hides them.

One reading for everything that records a call: the `audit` middleware's JSON lines and the
`trace` middleware's recorded arguments mask the same keys, so a secret hidden from one record
is never shown by the other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["SECRET_KEYS", "redact_arguments"]

SECRET_KEYS = re.compile(
    r"(pass(word|wd)?|secret|token|api[_-]?key|auth|credential|private[_-]?key|cookie|session)",
    re.IGNORECASE,
)


def redact_arguments(value: Any, pattern: re.Pattern[str] = SECRET_KEYS) -> Any:
    """A copy of `value` where every value under a secret-looking key is `***`."""
    if isinstance(value, Mapping):
        return {
            k: "***" if isinstance(k, str) and pattern.search(k) else redact_arguments(v, pattern)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_arguments(v, pattern) for v in value]
    return value
