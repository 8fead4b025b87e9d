"""Names, schema derivation, meta-checks, validation (differential against jsonschema)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import random
import subprocess
import sys
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Annotated, Any, Literal, NewType, NotRequired, Optional, TypedDict

import pydantic
import pytest
from annotated_types import Ge, MaxLen
from jsonschema import Draft202012Validator

from toolnexus.base import ToolContext
from toolnexus.errors import ConfigError, UsageError
from toolnexus.schema import (
    NAME_PATTERN,
    check_name,
    check_schema,
    compile_validator,
    drop_null_optionals,
    is_valid_name,
    sanitize_name,
    schema_from_function,
)

# ------------------------------------------------------------------------------------------
# names
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "read_file", "get-weather", "A1", "x" * 64, "_", "_-x"])
def test_valid_names(name: str) -> None:
    assert is_valid_name(name)
    assert check_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "x" * 65, "read file", "a.b", "naïve", "a/b", "a\n", "-x", "1password"]
)
def test_invalid_names_are_refused_with_the_rule_and_a_suggestion(name: str) -> None:
    assert not is_valid_name(name)
    with pytest.raises(UsageError) as err:
        check_name(name)
    assert repr(name) in str(err.value)
    assert "1-64 characters" in str(err.value)
    if name:
        assert repr(sanitize_name(name)) in str(err.value)


def test_sanitized_names_start_with_a_letter_for_gemini() -> None:
    assert sanitize_name("1password") == "t_1password"
    assert sanitize_name("-flag") == "flag"
    assert is_valid_name(sanitize_name("42"))


def test_check_name_refuses_non_strings() -> None:
    with pytest.raises(UsageError, match="must be a string"):
        check_name(12)
    assert not is_valid_name(None)


def test_name_pattern_is_the_json_schema_form_of_the_rule() -> None:
    validator = Draft202012Validator({"type": "string", "pattern": NAME_PATTERN})
    assert validator.is_valid("read_file")
    assert not validator.is_valid("read file")
    assert not validator.is_valid("x" * 65)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("read_file", "read_file"),
        ("read file", "read_file"),
        ("a..b//c", "a_b_c"),
        ("  padded  ", "padded"),
        ("café-crème", "cafe-creme"),
        ("__x__", "x"),
        ("ns/tool.v2", "ns_tool_v2"),
    ],
)
def test_sanitize_name(raw: str, expected: str) -> None:
    assert sanitize_name(raw) == expected
    assert is_valid_name(sanitize_name(raw))


def test_sanitize_name_is_never_empty_and_keeps_distinct_inputs_apart() -> None:
    a, b = sanitize_name("???"), sanitize_name("!!!")
    assert is_valid_name(a) and is_valid_name(b)
    assert a.startswith("tool_") and a != b
    assert sanitize_name("") .startswith("tool_")


def test_sanitize_name_truncates_long_names_with_a_hash_so_they_do_not_collide() -> None:
    prefix = "mcp_server_with_a_really_long_name__" + "x" * 40
    one, two = sanitize_name(prefix + "_list_things"), sanitize_name(prefix + "_get_things")
    assert len(one) == len(two) == 64
    assert one != two
    assert one[:40] == two[:40]
    assert is_valid_name(one) and is_valid_name(two)
    # deterministic: the same input gives the same name on every run (hash, not random)
    assert sanitize_name(prefix + "_list_things") == one
    assert len(sanitize_name("y" * 100, max_length=20)) == 20


def test_sanitize_name_refuses_a_useless_max_length() -> None:
    with pytest.raises(UsageError, match=r"16\.\.64"):
        sanitize_name("abc", max_length=8)


# ------------------------------------------------------------------------------------------
# derivation
# ------------------------------------------------------------------------------------------


class Color(enum.Enum):
    """A colour."""

    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    """A point on the plane.

    Attributes:
        x: horizontal position
    """

    x: int
    y: int = 0
    """vertical position"""
    tags: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Tree:
    value: int
    children: list[Tree] = dataclasses.field(default_factory=list)


class Options(TypedDict):
    verbose: bool
    color: NotRequired[Color]


class Model(pydantic.BaseModel):
    a: int
    b: list[str] = []


UserId = NewType("UserId", int)


def _meta_valid(schema: dict[str, Any]) -> None:
    Draft202012Validator.check_schema(schema)
    check_schema(schema)


def test_a_function_without_parameters_gets_the_empty_object_schema() -> None:
    def ping() -> str:
        return "pong"

    fs = schema_from_function(ping)
    assert fs.parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    assert fs.description is None
    assert fs.context_param is None


def test_unannotated_parameters_accept_any_json_value_and_are_required() -> None:
    def f(a, b=2):  # type: ignore[no-untyped-def]
        return a

    fs = schema_from_function(f)
    assert fs.parameters["properties"] == {"a": {}, "b": {"default": 2}}
    assert fs.parameters["required"] == ["a"]


def test_scalar_container_and_literal_hints() -> None:
    def f(
        *,
        s: str,
        i: int,
        x: float,
        b: bool,
        names: list[str],
        pair: tuple[int, str],
        many: tuple[float, ...],
        unique: set[int],
        frozen: frozenset[str],
        scores: dict[str, float],
        mode: Literal["fast", "slow"],
        one: Literal[3],
        mixed: Literal[1, "a", None],
        anything: Any,
        uid: UserId,
        when: Annotated[str, "an ISO date"] = "2024-01-01",
    ) -> None: ...

    props = schema_from_function(f).parameters["properties"]
    assert props["s"] == {"type": "string"}
    assert props["i"] == {"type": "integer"}
    assert props["x"] == {"type": "number"}
    assert props["b"] == {"type": "boolean"}
    assert props["names"] == {"type": "array", "items": {"type": "string"}}
    assert props["pair"] == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "minItems": 2,
        "maxItems": 2,
    }
    assert props["many"] == {"type": "array", "items": {"type": "number"}}
    assert props["unique"] == {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    assert props["frozen"]["uniqueItems"] is True
    assert props["scores"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["mode"] == {"enum": ["fast", "slow"], "type": "string"}
    assert props["one"] == {"const": 3, "type": "integer"}
    assert props["mixed"] == {"enum": [1, "a", None], "type": ["integer", "string", "null"]}
    assert props["anything"] == {}
    assert props["uid"] == {"type": "integer"}
    assert props["when"] == {
        "type": "string", "description": "an ISO date", "default": "2024-01-01"
    }


class Pair(enum.Enum):
    LEFT = (0, 1)
    RIGHT = (1, 0)


class Nothing(enum.Enum):
    """No member to choose."""


def test_an_enum_is_typed_only_from_json_scalar_members() -> None:
    """An Enum of tuples must not come out typed "string"; an empty one has no type to give."""

    def pair(p: Pair) -> None: ...

    def nothing(n: Nothing) -> None: ...

    with pytest.raises(UsageError, match=r"member value \(0, 1\) is not a JSON scalar"):
        schema_from_function(pair)
    with pytest.raises(UsageError, match="Nothing has no members") as err:
        schema_from_function(nothing)
    assert "parameter 'n'" in str(err.value)


def test_optional_union_enum_and_defaults() -> None:
    def f(
        *,
        a: int | None,
        b: Optional[str] = None,  # noqa: UP045 - the typing spelling must work too
        c: int | str = 1,
        color: Color = Color.RED,
        level: Level = Level.LOW,
        implicit: int = None,  # type: ignore[assignment]  # noqa: RUF013 - on purpose
        points: list[Point] | None = None,
    ) -> None: ...

    schema = schema_from_function(f).parameters
    props = schema["properties"]
    assert props["a"] == {"type": ["integer", "null"]}
    assert props["b"] == {"type": ["string", "null"], "default": None}
    assert props["c"] == {"anyOf": [{"type": "integer"}, {"type": "string"}], "default": 1}
    assert props["color"] == {
        "enum": ["red", "blue"], "type": "string", "description": "A colour.", "default": "red"
    }
    assert props["level"] == {"enum": [1, 2], "type": "integer", "default": 1}
    # a None default makes the parameter nullable even without Optional (the function takes it)
    assert props["implicit"] == {"type": ["integer", "null"], "default": None}
    assert props["points"]["type"] == ["array", "null"]
    assert schema["required"] == ["a"]
    _meta_valid(schema)


def test_nested_dataclass_typeddict_and_pydantic_are_inlined() -> None:
    def f(p: Point, opts: Options, m: Model) -> None: ...

    schema = schema_from_function(f).parameters
    assert "$defs" not in schema
    point = schema["properties"]["p"]
    assert point["type"] == "object"
    assert point["additionalProperties"] is False
    assert point["required"] == ["x"]
    assert point["description"] == "A point on the plane."
    assert point["properties"]["x"] == {"type": "integer", "description": "horizontal position"}
    assert point["properties"]["y"] == {
        "type": "integer", "default": 0, "description": "vertical position"
    }
    assert "default" not in point["properties"]["tags"]
    opts = schema["properties"]["opts"]
    assert opts["required"] == ["verbose"]
    assert opts["properties"]["color"]["enum"] == ["red", "blue"]
    model = schema["properties"]["m"]
    assert model["properties"]["a"]["type"] == "integer"
    assert model["required"] == ["a"]
    _meta_valid(schema)


def test_a_self_referencing_dataclass_goes_to_defs() -> None:
    def f(tree: Tree) -> None: ...

    schema = schema_from_function(f).parameters
    assert schema["properties"]["tree"] == {"$ref": "#/$defs/Tree"}
    tree = schema["$defs"]["Tree"]
    assert tree["properties"]["children"]["items"] == {"$ref": "#/$defs/Tree"}
    _meta_valid(schema)
    validator = compile_validator(schema)
    assert validator.errors({"tree": {"value": 1, "children": [{"value": 2}]}}) == []
    assert validator.errors({"tree": {"value": 1, "children": [{"value": "x"}]}}) == [
        ("$.tree.children[0].value", "'x' is not of type 'integer'")
    ]


def test_pydantic_field_metadata_and_annotated_constraints() -> None:
    def f(
        n: Annotated[int, pydantic.Field(ge=1, le=10, description="how many")],
        name: Annotated[str, MaxLen(5)],
        items: Annotated[list[int], pydantic.Field(min_length=1)],
        ratio: Annotated[float, Ge(0)] = 0.5,
        label: str = pydantic.Field("x", description="a label", pattern="^[a-z]+$"),
    ) -> None: ...

    fs = schema_from_function(f)
    props = fs.parameters["properties"]
    assert props["n"] == {"type": "integer", "minimum": 1, "maximum": 10, "description": "how many"}
    assert props["name"] == {"type": "string", "maxLength": 5}
    assert props["items"]["minItems"] == 1
    assert props["ratio"] == {"type": "number", "minimum": 0, "default": 0.5}
    assert props["label"] == {
        "type": "string", "description": "a label", "pattern": "^[a-z]+$", "default": "x"
    }
    assert fs.parameters["required"] == ["n", "name", "items"]
    # the FieldInfo default is what the function receives when the argument is absent
    _, kwargs = fs.bind({"n": 1, "name": "a", "items": [1]}, None)
    assert kwargs["label"] == "x"


def test_the_context_parameter_is_injected_not_described() -> None:
    def f(a: int, ctx: ToolContext) -> None: ...

    def g(a: int, context: ToolContext | None = None) -> None: ...

    for fn, name in ((f, "ctx"), (g, "context")):
        fs = schema_from_function(fn)
        assert fs.context_param == name
        assert list(fs.parameters["properties"]) == ["a"]
        assert fs.parameters["required"] == ["a"]


GOOGLE = '''Search the index.

    Looks words up.

    Args:
        query (str): What to look for,
            possibly several words.
        limit: How many hits.

    Returns:
        The hits.
    '''

NUMPY = """Search the index.

    Looks words up.

    Parameters
    ----------
    query : str
        What to look for,
        possibly several words.
    limit : int, optional
        How many hits.

    Returns
    -------
    list
        The hits.
    """

REST = """Search the index.

    Looks words up.

    :param str query: What to look for,
        possibly several words.
    :type query: str
    :param limit: How many hits.
    :returns: The hits.
    """


@pytest.mark.parametrize("doc", [GOOGLE, NUMPY, REST], ids=["google", "numpy", "rest"])
def test_docstring_styles_give_param_descriptions_and_a_clean_description(doc: str) -> None:
    def search(query: str, limit: int = 10) -> list[str]:
        return []

    search.__doc__ = doc
    fs = schema_from_function(search)
    props = fs.parameters["properties"]
    assert props["query"]["description"] == "What to look for, possibly several words."
    assert props["limit"]["description"] == "How many hits."
    assert fs.description is not None
    assert fs.description.startswith("Search the index.\n\nLooks words up.")
    assert "query" not in fs.description
    assert "The hits." in fs.description


def test_annotated_description_wins_over_the_docstring() -> None:
    def f(a: Annotated[int, "from the hint"]) -> None:
        """Do.

        Args:
            a: from the docstring
        """

    props = schema_from_function(f).parameters["properties"]
    assert props["a"]["description"] == "from the hint"


def test_star_args_and_kwargs_are_refused() -> None:
    def star(*items: int) -> None: ...

    def kw(**options: int) -> None: ...

    with pytest.raises(UsageError, match=r"\*items"):
        schema_from_function(star)
    with pytest.raises(UsageError, match=r"\*\*options.*explicit `parameters`"):
        schema_from_function(kw)


def test_kwargs_are_allowed_with_an_explicit_schema() -> None:
    def kw(a: int, **rest: Any) -> None: ...

    schema = {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {}}, "required": ["a"]
    }
    fs = schema_from_function(kw, parameters=schema)
    assert fs.parameters == schema
    assert fs.var_keyword


def test_an_explicit_schema_must_fit_the_signature() -> None:
    def f(a: int, b: int = 0) -> None: ...

    with pytest.raises(UsageError, match=r"declares 'zzz'.*no such parameter"):
        schema_from_function(f, parameters={"type": "object", "properties": {"zzz": {}}})
    with pytest.raises(UsageError, match=r"'a'.*does not require"):
        schema_from_function(f, parameters={"type": "object", "properties": {"a": {}}})


def test_unsupported_and_unresolvable_hints_are_usage_errors() -> None:
    def raw(data: bytes) -> None: ...

    def keys(d: dict[int, str]) -> None: ...

    with pytest.raises(UsageError, match=r"parameter 'data'.*bytes.*explicit `parameters`"):
        schema_from_function(raw)
    with pytest.raises(UsageError, match="object keys are strings"):
        schema_from_function(keys)

    def later(x: NotDefinedAnywhere) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(UsageError, match="cannot resolve the type hints"):
        schema_from_function(later)


def test_string_formats_and_paths() -> None:
    def f(when: datetime.datetime, day: datetime.date, path: Path, id: uuid.UUID) -> None: ...

    fs = schema_from_function(f)
    props = fs.parameters["properties"]
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["day"] == {"type": "string", "format": "date"}
    assert props["path"] == {"type": "string"}
    assert props["id"] == {"type": "string", "format": "uuid"}
    _, kwargs = fs.bind(
        {"when": "2024-05-01T10:00:00Z", "day": "2024-05-01", "path": "a/b",
         "id": "12345678-1234-5678-1234-567812345678"},
        None,
    )
    assert kwargs["when"].year == 2024 and kwargs["when"].tzinfo is not None
    assert kwargs["day"] == datetime.date(2024, 5, 1)
    assert kwargs["path"] == Path("a/b")
    assert isinstance(kwargs["id"], uuid.UUID)


# ------------------------------------------------------------------------------------------
# check_schema
# ------------------------------------------------------------------------------------------


def test_check_schema_accepts_valid_schemas() -> None:
    check_schema({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}})
    check_schema(True)
    check_schema({"$defs": {"x": {"type": "integer"}}, "$ref": "#/$defs/x"})


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"type": "object", "properties": {"a": {"type": "strin"}}},
         r"\$\.properties\.a\.type: unknown type 'strin'.*did you mean 'string'\?"),
        ({"type": "object", "required": "a"}, r"\$\.required: 'a' is not of type 'array'"),
        ({"properties": {"a": {"minLength": -1}}}, r"\$\.properties\.a\.minLength"),
        ({"pattern": "(unclosed"}, r"\$\.pattern: '\(unclosed' is not a 'regex'"),
        ({"anyOf": []}, r"\$\.anyOf"),
    ],
)
def test_check_schema_reports_the_json_path_of_the_bad_part(schema: Any, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment) as err:
        check_schema(schema)
    assert err.value.field == "parameters"


def test_check_schema_finds_dangling_local_refs() -> None:
    with pytest.raises(ConfigError, match=r"\$\.properties\.a\.\$ref: \$ref '#/\$defs/nope'"):
        check_schema({"properties": {"a": {"$ref": "#/$defs/nope"}}}, field="tools[0].parameters")


# ------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------

FIVE = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "count": {"type": "integer", "minimum": 0, "maximum": 100},
        "ratio": {"type": "number", "exclusiveMaximum": 1},
        "mode": {"enum": ["fast", "slow"]},
        "dry_run": {"type": "boolean"},
    },
    "required": ["name", "count"],
    "additionalProperties": False,
}


def test_errors_lists_every_problem_with_its_path() -> None:
    validator = compile_validator(FIVE)
    assert validator.fast
    assert validator.errors({"name": "a", "count": 3}) == []
    problems = validator.errors(
        {"name": "", "count": 1000, "ratio": 1, "mode": "medium", "extra": True}
    )
    assert problems == [
        ("$.name", "'' should be non-empty"),
        ("$.count", "1000 is greater than the maximum of 100"),
        ("$.ratio", "1 is greater than or equal to the maximum of 1"),
        ("$.mode", "'medium' is not one of ['fast', 'slow']"),
        ("$", "Additional properties are not allowed ('extra' was unexpected)"),
    ]
    assert validator.errors({}) == [
        ("$", "'name' is a required property"),
        ("$", "'count' is a required property"),
    ]


def test_paths_quote_keys_that_are_not_identifiers() -> None:
    validator = compile_validator(
        {"type": "object", "properties": {"a b": {"type": "array", "items": {"type": "integer"}}}}
    )
    assert validator.errors({"a b": [1, "x"]}) == [
        ('$["a b"][1]', "'x' is not of type 'integer'")
    ]


def test_any_of_errors_say_which_branch_came_closest() -> None:
    validator = compile_validator(
        {"anyOf": [{"type": "string"}, {"type": "object", "required": ["id"]}]}
    )
    [(path, message)] = validator.errors({"name": 1})
    assert path == "$"
    assert "is not valid under any of the given schemas" in message
    assert "'id' is a required property" in message


def test_huge_values_do_not_flood_the_message() -> None:
    validator = compile_validator({"type": "string", "maxLength": 3})
    [(_, message)] = validator.errors("x" * 10_000)
    assert len(message) < 700
    assert "characters cut" in message


def test_keywords_the_fast_checker_does_not_model_fall_back_to_jsonschema() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "unevaluatedProperties": False,
    }
    validator = compile_validator(schema)
    assert not validator.fast
    assert validator.errors({"a": 1}) == []
    assert validator.errors({"a": 1, "b": 2})[0][0] == "$"


def test_format_is_an_annotation_as_in_jsonschema() -> None:
    validator = compile_validator({"type": "string", "format": "email"})
    assert validator.fast
    assert validator.errors("not an email") == []


def test_exotic_python_values_get_jsonschema_verdicts() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}, "x": {"type": "number"}},
    }
    validator = compile_validator(schema)
    reference = Draft202012Validator(schema)
    for instance in (
        {"n": Level.HIGH},
        {"x": decimal.Decimal("1.5")},
        OrderedDict(n=3),
        {"n": 2.0},
        {"n": True},
        {"n": 0.5},
    ):
        assert validator.is_valid(instance) == reference.is_valid(instance), instance
        assert (validator.errors(instance) == []) == reference.is_valid(instance), instance


def test_validating_valid_arguments_never_imports_jsonschema() -> None:
    code = (
        "import sys\n"
        "from toolnexus.schema import check_schema, compile_validator, schema_from_function\n"
        "def f(a: int, b: str = 'x') -> None: ...\n"
        "schema = schema_from_function(f).parameters\n"
        "check_schema(schema)\n"
        f"schema2 = {FIVE!r}\n"
        "check_schema(schema2)\n"
        "assert compile_validator(schema).errors({'a': 1}) == []\n"
        "assert compile_validator(schema2).errors({'name': 'n', 'count': 1}) == []\n"
        "print('jsonschema' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, check=True,
    )
    assert done.stdout.strip() == "False"


def test_every_jsonschema_keyword_is_either_modelled_or_delegated() -> None:
    from toolnexus.schema import checker as module

    keywords = set(Draft202012Validator.VALIDATORS)
    modelled = module._FAST_KEYWORDS | module._FALLBACK_KEYWORDS
    assert keywords <= modelled, keywords - modelled


# --- differential: the fast checker never disagrees with jsonschema ---------------------------

EDGE_CASES: list[tuple[Any, list[Any]]] = [
    ({"type": "integer"}, [1, 1.0, 1.5, True, False, "1", None, 10**30, -0.0]),
    ({"type": "number"}, [1, 1.5, True, "1", float("inf")]),
    ({"type": ["integer", "null"]}, [None, 1, 2.0, 2.5, False]),
    ({"type": "boolean"}, [True, 0, 1]),
    ({"enum": [1, "a", None, [1, 2], {"k": True}]},
     [1, 1.0, True, "a", None, [1, 2], [1.0, 2.0], [True, 2], {"k": True}, {"k": 1}, (1, 2)]),
    ({"enum": [False, 0]}, [False, 0, 0.0, True]),
    ({"enum": ["a", "b"]}, ["a", "c", 1, None]),
    ({"const": 0}, [0, 0.0, False, -0.0, None]),
    ({"const": [True]}, [[True], [1], [1.0]]),
    ({"const": {"a": [1]}}, [{"a": [1]}, {"a": [True]}, {"a": [1], "b": 1}]),
    ({"uniqueItems": True},
     [[1, 2], [1, 1.0], [1, True], [0, False], [[1], [True]], [[1], [True], [1]],
      [{"a": 1}, {"a": 1}], [{"a": 1}, {"a": True}], ["a", "a"], [None, None], [], "x"]),
    ({"minLength": 2, "maxLength": 3}, ["a", "ab", "abcd", "é", "🙂🙂", 5, None]),
    ({"pattern": "^a"}, ["abc", "bac", 3]),
    ({"pattern": "b"}, ["abc", "ac"]),
    ({"multipleOf": 0.1}, [0.3, 0.2, 1, 0.35, 10**20, True]),
    ({"multipleOf": 3}, [9, 10, 9.0, 4.5, True]),
    ({"multipleOf": 0.0001}, [10**300]),
    ({"minimum": 2, "exclusiveMaximum": 5}, [2, 1.999, 5, 4.999, "3", True]),
    ({"exclusiveMinimum": 0, "maximum": 1.5}, [0, 0.0001, 1.5, 1.50001]),
    ({"properties": {"a": {"type": "integer"}}, "required": ["a"]},
     [{"a": 1}, {}, {"a": "x"}, {"b": 1}, [], "a"]),
    ({"additionalProperties": {"type": "string"}, "properties": {"n": {"type": "integer"}}},
     [{"n": 1, "x": "y"}, {"n": 1, "x": 2}, {"n": "1"}]),
    ({"patternProperties": {"^x_": {"type": "integer"}, "y$": {"type": "string"}},
      "additionalProperties": False},
     [{"x_1": 1}, {"x_1": "a"}, {"ay": "s"}, {"x_y": 1}, {"x_y": "s"}, {"z": 1}, {}]),
    ({"propertyNames": {"maxLength": 2}, "minProperties": 1, "maxProperties": 2},
     [{"ab": 1}, {"abc": 1}, {}, {"a": 1, "b": 2, "c": 3}]),
    ({"dependentRequired": {"a": ["b"]}}, [{"a": 1}, {"a": 1, "b": 2}, {"b": 1}]),
    ({"dependentSchemas": {"a": {"required": ["c"]}}}, [{"a": 1}, {"a": 1, "c": 1}, {}]),
    ({"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
     [[1, "a"], [1], [], [1, "a", 2], ["a", 1]]),
    ({"prefixItems": [{"type": "integer"}], "items": {"type": "string"}, "minItems": 1},
     [[1], [1, "a", "b"], [1, 2], []]),
    ({"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3},
     [[1, 2], [1], [1, 2, 3, 4], ["a", 1, 2], []]),
    ({"contains": {"type": "integer"}}, [[], ["a"], [1]]),
    ({"contains": {"type": "integer"}, "minContains": 0}, [[], ["a"]]),
    ({"maxContains": 1}, [[1, 2]]),
    ({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 3}]}, ["a", 1, 5, None]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, [1, 3, 2.5, "a"]),
    ({"not": {"type": "string"}}, ["a", 1]),
    ({"allOf": [{"minimum": 1}, {"maximum": 3}]}, [0, 2, 4]),
    ({"if": {"type": "integer"}, "then": {"minimum": 10}, "else": {"type": "string"}},
     [5, 15, "a", None]),
    ({"if": {"type": "integer"}, "then": {"minimum": 10}}, [5, "a"]),
    ({"then": {"minimum": 10}}, [5]),
    ({"$defs": {"pos": {"type": "integer", "minimum": 0}},
      "type": "array", "items": {"$ref": "#/$defs/pos"}}, [[1, 2], [1, -1], [1.5]]),
    ({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"},
                                                           "v": {"type": "integer"}}}},
      "$ref": "#/$defs/node"},
     [{"v": 1, "next": {"v": 2, "next": {"v": "x"}}}, {"v": 1, "next": {"v": 2}}]),
    ({"definitions": {"a b": {"type": "string"}}, "$ref": "#/definitions/a%20b"}, ["x", 1]),
    ({"$defs": {"a/b": {"type": "string"}}, "$ref": "#/$defs/a~1b"}, ["x", 1]),
    ({"$ref": "#/$defs/s", "minLength": 2, "$defs": {"s": {"type": "string"}}}, ["a", "ab", 1]),
    (True, [1, None]),
    (False, [1, None]),
    ({"properties": {"a": False}}, [{"a": 1}, {}]),
    ({"items": True, "additionalProperties": True}, [[1], {"a": 1}]),
    ({"type": "object", "unknownKeyword": 5, "nullable": True}, [{}, None]),
    ({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "string"}, ["a", 1]),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"}, ["a", 1]),
    ({"format": "date", "type": "string"}, ["nope"]),
    (FIVE, [{"name": "a", "count": 0}, {"name": "a", "count": 0.0}, {"name": "a", "count": -1},
            {"name": "a", "count": 1, "mode": "fast", "dry_run": False, "ratio": 0.99}]),
]


def _check_agreement(schema: Any, instances: list[Any]) -> None:
    validator = compile_validator(schema)
    reference = Draft202012Validator(schema)
    for instance in instances:
        expected = reference.is_valid(instance)
        assert validator.is_valid(instance) == expected, (schema, instance)
        problems = validator.errors(instance)
        assert (problems == []) == expected, (schema, instance, problems)
        if not expected:
            assert len(problems) == len(list(reference.iter_errors(instance)))


@pytest.mark.parametrize(("schema", "instances"), EDGE_CASES)
def test_fast_checker_agrees_with_jsonschema_on_edge_cases(
    schema: Any, instances: list[Any]
) -> None:
    _check_agreement(schema, instances)


_TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]


def _random_schema(rng: random.Random, depth: int = 0) -> Any:
    if depth > 3 or rng.random() < 0.15:
        return rng.choice([True, False, {}, {"type": rng.choice(_TYPES)}])
    schema: dict[str, Any] = {}
    kind = rng.choice([*_TYPES, None, None])
    if kind is not None:
        schema["type"] = kind if rng.random() < 0.8 else [kind, rng.choice(_TYPES)]
        if isinstance(schema["type"], list) and len(set(schema["type"])) < 2:
            schema["type"] = kind
    for _ in range(rng.randint(0, 4)):
        keyword = rng.choice(_KEYWORDS)
        schema.update(keyword(rng, depth))
    return schema


def _subschema(rng: random.Random, depth: int) -> Any:
    return _random_schema(rng, depth + 1)


_KEYWORDS = [
    lambda r, d: {"minimum": r.choice([0, 1, 2.5, -1])},
    lambda r, d: {"maximum": r.choice([0, 3, 10.5])},
    lambda r, d: {"exclusiveMinimum": r.choice([0, 1.5])},
    lambda r, d: {"exclusiveMaximum": r.choice([2, 7.5])},
    lambda r, d: {"multipleOf": r.choice([2, 0.5, 3, 0.1])},
    lambda r, d: {"minLength": r.choice([0, 1, 3])},
    lambda r, d: {"maxLength": r.choice([0, 2, 5])},
    lambda r, d: {"pattern": r.choice(["^a", "b", "^[0-9]+$", "x|y"])},
    lambda r, d: {"enum": r.sample([1, "a", None, True, 0, 2.0, [1], {"a": 1}, "b"], 3)},
    lambda r, d: {"const": r.choice([1, "a", None, False, [1, "a"], {"a": 1}])},
    lambda r, d: {
        "properties": {k: _subschema(r, d) for k in r.sample(["a", "b", "c"], r.randint(1, 3))}
    },
    lambda r, d: {"required": r.sample(["a", "b", "c"], r.randint(0, 2))},
    lambda r, d: {"additionalProperties": r.choice([False, True, _subschema(r, d)])},
    lambda r, d: {"patternProperties": {"^a": _subschema(r, d)}},
    lambda r, d: {"propertyNames": {"maxLength": 1}},
    lambda r, d: {"minProperties": r.randint(0, 2), "maxProperties": r.randint(1, 3)},
    lambda r, d: {"dependentRequired": {"a": ["b"]}},
    lambda r, d: {"items": _subschema(r, d)},
    lambda r, d: {"prefixItems": [_subschema(r, d), _subschema(r, d)]},
    lambda r, d: {"minItems": r.randint(0, 2), "maxItems": r.randint(1, 4)},
    lambda r, d: {"uniqueItems": r.choice([True, False])},
    lambda r, d: {"contains": _subschema(r, d), "minContains": r.randint(0, 2)},
    lambda r, d: {"anyOf": [_subschema(r, d), _subschema(r, d)]},
    lambda r, d: {"oneOf": [_subschema(r, d), _subschema(r, d)]},
    lambda r, d: {"allOf": [_subschema(r, d)]},
    lambda r, d: {"not": _subschema(r, d)},
    lambda r, d: {"if": _subschema(r, d), "then": _subschema(r, d), "else": _subschema(r, d)},
]


def _random_instance(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 2 or roll < 0.5:
        return rng.choice(
            [0, 1, 2, 3, -1, 2.0, 2.5, 0.1, 7.5, True, False, None, "", "a", "ab", "b", "abc",
             "123", "x", "é", 10**20]
        )
    if roll < 0.75:
        return [_random_instance(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = rng.sample(["a", "b", "c", "ab", "z"], rng.randint(0, 4))
    return {k: _random_instance(rng, depth + 1) for k in keys}


def test_fast_checker_agrees_with_jsonschema_on_generated_schemas() -> None:
    rng = random.Random(20240501)
    checked = 0
    for _ in range(400):
        schema = _random_schema(rng)
        instances = [_random_instance(rng) for _ in range(12)]
        _check_agreement(schema, instances)
        checked += len(instances)
    assert checked == 4800


def test_check_schema_agrees_with_the_meta_schema_on_generated_schemas() -> None:
    rng = random.Random(7)
    meta = Draft202012Validator(
        Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    mutations = [
        lambda s: {**s, "type": "strin"},
        lambda s: {**s, "minLength": -1},
        lambda s: {**s, "required": ["a", "a"]},
        lambda s: {**s, "properties": []},
        lambda s: {**s, "pattern": "("},
        lambda s: {**s, "anyOf": []},
        lambda s: {**s, "multipleOf": 0},
        lambda s: {**s, "minItems": 1.5},
        lambda s: {**s, "minItems": 2.0},
        lambda s: {**s, "uniqueItems": 1},
        lambda s: {**s, "items": 3},
        lambda s: {**s, "$ref": 5},
        lambda s: s,
    ]
    for _ in range(300):
        base = _random_schema(rng)
        schema = rng.choice(mutations)(base) if isinstance(base, dict) else base
        expected = meta.is_valid(schema)
        try:
            check_schema(schema)
            accepted = True
        except ConfigError:
            accepted = False
        assert accepted == expected, schema


# ------------------------------------------------------------------------------------------
# strict-mode nulls
# ------------------------------------------------------------------------------------------

STRICT = {
    "type": "object",
    "properties": {
        "q": {"type": "string"},
        "limit": {"type": "integer", "default": 10},
        "note": {"type": ["string", "null"]},
        "opts": {
            "type": "object",
            "properties": {"deep": {"type": "boolean"}, "keep": {"type": "integer"}},
            "required": ["keep"],
        },
        "rows": {
            "type": "array",
            "items": {"type": "object", "properties": {"x": {"type": "integer"}}},
        },
        "ref": {"$ref": "#/$defs/r"},
    },
    "required": ["q"],
    "$defs": {"r": {"type": "object", "properties": {"y": {"type": "string"}}}},
}


def test_drop_null_optionals_removes_nulls_only_where_null_means_absent() -> None:
    args = {
        "q": None,
        "limit": None,
        "note": None,
        "opts": {"deep": None, "keep": None},
        "rows": [{"x": None}, {"x": 1}],
        "ref": {"y": None},
    }
    out = drop_null_optionals(STRICT, args)
    assert out == {
        "q": None,  # required: stays, and validation reports it
        "note": None,  # its schema accepts null: a real value
        "opts": {"keep": None},
        "rows": [{}, {"x": 1}],
        "ref": {},
    }
    assert args["limit"] is None  # the input is not modified
    validator = compile_validator(STRICT)
    assert validator.drop_null_optionals(args) == out


def test_drop_null_optionals_returns_the_same_object_when_nothing_changes() -> None:
    args = {"q": "x", "limit": 3}
    assert drop_null_optionals(STRICT, args) is args
    assert compile_validator(STRICT).drop_null_optionals(args) is args
    with_null = {"q": "x", "note": None}
    assert drop_null_optionals(STRICT, with_null) is with_null


def test_strict_mode_round_trip_with_a_derived_schema() -> None:
    def f(q: str, limit: int = 10, tag: str | None = None) -> None: ...

    schema = schema_from_function(f).parameters
    validator = compile_validator(schema)
    args = validator.drop_null_optionals({"q": "x", "limit": None, "tag": None})
    assert args == {"q": "x", "tag": None}
    assert validator.errors(args) == []
    assert json.dumps(schema)  # derived schemas are plain JSON
