"""Local JSON references (`#`, `#/$defs/Item`) looked up inside the document that holds them.

One reading of RFC 6901 for the schema checker, the provider adapters, the OpenAPI source and
the manifest validator; each words its own error when the answer is `MISSING`, since only the
caller knows whether a dangling reference is a bad manifest, a bad document or a bad call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

MISSING: Final = object()
"""What `resolve_pointer` returns when the reference leads nowhere (`None` is a valid node)."""


def resolve_pointer(root: Any, ref: str) -> Any:
    """The node the local reference `ref` points to inside `root`, or `MISSING`.

    `ref` is a URI fragment holding a JSON pointer: `#` is `root` itself; `#/a/b` walks
    mapping keys and list indexes, with `%XX` escapes decoded, then `~1` read as `/` and `~0`
    as `~`. Anything else (a remote reference, a plain-name anchor such as `#item`) is `MISSING`.
    """
    if not ref.startswith("#"):
        return MISSING
    fragment = ref[1:]
    if "%" in fragment:
        from urllib.parse import unquote  # rare: imported only for an escaped reference

        fragment = unquote(fragment)
    if fragment == "":
        return root
    if not fragment.startswith("/"):
        return MISSING
    node = root
    for raw in fragment[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return MISSING
    return node
