"""OpenAPI at the scale of real APIs: Stripe's and GitHub's descriptions loaded into tools.

    python benchmarks/run.py openapi
    python benchmarks/openapi.py          # the same section alone

Set-up fetches the two descriptions (the only network this project's code ever uses outside a
tool call) into `benchmarks/.cache/openapi/`, which git ignores: they are never committed. If
a fetch fails the section says so; GitHub's description then comes from npm's
`@octokit/openapi` (the same file, packaged by Octokit) when `npm` can fetch it, and Stripe's
row is measured on a stand-in: GitHub's description written out as YAML, which the table
labels as such.

Peers, in the same run: the YAML parsers (PyYAML's pure-Python `SafeLoader`, its libyaml
`CSafeLoader`, and the libyaml event reader the OpenAPI source uses) and `json.loads`; the
whole load into tools before this change (the tree of `BEFORE`, extracted from git into a
temporary folder: pure-Python `yaml.safe_load` and the old pipeline) and after. Each load
runs in a fresh interpreter with its imports done, so neither side is warmed by the other;
figures are medians of the CPU time of the measured process, with wall-clock time beside them
(the project's machine is shared: under load, wall time is mostly waiting for a core).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "benchmarks" / ".cache" / "openapi"
BEFORE = "a0a8287"
"""The commit before the OpenAPI scale work (issue 14): the old loader and pipeline."""
SOURCES = {
    "stripe.yaml": "https://raw.githubusercontent.com/stripe/openapi/master/openapi/spec3.yaml",
    "github.json": "https://raw.githubusercontent.com/github/rest-api-description/main/"
    "descriptions/api.github.com/api.github.com.json",
}
RUNS = 5

_LOAD = """
import json, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from toolnexus.sources import BuildContext
from toolnexus.sources.openapi import build_openapi_tools
import yaml, httpx  # imports are not the load's business
ctx = BuildContext(workspace=Path({folder!r}), base_dir=Path({folder!r}))
wall, cpu = time.perf_counter(), time.process_time()
tools = build_openapi_tools({{"openapi": {path!r}, "base_url": "https://api.example.com"}}, ctx)
print(json.dumps([time.perf_counter() - wall, time.process_time() - cpu, len(tools)]))
"""

_PARSE = """
import json, sys, time
sys.path.insert(0, {root!r})
import yaml
from toolnexus.sources._spec_text import parse_spec_text
data = open({path!r}, "rb").read()
kind = {kind!r}
wall, cpu = time.perf_counter(), time.process_time()
if kind == "SafeLoader":
    yaml.load(data, Loader=yaml.SafeLoader)
elif kind == "CSafeLoader":
    yaml.load(data, Loader=yaml.CSafeLoader)
elif kind == "json.loads":
    json.loads(data)
else:
    parse_spec_text(data, "bench")
print(json.dumps([time.perf_counter() - wall, time.process_time() - cpu, 0]))
"""

_BOMB = """
import json, sys, time
sys.path.insert(0, {root!r})
from toolnexus.errors import SourceError
from toolnexus.sources._spec_text import MAX_ALIAS_VALUES, parse_spec_text
lines = ["a0: &a0 [" + ",".join(["lol"] * 10) + "]"]
lines += [f"a{{i}}: &a{{i}} [" + ",".join([f"*a{{i - 1}}"] * 10) + "]" for i in range(1, 10)]
text = "\\n".join(lines)
wall, cpu = time.perf_counter(), time.process_time()
try:
    parse_spec_text(text, "bomb")
    raise SystemExit("the alias bomb was not refused")
except SourceError:
    pass
print(json.dumps([time.perf_counter() - wall, time.process_time() - cpu, MAX_ALIAS_VALUES]))
"""


def fetch(notes: list[str]) -> dict[str, tuple[Path, str]]:
    """The descriptions by name: (cached file, how it was obtained)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    found: dict[str, tuple[Path, str]] = {}
    for name, url in SOURCES.items():
        path = CACHE / name
        if path.is_file() and path.stat().st_size:
            found[name] = (path, "")
            continue
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                path.write_bytes(response.read())
            found[name] = (path, "")
        except OSError as exc:
            notes.append(f"fetching {url} failed here: {exc}")
    if "github.json" not in found:
        packaged = _from_npm(notes)
        if packaged is not None:
            found["github.json"] = (packaged, "from npm @octokit/openapi: fetch failed")
    if "stripe.yaml" not in found and "github.json" in found:
        stand_in = CACHE / "github-as-yaml.yaml"
        if not stand_in.is_file():
            import yaml

            document = json.loads(found["github.json"][0].read_bytes())
            dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
            stand_in.write_text(yaml.dump(document, Dumper=dumper, sort_keys=False))
        found["stripe.yaml"] = (stand_in, "STAND-IN: GitHub's as YAML")
        notes.append(
            "Stripe's description could not be fetched: its rows use GitHub's description "
            f"written as YAML ({stand_in.stat().st_size / 1e6:.1f} MB) instead"
        )
    return found


