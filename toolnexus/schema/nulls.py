"""Strict-mode nulls (`drop_null_optionals`): a null that means "absent" is dropped.

OpenAI's strict mode makes every property required and optional ones nullable, so a model says
"absent" with `null`; this undoes it before validation. Separate because it is a provider
workaround layered on validation: it asks the fast checker whether a schema accepts null, and
`Validator.drop_null_optionals` plans its walk once per schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .checker import _Compiler, _Unsupported, _Unsure
from .refs import MISSING, resolve_pointer

__all__ = ["drop_null_optionals"]


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
