"""JSON Schema for tools: names, schemas derived from Python callables, meta-checks, validation.

Four jobs, each on a different clock:

- **Names** (`check_name`, `sanitize_name`): one rule every provider accepts.
- **Derivation** (`schema_from_function`): type hints and docstrings become a Draft 2020-12
  schema, once, when a tool is built. Nested dataclasses, TypedDicts and pydantic models are
  inlined (portable to every provider); only a type that refers to itself goes to `$defs` and is
  reached by `$ref`, since inlining it would never end.
- **Meta-checks** (`check_schema`): once per tool, at build.
- **Validation** (`compile_validator`): on every call, so it must be fast. The schema is compiled
  into nested Python closures that implement the common keywords exactly as `jsonschema` does
  (same type rules, same equality, same regex engine). A closure answers True (valid), False
  (invalid) or raises `_Unsure` (an instance type or a corner it does not model). Only a False, an
  unsure answer, or a schema using keywords the closures do not implement reaches
  `jsonschema.Draft202012Validator`, which then gives the verdict and the messages. `jsonschema`
  is imported only then: `import toolnexus` and a build of valid derived tools never load it.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import datetime as _dt
import enum
import functools
import inspect
import itertools
import json
import math
import re
import sys
import types
import typing
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Final, cast

from ._refs import MISSING, resolve_pointer
from ._suggest import did_you_mean
from .base import ToolContext
from .errors import ConfigError, InvalidArguments, UsageError

__all__ = [
    "NAME_PATTERN",
    "FunctionSchema",
    "Validator",
    "check_name",
    "check_schema",
    "compile_validator",
    "drop_null_optionals",
    "is_valid_name",
    "sanitize_name",
    "schema_from_function",
]

# --------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------

NAME_PATTERN: Final = "^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
"""The tool-name rule accepted by OpenAI, Anthropic and Gemini alike (as a JSON Schema pattern):
Gemini also wants the first character to be a letter or `_`."""

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
_UNDERSCORES = re.compile(r"_{2,}")
_HASH_LEN = 8


def is_valid_name(name: object) -> bool:
    """True when `name` is 1-64 characters of `[A-Za-z0-9_-]` starting with a letter or `_`."""
    return isinstance(name, str) and _NAME_RE.fullmatch(name) is not None


def check_name(name: object) -> str:
    """Return `name` if it is a valid tool name.

    Raises:
        UsageError: naming the bad name, the rule, and a sanitized suggestion.
    """
    if is_valid_name(name):
        return typing.cast(str, name)
    if not isinstance(name, str):
        raise UsageError(f"a tool name must be a string, not {type(name).__name__} ({name!r})")
    hint = f"; for example {sanitize_name(name)!r}" if name else ""
    raise UsageError(
        f"invalid tool name {name!r}: a name must be 1-64 characters of letters, digits, "
        f"'_' or '-', starting with a letter or '_' (the rule every provider accepts){hint}"
    )


def sanitize_name(name: str, *, max_length: int = 64) -> str:
    """Turn a name from outside (an MCP server, an OpenAPI operation) into a valid tool name.

    Accents are folded to ASCII, every other character outside `[A-Za-z0-9_-]` becomes `_`, runs
    of `_` collapse and `_` is trimmed from both ends. A name longer than `max_length` is cut and
    ends with `_` plus 8 hex digits of its hash, so two long names that share a prefix stay
    distinct and the result is the same on every run. Never returns an empty string: a name with
    nothing usable becomes `tool_<hash>`.

    Raises:
        UsageError: `max_length` is outside 16..64.
    """
    if not 16 <= max_length <= 64:
        raise UsageError(f"sanitize_name(max_length={max_length}): expected 16..64")
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    cleaned = _UNDERSCORES.sub("_", _BAD_NAME_CHARS.sub("_", folded)).strip("_").lstrip("-")
    import hashlib  # only names from outside need it; keeps `import toolnexus` light

    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]
    if not cleaned:
        return f"tool_{digest}"
    if not (cleaned[0].isalpha() or cleaned[0] == "_"):
        cleaned = f"t_{cleaned}"  # Gemini refuses a leading digit or dash
    if len(cleaned) <= max_length:
        return cleaned
    head = cleaned[: max_length - _HASH_LEN - 1].rstrip("_")
    return f"{head}_{digest}"


# --------------------------------------------------------------------------------------------
# Docstrings
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# Schemas from Python types
# --------------------------------------------------------------------------------------------

Converter = Callable[[Any], Any]
"""Turns a validated JSON value into what a parameter's hint asks for (a dataclass, an Enum...)."""

_NoneType = type(None)
_JSON_SCALARS = (str, int, float, bool, _NoneType)


