"""Replicas: calls/s through a real nginx in front of 1, 2 and 4 `toolnexus serve --http`
processes, with and without a Redis-backed `rate_limit` (a real `redis-server`), and what Redis
adds to one call end to end. All started here on 127.0.0.1.

    python benchmarks/run.py replicas  # as a section of the benchmarks
    python benchmarks/replicas.py      # alone

The load comes from this process: `CONCURRENCY` requests in flight, each a stateless
`tools/call` POST (no session, so nginx may send any request to any replica, round robin). The
limit is far above what is reached: what is measured is the reservation, never a refusal. The
load generator, nginx, Redis and the replicas share the machine's cores, so calls/s stops
growing once the cores are busy: read the ratios against that (the notes say how many cores).

Paired and interleaved: the deployment without the limit and the one with it run side by side
and take turns (load rounds, latency batches), and each comparison is the median of the
per-turn differences or ratios, so the machine's drift (other programs) hits both alike. Wall
time on a shared machine still moves with its load (each Redis round trip is two more wake-ups
of a process waiting for a core): the table gives the load average before and after, and the
CPU time each call costs the replica and redis-server (from /proc), which moves far less.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import Row, table
from state import _free_port, _start_redis

CONCURRENCY = 16
"""Requests in flight at once from the load generator."""
SECONDS = 3.0
"""How long each load round lasts (after a warm-up)."""
BATCH, ROUNDS = 100, 9
"""One-at-a-time calls per batch, and batches each, for the per-call latency: the replica with
the Redis limit and the one without take turns, so the machine's drift hits both alike."""
LOAD_ROUNDS = 3
"""Load rounds of `SECONDS` each per deployment, taking turns with the other deployment."""

TOOL = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''
MANIFEST = """
version: 1
{middleware}tools:
  - name: add
    python: benchtool:add
"""
LIMIT = "middleware:\n  - rate_limit: {calls: 1000000000, per: 1s}\n"
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}
BODY = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
    b'"params":{"name":"add","arguments":{"a":2,"b":3}}}'
)


def _wait_port(port: int, process: subprocess.Popen[bytes], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"a process did not listen on {port}") from None
            time.sleep(0.05)  # polling a port: there is no event to wait on


@contextmanager
def _process(argv: list[str], cwd: Path, port: int, env: dict[str, str]) -> Iterator[int]:
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_port(port, process)
        yield process.pid
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


def _nginx_conf(root: Path, listen: int, ports: list[int]) -> str:
    servers = "".join(f"server 127.0.0.1:{port}; " for port in ports)
    return f"""
pid {root}/nginx.pid;
error_log {root}/error.log;
worker_processes 1;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {root}/body;
  proxy_temp_path {root}/proxy;
  # Idle upstream connections closed before uvicorn's own 5 s keep-alive ends them: a request
  # sent on a connection the replica is closing is a 502 (a POST is not retried elsewhere).
  upstream replicas {{ {servers} keepalive 64; keepalive_timeout 4s; }}
  server {{
    listen 127.0.0.1:{listen};
    location / {{
      proxy_pass http://replicas;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_buffering off;
    }}
  }}
}}
"""


@contextmanager
def _replicated(folder: Path, count: int, state: str | None) -> Iterator[tuple[str, list[int]]]:
    """`count` stateless replicas serving `folder/tools.yaml` behind nginx; yields the URL and
    the replicas' process ids."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLNEXUS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(Path(__file__).resolve().parents[1])])
    ports = [_free_port() for _ in range(count)]
    listen = _free_port()
    pids: list[int] = []
    with ExitStack() as stack:
        for port in ports:
            argv = [sys.executable, "-m", "toolnexus", "serve", str(folder / "tools.yaml")]
            argv += ["--http", f"127.0.0.1:{port}", "--stateless"]
            argv += ["--state", state] if state else []
            pids.append(stack.enter_context(_process(argv, folder, port, env)))
        root = folder / f"nginx-{listen}"
        root.mkdir()
        conf = root / "nginx.conf"
        conf.write_text(_nginx_conf(root, listen, ports))
        argv = [nginx, "-p", str(root), "-c", str(conf), "-g", "daemon off;"]
        stack.enter_context(_process(argv, root, listen, env))
        yield f"http://127.0.0.1:{listen}/mcp", pids


async def _call(http: object, url: str) -> None:
    response = await http.post(url, content=BODY, headers=HEADERS)  # type: ignore[attr-defined]
    if response.status_code != 200 or b'"isError":true' in response.content:
        raise SystemExit(f"a call failed: {response.status_code} {response.content[:300]!r}")
    if b'"result"' not in response.content:
        raise SystemExit(f"no result: {response.content[:300]!r}")


async def _ready(http: object, url: str) -> None:
    """Return once `url` answers a call (a replica answers once its toolkit is built), warmed
    up on every replica's path."""
    import httpx2

    deadline = time.monotonic() + 90
    while True:
        try:
            await _call(http, url)
            break
        except (httpx2.HTTPError, SystemExit):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
    for _ in range(200):
        await _call(http, url)


