"""toolnexus benchmarks: prints a table per area, peers measured in the same run, with ratios.

    python benchmarks/run.py            # everything
    python benchmarks/run.py core mcp   # some sections

Not run by CI: numbers depend on the machine. Targets come from the issues and are printed
next to each figure; the README quotes a run of this script.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

Row = tuple[str, float, str, str]  # label, value, unit, note
_Variants = dict[str, tuple[Sequence[str], dict[str, str] | None]]  # name: (argv, env)


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

COLOCATE_ENV = "TOOLNEXUS_COLOCATE"


@contextmanager
def _cpu_burner() -> Iterator[None]:
    """A process spinning on one CPU for as long as the block runs."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def bench_core() -> None:
    from toolnexus import acreate_toolkit, create_toolkit, tool
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

    @tool(name="add_inline", inline=True)
    def add_inline(a: int, b: int) -> int:
        """Add two integers (sync, run on the loop)."""
        return a + b

    args = {"a": 2, "b": 3}
    plain = median_us(lambda: plain_add(**args), number=200_000)
    rows: list[Row] = [("plain function call", plain, "µs", "baseline")]

    async def run_async() -> tuple[float, float, float]:
        tk = await acreate_toolkit(
            extra_tools=[add, add_sync, add_inline], middleware=[timeout(30), truncate(30_000)]
        )
        try:
            return (
                await amedian_us(lambda: tk.aexecute("add", args), number=20_000, repeat=9),
                await amedian_us(lambda: tk.aexecute("add_inline", args), number=20_000),
                await amedian_us(lambda: tk.aexecute("add_sync", args), number=2_000),
            )
        finally:
            await tk.aclose()

    aexec, aexec_inline, aexec_thread = asyncio.run(run_async())
    rows.append(
        (
            "`aexecute` (validation + approval + timeout + truncate)",
            aexec,
            "µs",
            f"overhead {aexec - plain:.2f} µs; target ≤ 15 µs",
        )
    )
    rows.append(
        (
            "`aexecute` of a *sync* function tool, `inline=True`",
            aexec_inline,
            "µs",
            "informational: runs on the loop",
        )
    )
    rows.append(
        (
            "`aexecute` of a *sync* function tool (default: worker thread)",
            aexec_thread,
            "µs",
            "informational: two thread hand-offs",
        )
    )
    with create_toolkit(
        extra_tools=[add, add_sync, add_inline], middleware=[timeout(30), truncate(30_000)]
    ) as tk:
        sync = median_us(lambda: tk.execute("add", args), number=5_000, repeat=9)
        rows.append(
            (
                "sync `execute` (same stack, private loop thread)",
                sync,
                "µs",
                f"overhead {sync - plain:.2f} µs; target ≤ 60 µs",
            )
        )
        sync_inline = median_us(lambda: tk.execute("add_inline", args), number=5_000)
        rows.append(
            (
                "sync `execute` of a *sync* function tool, `inline=True`",
                sync_inline,
                "µs",
                "informational: runs on the loop thread",
            )
        )
        sync_fn = median_us(lambda: tk.execute("add_sync", args), number=2_000)
        rows.append(
            (
                "sync `execute` of a *sync* function tool (default: worker thread)",
                sync_fn,
                "µs",
                "informational: two more hand-offs, not co-scheduled",
            )
        )
        with _cpu_burner():
            busy = median_us(lambda: tk.execute("add", args), number=5_000, repeat=9)
        rows.append(
            (
                "sync `execute`, another process keeping a CPU busy",
                busy,
                "µs",
                "informational: co-scheduling under load",
            )
        )
    os.environ[COLOCATE_ENV] = "0"
    try:
        with create_toolkit(extra_tools=[add], middleware=[timeout(30), truncate(30_000)]) as tk:
            apart = median_us(lambda: tk.execute("add", args), number=5_000, repeat=9)
    finally:
        del os.environ[COLOCATE_ENV]
    rows.append(
        (
            f"sync `execute` with co-scheduling off (`{COLOCATE_ENV}=0`)",
            apart,
            "µs",
            f"informational: {apart / sync:.1f}x the default; idle-vCPU wake-ups",
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
            "target ≤ 150 ms (names load lazily)",
        )
    )
    # `import toolnexus` alone loads almost nothing: what a program pays before its first call
    # is the core it then touches, timed here as wall clock minus a bare interpreter's start.
    usable = _startup_ms("from toolnexus import create_toolkit, tool, Toolkit; create_toolkit")
    rows.append(
        (
            "`from toolnexus import create_toolkit, tool, Toolkit` (wall, fresh process)",
            usable,
            "ms",
            "target ≤ 150 ms",
        )
    )
    table("Core: per-call overhead (trivial 2-argument tool)", rows)


def _startup_ms(code: str, runs: int = 9) -> float:
    """Median wall time of `python -c code` minus that of a bare interpreter, in ms."""

    def wall(snippet: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, check=True)
        return (time.perf_counter() - start) * 1000

    bare = statistics.median(wall("pass") for _ in range(runs))
    return statistics.median(wall(code) for _ in range(runs)) - bare


def spread(samples: list[float]) -> str:
    """`min–max` of the samples, to show how noisy a median is."""
    return f"{min(samples):,.1f}–{max(samples):,.1f}"


def _quartiles(samples: list[float]) -> str:
    low, _, high = statistics.quantiles(samples, n=4)
    return f"{low:.2f}–{high:.2f}"


@dataclass
class _Paired:
    """Per batch: (direct, other) median µs per call, wall and CPU, and other/direct wall."""

    wall: tuple[list[float], list[float]]
    cpu: tuple[list[float], list[float]]
    ratios: list[float]


async def _paired_calls(
    direct: Callable[[], Any], other: Callable[[], Any], *, batches: int, pairs: int
) -> _Paired:
    """Time `direct` and `other` in calls paired one by one (A B, then B A), without the GC.

    Per batch, the median call of each side (a call that waited for a CPU, on a loaded
    machine, moves a mean but not a median), and the ratio of those medians."""
    wall: tuple[list[float], list[float]] = ([], [])
    cpu: tuple[list[float], list[float]] = ([], [])
    ratios: list[float] = []
    clock, cpu_clock = time.perf_counter, time.process_time
    for _ in range(batches):
        spent: tuple[list[float], list[float]] = ([], [])
        spent_cpu: tuple[list[float], list[float]] = ([], [])
        gc.collect()
        gc.disable()
        for i in range(pairs):
            for side in (0, 1) if i % 2 == 0 else (1, 0):
                call = direct if side == 0 else other
                start, start_cpu = clock(), cpu_clock()
                await call()
                spent[side].append(clock() - start)
                spent_cpu[side].append(cpu_clock() - start_cpu)
        gc.enable()
        for side in (0, 1):
            wall[side].append(statistics.median(spent[side]) * 1e6)
            cpu[side].append(statistics.median(spent_cpu[side]) * 1e6)
        ratios.append(wall[1][-1] / wall[0][-1])
    return _Paired(wall=wall, cpu=cpu, ratios=ratios)


