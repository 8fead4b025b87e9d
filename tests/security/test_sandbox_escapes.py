"""Escapes from the process sandbox, tried as an attacker would, under each mechanism.

Every test runs a real command under `run_process` with bubblewrap and again with Landlock (the
other switched off), against real files and real Unix-domain servers on the host, and checks the
host afterwards. Each refusal has a control in the same test showing the allowed path works.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import stat
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolnexus.errors import ConfigError
from toolnexus.runtime.process import ProcessResult, run_process
from toolnexus.runtime.sandbox import SandboxPolicy, detect, protected_git_paths

from ..conftest import only_mechanism


@pytest.fixture(autouse=True)
def _fresh_detection() -> Iterator[None]:
    detect.cache_clear()
    yield
    detect.cache_clear()


@pytest.fixture(params=("bwrap", "landlock"))
def mechanism(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    name: str = request.param
    only_mechanism(name, monkeypatch)
    return name


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


async def run(argv: list[str], policy: SandboxPolicy, ws: Path, mechanism: str) -> ProcessResult:
    result = await run_process(
        argv, cwd=ws, timeout=30, max_output=100_000, sandbox=policy, workspace=ws
    )
    assert result.mechanism == mechanism
    assert not result.unconfined
    return result


# --- Unix-domain sockets ---------------------------------------------------------------------


class UnixServer:
    """A host server on a Unix-domain socket (pathname or abstract) that greets and counts."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.accepted = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            with conn, contextlib.suppress(OSError):  # the client may be gone already
                conn.sendall(b"hello from the host\n")

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def host_socket(tmp_path: Path) -> Iterator[UnixServer]:
    server = UnixServer(str(tmp_path / "host.sock"))  # outside the workspace, like docker.sock
    yield server
    server.close()


@pytest.fixture
def abstract_socket() -> Iterator[UnixServer]:
    server = UnixServer(f"\0toolnexus-test-{uuid.uuid4().hex}")
    yield server
    server.close()


CONNECT = """
import socket, sys, threading
def connect():  # from a thread: the supervisor must find the caller's process
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    address = sys.argv[1]
    try:
        s.connect("\\0" + address[1:] if address.startswith("@") else address)
        print("GOT", s.recv(100).decode().strip())
    except OSError as e:
        print("REFUSED", e.errno)
thread = threading.Thread(target=connect)
thread.start()
thread.join()
"""


def _connect(address: str) -> list[str]:
    return [sys.executable, "-c", CONNECT, address.replace("\0", "@", 1)]


@pytest.mark.anyio
async def test_network_off_refuses_a_host_unix_socket(
    mechanism: str, ws: Path, host_socket: UnixServer
) -> None:
    result = await run(_connect(host_socket.address), SandboxPolicy(network=False), ws, mechanism)
    assert "REFUSED 13" in result.stdout, result.stderr
    assert host_socket.accepted == 0
    # A symlink in the workspace to the socket is the same socket.
    (ws / "link.sock").symlink_to(host_socket.address)
    result = await run(_connect("link.sock"), SandboxPolicy(network=False), ws, mechanism)
    assert "REFUSED 13" in result.stdout, result.stderr
    assert host_socket.accepted == 0


@pytest.mark.anyio
async def test_a_listed_unix_socket_is_reachable(
    mechanism: str, ws: Path, host_socket: UnixServer
) -> None:
    policy = SandboxPolicy(network=False, unix_sockets=(host_socket.address,))
    result = await run(_connect(host_socket.address), policy, ws, mechanism)
    assert "GOT hello from the host" in result.stdout, result.stderr
    open_ = await run(_connect(host_socket.address), SandboxPolicy(network=True), ws, mechanism)
    assert "GOT hello from the host" in open_.stdout, open_.stderr
    assert host_socket.accepted == 2


@pytest.mark.anyio
async def test_network_off_refuses_an_abstract_unix_socket(
    mechanism: str, ws: Path, abstract_socket: UnixServer
) -> None:
    result = await run(
        _connect(abstract_socket.address), SandboxPolicy(network=False), ws, mechanism
    )
    assert "REFUSED" in result.stdout, result.stderr
    assert abstract_socket.accepted == 0


