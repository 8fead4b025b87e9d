"""Validation (`compile_validator`): arguments checked against a tool's schema on every call.

It must be fast. The schema is compiled by `checker` into closures that answer most calls
exactly as `jsonschema` would. Only a False, an unsure answer, or a schema using keywords the
closures do not implement reaches `jsonschema.Draft202012Validator`, which then gives the
verdict and the messages. `jsonschema` is imported only then: `import toolnexus` and a build of
valid derived tools never load it. Its registry resolves references inside the schema and the
meta-schemas it ships, and nothing else: a reference to another document is never fetched (a
tool definition must not make the toolkit request a URL); the call is refused instead.
Separate because it is the hot path, on another clock than
derivation and meta-checks (which run once, at build).
"""

from __future__ import annotations

import functools
from typing import Any, Final

from ._paths import _json_path
from .checker import Check, _Compiler, _Unsupported, _Unsure
from .meta import _has_key
from .nulls import _null_plan, _NullPlan

__all__ = ["Check", "Validator", "compile_validator"]


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
        from referencing.exceptions import Unresolvable

        try:
            return bool(self._reference().is_valid(instance))
        except Unresolvable:
            return False

    def errors(self, instance: Any) -> list[tuple[str, str]]:
        """Every violation as `(json_path, message)`; empty when `instance` is valid."""
        check = self._check
        if check is not None:
            try:
                if check(instance):
                    return []
            except _Unsure:
                pass
        from referencing.exceptions import Unresolvable

        try:
            return [
                (_json_path(error.absolute_path), _message(error))
                for error in self._reference().iter_errors(instance)
            ]
        except Unresolvable as exc:
            return [
                (
                    "$",
                    f"the tool's schema refers to {str(getattr(exc, 'ref', exc))!r}, which is "
                    "not part of it; references to other documents are not fetched, so no "
                    "call of this tool can be checked (its definition must be fixed)",
                )
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

            validator = self._jsonschema = Draft202012Validator(
                self.schema, registry=_local_only()
            )
        return validator


@functools.cache
def _local_only() -> Any:
    """A `referencing` registry that retrieves nothing (jsonschema adds its meta-schemas)."""
    from referencing import Registry
    from referencing.exceptions import NoSuchResource

    def refuse(uri: str) -> Any:
        raise NoSuchResource(ref=uri)

    return Registry(retrieve=refuse)


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
