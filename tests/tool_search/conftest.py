"""Tools shared by the tool-search tests: a small set whose ranking is easy to predict."""

from __future__ import annotations

from toolnexus import tool


@tool
def forecast(city: str) -> str:
    """Weather forecast for a city."""
    return f"sunny in {city}"


@tool
def star_repo(owner: str, repo: str) -> str:
    """Star a repository."""
    return f"starred {owner}/{repo}"


@tool
def hello() -> str:
    """Say hello."""
    return "hello"