FIXTURES = ROOT / "benchmarks" / "fixtures"


# -- mcp -------------------------------------------------------------------------------------


def bench_mcp() -> None:
    asyncio.run(_bench_mcp())


async def _bench_mcp() -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from toolnexus import acreate_toolkit

    rows: list[Row] = []
    # A call through the toolkit vs the SDK's own client, each to its own copy of the same
    # MCPServer script. Calls alternate one by one (A B, then B A), each timed alone, so the two
    # sides of a pair run microseconds apart and see the same machine; a batch's ratio is its
    # toolkit time over its direct time, and the figure is the median ratio over the batches.
    # Wall time includes the server's side (the same for both); this process's CPU time per
    # call is the steadier measure of what the toolkit adds.
    echo = str(FIXTURES / "echo_server.py")
    args = {"text": "hello"}
    load_before = os.getloadavg()[0]
    toolkit = await acreate_toolkit(
        {"version": 1, "mcp_servers": {"bench": {"command": sys.executable, "args": [echo]}}}
    )
    try:
        async with Client(StdioServerParameters(command=sys.executable, args=[echo])) as client:
            await client.list_tools()
            check = await toolkit.aexecute("echo", args)
            assert check.content == "hello" and not check.is_error, check

            def by_client() -> Any:
                return client.call_tool("echo", args)

            def by_toolkit() -> Any:
                return toolkit.aexecute("echo", args)

            for _ in range(200):  # warm-up: caches, the validator, pydantic's paths
                await by_client()
                await by_toolkit()
            paired = await _paired_calls(by_client, by_toolkit, batches=60, pairs=25)
    finally:
        await toolkit.aclose()
    load = f"load average {load_before:.2f} → {os.getloadavg()[0]:.2f}"
    direct, through = paired.wall
    direct_cpu, through_cpu = paired.cpu
    rows.append(
        (
            "direct `mcp.Client.call_tool` (stdio MCPServer, echo)",
            statistics.median(direct),
            "µs",
            f"batches {spread(direct)} µs; {load}",
        )
    )
    rows.append(
        (
            "`toolkit.aexecute` of the same tool (manifest stdio server)",
            statistics.median(through),
            "µs",
            f"**{statistics.median(paired.ratios):.3f}×** direct (median of {len(paired.ratios)} "
            f"batches of 25 calls paired one by one, median calls; quartiles "
            f"{_quartiles(paired.ratios)}); "
            "target ≤ 1.05×",
        )
    )
    added = [t - d for t, d in zip(through_cpu, direct_cpu, strict=True)]
    rows.append(
        (
            "… CPU of this process per call, direct → toolkit",
            statistics.median(through_cpu),
            "µs",
            f"direct {statistics.median(direct_cpu):,.1f} µs; the toolkit adds "
            f"{statistics.median(added):,.1f} µs (quartiles {_quartiles(added)})",
        )
    )

    # Connecting: servers that sleep 300 ms before their first answer, started by one toolkit.
    slow = FIXTURES / "slow_server.py"

    def servers(count: int, delay: float) -> dict[str, Any]:
        return {
            "version": 1,
            "mcp_servers": {
                f"s{i}": {
                    "command": sys.executable,
                    "args": ["-S", str(slow), str(delay)],
                    "prefix": f"s{i}_",
                    "required": True,
                }
                for i in range(count)
            },
        }

    async def connect_ms(manifest: dict[str, Any]) -> float:
        start = time.perf_counter()
        kit = await acreate_toolkit(manifest)
        elapsed = (time.perf_counter() - start) * 1000
        assert len(kit.names()) == len(manifest["mcp_servers"])
        await kit.aclose()
        return elapsed

    timings: dict[tuple[int, float], list[float]] = {(1, 0.0): [], (1, 0.3): [], (3, 0.3): []}
    for _ in range(7):  # interleaved rounds
        for (count, delay), samples in timings.items():
            samples.append(await connect_ms(servers(count, delay)))
    instant = statistics.median(timings[(1, 0.0)])
    one = statistics.median(timings[(1, 0.3)])
    three = statistics.median(timings[(3, 0.3)])
    rows.append(
        (
            "create_toolkit, 1 stdio server answering at once",
            instant,
            "ms",
            f"spawn + handshake + tools/list; runs {spread(timings[(1, 0.0)])} ms",
        )
    )
    rows.append(
        (
            "create_toolkit, 1 server taking 300 ms to answer",
            one,
            "ms",
            f"runs {spread(timings[(1, 0.3)])} ms",
        )
    )
    rows.append(
        (
            "create_toolkit, 3 servers taking 300 ms each",
            three,
            "ms",
            f"**{three / one:.2f}×** one alone (runs {spread(timings[(3, 0.3)])} ms); "
            "target ≤ 1.3×",
        )
    )

    # A server that never answers, with connect_timeout: 2s: how long until the toolkit is ready
    # without it (it is not `required`, so the toolkit starts and reports it in status()).
    hang = str(FIXTURES / "hang_server.py")
    given_up: list[float] = []
    closing: list[float] = []
    quiet = logging.getLogger("toolnexus")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the expected "did not start" warning, three times
    for _ in range(3):
        start = time.perf_counter()
        kit = await acreate_toolkit(
            {
                "version": 1,
                "mcp_servers": {
                    "hung": {
                        "command": sys.executable,
                        "args": ["-S", hang],
                        "connect_timeout": "2s",
                    }
                },
            }
        )
        given_up.append(time.perf_counter() - start)
        assert kit.status()["hung"]["state"] != "ready", kit.status()
        start = time.perf_counter()
        await kit.aclose()
        closing.append((time.perf_counter() - start) * 1000)
    quiet.setLevel(level)
    rows.append(
        (
            "hung server, `connect_timeout: 2s`: create_toolkit returns after",
            statistics.median(given_up),
            "s",
            f"runs {spread(given_up)} s; target ≤ 2.2 s",
        )
    )
    rows.append(
        (
            "… then closing that toolkit (the hung process ended)",
            statistics.median(closing),
            "ms",
            "informational",
        )
    )
    table("MCP: calls and connections (stdio)", rows)


# -- mcp_sandboxed ---------------------------------------------------------------------------


def bench_mcp_sandboxed() -> None:
    asyncio.run(_bench_mcp_sandboxed())


