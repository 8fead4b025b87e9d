"""A `Result` as JSON and back, for stores outside the process (binary data as base64)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from ..base import AudioPart, ImagePart, Part, ResourcePart, Result, TextPart

__all__ = ["dump_result", "load_result"]


def dump_result(result: Result) -> bytes:
    """`result` as JSON bytes.

    Raises:
        TypeError, ValueError: something in it is not JSON (`structured` or `metadata` holding
            an object): such a result is not stored, rather than stored changed.
    """
    record: dict[str, Any] = {
        "content": result.content,
        "parts": [_dump_part(p) for p in result.parts],
        "structured": result.structured,
        "is_error": result.is_error,
        "metadata": dict(result.metadata),
    }
    return json.dumps(record, ensure_ascii=False, allow_nan=False).encode()


def load_result(data: bytes) -> Result:
    """The `Result` that `dump_result` wrote."""
    record = json.loads(data)
    return Result(
        content=record["content"],
        parts=tuple(_load_part(p) for p in record["parts"]),
        structured=record["structured"],
        is_error=record["is_error"],
        metadata=record["metadata"],
    )


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _annotations(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else dict(value)


def _dump_part(part: Part) -> dict[str, Any]:
    notes = _annotations(part.annotations)
    if isinstance(part, ImagePart | AudioPart):
        kind = "image" if isinstance(part, ImagePart) else "audio"
        return {"kind": kind, "data": _b64(part.data), "mime_type": part.mime_type, "notes": notes}
    if isinstance(part, ResourcePart):
        return {
            "kind": "resource",
            "uri": part.uri,
            "mime_type": part.mime_type,
            "text": part.text,
            "data": _b64(part.data),
            "notes": notes,
        }
    return {"kind": "text", "text": part.text, "notes": notes}


def _load_part(record: dict[str, Any]) -> Part:
    kind, notes = record["kind"], record["notes"]
    if kind == "image":
        return ImagePart(
            data=base64.b64decode(record["data"]), mime_type=record["mime_type"], annotations=notes
        )
    if kind == "audio":
        return AudioPart(
            data=base64.b64decode(record["data"]), mime_type=record["mime_type"], annotations=notes
        )
    if kind == "resource":
        return ResourcePart(
            uri=record["uri"],
            mime_type=record["mime_type"],
            text=record["text"],
            data=_unb64(record["data"]),
            annotations=notes,
        )
    return TextPart(text=record["text"], annotations=notes)
