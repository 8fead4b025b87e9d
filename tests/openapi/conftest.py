"""Shared pieces of the OpenAPI tests: a recording API server on 127.0.0.1 and a builder."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from toolnexus.base import Result, Tool
from toolnexus.executor import Executor
from toolnexus.registry import Registry
from toolnexus.sources import BuildContext
from toolnexus.sources.openapi import build_openapi_tools

from ..conftest import QuietHandler, start_http_server, stop_http_server


@dataclass
class Api:
    """A server that answers every request with what it received, and keeps a log of it."""

    url: str
    seen: list[dict[str, str]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    """Served as they are under `/files/NAME` (descriptions fetched over HTTP)."""
    headers: list[dict[str, str]] = field(default_factory=list)
    """The headers of each request in `seen` (lower-case names)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture
def api() -> Iterator[Api]:
    state: list[Api] = []

    class Handler(QuietHandler):
        def _any(self) -> None:
            server = state[0]
            path, _, query = self.path.partition("?")
            if path.startswith("/files/"):
                with server.lock:  # logged before answering: the test reads the log next
                    server.seen.append({"method": self.command, "path": path, "query": query})
                body = server.files.get(path[len("/files/") :])
                if body is None:
                    self.send(404, "text/plain", b"no such file")
                else:
                    self.send(200, "application/yaml", body)
                return
            length = int(self.headers.get("Content-Length") or 0)
            body_text = self.rfile.read(length).decode() if length else ""
            record = {"method": self.command, "path": path, "query": query, "body": body_text}
            with server.lock:
                server.seen.append(record)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
            self.send(200, "application/json", json.dumps(record).encode())

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

    httpd = start_http_server(Handler)
    state.append(Api(url=f"http://127.0.0.1:{httpd.server_address[1]}"))
    try:
        yield state[0]
    finally:
        stop_http_server(httpd)


def build(entry: dict[str, Any], base_dir: Path) -> dict[str, Tool]:
    ctx = BuildContext(workspace=base_dir, base_dir=base_dir, origin="tools.yaml:3")
    return {tool.name: tool for tool in build_openapi_tools(entry, ctx)}


async def call(tool: Tool, **args: Any) -> Result:
    """The call as an agent makes it: through an executor, which validates the arguments and
    turns every failure into an error result."""
    executor = Executor(Registry([tool]), approver=lambda *_: True, workspace=Path.cwd())
    return await executor.execute(tool.name, args)


def write_spec(folder: Path, doc: dict[str, Any], name: str = "api.json") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def spec(paths: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": paths, **extra}
