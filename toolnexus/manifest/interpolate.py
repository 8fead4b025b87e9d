"""`${VAR}` interpolation, as Docker Compose does it, with results that do not leak in `repr`.

Forms: `${VAR}`, `${VAR:-default}` (unset or empty), `${VAR-default}` (unset),
`${VAR:?message}` (unset or empty is an error), `${VAR?message}` (unset is an error).
Defaults may themselves contain `${...}`. `$${` is a literal `${`; a `$` followed by anything
else is left alone, so shell scripts keep their `$1` and `$HOME`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["Secret", "interpolate"]


class Secret(str):
    """A string that came out of `${...}` interpolation: usable as text, masked in `repr`.

    Interpolated values are often tokens. Making every one of them a `Secret` keeps them out of
    the `repr` of the manifest, its entries and any dataclass that holds them, and tells error
    formatting not to echo the value. `str(secret)` and formatting give the real text, because
    that is what the tool needs at run time.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "Secret('***')"


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
    out, _ = _expand(text, 0, env, problems, nested=False)
    return Secret(out), problems


def _expand(
    text: str, pos: int, env: Mapping[str, str], problems: list[str], *, nested: bool
) -> tuple[str, int]:
    """Expand from `pos` to the end, or (when `nested`) to the `}` closing a default."""
    parts: list[str] = []
    n = len(text)
    while pos < n:
        dollar = text.find("$", pos)
        close = text.find("}", pos) if nested else -1
        if close != -1 and (dollar == -1 or close < dollar):
            parts.append(text[pos:close])
            return "".join(parts), close + 1
        if dollar == -1:
            parts.append(text[pos:])
            pos = n
            break
        parts.append(text[pos:dollar])
        if text.startswith("$${", dollar):
            parts.append("${")
            pos = dollar + 3
        elif text.startswith("${", dollar):
            value, pos = _reference(text, dollar + 2, env, problems)
            parts.append(value)
        else:
            parts.append("$")
            pos = dollar + 1
    if nested:
        problems.append(f"unterminated '${{' reference: expected {_FORMS}")
    return "".join(parts), pos


def _reference(text: str, pos: int, env: Mapping[str, str], problems: list[str]) -> tuple[str, int]:
    """Resolve the reference whose name starts at `pos` (just after `${`)."""
    match = _NAME.match(text, pos)
    if match is None:
        end = text.find("}", pos)
        shown = text[pos - 2 : end + 1] if end != -1 and end - pos < 40 else "${"
        problems.append(f"malformed reference {shown!r}: expected {_FORMS}")
        return "", (end + 1 if end != -1 else len(text))
    name = match.group()
    pos = match.end()
    value = env.get(name)
    if text.startswith("}", pos):
        if value is None:
            problems.append(
                f"environment variable {name} is not set; set it, or give a default with "
                f"${{{name}:-default}}"
            )
            return "", pos + 1
        return value, pos + 1
    for op in (":-", "-", ":?", "?"):
        if text.startswith(op, pos):
            break
    else:
        problems.append(f"malformed reference to {name}: expected {_FORMS}")
        end = text.find("}", pos)
        return "", (end + 1 if end != -1 else len(text))
    word, pos = _expand(text, pos + len(op), env, problems, nested=True)
    missing = value is None or (op[0] == ":" and value == "")
    if not missing:
        return str(value), pos
    if op.endswith("-"):
        return word, pos
    reason = word or "it is required"
    problems.append(f"environment variable {name} is not set: {reason}")
    return "", pos
