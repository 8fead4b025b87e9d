"""glob and grep on real trees in tmp_path, through `Tool.run`: the rg engine and the pure Python
fallback must give identical results, and both follow ripgrep's rules."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from builtin.search import search_tools
from toolnexus import ConfigError, SandboxPolicy, Tool, ToolContext, ToolError

pytestmark = pytest.mark.anyio

ENGINES = ("rg", "python")


def kit(**options: Any) -> dict[str, Tool]:
    return {t.name: t for t in search_tools(options)}


def ctx_for(ws: Path, tool: Tool, sandbox: SandboxPolicy | None = None) -> ToolContext:
    return ToolContext(
        call_id="c1", tool_name=tool.name, workspace=ws, roots=(ws,), sandbox=sandbox
    )


async def run(ws: Path, tool: Tool, **args: Any) -> str:
    result = await tool.run(args, ctx_for(ws, tool))
    assert not result.is_error
    return result.content


def write(ws: Path, rel: str, data: str | bytes, mtime: int | None = None) -> Path:
    path = ws / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A workspace outside any git repository, with every kind of file the rules care about."""
    ws = tmp_path / "ws"
    write(ws, ".gitignore", "*.log\nbuild/\n!keep.log\nsub/local.txt\n")
    write(ws, ".ignore", "by_dot_ignore.txt\n")
    write(ws, "a.py", "import os\n\ndef hello():\n    return 'hello world'\n", mtime=1_000_005)
    write(ws, "b.txt", "Hello there\nsecond line\nthird hello\n", mtime=1_000_004)
    write(ws, "keep.log", "hello from a kept log\n", mtime=1_000_003)
    write(ws, "drop.log", "hello from an ignored log\n")
    write(ws, "by_dot_ignore.txt", "hello\n")
    write(ws, "build/gen.py", "hello = 1\n")
    write(ws, ".hidden/h.py", "print('hello')\n", mtime=1_000_002)
    write(ws, ".git/config", "hello in git internals\n")
    write(ws, "sub/.gitignore", "*.tmp\n/anchored.py\n")
    write(ws, "sub/anchored.py", "hello\n")
    write(ws, "sub/deep/anchored.py", "x = 'hello'\n", mtime=1_000_001)
    write(ws, "sub/x.tmp", "hello\n")
    write(ws, "sub/local.txt", "hello\n")
    write(ws, "sub/notes.md", "# Title\nfn main() {\n  hello();\n}\nend\n", mtime=1_000_000)
    write(ws, "sub/crlf.txt", "hello\r\nbye\r\n", mtime=999_999)
    write(ws, "bin.dat", b"hello\x00binary")
    write(ws, "latin.txt", b"caf\xe9 hello\n", mtime=999_998)
    (ws / "link.py").symlink_to(ws / "a.py")
    os.mkfifo(ws / "pipe.py")
    return ws


async def both(ws: Path, name: str, **args: Any) -> str:
    """The result of `name(**args)` with both engines, checked identical."""
    outs = []
    for engine in ENGINES:
        tool = kit(engine=engine)[name]
        assert tool.meta["engine"] == engine
        outs.append(await run(ws, tool, **args))
    assert outs[0] == outs[1], f"rg:\n{outs[0]}\n\npython:\n{outs[1]}"
    return outs[0]


# --- glob -----------------------------------------------------------------------------------


async def test_glob_lists_newest_first_and_respects_ignore_files_outside_git(tree: Path) -> None:
    out = await both(tree, "glob", pattern="**/*.py")
    # build/ and sub/anchored.py are ignored, .git is skipped, the symlink and the FIFO are not
    # regular files; hidden files are included.
    assert out.splitlines() == ["a.py", ".hidden/h.py", "sub/deep/anchored.py"]


async def test_glob_braces_and_folder_prefix(tree: Path) -> None:
    out = await both(tree, "glob", pattern="**/*.{md,txt}")
    assert out.splitlines() == ["b.txt", "sub/notes.md", "sub/crlf.txt", "latin.txt"]
    assert await both(tree, "glob", pattern="sub/*.md") == "sub/notes.md"
    assert await both(tree, "glob", pattern="*.md", path="sub") == "sub/notes.md"
    absolute = await both(tree, "glob", pattern=f"{tree}/sub/**/*.py")
    assert absolute == "sub/deep/anchored.py"


async def test_glob_never_lists_ignored_files_even_when_named(tree: Path) -> None:
    assert await both(tree, "glob", pattern="*.log") == "keep.log"
    assert await both(tree, "glob", pattern="sub/**/*.py") == "sub/deep/anchored.py"