def _from_npm(notes: list[str]) -> Path | None:
    target = CACHE / "github-npm.json"
    if target.is_file():
        return target
    npm = shutil.which("npm")
    if npm is None:
        notes.append("npm is not installed: no GitHub description")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [npm, "pack", "@octokit/openapi", "--silent"],
            check=False,
            cwd=tmp,
            capture_output=True,
            text=True,
        )
        tgz = next(Path(tmp).glob("*.tgz"), None)
        if done.returncode or tgz is None:
            notes.append(f"npm pack @octokit/openapi failed: {done.stderr.strip()[:200]}")
            return None
        with tarfile.open(tgz) as archive:
            member = archive.extractfile("package/generated/api.github.com.json")
            assert member is not None
            target.write_bytes(member.read())
    return target


def before_tree(notes: list[str]) -> Path | None:
    """The `toolnexus` package as it was at `BEFORE`, extracted into a temporary folder."""
    folder = Path(tempfile.mkdtemp(prefix="toolnexus-before-"))
    archive = folder / "before.tar"
    done = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "-o", str(archive), BEFORE, "toolnexus"],
        check=False,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        notes.append(f"the old tree ({BEFORE}) is not in this checkout: {done.stderr.strip()}")
        return None
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    return folder


def _run(code: str) -> tuple[float, float, int]:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=900
    ).stdout
    wall, cpu, count = json.loads(out.strip().splitlines()[-1])
    return wall, cpu, count


def measure(code: str, runs: int) -> tuple[float, float, int]:
    samples = [_run(code) for _ in range(runs)]
    return (
        statistics.median(s[0] for s in samples),
        statistics.median(s[1] for s in samples),
        samples[-1][2],
    )


def measure_pair(
    first: str, second: str, runs: int
) -> tuple[tuple[float, float, int], tuple[float, float, int]]:
    """`measure` of two programs run alternately."""
    pairs = [(_run(first), _run(second)) for _ in range(runs)]

    def median(samples: list[tuple[float, float, int]]) -> tuple[float, float, int]:
        return (
            statistics.median(s[0] for s in samples),
            statistics.median(s[1] for s in samples),
            samples[-1][2],
        )

    return median([a for a, _ in pairs]), median([b for _, b in pairs])


def bench_openapi() -> None:
    import os

    from run import table  # benchmarks/ is on sys.path when run.py runs

    notes: list[str] = []
    specs = fetch(notes)
    old = before_tree(notes)
    rows = []
    targets = {"stripe.yaml": ("Stripe", 1.5), "github.json": ("GitHub", 0.3)}
    load_before = os.getloadavg()[0]
    for name in sorted(specs, reverse=True):  # Stripe first
        path, how = specs[name]
        title, target = targets[name]
        label = f"{title} ({path.stat().st_size / 1e6:.1f} MB{', ' + how if how else ''})"

        def parse(kind: str, runs: int, path: Path = path) -> tuple[float, float, int]:
            return measure(_PARSE.format(root=str(ROOT), path=str(path), kind=kind), runs)

        if name.endswith(".json"):
            ours = parse("ours", RUNS)
            rows.append(
                (f"{label}: parse, json.loads (sniffed)", ours[1], "s", f"wall {ours[0]:.2f} s")
            )
        else:
            ours = parse("ours", RUNS)
            rows.append(
                (f"{label}: parse, libyaml events (ours)", ours[1], "s", f"wall {ours[0]:.2f} s")
            )
            for kind, runs in (("SafeLoader", 1), ("CSafeLoader", 3)):
                peer = parse(kind, runs)
                rows.append(
                    (
                        f"{label}: parse, PyYAML {kind}",
                        peer[1],
                        "s",
                        f"wall {peer[0]:.2f} s; ours is {peer[1] / ours[1]:.1f}x faster",
                    )
                )
        code = _LOAD.format(root=str(ROOT), folder=str(path.parent), path=str(path))
        old_code = _LOAD.format(root=str(old), folder=str(path.parent), path=str(path))
        if old is not None and name.endswith(".json"):
            # interleaved, so a change in the machine's load falls on both sides alike
            after, before = measure_pair(code, old_code, RUNS)
        else:
            after = measure(code, RUNS)
            before = measure(old_code, 1) if old is not None else after
        ratio = ""
        if old is not None:
            rows.append(
                (
                    f"{label}: load into tools, before ({before[2]} tools)",
                    before[1],
                    "s",
                    f"wall {before[0]:.2f} s",
                )
            )
            ratio = f"; {before[1] / after[1]:.1f}x faster than before"
        rows.append(
            (
                f"{label}: load into tools, after ({after[2]} tools)",
                after[1],
                "s",
                f"wall {after[0]:.2f} s; target ≤ {target} s{ratio}",
            )
        )
    bomb = measure(_BOMB.format(root=str(ROOT)), RUNS)
    rows.append(
        (
            'a "billion laughs" YAML (10⁹ values by aliases): refused after',
            bomb[1] * 1000,
            "ms",
            f"wall {bomb[0] * 1000:.0f} ms; at the {bomb[2]:,}th aliased value",
        )
    )
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    table("OpenAPI descriptions into tools (CPU seconds, median)", rows)
    load_after = os.getloadavg()[0]
    print(
        f"\nValues are CPU time of the measured process (medians of {RUNS} fresh processes; one "
        f"for the pure-Python YAML rows); wall time beside. Load average {load_before:.1f} "
        f"before, {load_after:.1f} after: on a busy machine wall time is mostly waiting."
    )
    for note in notes:
        print(f"- {note}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    started = time.perf_counter()
    bench_openapi()
    print(f"\n({time.perf_counter() - started:.0f} s)")
