"""Durations and sizes as people write them (`30s`, `500ms`, `1MB`), normalised for the builders.

Durations become float seconds; sizes become int bytes (or characters, for `max_output`).
Decimal suffixes are powers of 1000 (`1MB` = 1_000_000), binary ones powers of 1024
(`1MiB` = 1_048_576); a bare `k`/`m`/`g`/`t` is decimal.
"""

from __future__ import annotations

import re

__all__ = ["DURATION_FORM", "SIZE_FORM", "parse_duration", "parse_size", "unit_of"]

DURATION_FORM = "a number of seconds or a duration such as 500ms, 30s, 2m or 1h"
SIZE_FORM = "an integer or a size such as 30000, 30k, 30KB, 1MB or 1MiB"

_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h)?\s*\Z")
_SECONDS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(?:([kmgt])(i?)b?|(b))?\s*\Z", re.IGNORECASE)
_POWER = {"k": 1, "m": 2, "g": 3, "t": 4}
_SIZE_KEYS = frozenset(
    {"max_output", "max_response", "max_memory", "max_file_size", "max_bytes", "max_message"}
)


def unit_of(key: str) -> str | None:
    """`"duration"`, `"size"` or None: which unit a key of this name holds."""
    if key in ("timeout", "kill_grace") or key.endswith("_timeout"):
        return "duration"
    if key in _SIZE_KEYS:
        return "size"
    return None


def parse_duration(value: object) -> float:
    """Seconds in `value` (a number or a string like `500ms`).

    Raises:
        ValueError: with a message saying what was expected (never echoing the value).
    """
    if isinstance(value, bool):
        raise ValueError(f"expected {DURATION_FORM}, got a boolean")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"expected {DURATION_FORM}, got a negative number")
        return float(value)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match is None:
            raise ValueError(f"expected {DURATION_FORM}")
        return float(match.group(1)) * _SECONDS[match.group(2)]
    raise ValueError(f"expected {DURATION_FORM}, got {_kind(value)}")


def parse_size(value: object) -> int:
    """Bytes (or characters) in `value` (an int or a string like `1MB`).

    Raises:
        ValueError: with a message saying what was expected (never echoing the value).
    """
    if isinstance(value, bool):
        raise ValueError(f"expected {SIZE_FORM}, got a boolean")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected {SIZE_FORM}, got a negative number")
        return value
    if isinstance(value, str):
        match = _SIZE.match(value)
        if match is None:
            raise ValueError(f"expected {SIZE_FORM}")
        number, prefix, binary, _ = match.groups()
        base = 1024 if binary else 1000
        return int(float(number) * base ** _POWER.get((prefix or "").lower(), 0))
    raise ValueError(f"expected {SIZE_FORM}, got {_kind(value)}")


def _kind(value: object) -> str:
    if isinstance(value, float):
        return "a fractional number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return "null" if value is None else type(value).__name__
