"""toolnexus benchmarks: prints a table per area, peers measured in the same run, with ratios.

    python benchmarks/run.py            # everything
    python benchmarks/run.py core mcp   # some sections

Not run by CI: numbers depend on the machine. Targets come from the issues and are printed
next to each figure; the README quotes a run of this script.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

Row = tuple[str, float, str, str]  # label, value, unit, note


def median_us(fn: Callable[[], Any], *, number: int, repeat: int = 7) -> float:
    """Median over `repeat` batches of the per-call time of `fn`, in microseconds."""
    samples = []
    for _ in range(repeat):
        gc.disable()
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number * 1e6)
        gc.enable()
    return statistics.median(samples)


async def amedian_us(fn: Callable[[], Any], *, number: int, repeat: int = 7) -> float:
    samples = []
    for _ in range(repeat):
        gc.disable()
        start = time.perf_counter()
        for _ in range(number):
            await fn()
        samples.append((time.perf_counter() - start) / number * 1e6)
        gc.enable()
    return statistics.median(samples)


def table(title: str, rows: list[Row]) -> None:
    print(f"\n## {title}\n")
    print("| measurement | value | target / note |")
    print("|---|---:|---|")
    for label, value, unit, note in rows:
        print(f"| {label} | {value:,.2f} {unit} | {note} |")


# -- core ------------------------------------------------------------------------------------


def bench_core() -> None:
    from toolnexus import Registry, acreate_toolkit, create_toolkit, tool
    from toolnexus.middleware import timeout, truncate

    def plain_add(a: int, b: int) -> int:
        return a + b

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @tool(name="add_sync")
    def add_sync(a: int, b: int) -> int:
        """Add two integers (sync, runs in a worker thread)."""
        return a + b

    args = {"a": 2, "b": 3}
    plain = median_us(lambda: plain_add(**args), number=200_000)
    rows: list[Row] = [("plain function call", plain, "µs", "baseline")]

    async def run_async() -> tuple[float, float]:
        tk = await acreate_toolkit(extra_tools=[add], middleware=[timeout(30), truncate(30_000)])
        try:
            a = await amedian_us(lambda: tk.aexecute("add", args), number=20_000)
            direct = Registry([add])
            del direct
            return a, a - plain
        finally:
            await tk.aclose()

    aexec, _ = asyncio.run(run_async())
    rows.append(
        (
            "`aexecute` (validation + approval + timeout + truncate)",
            aexec,
            "µs",
            f"overhead {aexec - plain:.2f} µs; target ≤ 15 µs",
        )
    )
    with create_toolkit(
        extra_tools=[add, add_sync], middleware=[timeout(30), truncate(30_000)]
    ) as tk:
        sync = median_us(lambda: tk.execute("add", args), number=5_000)
        rows.append(
            (
                "sync `execute` (same stack, private loop thread)",
                sync,
                "µs",
                f"overhead {sync - plain:.2f} µs; target ≤ 60 µs",
            )
        )
        sync_fn = median_us(lambda: tk.execute("add_sync", args), number=2_000)
        rows.append(
            (
                "sync `execute` of a *sync* function tool (worker thread)",
                sync_fn,
                "µs",
                "informational",
            )
        )
    try:
        from langchain_core.tools import StructuredTool

        lc = StructuredTool.from_function(plain_add, name="add", description="Add.")
        lc_us = median_us(lambda: lc.invoke(args), number=2_000)
        rows.append(
            (
                "langchain_core `StructuredTool.invoke`",
                lc_us,
                "µs",
                f"toolnexus aexecute is {lc_us / aexec:.1f}x faster, execute {lc_us / sync:.1f}x",
            )
        )
    except ImportError:
        rows.append(
            (
                "langchain_core `StructuredTool.invoke`",
                float("nan"),
                "µs",
                "not installed: pip install -e '.[bench]'",
            )
        )
    imports = []
    for _ in range(7):
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import toolnexus"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        )
        last = [ln for ln in out.stderr.splitlines() if ln.rstrip().endswith("| toolnexus")]
        imports.append(int(last[-1].split("|")[1]) / 1000)
    rows.append(
        (
            "`import toolnexus` (cumulative, -X importtime)",
            statistics.median(imports),
            "ms",
            "target ≤ 150 ms",
        )
    )
    table("Core: per-call overhead (trivial 2-argument tool)", rows)


SECTIONS: dict[str, Callable[[], None]] = {"core": bench_core}


def main(argv: list[str]) -> None:
    chosen = argv or list(SECTIONS)
    print(f"python {sys.version.split()[0]} on {sys.platform}")
    for name in chosen:
        SECTIONS[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