@dataclass(frozen=True, kw_only=True)
class FunctionSchema:
    """What `schema_from_function` learns about a callable: its schema and how to call it."""

    parameters: dict[str, Any]
    """JSON Schema (Draft 2020-12) of the arguments object."""
    description: str | None
    """The docstring without its parameters section; None when there is no docstring."""
    context_param: str | None
    """The parameter that receives the `ToolContext`, if any (never in `parameters`)."""
    converters: Mapping[str, Converter] = field(default_factory=dict)
    """Per-parameter conversion of validated JSON into the hinted type; identity is omitted."""
    positional: tuple[str, ...] = ()
    """Positional-only parameters, in order: they cannot be passed by keyword."""
    fill: Mapping[str, Any] = field(default_factory=dict)
    """Values to pass when an argument is absent and Python cannot supply the default itself
    (a positional-only gap, a pydantic `Field(default=...)` used as the default)."""
    var_keyword: bool = False
    """The callable takes `**kwargs` (allowed only with an explicit schema)."""

    def bind(
        self, arguments: Mapping[str, Any], ctx: ToolContext | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """`(args, kwargs)` to call the function with, from validated `arguments`.

        Raises:
            InvalidArguments: a value could not become the hinted type (a bad date, a pydantic
                validator refused it); the message is meant for the model.
        """
        kwargs = dict(arguments)
        for name, value in self.fill.items():
            kwargs.setdefault(name, value)
        for name, convert in self.converters.items():
            if name in kwargs:
                kwargs[name] = _convert_argument(name, convert, kwargs[name])
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        args = tuple(kwargs.pop(name) for name in self.positional if name in kwargs)
        return args, kwargs


def _convert_argument(name: str, convert: Converter, value: Any) -> Any:
    try:
        return convert(value)
    except (ValueError, TypeError) as exc:
        # Foreign constructors (datetime.fromisoformat, pydantic validators, a dataclass'
        # __post_init__) reject a value the schema let through: that is the model's input.
        problems = _pydantic_problems(name, exc) or [(_join_path("$", name), str(exc))]
        listed = "; ".join(f"{path}: {message}" for path, message in problems)
        raise InvalidArguments(f"argument {name!r}: {listed}", problems) from exc


def _pydantic_problems(name: str, exc: Exception) -> list[tuple[str, str]]:
    """One `(path, message)` per error of a pydantic `ValidationError` (empty for others)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors) or type(exc).__module__.split(".")[0] != "pydantic_core":
        return []
    # pydantic_core.ValidationError.errors() gives ErrorDetails dicts; pydantic is optional,
    # so its type is named here rather than imported.
    details = cast("Callable[[], list[Mapping[str, Any]]]", errors)()
    problems = []
    for error in details:
        path = _join_path("$", name)
        for part in error.get("loc", ()):
            path = _join_path(path, part)
        problems.append((path, str(error.get("msg", ""))))
    return problems


def schema_from_function(
    fn: Callable[..., Any], *, parameters: Mapping[str, Any] | None = None
) -> FunctionSchema:
    """Derive a tool's JSON Schema and calling convention from `fn`'s signature and docstring.

    Parameters without a hint accept any JSON value; a function without parameters gets
    `{"type": "object", "properties": {}, "additionalProperties": false}`. Parameters without a
    default are required. A parameter hinted `ToolContext` is injected at call time and left out.
    With `parameters`, that schema is used as is (the caller checks it) and only the calling
    convention is derived; `**kwargs` then receives properties that match no parameter.

    Raises:
        UsageError: `*args`, `**kwargs` (without an explicit schema), an unresolvable or
            unsupported hint, or an explicit schema that does not fit the signature.
    """
    label = _callable_label(fn)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"cannot read the signature of {label}: {exc}") from exc
    hints = _type_hints(fn, label)
    description, param_docs = _parse_docstring(inspect.getdoc(fn))
    deriver = _Deriver(label)
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters: dict[str, Converter] = {}
    positional: list[str] = []
    fill: dict[str, Any] = {}
    context_param: str | None = None
    var_keyword = False
    for param in sig.parameters.values():
        hint = hints.get(param.name, Any) if param.annotation is not param.empty else Any
        if param.kind is param.VAR_POSITIONAL:
            raise UsageError(
                f"{label} takes *{param.name}: a tool's arguments are named, so *args cannot "
                "receive any; declare named parameters instead"
            )
        if param.kind is param.VAR_KEYWORD:
            if parameters is None:
                raise UsageError(
                    f"{label} takes **{param.name}: its arguments cannot be derived; declare "
                    "named parameters, or pass an explicit `parameters` schema"
                )
            var_keyword = True
            continue
        if param.kind is param.POSITIONAL_ONLY:
            positional.append(param.name)
        if _is_context_hint(hint):
            context_param = param.name
            continue
        default = param.default
        field_info = _pydantic_field_info(default)
        if field_info is not None:
            default = _field_info_default(field_info)
            if default is not param.empty:
                fill[param.name] = default
            hint = typing.Annotated[hint, field_info]
        elif param.kind is param.POSITIONAL_ONLY and default is not param.empty:
            fill[param.name] = default
        prop, convert = deriver.derive(hint, f"parameter {param.name!r}")
        if default is None and not _accepts_null(prop):
            prop = _nullable(prop)
        if default is not param.empty:
            encoded = _json_default(default)
            if encoded is not _NOT_JSON:
                prop = {**prop, "default": encoded}
        else:
            required.append(param.name)
        doc = param_docs.get(param.name)
        if doc and "description" not in prop:
            prop = {**prop, "description": doc}
        properties[param.name] = prop
        if convert is not None:
            converters[param.name] = convert
    if parameters is not None:
        schema = dict(parameters)
        _check_signature_fits(label, schema, properties, required, var_keyword)
    else:
        schema = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = required
        if deriver.defs:
            schema["$defs"] = deriver.defs
    return FunctionSchema(
        parameters=schema,
        description=description,
        context_param=context_param,
        converters=converters,
        positional=tuple(positional),
        fill=fill,
        var_keyword=var_keyword,
    )


def _check_signature_fits(
    label: str,
    schema: Mapping[str, Any],
    derived: Mapping[str, Any],
    required: Sequence[str],
    var_keyword: bool,
) -> None:
    declared = schema.get("properties", {})
    if not isinstance(declared, Mapping):
        return
    if not var_keyword:
        extra = sorted(set(declared) - set(derived))
        if extra:
            raise UsageError(
                f"the schema given for {label} declares {', '.join(map(repr, extra))} but the "
                f"function has no such parameter (it takes {', '.join(derived) or 'nothing'}); "
                "rename the property or add the parameter"
            )
    schema_required = set(schema.get("required", ()))
    missing = [name for name in required if name not in schema_required]
    if missing:
        raise UsageError(
            f"parameter(s) {', '.join(map(repr, missing))} of {label} have no default but the "
            "given schema does not require them; add them to `required` or give them defaults"
        )


def _callable_label(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        name = type(fn).__qualname__
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}()" if module else f"{name}()"


def _type_hints(fn: Callable[..., Any], label: str) -> dict[str, Any]:
    target: Any = fn
    if isinstance(target, functools.partial):
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target)) and callable(target):
        target = target.__init__ if inspect.isclass(target) else type(target).__call__
    try:
        return typing.get_type_hints(target, include_extras=True)
    except (NameError, TypeError, AttributeError) as exc:
        raise UsageError(
            f"cannot resolve the type hints of {label}: {exc}; define the names it uses at "
            "module level (hints written as strings are looked up in the function's module), "
            "or pass an explicit `parameters` schema"
        ) from exc


def _is_context_hint(hint: Any) -> bool:
    if hint is ToolContext:
        return True
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return _is_context_hint(typing.get_args(hint)[0])
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not _NoneType]
        return len(members) == 1 and members[0] is ToolContext
    return False


_NOT_JSON: Final = object()


def _json_default(value: Any) -> Any:
    """`value` as a JSON default, or `_NOT_JSON` when it has no faithful JSON form."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _NOT_JSON
    if isinstance(value, enum.Enum):
        return _json_default(value.value)
    if isinstance(value, PurePath) or type(value).__name__ == "UUID":
        return str(value)
    if isinstance(value, _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, list | tuple | set | frozenset):
        items = [_json_default(v) for v in value]
        if any(i is _NOT_JSON for i in items):
            return _NOT_JSON
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            enc = _json_default(v)
            if not isinstance(k, str) or enc is _NOT_JSON:
                return _NOT_JSON
            out[k] = enc
        return out
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _json_default({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _json_default(dump(mode="json"))
    return _NOT_JSON


def _accepts_null(schema: Mapping[str, Any]) -> bool:
    """Cheap structural answer: does this derived schema obviously accept null?"""
    if not schema or "$ref" in schema:
        return not schema
    t = schema.get("type")
    if t is not None:
        return t == "null" or (isinstance(t, list) and "null" in t)
    if "enum" in schema:
        return None in schema["enum"]
    if "anyOf" in schema:
        return any(_accepts_null(s) for s in schema["anyOf"])
    return "const" not in schema and not (schema.keys() - _ANNOTATIONS)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` widened to accept null, in the flattest form providers understand."""
    if not schema:
        return schema
    t = schema.get("type")
    if isinstance(t, str | list) and "$ref" not in schema and "anyOf" not in schema:
        types_ = [t] if isinstance(t, str) else list(t)
        out = {**schema, "type": [*types_, "null"]}
        if "enum" in schema:
            out["enum"] = [*schema["enum"], None]
        return out
    if "anyOf" in schema and set(schema) <= {"anyOf", *_ANNOTATIONS}:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


_ANNOTATIONS: Final = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
     "$comment", "format", "contentEncoding", "contentMediaType", "contentSchema"}
)


def _pydantic_field_info(value: Any) -> Any | None:
    pydantic_fields = sys.modules.get("pydantic.fields")
    if pydantic_fields is None:
        return None
    field_info = getattr(pydantic_fields, "FieldInfo", None)
    return value if field_info is not None and isinstance(value, field_info) else None


def _field_info_default(info: Any) -> Any:
    from pydantic_core import PydanticUndefined

    default = info.default
    if default is PydanticUndefined:
        if info.default_factory is not None:
            return info.default_factory()
        return inspect.Parameter.empty
    return default


def _pydantic_model(tp: Any) -> bool:
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(tp, type):
        return False
    return issubclass(tp, pydantic.BaseModel)


_SIMPLE: Final[dict[Any, str]] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_STRING_FORMATS: Final[dict[type, tuple[str, Converter]]] = {
    _dt.datetime: ("date-time", _dt.datetime.fromisoformat),
    _dt.date: ("date", _dt.date.fromisoformat),
    _dt.time: ("time", _dt.time.fromisoformat),
}


def _string_format(hint: Any) -> tuple[str, Converter] | None:
    """`(format, converter)` for hints that JSON carries as formatted strings."""
    found = _STRING_FORMATS.get(hint)
    if found is not None:
        return found
    # uuid is imported only if the program uses it: no hint can be uuid.UUID otherwise
    uuid = sys.modules.get("uuid")
    if uuid is not None and hint is uuid.UUID:
        return "uuid", uuid.UUID
    return None
_SEQUENCE_ORIGINS: Final = frozenset(
    {list, list, typing.Sequence, typing.Iterable, typing.MutableSequence,
     cabc.Sequence, cabc.MutableSequence, cabc.Iterable, cabc.Collection}
)
_SET_ORIGINS: Final = frozenset(
    {set, frozenset, set, frozenset, typing.AbstractSet, cabc.Set, cabc.MutableSet}
)
_MAPPING_ORIGINS: Final = frozenset(
    {dict, dict, typing.Mapping, cabc.Mapping, cabc.MutableMapping}
)


class _Deriver:
    """Turns one callable's hints into schemas (and converters), sharing `$defs` between them."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.defs: dict[str, Any] = {}
        self._stack: list[type] = []
        self._recursive: set[type] = set()
        self._def_names: dict[type, str] = {}
        self._class_converters: dict[type, Converter | None] = {}

    def fail(self, where: str, hint: Any, why: str) -> UsageError:
        return UsageError(
            f"{where} of {self.label}: cannot describe {_hint_name(hint)} in JSON Schema ({why}); "
            "use str, int, float, bool, list, dict[str, ...], Literal, Enum, a dataclass, a "
            "TypedDict or a pydantic model, or pass an explicit `parameters` schema"
        )

    def derive(self, hint: Any, where: str) -> tuple[dict[str, Any], Converter | None]:
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin is typing.Annotated:
            return self._annotated(args[0], args[1:], where)
        if hint is Any or hint is object or hint is inspect.Parameter.empty:
            return {}, None
        if hint is None or hint is _NoneType:
            return {"type": "null"}, None
        if hint in _SIMPLE:
            return {"type": _SIMPLE[hint]}, None
        supertype = getattr(hint, "__supertype__", None)
        if supertype is not None:
            return self.derive(supertype, where)
        if origin in (typing.Required, typing.NotRequired):
            return self.derive(args[0], where)
        if origin is typing.Literal:
            return self._literal(hint, args, where), None
        if origin in (typing.Union, types.UnionType):
            return self._union(args, where)
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return self._enum(hint, where)
        string_format = _string_format(hint)
        if string_format is not None:
            fmt, convert = string_format
            return {"type": "string", "format": fmt}, convert
        if isinstance(hint, type) and issubclass(hint, PurePath):
            return {"type": "string"}, hint
        if hint is list or origin in _SEQUENCE_ORIGINS or hint in _SEQUENCE_ORIGINS:
            return self._array(args, where)
        if hint is tuple or origin is tuple:
            return self._tuple(args, where)
        if hint in _SET_ORIGINS or origin in _SET_ORIGINS:
            kind = frozenset if (origin or hint) is frozenset else set
            schema, item = self._array(args, where)
            schema["uniqueItems"] = True
            if item is None:
                return schema, kind
            return schema, lambda v: kind(item(x) for x in v)
        if hint in _MAPPING_ORIGINS or origin in _MAPPING_ORIGINS:
            return self._mapping(hint, args, where)
        if isinstance(hint, type) and (
            typing.is_typeddict(hint) or dataclasses.is_dataclass(hint) or _pydantic_model(hint)
        ):
            return self._class(hint, where)
        raise self.fail(where, hint, "unsupported type")

    def _annotated(
        self, base: Any, metadata: tuple[Any, ...], where: str
    ) -> tuple[dict[str, Any], Converter | None]:
        schema, convert = self.derive(base, where)
        schema = dict(schema)
        for meta in metadata:
            if isinstance(meta, str):
                schema.setdefault("description", meta)
                continue
            _apply_constraints(schema, meta)
            info = _pydantic_field_info(meta)
            if info is not None:
                for key, attr in (("description", "description"), ("title", "title")):
                    value = getattr(info, attr, None)
                    if value:
                        schema[key] = value
                if info.examples:
                    schema["examples"] = list(info.examples)
                for constraint in info.metadata:
                    _apply_constraints(schema, constraint)
                extra = info.json_schema_extra
                if isinstance(extra, dict):
                    schema.update(extra)
        return schema, convert

    def _literal(self, hint: Any, values: tuple[Any, ...], where: str) -> dict[str, Any]:
        flat: list[Any] = []
        for literal in values:
            value = literal.value if isinstance(literal, enum.Enum) else literal
            if not isinstance(value, _JSON_SCALARS):
                raise self.fail(where, hint, f"literal {value!r} is not a JSON scalar")
            flat.append(value)
        return _enum_schema(flat)

    def _enum(self, cls: type[enum.Enum], where: str) -> tuple[dict[str, Any], Converter]:
        values = [member.value for member in cls]
        if not values:
            raise self.fail(where, cls, f"{cls.__name__} has no members, so no argument fits")
        for value in values:
            if not isinstance(value, _JSON_SCALARS):
                raise self.fail(where, cls, f"member value {value!r} is not a JSON scalar")
        schema = _enum_schema(values)
        doc = cls.__doc__
        if doc and doc != enum.Enum.__doc__ and not doc.startswith("An enumeration"):
            schema["description"] = inspect.cleandoc(doc)
        return schema, cls

    def _union(self, args: tuple[Any, ...], where: str) -> tuple[dict[str, Any], Converter | None]:
        nullable = _NoneType in args
        members = [a for a in args if a is not _NoneType]
        derived = [self.derive(m, where) for m in members]
        if len(derived) == 1:
            schema, convert = derived[0]
        else:
            schema = {"anyOf": [s for s, _ in derived]}
            convert = _union_converter(derived)
        if nullable:
            schema = _nullable(dict(schema))
            if convert is not None:
                inner = convert
                convert = lambda v: None if v is None else inner(v)  # noqa: E731
        return schema, convert

    def _array(
        self, args: tuple[Any, ...], where: str
    ) -> tuple[dict[str, Any], Converter | None]:
        schema: dict[str, Any] = {"type": "array"}
        if not args:
            return schema, None
        items, convert = self.derive(args[0], where)
        schema["items"] = items
        if convert is None:
            return schema, None
        item = convert
        return schema, lambda v: [item(x) for x in v]

    def _tuple(self, args: tuple[Any, ...], where: str) -> tuple[dict[str, Any], Converter]:
        if not args:
            return {"type": "array"}, tuple
        if len(args) == 2 and args[1] is Ellipsis:
            schema, item = self._array(args[:1], where)
            if item is None:
                return schema, tuple
            return schema, lambda v: tuple(item(x) for x in v)
        if args == ((),):
            return {"type": "array", "maxItems": 0}, tuple
        parts = [self.derive(a, where) for a in args]
        schema = {
            "type": "array",
            "prefixItems": [s for s, _ in parts],
            "minItems": len(parts),
            "maxItems": len(parts),
        }
        convs = [c for _, c in parts]
        if all(c is None for c in convs):
            return schema, tuple
        return schema, lambda v: tuple(
            x if c is None else c(x) for c, x in zip(convs, v, strict=True)
        )

    def _mapping(
        self, hint: Any, args: tuple[Any, ...], where: str
    ) -> tuple[dict[str, Any], Converter | None]:
        schema: dict[str, Any] = {"type": "object"}
        if not args:
            return schema, None
        key, value = args
        if key is not str and key is not Any:
            key_schema, _ = self.derive(key, where)
            if key_schema.get("type") != "string":
                raise self.fail(where, hint, "JSON object keys are strings")
            schema["propertyNames"] = key_schema
        key_convert = self.derive(key, where)[1] if key is not str and key is not Any else None
        value_schema, convert = self.derive(value, where)
        schema["additionalProperties"] = value_schema
        if convert is None and key_convert is None:
            return schema, None
        kc = key_convert or _identity
        vc = convert or _identity
        return schema, lambda v: {kc(k): vc(x) for k, x in v.items()}

    def _class(self, cls: type, where: str) -> tuple[dict[str, Any], Converter | None]:
        if cls in self._stack:
            self._recursive.add(cls)
            name = self._def_name(cls)
            return {"$ref": f"#/$defs/{name}"}, self._lazy_converter(cls)
        self._stack.append(cls)
        try:
            if _pydantic_model(cls):
                schema, convert = self._pydantic(cls)
            elif typing.is_typeddict(cls):
                schema, convert = self._typeddict(cls, where)
            else:
                schema, convert = self._dataclass(cls, where)
        finally:
            self._stack.pop()
        self._class_converters[cls] = convert
        if cls in self._recursive:
            name = self._def_name(cls)
            self.defs[name] = schema
            return {"$ref": f"#/$defs/{name}"}, convert
        return schema, convert

    def _def_name(self, cls: type) -> str:
        name = self._def_names.get(cls)
        if name is None:
            name = cls.__name__
            taken = set(self._def_names.values()) | set(self.defs)
            n = 2
            while name in taken:
                name = f"{cls.__name__}{n}"
                n += 1
            self._def_names[cls] = name
        return name

    def _lazy_converter(self, cls: type) -> Converter:
        converters = self._class_converters

        def convert(value: Any) -> Any:
            actual = converters.get(cls)
            return value if actual is None else actual(value)

        return convert

    def _fields_schema(
        self,
        cls: type,
        fields: Iterable[tuple[str, Any, Any]],
        where: str,
    ) -> tuple[dict[str, Any], dict[str, Converter]]:
        """Object schema for `(name, hint, default)` triples; the class docstring documents them."""
        description, docs = _parse_docstring(_own_doc(cls))
        attr_docs = _attribute_docs(cls)
        properties: dict[str, Any] = {}
        required: list[str] = []
        converters: dict[str, Converter] = {}
        for name, hint, default in fields:
            prop, convert = self.derive(hint, f"{where} field {name!r}")
            if default is _REQUIRED:
                required.append(name)
            elif default is not _NO_DEFAULT:
                if default is None and not _accepts_null(prop):
                    prop = _nullable(prop)
                encoded = _json_default(default)
                if encoded is not _NOT_JSON:
                    prop = {**prop, "default": encoded}
            doc = docs.get(name) or attr_docs.get(name)
            if doc and "description" not in prop:
                prop = {**prop, "description": doc}
            properties[name] = prop
            if convert is not None:
                converters[name] = convert
        schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        if required:
            schema["required"] = required
        if description:
            schema["description"] = description
        return schema, converters

    def _dataclass(self, cls: type, where: str) -> tuple[dict[str, Any], Converter]:
        hints = _class_hints(cls, self.label)
        triples = []
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            if f.default is not dataclasses.MISSING:
                default: Any = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = _NO_DEFAULT
            else:
                default = _REQUIRED
            hint = hints.get(f.name, Any)
            if "description" in f.metadata:
                hint = typing.Annotated[hint, str(f.metadata["description"])]
            triples.append((f.name, hint, default))
        schema, converters = self._fields_schema(cls, triples, where)

        def convert(value: Any) -> Any:
            if not isinstance(value, Mapping):
                return value
            return cls(**{k: converters.get(k, _identity)(v) for k, v in value.items()})

        return schema, convert

    def _typeddict(self, cls: type, where: str) -> tuple[dict[str, Any], Converter | None]:
        hints = _class_hints(cls, self.label)
        required_keys = getattr(cls, "__required_keys__", frozenset(hints))
        triples = []
        for name, hint in hints.items():
            # with postponed annotations Python 3.11 cannot see NotRequired/Required when it
            # computes __required_keys__, so the resolved hint has the last word
            marker = typing.get_origin(hint)
            required = marker is typing.Required or (
                marker is not typing.NotRequired and name in required_keys
            )
            triples.append((name, hint, _REQUIRED if required else _NO_DEFAULT))
        schema, converters = self._fields_schema(cls, triples, where)
        if not converters:
            return schema, None

        def convert(value: Any) -> Any:
            return {k: converters.get(k, _identity)(v) for k, v in value.items()}

        return schema, convert

    def _pydantic(self, cls: Any) -> tuple[dict[str, Any], Converter]:
        schema = dict(cls.model_json_schema(ref_template="#/$defs/{model}"))
        for name, sub in schema.pop("$defs", {}).items():
            if name in self.defs and self.defs[name] != sub:
                raise UsageError(
                    f"{self.label}: two different models are both named {name!r} in its "
                    "schema; rename one of them"
                )
            self.defs[name] = sub
        return schema, cls.model_validate


_REQUIRED: Final = object()
_NO_DEFAULT: Final = object()


def _identity(value: Any) -> Any:
    return value


def _hint_name(hint: Any) -> str:
    return getattr(hint, "__qualname__", None) or repr(hint)


def _own_doc(cls: type) -> str | None:
    doc = cls.__dict__.get("__doc__")
    if not doc:
        return None
    # dataclasses invent `Name(field: type, ...)` when a class has no docstring: not a description
    if dataclasses.is_dataclass(cls) and doc.startswith(f"{cls.__name__}("):
        return None
    return doc


def _attribute_docs(cls: type) -> dict[str, str]:
    """Docstrings written under class attributes (the `field: int` / `\"\"\"doc\"\"\"` habit)."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return {}
    docs: dict[str, str] = {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for node, nxt in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


def _class_hints(cls: type, label: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except (NameError, TypeError, AttributeError) as exc:
        raise UsageError(
            f"cannot resolve the type hints of {cls.__qualname__} (used by {label}): {exc}; "
            "define it and the names it uses at module level"
        ) from exc


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    """`const`/`enum` of `values`, with their `type`: the callers have checked that there is at
    least one and that each is a JSON scalar, so a type always exists."""
    if len(values) == 1:
        schema: dict[str, Any] = {"const": values[0]}
    else:
        schema = {"enum": values}
    schema["type"] = enum_type(values)
    return schema


def enum_type(values: Iterable[Any]) -> str | list[str] | None:
    """The JSON Schema `type` for an `enum` (or `const`) of `values`, kinds in first-seen order.

    Newer models refuse an enum without a `type`, so both function schemas and
    `adapters.strict_schema` give one. An integer beside a float is folded into "number", which
    holds both. None when no honest type exists: no values, or one that is an array, an object
    (typing it would call for `items` or `properties`) or no JSON value at all.
    """
    kinds: list[str] = []
    for value in values:
        kind = _json_type(value)
        if kind is None or kind in ("array", "object"):
            return None
        if kind not in kinds:
            kinds.append(kind)
    if "integer" in kinds and "number" in kinds:
        kinds.remove("integer")
    if not kinds:
        return None
    return kinds[0] if len(kinds) == 1 else kinds


def _json_type(value: Any) -> str | None:
    """The JSON type name of a decoded JSON value; None for a value JSON has no type for."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return None


_CONSTRAINT_ATTRS: Final = (
    ("gt", "exclusiveMinimum", None),
    ("ge", "minimum", None),
    ("lt", "exclusiveMaximum", None),
    ("le", "maximum", None),
    ("multiple_of", "multipleOf", None),
    ("min_length", "minLength", "minItems"),
    ("max_length", "maxLength", "maxItems"),
    ("pattern", "pattern", None),
)


def _apply_constraints(schema: dict[str, Any], meta: Any) -> None:
    """Copy annotated-types / pydantic constraints (`Ge(0)`, `MaxLen(5)`...) onto `schema`."""
    if isinstance(meta, str | int | float):
        return
    for attr, keyword, array_keyword in _CONSTRAINT_ATTRS:
        value = getattr(meta, attr, None)
        if value is None:
            continue
        target = keyword
        if array_keyword and schema.get("type") == "array":
            target = array_keyword
        elif array_keyword and schema.get("type") == "object":
            target = keyword.replace("Length", "Properties")
        schema[target] = value if attr != "pattern" else str(value)


def _union_converter(derived: list[tuple[dict[str, Any], Converter | None]]) -> Converter | None:
    """Convert a value for `A | B`: the first member whose JSON type fits and converts wins."""
    if all(c is None for _, c in derived):
        return None
    members = [(_json_types(s), c) for s, c in derived]

    def convert(value: Any) -> Any:
        kind = _json_type(value)
        for accepted, member in members:
            if accepted is not None and kind not in accepted and not (
                kind == "integer" and "number" in accepted
            ):
                continue
            if member is None:
                return value
            try:
                return member(value)
            except (TypeError, ValueError):
                continue
        return value

    return convert


def _json_types(schema: Mapping[str, Any]) -> frozenset[str] | None:
    t = schema.get("type")
    if isinstance(t, str):
        return frozenset({t})
    if isinstance(t, list):
        return frozenset(t)
    if "$ref" in schema:
        return frozenset({"object"})
    return None


# --------------------------------------------------------------------------------------------
# Meta-checks
# --------------------------------------------------------------------------------------------

_DRAFT_2020_12: Final = "https://json-schema.org/draft/2020-12/schema"
_SIMPLE_TYPES: Final = ("array", "boolean", "integer", "null", "number", "object", "string")
_SCHEMA_MAP_KEYS: Final = frozenset({"properties", "patternProperties", "$defs", "definitions",
                                     "dependentSchemas"})
_SCHEMA_KEYS: Final = frozenset({"additionalProperties", "items", "not", "if", "then", "else",
                                 "contains", "propertyNames", "contentSchema"})
_SCHEMA_ARRAY_KEYS: Final = frozenset({"prefixItems", "allOf", "anyOf", "oneOf"})
_NON_NEGATIVE_KEYS: Final = frozenset({"minLength", "maxLength", "minItems", "maxItems",
                                       "minProperties", "maxProperties", "minContains",
                                       "maxContains"})
_NUMBER_KEYS: Final = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_STRING_KEYS: Final = frozenset({"format", "title", "description", "$comment", "contentEncoding",
                                 "contentMediaType"})
_BOOL_KEYS: Final = frozenset({"uniqueItems", "deprecated", "readOnly", "writeOnly"})
_FREE_KEYS: Final = frozenset({"default", "const"})
_META_KNOWN: Final = frozenset(
    {"$anchor", "$comment", "$defs", "$dynamicAnchor", "$dynamicRef", "$id", "$recursiveAnchor",
     "$recursiveRef", "$ref", "$schema", "$vocabulary", "additionalProperties", "allOf", "anyOf",
     "const", "contains", "contentEncoding", "contentMediaType", "contentSchema", "default",
     "definitions", "dependencies", "dependentRequired", "dependentSchemas", "deprecated",
     "description", "else", "enum", "examples", "exclusiveMaximum", "exclusiveMinimum", "format",
     "if", "items", "maxContains", "maxItems", "maxLength", "maxProperties", "maximum",
     "minContains", "minItems", "minLength", "minProperties", "minimum", "multipleOf", "not",
     "oneOf", "pattern", "patternProperties", "prefixItems", "properties", "propertyNames",
     "readOnly", "required", "then", "title", "type", "unevaluatedItems",
     "unevaluatedProperties", "uniqueItems", "writeOnly"}
)
"""Every keyword the 2020-12 meta-schema constrains; any other key is free-form there."""
_SAFE_REF: Final = re.compile(r"#(/[A-Za-z0-9_.~$%-]*)*")


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _is_non_negative_int(value: Any) -> bool:
    return (type(value) is int or (type(value) is float and value.is_integer())) and value >= 0


def _quick_meta_ok(schema: Any) -> bool:
    """True only if `schema` is certainly valid against the 2020-12 meta-schema.

    Mirrors the meta-schema for the keywords tools use; anything else (and any doubt) says False
    and lets jsonschema decide, so this may be stricter than the meta-schema but never looser.
    """
    if schema is True or schema is False:
        return True
    if type(schema) is not dict:
        return False
    for key, value in schema.items():
        if key not in _META_KNOWN:
            continue
        if key in _SCHEMA_KEYS:
            ok = _quick_meta_ok(value)
        elif key in _SCHEMA_MAP_KEYS:
            ok = type(value) is dict and all(_quick_meta_ok(v) for v in value.values())
            if ok and key == "patternProperties":
                ok = all(_regex_ok(p) for p in value)
        elif key in _SCHEMA_ARRAY_KEYS:
            ok = type(value) is list and bool(value) and all(_quick_meta_ok(v) for v in value)
        elif key in _NON_NEGATIVE_KEYS:
            ok = _is_non_negative_int(value)
        elif key in _NUMBER_KEYS:
            ok = _is_number(value)
        elif key in _STRING_KEYS:
            ok = type(value) is str
        elif key in _BOOL_KEYS:
            ok = type(value) is bool
        elif key in _FREE_KEYS:
            ok = True
        elif key == "type":
            ok = value in _SIMPLE_TYPES if type(value) is str else (
                type(value) is list
                and bool(value)
                and all(type(v) is str and v in _SIMPLE_TYPES for v in value)
                and len(set(value)) == len(value)
            )
        elif key in ("enum", "examples"):
            ok = type(value) is list
        elif key == "required":
            ok = _string_array_ok(value)
        elif key == "dependentRequired":
            ok = type(value) is dict and all(_string_array_ok(v) for v in value.values())
        elif key == "multipleOf":
            ok = _is_number(value) and value > 0
        elif key == "pattern":
            ok = type(value) is str and _regex_ok(value)
        elif key == "$ref":
            ok = type(value) is str and _SAFE_REF.fullmatch(value) is not None
        elif key == "$schema":
            ok = value == _DRAFT_2020_12
        else:
            ok = False
        if not ok:
            return False
    return True


def _string_array_ok(value: Any) -> bool:
    return (
        type(value) is list
        and all(type(v) is str for v in value)
        and len(set(value)) == len(value)
    )


@functools.lru_cache(maxsize=512)
def _regex_ok(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def check_schema(schema: Any, *, field: str = "parameters") -> None:
    """Check that `schema` is a valid Draft 2020-12 schema whose local `$ref`s all resolve.

    Meant for build time. Common schemas are checked by a fast structural pass; anything it is
    not sure about goes through jsonschema's meta-schema validation.

    Raises:
        ConfigError: every problem, each with the JSON path of the bad part (`field` names the
            configuration key the schema came from).
    """
    if not _quick_meta_ok(schema):
        problems = _meta_problems(schema)
        if problems:
            listed = "; ".join(f"{path}: {message}" for path, message in problems)
            raise ConfigError(f"not a valid JSON Schema (Draft 2020-12): {listed}", field=field)
    if isinstance(schema, dict) and not _has_key(schema, "$id"):
        for path, ref in _local_refs(schema, "$"):
            if resolve_pointer(schema, ref) is MISSING:
                raise ConfigError(
                    f"{path}: $ref {ref!r} points to nothing in this schema; define it under "
                    "`$defs` or fix the reference",
                    field=field,
                )


def _meta_problems(schema: Any) -> list[tuple[str, str]]:
    from jsonschema import Draft202012Validator

    meta = Draft202012Validator(
        Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    problems = []
    for error in meta.iter_errors(schema):
        path = _json_path(error.absolute_path)
        message = error.message
        if error.absolute_path and error.absolute_path[-1] == "type" and isinstance(
            error.instance, str
        ):
            expected = ", ".join(_SIMPLE_TYPES)
            message = (
                f"unknown type {error.instance!r}; expected one of {expected}"
                + did_you_mean(error.instance, _SIMPLE_TYPES)
            )
        problems.append((path, message))
    return problems


def _has_key(node: Any, key: str) -> bool:
    if isinstance(node, dict):
        return key in node or any(_has_key(v, key) for v in node.values())
    if isinstance(node, list):
        return any(_has_key(v, key) for v in node)
    return False


def _local_refs(node: Any, path: str) -> Iterable[tuple[str, str]]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            yield f"{path}.$ref", ref
        for key, value in node.items():
            if key not in ("const", "enum", "default", "examples"):
                yield from _local_refs(value, _join_path(path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _local_refs(value, f"{path}[{i}]")


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


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------

Check = Callable[[Any], bool]


class _Unsure(Exception):
    """The fast checker met something it does not model exactly; jsonschema must decide."""


class _Unsupported(Exception):
    """The schema uses a keyword the fast checker does not implement: validate with jsonschema."""


_PLAIN: Final = frozenset({dict, list, str, int, float, bool, _NoneType})
"""Python types the fast checker models exactly. Subclasses (IntEnum, OrderedDict...) and other
numbers (Decimal) are legal instances too, but jsonschema's isinstance-based rules apply to them,
so they are left to it."""

_TYPE_SETS: Final[dict[str, frozenset[type]]] = {
    "string": frozenset({str}),
    "integer": frozenset({int}),
    "number": frozenset({int, float}),
    "boolean": frozenset({bool}),
    "null": frozenset({_NoneType}),
    "object": frozenset({dict}),
    "array": frozenset({list}),
}
_FALLBACK_KEYWORDS: Final = frozenset(
    {"$dynamicRef", "$dynamicAnchor", "$id", "$anchor", "$recursiveRef", "$recursiveAnchor",
     "$vocabulary", "unevaluatedItems", "unevaluatedProperties"}
)
"""Keywords whose semantics the fast checker does not reproduce: a schema using any of them is
validated by jsonschema alone."""
_FAST_KEYWORDS: Final = frozenset(
    {"type", "enum", "const", "properties", "required", "additionalProperties",
     "patternProperties", "propertyNames", "minProperties", "maxProperties", "dependentRequired",
     "dependentSchemas", "items", "prefixItems", "minItems", "maxItems", "uniqueItems",
     "contains", "minContains", "maxContains", "minLength", "maxLength", "pattern", "minimum",
     "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "allOf", "anyOf", "oneOf",
     "not", "if", "then", "else", "$ref", "format", "$schema"}
)
"""Keywords the fast checker implements exactly (`format` is an annotation: jsonschema checks it
only when given a format checker, which tool validation does not use)."""


def _wrong_type(x: Any) -> bool:
    """`x` failed a type test by exact type: False, unless `x` is exotic (then jsonschema)."""
    if type(x) in _PLAIN:
        return False
    raise _Unsure


def _accept(x: Any) -> bool:
    return True


def _reject(x: Any) -> bool:
    return False


def _unbool(element: Any, true: object = object(), false: object = object()) -> Any:
    if element is True:
        return true
    if element is False:
        return false
    return element


def _equal(one: Any, two: Any) -> bool:
    """jsonschema's equality: bools never equal numbers, sequences and mappings compare deeply."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(i, j) for i, j in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(
            key in two and _equal(value, two[key]) for key, value in one.items()
        )
    return bool(_unbool(one) == _unbool(two))


def _uniq(container: list[Any]) -> bool:
    """jsonschema's uniqueness test, step for step (its verdicts, quirks included)."""
    try:
        ordered = sorted(_unbool(i) for i in container)
        for i, j in zip(ordered, itertools.islice(ordered, 1, None), strict=False):
            if _equal(i, j):
                return False
    except (NotImplementedError, TypeError):
        seen: list[Any] = []
        for element in container:
            e = _unbool(element)
            for i in seen:
                if _equal(i, e):
                    return False
            seen.append(e)
    return True


def _multiple_of_failed(instance: Any, divisor: Any) -> bool:
    """jsonschema's multipleOf test, step for step."""
    try:
        if isinstance(divisor, float):
            quotient = instance / divisor
            try:
                return bool(int(quotient) != quotient)
            except OverflowError:
                from fractions import Fraction

                return (Fraction(instance) / Fraction(divisor)).denominator != 1
        return bool(instance % divisor)
    except (ValueError, OverflowError, ZeroDivisionError) as exc:
        raise _Unsure from exc


class _Compiler:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def compile(self, schema: Any) -> Check:
        if schema is True:
            return _accept
        if schema is False:
            return _reject
        if type(schema) is not dict:
            raise _Unsupported
        keys = schema.keys()
        if keys & _FALLBACK_KEYWORDS:
            raise _Unsupported
        if "$schema" in schema and schema["$schema"] != _DRAFT_2020_12:
            raise _Unsupported
        if not keys & _FAST_KEYWORDS:
            return _accept
        allowed, integral = self._types(schema.get("type"))
        groups: dict[type, Check] = {}
        obj = self._object(schema)
        if obj is not None:
            groups[dict] = obj
        arr = self._array(schema)
        if arr is not None:
            groups[list] = arr
        string = self._string(schema)
        if string is not None:
            groups[str] = string
        num = self._number(schema)
        if num is not None:
            groups[int] = groups[float] = num
        rest = self._generic(schema)
        return _assemble(allowed, integral, groups, rest)

    def _types(self, declared: Any) -> tuple[frozenset[type] | None, bool]:
        if declared is None:
            return None, False
        names = [declared] if isinstance(declared, str) else list(declared)
        allowed: set[type] = set()
        for name in names:
            if name not in _TYPE_SETS:
                raise _Unsupported
            allowed |= _TYPE_SETS[name]
        integral = "integer" in names and "number" not in names
        return frozenset(allowed), integral

    def _object(self, s: dict[str, Any]) -> Check | None:
        if not s.keys() & {"properties", "required", "additionalProperties", "patternProperties",
                           "propertyNames", "minProperties", "maxProperties",
                           "dependentRequired", "dependentSchemas"}:
            return None
        props = {k: self.compile(v) for k, v in s.get("properties", {}).items()}
        required = tuple(s.get("required", ()))
        ap = s.get("additionalProperties")
        additional = None if ap is None or ap is True else self.compile(ap)
        pattern_props = s.get("patternProperties", {})
        patterns = [(_compile_regex(p), self.compile(v)) for p, v in pattern_props.items()]
        joined = _compile_regex("|".join(pattern_props)) if pattern_props else None
        names = self.compile(s["propertyNames"]) if "propertyNames" in s else None
        min_p = s.get("minProperties", 0)
        max_p = s.get("maxProperties", float("inf"))
        dep_required = [(k, tuple(v)) for k, v in s.get("dependentRequired", {}).items()]
        dep_schemas = [(k, self.compile(v)) for k, v in s.get("dependentSchemas", {}).items()]
        props_get = props.get
        if not (patterns or names or dep_required or dep_schemas or "minProperties" in s
                or "maxProperties" in s):
            return _simple_object(props_get, required, additional)

        def check(x: dict[str, Any]) -> bool:
            if not min_p <= len(x) <= max_p:
                return False
            for key in required:
                if key not in x:
                    return False
            for key, deps in dep_required:
                if key in x:
                    for dep in deps:
                        if dep not in x:
                            return False
            for key, value in x.items():
                if type(key) is not str:
                    raise _Unsure
                sub = props_get(key)
                if sub is not None and not sub(value):
                    return False
                for rx, pattern_check in patterns:
                    if rx.search(key) and not pattern_check(value):
                        return False
                if (
                    additional is not None
                    and sub is None
                    and (joined is None or not joined.search(key))
                    and not additional(value)
                ):
                    return False
                if names is not None and not names(key):
                    return False
            return all(dep(x) for key, dep in dep_schemas if key in x)

        return check

    def _array(self, s: dict[str, Any]) -> Check | None:
        if not s.keys() & {"items", "prefixItems", "minItems", "maxItems", "uniqueItems",
                           "contains"}:
            return None
        prefix = [self.compile(v) for v in s.get("prefixItems", ())]
        n_prefix = len(prefix)
        items = self.compile(s["items"]) if "items" in s else None
        if items is _accept:
            items = None
        min_i = s.get("minItems", 0)
        max_i = s.get("maxItems", float("inf"))
        unique = s.get("uniqueItems") is True
        contains = self.compile(s["contains"]) if "contains" in s else None
        min_c = s.get("minContains", 1)
        max_c = s.get("maxContains")

        def check(x: list[Any]) -> bool:
            n = len(x)
            if not min_i <= n <= max_i:
                return False
            for sub, value in zip(prefix, x, strict=False):
                if not sub(value):
                    return False
            if items is not None and n > n_prefix:
                if items is _reject:
                    return False
                for i in range(n_prefix, n):
                    if not items(x[i]):
                        return False
            if contains is not None:
                matches = 0
                for value in x:
                    if contains(value):
                        matches += 1
                if matches < min_c or matches > (n if max_c is None else max_c):
                    return False
            return not unique or _uniq(x)

        return check

    def _string(self, s: dict[str, Any]) -> Check | None:
        if not s.keys() & {"minLength", "maxLength", "pattern"}:
            return None
        min_l = s.get("minLength", 0)
        max_l = s.get("maxLength", float("inf"))
        rx = _compile_regex(s["pattern"]) if "pattern" in s else None
        if rx is None:
            return lambda x: min_l <= len(x) <= max_l
        search = rx.search
        return lambda x: min_l <= len(x) <= max_l and search(x) is not None

    def _number(self, s: dict[str, Any]) -> Check | None:
        bounds = [(k, s[k]) for k in ("minimum", "maximum", "exclusiveMinimum",
                                      "exclusiveMaximum") if k in s]
        divisor = s.get("multipleOf")
        if not bounds and divisor is None:
            return None
        lo = s.get("minimum")
        hi = s.get("maximum")
        xlo = s.get("exclusiveMinimum")
        xhi = s.get("exclusiveMaximum")

        def check(x: Any) -> bool:
            if lo is not None and x < lo:
                return False
            if hi is not None and x > hi:
                return False
            if xlo is not None and x <= xlo:
                return False
            if xhi is not None and x >= xhi:
                return False
            return divisor is None or not _multiple_of_failed(x, divisor)

        return check

    def _generic(self, s: dict[str, Any]) -> list[Check]:
        rest: list[Check] = []
        if "enum" in s:
            rest.append(_enum_check(s["enum"]))
        if "const" in s:
            const = s["const"]
            rest.append(lambda x: _equal(x, const))
        if "allOf" in s:
            rest.extend(self.compile(v) for v in s["allOf"])
        if "anyOf" in s:
            any_of = [self.compile(v) for v in s["anyOf"]]
            rest.append(lambda x: any(c(x) for c in any_of))
        if "oneOf" in s:
            one_of = [self.compile(v) for v in s["oneOf"]]
            rest.append(lambda x: sum(1 for c in one_of if c(x)) == 1)
        if "not" in s:
            negated = self.compile(s["not"])
            rest.append(lambda x: not negated(x))
        if "if" in s:
            cond = self.compile(s["if"])
            then = self.compile(s["then"]) if "then" in s else _accept
            else_ = self.compile(s["else"]) if "else" in s else _accept
            rest.append(lambda x: then(x) if cond(x) else else_(x))
        if "$ref" in s:
            rest.append(self._ref(s["$ref"]))
        return rest

    def _ref(self, ref: Any) -> Check:
        if type(ref) is not str or not ref.startswith("#"):
            raise _Unsupported
        known = self.refs.get(ref)
        if known is not None:
            return known
        target = resolve_pointer(self.root, ref)
        if target is MISSING:
            raise _Unsupported
        cell: list[Check] = []

        def forward(x: Any) -> bool:
            return cell[0](x)

        self.refs[ref] = forward
        compiled = self.compile(target)
        cell.append(compiled)
        self.refs[ref] = compiled
        return compiled


def _compile_regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise _Unsupported from exc


def _enum_check(values: list[Any]) -> Check:
    if values and all(type(v) is str for v in values):
        members = frozenset(values)

        def string_enum(x: Any) -> bool:
            if type(x) is str:
                return x in members
            return _wrong_type(x)

        return string_enum
    return lambda x: any(_equal(v, x) for v in values)


def _simple_object(
    props_get: Callable[[str], Check | None], required: tuple[str, ...], additional: Check | None
) -> Check:
    """The shape of nearly every tool's arguments: properties, required, additionalProperties."""
    if additional is _reject:

        def closed(x: dict[str, Any]) -> bool:
            for key in required:
                if key not in x:
                    return False
            for key, value in x.items():
                sub = props_get(key)
                if sub is None or not sub(value):
                    return False
            return True

        return closed

    def open_(x: dict[str, Any]) -> bool:
        for key in required:
            if key not in x:
                return False
        for key, value in x.items():
            sub = props_get(key)
            if sub is None:
                if additional is not None and not additional(value):
                    return False
            elif not sub(value):
                return False
        return True

    return open_


def _assemble(
    allowed: frozenset[type] | None,
    integral: bool,
    groups: dict[type, Check],
    rest: list[Check],
) -> Check:
    """One closure for one schema, specialised for the frequent shapes."""
    if allowed is not None and not rest:
        if len(allowed) == 1 and not integral:
            (only,) = allowed
            group = groups.get(only)
            if group is None:
                return lambda x: type(x) is only or _wrong_type(x)
            return lambda x: group(x) if type(x) is only else _wrong_type(x)
        if not groups:
            if integral:
                return lambda x: (
                    type(x) in allowed
                    or (type(x) is float and x.is_integer())
                    or _wrong_type(x)
                )
            return lambda x: type(x) in allowed or _wrong_type(x)

        def typed(x: Any) -> bool:
            t = type(x)
            if t in allowed or (integral and t is float and x.is_integer()):
                group = groups.get(t)
                return True if group is None else group(x)
            return _wrong_type(x)

        return typed
    if allowed is None and not groups and len(rest) == 1:
        return rest[0]

    def check(x: Any) -> bool:
        t = type(x)
        if (
            allowed is not None
            and t not in allowed
            and not (integral and t is float and x.is_integer())
        ):
            return _wrong_type(x)
        group = groups.get(t)
        if group is not None:
            if not group(x):
                return False
        elif t not in _PLAIN:
            raise _Unsure
        return all(sub(x) for sub in rest)

    return check


_MAX_MESSAGE: Final = 500


class Validator:
    """Validates arguments against one schema; build it once with `compile_validator`."""

    __slots__ = ("_check", "_jsonschema", "_nulls", "_nulls_planned", "schema")

    def __init__(self, schema: Any, check: Check | None) -> None:
        self.schema = schema
        self._check = check
        self._jsonschema: Any = None
        self._nulls: _NullPlan | None = None
        self._nulls_planned = False

    @property
    def fast(self) -> bool:
        """True when the compiled checker handles this schema (False: jsonschema only)."""
        return self._check is not None

    def is_valid(self, instance: Any) -> bool:
        check = self._check
        if check is not None:
            try:
                return check(instance)
            except _Unsure:
                pass
        return bool(self._reference().is_valid(instance))

    def errors(self, instance: Any) -> list[tuple[str, str]]:
        """Every violation as `(json_path, message)`; empty when `instance` is valid."""
        check = self._check
        if check is not None:
            try:
                if check(instance):
                    return []
            except _Unsure:
                pass
        return [
            (_json_path(error.absolute_path), _message(error))
            for error in self._reference().iter_errors(instance)
        ]

    def drop_null_optionals(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """`drop_null_optionals` with this validator's schema, planned once."""
        if not self._nulls_planned:
            self._nulls = _null_plan(self.schema, self.schema)
            self._nulls_planned = True
        plan = self._nulls
        return arguments if plan is None else plan.apply(arguments)

    def _reference(self) -> Any:
        validator = self._jsonschema
        if validator is None:
            from jsonschema import Draft202012Validator

            validator = self._jsonschema = Draft202012Validator(self.schema)
        return validator


def _message(error: Any) -> str:
    message = str(error.message)
    if error.context:
        from jsonschema.exceptions import best_match

        # a branch that failed on more than its type says more about what was meant
        telling = [e for e in error.context if e.validator != "type"] or error.context
        best = best_match(telling)
        if best is not None:
            where = _json_path(best.absolute_path)
            message = f"{message}; closest match failed at {where}: {best.message}"
    if len(message) > _MAX_MESSAGE:
        cut = len(message) - _MAX_MESSAGE
        message = f"{message[: _MAX_MESSAGE - 100]} …[{cut} characters cut]… {message[-100:]}"
    return message


def compile_validator(schema: Any) -> Validator:
    """Build the validator of `schema` (assumed checked by `check_schema`).

    Returns:
        A `Validator` whose `errors(instance)` lists every problem with its JSON path.
    """
    check: Check | None
    try:
        if isinstance(schema, dict) and _has_key(schema, "$id"):
            raise _Unsupported
        check = _Compiler(schema).compile(schema)
    except (_Unsupported, TypeError, ValueError, AttributeError, KeyError):
        # a schema the fast checker does not model (or a malformed one): jsonschema decides
        check = None
    return Validator(schema, check)


# --------------------------------------------------------------------------------------------
# Strict-mode nulls
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _NullPlan:
    """Where a strict-mode null may be dropped in an object, and where to look deeper."""

    droppable: frozenset[str]
    nested: Mapping[str, _NullPlan]
    items: Mapping[str, _NullPlan]

    def apply(self, value: dict[str, Any]) -> dict[str, Any]:
        out = value
        for key, item in value.items():
            if item is None:
                if key in self.droppable:
                    if out is value:
                        out = dict(value)
                    del out[key]
                continue
            sub = self.nested.get(key)
            if sub is not None and type(item) is dict:
                new = sub.apply(item)
                if new is not item:
                    if out is value:
                        out = dict(value)
                    out[key] = new
            sub = self.items.get(key)
            if sub is not None and type(item) is list:
                new_list = [sub.apply(v) if type(v) is dict else v for v in item]
                if any(a is not b for a, b in zip(new_list, item, strict=True)):
                    if out is value:
                        out = dict(value)
                    out[key] = new_list
        return out


def _null_plan(schema: Any, root: Any, depth: int = 0) -> _NullPlan | None:
    schema = _deref(schema, root)
    if not isinstance(schema, dict) or depth > 32:
        return None
    props = schema.get("properties")
    if not isinstance(props, dict):
        return None
    required = set(schema.get("required", ()))
    droppable = set()
    nested: dict[str, _NullPlan] = {}
    items: dict[str, _NullPlan] = {}
    for name, sub in props.items():
        if name not in required and not _schema_accepts_null(sub, root):
            droppable.add(name)
        plan = _null_plan(sub, root, depth + 1)
        if plan is not None:
            nested[name] = plan
        target = _deref(sub, root)
        if isinstance(target, dict) and isinstance(target.get("items"), dict):
            item_plan = _null_plan(target["items"], root, depth + 1)
            if item_plan is not None:
                items[name] = item_plan
    if not droppable and not nested and not items:
        return None
    return _NullPlan(droppable=frozenset(droppable), nested=nested, items=items)


def _deref(schema: Any, root: Any) -> Any:
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 16:
        target = resolve_pointer(root, schema["$ref"])
        if target is MISSING:
            return schema
        schema = target
        seen += 1
    return schema


def _schema_accepts_null(schema: Any, root: Any) -> bool:
    """Does `schema` (a part of `root`) accept null? When unsure, yes: the null is then kept and
    validation reports it if it is wrong, rather than silently dropping a meaningful null."""
    try:
        return _Compiler(root).compile(schema)(None)
    except (_Unsupported, _Unsure, TypeError, ValueError, AttributeError, KeyError):
        return True


def _contains_none(value: Any) -> bool:
    if value is None:
        return True
    if type(value) is dict:
        return any(_contains_none(v) for v in value.values())
    if type(value) is list:
        return any(_contains_none(v) for v in value)
    return False


def drop_null_optionals(schema: Mapping[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """Remove `null`s a strict-mode model sent for optional properties that do not accept null.

    OpenAI's strict mode makes every property required and optional ones nullable, so a model
    says "absent" with `null`. This undoes it at the top level and in nested objects (also inside
    arrays of objects): a key whose value is None is dropped when it is not required and its own
    schema rejects null. `arguments` is not modified; it is returned as is when nothing changes.
    On a hot path, use `Validator.drop_null_optionals`, which plans the walk once.
    """
    if not _contains_none(arguments):
        return arguments
    plan = _null_plan(schema, schema)
    return arguments if plan is None else plan.apply(arguments)
