"""YAML parsed into plain data plus the line and column of every node.

Built on libyaml's event stream (`yaml.CBaseLoader` when compiled in, the pure-Python parser
otherwise): composing nodes and resolving tags in Python is what makes PyYAML slow, so the
builder here turns events straight into dicts, lists and scalars, recording positions keyed by
the node's path (`("tools", 3, "command")`).

Scalars follow the YAML 1.2 core schema, as editors do: only `true`/`false` are booleans, so
`no`, `on` and `off` stay strings. Mapping keys are always strings. Duplicate keys are reported
(not last-wins), and merge keys (`<<: *base`) and anchors work as in PyYAML.

Hostile input is refused with a position, never with a foreign exception: tags outside the
core schema (`!!python/object...`, `!!binary`, local `!tags`), alias expansion past
100,000 values (a "billion laughs" document), and nesting deeper than 200 levels.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import ToolnexusError

__all__ = ["NodePath", "Positions", "YamlProblem", "YamlSyntaxError", "parse_yaml"]

NodePath = tuple[str | int, ...]


class Positions:
    """1-based (line, column) of every value and mapping key of one document, by path."""

    __slots__ = ("keys", "values")

    def __init__(self) -> None:
        self.values: dict[NodePath, tuple[int, int]] = {}
        self.keys: dict[NodePath, tuple[int, int]] = {}

    def of(self, path: NodePath, *, key: bool = False) -> tuple[int, int] | None:
        """Where `path` is written: its key's position if `key` and known, else its value's;
        for a path that does not exist (a missing key), the closest existing parent."""
        if key and path in self.keys:
            return self.keys[path]
        values = self.values
        for end in range(len(path), -1, -1):
            found = values.get(path[:end])
            if found is not None:
                return found
        return None


@dataclass(frozen=True, kw_only=True)
class YamlProblem:
    """A problem found while building the data (the document still loaded)."""

    message: str
    line: int
    column: int
    path: NodePath


class YamlSyntaxError(ToolnexusError):
    """The text is not YAML; `line`/`column` are 1-based (None when the parser gave none)."""

    def __init__(self, message: str, line: int | None, column: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


_INT = re.compile(r"[-+]?[0-9]+\Z")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})
_INF = frozenset({".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"})
_TAG = "tag:yaml.org,2002:"
_SCALAR_TAGS = frozenset({"str", "int", "float", "bool", "null"})
_MAX_ALIAS_VALUES = 100_000
"""Values that alias expansion may create in one document. A few anchors for shared defaults
make hundreds; a "billion laughs" document makes billions (each alias is a copy)."""
_MAX_DEPTH = 200
"""Nesting levels of one document: far more than a manifest (or a schema in it) needs, few
enough that the recursive steps after parsing stay clear of Python's recursion limit."""


def _plain(value: str) -> Any:
    """Resolve a plain scalar by the YAML 1.2 core schema."""
    if value in _NULLS:
        return None
    first = value[0]
    if first in "tTfF":
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        return value
    if first in "0123456789+-.":
        if _INT.match(value):
            return int(value)
        if value.startswith(("0x", "0o")) and len(value) > 2:
            try:
                return int(value[2:], 16 if value[1] == "x" else 8)
            except ValueError:
                return value
        if _FLOAT.match(value) and value not in (".", "+.", "-."):
            return float(value)
        if value in _INF:
            return float("inf")
        if value in ("-.inf", "-.Inf", "-.INF"):
            return float("-inf")
        if value in (".nan", ".NaN", ".NAN"):
            return float("nan")
    return value


def _tag_name(tag: str) -> str:
    """A tag as a manifest writes it: `!!python/object` rather than its full URI."""
    return "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag


def _check_tag(tag: str | None, allowed: str, mark: Any) -> None:
    """Refuse a tag outside YAML's core schema (`!!python/object...`, `!!binary`, `!local`):
    a manifest is plain data, and a tag it does not understand is not quietly dropped.

    Raises:
        YamlSyntaxError: located at the tagged node.
    """
    if tag is None or tag == "!" or tag == _TAG + allowed:
        return
    if allowed == "str" and tag.startswith(_TAG) and tag[len(_TAG) :] in _SCALAR_TAGS:
        return
    raise YamlSyntaxError(
        f"unsupported tag {_tag_name(tag)!r}: a manifest holds plain YAML values (strings, "
        "numbers, booleans, null, lists and mappings); remove the tag",
        mark.line + 1,
        mark.column + 1,
    )