async def _bench_mcp_sandboxed() -> None:
    """A Landlock-sandboxed stdio server forked by the toolkit's resident launcher (issue 21)
    or started the per-call way (a `python -I -S launcher.py` of its own, as before), in
    interleaved paired rounds: `create_toolkit` (the launcher starts with the server), and a
    server started while the launcher already runs (a restart, a second server of the policy,
    a toolkit whose shell tools used it). Wall time, and the CPU of the processes started."""
    import resource

    from toolnexus import acreate_toolkit
    from toolnexus.mcp import forked
    from toolnexus.mcp.server import McpServer
    from toolnexus.mcp.spec import McpServerSpec
    from toolnexus.runtime.resident import Launchers
    from toolnexus.runtime.sandbox import SandboxPolicy, detect

    before = os.environ.get("TOOLNEXUS_SANDBOX_DISABLE")
    os.environ["TOOLNEXUS_SANDBOX_DISABLE"] = "bwrap"  # the resident path is Landlock's
    detect.cache_clear()
    resident_plan_for = forked.resident_plan_for
    workspace = Path(tempfile.mkdtemp(prefix="toolnexus-bench-"))
    sandbox = {"filesystem": "workspace-write", "network": False}

    def children_cpu_ms() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (usage.ru_utime + usage.ru_stime) * 1000

    def resident_or_not(resident: bool) -> None:
        # Per call: no policy gets a resident launcher, so servers start as they did before.
        forked.resident_plan_for = resident_plan_for if resident else lambda *_: None

    async def toolkit_ms(args: list[str], resident: bool) -> tuple[float, float]:
        resident_or_not(resident)
        manifest = {
            "version": 1,
            "mcp_servers": {
                "boxed": {
                    "command": sys.executable,
                    "args": args,
                    "sandbox": sandbox,
                    "connect_timeout": 60,
                }
            },
        }
        cpu = children_cpu_ms()
        start = time.perf_counter()
        kit = await acreate_toolkit(manifest, workspace=workspace)
        elapsed = (time.perf_counter() - start) * 1000
        assert kit.status()["boxed"]["launch"] == ("resident" if resident else "per-call")
        await kit.aclose()  # the launcher and the server are reaped: their CPU is counted
        return elapsed, children_cpu_ms() - cpu

    async def server_ms(args: list[str], launchers: Launchers | None) -> tuple[float, float]:
        resident_or_not(launchers is not None)
        mapping = {"command": sys.executable, "args": args, "connect_timeout": 60}
        spec = McpServerSpec.from_mapping("boxed", mapping, base_dir=workspace)
        server = McpServer(
            spec, sandbox=SandboxPolicy(**sandbox), workspace=workspace, launchers=launchers
        )
        cpu = children_cpu_ms()
        start = time.perf_counter()
        await server.start()
        elapsed = (time.perf_counter() - start) * 1000
        assert server.status.launch == ("resident" if launchers else "per-call")
        await server.aclose()
        return elapsed, children_cpu_ms() - cpu

    def rows_for(
        label: str, per_call: list[tuple[float, float]], now: list[tuple[float, float]], cpu: bool
    ) -> list[Row]:
        walls = ([w for w, _ in per_call], [w for w, _ in now])
        saved = [p - r for p, r in zip(*walls, strict=True)]
        # CPU of the processes started, once reaped; a running launcher's forks are reaped by
        # it, and counted only when it exits, so the warm rows have none.
        before = (
            f"; CPU of the processes started {statistics.median(c for _, c in per_call):.0f} ms"
        )
        after = f"; CPU {statistics.median(c for _, c in now):.0f} ms"
        return [
            (f"{label}: per-call launch (before)", statistics.median(walls[0]), "ms",
             f"runs {spread(walls[0])} ms" + (before if cpu else "")),
            (f"{label}: resident launcher (now)", statistics.median(walls[1]), "ms",
             f"**{_less(statistics.median(saved))}** (median of {len(saved)} paired rounds, "
             f"quartiles {_quartiles(saved)})" + (after if cpu else "")),
        ]  # fmt: skip

    def _less(ms: float) -> str:
        return f"{ms:.1f} ms less" if ms >= 0 else f"{-ms:.1f} ms more"

    try:
        if not detect().landlock.available:
            print(f"\n(mcp_sandboxed skipped: no Landlock here: {detect().landlock.reason})")
            return
        servers = {
            "raw server (`slow_server.py`, imports nothing)": [
                "-S",
                str(FIXTURES / "slow_server.py"),
                "0",
            ],
            "`MCPServer` (echo_server.py, imports the SDK)": [str(FIXTURES / "echo_server.py")],
        }
        rows: list[Row] = []
        load_before = os.getloadavg()[0]
        warm = Launchers()
        try:
            for label, args in servers.items():
                first: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
                again: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
                await toolkit_ms(args, True)  # warm-up: caches, the first Landlock ruleset
                await server_ms(args, warm)  # and the shared launcher starts
                for i in range(15):  # paired rounds, the order alternating
                    for resident in (True, False) if i % 2 == 0 else (False, True):
                        first[resident].append(await toolkit_ms(args, resident))
                        again[resident].append(await server_ms(args, warm if resident else None))
                rows += rows_for(f"create_toolkit, {label}", first[False], first[True], True)
                rows += rows_for(
                    f"the server started again, its launcher running, {label}",
                    again[False],
                    again[True],
                    False,
                )
        finally:
            warm.close()
        table(
            "MCP: a Landlock-sandboxed stdio server, resident launcher vs per call "
            f"(load average {load_before:.2f} → {os.getloadavg()[0]:.2f})",
            rows,
        )
    finally:
        forked.resident_plan_for = resident_plan_for
        shutil.rmtree(workspace, ignore_errors=True)
        if before is None:
            os.environ.pop("TOOLNEXUS_SANDBOX_DISABLE", None)
        else:
            os.environ["TOOLNEXUS_SANDBOX_DISABLE"] = before
        detect.cache_clear()


# -- mcp_large -------------------------------------------------------------------------------


def bench_mcp_large() -> None:
    asyncio.run(_bench_mcp_large())


