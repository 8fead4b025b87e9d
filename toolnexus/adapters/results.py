"""Formatting results (`openai_chat_result(s)`, `openai_responses_result(s)`,
`anthropic_result(s)`, `gemini_result(s)`, `mcp_result`): results go back in each provider's shape.

What each provider can carry back from a tool:

| provider          | error flag            | images                                         |
|-------------------|-----------------------|------------------------------------------------|
| OpenAI Chat       | none: "Error: " text  | not in tool messages; `openai_chat_results`    |
|                   |                       | adds one user message with them after the      |
|                   |                       | tool messages                                  |
| OpenAI Responses  | none: "Error: " text  | `input_image` items in the output; PDFs as     |
|                   |                       | `input_file`                                   |
| Anthropic         | `is_error`            | `image` blocks; PDFs as `document` blocks      |
| Gemini            | `response.error`      | `function_response.parts` (`inline_data`;      |
|                   |                       | multimodal function responses, Gemini 3+)      |
| MCP               | `is_error`            | image, audio, embedded and linked resources    |

A part a provider cannot carry becomes a short bracketed note in the text (its kind, type and
size), so the model knows something was returned. Results always send `Result.text`, never
`Result.structured` on its own: the text is what middleware such as `truncate` has bounded.
Separate because it is the step with the most provider differences (error flags, images,
documents, notes). `mcp` is imported only inside `mcp_result`.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..base import AudioPart, ImagePart, Part, ResourcePart, Result, TextPart, ToolCall
from ..errors import UsageError
from ._message import Message
from .calls import _GEMINI_ID_PREFIX

if TYPE_CHECKING:
    import mcp.types

    from ..search.state import SearchState

__all__ = [
    "anthropic_result",
    "anthropic_results",
    "gemini_result",
    "gemini_results",
    "mcp_result",
    "openai_chat_result",
    "openai_chat_results",
    "openai_responses_result",
    "openai_responses_results",
]


_OPENAI_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_ANTHROPIC_IMAGES = _OPENAI_IMAGES
_GEMINI_IMAGES = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"})
_PDF = "application/pdf"


def openai_chat_result(call: ToolCall, result: Result) -> Message:
    """The `role: "tool"` message answering `call`.

    Chat tool messages carry text only: an image is replaced by a note saying it could not be
    shown. Use `openai_chat_results` to deliver images (in a user message after the tool
    messages). An error is sent as its text, prefixed with "Error: " when it does not already
    say so, since the message has no error flag.
    """
    return _chat_tool_message(call, result, images_follow=False)


def openai_chat_results(
    calls: Sequence[ToolCall], results: Sequence[Result], *, state: SearchState | None = None
) -> list[Message]:
    """The messages answering a batch of calls: one tool message per call, in order, then, if
    any result holds images, one user message with them.

    The tool messages must all follow the assistant message directly, so the images (which
    tool messages cannot hold) come after them, each group introduced by the call it belongs
    to; each tool message says how many of its images follow. With `state`, what
    `tool_search` calls found is loaded into it.
    """
    pairs = _pairs(calls, results)
    if state is not None:
        state.observe(results)
    messages = [_chat_tool_message(c, r, images_follow=True) for c, r in pairs]
    content: list[Message] = []
    for call, result in pairs:
        images = _images(result, _OPENAI_IMAGES)
        if images:
            content.append(
                {"type": "text", "text": f"Images from tool call {call.id} ({call.name}):"}
            )
            content += [
                {"type": "image_url", "image_url": {"url": _data_url(p.mime_type, p.data)}}
                for p in images
            ]
    if content:
        messages.append({"role": "user", "content": content})
    return messages


def _chat_tool_message(call: ToolCall, result: Result, *, images_follow: bool) -> Message:
    images = _images(result, _OPENAI_IMAGES)
    notes = [
        _part_text(p, "OpenAI chat tool messages carry text only")
        for p in result.parts
        if not (images_follow and _as_image(p, _OPENAI_IMAGES))
    ]
    if images_follow and images:
        plural = "s follow" if len(images) > 1 else " follows"
        notes.append(f"[{len(images)} image{plural} in the next user message]")
    return {
        "role": "tool",
        "tool_call_id": _call_id(call, "OpenAI chat"),
        "content": _join(_flagged_text(result), *notes),
    }


_OPENAI_ONLY = "OpenAI tool outputs carry only text, images and PDFs"
_ANTHROPIC_ONLY = "Anthropic tool results carry text, images and PDFs"


def openai_responses_result(call: ToolCall, result: Result) -> Message:
    """The `function_call_output` item answering `call`.

    Text only gives a string output; with images (`input_image`) or PDFs (`input_file`) the
    output is a list of content items in the tool's order (notes on what cannot be sent
    stand where the part was). Errors are flagged in the text as for chat.
    """
    items: list[Message] = []
    notes: list[str] = []
    for part in result.parts:
        image = _as_image(part, _OPENAI_IMAGES)
        if image is not None:
            items.append(
                {"type": "input_image", "image_url": _data_url(image.mime_type, image.data)}
            )
        elif isinstance(part, ResourcePart) and part.data is not None and part.mime_type == _PDF:
            items.append(
                {
                    "type": "input_file",
                    "filename": _file_name(part.uri),
                    "file_data": _data_url(_PDF, part.data),
                }
            )
        elif items:  # text (or a note) after a media item stays where it was
            _add_text(items, "input_text", _part_text(part, _OPENAI_ONLY))
        else:
            notes.append(_part_text(part, _OPENAI_ONLY))
    text = _join(_flagged_text(result), *notes)
    output: str | list[Message] = text
    if items:
        output = [{"type": "input_text", "text": text}, *items] if text else items
    return {
        "type": "function_call_output",
        "call_id": _call_id(call, "OpenAI Responses"),
        "output": output,
    }


def openai_responses_results(
    calls: Sequence[ToolCall], results: Sequence[Result], *, state: SearchState | None = None
) -> list[Message]:
    """One `function_call_output` item per call, in order, for the next request's `input`.

    With `state`, what `tool_search` calls found is loaded into it (as for every `*_results`).
    """
    if state is not None:
        state.observe(results)
    return [openai_responses_result(c, r) for c, r in _pairs(calls, results)]


def anthropic_result(call: ToolCall, result: Result) -> Message:
    """The `tool_result` content block answering `call`.

    Text goes in a text block (none when there is no text: Anthropic refuses empty ones),
    images in base64 `image` blocks, PDFs in `document` blocks; `is_error` carries the flag.
    """
    blocks: list[Message] = []
    notes: list[str] = []
    for part in result.parts:
        image = _as_image(part, _ANTHROPIC_IMAGES)
        if image is not None:
            source = {"type": "base64", "media_type": image.mime_type, "data": image.base64}
            blocks.append({"type": "image", "source": source})
        elif isinstance(part, ResourcePart) and part.data is not None and part.mime_type == _PDF:
            source = {"type": "base64", "media_type": _PDF, "data": _b64(part.data)}
            blocks.append({"type": "document", "source": source})
        elif blocks:  # text (or a note) after a media block stays where it was
            _add_text(blocks, "text", _part_text(part, _ANTHROPIC_ONLY))
        else:
            notes.append(_part_text(part, _ANTHROPIC_ONLY))
    text = _join(result.text, *notes)
    if text:
        blocks.insert(0, {"type": "text", "text": text})
    block: Message = {
        "type": "tool_result",
        "tool_use_id": _call_id(call, "Anthropic"),
        "is_error": result.is_error,
    }
    if blocks:
        block["content"] = blocks
    return block


def anthropic_results(
    calls: Sequence[ToolCall], results: Sequence[Result], *, state: SearchState | None = None
) -> list[Message]:
    """The one user message answering a batch of calls: all `tool_result` blocks, in order
    (Anthropic wants every result of a turn in the message right after it)."""
    if state is not None:
        state.observe(results)
    blocks = [anthropic_result(c, r) for c, r in _pairs(calls, results)]
    return [{"role": "user", "content": blocks}] if blocks else []


def gemini_result(call: ToolCall, result: Result) -> Message:
    """The `function_response` part answering `call`.

    `response` is `{"output": text}`, or `{"error": text}` for an error. Images go in
    `function_response.parts` as `inline_data` (multimodal function responses, Gemini 3 and
    later). The call's id is echoed when Gemini gave one.
    """
    key = "error" if result.is_error else "output"
    notes: list[str] = []
    media: list[Message] = []
    for part in result.parts:
        image = _as_image(part, _GEMINI_IMAGES)
        if image is None:
            notes.append(_part_text(part, "Gemini function responses carry text and images"))
            continue
        blob = {
            "mime_type": image.mime_type,
            "data": image.base64,
            "display_name": f"{call.name}-{len(media) + 1}",
        }
        media.append({"inline_data": blob})
    response: Message = {"name": call.name, "response": {key: _join(result.text, *notes)}}
    if call.id and not call.id.startswith(_GEMINI_ID_PREFIX):
        response["id"] = call.id
    if media:
        response["parts"] = media
    return {"function_response": response}


def gemini_results(
    calls: Sequence[ToolCall], results: Sequence[Result], *, state: SearchState | None = None
) -> list[Message]:
    """The one `user` content answering a batch of calls: all function responses, in order."""
    if state is not None:
        state.observe(results)
    parts = [gemini_result(c, r) for c, r in _pairs(calls, results)]
    return [{"role": "user", "parts": parts}] if parts else []


def mcp_result(result: Result) -> mcp.types.CallToolResult:
    """The `mcp.types.CallToolResult` for `result`, for serving tools over MCP.

    Text (`Result.text`), images, audio and resources (embedded text or blob, or a link when
    the resource carries neither) become content blocks, in that order. `structured` becomes
    `structured_content` when it is a JSON object, which every protocol version accepts;
    other JSON values stay in the text only. `metadata` is never sent.
    """
    from mcp import types  # lazy: `import mcp` takes about a second

    content: list[
        types.TextContent
        | types.ImageContent
        | types.AudioContent
        | types.ResourceLink
        | types.EmbeddedResource
    ] = []
    if result.text or not result.parts:
        content.append(types.TextContent(text=result.text))
    for part in result.parts:
        notes = _mcp_annotations(part.annotations)
        if isinstance(part, TextPart):
            content.append(types.TextContent(text=part.text, annotations=notes))
        elif isinstance(part, ImagePart):
            content.append(
                types.ImageContent(data=part.base64, mime_type=part.mime_type, annotations=notes)
            )
        elif isinstance(part, AudioPart):
            content.append(
                types.AudioContent(data=part.base64, mime_type=part.mime_type, annotations=notes)
            )
        elif part.text is not None:
            resource = types.TextResourceContents(
                uri=part.uri, mime_type=part.mime_type, text=part.text
            )
            content.append(types.EmbeddedResource(resource=resource, annotations=notes))
        elif part.data is not None:
            blob = types.BlobResourceContents(
                uri=part.uri, mime_type=part.mime_type, blob=_b64(part.data)
            )
            content.append(types.EmbeddedResource(resource=blob, annotations=notes))
        else:
            link = types.ResourceLink(
                name=_file_name(part.uri),
                uri=part.uri,
                mime_type=part.mime_type,
                annotations=notes,
            )
            content.append(link)
    structured = result.structured if isinstance(result.structured, dict) else None
    return types.CallToolResult(
        content=content, structured_content=structured, is_error=result.is_error
    )


def _mcp_annotations(notes: Mapping[str, Any] | None) -> mcp.types.Annotations | None:
    """A part's annotations back into the SDK's model (served results keep them)."""
    if not notes:
        return None
    from mcp import types

    return types.Annotations.model_validate(dict(notes))


def _pairs(calls: Sequence[ToolCall], results: Sequence[Result]) -> list[tuple[ToolCall, Result]]:
    if len(calls) != len(results):
        raise UsageError(
            f"got {len(calls)} calls and {len(results)} results; pass the results of exactly "
            "these calls, in call order (execute_many returns them so)"
        )
    return list(zip(calls, results, strict=True))


def _call_id(call: ToolCall, provider: str) -> str:
    if not call.id:
        raise UsageError(
            f"tool call {call.name!r} has no id, which {provider} needs to match the result to "
            "it; use the ToolCall parsed from the response (parse_* functions keep the id)"
        )
    return call.id


def _flagged_text(result: Result) -> str:
    """The text, marked as an error for providers whose tool messages have no error flag."""
    text = result.text
    if not result.is_error or text.lower().startswith("error"):
        return text
    return f"Error: {text}" if text else "Error: the tool failed without a message"


def _images(result: Result, supported: frozenset[str]) -> list[ImagePart]:
    return [image for p in result.parts if (image := _as_image(p, supported)) is not None]


def _as_image(part: Part, supported: frozenset[str]) -> ImagePart | None:
    """The part as an image the provider accepts (image parts and image blobs), else None."""
    if isinstance(part, ImagePart) and part.mime_type in supported:
        return part
    if isinstance(part, ResourcePart) and part.data is not None and part.mime_type in supported:
        return ImagePart(data=part.data, mime_type=part.mime_type)
    return None


def _part_text(part: Part, reason: str) -> str:
    """What the model reads instead of a part its provider cannot carry: a resource's text, a
    resource link's address, or a note naming what was left out and why (a `TextPart` is its
    text, in its place)."""
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ResourcePart):
        if part.text is not None:
            return f"[resource {part.uri}]\n{part.text}"
        if part.data is None:
            kind = f" ({part.mime_type})" if part.mime_type else ""
            return f"[resource {part.uri}{kind}]"
        label = f"resource {part.uri} ({part.mime_type or 'binary'}, {len(part.data)} bytes)"
    else:
        kind = "image" if isinstance(part, ImagePart) else "audio"
        label = f"{kind} ({part.mime_type}, {len(part.data)} bytes)"
    return f"[{label} not shown: {reason}]"


def _join(*texts: str) -> str:
    return "\n".join(text for text in texts if text)


def _add_text(items: list[Message], kind: str, text: str) -> None:
    """Append `text` in place, joined to a text item just before it (one block, not many)."""
    if not text:
        return
    last = items[-1] if items else None
    if last is not None and last["type"] == kind:
        last["text"] = _join(last["text"], text)
    else:
        items.append({"type": kind, "text": text})


def _data_url(mime_type: str, data: bytes) -> str:
    return f"data:{mime_type};base64,{_b64(data)}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _file_name(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1] or uri
