"""The `trace` middleware's per-call cost: with no tracer provider, and with the SDK's in-memory
exporter, against the same toolkit without it, in the same run.

    python benchmarks/run.py tracing     # as a section of the benchmarks
    python benchmarks/tracing.py         # alone

The measuring runs in a child process: OpenTelemetry's global provider can be set only once,
and a configured SDK would make the mcp SDK's own spans record in every later section.
Toolkits are measured in alternating batches so that the machine's drift hits them alike, by
the measuring thread's CPU time (see `_interleaved`).
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import Row, table

CHILD = "--child"


def bench() -> None:
    """Print the section's table (measured in a fresh process)."""
    done = subprocess.run(
        [sys.executable, __file__, CHILD], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"tracing benchmark failed:\n{done.stderr}")
    rows: list[Row] = [(str(a), float(b), str(c), str(d)) for a, b, c, d in json.loads(done.stdout)]
    title = "Tracing: the `trace` middleware per call (trivial async tool, `aexecute`, CPU time)"
    table(title, rows)


async def _interleaved(
    calls: dict[str, Callable[[], Awaitable[Any]]], *, number: int, rounds: int
) -> dict[str, float]:
    """Median per-call µs of each entry, measured in alternating batches.

    The clock is the measuring thread's CPU time: everything measured runs on this one thread
    (async tools on this loop), and on a shared machine wall time mostly measures the
    neighbours' load.
    """
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            gc.disable()
            start = time.thread_time()
            for _ in range(number):
                await fn()
            samples[name].append((time.thread_time() - start) / number * 1e6)
            gc.enable()
    return {name: statistics.median(values) for name, values in samples.items()}


async def _measure() -> list[Row]:
    from toolnexus import acreate_toolkit, tool
    from toolnexus.tracing import trace

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    args = {"a": 2, "b": 3}
    plain = await acreate_toolkit(extra_tools=[add])
    traced = await acreate_toolkit(extra_tools=[add], middleware=[trace()])
    recording = await acreate_toolkit(
        extra_tools=[add], middleware=[trace(record_arguments=True, record_results=True)]
    )
    rows: list[Row] = []
    try:
        for tk in (plain, traced, recording):  # warm up: validators, chains, imports
            for _ in range(2_000):
                await tk.aexecute("add", args)
        idle = await _interleaved(
            {
                "plain": lambda: plain.aexecute("add", args),
                "traced": lambda: traced.aexecute("add", args),
            },
            number=20_000,
            rounds=9,
        )
        rows.append(("`aexecute`, no middleware", idle["plain"], "µs", "baseline"))
        overhead = idle["traced"] - idle["plain"]
        rows.append(
            (
                "`aexecute` + `trace`, no tracer provider configured",
                idle["traced"],
                "µs",
                f"overhead {overhead:.2f} µs; target ≤ 1 µs",
            )
        )
        step = await _step_cost(plain, trace())
        rows.append(
            (
                "the `trace` step alone, no tracer provider (one middleware call, no toolkit)",
                step,
                "µs",
                "the same overhead measured without the toolkit's noise; target ≤ 1 µs",
            )
        )

        from opentelemetry import trace as otel_trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        memory = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        otel_trace.set_tracer_provider(provider)

        for tk in (traced, recording):
            for _ in range(2_000):
                await tk.aexecute("add", args)
        memory.clear()
        sdk_tracer = provider.get_tracer("bench")

        async def bare_span() -> None:
            sdk_tracer.start_span("bare").end()

        from opentelemetry import context as otel_context

        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "add",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.type": "function",
            "gen_ai.tool.description": "Add two integers.",
            "toolnexus.tool.source": "python",
            "toolnexus.approval.decision": "allow",
            "toolnexus.sandbox.mechanism": "none",
        }

        async def same_span() -> None:
            span = sdk_tracer.start_span(
                "execute_tool add", kind=otel_trace.SpanKind.INTERNAL, attributes=attributes
            )
            token = otel_context.attach(otel_trace.set_span_in_context(span))
            otel_context.detach(token)
            span.end()

        timed = await _interleaved(
            {
                "plain": lambda: plain.aexecute("add", args),
                "traced": lambda: traced.aexecute("add", args),
                "recording": lambda: recording.aexecute("add", args),
                "bare": bare_span,
                "same": same_span,
            },
            number=2_000,
            rounds=9,
        )
        memory.clear()
        base = timed["plain"]
        rows.append(("`aexecute`, no middleware (same batches as below)", base, "µs", "baseline"))
        rows.append(
            (
                "`aexecute` + `trace`, SDK with the in-memory exporter",
                timed["traced"],
                "µs",
                f"overhead {timed['traced'] - base:.2f} µs; target ≤ 30 µs",
            )
        )
        rows.append(
            (
                "`aexecute` + `trace(record_arguments, record_results)`, same SDK",
                timed["recording"],
                "µs",
                f"informational: overhead {timed['recording'] - base:.2f} µs",
            )
        )
        rows.append(
            (
                "the SDK alone: one bare span started and ended (no attributes)",
                timed["bare"],
                "µs",
                "informational: the floor any span costs with this SDK",
            )
        )
        rows.append(
            (
                "the SDK alone: the same span (8 attributes at its start, made current)",
                timed["same"],
                "µs",
                f"informational: `trace` adds {timed['traced'] - base - timed['same']:.2f} µs "
                "to what the SDK itself costs",
            )
        )
    finally:
        for tk in (plain, traced, recording):
            await tk.aclose()
    return rows


async def _step_cost(toolkit: Any, middleware: Any) -> float:
    """µs one middleware call adds around `next`, measured directly (median of interleaved
    batches of `middleware(call, next)` and of `next(call)`)."""
    from toolnexus.approval import ALLOW_BY_DEFAULT
    from toolnexus.base import Result, ToolContext
    from toolnexus.middleware import Call

    tool = toolkit.get("add")
    ctx = ToolContext(call_id="c", tool_name="add", workspace=Path.cwd())
    call = Call(tool=tool, arguments={"a": 1, "b": 2}, ctx=ctx, verdict=ALLOW_BY_DEFAULT)
    done = Result(content="3")

    async def nxt(_: Any) -> Result:
        return done

    times = await _interleaved(
        {"step": lambda: middleware(call, nxt), "bare": lambda: nxt(call)},
        number=100_000,
        rounds=9,
    )
    return times["step"] - times["bare"]


if __name__ == "__main__":
    if CHILD in sys.argv[1:]:
        print(json.dumps(asyncio.run(_measure())))
    else:
        bench()
