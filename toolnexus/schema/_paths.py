"""JSON paths (`$.items[0]["odd key"]`) naming the bad part of an argument or a schema.

Shared by derivation (an argument that cannot become its hinted type), meta-checks and
validation, so that every message locates a problem the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Final

__all__: list[str] = []


_IDENTIFIER: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def _join_path(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENTIFIER.fullmatch(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _json_path(parts: Iterable[str | int]) -> str:
    path = "$"
    for part in parts:
        path = _join_path(path, part)
    return path