@pytest.mark.anyio
async def test_network_off_refuses_unix_datagrams(mechanism: str, ws: Path, tmp_path: Path) -> None:
    """A datagram socket can send to any path with sendto, which no filter can read: refused."""
    target = tmp_path / "host-dgram.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as host:
        host.bind(str(target))
        host.setblocking(False)
        script = (
            "import socket, sys\n"
            "for make in (lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM),\n"
            "             lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)[0]):\n"
            "    try:\n"
            "        make().sendto(b'x', sys.argv[1]); print('SENT')\n"
            "    except OSError as e:\n"
            "        print('REFUSED', e.errno)\n"
        )
        result = await run([sys.executable, "-c", script, str(target)],
                           SandboxPolicy(network=False), ws, mechanism)  # fmt: skip
        with pytest.raises(BlockingIOError):
            host.recv(10)
    assert result.stdout.split() == ["REFUSED", "13", "REFUSED", "13"], result.stderr


INSIDE = """
import multiprocessing, os, socket, tempfile
a, b = socket.socketpair()
a.sendall(b"pair"); print(b.recv(4).decode())
path = os.path.join(tempfile.gettempdir(), "own.sock")
srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen(1)
cli = socket.socket(socket.AF_UNIX); cli.connect(path)
conn, _ = srv.accept(); conn.sendall(b"own"); print(cli.recv(3).decode())
child = multiprocessing.get_context("forkserver").Process(target=print, args=("child",))
child.start(); child.join(); print("exit", child.exitcode)
"""


@pytest.mark.anyio
async def test_sockets_of_the_sandbox_itself_keep_working(mechanism: str, ws: Path) -> None:
    """socketpair, a server in the sandbox's temp folder, multiprocessing's forkserver."""
    result = await run([sys.executable, "-c", INSIDE], SandboxPolicy(network=False), ws, mechanism)
    assert result.stdout.split() == ["pair", "own", "child", "exit", "0"], result.stderr


def test_unix_sockets_is_read_and_validated(tmp_path: Path) -> None:
    policy = SandboxPolicy.from_mapping(
        {"network": False, "unix_sockets": ["/run/docker.sock", "rel/agent.sock"]},
        base_dir=tmp_path,
    )
    assert policy.unix_sockets == ("/run/docker.sock", str(tmp_path / "rel/agent.sock"))
    for bad, where in (("/run/x.sock", "sandbox.unix_sockets"),
                       (["/run/*.sock"], "sandbox.unix_sockets[0]"),
                       ([""], "sandbox.unix_sockets[0]")):  # fmt: skip
        with pytest.raises(ConfigError) as caught:
            SandboxPolicy.from_mapping({"unix_sockets": bad}, base_dir=tmp_path)
        assert caught.value.field == where


def test_an_include_may_only_narrow_unix_sockets() -> None:
    wide = SandboxPolicy(unix_sockets=("/a.sock", "/b.sock"))
    narrow = SandboxPolicy(unix_sockets=("/b.sock",))
    assert wide.tighten(narrow).unix_sockets == ("/b.sock",)
    assert SandboxPolicy(network=True).tighten(narrow).unix_sockets == ("/b.sock",)
    assert wide.loosens(narrow) == ["unix_sockets adds /a.sock"]
    assert narrow.loosens(wide) == []