async def _rate(http: object, url: str) -> float:
    """Calls/s with `CONCURRENCY` in flight for `SECONDS`."""
    done = 0
    stop = time.monotonic() + SECONDS

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < stop:
            await _call(http, url)
            done += 1

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return done / (time.monotonic() - started)


async def _paired_load(urls: dict[bool, str]) -> dict[bool, list[float]]:
    """Calls/s of each deployment (False: no limit, True: the Redis limit), in `LOAD_ROUNDS`
    rounds each, taking turns."""
    import httpx2

    limits = httpx2.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    rates: dict[bool, list[float]] = {key: [] for key in urls}
    async with httpx2.AsyncClient(timeout=60, limits=limits) as http:
        for url in urls.values():
            await _ready(http, url)
        for _ in range(LOAD_ROUNDS):
            for key, url in urls.items():
                rates[key].append(await _rate(http, url))
    return rates


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (/proc/PID/stat), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _scripts_run(client: object) -> int:
    """Rate-limit scripts Redis has run (EVALSHA, and EVAL when its cache was empty)."""
    stats = client.info("commandstats")  # type: ignore[attr-defined]
    return sum(stats.get(name, {}).get("calls", 0) for name in ("cmdstat_evalsha", "cmdstat_eval"))


@dataclass
class _Latency:
    """Per-call figures of one call at a time, per deployment, one entry per round."""

    wall_ms: dict[bool | str, list[float]]
    """Wall time per call (ms); "ping" is a bare Redis PING from this process."""
    replica_cpu_us: dict[bool, float]
    """CPU time per call of the replica serving it (µs), over every round: /proc counts in
    clock ticks (10 ms), so one batch alone would be too coarse."""
    redis_cpu_us: dict[bool, float]
    """CPU time per call of redis-server (µs), over every round."""
    scripts_per_call: float
    """Scripts Redis ran per rate-limited call: its round trips."""


async def _latency(
    urls: dict[bool, str], pids: dict[bool, int], redis_url: str, redis_pid: int
) -> _Latency:
    """One call at a time, per deployment, in alternating batches; between them a batch of
    bare Redis PINGs from this process (one round trip to another process, now)."""
    import httpx2
    import redis
    import redis.asyncio

    wall: dict[bool | str, list[float]] = {key: [] for key in [*urls, "ping"]}
    cpu = {key: 0.0 for key in urls}
    redis_cpu = {key: 0.0 for key in urls}
    store = redis.asyncio.Redis.from_url(redis_url)
    counter = redis.Redis.from_url(redis_url)
    scripts = calls = 0
    async with httpx2.AsyncClient(timeout=60) as http:
        for url in urls.values():
            await _ready(http, url)
        for _ in range(ROUNDS):
            for key, url in urls.items():
                ran = _scripts_run(counter)
                used, redis_used = _cpu_seconds(pids[key]), _cpu_seconds(redis_pid)
                begin = time.perf_counter()
                for _ in range(BATCH):
                    await _call(http, url)
                wall[key].append((time.perf_counter() - begin) / BATCH * 1e3)
                cpu[key] += _cpu_seconds(pids[key]) - used
                redis_cpu[key] += _cpu_seconds(redis_pid) - redis_used
                if key:
                    scripts += _scripts_run(counter) - ran
                    calls += BATCH
            begin = time.perf_counter()
            for _ in range(BATCH):
                await store.ping()
            wall["ping"].append((time.perf_counter() - begin) / BATCH * 1e3)
    await store.aclose()
    counter.close()
    per_call = 1e6 / (ROUNDS * BATCH)
    return _Latency(
        wall_ms=wall,
        replica_cpu_us={key: used * per_call for key, used in cpu.items()},
        redis_cpu_us={key: used * per_call for key, used in redis_cpu.items()},
        scripts_per_call=scripts / calls,
    )


