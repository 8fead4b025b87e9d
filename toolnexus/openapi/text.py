"""OpenAPI description text into plain data, fast: descriptions run to megabytes.

Stripe's description is 6 MB of YAML and GitHub's 13 MB of JSON, and neither needs the line
positions the manifest keeps. So:

- text that opens with `{` or `[` is read by `json.loads` (JSON is YAML too, and its parser is
  many times faster); when that fails, the YAML reading is tried before the JSON error is told.
- YAML goes through libyaml's event stream (`yaml.CBaseLoader`; the pure-Python parser where
  libyaml is not compiled in) straight into dicts, lists and scalars. PyYAML's own loaders,
  `CSafeLoader` included, compose a node graph and resolve tags in Python: that is what makes
  them slow (see `benchmarks/openapi.py` for the numbers).

The text is held to the manifest's rules (`manifest/yamlpos.py`), with budgets sized for API
descriptions: scalars follow the YAML 1.2 core schema (`on`, `no` and dates stay strings, as an
OpenAPI tool reads them), tags outside that schema are refused, an alias may not make the
document grow past `MAX_ALIAS_VALUES` values (a "billion laughs" document is refused after a
few thousand events, before it takes memory), nesting is capped at `MAX_DEPTH` levels, and a
document larger than `MAX_DOCUMENT_BYTES` is refused unread. One difference: a repeated key is
last-wins (as `json.loads` and PyYAML read it), since the description is not ours to fix.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import SourceError
from ..manifest.yamlpos import _NO_KEY, _TAG, _count, _merge, _plain, _tagged

__all__ = ["MAX_ALIAS_VALUES", "MAX_DEPTH", "MAX_DOCUMENT_BYTES", "parse_spec_text"]

MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
"""The largest description read (one file of it). GitHub's, the largest we know, is 14 MB."""
MAX_ALIAS_VALUES = 1_000_000
"""Values that YAML aliases may add to one document. Real descriptions use `$ref` rather than
aliases: GitHub's and Stripe's have none. A "billion laughs" document asks for billions."""
MAX_DEPTH = 256
"""Nesting levels of one document: deep enough for any schema, clear of the recursion limit
of the steps that walk it afterwards."""

_SCALAR_TAGS = frozenset(_TAG + kind for kind in ("str", "int", "float", "bool", "null"))
_PLAIN_FIRST = frozenset("0123456789+-.~nNtTfF")
"""First characters of the plain scalars that are not strings (numbers, null, booleans)."""


def parse_spec_text(data: bytes | str, label: str) -> Any:
    """The document `data` holds, as plain JSON-like data.

    Raises:
        SourceError: the text is neither JSON nor YAML, is too large, or breaks a YAML rule
            (its message names `label` and, for YAML, the line).
    """
    size = len(data)
    if size > MAX_DOCUMENT_BYTES:
        raise SourceError(
            f"{label}: the document is {size:,} bytes, more than the {MAX_DOCUMENT_BYTES:,} "
            "read at most"
        )
    head = data[:64].lstrip()
    if head[:1] in (b"{", b"[", "{", "["):
        try:
            return json.loads(data)
        except RecursionError:
            raise SourceError(
                f"{label}: the document is nested deeper than {MAX_DEPTH} levels"
            ) from None
        except ValueError as exc:  # bad JSON or UTF-8, or an integer of over 4,300 digits
            try:
                return _load_yaml(data, label)
            except SourceError:
                raise SourceError(f"{label}: not valid JSON: {exc}") from exc
    return _load_yaml(data, label)


