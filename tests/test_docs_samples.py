"""Every code sample of the docs and the README runs, and every manifest sample loads.

A `python` block runs in a fresh namespace with a temporary working folder. Two HTML comments on
the line before a block change that (docs/development.md explains them to writers):

- `<!-- sample-setup: NAME -->`: `SETUPS[NAME]` runs first; it writes the files the sample opens
  (`tools.yaml`) and defines what the sample takes as given (a `toolkit`, a `model`).
- `<!-- not-run: REASON -->`: the block is only compiled. For samples that call a real
  provider's API, or that another test runs with a scripted model (the reason names the test).

A `js` block (the TypeScript SDK's client) runs with Node as an ES module, against the server its
`served` setup starts: its URL is the one the docs show, swapped for the real port, and the token
is in `$TOOLNEXUS_TOKEN`, as the sample reads it.

A `yaml` block holding `version: 1` is a whole manifest: it must load, with the files it includes
stubbed and its `${VAR}`s set.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolnexus import ToolContext, Toolkit, load_manifest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKER = re.compile(r"^<!-- (sample-setup|not-run): (.+?) -->$")
MAX_NOT_RUN = 4
"""Exemptions are few on purpose: raise this only with a reason in the marker."""


@dataclass(frozen=True, kw_only=True)
class Sample:
    page: Path
    line: int
    lang: str
    code: str
    marker: str | None = None
    argument: str | None = None

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def samples() -> list[Sample]:
    """Every fenced block of the pages, with the marker on the line before it, if any."""
    found = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            fence = re.match(r"^```(\w*)\s*$", lines[i])
            if not fence:
                i += 1
                continue
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            marker = MARKER.match(lines[i - 1]) if i > 0 else None
            found.append(
                Sample(
                    page=page,
                    line=i + 1,
                    lang=fence.group(1),
                    code="\n".join(lines[i + 1 : end]) + "\n",
                    marker=marker.group(1) if marker else None,
                    argument=marker.group(2) if marker else None,
                )
            )
            i = end + 1
    return found


PYTHON = [s for s in samples() if s.lang == "python"]
MANIFESTS = [s for s in samples() if s.lang == "yaml" and re.search(r"^version: 1\b", s.code, re.M)]
SCRIPTS = [s for s in samples() if s.lang == "js"]
DOCS_URL = "http://127.0.0.1:8000/mcp"
"""The endpoint the docs show for `serve --http 127.0.0.1:8000`; a `js` sample connects to it."""


# -- what samples take as given --------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    path.write_text(inspect.cleandoc(text) + "\n", encoding="utf-8")


def _approval(tmp: Path) -> dict[str, Any]:
    from toolnexus import ApprovalRequest, create_toolkit

    _write(
        tmp / "tools.yaml", 'version: 1\nbuiltins: [write]\npermissions: {ask: ["write(src/**)"]}'
    )
    return {"ApprovalRequest": ApprovalRequest, "create_toolkit": create_toolkit}


def _manifest(tmp: Path) -> dict[str, Any]:
    from toolnexus import create_toolkit

    _write(tmp / "tools.yaml", "version: 1\nbuiltins: [read]")
    return {"create_toolkit": create_toolkit}


def _toolkit(tmp: Path) -> dict[str, Any]:
    from toolnexus import create_toolkit

    return {"toolkit": create_toolkit(builtins=["read", "grep"], workspace=tmp)}


def _pydantic_ai(tmp: Path) -> dict[str, Any]:
    from pydantic_ai.models.test import TestModel

    return {**_toolkit(tmp), "model": TestModel()}


def _openai_agents(tmp: Path) -> dict[str, Any]:
    # Building an Agent with a model name contacts nothing; only a run would.
    return {**_toolkit(tmp), "model": "gpt-4.1"}


def _progress(tmp: Path) -> dict[str, Any]:
    from toolnexus import Progress, create_toolkit, tool

    @tool
    async def render(scene: str, ctx: ToolContext) -> str:
        """Render a scene.

        Args:
            scene: The scene.
        """
        await ctx.report_progress(1, 1, f"rendered {scene}")
        return "ok"

    toolkit = create_toolkit(extra_tools=[render], workspace=tmp)
    return {"toolkit": toolkit, "Progress": Progress, "ToolContext": ToolContext, "tool": tool}


def _questions(tmp: Path) -> dict[str, Any]:
    from toolnexus import ServerRequest, create_toolkit

    (tmp / "deploytools.py").write_text(
        'def deploy() -> str:\n    """Deploy."""\n    return "deployed"\n', encoding="utf-8"
    )
    _write(tmp / "tools.yaml", "version: 1\ntools:\n  - {name: deploy, python: deploytools:deploy}")

    def other(request: ServerRequest) -> None:
        return None

    return {"ServerRequest": ServerRequest, "create_toolkit": create_toolkit, "other": other}


def _served(tmp: Path) -> dict[str, Any]:
    """`toolnexus serve tools.yaml --http --token` running: the sample is given its `url` and
    `token` (the process is stopped after the sample, as toolkits are closed)."""
    import os
    import secrets
    import subprocess
    import sys

    from .conftest import free_port, wait_for_port

    _write(tmp / "tools.yaml", "version: 1\ntools:\n  - {name: hello, command: [echo, hello]}")
    token = secrets.token_urlsafe(16)
    # A port found free is bound by the server a moment later, and another process may take it
    # in between: the server then exits saying so, and only then is another port tried. Any
    # other failure raises with what the server said (CI once saw it exit with code 2, unread).
    for attempt in range(3):
        port = free_port()
        log = tmp / f"serve-{attempt}.log"  # a file, not a pipe: nobody reads it while it runs
        with log.open("wb") as err:
            served = subprocess.Popen(
                [sys.executable, "-m", "toolnexus", "serve", "tools.yaml", "--http",
                 f"127.0.0.1:{port}", "--token", token],
                cwd=tmp,
                env={k: v for k, v in os.environ.items() if not k.startswith("TOOLNEXUS_")},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )  # fmt: skip
        try:
            wait_for_port(port, served, 60.0)
            break
        except RuntimeError as exc:
            served.kill()
            served.wait(timeout=15)
            said = log.read_text(errors="replace")
            if attempt == 2 or "address already in use" not in said.lower():
                raise RuntimeError(f"{exc} (exit {served.returncode}): {said[-2000:]}") from exc
        except BaseException:
            served.kill()
            served.wait(timeout=15)
            raise
    return {"url": f"http://127.0.0.1:{port}/mcp", "token": token, "_served": served}


SETUPS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "approval": _approval,
    "manifest": _manifest,
    "pydantic-ai": _pydantic_ai,
    "openai-agents": _openai_agents,
    "progress": _progress,
    "questions": _questions,
    "served": _served,
}


# -- the tests -------------------------------------------------------------------------------------


def _run(code: str, namespace: dict[str, Any], filename: str) -> None:
    compiled = compile(code, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, namespace))
    else:
        exec(compiled, namespace)


@pytest.mark.parametrize("sample", PYTHON, ids=[s.id for s in PYTHON])
def test_every_python_sample_runs(
    sample: Sample, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if sample.marker == "not-run":
        compile(sample.code, sample.id, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__docs_sample__"}
    if sample.marker == "sample-setup":
        assert sample.argument in SETUPS, f"{sample.id}: no setup {sample.argument!r}"
        namespace.update(SETUPS[sample.argument](tmp_path))
    try:
        _run(sample.code, namespace, sample.id)
    finally:
        for value in namespace.values():
            if isinstance(value, Toolkit):
                value.close()
            if isinstance(value, subprocess.Popen):
                value.terminate()
                value.wait(timeout=15)


def test_exemptions_are_few_and_say_why() -> None:
    exempt = [s for s in PYTHON if s.marker == "not-run"]
    assert len(exempt) <= MAX_NOT_RUN, [s.id for s in exempt]
    for sample in exempt:
        reason = sample.argument or ""
        assert len(reason.split()) >= 4, f"{sample.id}: say why it does not run"
        # A sample run by another test names it, and that test exists.
        for test in re.findall(r"tests/[\w/]+\.py::\w+", reason):
            path, name = test.split("::")
            assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), test


def test_the_samples_are_found() -> None:
    # The parser cannot silently find nothing: the pages hold runnable samples and manifests.
    assert len([s for s in PYTHON if s.marker != "not-run"]) >= 8
    assert len(MANIFESTS) >= 3
    assert len(SCRIPTS) >= 1
    assert all(s.marker in (None, "sample-setup", "not-run") for s in samples())


@pytest.mark.parametrize("sample", MANIFESTS, ids=[s.id for s in MANIFESTS])
def test_every_manifest_sample_loads(sample: Sample, tmp_path: Path) -> None:
    data = yaml.safe_load(sample.code)
    # The files it names are stubbed: this checks the manifest, not the files around it.
    for entry in data.get("include") or []:
        path = entry if isinstance(entry, str) else entry["path"]
        if not path.startswith(("package:", "toolset:")):
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text("version: 1\n", encoding="utf-8")
    servers = data.get("mcp_servers") or {}
    for path in [servers["from"]] if isinstance(servers.get("from"), str) else []:
        (tmp_path / path).write_text('{"mcpServers": {}}', encoding="utf-8")
    for entry in data.get("tools") or []:
        if "openapi" in entry:
            (tmp_path / entry["openapi"]).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / entry["openapi"]).write_text("{}", encoding="utf-8")
    env = {name: f"value-of-{name}" for name in re.findall(r"\$\{(\w+)", sample.code)}
    (tmp_path / "tools.yaml").write_text(sample.code, encoding="utf-8")
    manifest = load_manifest(tmp_path / "tools.yaml", env=env)
    assert manifest.version == 1


@pytest.mark.parametrize("sample", SCRIPTS, ids=[s.id for s in SCRIPTS])
def test_every_js_sample_runs_against_a_served_toolkit(sample: Sample, tmp_path: Path) -> None:
    import os

    from .serve.oidc import FOLDER, node_or_skip

    assert (sample.marker, sample.argument) == ("sample-setup", "served"), sample.id
    assert DOCS_URL in sample.code, f"{sample.id}: connect to {DOCS_URL}, as the page says"
    node = node_or_skip()
    (tmp_path / "node_modules").symlink_to(FOLDER / "node_modules")
    given = SETUPS["served"](tmp_path)
    served: subprocess.Popen[bytes] = given["_served"]
    try:
        (tmp_path / "sample.mjs").write_text(sample.code.replace(DOCS_URL, given["url"]))
        # A sample that never exits (a client left open keeps Node running) fails by timeout.
        done = subprocess.run(
            [node, "sample.mjs"],
            check=False,
            cwd=tmp_path,
            env={**os.environ, "TOOLNEXUS_TOKEN": given["token"]},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        served.terminate()
        served.wait(timeout=15)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[ 'hello' ]", done.stdout
