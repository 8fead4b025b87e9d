"""Tool names (`check_name`, `sanitize_name`): one rule every provider accepts.

Separate from the schema work because names are checked wherever a tool gets a name (the
registry, the Python, MCP and OpenAPI sources), which needs none of the derivation or validation
machinery.
"""

from __future__ import annotations

import re
import typing
import unicodedata
from typing import Final

from ..errors import UsageError

__all__ = ["NAME_PATTERN", "check_name", "is_valid_name", "sanitize_name"]


NAME_PATTERN: Final = "^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
"""The tool-name rule accepted by OpenAI, Anthropic and Gemini alike (as a JSON Schema pattern):
Gemini also wants the first character to be a letter or `_`."""

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
_UNDERSCORES = re.compile(r"_{2,}")
_HASH_LEN = 8


def is_valid_name(name: object) -> bool:
    """True when `name` is 1-64 characters of `[A-Za-z0-9_-]` starting with a letter or `_`."""
    return isinstance(name, str) and _NAME_RE.fullmatch(name) is not None


def check_name(name: object) -> str:
    """Return `name` if it is a valid tool name.

    Raises:
        UsageError: naming the bad name, the rule, and a sanitized suggestion.
    """
    if is_valid_name(name):
        return typing.cast(str, name)
    if not isinstance(name, str):
        raise UsageError(f"a tool name must be a string, not {type(name).__name__} ({name!r})")
    hint = f"; for example {sanitize_name(name)!r}" if name else ""
    raise UsageError(
        f"invalid tool name {name!r}: a name must be 1-64 characters of letters, digits, "
        f"'_' or '-', starting with a letter or '_' (the rule every provider accepts){hint}"
    )


def sanitize_name(name: str, *, max_length: int = 64) -> str:
    """Turn a name from outside (an MCP server, an OpenAPI operation) into a valid tool name.

    Accents are folded to ASCII, every other character outside `[A-Za-z0-9_-]` becomes `_`, runs
    of `_` collapse and `_` is trimmed from both ends. A name longer than `max_length` is cut and
    ends with `_` plus 8 hex digits of its hash, so two long names that share a prefix stay
    distinct and the result is the same on every run. Never returns an empty string: a name with
    nothing usable becomes `tool_<hash>`.

    Raises:
        UsageError: `max_length` is outside 16..64.
    """
    if not 16 <= max_length <= 64:
        raise UsageError(f"sanitize_name(max_length={max_length}): expected 16..64")
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    cleaned = _UNDERSCORES.sub("_", _BAD_NAME_CHARS.sub("_", folded)).strip("_").lstrip("-")
    import hashlib  # only names from outside need it; keeps `import toolnexus` light

    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]
    if not cleaned:
        return f"tool_{digest}"
    if not (cleaned[0].isalpha() or cleaned[0] == "_"):
        cleaned = f"t_{cleaned}"  # Gemini refuses a leading digit or dash
    if len(cleaned) <= max_length:
        return cleaned
    head = cleaned[: max_length - _HASH_LEN - 1].rstrip("_")
    return f"{head}_{digest}"