async def _bench_mcp_large() -> None:
    """Large MCP answers: the SDK's own stdio client (its reader re-splits its whole buffer on
    every chunk: quadratic) against the toolkit's bounded reader, and what a large answer does
    to the other calls on the same event loop meanwhile."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from toolnexus import acreate_toolkit

    faults = str(ROOT / "tests" / "mcp_servers" / "faults.py")
    params = StdioServerParameters(command=sys.executable, args=[faults])
    entry = {"command": sys.executable, "args": [faults], "connect_timeout": 60}
    rows: list[Row] = []
    sizes = (5, 10, 20)
    # The tool returns text; MCPServer sends it twice (content and structuredContent).
    note = "text answer (about twice that on the wire)"

    async def timed(call: Callable[[], Any]) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        await call()
        return time.perf_counter() - wall, time.process_time() - cpu

    async def with_pings(call: Callable[[], Any], ping: Callable[[], Any]) -> list[float]:
        """Latencies (ms) of `ping`, called back to back on the same loop while `call` runs."""
        latencies: list[float] = []
        done = asyncio.Event()

        async def pinger() -> None:
            while not done.is_set():
                start = time.perf_counter()
                await ping()
                latencies.append((time.perf_counter() - start) * 1000)

        task = asyncio.create_task(pinger())
        await asyncio.sleep(0.2)
        try:
            await call()
        finally:
            done.set()
            await task
        return latencies

    async with Client(params) as client, Client(params) as other:
        await client.list_tools()
        await other.list_tools()
        for mb in sizes:
            wall, cpu = await timed(lambda mb=mb: client.call_tool("big", {"size": mb * 10**6}))
            rows.append(
                (f"SDK stdio client, {mb} MB {note}", wall, "s", f"loop-thread CPU {cpu:.2f} s")
            )
        pings = await with_pings(
            lambda: client.call_tool("big", {"size": 20 * 10**6}),
            lambda: other.call_tool("echo", {"text": "ping"}),
        )
        rows.append(
            (
                "… another server's echo during that 20 MB answer (SDK client), worst",
                max(pings),
                "ms",
                f"median {statistics.median(pings):.1f} ms over {len(pings)} calls",
            )
        )

    manifest = {
        "version": 1,
        "mcp_servers": {
            "big": {**entry, "prefix": "big_", "max_message": "200MB"},
            "other": {**entry, "prefix": "other_"},
        },
    }
    toolkit = await acreate_toolkit(manifest)
    try:
        for mb in (*sizes, 50):
            wall, cpu = await timed(lambda mb=mb: toolkit.aexecute("big_big", {"size": mb * 10**6}))
            rows.append(
                (
                    f"toolkit (bounded reader), {mb} MB {note}",
                    wall,
                    "s",
                    f"CPU of the whole process {cpu:.2f} s; the model gets max_output (30,000) "
                    "characters",
                )
            )
        pings = await with_pings(
            lambda: toolkit.aexecute("big_big", {"size": 20 * 10**6}),
            lambda: toolkit.aexecute("other_echo", {"text": "ping"}),
        )
        rows.append(
            (
                "… another server's echo during that 20 MB answer (toolkit), worst",
                max(pings),
                "ms",
                f"median {statistics.median(pings):.1f} ms over {len(pings)} calls",
            )
        )
    finally:
        await toolkit.aclose()

    toolkit = await acreate_toolkit({"version": 1, "mcp_servers": {"big": entry}})
    try:
        wall, cpu = await timed(lambda: toolkit.aexecute("big", {"size": 50 * 10**6}))
        refused = await toolkit.aexecute("big", {"size": 50 * 10**6})
        assert refused.is_error and "max_message" in refused.content, refused.content
        rows.append(
            (
                "toolkit, 50 MB answer past the default max_message (16 MiB): refused after",
                wall,
                "s",
                f"CPU {cpu:.2f} s; the rest of the line is skipped unread, the session stays",
            )
        )
    finally:
        await toolkit.aclose()
    table("MCP: large answers (stdio)", rows)


# -- manifest --------------------------------------------------------------------------------


def write_manifest(folder: Path, count: int, *, extra: Sequence[str] = ()) -> Path:
    """A manifest of `count` tools (half Python functions, half shell commands) in `folder`,
    with its Python module beside it; `extra` names more shell tools. Returns the manifest."""
    python_count = count // 2
    module = folder / "bench_tools.py"
    if not module.exists():
        functions = [
            f"def fn_{i}(path: str, limit: int = 10, verbose: bool = False) -> str:\n"
            f'    """Tool number {i}.\n\n    Args:\n        path: a file.\n'
            f'        limit: how many.\n        verbose: say more.\n    """\n'
            f"    return f'{i}:{{path}}:{{limit}}'\n"
            for i in range(python_count)
        ]
        module.write_text("\n\n".join(functions), encoding="utf-8")
    lines = [
        "version: 1",
        "defaults: {approval: allow, timeout: 30s}",
        "middleware: [{timeout: 30s}, {truncate: 30000}]",
        "permissions:",
        '  deny: ["sh_*(/etc/**)"]',
        "tools:",
    ]
    for i in range(python_count):
        lines.append(f"  - {{name: py_{i}, python: bench_tools:fn_{i}}}")
    shell_names = [f"sh_{i}" for i in range(count - python_count)] + list(extra)
    for name in shell_names:
        lines += [
            f"  - name: {name}",
            f"    description: List a folder ({name})",
            '    command: [ls, -la, "{path}"]',
            "    parameters:",
            "      type: object",
            "      properties: {path: {type: string, description: the folder}}",
            "      required: [path]",
            "    read_only: true",
            "    approval:",
            "      default: allow",
            '      rules: [{decision: deny, when: {path: {glob: "/etc/**"}}}]',
        ]
    path = folder / "tools.yaml"
    # Written beside and renamed over, as editors save: a reader never sees half a file.
    scratch = folder / ".tools.yaml.tmp"
    scratch.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(scratch, path)
    return path


_COLD_LOAD = """
import sys, time
sys.path.insert(0, {root!r})
import toolnexus
start = time.perf_counter()
from toolnexus import create_toolkit
kit = create_toolkit({path!r})
elapsed = time.perf_counter() - start
assert len(kit.names()) == 500
kit.close()
print(elapsed * 1000)
"""


