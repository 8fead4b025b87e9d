"""Run one agent turn against configs/example.yaml, with a scripted model.

    python configs/example/demo.py

It starts the local weather API, loads the manifest with `create_toolkit`, shows the tool
definitions an OpenAI model would receive, then plays a model response that calls tools of
every kind (python, shell, HTTP, OpenAPI, MCP, builtin), including one a rule denies and one
with bad arguments, and prints the tool-result messages that would go back to the model.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import weather_api  # noqa: E402  (a sibling script, not a package)

from toolnexus import create_toolkit  # noqa: E402
from toolnexus.adapters import get_adapter  # noqa: E402

SCRIPTED_MODEL_MESSAGE = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}},
        {"id": "call_2", "type": "function",
         "function": {"name": "api_getForecast", "arguments": '{"city": "Oslo"}'}},
        {"id": "call_3", "type": "function",
         "function": {"name": "convert_temperature", "arguments": '{"celsius": 21.5}'}},
        {"id": "call_4", "type": "function",
         "function": {"name": "word_count", "arguments": '{"text": "one two three"}'}},
        {"id": "call_5", "type": "function",
         "function": {"name": "list_dir", "arguments": '{"path": "example"}'}},
        {"id": "call_6", "type": "function",
         "function": {"name": "list_dir", "arguments": '{"path": "/etc/ssh"}'}},
        {"id": "call_7", "type": "function",
         "function": {"name": "notes_get_note", "arguments": '{"title": "welcome"}'}},
        {"id": "call_8", "type": "function",
         "function": {"name": "grep", "arguments": '{"pattern": "def word_count"}'}},
        {"id": "call_9", "type": "function",
         "function": {"name": "word_count", "arguments": '{"txt": 3}'}},
    ],
}


def main() -> None:
    server, url = weather_api.start()
    os.environ["WEATHER_API"] = url
    os.environ.setdefault("PYTHON", sys.executable)
    openai = get_adapter("openai-chat")
    with create_toolkit(HERE.parent / "example.yaml") as toolkit:
        print(f"{len(toolkit.tools())} tools: {', '.join(toolkit.names())}\n")
        print("First tool as OpenAI sees it:")
        print(json.dumps(openai.tools(toolkit.tools())[0], indent=2), "\n")
        calls = openai.parse_calls(SCRIPTED_MODEL_MESSAGE)
        results = toolkit.execute_many(calls)
        for call, result in zip(calls, results, strict=True):
            mark = "ERROR" if result.is_error else "ok"
            print(f"[{mark:>5}] {call.name}({call.arguments}) ->")
            print("        " + result.content.strip().replace("\n", "\n        ")[:400])
        messages = openai.format_results(calls, results)
        print(f"\n{len(messages)} tool-result messages ready for the next model request.")
        print("Status:", json.dumps(toolkit.status()))
    server.shutdown()


if __name__ == "__main__":
    main()
