"""JSON Schema for tools: names, schemas derived from Python callables, meta-checks, validation.

Four jobs, each on a different clock, each in its own module:

- `names` (`check_name`, `sanitize_name`): one rule every provider accepts.
- `derive` (`schema_from_function`, with `docstrings`): type hints and docstrings become a
  Draft 2020-12 schema, once, when a tool is built.
- `meta` (`check_schema`): once per tool, at build.
- `validate` (`compile_validator`): on every call, so it must be fast.

`nulls` (`drop_null_optionals`) undoes strict mode's nulls, and `_paths` writes the JSON paths
every message uses. This package re-exports the public names. `jsonschema` is imported only when
a fallback validation or a meta-check needs it: `import toolnexus` and a build of valid derived
tools never load it.
"""

from __future__ import annotations

from .derive import FunctionSchema, schema_from_function
from .derive import enum_type as enum_type  # not in __all__; adapters.strict_schema imports it
from .meta import check_schema, schema_problems
from .names import NAME_PATTERN, check_name, is_valid_name, sanitize_name
from .nulls import drop_null_optionals
from .validate import Validator, compile_validator

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
    "schema_problems",
]