def bench_manifest() -> None:
    from toolnexus import create_toolkit, load_manifest

    with tempfile.TemporaryDirectory() as tmp:
        path = write_manifest(Path(tmp), 500)
        cold = [
            float(
                subprocess.run(
                    [sys.executable, "-c", _COLD_LOAD.format(root=str(ROOT), path=str(path))],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )
            for _ in range(5)
        ]
        create_toolkit(path).close()  # warm: the lazy imports are the cold row's business
        loads: list[float] = []
        builds: list[float] = []
        for _ in range(9):
            start = time.perf_counter()
            manifest = load_manifest(path)
            loads.append((time.perf_counter() - start) * 1000)
            assert len(manifest.tools) == 500
            start = time.perf_counter()
            kit = create_toolkit(path)
            builds.append((time.perf_counter() - start) * 1000)
            assert len(kit.names()) == 500
            kit.close()
    load = statistics.median(loads)
    build = statistics.median(builds)
    rows: list[Row] = [
        (
            "`create_toolkit` of a 500-tool manifest (250 Python + 250 shell)",
            build,
            "ms",
            f"runs {spread(builds)} ms; target ≤ 150 ms",
        ),
        (
            "… of which `load_manifest` (parse, interpolate, check)",
            load,
            "ms",
            f"{load / build:.0%} of the total; runs {spread(loads)} ms",
        ),
        (
            "… the same, first load in a fresh process (lazy imports: yaml, schema checker)",
            statistics.median(cold),
            "ms",
            f"runs {spread(cold)} ms; informational",
        ),
    ]
    table("Manifest: loading 500 tools", rows)


# -- builtin ---------------------------------------------------------------------------------


def bench_builtin() -> None:
    rows = asyncio.run(_bench_search())
    rows += _bench_memory()
    table("Builtin tools: search speed and memory", rows)


async def _bench_search() -> list[Row]:
    from builtin import search
    from toolnexus import acreate_toolkit

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    # The exact rg command each call runs, recorded on its way out, so that the bare peer runs
    # the same binary with the same options in the same folder.
    seen: list[tuple[list[str], Path]] = []
    run_rg = search._run_rg

    async def recording(argv: list[str], cwd: Path, query: Any) -> Any:
        seen.append((list(argv), cwd))
        return await run_rg(argv, cwd, query)

    search._run_rg = recording
    try:
        kit = await acreate_toolkit(builtins=["grep", "glob"], workspace=stdlib)
        cases: list[tuple[str, str, dict[str, Any], list[str] | None, float]] = [
            (
                "grep files_with_matches `def __init__`",
                "grep",
                {"pattern": "def __init__"},
                None,
                1.2,
            ),
            (
                "grep content `class \\w+Error\\(Exception\\)`, line numbers",
                "grep",
                {"pattern": r"class \w+Error\(Exception\)", "output_mode": "content"},
                None,
                1.2,
            ),
            (
                "glob `**/*.py`",
                "glob",
                {"pattern": "**/*.py"},
                ["--files", "-g", "*.py"],
                1.5,
            ),
        ]
        rows: list[Row] = []
        try:
            for label, name, args, plain, target in cases:
                seen.clear()
                first = await kit.aexecute(name, args)
                assert not first.is_error, first.content
                argv, cwd = seen[-1]
                peers = {"the same rg command": argv}
                if plain is not None:
                    peers[f"`rg {' '.join(plain)}`"] = [argv[0], *plain]
                tool_ms: list[float] = []
                bare_ms: dict[str, list[float]] = {k: [] for k in peers}
                for i in range(11):  # interleaved rounds, the tool first or last in turn
                    if i % 2:
                        tool_ms.append(await _timed_call(kit, name, args))
                    for key, command in peers.items():
                        start = time.perf_counter()
                        subprocess.run(
                            command,
                            cwd=cwd,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL,
                            check=False,
                        )
                        bare_ms[key].append((time.perf_counter() - start) * 1000)
                    if not i % 2:
                        tool_ms.append(await _timed_call(kit, name, args))
                tool = statistics.median(tool_ms)
                total = first.metadata.get("total")
                rows.append(
                    (
                        f"{label} on the stdlib ({total:,} results), through the toolkit",
                        tool,
                        "ms",
                        f"runs {spread(tool_ms)} ms",
                    )
                )
                for key, samples in bare_ms.items():
                    # Each round's ratio: the tool and the bare command ran back to back.
                    ratios = [t / b for t, b in zip(tool_ms, samples, strict=True)]
                    is_target = key != "the same rg command" or plain is None
                    rows.append(
                        (
                            f"… bare {key}",
                            statistics.median(samples),
                            "ms",
                            f"tool **{statistics.median(ratios):.2f}×** (median of paired runs; "
                            f"quartiles {_quartiles(ratios)})"
                            + (f"; target ≤ {target}×" if is_target else "; informational"),
                        )
                    )
        finally:
            await kit.aclose()
    finally:
        search._run_rg = run_rg
    files = sum(1 for _ in stdlib.rglob("*"))
    rows.insert(0, (f"stdlib tree searched: `{stdlib}`", files, "entries", "informational"))
    return rows


async def _timed_call(kit: Any, name: str, args: dict[str, Any]) -> float:
    start = time.perf_counter()
    await kit.aexecute(name, args)
    return (time.perf_counter() - start) * 1000


_MEMORY = """
import sys
sys.path.insert(0, {root!r})
from toolnexus import create_toolkit

# ru_maxrss would carry the parent's peak over exec: read the kernel's own counters instead, and
# reset the peak (clear_refs 5) right before the measured call, so only that call's peak counts.
def status_mb(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(key)

def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status_mb("VmRSS")

mode, folder, lines = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "read":
    kit = create_toolkit(builtins={{"read": {{"max_output_chars": 1_000_000}}}}, workspace=folder)
    warm = kit.execute("read", {{"path": "small.txt"}})
    assert not warm.is_error, warm.content
    before = reset_peak()
    result = kit.execute("read", {{"path": "big.txt", "offset": lines - 1999, "limit": 2000}})
    assert not result.is_error, result.content[:500]
    assert result.content.count(chr(10)) >= 1999, result.content[-500:]
elif mode == "control":
    kit = create_toolkit()
    before = reset_peak()
    hog = bytearray(200 * 1024 * 1024)  # zero-filled pages: really resident
    del hog
else:
    kit = create_toolkit(builtins={{"shell": {{"default_approval": "allow"}}}}, workspace=folder)
    warm = kit.execute("shell", {{"command": "echo warm"}})
    assert not warm.is_error, warm.content
    before = reset_peak()
    command = "yes 0123456789012345678901234567890123456789abcdefgh | head -c 1000000000"
    result = kit.execute("shell", {{"command": command}})
    assert not result.is_error, result.content[:500]
after = status_mb("VmHWM")
kit.close()
print(before, after)
"""


def _bench_memory() -> list[Row]:
    line = b"0123456789012345678901234567890123456789abcdefghi\n"  # 50 bytes
    lines = 1_000_000_000 // len(line)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "small.txt").write_text("hello\n", encoding="utf-8")
        block = line * 20_000  # 1 MB
        with open(folder / "big.txt", "wb") as f:
            for _ in range(lines // 20_000):
                f.write(block)
        script = _MEMORY.format(root=str(ROOT))
        for mode, label in [
            ("read", "`read` of 2,000 lines at the end of a 1 GB file"),
            ("shell", "`shell` running a command that prints 1 GB"),
            ("control", "control: a 200 MiB bytearray, measured the same way"),
        ]:
            growth: list[float] = []
            seconds: list[float] = []
            before = 0.0
            for _ in range(3):
                start = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-c", script, mode, str(folder), str(lines)],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode:
                    raise RuntimeError(f"the {mode} memory probe failed:\n{done.stderr}")
                out = done.stdout.split()
                seconds.append(time.perf_counter() - start)
                before, after = float(out[0]), float(out[1])
                growth.append(after - before)
            rows.append(
                (
                    f"{label}: peak RSS growth (fresh process, RSS before {before:.0f} MB)",
                    statistics.median(growth),
                    "MB",
                    f"runs {spread(growth)} MB, {statistics.median(seconds):.1f} s each; "
                    + ("target ≤ 50 MB" if mode != "control" else "checks the method"),
                )
            )
    return rows


# -- sandbox ---------------------------------------------------------------------------------


def bench_sandbox() -> None:
    from toolnexus import create_toolkit
    from toolnexus.runtime.sandbox import SandboxPolicy, detect, wrap_command

    runs = 50
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)

        def spawn_ms(mechanism: str | None) -> list[float]:
            """Wrap (or not) and run `true`, `runs` times: ms per run, wrapping included."""
            policy = SandboxPolicy(filesystem="workspace-write", network=False)
            samples = []
            for _ in range(runs):
                start = time.perf_counter()
                if mechanism is None:
                    subprocess.run(["true"], cwd=workspace, check=True)
                else:
                    wrapped = wrap_command(["true"], policy, workspace=workspace, cwd=workspace)
                    assert wrapped.mechanism == mechanism, wrapped.mechanism
                    subprocess.run(wrapped.argv, env=wrapped.env, cwd=workspace, check=True)
                    for folder in wrapped.cleanup:
                        shutil.rmtree(folder, ignore_errors=True)
                samples.append((time.perf_counter() - start) * 1000)
            return samples

        def tool_ms(sandboxed: bool) -> list[float]:
            """`execute` of a manifest shell tool running `true`, `runs` times."""
            entry: dict[str, Any] = {"name": "t", "command": ["true"]}
            if sandboxed:
                entry["sandbox"] = {"filesystem": "workspace-write", "network": False}
            with create_toolkit({"version": 1, "tools": [entry]}, workspace=workspace) as kit:
                first = kit.execute("t", {})
                assert not first.is_error, first.content
                samples = []
                for _ in range(runs):
                    start = time.perf_counter()
                    kit.execute("t", {})
                    samples.append((time.perf_counter() - start) * 1000)
            return samples

        base = statistics.median(spawn_ms(None))
        base_tool = statistics.median(tool_ms(False))
        rows.append(("`true` unconfined (subprocess.run)", base, "ms", "baseline"))
        rows.append(("`true` as an unconfined manifest shell tool", base_tool, "ms", "baseline"))
        saved = os.environ.get("TOOLNEXUS_SANDBOX_DISABLE")
        try:
            for mechanism, disable in [("bwrap", ""), ("landlock", "bwrap")]:
                os.environ["TOOLNEXUS_SANDBOX_DISABLE"] = disable
                detect.cache_clear()
                status = getattr(detect(), mechanism)
                if not status.available:
                    rows.append((f"`true` under {mechanism}", float("nan"), "ms", status.reason))
                    continue
                spawned = spawn_ms(mechanism)
                rows.append(
                    (
                        f"`true` under {mechanism} (wrap_command + run)",
                        statistics.median(spawned),
                        "ms",
                        f"overhead **{statistics.median(spawned) - base:.1f} ms**; "
                        f"runs {spread(spawned)} ms",
                    )
                )
                tooled = tool_ms(True)
                rows.append(
                    (
                        f"`true` as a sandboxed manifest shell tool ({mechanism})",
                        statistics.median(tooled),
                        "ms",
                        f"overhead {statistics.median(tooled) - base_tool:.1f} ms",
                    )
                )
        finally:
            if saved is None:
                os.environ.pop("TOOLNEXUS_SANDBOX_DISABLE", None)
            else:
                os.environ["TOOLNEXUS_SANDBOX_DISABLE"] = saved
            detect.cache_clear()
    table(f"Sandbox: running `true` (median of {runs})", rows)


# -- launch ----------------------------------------------------------------------------------

_PEERS = Path(os.environ.get("TOOLNEXUS_BENCH_PEERS", "/tmp/i21-peers")) / "node_modules" / ".bin"
"""Where `npm install @anthropic-ai/sandbox-runtime @openai/codex` put the peers' commands."""


def bench_launch() -> None:
    """Issue 21: the cost of launching `true`, ours beside `subprocess.run`, bare bwrap and the
    peers' per-command sandboxes, in interleaved rounds (each round runs every variant once),
    with the goals' ratios. Ours runs through `run_process` with a toolkit's resident
    launchers set (what a toolkit's calls use), and once the per-call way for comparison.

    What a variant leaves running after its call (a resident launcher making its next spare,
    a namespace torn down) is billed to the variant measured next: so ours come after the
    baselines, each resident variant is followed by its own per-call one, and the peers come
    last (the slowest, where a leftover millisecond weighs least). Then each of ours, and
    `subprocess.run`, runs alone with calls back to back (a loop, not an agent: a resident
    launcher then makes each spare at once, beside the call)."""
    from toolnexus import create_toolkit
    from toolnexus.runtime import sandbox
    from toolnexus.runtime.process import run_process
    from toolnexus.runtime.resident import Launchers, current_launchers

    runs = 40
    saved = os.environ.get("TOOLNEXUS_SANDBOX_DISABLE")
    sandbox.detect.cache_clear()
    with_bwrap = sandbox.detect()
    os.environ["TOOLNEXUS_SANDBOX_DISABLE"] = "bwrap"
    sandbox.detect.cache_clear()
    landlock_only = sandbox.detect()
    if saved is None:
        os.environ.pop("TOOLNEXUS_SANDBOX_DISABLE", None)
    else:
        os.environ["TOOLNEXUS_SANDBOX_DISABLE"] = saved
    sandbox.detect.cache_clear()
    real_detect = sandbox.detect
    policy = sandbox.SandboxPolicy(filesystem="read-only", network=False)
    bwrap = shutil.which("bwrap")
    peers = {
        "Anthropic sandbox-runtime (`srt true`)": [str(_PEERS / "srt"), "true"],
        "Codex Linux sandbox (`codex sandbox true`)": [str(_PEERS / "codex"), "sandbox", "true"],
    }

    def works(argv: list[str]) -> bool:
        try:
            done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0

    peers_ok = {name: argv for name, argv in peers.items() if works(argv)}

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        kit = create_toolkit(builtins=["shell"], workspace=ws)

        async def ours(support: Any, sandboxed: bool, resident: bool) -> str:
            sandbox.detect = lambda: support  # no probe per call
            token = current_launchers.set(launchers if resident else None)
            try:
                done = await run_process(
                    ["true"], cwd=ws, timeout=30, max_output=30_000,
                    sandbox=policy if sandboxed else None,
                )  # fmt: skip
            finally:
                current_launchers.reset(token)
                sandbox.detect = real_detect
            assert done.exit_code == 0, done.stderr
            return f"{done.mechanism}, {done.launch}"

        variants: dict[str, Callable[[], Any]] = {
            "subprocess.run": lambda: subprocess.run(["true"], check=True),
        }
        if bwrap:
            variants["bare `bwrap --unshare-all --ro-bind / / true`"] = lambda: subprocess.run(
                [bwrap, "--unshare-all", "--ro-bind", "/", "/", "true"], check=True
            )
        variants |= {
            "ours, unconfined": lambda: ours(with_bwrap, False, True),
            "ours, unconfined, per-call reaper (before)": lambda: ours(with_bwrap, False, False),
            "ours, read-only + network false, Landlock": lambda: ours(landlock_only, True, True),
            "ours, same, Landlock, per-call (before)": lambda: ours(landlock_only, True, False),
        }
        if with_bwrap.bwrap.available:
            variants["ours, same under bwrap"] = lambda: ours(with_bwrap, True, True)
            variants["ours, same under bwrap, per-call (before)"] = lambda: ours(
                with_bwrap, True, False
            )
        variants["builtin `shell` (`true`, through a toolkit)"] = lambda: kit.aexecute(
            "shell", {"command": "true"}
        )
        for name, argv in peers_ok.items():
            variants[name] = lambda argv=argv: subprocess.run(argv, check=True, capture_output=True)
        samples: dict[str, list[float]] = {name: [] for name in variants}
        how: dict[str, str] = {}

        async def measure() -> None:
            for name, step in variants.items():  # warm-up: launchers start on first use
                got = step()
                if asyncio.iscoroutine(got):
                    got = await got
                if isinstance(got, str):
                    how[name] = got
                elif hasattr(got, "metadata"):
                    how[name] = f"{got.metadata.get('mechanism')}, {got.metadata.get('launch')}"
            for _ in range(runs):
                for name, step in variants.items():
                    start = time.perf_counter()
                    got = step()
                    if asyncio.iscoroutine(got):
                        await got
                    samples[name].append((time.perf_counter() - start) * 1000)
            for name in looped:  # then each alone, calls back to back
                for _ in range(runs):
                    start = time.perf_counter()
                    got = variants[name]()
                    if asyncio.iscoroutine(got):
                        await got
                    in_loop[name].append((time.perf_counter() - start) * 1000)

        looped = [name for name in variants if name == "subprocess.run" or (
            name.startswith("ours") and "per-call" not in name)]  # fmt: skip
        in_loop: dict[str, list[float]] = {name: [] for name in looped}
        launchers = Launchers()
        try:
            asyncio.run(measure())
        finally:
            launchers.close()
            kit.close()
    ms = {name: statistics.median(values) for name, values in samples.items()}
    base = ms["subprocess.run"]
    bare = ms.get("bare `bwrap --unshare-all --ro-bind / / true`")
    goals = {
        "ours, unconfined": (base, 3.5, "subprocess.run"),
        "ours, read-only + network false, Landlock": (base, 7.0, "subprocess.run"),
        "ours, same under bwrap": (bare, 1.6, "bare bwrap"),
    }
    rows: list[Row] = []
    for name, value in ms.items():
        note = how.get(name, "")
        if name in goals and goals[name][0]:
            ref, target, ref_name = goals[name]
            ratio = value / ref
            verdict = "met" if ratio <= target else "NOT met"
            note = f"{note}; {ratio:.2f}x {ref_name} (goal ≤ {target}x: {verdict})"
        elif name != "subprocess.run":
            note = f"{note}; {value / base:.2f}x subprocess.run".lstrip("; ")
        rows.append((name, value, "ms", note or "baseline"))
    loop_base = statistics.median(in_loop["subprocess.run"])
    for name, values in in_loop.items():
        value = statistics.median(values)
        rows.append((f"{name}, calls back to back", value, "ms", f"informational: "
                     f"{value / loop_base:.2f}x subprocess.run back to back"))  # fmt: skip
    for name in peers:
        if name not in peers_ok:
            rows.append((name, float("nan"), "ms", "not installed (or cannot run here)"))
    table(f"Launch: running `true` (median of {runs}, interleaved rounds)", rows)


# -- process ---------------------------------------------------------------------------------


def bench_process() -> None:
    """What "no process outlives its call" costs: the reaper (`toolnexus/runtime/reaper.py`) wraps
    every command run without bwrap (no sandbox, and Landlock, whose own launcher it wraps).
    The variants run interleaved, so that the load of a shared machine hits each alike."""
    from toolnexus.runtime.process import _reaper_argv, run_process
    from toolnexus.runtime.sandbox import SandboxPolicy, detect, wrap_command

    runs = 40
    rows: list[Row] = []
    read, write = os.pipe()
    reaper = _reaper_argv(write, 2.0)

    def interleaved(variants: _Variants) -> dict[str, float]:
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(runs):
            for name, (argv, env) in variants.items():
                start = time.perf_counter()
                subprocess.run(argv, env=env, pass_fds=(write,), check=True)
                samples[name].append((time.perf_counter() - start) * 1000)
            os.read(read, 65536)  # the reapers' reports of this round, so the pipe never fills
        return {name: statistics.median(values) for name, values in samples.items()}

    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        variants: _Variants = {
            "plain": (["true"], None),
            "python": ([sys.executable, "-I", "-S", "-c", "pass"], None),
            "reaper": ([*reaper, "true"], None),
        }
        saved = os.environ.get("TOOLNEXUS_SANDBOX_DISABLE")
        os.environ["TOOLNEXUS_SANDBOX_DISABLE"] = "bwrap"
        detect.cache_clear()
        wrapped = None
        try:
            if detect().landlock.available:
                policy = SandboxPolicy(filesystem="workspace-write", network=False)
                wrapped = wrap_command(["true"], policy, workspace=workspace, cwd=workspace)
                variants["landlock"] = (wrapped.argv, wrapped.env)
                variants["both"] = ((*reaper, *wrapped.argv), wrapped.env)
            ms = interleaved(variants)
        finally:
            if saved is None:
                os.environ.pop("TOOLNEXUS_SANDBOX_DISABLE", None)
            else:
                os.environ["TOOLNEXUS_SANDBOX_DISABLE"] = saved
            detect.cache_clear()
            for folder in wrapped.cleanup if wrapped else ():
                shutil.rmtree(folder, ignore_errors=True)
        os.close(write)
        os.close(read)
        base, python = ms["plain"], ms["python"]
        rows += [
            ("`true` (subprocess.run)", base, "ms", "baseline"),
            ("`python -I -S -c pass`", python, "ms", "an isolated interpreter's start-up"),
            (
                "`true` under the reaper",
                ms["reaper"],
                "ms",
                f"overhead **{ms['reaper'] - base:.1f} ms** "
                f"({(ms['reaper'] - base) / (python - base):.2f}x an interpreter's start-up)",
            ),
        ]
        if "landlock" in ms:
            alone, both = ms["landlock"], ms["both"]
            rows += [
                ("`true` under the Landlock launcher", alone, "ms", f"+{alone - base:.1f} ms"),
                (
                    "`true` under the reaper and the Landlock launcher",
                    both,
                    "ms",
                    f"{both - alone:+.1f} ms against the launcher alone (the reaper runs the "
                    "launcher in a fork of itself: one interpreter start-up, not two)",
                ),
            ]

        async def call_ms(argv: list[str], number: int) -> tuple[float, Any]:
            samples, result = [], None
            for _ in range(number):
                start = time.perf_counter()
                result = await run_process(argv, cwd=workspace, timeout=30, max_output=30_000)
                samples.append((time.perf_counter() - start) * 1000)
            return statistics.median(samples), result

        plain, _ = asyncio.run(call_ms(["true"], runs))
        rows.append(("`run_process(['true'])` (reaper included)", plain, "ms", "end to end"))
        leftover, result = asyncio.run(call_ms(["sh", "-c", "sleep 300 & echo started"], 10))
        rows.append(
            (
                "`sh -c 'sleep 300 & echo started'`, timeout 30 s",
                leftover,
                "ms",
                f"answers when sh exits ({result.stopped} process stopped); was: the whole "
                "timeout, then 'timed out'",
            )
        )
    table(f"Processes: the reaper's cost (median of {runs}, interleaved)", rows)


# -- reload ----------------------------------------------------------------------------------


def bench_reload() -> None:
    from toolnexus import create_toolkit

    rounds = 15
    latencies: list[float] = []
    rebuilds: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = write_manifest(folder, 50)
        with create_toolkit(path, watch=True) as kit:
            ready = kit.execute("sh_0", {"path": "."})
            assert not ready.is_error, ready.content
            for i in range(rounds):
                name = f"added_{i}"
                generation = kit.generation
                start = time.perf_counter()
                write_manifest(folder, 50, extra=[name])
                # Poll from this thread as an agent would; the short sleep hands the GIL to the
                # reload (a busy loop would slow it down by holding the interpreter).
                deadline = start + 5
                while kit.get(name) is None:
                    if time.perf_counter() > deadline:
                        raise RuntimeError(f"no reload within 5 s (last: {kit.last_reload})")
                    time.sleep(0.0002)
                result = kit.execute(name, {"path": "."})
                latencies.append((time.perf_counter() - start) * 1000)
                assert not result.is_error, result.content
                assert kit.generation > generation
                event = kit.last_reload
                assert event is not None and event.ok, event
                rebuilds.append(event.duration * 1000)
                time.sleep(0.2)  # let the watcher settle before the next edit
    median = statistics.median(latencies)
    rows: list[Row] = [
        (
            "write of a 50-tool manifest → first call served by the new generation",
            median,
            "ms",
            f"runs {spread(latencies)} ms over {rounds} edits; target ≤ 100 ms",
        ),
        (
            "… of which building and swapping in the generation (`ReloadEvent.duration`)",
            statistics.median(rebuilds),
            "ms",
            f"runs {spread(rebuilds)} ms with {len(sys.modules):,} modules loaded (a reload "
            "scans them all); the rest is the watcher's wait for a quiet moment "
            f"(`debounce_ms` {_default_debounce()})",
        ),
    ]
    table("Hot reload (watch=True, atomic save adding a tool)", rows)


def _default_debounce() -> int:
    import inspect

    from toolnexus import Toolkit

    return int(inspect.signature(Toolkit.watch).parameters["debounce_ms"].default)


# -- shell -----------------------------------------------------------------------------------

_SHELL_COMMANDS = [
    "ls -la",
    "git status --short",
    "grep -rn TODO src | head -20",
    "rg -n --glob '*.py' 'def main' src",
    "find . -name '*.py' -type f -not -path './.git/*'",
    "sed -n '10,40p' src/app.py && wc -l src/app.py",
    "git log --oneline -n 20 -- src",
    "sort -rn -k2 counts.txt | uniq -c | head",
]


def bench_shell() -> None:
    """Cost of `is_known_safe_command` on typical one-line agent commands: cold (a command
    never seen, so neither the grammar's nor the check's cache helps) and repeated."""
    from toolnexus import is_known_safe_command
    from toolnexus.shell import analyze

    rows: list[Row] = []
    cold: list[float] = []
    for command in _SHELL_COMMANDS:
        assert is_known_safe_command(command), command
        serial = iter(range(10**9))

        def fresh(command: str = command, serial: Iterator[int] = serial) -> None:
            # A distinct trailing operand per call: every call parses and checks anew.
            is_known_safe_command(f"{command} x{next(serial)}")

        def parse(command: str = command, serial: Iterator[int] = serial) -> None:
            analyze(f"{command} x{next(serial)}")

        us = median_us(fresh, number=2000)
        cold.append(us)
        label = command.replace("|", "\\|")
        note = f"target ≤ 200 µs; the grammar alone {median_us(parse, number=2000):.0f} µs"
        rows.append((f"cold `{label}`", us, "µs", note))
    rows.append(("cold, median of the commands above", statistics.median(cold), "µs", "≤ 200 µs"))
    rows.append(
        (
            "repeated command (cached)",
            median_us(lambda: is_known_safe_command(_SHELL_COMMANDS[0]), number=20000),
            "µs",
            "approval checks the same command more than once",
        )
    )
    rows.append(_bench_git_approval())
    table("Shell: known-safe check per command", rows)


def _bench_git_approval() -> Row:
    """The builtin shell's whole decision for `git status` in a repository of 500 files: the
    known-safe check, plus reading the repository's config (`git config --list`) and looking
    for nested repositories."""
    from builtin.shell import shell_tools

    (shell,) = [t for t in shell_tools({}) if t.name == "shell"]
    assert shell.approval is not None
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        for i in range(500):
            folder = repo / f"pkg{i % 25}"
            folder.mkdir(exist_ok=True)
            (folder / f"m{i}.py").write_text("x = 1\n")
        decide = shell.approval.decide
        verdict = decide(shell, {"command": "git status"}, repo)
        assert verdict.rule == "known read-only command", verdict
        us = median_us(lambda: decide(shell, {"command": "git status"}, repo), number=20)
    return ("ShellApproval for `git status`, 500-file repository", us / 1000, "ms", "per call")


SECTIONS: dict[str, Callable[[], None]] = {
    "core": bench_core,
    "mcp": bench_mcp,
    "mcp_large": bench_mcp_large,
    "mcp_sandboxed": bench_mcp_sandboxed,
    "manifest": bench_manifest,
    "builtin": bench_builtin,
    "sandbox": bench_sandbox,
    "process": bench_process,
    "launch": bench_launch,
    "reload": bench_reload,
    "shell": bench_shell,
    "langchain": lambda: __import__("integration_langchain").bench(),
    "tracing": lambda: __import__("tracing").bench(),  # benchmarks/tracing.py
    "state": lambda: __import__("state").bench(),  # benchmarks/state.py
    "replicas": lambda: __import__("replicas").bench(),  # benchmarks/replicas.py
    "sessions": lambda: __import__("sessions").bench(),  # benchmarks/sessions.py
    "tool_search": lambda: __import__("tool_search").bench_tool_search(),
    "mcp_auth": lambda: __import__("mcp_auth").bench_mcp_auth(),  # benchmarks/mcp_auth.py
    "mcp_client": lambda: __import__("mcp_client").bench_mcp_client(),
    "frameworks": lambda: __import__("frameworks").bench_frameworks(),  # benchmarks/frameworks.py
    "startup": lambda: __import__("startup").bench_startup(),  # benchmarks/startup.py
    "openapi": lambda: __import__("openapi").bench_openapi(),  # benchmarks/openapi.py
}


def main(argv: list[str]) -> None:
    chosen = argv or list(SECTIONS)
    unknown = [name for name in chosen if name not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")
    print(f"python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} CPUs")
    for name in chosen:
        SECTIONS[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