def _tagged(tag: str, value: str) -> Any:
    """Resolve a scalar with an explicit core-schema tag (see `_check_tag`); raises ValueError
    when the value does not fit it."""
    kind = tag[len(_TAG) :] if tag.startswith(_TAG) else tag
    if kind in ("str", "!"):
        return value
    resolved = _plain(value)
    expected = {"int": int, "float": float, "bool": bool, "null": type(None)}[kind]
    if kind == "float" and isinstance(resolved, int) and not isinstance(resolved, bool):
        return float(resolved)
    if type(resolved) is not expected:
        raise ValueError(f"{value!r} is not a valid !!{kind}")
    return resolved


def _events(text: str) -> Iterator[Any]:
    """Parser events, one C call each (`yaml.parse` makes two, through a generator)."""
    import yaml

    loader = getattr(yaml, "CBaseLoader", yaml.BaseLoader)(text)
    try:
        end = yaml.events.StreamEndEvent
        while True:
            event = loader.get_event()
            if event is None or type(event) is end:
                return
            yield event
    finally:
        loader.dispose()


def parse_yaml(text: str) -> tuple[Any, Positions, list[YamlProblem]]:
    """The first document of `text` as plain data, with positions and non-fatal problems.

    Raises:
        YamlSyntaxError: the text does not parse.
    """
    import yaml
    from yaml import events as ev

    positions = Positions()
    values = positions.values
    keys = positions.keys
    problems: list[YamlProblem] = []
    anchors: dict[str, Any] = {}
    sizes: dict[str, int] = {}  # values in each anchored node, for the alias budget
    expanded = 0
    # A frame: [container, path, pending key (or _NO_KEY), key position, merges, anchor]
    stack: list[list[Any]] = []
    root: Any = None
    scalar_t, map_t, seq_t = ev.ScalarEvent, ev.MappingStartEvent, ev.SequenceStartEvent
    map_end, seq_end, alias_t = ev.MappingEndEvent, ev.SequenceEndEvent, ev.AliasEvent
    doc_t = ev.DocumentStartEvent
    documents = 0
    no_key = _NO_KEY
    try:
        for event in _events(text):
            kind = type(event)
            mark = event.start_mark
            if kind is scalar_t:
                raw = event.value
                if event.tag is None:
                    # libyaml reports a plain scalar's style as '', the Python parser as None
                    value = raw if event.style else _plain(raw)
                elif event.tag == "!":
                    value = raw
                else:
                    _check_tag(event.tag, "str", mark)
                    try:
                        value = _tagged(event.tag, raw)
                    except ValueError as exc:
                        problems.append(_problem(str(exc), mark, _path_of(stack)))
                        value = raw
                # Mapping keys stay text: `200:` and `true:` name things, they are not numbers.
                if stack and stack[-1][2] is no_key and type(stack[-1][0]) is dict:
                    frame = stack[-1]
                    frame[2] = raw
                    frame[3] = (mark.line + 1, mark.column + 1)
                    continue
            elif kind is map_t or kind is seq_t:
                _check_tag(event.tag, "map" if kind is map_t else "seq", mark)
                if len(stack) >= _MAX_DEPTH:
                    raise YamlSyntaxError(
                        f"the YAML is nested deeper than {_MAX_DEPTH} levels; a manifest never "
                        "needs that many",
                        mark.line + 1,
                        mark.column + 1,
                    )
                value = {} if kind is map_t else []
            elif kind is map_end or kind is seq_end:
                frame = stack.pop()
                if frame[4]:
                    _merge(frame[0], frame[4])
                if frame[5] is not None:
                    anchors[frame[5]] = frame[0]
                    sizes[frame[5]] = _count(frame[0])
                if not stack:
                    root = frame[0]
                continue
            elif kind is alias_t:
                if event.anchor not in anchors:
                    raise YamlSyntaxError(
                        f"unknown alias *{event.anchor}", mark.line + 1, mark.column + 1
                    )
                expanded += sizes.get(event.anchor, 1)
                if expanded > _MAX_ALIAS_VALUES:
                    raise YamlSyntaxError(
                        f"aliases expand to more than {_MAX_ALIAS_VALUES:,} values (at "
                        f"*{event.anchor}); a document this repetitive is refused, as a "
                        "'billion laughs' attack would be: write the values out or use fewer "
                        "aliases",
                        mark.line + 1,
                        mark.column + 1,
                    )
                value = copy.deepcopy(anchors[event.anchor])
                if stack and stack[-1][2] is no_key and type(stack[-1][0]) is dict:
                    problems.append(
                        _problem("an alias cannot be a mapping key", mark, _path_of(stack))
                    )
                    stack[-1][2] = "*" + event.anchor
                    stack[-1][3] = (mark.line + 1, mark.column + 1)
                    continue
            elif kind is doc_t:
                documents += 1
                if documents > 1:
                    raise YamlSyntaxError(
                        "several YAML documents in one file: a manifest is a single document",
                        mark.line + 1,
                        mark.column + 1,
                    )
                continue
            else:
                continue
            if not stack:
                if kind is map_t or kind is seq_t:
                    stack.append([value, (), no_key, None, None, event.anchor])
                else:
                    root = value
                values[()] = (mark.line + 1, mark.column + 1)
                continue
            frame = stack[-1]
            container = frame[0]
            if type(container) is list:
                path = (*frame[1], len(container))
                container.append(value)
            else:
                key = frame[2]
                if key is no_key:
                    # a mapping or sequence used as a key
                    problems.append(
                        _problem("mapping keys must be plain text", mark, _path_of(stack))
                    )
                    key = f"<complex key at line {mark.line + 1}>"
                    frame[3] = (mark.line + 1, mark.column + 1)
                frame[2] = no_key
                path = (*frame[1], key)
                if key == "<<" and (kind is map_t or kind is alias_t or kind is seq_t):
                    if frame[4] is None:
                        frame[4] = []
                    frame[4].append(value)
                elif key in container:
                    first = keys[path]
                    problems.append(
                        YamlProblem(
                            message=f"duplicate key {key!r} (first written at line {first[0]});"
                            " YAML keys must be unique: remove or rename one",
                            line=frame[3][0],
                            column=frame[3][1],
                            path=path,
                        )
                    )
                    if kind is map_t or kind is seq_t:
                        stack.append([value, path, no_key, None, None, event.anchor])
                    continue
                else:
                    container[key] = value
                    keys[path] = frame[3]
            values[path] = (mark.line + 1, mark.column + 1)
            if kind is map_t or kind is seq_t:
                stack.append([value, path, no_key, None, None, event.anchor])
            elif kind is scalar_t and event.anchor is not None:
                anchors[event.anchor] = value
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = _syntax_message(exc, text)
        if mark is None:
            raise YamlSyntaxError(message, None, None) from exc
        raise YamlSyntaxError(message, mark.line + 1, mark.column + 1) from exc
    except yaml.YAMLError as exc:
        # ReaderError (bad characters) carries a position but is not a MarkedYAMLError.
        line, column = _reader_position(text, getattr(exc, "position", None))
        raise YamlSyntaxError(str(getattr(exc, "reason", exc)), line, column) from exc
    return root, positions, problems


