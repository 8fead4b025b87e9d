"""`$ref`s of an OpenAPI description, local and external, and its schemas made self-contained.

A reference is local (`#/components/schemas/Pet`) or names another file of a multi-file
description (`./schemas/user.yaml#/User`, `common.json`), relative to the file that holds it.
External references are held to these rules:

- a file must lie inside the description's folder once symlinks and `..` are resolved;
- the network is used only when the entry allows it (`remote_refs: true`); a description
  downloaded from a URL may then reach files beside or below it on the same server;
- every file is read once (a reference cycle across files ends like one inside a file: the
  schema is cut where it comes back to itself) and the files read together hold at most
  `MAX_DOCUMENT_BYTES` (`openapi/text.py`), in at most `MAX_FILES` files.

Each external file's own references are rewritten to absolute ones (`/abs/dir/user.yaml#/User`)
when it is read, so a node taken from it can be inlined anywhere without knowing where it came
from. Schemas are converted once per reference and shared between tools (nothing downstream
changes a tool's schema in place); a conversion that had to cut a cycle depends on where it was
entered and is redone each time.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError, SourceError
from ..schema.refs import MISSING, resolve_pointer
from .text import MAX_DOCUMENT_BYTES, parse_spec_text

__all__ = ["MAX_FILES", "Resolver"]

MAX_FILES = 1_000
"""External files one description may reference (itself not counted)."""

_DROPPED_KEYWORDS = frozenset({"nullable", "discriminator", "xml", "externalDocs", "example"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_SUBSCHEMAS = frozenset(
    {
        "items", "additionalProperties", "not", "allOf", "anyOf", "oneOf", "prefixItems",
        "contains", "propertyNames", "if", "then", "else",
    }
)  # fmt: skip
_REWRITTEN = frozenset({"nullable", "exclusiveMinimum", "exclusiveMaximum"})
_SCHEME = re.compile(r"(?i)([a-z][a-z0-9+.-]+):")

Fetch = Callable[[str, Callable[[str], None]], bytes]
"""Downloads one URL (the OpenAPI source's fetcher, with its timeout and size limit), calling
the check on the URL of every redirect before following it (it raises to refuse one)."""


def read_regular(path: str, limit: int) -> bytes:
    """At most `limit` bytes of the regular file at `path`.

    A named pipe, a device or a socket is refused without waiting on it (opened non-blocking,
    then checked): `open` alone would hang on a FIFO with no writer, and `/dev/zero` never ends.

    Raises:
        OSError: the file cannot be read, or is not a regular file (`ENODEV`-style message).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        return f.read(limit)


class Resolver:
    """Follows the `$ref`s of one description and turns its schemas into 2020-12 ones."""

    def __init__(
        self,
        document: Mapping[str, Any],
        label: str,
        *,
        location: str | None,
        remote: bool = False,
        fetch: Fetch | None = None,
        files: list[str] | None = None,
    ) -> None:
        """`location` is the description's absolute path or URL (None: text with no home, whose
        external references cannot be followed); read files are appended to `files`."""
        self.document = document
        self.label = label
        self.location = location
        self.remote = remote
        self.fetch = fetch
        self.files = files if files is not None else []
        self._docs: dict[str, Any] = {}
        self._read_bytes = 0
        self._read_files = 0
        self._memo: dict[str, Any] = {}
        self._targets: dict[str, Any] = {}
        self._cuts = 0
        self._is_url = location is not None and _is_url(location)
        root = (
            _url_folder(location)
            if location is not None and self._is_url
            else os.path.realpath(os.path.dirname(os.path.abspath(location)))
            if location is not None
            else None
        )
        self._root = root
        if location is not None:
            self._main_key = location if self._is_url else os.path.realpath(location)
            self._docs[self._main_key] = document

    # --- references ---------------------------------------------------------------------

    def key(self, ref: str, where: str = "") -> str:
        """`ref` (from the main description, or already absolute) in its absolute form."""
        if ref.startswith("#") or self.location is None:
            return ref
        return self._absolute(ref, self._main_key, where)

    def target(self, ref: str, where: str) -> Any:
        """The node `ref` points to (reading the file it names, the first time)."""
        node = self._targets.get(ref, MISSING)
        if node is MISSING:
            node = self._targets[ref] = self._target(ref, where)
        return node

    def _target(self, ref: str, where: str) -> Any:
        if ref.startswith("#"):
            node = resolve_pointer(self.document, ref)
        else:
            if self.location is None:
                raise ConfigError(
                    f"{self.label}: {where} refers to {ref!r} in another file, but this "
                    "description has no folder to look in",
                    field="openapi",
                )
            key = self._absolute(ref, self._main_key, where)
            address, _, fragment = key.partition("#")
            node = resolve_pointer(self._load(address, ref, where), "#" + fragment)
        if node is MISSING:
            raise SourceError(f"{self.label}: {where} refers to {ref!r}, which does not exist")
        return node

    def deref(self, node: Any, where: str) -> Any:
        """`node` with its own `$ref` chain followed (not its children's)."""
        seen: list[str] = []
        while type(node) is dict and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            key = self.key(ref, where)
            if key in seen:
                raise SourceError(f"{self.label}: {where}: $ref cycle {' -> '.join([*seen, key])}")
            seen.append(key)
            node = self.target(ref, where)
        return node

    def _absolute(self, ref: str, base: str, where: str) -> str:
        """`ref`, written in the file `base`, as `address#fragment` with an absolute address."""
        address, hash_, fragment = ref.partition("#")
        if not address:
            return f"{base}#{fragment}"
        scheme = _SCHEME.match(address)
        if scheme is not None and len(scheme.group(1)) > 1:
            if scheme.group(1).lower() not in ("http", "https"):
                raise ConfigError(
                    f"{self.label}: {where} refers to {ref!r}: only files of the description "
                    "and http(s) URLs can be referenced",
                    field="openapi",
                )
            return f"{address}#{fragment}"
        if _is_url(base):
            return f"{urllib.parse.urljoin(base, address)}#{fragment}"
        path = urllib.parse.unquote(address)
        if "\x00" in path:
            raise ConfigError(
                f"{self.label}: {where} refers to {ref!r}, a file name with a NUL character",
                field="openapi",
            )
        if not os.path.isabs(path):
            path = os.path.join(os.path.dirname(base), path)
        return f"{os.path.normpath(path)}{hash_ or '#'}{fragment}"

    def _load(self, address: str, ref: str, where: str) -> Any:
        if address in self._docs:
            return self._docs[address]
        if self._read_files >= MAX_FILES:
            raise SourceError(
                f"{self.label}: {where}: the description references more than {MAX_FILES} files"
            )
        if _is_url(address):
            data = self._download(address, ref, where)
            key = address
        else:
            key = os.path.realpath(address)
            if key in self._docs:
                return self._docs[key]
            data = self._read(key, ref, where)
        self._read_bytes += len(data)
        self._read_files += 1
        if self._read_bytes > MAX_DOCUMENT_BYTES:
            raise SourceError(
                f"{self.label}: the files it references hold more than {MAX_DOCUMENT_BYTES:,} "
                f"bytes (at {ref!r})"
            )
        document = parse_spec_text(data, address)
        _absolute_refs(document, lambda r: self._absolute(r, key, f"{address}: {where}"))
        self._docs[key] = self._docs[address] = document
        return document

    def _read(self, path: str, ref: str, where: str) -> bytes:
        assert self._root is not None and not self._is_url  # set with a file location
        if os.path.commonpath([self._root, path]) != self._root:
            raise ConfigError(
                f"{self.label}: {where} refers to {ref!r}, which is outside the description's "
                f"folder {self._root} (after following symlinks); references may not leave it",
                field="openapi",
            )
        try:
            data = read_regular(path, MAX_DOCUMENT_BYTES + 1)
        except FileNotFoundError as exc:
            raise ConfigError(
                f"{self.label}: {where} refers to {ref!r}, but {path} does not exist",
                field="openapi",
            ) from exc
        except OSError as exc:
            raise ConfigError(
                f"{self.label}: {where} refers to {ref!r}, which cannot be read: {exc}",
                field="openapi",
            ) from exc
        self.files.append(path)
        return data

    def _download(self, url: str, ref: str, where: str) -> bytes:
        if not self.remote or self.fetch is None:
            raise ConfigError(
                f"{self.label}: {where} refers to {ref!r}, on the network; references are "
                "only read from the description's folder unless the entry says remote_refs: "
                "true (or bundle the description into one file)",
                field="remote_refs",
            )
        self._check_under(url, f"refers to {url!r}, which is", where)
        return self.fetch(
            url,
            lambda hop: self._check_under(
                hop, f"refers to {ref!r}, which redirects to {hop!r},", where
            ),
        )

    def _check_under(self, url: str, what: str, where: str) -> None:
        """Refuse a download (the reference, or any hop it redirects to) outside the folder a
        downloaded description came from."""
        if self._is_url and self._root is not None and not _under(url, self._root):
            raise ConfigError(
                f"{self.label}: {where} {what} outside the folder the description was "
                f"downloaded from ({self._root})",
                field="openapi",
            )

    # --- schemas ------------------------------------------------------------------------

    def schema(self, node: Any, where: str, stack: tuple[str, ...] = ()) -> Any:
        """A self-contained 2020-12 schema: references inlined, cycles cut, 3.0 rewritten."""
        kind = type(node)
        if kind is list:
            return [self.schema(item, where, stack) for item in node]
        if kind is not dict:
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            key = self.key(ref, where)
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if key in stack:
                self._cuts += 1
                name = ref.rsplit("/", 1)[-1]
                return {"description": f"a {name} (recursive: see above)", **siblings}
            resolved = self._memo.get(key)
            if resolved is None:
                cuts = self._cuts
                resolved = self.schema(self.target(ref, where), where, (*stack, key))
                if self._cuts == cuts:
                    self._memo[key] = resolved
            return {**resolved, **self.schema(siblings, where, stack)} if siblings else resolved
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED_KEYWORDS:
                continue
            if key in _SCHEMA_MAPS and type(value) is dict:
                out[key] = {k: self.schema(v, where, stack) for k, v in value.items()}
            elif key in _SUBSCHEMAS:
                out[key] = self.schema(value, where, stack)
            else:
                out[key] = value
        if _REWRITTEN.intersection(node):
            _rewrite_30(node, out)
        return out


def _rewrite_30(original: Mapping[str, Any], out: dict[str, Any]) -> None:
    """OpenAPI 3.0 keywords that mean something else (or nothing) in JSON Schema 2020-12."""
    if original.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        flag = out.get(exclusive)
        if isinstance(flag, bool):
            del out[exclusive]
            if flag and bound in out:
                out[exclusive] = out.pop(bound)


def _absolute_refs(document: Any, absolute: Callable[[str], str]) -> None:
    """Rewrite, in place, every `$ref` of a freshly read external file to its absolute form."""
    pending = [document]
    seen: set[int] = set()
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue  # a YAML alias shares the node: rewrite it once
        seen.add(id(node))
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                node["$ref"] = absolute(ref)
            pending.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            pending.extend(v for v in node if isinstance(v, dict | list))


def _is_url(text: str) -> bool:
    return re.match(r"(?i)https?://", text) is not None


def _under(url: str, folder: str) -> bool:
    """Whether `url` is on `folder`'s server and below it, `%2e%2e` and the like decoded."""
    parts, root = urllib.parse.urlsplit(url), urllib.parse.urlsplit(folder)
    if (parts.scheme.lower(), parts.netloc.lower()) != (root.scheme.lower(), root.netloc.lower()):
        return False
    path = posixpath.normpath(urllib.parse.unquote(parts.path).replace("\\", "/"))
    return (path + "/").startswith(root.path) or path + "/" == root.path


def _url_folder(url: str) -> str:
    """The URL up to and including the last `/` of its path (no query or fragment)."""
    parts = urllib.parse.urlsplit(url)
    folder = parts.path.rsplit("/", 1)[0] + "/"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, folder, "", ""))
