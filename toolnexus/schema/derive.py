"""Derivation (`schema_from_function`): type hints and docstrings become a Draft 2020-12 schema.

Runs once, when a tool is built. Nested dataclasses, TypedDicts and pydantic models are inlined
(portable to every provider); only a type that refers to itself goes to `$defs` and is reached by
`$ref`, since inlining it would never end. Besides the schema it learns how to call the function
(`FunctionSchema.bind`: converters into the hinted types, positional-only parameters, defaults
Python cannot supply). `enum_type` is here too, shared with `adapters.strict_schema`. Separate
because it is about Python types: checking and validating a schema do not care where it came
from.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import datetime as _dt
import enum
import functools
import inspect
import itertools
import math
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from types import NoneType
from typing import Any, Final, cast

from ..base import ToolContext
from ..errors import InvalidArguments, UsageError
from ._paths import _join_path
from .docstrings import _parse_docstring

__all__ = ["Converter", "FunctionSchema", "enum_type", "schema_from_function"]


Converter = Callable[[Any], Any]
"""Turns a validated JSON value into what a parameter's hint asks for (a dataclass, an Enum...)."""

_JSON_SCALARS = (str, int, float, bool, NoneType)


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
        members = [a for a in typing.get_args(hint) if a is not NoneType]
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
        if hint is None or hint is NoneType:
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
        nullable = NoneType in args
        members = [a for a in args if a is not NoneType]
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
