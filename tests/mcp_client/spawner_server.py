"""An MCPServer (stdio) whose tools show where it runs and what it leaves behind: its own pid,
a detached child that escapes its process group (`setsid`, as a daemon does), and a file
write (refused outside what its sandbox allows). `--data PATH` creates PATH at start-up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("spawner")


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def escape(seconds: str) -> int:
    """Start `sleep SECONDS` in a session of its own (out of this server's process group, as
    a daemon does) and return its pid; SECONDS makes it easy to find from outside."""
    child = subprocess.Popen(
        ["sleep", seconds],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return child.pid


@server.tool()
def crash() -> str:
    """Exit at once, without answering (as a crashing server does)."""
    os._exit(3)


@server.tool()
def write(path: str, text: str) -> str:
    """Write `text` to `path`."""
    try:
        Path(path).write_text(text)
    except OSError as exc:
        return f"write failed: {exc}"
    return "written"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--data":
        # Its data file, created at start-up (a traceback on stderr when that is refused).
        Path(sys.argv[2]).write_text("")
    server.run()
