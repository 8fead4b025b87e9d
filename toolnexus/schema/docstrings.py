"""Parameter descriptions from docstrings (Google, NumPy and reST styles).

Derivation splits a callable's (or a class') docstring into the description a model sees and the
per-parameter texts that become `description`s in the schema. Separate because it is plain text
parsing, with no knowledge of types or JSON Schema.
"""

from __future__ import annotations

import inspect
import re

__all__: list[str] = []


_GOOGLE_HEADERS = re.compile(
    r"(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters"
    r"|Attributes)\s*:\s*$"
)
_GOOGLE_ENTRY = re.compile(r"\*{0,2}(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_NUMPY_HEADERS = frozenset({"Parameters", "Other Parameters", "Keyword Arguments"})
_NUMPY_ENTRY = re.compile(r"\*{0,2}(\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$")
_REST_FIELD = re.compile(
    r":(param|parameter|arg|argument|key|keyword|type)\s+(?:[^:]*?\s)?\*{0,2}(\w+)\s*:\s*(.*)$"
)
_ANY_REST_FIELD = re.compile(r":\w+(\s[^:]*)?:")
_SECTION_UNDERLINE = re.compile(r"-{3,}\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _parse_docstring(doc: str | None) -> tuple[str | None, dict[str, str]]:
    """Split a docstring into the description (params section removed) and per-param texts.

    Google (`Args:`), NumPy (`Parameters` + dashes) and reST (`:param x:`) styles are recognised;
    the description keeps every other section (Returns, Raises, Examples...), which tells a model
    something useful.
    """
    if not doc:
        return None, {}
    lines = inspect.cleandoc(doc).splitlines()
    params: dict[str, str] = {}
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if _GOOGLE_HEADERS.fullmatch(stripped):
            i = _google_section(lines, i, params)
            continue
        if (
            stripped in _NUMPY_HEADERS
            and i + 1 < len(lines)
            and _SECTION_UNDERLINE.match(lines[i + 1].strip())
        ):
            i = _numpy_section(lines, i, params)
            continue
        rest = _REST_FIELD.match(stripped)
        if rest:
            i = _rest_field(lines, i, rest, params)
            continue
        kept.append(line)
        i += 1
    text = "\n".join(kept).strip()
    text = re.sub(r"\n{3,}", "\n\n", text)
    return (text or None), params


def _google_section(lines: list[str], start: int, params: dict[str, str]) -> int:
    base = _indent(lines[start])
    i = start + 1
    current: str | None = None
    entry_indent: int | None = None
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        ind = _indent(line)
        if ind <= base:
            break
        if entry_indent is None:
            entry_indent = ind
        if ind <= entry_indent:
            m = _GOOGLE_ENTRY.match(line.strip())
            if m:
                name: str = m[1]  # the name group always takes part in a match
                params[name] = m[3].strip()
                current = name
            else:
                current = None
        elif current is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
        i += 1
    return i


def _numpy_section(lines: list[str], start: int, params: dict[str, str]) -> int:
    base = _indent(lines[start])
    i = start + 2
    names: list[str] = []
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        ind = _indent(line)
        is_header = i + 1 < len(lines) and _SECTION_UNDERLINE.match(lines[i + 1].strip())
        if ind <= base and is_header:
            break
        if ind <= base:
            m = _NUMPY_ENTRY.match(line.strip())
            if not m:
                break
            names = [n.strip().lstrip("*") for n in m.group(1).split(",")]
            for name in names:
                params.setdefault(name, "")
        else:
            for name in names:
                params[name] = f"{params[name]} {line.strip()}".strip()
        i += 1
    return i


def _rest_field(lines: list[str], start: int, m: re.Match[str], params: dict[str, str]) -> int:
    kind, name, text = m.group(1), m.group(2), m.group(3).strip()
    base = _indent(lines[start])
    i = start + 1
    while i < len(lines) and lines[i].strip() and _indent(lines[i]) > base:
        if _ANY_REST_FIELD.match(lines[i].strip()):
            break
        text = f"{text} {lines[i].strip()}"
        i += 1
    if kind != "type":
        params[name] = text.strip()
    return i