async def test_ignore_rules_above_the_root_apply_only_to_the_paths_themselves(
    tree: Path,
) -> None:
    # As ripgrep: a parent folder's .gitignore that ignores the workspace's own folder (or one
    # of its ancestors) does not hide the files of a search started inside it.
    write(tree.parent, ".gitignore", "/ws\n*.md\n")
    assert await both(tree, "glob", pattern="**/*.py") == "a.py\n.hidden/h.py\nsub/deep/anchored.py"
    assert "notes.md" not in await both(tree, "grep", pattern="hello")
    assert await both(tree, "glob", pattern="sub") == "No files found."


async def test_glob_caps_results_and_says_so(tree: Path) -> None:
    for engine in ENGINES:
        out = await run(tree, kit(engine=engine, max_results=2)["glob"], pattern="**/*.py")
        lines = out.splitlines()
        assert lines[:2] == ["a.py", ".hidden/h.py"]
        assert "Showing the 2 most recently modified of 3 files" in lines[2]
        assert "Narrow the pattern" in lines[2]


async def test_glob_orders_and_counts_a_listing_read_in_pieces(tmp_path: Path) -> None:
    # rg flushes whole names; behind a pipe that passes 997 bytes at a time, the names arrive
    # cut across reads, as they can when the pipe fills. A third of the files share one mtime,
    # so the order among them is the tie-break (by path), the same in every engine.
    rg = shutil.which("rg", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    assert rg is not None
    chopped = write(
        tmp_path,
        "chopped-rg",
        f'#!/bin/bash\nset -o pipefail\n"{rg}" "$@" | dd bs=997 iflag=fullblock status=none\n',
    )
    chopped.chmod(0o755)
    ws = tmp_path / "ws"
    stem = "n" * 120
    for i in range(2400):
        write(ws, f"d{i % 7}/{stem}{i:04d}.py", "", mtime=1_000_000 if i % 3 else 2_000_000 + i)
    write(ws, "d0/ignored.py", "")
    write(ws, ".gitignore", "ignored.py\n")
    outs = []
    for options in ({"engine": "python"}, {"engine": "rg"}, {"rg_path": str(chopped)}):
        tool = kit(**options, max_results=900, max_output_chars=200_000)["glob"]
        result = await tool.run({"pattern": "**/*.py"}, ctx_for(ws, tool))
        assert result.metadata["total"] == 2400
        assert result.metadata["truncated"]
        outs.append(result.content)
    assert outs[0] == outs[1] == outs[2]
    lines = outs[0].splitlines()
    newest = [f"d{i % 7}/{stem}{i:04d}.py" for i in reversed(range(0, 2400, 3))]
    ties = sorted(f"d{i % 7}/{stem}{i:04d}.py" for i in range(2400) if i % 3)
    assert lines[:900] == [*newest, *ties[:100]]
    assert "Showing the 900 most recently modified of 2400 files" in lines[900]


async def test_glob_refuses_paths_outside_the_workspace(tree: Path) -> None:
    glob = kit()["glob"]
    with pytest.raises(ToolError, match="outside the workspace"):
        await run(tree, glob, pattern="*.py", path="..")
    with pytest.raises(ToolError, match="outside the workspace"):
        await run(tree, glob, pattern="/etc/*.conf")
    with pytest.raises(ToolError, match="does not exist"):
        await run(tree, glob, pattern="*.py", path="nope")


async def test_glob_reports_no_match(tree: Path) -> None:
    assert await both(tree, "glob", pattern="**/*.rs") == "No files found."


# --- grep: both engines agree -----------------------------------------------------------------

AGREEMENT = [
    {"pattern": "hello"},
    {"pattern": "hello", "output_mode": "count"},
    {"pattern": "hello", "output_mode": "content"},
    {"pattern": "hello", "output_mode": "content", "line_numbers": False},
    {"pattern": "HELLO", "case_insensitive": True, "output_mode": "content"},
    {"pattern": "hello", "output_mode": "content", "context": 1},
    {"pattern": "line", "output_mode": "content", "before": 1},
    {"pattern": "Hello", "output_mode": "content", "after": 2},
    {"pattern": "hello", "glob": "*.py", "output_mode": "content"},
    {"pattern": "hello", "glob": "!*.py"},
    {"pattern": "hello", "glob": "*.{md,txt}", "output_mode": "count"},
    {"pattern": "hello", "glob": "*.log"},
    {"pattern": "hello", "type": "py", "output_mode": "count"},
    {"pattern": "hello", "path": "sub", "output_mode": "content"},
    {"pattern": "hello", "path": "b.txt", "output_mode": "content", "after": 1},
    {"pattern": r"^\s+return", "output_mode": "content"},
    {"pattern": r"bye$", "output_mode": "content"},
    {"pattern": r"caf", "output_mode": "content"},
    {"pattern": r"main\(\) \{.*?\}", "multiline": True, "output_mode": "content"},
    {"pattern": r"main.*end", "multiline": True, "output_mode": "count"},
    {"pattern": r"e", "multiline": True, "output_mode": "count"},
    {"pattern": r"l+", "multiline": True, "output_mode": "count"},
    {"pattern": r"l\s?", "multiline": True, "output_mode": "count"},
    {"pattern": r"[^x]e", "multiline": True, "output_mode": "count"},
    {"pattern": r"(?:o|\W)\w", "multiline": True, "output_mode": "count"},
    {"pattern": r"o\(\);\n\}|hello", "multiline": True, "output_mode": "count"},
    {"pattern": r"def hello\(\):\s+return", "multiline": True},
    {"pattern": "hello", "output_mode": "content", "head_limit": 3, "offset": 2},
    {"pattern": "nothing matches this"},
]


@pytest.mark.parametrize(
    "args", AGREEMENT, ids=lambda a: " ".join(f"{k}={v}" for k, v in a.items())
)
async def test_rg_and_python_engines_give_identical_results(tree: Path, args: Any) -> None:
    await both(tree, "grep", **args)


# --- grep: semantics ------------------------------------------------------------------------


async def test_grep_files_mode_lists_newest_first_skipping_ignored_binary_and_git(
    tree: Path,
) -> None:
    out = await both(tree, "grep", pattern="hello")
    assert out.splitlines() == [
        "Found 8 files (newest first)",
        "a.py",
        "b.txt",
        "keep.log",
        ".hidden/h.py",
        "sub/deep/anchored.py",
        "sub/notes.md",
        "sub/crlf.txt",
        "latin.txt",
    ]


async def test_grep_content_mode_shows_lines_context_and_separators(tree: Path) -> None:
    out = await both(tree, "grep", pattern="hello", path="b.txt", output_mode="content", context=1)
    assert out == "b.txt-2-second line\nb.txt:3:third hello"
    out = await both(tree, "grep", pattern="Hello|third", path="b.txt", output_mode="content")
    assert out == "b.txt:1:Hello there\nb.txt:3:third hello"
    out = await both(tree, "grep", pattern="hello", type="py", output_mode="content", after=1)
    assert out.splitlines() == [
        ".hidden/h.py:1:print('hello')",
        "--",
        "a.py:3:def hello():",
        "a.py:4:    return 'hello world'",
        "--",
        "sub/deep/anchored.py:1:x = 'hello'",
    ]


async def test_grep_count_mode_gives_a_total(tree: Path) -> None:
    out = await both(tree, "grep", pattern="hello", glob="*.{py,txt}", output_mode="count")
    assert out.splitlines() == [
        "Found 10 matching lines in 9 files",
        ".hidden/h.py:1",
        "a.py:2",
        "b.txt:1",
        "by_dot_ignore.txt:1",  # named by the glob: an rg override beats ignore files
        "latin.txt:1",
        "sub/anchored.py:1",
        "sub/crlf.txt:1",
        "sub/deep/anchored.py:1",
        "sub/local.txt:1",
    ]


async def test_grep_glob_is_an_rg_override_that_also_searches_ignored_files(tree: Path) -> None:
    out = await both(tree, "grep", pattern="hello", glob="*.log")
    assert sorted(out.splitlines()[1:]) == ["drop.log", "keep.log"]


async def test_grep_multiline_spans_lines(tree: Path) -> None:
    out = await both(
        tree, "grep", pattern=r"main\(\) \{.*?\}", multiline=True, output_mode="content"
    )
    assert out == "sub/notes.md:2:fn main() {\nsub/notes.md:3:  hello();\nsub/notes.md:4:}"


async def test_grep_refuses_a_pattern_with_a_newline_without_multiline(tree: Path) -> None:
    with pytest.raises(ToolError, match="multiline: true"):
        await run(tree, kit()["grep"], pattern=r"hello\nbye")


async def test_grep_pages_with_head_limit_and_offset(tree: Path) -> None:
    for engine in ENGINES:
        grep = kit(engine=engine)["grep"]
        first = await run(tree, grep, pattern="hello", head_limit=3)
        assert first.splitlines()[1:4] == ["a.py", "b.txt", "keep.log"]
        assert "Showing entries 1-3 of 8. Call again with offset=3" in first
        rest = await run(tree, grep, pattern="hello", head_limit=3, offset=6)
        assert rest.splitlines()[1:] == ["sub/crlf.txt", "latin.txt"]
        assert "offset=" not in rest


async def test_grep_bounds_output_by_characters_and_cuts_long_lines(tmp_path: Path) -> None:
    write(tmp_path, "long.txt", "x" * 5000 + " needle\n" + "needle\n" * 2000)
    for engine in ENGINES:
        grep = kit(engine=engine, max_output_chars=2000, max_line_chars=100)["grep"]
        out = await run(tmp_path, grep, pattern="needle", output_mode="content", head_limit=5000)
        assert len(out) < 2600
        assert "long.txt:1:" + "x" * 100 + "... [4907 more characters]" in out
        assert "Call again with offset=" in out


async def test_grep_invalid_regex_returns_the_engines_message(tree: Path) -> None:
    with pytest.raises(ToolError, match=r"(?s)invalid regex.*unclosed group"):
        await run(tree, kit(engine="rg")["grep"], pattern="(")
    with pytest.raises(ToolError, match=r"invalid regex '\(': missing \)"):
        await run(tree, kit(engine="python")["grep"], pattern="(")


async def test_grep_unknown_type_suggests_the_closest(tree: Path) -> None:
    with pytest.raises(ToolError, match=r"unknown file type 'pyton'\. Did you mean 'python'"):
        await run(tree, kit()["grep"], pattern="x", type="pyton")


async def test_grep_never_hangs_on_fifos_or_huge_files(tree: Path) -> None:
    write(tree, "huge.txt", "hello\n" * 2000)
    for engine in ENGINES:
        grep = kit(engine=engine, max_file_size=1000)["grep"]
        out = await run(tree, grep, pattern="hello", glob="{huge.txt,pipe.py}")
        assert out == "No files found."
        with pytest.raises(ToolError, match="not a regular file"):
            await run(tree, grep, pattern="hello", path="pipe.py")
    with pytest.raises(ToolError, match="binary file"):
        await run(tree, kit()["grep"], pattern="hello", path="bin.dat")


async def test_grep_hides_files_the_sandbox_denies(tree: Path) -> None:
    policy = SandboxPolicy(deny_read=(f"{tree}/**/*.md",))
    for engine in ENGINES:
        grep = kit(engine=engine)["grep"]
        result = await grep.run({"pattern": "hello"}, ctx_for(tree, grep, policy))
        assert "a.py" in result.content
        assert "notes.md" not in result.content


async def test_glob_hides_files_the_sandbox_denies(tree: Path) -> None:
    policy = SandboxPolicy(deny_read=(f"{tree}/sub/**",))
    for engine in ENGINES:
        glob = kit(engine=engine)["glob"]
        for pattern in ("**/*.py", "**/*.{md,txt}"):
            result = await glob.run({"pattern": pattern}, ctx_for(tree, glob, policy))
            assert "sub/" not in result.content
            assert result.metadata["total"] == len(result.content.splitlines())
    assert (await run(tree, kit()["glob"], pattern="**/*.py")).count("sub/") == 1


async def test_grep_stops_at_its_deadline(tmp_path: Path) -> None:
    for i in range(200):
        write(tmp_path, f"f{i}.txt", "a" * 30 + "\n")
    for engine in ENGINES:
        grep = kit(engine=engine)["grep"]
        ctx = ctx_for(tmp_path, grep)
        ctx.deadline = 0.0  # already past: the search must stop, not run on
        with pytest.raises(ToolError, match="took longer than"):
            await grep.run({"pattern": "(a|aa)+$"}, ctx)


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="did you mean 'python'"):
        search_tools({"engine": "pyhton"})
    with pytest.raises(ConfigError, match="unknown option 'max_result'"):
        search_tools({"max_result": 3})
    with pytest.raises(ConfigError, match="no runnable ripgrep"):
        search_tools({"rg_path": "/nonexistent/rg"})


async def test_glob_and_grep_never_show_the_file_tools_own_temp_files(tmp_path: Path) -> None:
    # What a write in progress (or one killed mid-write) has beside its target.
    write(tmp_path, "a.txt", "hello\n")
    write(tmp_path, "sub/.a.txt.toolnexus-0123456789ab.tmp", "hello, half written\n")
    write(tmp_path, ".b.py.toolnexus-ba9876543210.tmp", "hello = 1\n")
    listed = await both(tmp_path, "glob", pattern="**/*")
    assert listed.splitlines()[-1:] == ["a.txt"] and "toolnexus" not in listed
    assert await both(tmp_path, "glob", pattern="**/*.tmp") == "No files found."
    found = await both(tmp_path, "grep", pattern="hello")
    assert "a.txt" in found and "toolnexus" not in found
    assert "toolnexus" not in await both(tmp_path, "grep", pattern="hello", glob="*.tmp")