# --- git metadata ----------------------------------------------------------------------------


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _snapshot(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "->" + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
    return out


@pytest.fixture
def repos(ws: Path, tmp_path: Path) -> list[Path]:
    """The workspace's repository, a nested one, and one whose `.git` is a gitfile pointing to
    a git folder elsewhere in the workspace (as worktrees and submodules do)."""
    _git("init", "-q", cwd=ws)
    (ws / "sub").mkdir()
    _git("init", "-q", cwd=ws / "sub")
    (ws / "linked").mkdir()
    (ws / "store").mkdir()
    _git("init", "-q", "--separate-git-dir", str(ws / "store" / "linked.git"), cwd=ws / "linked")
    return [ws, ws / "sub", ws / "linked"]


ATTACKS = [
    "echo '[core] fsmonitor = evil' >> .git/config",
    "echo evil > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
    "ln -s /bin/true .git/hooks/post-checkout",
    "echo ../../elsewhere > .git/commondir",
    "echo /tmp/objects > .git/objects/info/alternates",
    "echo '[core] fsmonitor = evil' > .git/config.worktree",
    "ln -s .git/config cfg && echo evil >> cfg",
    "mv .git/config cfg2",
    "mv .git/hooks hooks2",
    "mv .git dotgit",
    "rm -rf .git",
    "echo 'gitdir: /tmp/evil' > .git",
]


@pytest.mark.anyio
async def test_git_metadata_cannot_be_changed_from_the_sandbox(
    mechanism: str, ws: Path, repos: list[Path]
) -> None:
    before = {repo: _snapshot(repo / ".git") if (repo / ".git").is_dir() else {} for repo in repos}
    store = _snapshot(ws / "store")
    gitfile = (ws / "linked" / ".git").read_text()
    script = "; ".join(
        f"( cd {repo.relative_to(ws) or '.'} && {{ {attack} ; }} ) 2>/dev/null && echo WROTE {i}"
        for repo in repos
        for i, attack in enumerate(ATTACKS)
    )
    # The gitfile's target, written directly.
    script += "; (echo evil >> store/linked.git/config) 2>/dev/null && echo WROTE store"
    script += "; mkdir src && echo fine > src/ok.txt && git status --short >/dev/null && echo OK"
    result = await run(["sh", "-c", script], SandboxPolicy(), ws, mechanism)
    assert "WROTE" not in result.stdout, result.stdout
    assert result.stdout.strip().endswith("OK"), result.stderr
    # (`mv` out of a read-only mount falls back to copying: a copy may appear, the original stays.)
    for repo in repos:
        if before[repo]:
            assert (repo / ".git").is_dir()
            assert _snapshot(repo / ".git") == before[repo]
    assert (ws / "linked" / ".git").read_text() == gitfile
    assert _snapshot(ws / "store") == store
    assert (ws / "src" / "ok.txt").read_text() == "fine\n"


def test_protected_git_paths_names_every_repository(ws: Path, repos: list[Path]) -> None:
    found = protected_git_paths(ws)
    assert set(found) == {
        (ws / ".git").resolve(),
        (ws / "sub" / ".git").resolve(),
        (ws / "linked" / ".git").resolve(),
        (ws / "store" / "linked.git").resolve(),
    }


ROOT_WORK = (
    "echo new > new.txt && echo more >> new.txt && cat new.txt"
    " && mkdir -p made/deeper && echo deep > made/deeper/f && cat made/deeper/f"
    " && mv new.txt moved.txt && sed -i s/new/NEW/ moved.txt && cat moved.txt"
    " && ln -s moved.txt link && rm made/deeper/f && rmdir made/deeper"
    ' && python3 -c \'open("py.txt", "w").write("py")\' && echo DONE'
)


@pytest.mark.anyio
@pytest.mark.parametrize("network", [False, True])
async def test_files_at_the_workspace_root_can_be_made_while_git_stays_protected(
    mechanism: str, ws: Path, repos: list[Path], network: bool
) -> None:
    """Creating files at the top of the workspace is what agents do most. Landlock only grants
    whole subtrees, so it cannot let the top be written without `.git/config` too: there the
    launcher's supervisor does these writes for the command, after checking the path."""
    config = (ws / ".git" / "config").read_text()
    script = (
        ROOT_WORK + "; echo evil >> .git/config && echo WROTE; ln moved.txt .git/x && echo WROTE"
    )
    result = await run(["sh", "-c", script], SandboxPolicy(network=network), ws, mechanism)
    assert result.stdout.split() == ["new", "more", "deep", "NEW", "more", "DONE"], result.stderr
    assert (ws / "moved.txt").read_text() == "NEW\nmore\n"
    assert (ws / "link").resolve() == (ws / "moved.txt").resolve()
    assert (ws / "py.txt").read_text() == "py"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((ws / "py.txt").stat().st_mode) == 0o666 & ~umask  # the caller's umask
    assert sorted(p.name for p in (ws / "made").iterdir()) == []
    assert (ws / ".git" / "config").read_text() == config
    assert not (ws / ".git" / "x").exists()


# --- races: a path rewritten by another thread while the supervisor decides ------------------

FLIP = """
import ctypes, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
good, bad = (os.fsencode(a) + b"\\0" for a in sys.argv[1:3])
size = max(len(good), len(bad))
buf = ctypes.create_string_buffer(size + 2)
stop = threading.Event()
def flip():  # ctypes calls drop the GIL: this runs while the syscall waits for the supervisor
    while not stop.is_set():
        ctypes.memmove(ctypes.byref(buf, 2), good, len(good))
        ctypes.memmove(ctypes.byref(buf, 2), bad, len(bad))
ctypes.memmove(buf, (1).to_bytes(2, sys.byteorder), 2)  # AF_UNIX, for the connect case
flipper = threading.Thread(target=flip)
flipper.start()
done = 0
for _ in range(int(sys.argv[4])):
    if sys.argv[3] == "open":
        fd = libc.open(ctypes.byref(buf, 2), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if fd >= 0:
            os.write(fd, b"X")
            os.close(fd)
            done += 1
    else:
        s = libc.socket(1, 1, 0)
        done += libc.connect(s, buf, size + 2) == 0
        os.close(s)
stop.set()
flipper.join()
print("done", done)
"""


@pytest.mark.anyio
async def test_a_path_flipped_during_an_open_never_reaches_git_config(
    mechanism: str, ws: Path, repos: list[Path]
) -> None:
    config = (ws / ".git" / "config").read_bytes()
    argv = [sys.executable, "-c", FLIP, "new.txt", ".git/config", "open", "400"]
    result = await run(argv, SandboxPolicy(), ws, mechanism)
    assert result.stdout.startswith("done"), result.stderr
    assert (ws / ".git" / "config").read_bytes() == config


@pytest.mark.anyio
async def test_a_socket_path_flipped_during_a_connect_never_reaches_the_other_socket(
    mechanism: str, ws: Path, tmp_path: Path, host_socket: UnixServer
) -> None:
    listed = UnixServer(str(tmp_path / "listed.sock"))
    try:
        policy = SandboxPolicy(network=False, unix_sockets=(listed.address,))
        argv = [sys.executable, "-c", FLIP, listed.address, host_socket.address, "connect", "300"]
        result = await run(argv, policy, ws, mechanism)
    finally:
        listed.close()
    assert result.stdout.startswith("done"), result.stderr
    assert listed.accepted > 0
    assert host_socket.accepted == 0


PTRACE_ANCESTORS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
for pid in sorted({os.getppid(), 1}):  # the supervisor; bwrap's init, or the host's
    print("attach", libc.ptrace(16, pid, None, None), ctypes.get_errno())  # PTRACE_ATTACH
    try:
        open(f"/proc/{pid}/mem", "rb").close()
        print("mem opened")
    except OSError as e:
        print("mem", e.errno)
"""


@pytest.mark.anyio
async def test_no_unfiltered_process_can_be_traced_by_the_command(mechanism: str, ws: Path) -> None:
    """The supervisor (and bwrap's own init in the pid namespace) run without the seccomp
    filter: a command that could trace one could connect to any socket through it."""
    result = await run(
        [sys.executable, "-c", PTRACE_ANCESTORS], SandboxPolicy(network=False), ws, mechanism
    )
    lines = result.stdout.splitlines()
    assert lines and all(line in ("attach -1 1", "mem 13", "mem 1") for line in lines), (
        result.stdout + result.stderr
    )


def test_a_manifest_shell_tool_reaches_only_the_socket_it_lists(
    mechanism: str, ws: Path, tmp_path: Path, host_socket: UnixServer
) -> None:
    """End to end: the manifest's `unix_sockets` is read, validated and enforced."""
    from toolnexus import create_toolkit

    listed = UnixServer(str(tmp_path / "listed.sock"))
    try:
        tool = {
            "name": "probe",
            "command": [sys.executable, "-c", CONNECT, "{address}"],
            "parameters": {
                "type": "object",
                "properties": {"address": {"type": "string"}},
                "required": ["address"],
            },
            "sandbox": {"network": False, "unix_sockets": [listed.address]},
        }
        with create_toolkit({"version": 1, "tools": [tool]}, workspace=ws) as kit:
            allowed = kit.execute("probe", {"address": listed.address})
            refused = kit.execute("probe", {"address": host_socket.address})
    finally:
        listed.close()
    assert "GOT hello from the host" in allowed.content, allowed.content
    assert "REFUSED 13" in refused.content, refused.content
    assert allowed.metadata["mechanism"] == mechanism
    assert host_socket.accepted == 0


@pytest.mark.anyio
async def test_proc_self_means_the_command_not_the_supervisor(
    mechanism: str, ws: Path, repos: list[Path]
) -> None:
    """A path through /proc/self names the command's own folders, as the kernel reads it."""
    script = "mkdir -p out && cd out && echo here > /proc/self/cwd/made.txt; echo rc=$?"
    result = await run(["sh", "-c", script], SandboxPolicy(), ws, mechanism)
    assert "rc=0" in result.stdout, result.stderr
    assert (ws / "out" / "made.txt").read_text() == "here\n"
    assert not (ws / "made.txt").exists()


def test_protected_git_paths_rescans_when_the_writable_roots_change(tmp_path: Path) -> None:
    # A gitfile's target is protected only when it lies inside a scanned root, so the scan of
    # the workspace must not be reused for a call whose writable roots differ.
    ws, other = tmp_path / "ws", tmp_path / "other"
    (other / "gitstore").mkdir(parents=True)
    (other / "gitstore" / "HEAD").write_text("ref: refs/heads/main\n")
    ws.mkdir()
    (ws / ".git").write_text("gitdir: ../other/gitstore\n")
    assert (other / "gitstore").resolve() not in protected_git_paths(ws)
    assert (other / "gitstore").resolve() in protected_git_paths(ws, [other])