class _NoKey:
    __slots__ = ()


_NO_KEY = _NoKey()


def _count(value: Any) -> int:
    """Values in `value`, itself included (mapping keys are not counted)."""
    total = 0
    pending = [value]
    while pending:
        item = pending.pop()
        total += 1
        if type(item) is dict:
            pending.extend(item.values())
        elif type(item) is list:
            pending.extend(item)
    return total


def _merge(mapping: dict[str, Any], merges: list[Any]) -> None:
    """Apply `<<` merge keys: explicit keys win, then earlier merged mappings."""
    sources: list[Any] = []
    for item in merges:
        sources.extend(item if isinstance(item, list) else [item])
    for source in sources:
        if isinstance(source, dict):
            for key, value in source.items():
                mapping.setdefault(key, value)


def _path_of(stack: list[list[Any]]) -> NodePath:
    return stack[-1][1] if stack else ()


def _problem(message: str, mark: Any, path: NodePath) -> YamlProblem:
    return YamlProblem(message=message, line=mark.line + 1, column=mark.column + 1, path=path)


def _syntax_message(exc: Any, text: str) -> str:
    problem = exc.problem or "invalid YAML"
    mark = exc.problem_mark
    if mark is not None and text[mark.index : mark.index + 1] == "\t":
        problem += ": a tab (YAML indents with spaces, not tabs)"
    if exc.context:
        problem += f" ({exc.context}"
        context, where = exc.context_mark, exc.problem_mark
        if context is not None and where is not None and context.line != where.line:
            problem += f" at line {context.line + 1}"
        problem += ")"
    return problem


def _reader_position(text: str, position: int | None) -> tuple[int | None, int | None]:
    if position is None:
        return None, None
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return line, column
