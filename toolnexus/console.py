"""What the `toolnexus` command writes to a person: colour, aligned tables, live server lines.

Kept apart from `cli.py` (which parses and dispatches) so that every command prints the same
way: colour only on a terminal and never with `NO_COLOR`, tables whose columns line up, and
MCP servers shown as each one finishes starting instead of after the slowest.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import IO, Any

__all__ = ["ServerProgress", "is_terminal", "paint", "server_row", "table"]


def is_terminal(out: IO[str]) -> bool:
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


def paint(text: str, color: str, out: IO[str]) -> str:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR") or not is_terminal(out):
        return text
    return f"\x1b[{color}m{text}\x1b[0m"


def _visible(text: str) -> int:
    """Width on screen: colour escapes take no room."""
    width, i = 0, 0
    while i < len(text):
        if text[i] == "\x1b":
            end = text.find("m", i)
            i = end + 1 if end != -1 else len(text)
            continue
        width += 1
        i += 1
    return width


def table(
    rows: Sequence[Sequence[str]], out: IO[str], *, header: Sequence[str] = (), indent: str = ""
) -> None:
    """Write `rows` with every column as wide as its widest cell; the last column is not padded
    (a long description does not push trailing blanks)."""
    everything = [list(header), *map(list, rows)] if header else [list(r) for r in rows]
    if not everything:
        return
    columns = max(len(r) for r in everything)
    widths = [
        max((_visible(r[c]) for r in everything if c < len(r)), default=0) for c in range(columns)
    ]

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell + " " * (widths[c] - _visible(cell)) if c < len(cells) - 1 else cell
            for c, cell in enumerate(cells)
        ]
        return (indent + "  ".join(padded)).rstrip()

    if header:
        out.write(paint(line([h.upper() for h in header]), "1", out) + "\n")
    for row in everything[1:] if header else everything:
        out.write(line(row) + "\n")


def _seconds(value: Any) -> str:
    return f"{value:.1f}s" if isinstance(value, int | float) else ""


def server_row(info: Mapping[str, Any], out: IO[str]) -> tuple[list[str], bool]:
    """One MCP server as table cells (`mcp`, name, state, time, detail) and whether it is ready:
    the same cells for the live line and for the final table."""
    state = str(info.get("state"))
    good = state == "ready" and not info.get("login")
    if info.get("login"):
        shown = paint(f"login {info['login']}", "33", out)
        detail = str(info.get("reason") or info.get("last_error") or "")
    elif good:
        shown = paint("ok", "32", out)
        count = int(info.get("tool_count", 0))
        detail = f"{count} tool{'' if count == 1 else 's'}"
    else:
        shown = paint(state, "31", out)
        detail = str(info.get("reason") or info.get("last_error") or state)
    return ["mcp", str(info.get("name")), shown, _seconds(info.get("started_in")), detail], good


class ServerProgress(logging.Handler):
    """Shows each MCP server as it finishes starting, from the `mcp_progress` log records that
    `mcp.server.connect_all` writes (they arrive on the toolkit's loop thread).

    On a terminal each server gets its line when it starts (`starting…`), rewritten in place
    when it is ready or failed; elsewhere (a pipe, a CI log) one plain line per server as it
    finishes, so nothing needs a terminal to be read.
    """

    def __init__(self, out: IO[str], *, indent: str = "  ") -> None:
        super().__init__(logging.DEBUG)
        self.out = out
        self.indent = indent
        self.live = is_terminal(out)
        self.shown: dict[str, dict[str, Any]] = {}
        """Servers reported, by name: what the final table need not repeat."""
        self._lines: list[str] = []
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        status = getattr(record, "mcp_progress", None)
        if status is None:
            return
        info: dict[str, Any] = status.to_dict()
        name = str(info["name"])
        with self._guard:
            if info.get("started_in") is None:  # starting
                if self.live:
                    self._lines.append(name)
                    cells = ["mcp", name, paint("starting…", "2", self.out), "", ""]
                    self._write_line(cells)
                return
            self.shown[name] = info
            cells, _ = server_row(info, self.out)
            if self.live and name in self._lines:
                up = len(self._lines) - self._lines.index(name)
                # Up to the server's line, rewrite it, back down to where the cursor was.
                self.out.write(f"\x1b[{up}A\r\x1b[K")
                self._write_line(cells, newline=False)
                self.out.write(f"\x1b[{up}B\r")
            else:
                self._write_line(cells)
            self.out.flush()

    def _write_line(self, cells: Sequence[str], *, newline: bool = True) -> None:
        # Names are padded to a fixed width: rows must line up before all servers are known.
        kind, name, state, seconds, detail = cells
        text = f"{self.indent}{kind} {name:<16} {state}"
        pad = 10 - _visible(state)
        text += " " * max(pad, 1) + f"{seconds:>6}  {detail}"
        self.out.write(text.rstrip() + ("\n" if newline else ""))
        self.out.flush()

    @contextmanager
    def attached(self) -> Iterator[ServerProgress]:
        """Listen to the MCP client's log while the block runs (restored afterwards)."""
        logger = logging.getLogger("toolnexus.mcp")
        before = logger.level
        logger.addHandler(self)
        if logger.getEffectiveLevel() > logging.DEBUG:
            logger.setLevel(logging.DEBUG)
        try:
            yield self
        finally:
            logger.removeHandler(self)
            logger.setLevel(before)
