"""MkDocs hooks: the parts of the docs that are generated, never typed by hand.

A page asks for a generated part with a marker on a line of its own; `on_page_markdown` puts the
Markdown in its place at build time:

- `<!-- generated: manifest-reference -->`: a table per section of the shipped manifest schema
  (`toolnexus/manifest/schema.json`: keys, types, descriptions, allowed values, defaults);
- `<!-- generated: cli-reference -->`: every command of `toolnexus`, its usage, arguments,
  flags and help text, read from the argparse parser in `toolnexus/cli.py`;
- `<!-- generated: benchmark-results -->`: the tables of `benchmarks/RESULTS.md`, the file the
  benchmark run writes, so that no figure is retyped;
- `<!-- generated: suite-size -->`: how many tests the suite holds, estimated from the source of
  `tests/` with `ast` (the docs are built without the test dependencies, so pytest cannot collect
  there; `tests/test_docs.py` checks the estimate against pytest's count).

The functions are plain and importable (the tests call them), and a marker nobody knows is an
error, so a typo cannot silently leave a page without its reference.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)

JSON = dict[str, Any]


# -- the manifest reference ---------------------------------------------------------------------

TITLES = {
    "tool": "Tool entries (`tools:`)",
    "tool_python": "Python tool (`python:`)",
    "tool_shell": "Shell tool (`command:`)",
    "tool_http": "HTTP tool (`http:`)",
    "tool_openapi": "OpenAPI entry (`openapi:`)",
    "server": "MCP server (an entry of `mcp_servers:`)",
    "include": "Include (an entry of `include:`)",
    "approval": "Approval (`approval:`)",
    "approval_rule": "Approval rule (an entry of `rules:`)",
    "sandbox": "Sandbox (`sandbox:`)",
    "middleware": "Middleware (`middleware:`)",
    "arguments": "Curated arguments (`arguments:` of a tool, an include's `override`)",
    "tool_arguments": "Curated arguments of a source's tools (`arguments:` of a server, OpenAPI)",
    "argument": "One curated argument",
    "duration": "Duration",
    "size": "Size",
    "globs": "Globs",
}
"""Section titles for the schema's `$defs`, in the order they are shown."""


def _anchor(path: str) -> str:
    return "m-" + re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


def _cell(text: str) -> str:
    """Text fit for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _type(schema: JSON, nested: dict[str, str]) -> str:
    """A short, linked description of a schema's type."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if id(schema) in nested:
        return f"mapping ([below](#{nested[id(schema)]}))"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(_type(branch, nested) for branch in schema[key])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        items = schema.get("items")
        return f"list of {_type(items, nested)}" if items else "list"
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return f"mapping of name → {_type(extra, nested)}"
        return "mapping"
    if "enum" in schema and kind is None:
        kinds = {type(v).__name__ for v in schema["enum"]}
        return "string" if kinds == {"str"} else "value"
    return str(kind) if kind else "any"


def _details(schema: JSON) -> str:
    """Allowed values, default, bounds and pattern of a schema, as one cell."""
    out = []
    if "enum" in schema:
        out.append("one of " + ", ".join(f"`{json.dumps(v)}`" for v in schema["enum"]))
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key, []):
            if "enum" in branch and "$ref" not in branch:
                out.append("one of " + ", ".join(f"`{json.dumps(v)}`" for v in branch["enum"]))
    names = schema.get("propertyNames", {}).get("enum")
    if names:
        out.append("one key, one of " + ", ".join(f"`{n}`" for n in names))
    if "default" in schema:
        out.append(f"default `{json.dumps(schema['default'])}`")
    for key, words in (("minimum", "at least"), ("minItems", "at least"), ("minLength", "")):
        if key in schema and key != "minLength":
            out.append(f"{words} {schema[key]}" + (" item(s)" if key == "minItems" else ""))
    if schema.get("minLength", 0) >= 1:
        out.append("not empty")
    if "pattern" in schema:
        out.append(schema.get("patternErrorMessage") or f"matches `{schema['pattern']}`")
    return _cell("; ".join(out))


def _is_section(schema: JSON) -> bool:
    return isinstance(schema, dict) and "properties" in schema and "$ref" not in schema


