"""read, write and edit, against real files in a temp workspace, through `Tool.run`."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from builtin.files import files_tools
from toolnexus import (
    ConfigError,
    ImagePart,
    SandboxPolicy,
    Tool,
    ToolContext,
    ToolError,
    create_toolkit,
)

pytestmark = pytest.mark.anyio

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00"
    b"\x00\x00\x00IEND\xaeB`\x82"
)


class Kit:
    """The three tools sharing one toolkit state, as a toolkit would run them."""

    def __init__(self, workspace: Path, **options: object) -> None:
        self.read, self.write, self.edit = files_tools(options)
        self.workspace = workspace
        self.state: dict[str, object] = {}

    def ctx(self, tool: Tool) -> ToolContext:
        return ToolContext(
            call_id="call-1",
            tool_name=tool.name,
            workspace=self.workspace,
            roots=(self.workspace,),
            state=self.state,
        )

    async def run(self, tool: Tool, **args: object) -> str:
        result = await tool.run(dict(args), self.ctx(tool))
        assert not result.is_error
        return result.content


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    return Kit(tmp_path)


# --- read -----------------------------------------------------------------------------------


async def test_read_numbers_lines_like_cat_n(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "a.txt").write_text("alpha\n\tbeta\n")
    assert await kit.run(kit.read, path="a.txt") == "     1\talpha\n     2\t\tbeta"


async def test_read_offset_and_limit_are_one_based_and_say_how_to_continue(
    tmp_path: Path, kit: Kit
) -> None:
    (tmp_path / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    text = await kit.run(kit.read, path="n.txt", offset=3, limit=2)
    lines = text.splitlines()
    assert lines[:2] == ["     3\tline 3", "     4\tline 4"]
    assert "showing lines 3-4" in lines[2]
    assert "the file has 10 lines" in lines[2]
    assert "offset=5" in lines[2]
    assert await kit.run(kit.read, path="n.txt", offset=10) == "    10\tline 10"


async def test_read_without_final_newline_and_crlf(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "w.txt").write_bytes(b"one\r\ntwo")
    assert await kit.run(kit.read, path="w.txt") == "     1\tone\n     2\ttwo"


async def test_read_default_limit_is_2000_lines(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "big.txt").write_text("x\n" * 2500)
    text = await kit.run(kit.read, path="big.txt")
    assert text.count("\tx") == 2000
    assert "offset=2001" in text


async def test_read_cuts_long_lines_with_a_marker(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "long.txt").write_text("a" * 5000 + "\nshort\n" + "é" * 3000)
    lines = (await kit.run(kit.read, path="long.txt")).splitlines()
    assert lines[0] == "     1\t" + "a" * 2000 + " [… line cut at 2000 characters]"
    assert lines[1] == "     2\tshort"
    assert lines[2] == "     3\t" + "é" * 2000 + " [… line cut at 2000 characters]"


async def test_read_output_is_bounded(tmp_path: Path) -> None:
    kit = Kit(tmp_path, max_output_chars=1000)
    (tmp_path / "wide.txt").write_text(("y" * 100 + "\n") * 50)
    text = await kit.run(kit.read, path="wide.txt")
    assert len(text) < 1300
    assert "output size limit reached" in text
    assert "offset=10" in text


async def test_read_empty_file_and_offset_past_end_are_notices(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "three.txt").write_text("1\n2\n3\n")
    (tmp_path / "open.txt").write_text("1\n2")
    assert "exists but is empty" in await kit.run(kit.read, path="empty.txt")
    past = await kit.run(kit.read, path="three.txt", offset=4)
    assert "offset 4 is past the end" in past
    assert "has 3 lines" in past
    assert "has 3 lines" in await kit.run(kit.read, path="three.txt", offset=9)
    assert "has 2 lines" in await kit.run(kit.read, path="open.txt", offset=3)


async def test_read_replaces_invalid_utf8(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9\n")
    assert await kit.run(kit.read, path="bad.txt") == "     1\tcaf\ufffd"


async def test_read_refuses_binary_and_directories_and_devices(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "blob.bin").write_bytes(b"ELF\x00\x01\x02")
    (tmp_path / "sub").mkdir()
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ToolError, match="binary file"):
        await kit.run(kit.read, path="blob.bin")
    with pytest.raises(ToolError, match=r"is a directory.*glob"):
        await kit.run(kit.read, path="sub")
    with pytest.raises(ToolError, match="not a regular file"):
        await kit.run(kit.read, path="pipe")


async def test_read_missing_file_suggests_a_close_name(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "config.yaml").write_text("a: 1\n")
    with pytest.raises(
        ToolError, match=r"'confg\.yaml' does not exist\. Did you mean 'config\.yaml'"
    ):
        await kit.run(kit.read, path="confg.yaml")


@pytest.mark.parametrize(
    ("name", "data", "mime"),
    [
        ("p.png", PNG, "image/png"),
        ("j.jpg", b"\xff\xd8\xff\xe0" + b"\x00" * 20, "image/jpeg"),
        ("g.gif", b"GIF89a" + b"\x00" * 20, "image/gif"),
        ("w.webp", b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 8, "image/webp"),
    ],
)
async def test_read_returns_images_as_image_parts(
    tmp_path: Path, kit: Kit, name: str, data: bytes, mime: str
) -> None:
    (tmp_path / name).write_bytes(data)
    result = await kit.read.run({"path": name}, kit.ctx(kit.read))
    assert result.parts == (ImagePart(data=data, mime_type=mime),)
    assert mime in result.content


async def test_read_refuses_an_image_over_the_limit(tmp_path: Path) -> None:
    kit = Kit(tmp_path, max_image_bytes=10)
    (tmp_path / "p.png").write_bytes(PNG)
    with pytest.raises(ToolError, match="over the 10-byte limit"):
        await kit.run(kit.read, path="p.png")


async def test_read_reaches_the_end_of_a_large_file(tmp_path: Path, kit: Kit) -> None:
    # 300,000 lines (about 5 MB): the tail is found by counting newlines in chunks.
    (tmp_path / "log.txt").write_bytes(b"".join(b"entry %d\n" % i for i in range(1, 300_001)))
    text = await kit.run(kit.read, path="log.txt", offset=299_999)
    assert text == "299999\tentry 299999\n300000\tentry 300000"


# --- confinement ----------------------------------------------------------------------------


@pytest.mark.parametrize("tool_name", ["read", "write", "edit"])
@pytest.mark.parametrize("path", ["../outside/secret.txt", "ABSOLUTE", "link/secret.txt"])
async def test_paths_outside_the_workspace_are_refused(
    tmp_path: Path, tool_name: str, path: str
) -> None:
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("secret\n")
    (workspace / "link").symlink_to(outside)
    kit = Kit(workspace, require_read=False)
    tool = {"read": kit.read, "write": kit.write, "edit": kit.edit}[tool_name]
    args: dict[str, object] = {"path": str(secret) if path == "ABSOLUTE" else path}
    if tool_name == "write":
        args["content"] = "pwned\n"
    if tool_name == "edit":
        args |= {"old_string": "secret", "new_string": "pwned"}
    with pytest.raises(ToolError):
        await tool.run(args, kit.ctx(tool))
    assert secret.read_text() == "secret\n"


async def test_a_symlink_inside_the_workspace_is_followed(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "real.txt").write_text("real\n")
    (tmp_path / "alias.txt").symlink_to(tmp_path / "real.txt")
    assert await kit.run(kit.read, path="alias.txt") == "     1\treal"
    await kit.run(kit.edit, path="alias.txt", old_string="real", new_string="changed")
    assert (tmp_path / "alias.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "changed\n"


# --- write ----------------------------------------------------------------------------------


async def test_write_creates_parent_folders(tmp_path: Path, kit: Kit) -> None:
    text = await kit.run(kit.write, path="a/b/c.txt", content="hi\nthere\n")
    assert (tmp_path / "a/b/c.txt").read_text() == "hi\nthere\n"
    assert text.startswith("Created a/b/c.txt (2 lines")


async def test_write_refuses_an_unread_file_then_allows_after_read(
    tmp_path: Path, kit: Kit
) -> None:
    target = tmp_path / "t.txt"
    target.write_text("original\n")
    with pytest.raises(ToolError, match=r"has not been read in this session\. Call read"):
        await kit.run(kit.write, path="t.txt", content="new\n")
    assert target.read_text() == "original\n"
    await kit.run(kit.read, path="t.txt")
    await kit.run(kit.write, path="t.txt", content="new\n")
    assert target.read_text() == "new\n"
    # Its own write counts as knowing the file: a second write needs no new read.
    await kit.run(kit.write, path="t.txt", content="newer\n")
    assert target.read_text() == "newer\n"


async def test_write_refuses_a_file_changed_since_read(tmp_path: Path, kit: Kit) -> None:
    target = tmp_path / "t.txt"
    target.write_text("original\n")
    await kit.run(kit.read, path="t.txt")
    target.write_text("edited by the user\n")
    with pytest.raises(ToolError, match="changed on disk since it was last read"):
        await kit.run(kit.write, path="t.txt", content="model\n")
    assert target.read_text() == "edited by the user\n"


async def test_the_guard_can_be_turned_off(tmp_path: Path) -> None:
    kit = Kit(tmp_path, require_read=False)
    (tmp_path / "t.txt").write_text("original\n")
    await kit.run(kit.write, path="t.txt", content="new\n")
    await kit.run(kit.edit, path="t.txt", old_string="new", new_string="newer")
    assert (tmp_path / "t.txt").read_text() == "newer\n"


async def test_read_stamps_are_per_toolkit_state(tmp_path: Path) -> None:
    first, second = Kit(tmp_path), Kit(tmp_path)
    (tmp_path / "t.txt").write_text("x\n")
    await first.run(first.read, path="t.txt")
    with pytest.raises(ToolError, match="has not been read"):
        await second.run(second.write, path="t.txt", content="y\n")


async def test_write_is_atomic_and_keeps_permissions(tmp_path: Path, kit: Kit) -> None:
    target = tmp_path / "run.sh"
    target.write_text("echo 1\n")
    target.chmod(0o750)
    inode = target.stat().st_ino
    await kit.run(kit.read, path="run.sh")
    await kit.run(kit.write, path="run.sh", content="echo 2\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    # A new inode: the content was renamed into place, never written over the old file.
    assert target.stat().st_ino != inode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]


async def test_write_new_file_honours_the_umask(tmp_path: Path, kit: Kit) -> None:
    old = os.umask(0o027)
    try:
        await kit.run(kit.write, path="new.txt", content="x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640


async def test_write_refuses_a_directory(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        await kit.run(kit.write, path="d", content="x")


# --- edit -----------------------------------------------------------------------------------


async def _read_then_edit(kit: Kit, path: str, **args: object) -> str:
    await kit.run(kit.read, path=path)
    return await kit.run(kit.edit, path=path, **args)


async def test_edit_replaces_a_unique_string_and_shows_the_result(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    text = await _read_then_edit(kit, "m.py", old_string="return 1", new_string="return 2")
    assert (tmp_path / "m.py").read_text() == "def f():\n    return 2\n"
    assert "1 replacement" in text
    assert "     2\t    return 2" in text


async def test_edit_refuses_an_ambiguous_string(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "d.txt").write_text("x = 1\ny = 2\nx = 1\n")
    with pytest.raises(ToolError, match=r"occurs 2 times .*lines 1, 3.*replace_all"):
        await _read_then_edit(kit, "d.txt", old_string="x = 1", new_string="x = 9")
    assert (tmp_path / "d.txt").read_text() == "x = 1\ny = 2\nx = 1\n"
    await kit.run(kit.edit, path="d.txt", old_string="x = 1", new_string="x = 9", replace_all=True)
    assert (tmp_path / "d.txt").read_text() == "x = 9\ny = 2\nx = 9\n"


async def test_edit_not_found_points_to_the_closest_text(tmp_path: Path, kit: Kit) -> None:
    lines = [f"line {i}" for i in range(1, 40)]
    lines[20] = "    if value is None:"
    lines[21] = "        return default"
    (tmp_path / "c.py").write_text("\n".join(lines) + "\n")
    with pytest.raises(ToolError) as info:
        await _read_then_edit(
            kit,
            "c.py",
            old_string="    if value is None:\n        return defualt",
            new_string="x",
        )
    message = str(info.value)
    assert "was not found" in message
    assert "closest text starts at line 21" in message
    assert "-        return defualt" in message
    assert "+        return default" in message


async def test_edit_notices_a_pasted_line_number_prefix(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "p.txt").write_text("alpha\nbeta\n")
    with pytest.raises(ToolError, match="line-number prefix"):
        await _read_then_edit(kit, "p.txt", old_string="     2\tbeta", new_string="gamma")


async def test_edits_apply_in_order_all_or_none(tmp_path: Path, kit: Kit) -> None:
    target = tmp_path / "e.txt"
    target.write_text("a\nb\nc\n")
    with pytest.raises(ToolError, match="edit 3 of 3: old_string was not found"):
        await _read_then_edit(
            kit,
            "e.txt",
            edits=[
                {"old_string": "a", "new_string": "A"},
                {"old_string": "b", "new_string": "B"},
                {"old_string": "zzz", "new_string": "Z"},
            ],
        )
    assert target.read_text() == "a\nb\nc\n"
    text = await kit.run(
        kit.edit,
        path="e.txt",
        edits=[
            {"old_string": "a", "new_string": "A1"},
            {"old_string": "A1\nb", "new_string": "A2\nB"},
        ],
    )
    assert target.read_text() == "A2\nB\nc\n"
    assert "Applied 2 edits" in text


async def test_edit_refuses_mixed_or_empty_arguments(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "f.txt").write_text("a\n")
    await kit.run(kit.read, path="f.txt")
    with pytest.raises(ToolError, match="not both"):
        await kit.run(
            kit.edit,
            path="f.txt",
            old_string="a",
            new_string="b",
            edits=[{"old_string": "a", "new_string": "b"}],
        )
    with pytest.raises(ToolError, match="identical"):
        await kit.run(kit.edit, path="f.txt", old_string="a", new_string="a")
    with pytest.raises(ToolError, match="old_string is empty"):
        await kit.run(kit.edit, path="f.txt", old_string="", new_string="b")


async def test_edit_keeps_crlf_and_the_final_newline(tmp_path: Path, kit: Kit) -> None:
    target = tmp_path / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await _read_then_edit(kit, "win.txt", old_string="two\nthree\n", new_string="2\n3")
    assert target.read_bytes() == b"one\r\n2\r\n3\r\n"
    plain = tmp_path / "open.txt"
    plain.write_bytes(b"a\nb")
    await _read_then_edit(kit, "open.txt", old_string="b", new_string="c\n")
    assert plain.read_bytes() == b"a\nc"


async def test_edit_keeps_invalid_bytes_it_did_not_touch(tmp_path: Path, kit: Kit) -> None:
    target = tmp_path / "latin.txt"
    target.write_bytes(b"caf\xe9\nold\n")
    await _read_then_edit(kit, "latin.txt", old_string="old", new_string="new")
    assert target.read_bytes() == b"caf\xe9\nnew\n"


async def test_edit_guard_and_refusals(tmp_path: Path, kit: Kit) -> None:
    (tmp_path / "g.txt").write_text("a\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01a")
    with pytest.raises(ToolError, match="has not been read"):
        await kit.run(kit.edit, path="g.txt", old_string="a", new_string="b")
    await kit.run(kit.read, path="g.txt")
    (tmp_path / "g.txt").write_text("a\nb\n")
    with pytest.raises(ToolError, match="changed on disk"):
        await kit.run(kit.edit, path="g.txt", old_string="a", new_string="b")
    with pytest.raises(ToolError, match="binary"):
        await kit.run(kit.edit, path="blob.bin", old_string="a", new_string="b")
    with pytest.raises(ToolError, match="does not exist"):
        await kit.run(kit.edit, path="nope.txt", old_string="a", new_string="b")


async def test_edit_keeps_permissions(tmp_path: Path, kit: Kit) -> None:
    target = tmp_path / "x.sh"
    target.write_text("echo a\n")
    target.chmod(0o700)
    await _read_then_edit(kit, "x.sh", old_string="a", new_string="b")
    assert stat.S_IMODE(target.stat().st_mode) == 0o700


# --- building the tools ---------------------------------------------------------------------


def test_tools_flags_and_schemas() -> None:
    read, write, edit = files_tools({})
    assert [t.name for t in (read, write, edit)] == ["read", "write", "edit"]
    assert all(t.source == "builtin" and not t.open_world for t in (read, write, edit))
    assert (read.read_only, read.destructive, read.idempotent) == (True, False, True)
    assert (write.read_only, write.destructive) == (False, True)
    assert (edit.read_only, edit.destructive, edit.idempotent) == (False, True, False)
    assert read.parameters["properties"]["limit"]["maximum"] == 2000
    assert edit.parameters["properties"]["edits"]["items"]["required"] == [
        "old_string",
        "new_string",
    ]


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="did you mean 'require_read'"):
        files_tools({"require_reads": False})
    with pytest.raises(ConfigError, match="expected a positive integer"):
        files_tools({"max_lines": 0})
    with pytest.raises(ConfigError, match="expected true or false"):
        files_tools({"require_read": "no"})


# --- through a toolkit ----------------------------------------------------------------------


def test_a_toolkit_runs_the_file_tools_with_one_shared_guard(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    with create_toolkit(builtins=["read", "edit", "write"], workspace=tmp_path) as toolkit:
        refused = toolkit.execute(
            "edit", {"path": "a.txt", "old_string": "hello", "new_string": "x"}
        )
        assert refused.is_error
        assert "has not been read" in refused.content
        assert toolkit.execute("read", {"path": "a.txt"}).content == "     1\thello"
        edited = toolkit.execute(
            "edit", {"path": "a.txt", "old_string": "hello", "new_string": "bye"}
        )
        assert not edited.is_error
        outside = toolkit.execute("read", {"path": "../x.txt"})
        assert outside.is_error
        assert "outside the workspace" in outside.content
        bad = toolkit.execute("read", {"path": "a.txt", "offset": 0})
        assert bad.is_error
    assert (tmp_path / "a.txt").read_text() == "bye\n"


def test_toolkit_options_reach_the_tools(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    with create_toolkit(
        builtins={"write": {"require_read": False}, "read": {"max_lines": 5}}, workspace=tmp_path
    ) as toolkit:
        assert not toolkit.execute("write", {"path": "a.txt", "content": "new\n"}).is_error
        too_many = toolkit.execute("read", {"path": "a.txt", "limit": 6})
        assert too_many.is_error
    assert (tmp_path / "a.txt").read_text() == "new\n"


async def test_the_sandbox_policy_applies_to_file_tools(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("TOKEN=secret\n")
    (tmp_path / "a.txt").write_text("a\n")
    kit = Kit(tmp_path, require_read=False)

    def ctx(tool: Tool, policy: SandboxPolicy) -> ToolContext:
        context = kit.ctx(tool)
        context.sandbox = policy
        return context

    hidden = SandboxPolicy(deny_read=("/**/.env",))
    with pytest.raises(ToolError, match="deny_read"):
        await kit.read.run({"path": ".env"}, ctx(kit.read, hidden))
    read_only = SandboxPolicy(filesystem="read-only")
    assert not (await kit.read.run({"path": "a.txt"}, ctx(kit.read, read_only))).is_error
    with pytest.raises(ToolError, match="read-only"):
        await kit.write.run({"path": "a.txt", "content": "b\n"}, ctx(kit.write, read_only))
    with pytest.raises(ToolError, match="read-only"):
        await kit.edit.run(
            {"path": "a.txt", "old_string": "a", "new_string": "b"}, ctx(kit.edit, read_only)
        )
    assert (tmp_path / "a.txt").read_text() == "a\n"


# --- read-only files and folders ------------------------------------------------------------


async def test_write_and_edit_refuse_a_read_only_file(tmp_path: Path, kit: Kit) -> None:
    target = tmp_path / "locked.txt"
    target.write_text("keep\n")
    target.chmod(0o444)
    await kit.run(kit.read, path="locked.txt")
    with pytest.raises(ToolError, match=r"refusing to overwrite 'locked.txt': it is read-only"):
        await kit.run(kit.write, path="locked.txt", content="new\n")
    with pytest.raises(ToolError, match=r"refusing to edit 'locked.txt': it is read-only"):
        await kit.run(kit.edit, path="locked.txt", old_string="keep", new_string="new")
    assert target.read_text() == "keep\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o444
    # Made writable again (what the message says to do), the same write goes through.
    target.chmod(0o644)
    await kit.run(kit.read, path="locked.txt")
    await kit.run(kit.write, path="locked.txt", content="new\n")
    assert target.read_text() == "new\n"


async def test_write_refuses_a_read_only_folder(tmp_path: Path, kit: Kit) -> None:
    folder = tmp_path / "frozen"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(ToolError, match=r"its folder 'frozen' is read-only \(mode 0555\)"):
            await kit.run(kit.write, path="frozen/new.txt", content="x")
        with pytest.raises(ToolError, match=r"its folder 'frozen' is read-only"):
            await kit.run(kit.write, path="frozen/deeper/new.txt", content="x")
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)


async def test_replacing_keeps_mode_and_owner(tmp_path: Path, kit: Kit) -> None:
    target = tmp_path / "owned.sh"
    target.write_text("echo a\n")
    if os.geteuid() == 0:
        os.chown(target, 65534, 65534)
    target.chmod(0o4751)  # after chown, which clears set-id bits
    before = target.stat()
    await _read_then_edit(kit, "owned.sh", old_string="a", new_string="b")
    after = target.stat()
    assert after.st_ino != before.st_ino
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert stat.S_IMODE(after.st_mode) == 0o4751
