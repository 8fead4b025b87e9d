"""The sync API inside a running event loop, as docs/getting-started.md says it behaves: it
works for a `create_toolkit` toolkit anywhere; an `acreate_toolkit` toolkit's sync API refuses
its own loop (it would block the loop that must run the call) and works from another thread."""

from __future__ import annotations

import asyncio

import pytest

from toolnexus import UsageError, acreate_toolkit, create_toolkit, tool


@tool
def double(x: int) -> int:
    """Twice x."""
    return 2 * x


def test_create_toolkit_sync_api_works_inside_a_running_loop() -> None:
    async def main() -> str:
        with create_toolkit(extra_tools=[double]) as toolkit:
            return toolkit.execute("double", {"x": 21}).content

    assert asyncio.run(main()) == "42"


def test_acreate_toolkit_sync_api_refuses_its_own_loop_and_works_from_a_thread() -> None:
    async def main() -> str:
        async with await acreate_toolkit(extra_tools=[double]) as toolkit:
            with pytest.raises(UsageError, match=r"await toolkit\.aexecute"):
                toolkit.execute("double", {"x": 1})
            result = await asyncio.to_thread(toolkit.execute, "double", {"x": 21})
            return result.content

    assert asyncio.run(main()) == "42"