def _spread(values: list[float], digits: int = 0) -> str:
    return f"{min(values):.{digits}f}–{max(values):.{digits}f}"


def _load() -> str:
    return "/".join(f"{figure:.1f}" for figure in os.getloadavg())


def bench() -> None:
    """Print the section's table."""
    for program in ("redis-server", "nginx"):
        if shutil.which(program) is None and not Path(f"/usr/sbin/{program}").exists():
            raise SystemExit(f"the replicas benchmark needs {program} (apt-get install it)")
    rates: dict[int, dict[bool, list[float]]] = {}
    load_before = _load()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        redis, url = _start_redis(tmp)
        try:
            folders = {}
            for limited in (False, True):
                folder = folders[limited] = base / ("limited" if limited else "plain")
                folder.mkdir()
                (folder / "benchtool.py").write_text(TOOL)
                text = MANIFEST.format(middleware=LIMIT if limited else "")
                (folder / "tools.yaml").write_text(text)
            for count in (1, 2, 4):
                with (
                    _replicated(folders[False], count, None) as (plain, _),
                    _replicated(folders[True], count, url) as (limited_url, _),
                ):
                    rates[count] = asyncio.run(_paired_load({False: plain, True: limited_url}))
            with (
                _replicated(folders[False], 1, None) as (plain, plain_pids),
                _replicated(folders[True], 1, url) as (limited_url, limited_pids),
            ):
                latency = asyncio.run(
                    _latency(
                        {False: plain, True: limited_url},
                        {False: plain_pids[0], True: limited_pids[0]},
                        url,
                        redis.pid,
                    )
                )
        finally:
            redis.kill()
            redis.wait(timeout=15)
    load_after = _load()
    cores = os.cpu_count() or 1
    rows: list[Row] = []
    median = statistics.median
    for limited in (False, True):
        what = "Redis `rate_limit`" if limited else "no limit"
        for count in (1, 2, 4):
            rate = median(rates[count][limited])
            note = f"{rate / median(rates[1][limited]):.2f}× one replica"
            if limited:
                pairs = zip(rates[count][True], rates[count][False], strict=True)
                ratios = [a / b for a, b in pairs]
                note += (
                    f"; {median(ratios):.2f}× without the limit (median of {LOAD_ROUNDS} paired "
                    f"rounds, {_spread(ratios, 2)})"
                )
            rows.append((f"calls/s, {count} replica{'s' * (count > 1)}, {what}", rate, "/s", note))
    wall = latency.wall_ms
    added = [(b - a) * 1e3 for a, b in zip(wall[False], wall[True], strict=True)]
    cpu = latency.replica_cpu_us
    rows += [
        (
            "one call at a time through nginx, 1 replica, no limit",
            median(wall[False]),
            "ms",
            f"median of {ROUNDS} batches of {BATCH}, taking turns with the next row",
        ),
        (
            "the same with the Redis `rate_limit`",
            median(wall[True]),
            "ms",
            f"Redis adds {median(added):.0f} µs per call end to end (median of {ROUNDS} paired "
            f"differences, {_spread(added)} µs); target ≤ 500 µs",
        ),
        (
            "replica CPU per call, no limit",
            cpu[False],
            "µs",
            f"user + system time of the serving process (/proc), over the {ROUNDS} batches",
        ),
        (
            "replica CPU per call, Redis `rate_limit`",
            cpu[True],
            "µs",
            f"the limit with its Redis round trip costs the replica {cpu[True] - cpu[False]:.0f} "
            "µs of CPU per call",
        ),
        (
            "redis-server CPU per rate-limited call",
            latency.redis_cpu_us[True],
            "µs",
            f"Redis ran {latency.scripts_per_call:.2f} scripts per call (EVALSHA: one round trip)",
        ),
        (
            "a bare Redis PING from the load generator, in the same turns",
            median(wall["ping"]),
            "ms",
            "informational: one round trip to another process on this machine now",
        ),
    ]
    table(
        f"Replicas behind nginx: calls/s with 1, 2 and 4 `serve --http` ({cores} cores, "
        f"{CONCURRENCY} in flight, load generator on the same machine; load average "
        f"{load_before} before, {load_after} after)",
        rows,
    )


if __name__ == "__main__":
    bench()