def _object_section(title: str, path: str, schema: JSON, level: int) -> list[str]:
    """A heading, the description and a table of an object schema; then its nested objects."""
    nested: dict[int, str] = {}
    later: list[tuple[str, str, JSON]] = []
    properties: JSON = schema.get("properties", {})
    for key, sub in properties.items():
        branches = [sub, *sub.get("anyOf", []), *sub.get("oneOf", [])]
        sections = [branch for branch in branches if _is_section(branch)]
        for i, branch in enumerate(sections, 1):
            sub_path = f"{path}.{key}" + (f"[{i}]" if len(sections) > 1 else "")
            nested[id(branch)] = _anchor(sub_path)
            later.append((f"`{sub_path}`", sub_path, branch))
    lines = [f"{'#' * level} {title} {{#{_anchor(path)}}}", ""]
    if schema.get("description"):
        lines += [schema["description"], ""]
    required = set(schema.get("required", []))
    if properties:
        lines += ["| key | type | description | values |", "|---|---|---|---|"]
        for key, sub in properties.items():
            shown = f"`{key}`" + (" (required)" if key in required else "")
            lines.append(
                f"| {shown} | {_cell(_type(sub, nested))} | {_cell(sub.get('description', ''))} "
                f"| {_details(sub)} |"
            )
        lines.append("")
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        lines += [f"Other keys: {_type(extra, nested)}.", ""]
    elif extra is False and properties:
        lines += ["Other keys are refused.", ""]
    for sub_title, sub_path, branch in later:
        lines += _object_section(sub_title, sub_path, branch, min(level + 1, 4))
    return lines


def _def_section(name: str, schema: JSON) -> list[str]:
    title = TITLES.get(name, f"`{name}`")
    if _is_section(schema):
        return _object_section(title, name, schema, 3)
    lines = [f"### {title} {{#{_anchor(name)}}}", ""]
    if schema.get("description"):
        lines += [schema["description"], ""]
    branches = schema.get("anyOf") or schema.get("oneOf") or []
    items = schema.get("items", {})
    item_forms = items.get("anyOf") or items.get("oneOf")
    if not branches and schema.get("type") == "array" and item_forms:
        lines += ["A list; each entry takes one of these forms:", ""]
        branches = item_forms
    if branches:
        lines += ["| form | type | description | values |", "|---|---|---|---|"]
        for i, branch in enumerate(branches, 1):
            lines.append(
                f"| {i} | {_cell(_type(branch, {}))} | {_cell(branch.get('description', ''))} "
                f"| {_details(branch)} |"
            )
        lines.append("")
        for i, branch in enumerate(branches, 1):
            if _is_section(branch):
                lines += _object_section(f"`{name}`, form {i}", f"{name}[{i}]", branch, 4)
    elif "items" in schema or "type" in schema:
        lines += [f"Type: {_type(schema, {})}. {_details(schema)}".strip(), ""]
    return lines


def manifest_reference(schema: JSON | None = None) -> str:
    """The manifest reference, section by section, from the shipped JSON Schema."""
    if schema is None:
        path = ROOT / "toolnexus" / "manifest" / "schema.json"
        schema = json.loads(path.read_text(encoding="utf-8"))
    defs: JSON = schema.get("$defs", {})
    lines = ["## Top level", ""]
    lines += _object_section("Keys of a manifest", "manifest", schema, 2)[2:]
    lines += ["## Definitions", ""]
    order = [name for name in TITLES if name in defs] + [n for n in defs if n not in TITLES]
    for name in order:
        lines += _def_section(name, defs[name])
    return "\n".join(lines).rstrip() + "\n"


# -- the CLI reference --------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    from toolnexus import cli

    return cli._parser()


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of every sub-command, in the parser's order."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, helps.get(name, ""), sub))
    return out


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings:
            names = ", ".join(f"`{s}`" for s in action.option_strings)
            if action.nargs != 0:
                names += f" `{action.metavar or action.dest.upper()}`"
        else:
            names = f"`{action.metavar or action.dest}`"
            if action.nargs in ("?", "*"):
                names += " (optional)"
            elif action.nargs == "+":
                names += " (one or more)"
        default = action.default
        shown = ""
        if action.nargs != 0 and default not in (None, argparse.SUPPRESS):
            shown = f"default `{default}`"
        rows.append(f"| {names} | {_cell(action.help or '')} | {shown} |")
    return rows


