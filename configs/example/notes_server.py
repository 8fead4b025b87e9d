"""A small MCP server (stdio) for configs/example.yaml, written with the official SDK."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes", version="1.0")
NOTES: dict[str, str] = {"welcome": "toolnexus turns a YAML manifest into tools."}


@server.tool()
def list_notes() -> list[str]:
    """List the titles of every note."""
    return sorted(NOTES)


@server.tool()
def get_note(title: str) -> str:
    """Read one note by its title."""
    return NOTES.get(title, f"no note titled {title!r}; call list_notes")


@server.tool()
def add_note(title: str, text: str) -> str:
    """Add or replace a note."""
    NOTES[title] = text
    return f"saved {title!r}"


if __name__ == "__main__":
    server.run()
