"""Globs and paths: glob-to-regex translation and path patterns matched against the workspace.

`_glob_regex` serves every glob (tool names, values, paths). Path patterns come in two
spellings, the `path:` matcher of approval rules and the gitignore-style specs of permission
strings, and are matched against every reading of a path argument: as written (`..`
collapsed) and with symlinks resolved. An allow rule needs every reading to match, a deny or
ask rule needs one.

Separate because both front ends (`rules` and `permissions`) share it, and it is the only part
that touches the disk (`realpath`).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import ConfigError

__all__: list[str] = []


def _glob_regex(pattern: str, *, segments: bool) -> str:
    """Translate a glob to a regex body. With `segments`, `*` and `?` stay inside one path
    segment and `**` spans segments (`a/**/b`, `**/x`, `dir/**`); without, `*` spans anything.
    Either way `**/` opening a segment means zero or more folders (`**/x` matches `x`).
    Also: `[abc]`, `[!abc]`, `{a,b}`, and `\\` to escape the next character.

    Translated here rather than by a glob library: `glob:` lets `*` span `/` (it matches any
    string, not only paths) while keeping globstar's `**/`, and both spellings take braces;
    neither pathspec (gitignore: no braces) nor wcmatch offers that mix. The path specs of
    permission strings are checked against pathspec's gitignore reading in the tests."""
    star, one = ("[^/]*", "[^/]") if segments else (".*", ".")
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            at_start = i == 0 or pattern[i - 1] == "/"
            if j - i >= 2 and at_start:
                if j == n:
                    out.append(".*")
                    i = j
                    continue
                if pattern[j] == "/":  # `**/`: zero or more folders (gitignore, globstar)
                    out.append("(?:.*/)?")
                    i = j + 1
                    continue
            out.append(star)
            i = j
        elif c == "?":
            out.append(one)
            i += 1
        elif c == "/" and segments and pattern[i:] in ("/**", "/***"):
            out.append("(?:/.*)?")
            i = n
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out.append(re.escape(c))
                i += 1
                continue
            body = pattern[i + 1 : end]
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            escaped = "".join(
                ch if ch.isalnum() or (ch == "-" and "--" not in body) else "\\" + ch for ch in body
            )
            out.append(f"[{'^' if negate else ''}{escaped}]")
            i = end + 1
        elif c == "{":
            end = pattern.find("}", i)
            alternatives = pattern[i + 1 : end].split(",") if end > 0 else []
            if len(alternatives) < 2:
                out.append(re.escape(c))
                i += 1
                continue
            inner = "|".join(_glob_regex(a, segments=segments) for a in alternatives)
            out.append(f"(?:{inner})")
            i = end + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class _PathPattern:
    source: str
    regex: re.Pattern[str]
    anchor: Literal["absolute", "workspace", "floating"]
    """`absolute`: matched against the absolute path; `workspace`: against the path relative
    to the workspace (never outside it); `floating` (gitignore's bare names and `**/x`): at any
    depth, anywhere for deny/ask rules, inside the workspace for allow rules."""

    def matches(self, path: str, workspace: str, strict: bool) -> bool:
        if self.anchor == "absolute" or (self.anchor == "floating" and not strict):
            return self.regex.fullmatch(path) is not None
        rel = _relative(path, workspace)
        return rel is not None and self.regex.fullmatch(rel) is not None


def _relative(path: str, workspace: str) -> str | None:
    if path == workspace:
        return ""
    root = workspace if workspace.endswith("/") else workspace + "/"
    return path[len(root) :] if path.startswith(root) else None


def _rule_path_pattern(pattern: str, field: str) -> _PathPattern:
    """`path:` globs of approval rules: absolute is absolute, `~/` is home, else workspace."""
    text = os.path.expanduser(pattern) if pattern.startswith("~") else pattern
    if text.startswith("/"):
        body = _glob_regex(os.path.normpath(text).replace("//", "/", 1), segments=True)
        return _PathPattern(source=pattern, regex=re.compile(body, re.DOTALL), anchor="absolute")
    text = text.removeprefix("./")
    if not text:
        raise ConfigError(f"empty path pattern {pattern!r}", field=field)
    body = _glob_regex(text, segments=True)
    return _PathPattern(source=pattern, regex=re.compile(body, re.DOTALL), anchor="workspace")


def _permission_path_pattern(pattern: str) -> _PathPattern:
    """gitignore-style path specs of permission strings (Claude Code's reading): `//abs`
    absolute, `~/x` home, `/x` and `./x` relative to the workspace, a bare name (or `**/x`)
    at any depth, `a/b` relative to the workspace. A match also covers everything beneath."""
    text = pattern if pattern.startswith("//") else pattern.rstrip("/") or "/"
    anchor: Literal["absolute", "workspace", "floating"]
    if text.startswith("//"):
        text, anchor = "/" + text.strip("/"), "absolute"
    elif text.startswith("~"):
        text, anchor = os.path.expanduser(text), "absolute"
    elif text.startswith(("/", "./")):
        text, anchor = text.removeprefix(".").lstrip("/"), "workspace"
    elif text.startswith("**/") or "/" not in text:
        text, anchor = text.removeprefix("**/"), "floating"
    else:
        anchor = "workspace"
    body = _glob_regex(text, segments=True) if text else ""
    if anchor == "floating":
        body = "(?:.*/)?" + body
    regex = re.compile(body + "(?:/.*)?" if body else ".*", re.DOTALL)
    return _PathPattern(source=pattern, regex=regex, anchor=anchor)


@functools.lru_cache(maxsize=64)
def _workspace_forms(workspace: Path) -> tuple[str, str]:
    """The workspace as written (absolute, normalised) and symlink-resolved. Cached: the
    workspace of a toolkit does not move, and this keeps rules without paths off the disk."""
    lexical = os.path.normpath(os.path.abspath(workspace))
    return lexical, os.path.realpath(lexical)


def _path_candidates(
    value: str, workspace: Path, *, given: bool = False
) -> list[tuple[str, str]] | None:
    """(path, workspace) pairs a path argument may mean: normalised (`..` collapsed) and with
    symlinks resolved, and the same after `~` expansion when it starts with `~`. With `given`
    (deny and ask rules), also the path as written, joined to the workspace but not
    normalised: a tool that does not collapse `..` reads `secrets/../x` inside `secrets`."""
    if "\0" in value:
        return None
    lexical_ws, real_ws = _workspace_forms(workspace)
    spellings = [value]
    if value.startswith("~"):
        spellings.append(os.path.expanduser(value))
    out: list[tuple[str, str]] = []
    for spelling in spellings:
        joined = os.path.join(lexical_ws, spelling)
        lexical = os.path.normpath(joined)
        if lexical.startswith("//"):
            lexical = "/" + lexical.lstrip("/")
        out.append((lexical, lexical_ws))
        out.append((os.path.realpath(lexical), real_ws))
        if given and joined != lexical:
            out.append(
                ("/" + joined.lstrip("/") if joined.startswith("//") else joined, lexical_ws)
            )
    return out


def _path_matches(patterns: Sequence[_PathPattern], value: str, ws: Path, strict: bool) -> bool:
    candidates = _path_candidates(value, ws, given=not strict)
    if candidates is None:
        return not strict
    hit = (any(p.matches(path, root, strict) for p in patterns) for path, root in candidates)
    return all(hit) if strict else any(hit)
