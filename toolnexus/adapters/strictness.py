"""Which tools OpenAI's strict mode cannot take, and why: for `toolnexus validate` and `list`.

The OpenAI adapters send a tool whose schema `strict_schema` refuses as `"strict": false`, so
one free-form argument does not stop a whole request. That is right at call time and invisible
to whoever wrote the manifest; these helpers say it ahead of time, for every kind of tool.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from ..base import Tool

__all__ = ["not_strict", "report"]


def not_strict(tools: Iterable[Tool]) -> dict[str, str]:
    """Tool name -> why its schema cannot be made strict, for each tool that cannot."""
    from ..errors import StrictSchemaError
    from .strict import strict_schema

    found: dict[str, str] = {}
    for tool in tools:
        try:
            strict_schema(tool.parameters)
        except StrictSchemaError as exc:
            found[tool.name] = str(exc)
    return found


def report(problems: dict[str, str], out: IO[str], *, indent: str = "") -> None:
    """One line saying how many tools go out non-strict, then one line per tool."""
    if not problems:
        return
    count = len(problems)
    out.write(
        f"{indent}note: {count} tool{'' if count == 1 else 's'} cannot use OpenAI strict mode "
        "and will be sent non-strict:\n"
    )
    for name, why in problems.items():
        out.write(f"{indent}  {name}: {why}\n")

