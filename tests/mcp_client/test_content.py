"""Content kept as sent, through the adapters: later text stays after the media it follows,
and annotations survive a round trip through `serve`'s `mcp_result`."""

from __future__ import annotations

from toolnexus import ImagePart, Result, TextPart, ToolCall
from toolnexus.adapters import anthropic_result, gemini_result, mcp_result, openai_responses_result

PNG = b"\x89PNG\r\n\x1a\nfake"
MIXED = Result(
    content="before",
    parts=(
        ImagePart(data=PNG, annotations={"audience": ["user"], "priority": 0.5}),
        TextPart(text="the image above", annotations={"audience": ["assistant"]}),
    ),
)
CALL = ToolCall(name="mixed", id="call_1")


def test_anthropic_keeps_text_after_the_image() -> None:
    blocks = anthropic_result(CALL, MIXED)["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "text"]
    assert [b.get("text") for b in blocks] == ["before", None, "the image above"]


def test_openai_responses_keeps_text_after_the_image() -> None:
    items = openai_responses_result(CALL, MIXED)["output"]
    assert [i["type"] for i in items] == ["input_text", "input_image", "input_text"]
    assert items[2]["text"] == "the image above"


def test_text_only_providers_read_the_later_text_in_order() -> None:
    response = gemini_result(CALL, MIXED)["function_response"]
    assert response["response"]["output"] == "before\nthe image above"


def test_served_results_keep_order_and_annotations() -> None:
    served = mcp_result(MIXED)
    assert [c.type for c in served.content] == ["text", "image", "text"]
    image, later = served.content[1], served.content[2]
    assert image.annotations is not None and image.annotations.priority == 0.5
    assert later.annotations is not None and later.annotations.audience == ["assistant"]
