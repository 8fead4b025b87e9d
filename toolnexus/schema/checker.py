"""The compiled fast checker: a schema turned into nested Python closures.

The closures implement the common keywords exactly as `jsonschema` does (same type rules, same
equality, same regex engine). A closure answers True (valid), False (invalid) or raises
`_Unsure` (an instance type or a corner it does not model); a schema using a keyword it does not
implement raises `_Unsupported` at compile time. `validate` puts jsonschema behind it for those
cases and for messages; `nulls` asks it whether a schema accepts null. Separate so that both
build on it without importing each other.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from types import NoneType
from typing import Any, Final

from .meta import _DRAFT_2020_12
from .refs import MISSING, resolve_pointer

__all__ = ["Check"]

Check = Callable[[Any], bool]


class _Unsure(Exception):
    """The fast checker met something it does not model exactly; jsonschema must decide."""


class _Unsupported(Exception):
    """The schema uses a keyword the fast checker does not implement: validate with jsonschema."""


_PLAIN: Final = frozenset({dict, list, str, int, float, bool, NoneType})
"""Python types the fast checker models exactly. Subclasses (IntEnum, OrderedDict...) and other
numbers (Decimal) are legal instances too, but jsonschema's isinstance-based rules apply to them,
so they are left to it."""

_TYPE_SETS: Final[dict[str, frozenset[type]]] = {
    "string": frozenset({str}),
    "integer": frozenset({int}),
    "number": frozenset({int, float}),
    "boolean": frozenset({bool}),
    "null": frozenset({NoneType}),
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
