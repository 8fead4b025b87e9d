"""A server's structured content is left out exactly when its JSON is longer than `max_output`:
the cheap bound that spares encoding small results never keeps one that is too long, nor drops
one that fits."""

from __future__ import annotations

import json
from typing import Any

import mcp_types
from hypothesis import given, settings
from hypothesis import strategies as st

from toolnexus.mcp.convert import to_result

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and infinities too: json.dumps writes them `NaN`, `Infinity`
    | st.text(alphabet=st.characters(codec="utf-8"))
    | st.text(alphabet='a"\\\x01\n\u00e9\u2028'),  # escaped in JSON (`\u0001`), or not
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(), inner, max_size=6),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None)
@given(value=st.dictionaries(st.text(), JSON_VALUES, max_size=6), off=st.integers(-3, 3))
def test_structured_content_is_dropped_exactly_when_its_json_is_too_long(
    value: dict[str, Any], off: int
) -> None:
    length = len(json.dumps(value, ensure_ascii=False, default=str))
    max_output = max(1, length + off)  # around the limit, where a wrong bound would show
    raw = mcp_types.CallToolResult(content=[], structured_content=value)
    result = to_result(raw, server="s", tool="t", max_output=max_output)
    too_long = length > max_output
    assert result.metadata.get("structured_dropped", False) is too_long
    assert (result.structured is None) is too_long
