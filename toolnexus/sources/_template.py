"""Argument placeholders (and output trimming) shared by the shell and HTTP sources.

A template is a string from the manifest in which `{name}` stands for the argument `name`.
Templates are parsed and checked against the tool's parameters once, at build time, so a typo
or an impossible placeholder is a `ConfigError` naming the field, never a surprise at call time.

The grammar, for every templated field (argv elements, `cwd`, `env` values, `stdin`, URL,
query, headers, bodies):

- `{name}`: the argument's value. The parameter must be required or have a default, because a
  missing value would silently shift the meaning of what is left.
- `{name?}`: the argument's value; when it is absent or null, the whole element holding the
  placeholder is left out (the argv element, the query key, the header, the env variable, the
  JSON key...). `--limit={limit?}` therefore disappears entirely when `limit` is not given.
- `{name?TEXT}` and `{name?TEXT|ELSE}`: a flag. `TEXT` when the argument is true; `ELSE` (or
  nothing, which leaves the element out) when it is false; left out when absent or null.
- `{name...}`: a list spread, only where a context allows it (argv elements, `args:`, query and
  form values). Each item repeats the element holding the placeholder: `{files...}` gives one
  argv element per file, `-I{dirs...}` gives `-Ia -Ib`. An absent or empty list gives none.
- `{{` and `}}`: literal braces.

Values are rendered as text: strings as they are, numbers and booleans as JSON scalars (`3`,
`2.5`, `true`), objects and lists (outside a spread) as compact JSON. In a JSON body a string
that is one lone `{name}` or `{name?}` keeps the argument's JSON value instead, an explicit
null included (only an argument that was not passed at all leaves the key out). A rendered
value is only ever substituted into the one element it belongs to: it is never re-parsed, split
or expanded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._suggest import closest
from ..errors import ConfigError, ToolError
from ..manifest.interpolate import Secret

__all__ = [
    "ABSENT",
    "Parameters",
    "Slot",
    "Template",
    "find_script_placeholders",
    "head_tail",
    "label",
    "parse_template",
    "render_scalar",
]

SlotKind = Literal["value", "optional", "flag", "spread"]


class _Absent:
    """The marker for "leave this element out" (distinct from a JSON null)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()

_NAME = r"[A-Za-z_][A-Za-z0-9_-]*"
_INNER = re.compile(rf"({_NAME})(\.\.\.|\?(.*))?", re.DOTALL)


@dataclass(frozen=True, kw_only=True)
class Slot:
    """One placeholder inside a template."""

    name: str
    kind: SlotKind
    if_true: str = ""
    """For a flag: the text when the argument is true."""
    if_false: str | None = None
    """For a flag: the text when the argument is false; None leaves the element out."""

    def written(self) -> str:
        """The placeholder as the manifest wrote it, for messages."""
        if self.kind == "spread":
            return f"{{{self.name}...}}"
        if self.kind == "optional":
            return f"{{{self.name}?}}"
        if self.kind == "flag":
            alt = "" if self.if_false is None else f"|{self.if_false}"
            return f"{{{self.name}?{self.if_true}{alt}}}"
        return f"{{{self.name}}}"


Piece = str | Slot


