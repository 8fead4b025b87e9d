"""OpenAPI tools: one HTTP tool per operation of an OpenAPI 3.0 or 3.1 document.

```yaml
- openapi: specs/petstore.yaml        # YAML or JSON, relative to the manifest (or an http URL)
  base_url: http://127.0.0.1:8080     # default: the document's first server
  operations: {include: ["list*", getPet], exclude: ["delete*"]}   # operationIds or tool names
  prefix: pets_
  headers: {Authorization: "Bearer ${PET_TOKEN}"}
  keep_slashes: [path]                # path parameters whose value may hold `/`
  remote_refs: false                  # true: follow `$ref`s to http(s) URLs
```

Each operation becomes a tool named `prefix + operationId` (sanitized; `method_path`, e.g.
`get_pets_petId`, when the operation has no id), described by its summary and description.
The filters match the operationId as written (`repos/get`), sanitized (`repos_get`, as `list`
shows it) or with the prefix, an exact operationId only its own operation; a plain name
matching no operation is an error with the closest names (`openapi/select.py`). Its
arguments schema gathers:

- path, query and header parameters, under their own names (a second parameter with the same
  name gets its location as a prefix: `query_id`). Path parameters are always required; a query
  array repeats its key once per item (`form` style, exploded, the OpenAPI default).
- the `application/json` request body: its properties are merged into the arguments when it is
  a plain object whose property names clash with no parameter, so the model fills one flat
  object; otherwise the whole body is one `body` argument. A form body
  (`application/x-www-form-urlencoded`) is merged the same way; any other media type becomes a
  string `body` sent as is with that content type.

A path value is one segment (`/` sent as `%2F`) unless the parameter spans segments: marked
`x-multi-segment: true` (GitHub's descriptions: contents paths, refs) or `allowReserved: true`,
or listed in `keep_slashes`. Then `/` is kept, as the API's official clients send it. Either
way a value with a `.` or `..` segment, in any spelling a server might resolve (`http._quote`),
is refused with an error result.

Defaults written in the description stay in the schema for the model to read but are never
sent for an argument the caller left out: the server applies its own.

`$ref`s are inlined, local ones and those to other files of a multi-file description
(`openapi/refs.py`: no leaving the description's folder, no network unless `remote_refs`); a
reference that leads back into itself is cut there (the cut schema accepts anything and says
so in its description). OpenAPI 3.0 specifics (`nullable`, boolean
`exclusiveMinimum`/`exclusiveMaximum`) are rewritten to JSON Schema 2020-12. Cookie
parameters are not mapped. GET and HEAD operations are marked read-only. The document is
parsed with the fastest reader that keeps the manifest's YAML safety (`openapi/text.py`).

Requests and responses behave exactly as for `http:` tools (same module, same limits), with
`allow_hosts` set to the base URL's host.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..base import Tool
from ..errors import ConfigError, SourceError
from ..openapi.refs import Resolver
from ..openapi.select import Selection
from ..openapi.text import MAX_DOCUMENT_BYTES, parse_spec_text
from ..schema import sanitize_name
from . import BuildContext
from ._template import Parameters, Slot, SlotKind, Template
from .http import (
    DEFAULT_MAX_OUTPUT,
    DEFAULT_MAX_RESPONSE,
    DEFAULT_TIMEOUT,
    Body,
    Endpoint,
    allow_hosts,
    sandbox_hosts,
)

if TYPE_CHECKING:
    import httpx

__all__ = ["build_openapi_tools"]

_METHODS = ("get", "put", "post", "delete", "options", "head", "patch")
_ARG_NAME = re.compile(r"[^A-Za-z0-9_.-]")
_PATH_PARAM = re.compile(r"\{([^{}]+)\}")
_FETCH_TIMEOUT = 10.0
_MAX_REDIRECTS = 10


def build_openapi_tools(decl: Mapping[str, Any], ctx: BuildContext) -> list[Tool]:
    """Build one tool per selected operation of an `openapi:` manifest entry.

    Raises:
        ConfigError: a missing document, a bad base URL or header, a filter naming no operation
            or matching nothing, or a `$ref` that may not be followed.
        SourceError: the document does not parse or is not OpenAPI 3.
    """
    source = decl.get("openapi")
    if not isinstance(source, str) or not source:
        raise ConfigError(
            "openapi must be the path or URL of an OpenAPI 3 document", field="openapi"
        )
    document, files, label = _load(source, ctx)
    refs = Resolver(
        document,
        label,
        location=label,
        remote=bool(decl.get("remote_refs", False)),
        fetch=lambda url, check: _fetch(url, ctx, check),
        files=files,
    )
    base_url = _base_url(decl.get("base_url"), document, source)
    url_base = Template.literal(base_url.rstrip("/"), field="base_url")
    hosts = allow_hosts(None, url_base, "base_url")
    headers = _static_headers(decl.get("headers"))
    keep = _names(decl.get("keep_slashes"), "keep_slashes")
    operations = decl.get("operations") or {}
    prefix = str(decl.get("prefix") or "")
    common: dict[str, Any] = {
        "timeout": float(ctx.timeout or DEFAULT_TIMEOUT),
        "max_response": int(decl.get("max_response") or DEFAULT_MAX_RESPONSE),
        "max_output": int(decl.get("max_output") or DEFAULT_MAX_OUTPUT),
        "follow_redirects": bool(decl.get("follow_redirects", False)),
        "allow_hosts": hosts,
        "network": sandbox_hosts(ctx),
        "client": ctx.http_client,
    }
    paths = refs.deref(document.get("paths") or {}, "paths")
    if not isinstance(paths, Mapping):
        raise SourceError(f"{label}: paths must be a mapping of paths to operations")
    selection = Selection(
        include=list(operations.get("include") or ["*"]),
        exclude=list(operations.get("exclude") or []),
        label=label,
        ids=_operation_ids(refs, paths),
    )
    tools: list[Tool] = []
    names: set[str] = set()
    for path, raw_item in paths.items():
        item = refs.deref(raw_item, f"paths.{path}")
        if not isinstance(item, dict):
            continue
        shared = list(item.get("parameters") or [])
        for method in _METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            raw_id = op.get("operationId")
            op_id = str(raw_id) if raw_id else sanitize_name(f"{method}_{path}")
            shown = sanitize_name(op_id)
            full = sanitize_name(prefix + shown) if prefix else shown
            if not selection.selects(shown, op_id, full, own_id=str(raw_id) if raw_id else None):
                continue
            name = _unique(full, names)
            endpoint = _endpoint(
                refs,
                method=method,
                path=str(path),
                op=op,
                shared=shared,
                url_base=url_base,
                headers=headers,
                keep=keep,
                common=common,
                where=f"{method.upper()} {path}",
            )
            tool = _tool(
                name,
                method=method,
                path=str(path),
                op=op,
                op_id=op_id,
                endpoint=endpoint,
                files=files,
                label=label,
                ctx=ctx,
            )
            tools.append(tool)
    selection.check(len(tools))
    return tools


def _operation_ids(refs: Resolver, paths: Mapping[str, Any]) -> frozenset[str]:
    """Every operationId the description writes (for `Selection.ids`)."""
    ids: set[str] = set()
    for path, raw_item in paths.items():
        item = refs.deref(raw_item, f"paths.{path}")
        if isinstance(item, dict):
            for method in _METHODS:
                op = item.get(method)
                if isinstance(op, dict) and op.get("operationId"):
                    ids.add(str(op["operationId"]))
    return frozenset(ids)


def _names(value: Any, field: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str) or not isinstance(value, list):
        raise ConfigError("expected a list of parameter names, e.g. [path]", field=field)
    return frozenset(str(v) for v in value)


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 2
    while candidate in taken:
        suffix = f"_{n}"
        candidate = name[: 64 - len(suffix)] + suffix
        n += 1
    taken.add(candidate)
    return candidate


def _tool(
    name: str,
    *,
    method: str,
    path: str,
    op: Mapping[str, Any],
    op_id: str,
    endpoint: Endpoint,
    files: list[str],
    label: str,
    ctx: BuildContext,
) -> Tool:
    text = [str(op[k]).strip() for k in ("summary", "description") if op.get(k)]
    description = "\n\n".join(dict.fromkeys(text)) or f"{method.upper()} {path}"
    if op.get("deprecated"):
        description = "(Deprecated) " + description
    safe = method in ("get", "head", "options")
    return Tool(
        name=name,
        handler=endpoint.call,
        description=description,
        parameters=endpoint.parameters.schema,
        source="http",
        read_only=safe,
        destructive=not safe,
        idempotent=safe or method in ("put", "delete"),
        open_world=True,
        origin=ctx.origin,
        meta={
            "files": files,
            "openapi": label,
            "operation_id": op_id,
            "tags": tuple(t for t in op.get("tags") or () if isinstance(t, str)),
            "method": method.upper(),
            "path": path,
            "url": "".join(p if isinstance(p, str) else p.written() for p in endpoint.url.pieces),
        },
    )


# --- loading ---------------------------------------------------------------------------------


def _load(source: str, ctx: BuildContext) -> tuple[Mapping[str, Any], list[str], str]:
    """The document, the files to watch for changes, and a label for messages.

    The files list is the one every tool's `meta["files"]` holds: the files its external
    `$ref`s read are added to it as they are read.
    """
    if re.match(r"(?i)https?://", source):
        return _parse(_fetch(source, ctx), source), [], source
    path = ctx.resolve(source)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_DOCUMENT_BYTES + 1)
    except FileNotFoundError as exc:
        raise ConfigError(
            f"OpenAPI document {str(path)!r} does not exist (paths are relative to the "
            "manifest's folder)",
            field="openapi",
        ) from exc
    except OSError as exc:
        raise ConfigError(
            f"cannot read OpenAPI document {str(path)!r}: {exc}", field="openapi"
        ) from exc
    return _parse(data, str(path)), [str(path)], str(path)


def _fetch(url: str, ctx: BuildContext, check: Callable[[str], None] | None = None) -> bytes:
    """The document at `url`, redirects followed (each one passed to `check` first, which
    raises to refuse it) and the body read no further than `MAX_DOCUMENT_BYTES`."""
    import httpx

    try:
        with httpx.Client(timeout=ctx.timeout or _FETCH_TIMEOUT) as client:
            request = client.build_request("GET", url)
            for _ in range(_MAX_REDIRECTS + 1):
                response = client.send(request, stream=True)
                try:
                    if response.next_request is None:
                        return _read_document(response, url)
                    request = response.next_request
                finally:
                    response.close()
                if check is not None:
                    check(str(request.url))
    except httpx.HTTPError as exc:
        raise SourceError(f"cannot download OpenAPI document {url}: {exc}") from exc
    raise SourceError(
        f"cannot download OpenAPI document {url}: more than {_MAX_REDIRECTS} redirects"
    )


def _read_document(response: httpx.Response, url: str) -> bytes:
    if response.status_code >= 400:
        raise SourceError(
            f"cannot download OpenAPI document {url}: HTTP {response.status_code} "
            f"{response.reason_phrase}"
        )
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_DOCUMENT_BYTES:
            raise SourceError(
                f"cannot use OpenAPI document {url}: it is larger than {MAX_DOCUMENT_BYTES:,} bytes"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(data: bytes, label: str) -> Mapping[str, Any]:
    document = parse_spec_text(data, label)
    if not isinstance(document, Mapping):
        raise SourceError(f"{label}: an OpenAPI document is a mapping at its top level")
    version = str(document.get("openapi", ""))
    if not version.startswith("3."):
        found = f"swagger {document['swagger']}" if "swagger" in document else repr(version or None)
        raise SourceError(
            f"{label}: expected an OpenAPI 3.0 or 3.1 document (openapi: 3.x), found {found}; "
            "convert Swagger 2 documents first (e.g. with swagger2openapi)"
        )
    return document


def _base_url(given: Any, document: Mapping[str, Any], source: str) -> str:
    if given:
        url = str(given)
    else:
        servers = document.get("servers") or []
        if not servers or not isinstance(servers[0], Mapping) or not servers[0].get("url"):
            raise ConfigError(
                "the document lists no servers; set base_url (e.g. https://api.example.com)",
                field="base_url",
            )
        server = servers[0]
        url = str(server["url"])
        for var, spec in (server.get("variables") or {}).items():
            url = url.replace(f"{{{var}}}", str(spec.get("default", "")))
        if url.startswith("/") and re.match(r"(?i)https?://", source):
            import httpx

            url = str(httpx.URL(source).join(url))
    if not re.match(r"(?i)https?://[^/{}]+", url):
        raise ConfigError(
            f"base URL {url!r} must be absolute (http:// or https:// and a host); set base_url",
            field="base_url",
        )
    return url


def _static_headers(value: Any) -> list[tuple[str, Template]]:
    if value is None:
        return []
    if not isinstance(value, Mapping):
        raise ConfigError("headers must be a mapping of names to values", field="headers")
    # Manifest headers are sent as written: braces in them are not placeholders.
    return [
        (str(k), Template.literal(v if isinstance(v, str) else json.dumps(v), field=f"headers.{k}"))
        for k, v in value.items()
    ]


# --- one operation ---------------------------------------------------------------------------


def _endpoint(
    refs: Resolver,
    *,
    method: str,
    path: str,
    op: Mapping[str, Any],
    shared: list[Any],
    url_base: Template,
    headers: list[tuple[str, Template]],
    keep: frozenset[str],
    common: Mapping[str, Any],
    where: str,
) -> Endpoint:
    declared: dict[tuple[str, str], Mapping[str, Any]] = {}
    for raw in [*shared, *(op.get("parameters") or [])]:
        param = refs.deref(raw, where)
        if isinstance(param, dict) and "name" in param and "in" in param:
            declared[(str(param["in"]), str(param["name"]))] = param  # operation's win
    props: dict[str, Any] = {}
    required: list[str] = []
    slot_of: dict[tuple[str, str], Slot] = {}
    for name in _PATH_PARAM.findall(path):
        declared.setdefault(("path", name), {"name": name, "in": "path", "required": True})
    spans: set[str] = set()
    for (location, name), param in declared.items():
        if location not in ("path", "query", "header"):
            continue
        schema = _param_schema(refs, param, where)
        arg = _arg_name(name, location, props)
        must = location == "path" or bool(param.get("required"))
        props[arg] = schema
        if must:
            required.append(arg)
        kind: SlotKind = "value" if must else "optional"
        if location == "query" and _is_array(schema) and param.get("explode", True):
            kind = "spread"
        slot_of[(location, name)] = Slot(name=arg, kind=kind)
        if location == "path" and (
            name in keep
            or param.get("x-multi-segment") is True
            or param.get("allowReserved") is True
        ):
            spans.add(arg)
    url = _url(url_base, path, slot_of)
    query = [
        (name, Template(field=f"query.{name}", pieces=(slot,)))
        for (location, name), slot in slot_of.items()
        if location == "query"
    ]
    header_templates = headers + [
        (name, Template(field=f"headers.{name}", pieces=(slot,)))
        for (location, name), slot in slot_of.items()
        if location == "header"
    ]
    body = _body(refs, op.get("requestBody"), props, required, where)
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    # No defaults: a value the caller left out is not sent (the server applies its own).
    parameters = Parameters(
        schema=schema, properties=props, required=frozenset(required), defaults={}
    )
    return Endpoint(
        method=method.upper(),
        url=url,
        query=tuple(query),
        headers=tuple(header_templates),
        body=body,
        parameters=parameters,
        keep_slashes=frozenset(spans),
        **common,
    )


def _param_schema(refs: Resolver, param: Mapping[str, Any], where: str) -> dict[str, Any]:
    raw = param.get("schema")
    if raw is None:
        content = param.get("content")
        if isinstance(content, dict) and content:
            raw = next(iter(content.values())).get("schema")
    schema = refs.schema(raw if raw is not None else {"type": "string"}, where)
    schema = dict(schema) if isinstance(schema, dict) else {}
    if param.get("description") and "description" not in schema:
        schema["description"] = str(param["description"])
    return schema


def _arg_name(name: str, location: str, taken: Mapping[str, Any]) -> str:
    arg = _ARG_NAME.sub("_", name)[:64] or location
    if arg in taken:
        arg = f"{location}_{arg}"[:64]
    return arg


def _is_array(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def _url(base: Template, path: str, slots: Mapping[tuple[str, str], Slot]) -> Template:
    pieces: list[str | Slot] = list(base.pieces)
    for i, part in enumerate(_PATH_PARAM.split(path)):
        if i % 2:
            pieces.append(slots[("path", part)])
        elif part:
            pieces.append(part)
    merged: list[str | Slot] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        else:
            merged.append(piece)
    return Template(field="url", pieces=tuple(merged))


def _body(
    refs: Resolver, raw: Any, props: dict[str, Any], required: list[str], where: str
) -> Body | None:
    request = refs.deref(raw, where)
    if not isinstance(request, dict):
        return None
    content = request.get("content") or {}
    if not isinstance(content, dict) or not content:
        return None
    must = bool(request.get("required"))
    media_type = next(
        (
            t
            for t in content
            if t.split(";")[0].strip() in ("application/json",) or t.endswith("+json")
        ),
        None,
    )
    if media_type is not None:
        schema = _body_schema(refs, content[media_type], where)
        merged = _merge(schema, props, required, must)
        if merged is not None:
            node = {k: Template(field=f"body.{k}", pieces=(slot,)) for k, slot in merged.items()}
            return Body(kind="json", json=node)
        slot = _whole_body(schema, props, required, must)
        return Body(kind="json", json=Template(field="body", pieces=(slot,)))
    if "application/x-www-form-urlencoded" in content:
        schema = _body_schema(refs, content["application/x-www-form-urlencoded"], where)
        merged = _merge(schema, props, required, must)
        if merged is not None:
            form = tuple(
                (k, Template(field=f"body.{k}", pieces=(slot,))) for k, slot in merged.items()
            )
            return Body(kind="form", form=form)
    media_type = next(iter(content))
    text_schema = {"type": "string", "description": f"the request body ({media_type})"}
    slot = _whole_body(text_schema, props, required, must)
    return Body(kind="raw", raw=Template(field="body", pieces=(slot,)), content_type=media_type)


def _body_schema(refs: Resolver, media: Any, where: str) -> dict[str, Any]:
    schema = refs.schema(media.get("schema") if isinstance(media, dict) else None, where)
    return dict(schema) if isinstance(schema, dict) else {}


def _merge(
    schema: Mapping[str, Any], props: dict[str, Any], required: list[str], must: bool
) -> dict[str, Slot] | None:
    """Merge a plain object body's properties into the arguments; None when it is not one."""
    body_props = schema.get("properties")
    plain = (
        schema.get("type", "object") == "object"
        and isinstance(body_props, dict)
        and body_props
        and not any(k in schema for k in ("allOf", "anyOf", "oneOf", "not", "if"))
        and schema.get("additionalProperties") in (None, False)
        and not set(body_props) & set(props)
        and all(not _ARG_NAME.search(k) for k in body_props)
    )
    if not plain:
        return None
    assert isinstance(body_props, dict)
    inner_required = set(schema.get("required") or ()) if must else set()
    slots: dict[str, Slot] = {}
    for key, sub in body_props.items():
        if isinstance(sub, dict) and sub.get("readOnly") is True:
            continue  # readOnly properties are sent by the server, never to it
        props[key] = sub
        if key in inner_required:
            required.append(key)
        slots[key] = Slot(name=key, kind="value" if key in inner_required else "optional")
    return slots


def _whole_body(
    schema: Mapping[str, Any], props: dict[str, Any], required: list[str], must: bool
) -> Slot:
    name = "body" if "body" not in props else "request_body"
    props[name] = dict(schema)
    if must:
        required.append(name)
    return Slot(name=name, kind="value" if must else "optional")
