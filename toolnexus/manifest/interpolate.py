"""`${VAR}` interpolation, as Docker Compose does it, with results that do not leak in `repr`.

Forms: `${VAR}`, `${VAR:-default}` (unset or empty), `${VAR-default}` (unset),
`${VAR:?message}` (unset or empty is an error), `${VAR?message}` (unset is an error).
Defaults may themselves contain `${...}`. `$${` is a literal `${`; a `$` followed by anything
else is left alone, so shell scripts keep their `$1` and `$HOME`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from urllib.parse import quote

__all__ = ["Secret", "interpolate", "mask_secrets", "references"]

Span = tuple[int, int]

MIN_MASKED_LENGTH = 6
"""Environment values shorter than this are not looked for in free text (`mask_secrets`):
`1`, `true`, `8080` or `root` are not secrets, and masking them would garble every message.
Where a value's position is known (`Secret.masked`), it is masked whatever its length."""


class Secret(str):
    """A string that came out of `${...}` interpolation: usable as text, masked in `repr`.

    Interpolated values are often tokens. Making every one of them a `Secret` keeps them out of
    the `repr` of the manifest, its entries and any dataclass that holds them, and tells error
    formatting not to echo the value. `str(secret)` and formatting give the real text, because
    that is what the tool needs at run time.

    `env_spans` are the (start, end) ranges that came from the environment (the rest was
    written in the manifest). A `Secret` made without them counts as all environment. They let
    templates treat environment text as literal (a token holding `{x}` is no placeholder) and
    let messages show the manifest's text with only the environment's parts masked.
    """

    env_spans: tuple[Span, ...]

    def __new__(cls, text: str = "", env_spans: tuple[Span, ...] | None = None) -> Secret:
        self = super().__new__(cls, text)
        if env_spans is None:
            env_spans = ((0, len(text)),) if text else ()
        self.env_spans = env_spans
        return self

    def __repr__(self) -> str:
        return "Secret('***')"

    def __reduce__(self) -> tuple[type[Secret], tuple[str, tuple[Span, ...]]]:
        return Secret, (str(self), self.env_spans)

    def masked(self) -> str:
        """The text with every part that came from the environment replaced by `***`."""
        out: list[str] = []
        pos = 0
        for a, b in self.env_spans:
            out.append(self[pos:a])
            out.append("***")
            pos = b
        out.append(self[pos:])
        return "".join(out)


# --- the values masked in free text -----------------------------------------------------------

_known: set[str] = set()
_known_lock = threading.Lock()
_pattern: list[re.Pattern[str] | None] = [None]


def _remember(value: str) -> None:
    """Record an environment value that interpolation substituted (see `mask_secrets`)."""
    if len(value) < MIN_MASKED_LENGTH or value in _known:
        return
    with _known_lock:
        _known.add(value)
        _pattern[0] = None


def mask_secrets(text: str) -> str:
    """`text` with every environment value that `${VAR}` interpolation has substituted in
    this process (at least `MIN_MASKED_LENGTH` characters, also percent-encoded) replaced by
    `***`.

    Process-wide on purpose: the values come from the process environment, and error
    messages, HTTP responses and audit records are made far from the manifest that used
    them. Masking a value in a toolkit that did not use it costs nothing.
    """
    pattern = _pattern[0]
    if pattern is None:
        if not _known:  # nothing interpolated yet: no lock on this path (every audit record)
            return text
        with _known_lock:
            forms = {form for v in _known for form in (v, quote(v, safe=""), quote(v))}
            alternatives = sorted(forms, key=len, reverse=True)
            pattern = re.compile("|".join(re.escape(v) for v in alternatives))
            _pattern[0] = pattern
    return pattern.sub("***", text) if text else text


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FORMS = "${NAME}, ${NAME:-default} or ${NAME:?message}; write $${ for a literal ${"


def interpolate(text: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """`text` with every `${...}` replaced from `env`.

    Returns the new text (a `Secret` if anything was substituted or escaped, `text` itself if
    it holds no `${`) and a list of problems: unset variables and malformed references. The
    problems name variables, never their values.
    """
    if "${" not in text:
        return text, []
    problems: list[str] = []
    pieces, _ = _expand(text, 0, env, problems, nested=False)
    out: list[str] = []
    spans: list[Span] = []
    size = 0
    for piece, from_env in pieces:
        if from_env and piece:
            spans.append((size, size + len(piece)))
            _remember(piece)
        out.append(piece)
        size += len(piece)
    return Secret("".join(out), tuple(spans)), problems


class _Lookups(dict[str, str]):
    """An empty environment that records every name looked up in it."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def get(self, key: str, default: object = None) -> None:  # type: ignore[override]
        self.names.append(key)


def references(text: str) -> list[str]:
    """The environment variables `text` reads through `${...}`, defaults' own references
    included, in order; empty when it reads none (`$${` is a literal, not a reference)."""
    if "${" not in text:
        return []
    lookups = _Lookups()
    _expand(text, 0, lookups, [], nested=False)
    return lookups.names


Piece = tuple[str, bool]
"""Text, and whether it came from the environment."""


def _expand(
    text: str, pos: int, env: Mapping[str, str], problems: list[str], *, nested: bool
) -> tuple[list[Piece], int]:
    """Expand from `pos` to the end, or (when `nested`) to the `}` closing a default."""
    parts: list[Piece] = []
    n = len(text)
    while pos < n:
        dollar = text.find("$", pos)
        close = text.find("}", pos) if nested else -1
        if close != -1 and (dollar == -1 or close < dollar):
            parts.append((text[pos:close], False))
            return parts, close + 1
        if dollar == -1:
            parts.append((text[pos:], False))
            pos = n
            break
        parts.append((text[pos:dollar], False))
        if text.startswith("$${", dollar):
            parts.append(("${", False))
            pos = dollar + 3
        elif text.startswith("${", dollar):
            value, pos = _reference(text, dollar + 2, env, problems)
            parts.extend(value)
        else:
            parts.append(("$", False))
            pos = dollar + 1
    if nested:
        problems.append(f"unterminated '${{' reference: expected {_FORMS}")
    return parts, pos


def _reference(
    text: str, pos: int, env: Mapping[str, str], problems: list[str]
) -> tuple[list[Piece], int]:
    """Resolve the reference whose name starts at `pos` (just after `${`)."""
    match = _NAME.match(text, pos)
    if match is None:
        end = text.find("}", pos)
        shown = text[pos - 2 : end + 1] if end != -1 and end - pos < 40 else "${"
        problems.append(f"malformed reference {shown!r}: expected {_FORMS}")
        return [], (end + 1 if end != -1 else len(text))
    name = match.group()
    pos = match.end()
    value = env.get(name)
    if text.startswith("}", pos):
        if value is None:
            problems.append(
                f"environment variable {name} is not set; set it, or give a default with "
                f"${{{name}:-default}}"
            )
            return [], pos + 1
        return [(value, True)], pos + 1
    for op in (":-", "-", ":?", "?"):
        if text.startswith(op, pos):
            break
    else:
        problems.append(f"malformed reference to {name}: expected {_FORMS}")
        end = text.find("}", pos)
        return [], (end + 1 if end != -1 else len(text))
    word, pos = _expand(text, pos + len(op), env, problems, nested=True)
    missing = value is None or (op[0] == ":" and value == "")
    if not missing:
        return [(str(value), True)], pos
    if op.endswith("-"):
        return word, pos
    reason = "".join(piece for piece, _ in word) or "it is required"
    problems.append(f"environment variable {name} is not set: {reason}")
    return [], pos
