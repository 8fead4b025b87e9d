"""LangChain integration: what a toolkit tool costs per call inside LangChain, against the
toolkit's own API and LangChain's `StructuredTool` (the peer), measured in the same run.

Run with `python benchmarks/run.py langchain` (needs the `langchain` extra). Not named
`langchain.py`: this folder is first on `sys.path` when run.py runs, and would shadow the package.
"""

from __future__ import annotations

import asyncio
from typing import Any

from run import Row, amedian_us, median_us, table


def bench() -> None:
    try:
        from langchain_core.messages import AIMessage
        from langchain_core.tools import StructuredTool
        from langgraph.graph import END, START, MessagesState, StateGraph
        from langgraph.prebuilt import ToolNode

        from toolnexus.integrations.langchain import langchain_tools, toolnexus_tool_node
    except ImportError:
        print("\n(langchain section skipped: pip install -e '.[langchain]')")
        return
    from toolnexus import create_toolkit, tool

    def plain_add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    args = {"a": 2, "b": 3}
    tool_call: dict[str, Any] = {"type": "tool_call", "id": "c1", "name": "add", "args": args}
    step = {
        "messages": [AIMessage(content="", tool_calls=[{"id": "c1", "name": "add", "args": args}])]
    }
    peer = StructuredTool.from_function(plain_add, name="add")

    with create_toolkit(extra_tools=[add]) as toolkit:
        (ours,) = langchain_tools(toolkit)
        execute = median_us(lambda: toolkit.execute("add", args), number=3_000)
        invoke = median_us(lambda: ours.invoke(tool_call), number=2_000)
        peer_invoke = median_us(lambda: peer.invoke(tool_call), number=2_000)

        async def async_rows() -> tuple[float, float, float]:
            return (
                await amedian_us(lambda: toolkit.aexecute("add", args), number=3_000),
                await amedian_us(lambda: ours.ainvoke(tool_call), number=2_000),
                await amedian_us(lambda: peer.ainvoke(tool_call), number=2_000),
            )

        aexecute, ainvoke, peer_ainvoke = asyncio.run(async_rows())

        def graph_of(node: Any) -> Any:  # a ToolNode runs only inside a graph
            graph = StateGraph(MessagesState)
            graph.add_node("tools", node)
            graph.add_edge(START, "tools")
            graph.add_edge("tools", END)
            return graph.compile()

        node, peer_node = graph_of(toolnexus_tool_node(toolkit)), graph_of(ToolNode([peer]))
        node_us = median_us(lambda: node.invoke(step), number=300)
        peer_node_us = median_us(lambda: peer_node.invoke(step), number=300)
        listing = median_us(lambda: langchain_tools(toolkit), number=2_000)

    rows: list[Row] = [
        ("`toolkit.execute` (the toolkit alone, sync)", execute, "µs", "baseline"),
        (
            "`ToolnexusTool.invoke(tool_call)` -> ToolMessage",
            invoke,
            "µs",
            f"+{invoke - execute:.0f} µs over execute; peer StructuredTool {peer_invoke:.0f} µs "
            f"({invoke / peer_invoke:.2f}x)",
        ),
        ("`toolkit.aexecute` (async, other loop)", aexecute, "µs", "baseline"),
        (
            "`await ToolnexusTool.ainvoke(tool_call)`",
            ainvoke,
            "µs",
            f"+{ainvoke - aexecute:.0f} µs over aexecute; peer StructuredTool.ainvoke "
            f"{peer_ainvoke:.0f} µs ({ainvoke / peer_ainvoke:.2f}x)",
        ),
        (
            "graph step through `toolnexus_tool_node`, one call (sync)",
            node_us,
            "µs",
            f"peer ToolNode([StructuredTool]) {peer_node_us:.0f} µs "
            f"({node_us / peer_node_us:.2f}x)",
        ),
        ("`langchain_tools(toolkit)`, 1 tool", listing, "µs", "informational: per reload"),
    ]
    table("LangChain: per-call cost (trivial 2-argument tool)", rows)