def _load_yaml(data: bytes | str, label: str) -> Any:
    import yaml

    try:
        return _build(data)
    except _Refused as exc:
        raise SourceError(f"{label}: line {exc.line}: {exc.message}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise SourceError(f"{label}: not valid YAML: {where}{exc.problem or exc}") from exc
    except yaml.YAMLError as exc:
        raise SourceError(f"{label}: not valid YAML: {exc}") from exc


class _Refused(Exception):
    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.message = message
        self.line = mark.line + 1 if mark is not None else 1


_MERGE_KEY = object()
"""The key slot's value for a plain `<<` (a quoted `'<<'` is an ordinary key, as in PyYAML)."""


def _build(data: bytes | str) -> Any:
    """The first document, built from parser events.

    The loop is the hot path of a multi-megabyte description, so it keeps the open container
    in locals (`parent`, and `key` for a mapping: the key waiting for its value, or `_NO_KEY`)
    and pushes the enclosing ones on `stack` as frames `[container, key, merges, anchor]`.
    """
    import yaml
    from yaml import events as ev

    loader = getattr(yaml, "CBaseLoader", yaml.BaseLoader)(data)
    get_event = loader.get_event
    scalar_t, map_t, seq_t = ev.ScalarEvent, ev.MappingStartEvent, ev.SequenceStartEvent
    map_end_t, seq_end_t, alias_t = ev.MappingEndEvent, ev.SequenceEndEvent, ev.AliasEvent
    doc_end_t, stream_end_t = ev.DocumentEndEvent, ev.StreamEndEvent
    plain_first = _PLAIN_FIRST
    anchors: dict[str, Any] = {}
    sizes: dict[str, int] = {}
    added = 0
    no_key = _NO_KEY
    merge_key = _MERGE_KEY
    stack: list[list[Any]] = []
    frame: list[Any] | None = None  # the open container's frame
    parent: Any = None
    is_map = False
    root: Any = None
    event: Any = None
    try:
        while True:
            event = get_event()
            kind = type(event)
            if kind is scalar_t:
                raw = event.value
                if is_map and frame is not None and frame[1] is no_key:
                    if event.tag is not None and event.tag not in _SCALAR_TAGS | {"!"}:
                        raise _Refused(_tag_message(event.tag), event.start_mark)
                    # keys stay text (`200:` and `true:` name things); only a plain `<<` merges
                    frame[1] = merge_key if raw == "<<" and not event.style else raw
                    continue
                tag = event.tag
                if tag is None:
                    # quoted, or plain but surely a string: the common case, no regexes
                    string = event.style or (raw and raw[0] not in plain_first)
                    value = raw if string else _plain(raw)
                elif tag == "!":
                    value = raw
                elif tag in _SCALAR_TAGS:
                    try:
                        value = _tagged(tag, raw)
                    except ValueError as exc:
                        raise _Refused(str(exc), getattr(event, "start_mark", None)) from None
                else:
                    raise _Refused(_tag_message(tag), event.start_mark)
                if event.anchor is not None:
                    anchors[event.anchor] = value
                    sizes[event.anchor] = 1
            elif kind is map_t or kind is seq_t:
                if event.tag not in (None, "!", _TAG + ("map" if kind is map_t else "seq")):
                    raise _Refused(_tag_message(event.tag), event.start_mark)
                if len(stack) >= MAX_DEPTH:
                    raise _Refused(
                        f"the document is nested deeper than {MAX_DEPTH} levels",
                        event.start_mark,
                    )
                if is_map and frame is not None and frame[1] is no_key:
                    raise _Refused("a mapping key must be plain text", event.start_mark)
                parent = {} if kind is map_t else []
                is_map = kind is map_t
                frame = [parent, no_key, None, event.anchor]
                stack.append(frame)
                continue
            elif kind is map_end_t or kind is seq_end_t:
                assert frame is not None
                stack.pop()
                value = parent
                if frame[2]:
                    _merge(value, frame[2])
                if frame[3] is not None:
                    anchors[frame[3]] = value
                    sizes[frame[3]] = _count(value)
                if stack:
                    frame = stack[-1]
                    parent = frame[0]
                    is_map = type(parent) is dict
                else:
                    frame, parent, is_map = None, None, False
            elif kind is alias_t:
                if event.anchor not in anchors:
                    raise _Refused(f"unknown alias *{event.anchor}", event.start_mark)
                added += sizes[event.anchor]
                if added > MAX_ALIAS_VALUES:
                    raise _Refused(
                        f"aliases expand to more than {MAX_ALIAS_VALUES:,} values (at "
                        f"*{event.anchor}); a document this repetitive is refused, as a 'billion "
                        "laughs' attack would be",
                        event.start_mark,
                    )
                value = anchors[event.anchor]  # shared, as PyYAML does: the data is read-only
                if is_map and frame is not None and frame[1] is no_key:
                    if not isinstance(value, str | int | float | bool) and value is not None:
                        raise _Refused("a mapping key must be plain text", event.start_mark)
                    frame[1] = str(value)
                    continue
            elif kind is doc_end_t or kind is stream_end_t or event is None:
                return root
            else:
                continue  # stream and document starts
            if frame is None:
                root = value
            elif not is_map:
                parent.append(value)
            else:
                key = frame[1]
                frame[1] = no_key
                if key is merge_key:
                    if isinstance(value, dict | list):
                        frame[2] = [*(frame[2] or ()), value]
                    else:
                        parent["<<"] = value
                else:
                    parent[key] = value  # a repeated key: the last wins, as in json.loads
    except ValueError as exc:  # an integer of more digits than `int()` reads (4,300)
        raise _Refused(str(exc), getattr(event, "start_mark", None)) from None
    finally:
        loader.dispose()


def _tag_message(tag: str) -> str:
    shown = "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag
    return (
        f"unsupported tag {shown!r}: an OpenAPI description holds plain values (strings, "
        "numbers, booleans, null, lists and mappings)"
    )