def render_scalar(value: Any) -> str:
    """An argument value as argv/URL/header text: strings as is, everything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, kw_only=True)
class Template:
    """A parsed template: literal text and slots, plus the field it came from (for messages)."""

    field: str
    """Where the template was written, e.g. `command[2]` or `http.query.q`."""
    pieces: tuple[Piece, ...]

    @classmethod
    def literal(cls, text: str, *, field: str) -> Template:
        """A template without placeholders (its braces are plain text)."""
        return cls(field=field, pieces=(text,) if text else ())

    @property
    def slots(self) -> tuple[Slot, ...]:
        return tuple(p for p in self.pieces if isinstance(p, Slot))

    @property
    def whole(self) -> Slot | None:
        """The slot when the template is exactly one placeholder and nothing else."""
        if len(self.pieces) == 1 and isinstance(self.pieces[0], Slot):
            return self.pieces[0]
        return None

    @property
    def spread(self) -> Slot | None:
        return next((s for s in self.slots if s.kind == "spread"), None)

    def render(
        self, args: Mapping[str, Any], *, encode: Callable[[str], str] | None = None
    ) -> str | None:
        """The text, or None when an optional placeholder says to leave the element out.

        `encode` is applied to substituted argument values only (never to literal text or
        flag texts): the URL source percent-encodes them.

        Raises:
            ToolError: a `{name}` placeholder has no value (only reachable with a null value).
        """
        out: list[str] = []
        for piece in self.pieces:
            if isinstance(piece, str):
                out.append(piece)
                continue
            text = self._slot_text(piece, args, encode)
            if text is None:
                return None
            out.append(text)
        return "".join(out)

    def render_each(
        self, args: Mapping[str, Any], *, encode: Callable[[str], str] | None = None
    ) -> list[str]:
        """Zero or more texts: one per list item for a spread, else zero or one."""
        spread = self.spread
        if spread is None:
            text = self.render(args, encode=encode)
            return [] if text is None else [text]
        value = _value(args, spread.name)
        if value is ABSENT:
            return []
        items = value if isinstance(value, list | tuple) else [value]
        texts: list[str] = []
        for item in items:
            text = self.render({**args, spread.name: item}, encode=encode)
            if text is not None:
                texts.append(text)
        return texts

    def value(self, args: Mapping[str, Any]) -> Any:
        """The JSON value for a body field: a lone `{name}` keeps the argument's JSON type,
        an explicit null included (it may mean "clear this field").

        Returns `ABSENT` when the field is to be left out.
        """
        whole = self.whole
        if whole is not None and whole.kind in ("value", "optional"):
            if whole.name in args:
                return args[whole.name]
            if whole.kind == "value":
                raise _missing(whole, self.field)
            return ABSENT
        text = self.render(args)
        return ABSENT if text is None else text

    def _slot_text(
        self, slot: Slot, args: Mapping[str, Any], encode: Callable[[str], str] | None
    ) -> str | None:
        value = _value(args, slot.name)
        if slot.kind == "flag":
            if value is ABSENT:
                return None
            if not isinstance(value, bool):
                raise ToolError(
                    f"argument '{slot.name}' must be true or false for {slot.written()} "
                    f"in {self.field}, not {render_scalar(value)}"
                )
            return slot.if_true if value else slot.if_false
        if value is ABSENT:
            if slot.kind == "value":
                raise _missing(slot, self.field)
            return None
        text = render_scalar(value)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolError(
                f"argument '{slot.name}' holds an invalid character (a lone surrogate, "
                f"{text[exc.start]!r}) that cannot be passed on; send valid Unicode text"
            ) from exc
        return encode(text) if encode is not None else text


def _value(args: Mapping[str, Any], name: str) -> Any:
    value = args.get(name, ABSENT)
    return ABSENT if value is None else value


def _missing(slot: Slot, field: str) -> ToolError:
    return ToolError(f"argument '{slot.name}' needs a value (it is used by {field}); pass one")


def parse_template(text: str, *, field: str) -> Template:
    """Parse `text` into literal pieces and slots.

    Text that `${VAR}` interpolation put there (a `Secret`'s environment spans) is literal:
    a token holding `{city}` or a stray brace is part of the token, never a placeholder, and
    messages show it as `***`.

    Raises:
        ConfigError: an unmatched brace, or braces around something that is not a placeholder.
    """
    pieces: list[Piece] = []
    literal: list[str] = []
    from_env = _env_mask(text)
    literal_env: list[bool] = []
    i = 0
    n = len(text)

    def flush() -> None:
        if literal:
            pieces.append(_literal("".join(literal), literal_env, secret=from_env is not None))
            literal.clear()
            literal_env.clear()

    while i < n:
        ch = text[i]
        if from_env is not None and from_env[i]:
            literal.append(ch)
            literal_env.append(True)
            i += 1
        elif ch in "{}" and text.startswith(ch * 2, i) and not _env_at(from_env, i + 1):
            literal.append(ch)
            literal_env.append(False)
            i += 2
        elif ch == "}":
            raise ConfigError(
                f"unmatched '}}' at position {i} in {_shown(text)}; write }}}} for a literal brace",
                field=field,
            )
        elif ch == "{":
            end = text.find("}", i + 1)
            if end < 0:
                raise ConfigError(
                    f"unmatched '{{' at position {i} in {_shown(text)}; write {{{{ for a literal "
                    "brace",
                    field=field,
                )
            if from_env is not None and any(from_env[i:end]):
                raise ConfigError(
                    f"a placeholder at position {i} in {_shown(text)} is made partly of an "
                    "interpolated value; write {{ for a literal brace",
                    field=field,
                )
            slot = _parse_slot(text[i + 1 : end], field=field)
            flush()
            pieces.append(slot)
            i = end + 1
        else:
            literal.append(ch)
            literal_env.append(False)
            i += 1
    flush()
    return Template(field=field, pieces=tuple(pieces))


def _env_mask(text: str) -> list[bool] | None:
    """Per character, whether it came from the environment (None: plain text)."""
    if not isinstance(text, Secret):
        return None
    mask = [False] * len(text)
    for a, b in text.env_spans:
        mask[a:b] = [True] * (b - a)
    return mask


def _env_at(mask: list[bool] | None, i: int) -> bool:
    return mask is not None and i < len(mask) and mask[i]


def _literal(text: str, env: list[bool], *, secret: bool) -> str:
    """A literal piece; a `Secret` (with its own environment spans) when it came from one,
    so labels and messages can mask it."""
    if not secret:
        return text
    spans: list[tuple[int, int]] = []
    for i, flag in enumerate(env):
        if not flag:
            continue
        if spans and spans[-1][1] == i:
            spans[-1] = (spans[-1][0], i + 1)
        else:
            spans.append((i, i + 1))
    return Secret(text, tuple(spans))


def _shown(text: str) -> str:
    """`text` quoted for a message, interpolated parts masked."""
    return repr(text.masked() if isinstance(text, Secret) else text)


def label(template: Template) -> str:
    """The template as written, for descriptions the model reads: placeholders as `{name}`,
    and `***` for text that came from `${VAR}` interpolation (often a token)."""
    return "".join(
        p.written() if isinstance(p, Slot) else p.masked() if isinstance(p, Secret) else p
        for p in template.pieces
    )


def _parse_slot(inner: str, *, field: str) -> Slot:
    match = _INNER.fullmatch(inner)
    if match is None:
        raise ConfigError(
            f"'{{{inner}}}' is not a placeholder: write {{name}}, {{name?}}, {{name?--flag}} "
            f"or {{name...}}, and {{{{ }}}} for literal braces",
            field=field,
        )
    name, suffix, flag = match.group(1), match.group(2), match.group(3)
    if suffix is None:
        return Slot(name=name, kind="value")
    if suffix == "...":
        return Slot(name=name, kind="spread")
    if not flag:
        return Slot(name=name, kind="optional")
    if_true, sep, if_false = flag.partition("|")
    return Slot(name=name, kind="flag", if_true=if_true, if_false=if_false if sep else None)


SpreadRule = Literal["element", "whole", "never"]
"""Where `{name...}` may appear: anywhere in an element, only as the whole value, or nowhere."""


@dataclass(frozen=True, kw_only=True)
class Parameters:
    """What templates need to know about a tool's arguments schema."""

    schema: dict[str, Any]
    properties: Mapping[str, Mapping[str, Any]]
    required: frozenset[str]
    defaults: Mapping[str, Any]

    @classmethod
    def from_schema(cls, schema: Mapping[str, Any]) -> Parameters:
        props = schema.get("properties") or {}
        if not isinstance(props, Mapping):
            raise ConfigError("parameters.properties must be a mapping", field="parameters")
        defaults = {
            name: prop["default"]
            for name, prop in props.items()
            if isinstance(prop, Mapping) and "default" in prop
        }
        return cls(
            schema=dict(schema),
            properties=props,
            required=frozenset(schema.get("required") or ()),
            defaults=defaults,
        )

    @classmethod
    def derive(cls, templates: Iterable[Template]) -> Parameters:
        """A schema made from the placeholders, for entries that declare no `parameters`.

        `{x}` is a required string, `{x?}` an optional string, a flag an optional boolean and
        a spread an optional list of strings.
        """
        kinds: dict[str, set[SlotKind]] = {}
        for template in templates:
            for slot in template.slots:
                kinds.setdefault(slot.name, set()).add(slot.kind)
        props: dict[str, Any] = {}
        required: list[str] = []
        for name, used in kinds.items():
            if len(used & {"flag", "spread"}) and len(used) > 1:
                raise ConfigError(
                    f"argument '{name}' is used both as {' and as '.join(sorted(used))}; "
                    "declare its type under parameters",
                    field="parameters",
                )
            if used == {"flag"}:
                props[name] = {"type": "boolean"}
            elif used == {"spread"}:
                props[name] = {"type": "array", "items": {"type": "string"}}
            else:
                props[name] = {"type": "string"}
                if "value" in used:
                    required.append(name)
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            schema["required"] = sorted(required)
        schema["additionalProperties"] = False
        return cls.from_schema(schema)

    def with_defaults(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """`args` plus the schema's top-level defaults for the arguments not given."""
        if not self.defaults:
            return dict(args)
        return {**self.defaults, **args}

    def check(self, template: Template, *, spread: SpreadRule = "never") -> None:
        """Check every placeholder of `template` against the parameters.

        Raises:
            ConfigError: unknown name (with a suggestion), a `{name}` that may have no value,
                a flag on a non-boolean, a spread where none is allowed or on a non-list.
        """
        spreads = [s for s in template.slots if s.kind == "spread"]
        if len(spreads) > 1:
            raise ConfigError(
                f"{template.field} holds {len(spreads)} list spreads; one element can repeat "
                "over one list only",
                field=template.field,
            )
        for slot in template.slots:
            self._check_slot(slot, template, spread)

    def _check_slot(self, slot: Slot, template: Template, spread: SpreadRule) -> None:
        field = template.field
        prop = self.properties.get(slot.name)
        if prop is None:
            hint = closest(slot.name, self.properties)
            if hint:
                advice = f"did you mean {{{hint[0]}}}?"
            elif self.properties:
                advice = "parameters are: " + ", ".join(sorted(self.properties))
            else:
                advice = "declare it under parameters.properties"
            raise ConfigError(
                f"placeholder {slot.written()} in {field} names no parameter; {advice}",
                field=field,
            )
        types = _types(prop)
        if slot.kind == "value" and slot.name not in self.required:
            if slot.name not in self.defaults:
                raise ConfigError(
                    f"placeholder {slot.written()} in {field} needs a value, but parameter "
                    f"'{slot.name}' is optional without a default: write {{{slot.name}?}} to "
                    "leave the element out when it is absent, give it a default, or list it "
                    "in required",
                    field=field,
                )
        elif slot.kind == "flag" and types and "boolean" not in types:
            raise ConfigError(
                f"flag {slot.written()} in {field} needs a boolean parameter, but "
                f"'{slot.name}' is {'/'.join(sorted(types))}",
                field=field,
            )
        elif slot.kind == "spread":
            if spread == "never":
                raise ConfigError(
                    f"list spread {slot.written()} is not allowed in {field}; use "
                    f"{{{slot.name}}} to pass the list as one JSON value",
                    field=field,
                )
            if spread == "whole" and template.whole is None:
                raise ConfigError(
                    f"list spread {slot.written()} must be the whole value of {field}",
                    field=field,
                )
            if types and "array" not in types:
                raise ConfigError(
                    f"list spread {slot.written()} in {field} needs an array parameter, but "
                    f"'{slot.name}' is {'/'.join(sorted(types))}",
                    field=field,
                )


def _types(prop: Mapping[str, Any]) -> set[str]:
    declared = prop.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return set()


_SCRIPT_PLACEHOLDER = re.compile(rf"(?<!\$)\{{({_NAME})(?:\.\.\.|\?[^{{}}]*)?\}}")


def find_script_placeholders(script: str, names: Iterable[str]) -> list[str]:
    """Placeholders naming a parameter in a `shell: true` script, which is never templated.

    `${NAME}` (shell syntax) and braces around anything else (`{ a; b; }`, awk programs) are
    not placeholders, and neither is text that `${VAR}` interpolation put there.
    """
    wanted = set(names)
    from_env = _env_mask(script)
    found: list[str] = []
    for m in _SCRIPT_PLACEHOLDER.finditer(script):
        if m.group(1) in wanted and not (from_env and any(from_env[m.start() : m.end()])):
            found.append(m.group(0))
    return found


def head_tail(text: str, limit: int, *, keep_head: float = 0.5) -> tuple[str, int]:
    """`text` cut to about `limit` characters, keeping its start and end, and how much was cut.

    The model sees a note where the middle was taken out; `keep_head=1.0` keeps the start only
    (error excerpts).
    """
    if len(text) <= limit:
        return text, 0
    head = int(limit * keep_head)
    tail = limit - head
    cut = len(text) - limit
    if tail <= 0:
        return f"{text[:head]}\n[... {cut:,} more characters cut]", cut
    return f"{text[:head]}\n[... {cut:,} characters cut ...]\n{text[-tail:]}", cut