def _sentence(text: str) -> str:
    text = _cell(text)
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """Every command of `toolnexus` with its usage, arguments and help, from its parser."""
    parser = parser or _parser()
    lines = []
    for name, help_text, sub in _subcommands(parser):
        usage = " ".join(sub.format_usage().split()).removeprefix("usage: ")
        lines += [f"### `toolnexus {name}`", "", _sentence(help_text), ""]
        lines += ["```text", usage, "```", ""]
        rows = _argument_rows(sub)
        if rows:
            lines += ["| argument | help | default |", "|---|---|---|", *rows, ""]
    if parser.epilog:
        lines += ["### Exit codes", "", parser.epilog, ""]
    return "\n".join(lines).rstrip() + "\n"


# -- the benchmark figures ----------------------------------------------------------------------


def benchmark_results(path: Path | None = None) -> str:
    """`benchmarks/RESULTS.md` as it is, its headings one level down to sit under the page's."""
    text = (path or ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    first, _, rest = text.partition("\n")
    rest = re.sub(r"^(#+) ", lambda m: "#" + m.group(1) + " ", rest, flags=re.M)
    return f"Run on: {first.strip()}.\n{rest}"


# -- the size of the test suite -----------------------------------------------------------------


def _literal_length(
    node: ast.expr | None, names: dict[str, ast.expr], depth: int = 0
) -> int | None:
    """How many entries a parametrize list has, if the source says without running anything:
    a literal list, tuple, set or dict, a module-level name bound to one, their sum, `X.items()`,
    `list(X)` and the like, or a comprehension over one (its filter is not run: every entry
    counts); None otherwise."""
    if node is None or depth > 10:
        return None
    again = depth + 1
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        if any(isinstance(element, ast.Starred) for element in node.elts):
            return None
        return len(node.elts)
    if isinstance(node, ast.Dict):
        return len(node.keys)
    if isinstance(node, ast.Name) and node.id in names:
        return _literal_length(names[node.id], names, again)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _literal_length(node.left, names, again)
        right = _literal_length(node.right, names, again)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("items", "keys", "values"):
            return _literal_length(func.value, names, again)
        if isinstance(func, ast.Name) and func.id in ("list", "tuple", "sorted") and node.args:
            return _literal_length(node.args[0], names, again)
    if not isinstance(node, ast.ListComp | ast.GeneratorExp):
        return None
    if len(node.generators) == 1:
        return _literal_length(node.generators[0].iter, names, again)
    return _nested_length(node.generators, names, again)


def _nested_length(
    generators: list[ast.comprehension], names: dict[str, ast.expr], depth: int
) -> int | None:
    """`[c for key, cases in TABLE.items() for c in cases]`: the sum of the lengths of the
    values of a dict the source spells out; None for any other pair of loops."""
    outer, inner = generators if len(generators) == 2 else (None, None)
    if outer is None or inner is None or not isinstance(inner.iter, ast.Name):
        return None
    table, target = outer.iter, outer.target
    if not (isinstance(table, ast.Call) and isinstance(table.func, ast.Attribute)):
        return None
    if table.func.attr != "items" or not isinstance(target, ast.Tuple) or len(target.elts) != 2:
        return None
    value = target.elts[1]
    if not isinstance(value, ast.Name) or value.id != inner.iter.id:
        return None
    mapping = table.func.value
    while isinstance(mapping, ast.Name) and mapping.id in names:
        mapping = names[mapping.id]
    if not isinstance(mapping, ast.Dict):
        return None
    lengths = [_literal_length(v, names, depth + 1) for v in mapping.values]
    return None if None in lengths else sum(n for n in lengths if n is not None)


def _module_names(tree: ast.Module) -> dict[str, ast.expr]:
    """The module-level names bound by a plain assignment, with the expression bound."""
    names: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                names[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and node.value and isinstance(node.target, ast.Name):
            names[node.target.id] = node.value
    return names


def _is_fixture(decorator: ast.expr) -> ast.Call | None:
    """The decorator as a `@pytest.fixture(...)` call, if it is one (its keywords say the rest)."""
    if isinstance(decorator, ast.Call) and ast.unparse(decorator.func) in (
        "pytest.fixture",
        "fixture",
    ):
        return decorator
    return None


def _fixtures(tree: ast.Module) -> tuple[dict[str, int], set[str]]:
    """Fixtures of a module with a literal `params=`: {name: count}, and which of them are
    autouse (they multiply every test in their scope)."""
    named: dict[str, int] = {}
    autouse: set[str] = set()
    names = _module_names(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            call = _is_fixture(decorator)
            keywords = {k.arg: k.value for k in call.keywords} if call else {}
            count = _literal_length(keywords.get("params"), names)
            if count is None:
                continue
            named[node.name] = count
            flag = keywords.get("autouse")
            if isinstance(flag, ast.Constant) and flag.value is True:
                autouse.add(node.name)
    return named, autouse


def _parametrized(
    function: ast.FunctionDef | ast.AsyncFunctionDef, names: dict[str, ast.expr]
) -> int:
    """How many tests `@pytest.mark.parametrize` makes of one function (a list the source does
    not spell out counts as one entry)."""
    count = 1
    for decorator in function.decorator_list:
        if not (
            isinstance(decorator, ast.Call) and ast.unparse(decorator.func).endswith("parametrize")
        ):
            continue
        values = decorator.args[1] if len(decorator.args) > 1 else None
        values = values or next((k.value for k in decorator.keywords if k.arg == "argvalues"), None)
        count *= _literal_length(values, names) or 1
    return count


def _tests(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The test functions of a module: top-level `test_*` and `test_*` methods of `Test*`."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            found += [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(node)
    return [f for f in found if f.name.startswith("test")]


def count_tests(folder: Path | None = None) -> int:
    """An estimate of how many tests pytest collects under `folder`, read with `ast` alone.

    The docs are built where the test dependencies are not installed (CI's docs venv), so the
    suite cannot be collected there; reading the source comes within a few per cent: each test
    function counts once per entry of its `parametrize` lists and of the `params` of the
    fixtures it takes (or that are autouse in its module or a `conftest.py` above it), where the
    source spells those lists out (`_literal_length`). A list computed at run time counts as one
    entry and a comprehension's filter is not applied, so the figure is an estimate;
    `tests/test_docs.py` checks it within 10% of pytest's own count.
    """
    folder = folder or ROOT / "tests"
    conftests: dict[Path, tuple[dict[str, int], set[str]]] = {}
    for path in sorted(folder.rglob("conftest.py")):
        conftests[path.parent] = _fixtures(ast.parse(path.read_text(encoding="utf-8")))
    total = 0
    for path in sorted(folder.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        named, autouse = _fixtures(tree)
        names = _module_names(tree)
        for parent in path.parents:
            if parent in conftests:
                above, above_autouse = conftests[parent]
                named, autouse = {**above, **named}, above_autouse | autouse
            if parent == folder:
                break
        for function in _tests(tree):
            used = autouse | {argument.arg for argument in function.args.args}
            total += _parametrized(function, names) * math.prod(named.get(name, 1) for name in used)
    return total


def suite_size() -> str:
    """The size of the suite, estimated at build time, and how to get the exact figure."""
    return (
        f"The suite holds about {round(count_tests(), -2):,} tests: an estimate, read from the "
        "source of `tests/` when these docs were built (parametrize lists computed at run time "
        "count as one, so pytest's count is a little higher). For the exact figure, run "
        "`.venv/bin/python -m pytest --collect-only -q | tail -n 1`; `pytest -q` prints the time "
        "a run took at its end."
    )


GENERATORS: dict[str, Callable[[], str]] = {
    "manifest-reference": manifest_reference,
    "cli-reference": cli_reference,
    "benchmark-results": benchmark_results,
    "suite-size": suite_size,
}


def render(markdown: str) -> str:
    """`markdown` with every generated part in place of its marker."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"unknown generated part {name!r}; known: {sorted(GENERATORS)}")
        return GENERATORS[name]()

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs hook: fill in the generated parts of each page."""
    return render(markdown)
