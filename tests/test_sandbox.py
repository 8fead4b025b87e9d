"""Sandbox enforcement, proven by what commands can and cannot do, once per mechanism.

Every enforcement test runs a real command under `run_process` with bubblewrap and again with
Landlock (the other mechanism switched off with `TOOLNEXUS_SANDBOX_DISABLE`), and checks the
effect on the host: files that must not appear, secrets that must not show, connections that must
fail. Each refusal has a control in the same test showing the same command works when allowed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolnexus.errors import ConfigError, SandboxUnavailable
from toolnexus.manifest import load_manifest
from toolnexus.runtime.process import ProcessResult, run_process
from toolnexus.runtime.sandbox import (
    DEFAULT_ENV_ALLOW,
    PathRefused,
    SandboxPolicy,
    confine_path,
    detect,
    wrap_command,
)

from .conftest import only_mechanism

MECHANISMS = ("bwrap", "landlock")


@pytest.fixture(autouse=True)
def _fresh_detection() -> Iterator[None]:
    detect.cache_clear()
    yield
    detect.cache_clear()


@pytest.fixture(params=MECHANISMS)
def mechanism(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with only this mechanism enabled."""
    name: str = request.param
    only_mechanism(name, monkeypatch)
    return name


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "sibling").mkdir()
    return workspace


async def sh(
    script: str, policy: SandboxPolicy, ws: Path, *, mechanism: str | None = None
) -> ProcessResult:
    result = await run_process(
        ["sh", "-c", script], cwd=ws, timeout=20, max_output=100_000, sandbox=policy, workspace=ws
    )
    if mechanism is not None:
        assert result.mechanism == mechanism
        assert not result.unconfined
    return result


@pytest.fixture
def outside_targets() -> Iterator[list[Path]]:
    """Paths in $HOME and /etc a confined command must not be able to create."""
    token = uuid.uuid4().hex
    paths = [Path.home() / f".toolnexus-test-{token}", Path("/etc") / f"toolnexus-test-{token}"]
    yield paths
    for p in paths:
        p.unlink(missing_ok=True)


# --- filesystem --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_read_only_cannot_create_a_file_anywhere(
    mechanism: str, ws: Path, outside_targets: list[Path]
) -> None:
    (ws / "existing.txt").write_text("before\n")
    targets = [ws / "new.txt", ws / "existing.txt", ws.parent / "sibling" / "x", *outside_targets]
    script = "; ".join(f"(echo pwned > '{t}') 2>/dev/null && echo WROTE {t}" for t in targets)
    script += (
        "; mkdir sub 2>/dev/null && echo WROTE dir; touch /tmp/t 2>/dev/null && echo WROTE tmp"
    )
    result = await sh(script, SandboxPolicy(filesystem="read-only"), ws, mechanism=mechanism)
    assert "WROTE" not in result.stdout
    assert not (ws / "new.txt").exists()
    assert (ws / "existing.txt").read_text() == "before\n"
    assert not (ws / "sub").exists()
    assert not any(t.exists() for t in outside_targets)
    assert not (ws.parent / "sibling" / "x").exists()


@pytest.mark.anyio
async def test_workspace_write_writes_only_inside_the_workspace(
    mechanism: str, ws: Path, outside_targets: list[Path]
) -> None:
    sibling = ws.parent / "sibling"
    (sibling / "file.txt").write_text("original\n")
    (ws / "dirlink").symlink_to(sibling)
    (ws / "filelink").symlink_to(sibling / "file.txt")
    attempts = [sibling / "x", *outside_targets, ws / "dirlink" / "via-link"]
    script = "mkdir -p src && echo inside > src/made.txt && echo OK; "
    script += "; ".join(f"(echo pwned > '{t}') 2>/dev/null && echo WROTE {t}" for t in attempts)
    script += "; (echo pwned > filelink) 2>/dev/null && echo WROTE filelink"
    result = await sh(script, SandboxPolicy(filesystem="workspace-write"), ws, mechanism=mechanism)
    assert result.stdout.startswith("OK\n")
    assert (ws / "src" / "made.txt").read_text() == "inside\n"
    assert not (sibling / "x").exists()
    assert not (sibling / "via-link").exists()
    assert (sibling / "file.txt").read_text() == "original\n"
    assert not any(t.exists() for t in outside_targets)


@pytest.mark.anyio
async def test_extra_writable_folder_is_writable(mechanism: str, ws: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    policy = SandboxPolicy(writable=(str(data),))
    result = await sh(f"echo hi > '{data}/out.txt'", policy, ws, mechanism=mechanism)
    assert result.exit_code == 0, result.stderr
    assert (data / "out.txt").read_text() == "hi\n"


@pytest.mark.anyio
async def test_git_hooks_and_config_stay_read_only(mechanism: str, ws: Path) -> None:
    hooks = ws / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit.sample").write_text("#!/bin/sh\n")
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "src").mkdir()
    policy = SandboxPolicy(protected=(".git/hooks", ".git/config"))
    script = (
        "(echo evil > .git/hooks/pre-commit) 2>/dev/null && echo WROTE new-hook; "
        "(echo evil >> .git/hooks/pre-commit.sample) 2>/dev/null && echo WROTE hook; "
        "(echo '[core] hooksPath=/tmp' >> .git/config) 2>/dev/null && echo WROTE config; "
        "(rm -f .git/hooks/pre-commit.sample) 2>/dev/null; "
        "echo fine > src/ok.txt && echo OK"
    )
    result = await sh(script, policy, ws, mechanism=mechanism)
    assert "WROTE" not in result.stdout
    assert result.stdout.strip().endswith("OK")
    assert not (hooks / "pre-commit").exists()
    assert (hooks / "pre-commit.sample").read_text() == "#!/bin/sh\n"
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert (ws / "src" / "ok.txt").read_text() == "fine\n"


@pytest.mark.anyio
@pytest.mark.parametrize("filesystem", ["workspace-write", "full"])
async def test_deny_read_paths_cannot_be_read_by_cat(
    mechanism: str, ws: Path, tmp_path: Path, filesystem: str
) -> None:
    data = tmp_path / "data"
    (data / "keys").mkdir(parents=True)
    (data / "keys" / "id_key").write_text("KEY-SECRET\n")
    (ws / ".env").write_text("ENV-SECRET\n")
    (ws / "app").mkdir()
    (ws / "app" / ".env").write_text("NESTED-SECRET\n")
    (ws / "visible.txt").write_text("visible\n")
    policy = SandboxPolicy.from_mapping(
        {
            "filesystem": filesystem,
            "writable": [str(data)],
            "deny_read": ["**/.env", str(data / "keys")],
        },
        base_dir=ws,
    )
    script = "cat visible.txt; " + "; ".join(
        f"cat '{p}' || echo REFUSED" for p in (".env", "app/.env", data / "keys" / "id_key")
    )
    result = await sh(script + f"; ls '{data}/keys'", policy, ws, mechanism=mechanism)
    assert result.stdout.startswith("visible\n")
    for secret in ("ENV-SECRET", "NESTED-SECRET", "KEY-SECRET"):
        assert secret not in result.stdout
    assert result.stdout.count("REFUSED") == 3
    # Landlock can only grant, so the folders above a denied path keep the right to list their
    # entries (documented); bubblewrap hides a denied folder's names too.
    assert ("id_key" in result.stdout) is (mechanism == "landlock")


# --- network, environment, privileges ------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("network", [False, True])
async def test_network_off_blocks_a_connection_to_a_local_server(
    mechanism: str, ws: Path, network: bool
) -> None:
    async def greet(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello from the host\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(greet, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    udp_port = udp.getsockname()[1]
    client = (
        "import socket\n"
        "try:\n"
        "    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"    u.sendto(b'udp-datagram', ('127.0.0.1', {udp_port}))\n"
        "except OSError as e:\n"
        "    print('udp', e)\n"
        f"s = socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
        "print(s.recv(100).decode())\n"
    )
    with udp:
        async with server:
            result = await run_process(
                [sys.executable, "-c", client],
                cwd=ws,
                timeout=20,
                max_output=10_000,
                sandbox=SandboxPolicy(network=network),
                workspace=ws,
            )
        try:
            datagram = udp.recv(100)
        except BlockingIOError:
            datagram = b""
    assert result.mechanism == mechanism
    # The datagram was sent before the TCP connection succeeded: it is there if it ever will be.
    assert datagram == (b"udp-datagram" if network else b"")
    if network:
        assert "hello from the host" in result.stdout, result.stderr
    else:
        assert "hello from the host" not in result.stdout
        assert result.exit_code != 0
        assert "Error" in result.stderr


@pytest.mark.anyio
async def test_env_allow_list_hides_secrets(
    mechanism: str, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLNEXUS_TEST_SECRET", "s3cr3t-value")
    policy = SandboxPolicy(env_set={"GREETING": "hello"})
    hidden = await sh("env", policy, ws, mechanism=mechanism)
    assert "s3cr3t-value" not in hidden.stdout
    assert "GREETING=hello" in hidden.stdout
    assert "PATH=" in hidden.stdout
    allowed = SandboxPolicy(env_allow=(*DEFAULT_ENV_ALLOW, "TOOLNEXUS_TEST_*"))
    shown = await sh("env", allowed, ws, mechanism=mechanism)
    assert "TOOLNEXUS_TEST_SECRET=s3cr3t-value" in shown.stdout


@pytest.mark.anyio
async def test_no_new_privileges_and_no_capabilities(mechanism: str, ws: Path) -> None:
    result = await sh("cat /proc/self/status", SandboxPolicy(), ws, mechanism=mechanism)
    status = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    assert status["NoNewPrivs"].strip() == "1"
    assert int(status["CapEff"].strip(), 16) == 0
    assert int(status["CapPrm"].strip(), 16) == 0


# --- resource limits ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_memory_hog_is_stopped_by_max_memory(mechanism: str, ws: Path) -> None:
    hog = [sys.executable, "-c", "b = bytearray(600_000_000); print('allocated')"]
    limited = await run_process(
        hog, cwd=ws, timeout=20, max_output=10_000, workspace=ws,
        sandbox=SandboxPolicy(max_memory=300_000_000),
    )  # fmt: skip
    assert limited.mechanism == mechanism
    assert "allocated" not in limited.stdout
    assert "MemoryError" in limited.stderr
    free = await run_process(
        hog, cwd=ws, timeout=20, max_output=10_000, workspace=ws, sandbox=SandboxPolicy()
    )
    assert "allocated" in free.stdout


@pytest.mark.anyio
async def test_big_file_is_stopped_by_max_file_size(mechanism: str, ws: Path) -> None:
    policy = SandboxPolicy(max_file_size=100_000)
    result = await sh("head -c 1000000 /dev/zero > big.bin", policy, ws, mechanism=mechanism)
    assert result.exit_code != 0
    assert (ws / "big.bin").stat().st_size <= 100_000


_FORK_LOOP = """
import os, sys
r, w = os.pipe()
children = []
for _ in range(60):
    try:
        pid = os.fork()
    except BlockingIOError:
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    children.append(pid)
os.close(w)
for pid in children:
    os.waitpid(pid, 0)
print("forked", len(children))
"""

_AS_USER = """
import asyncio, json, sys
from pathlib import Path
from toolnexus.runtime.process import run_process
from toolnexus.runtime.sandbox import SandboxPolicy
ws = Path(sys.argv[1])
async def main():
    out = {}
    for limit in (None, 10):
        r = await run_process([sys.executable, "-c", sys.argv[2]], cwd=ws, timeout=30,
                              max_output=10000, workspace=ws,
                              sandbox=SandboxPolicy(max_processes=limit))
        out[str(limit)] = [r.mechanism, r.stdout.strip(), r.stderr[-500:]]
    print(json.dumps(out))
asyncio.run(main())
"""


def _python_for_nobody() -> str | None:
    """A Python interpreter an unprivileged user can run (the venv's may live under /root)."""
    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        path = Path(candidate)
        if (
            path.exists()
            and all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])
            and subprocess.run(
                [candidate, "-c", "import sys; assert sys.version_info >= (3, 11)"], check=False
            ).returncode
            == 0
        ):
            return candidate
    return None


def test_fork_bomb_is_stopped_by_max_processes(
    mechanism: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RLIMIT_NPROC does not bind root, so as root the toolkit runs as `nobody` here."""
    repo = Path(__file__).resolve().parents[1]
    ws = Path(os.environ.get("TMPDIR", "/tmp")) / f"toolnexus-nproc-{uuid.uuid4().hex}"
    ws.mkdir(mode=0o777)
    try:
        argv = [sys.executable, "-c", _AS_USER, str(ws), _FORK_LOOP]
        if os.geteuid() == 0:
            python = _python_for_nobody()
            if python is None or shutil.which("setpriv") is None:
                pytest.skip("needs setpriv and a Python that the user nobody can run")
            os.chmod(ws, 0o777)
            argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python,
                    *argv[1:]]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(repo), "HOME": str(ws)}
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, env=env, check=False
        )
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["None"][0] == mechanism
        assert out["None"][1] == "forked 60"
        assert out["10"][0] == mechanism
        forked = int(out["10"][1].split()[1])
        assert forked < 10, out
    finally:
        shutil.rmtree(ws, ignore_errors=True)


@pytest.mark.anyio
async def test_max_processes_as_root_is_refused_or_marked(ws: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("RLIMIT_NPROC binds ordinary users: covered by the fork bomb test")
    with pytest.raises(SandboxUnavailable, match="root"):
        await sh("true", SandboxPolicy(max_processes=10), ws)
    relaxed = await sh("echo ran", SandboxPolicy(max_processes=10, required=False), ws)
    assert relaxed.stdout == "ran\n"
    assert any("max_processes" in u for u in relaxed.unenforced)


# --- availability ---------------------------------------------------------------------------------


@pytest.fixture
def nothing_available(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """bwrap missing from PATH (a PATH with only sh and env) and Landlock switched off."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("sh", "env", "cat"):
        found = shutil.which(tool)
        assert found is not None
        (bindir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.setenv("TOOLNEXUS_SANDBOX_DISABLE", "landlock")


@pytest.mark.anyio
async def test_required_sandbox_unavailable_says_how_to_fix(
    nothing_available: None, ws: Path
) -> None:
    support = detect()
    assert not support.bwrap.available
    assert "not on PATH" in support.bwrap.reason
    assert "TOOLNEXUS_SANDBOX_DISABLE" in support.landlock.reason
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        await sh("echo ran", SandboxPolicy(), ws)
    with pytest.raises(SandboxUnavailable):
        wrap_command(["true"], SandboxPolicy(), workspace=ws, cwd=ws)


@pytest.mark.anyio
async def test_optional_sandbox_unavailable_runs_unconfined_and_says_so(
    nothing_available: None, ws: Path
) -> None:
    result = await sh(
        "echo ran > ../sibling/out; cat ../sibling/out", SandboxPolicy(required=False), ws
    )
    assert result.stdout == "ran\n"
    assert result.unconfined
    assert result.mechanism == "none"


@pytest.mark.anyio
async def test_landlock_takes_over_when_bwrap_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ws: Path
) -> None:
    if not detect().landlock.available:
        pytest.skip(f"Landlock does not work here: {detect().landlock.reason}")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("sh", "touch"):
        (bindir / tool).symlink_to(shutil.which(tool) or tool)
    monkeypatch.setenv("PATH", str(bindir))
    detect.cache_clear()
    result = await sh("touch ../sibling/x", SandboxPolicy(), ws)
    assert result.mechanism == "landlock"
    assert result.exit_code != 0
    assert not (ws.parent / "sibling" / "x").exists()


def test_network_host_list_is_refused_for_processes(ws: Path) -> None:
    policy = SandboxPolicy.from_mapping({"network": ["api.example.com"]}, base_dir=ws)
    assert policy.network == ("api.example.com",)
    with pytest.raises(ConfigError, match="list of hosts") as info:
        policy.check_process()
    assert info.value.field == "sandbox.network"
    with pytest.raises(ConfigError):
        wrap_command(["true"], policy, workspace=ws, cwd=ws)


# --- policy objects -----------------------------------------------------------------------------


def test_from_mapping_reads_every_key(tmp_path: Path) -> None:
    policy = SandboxPolicy.from_mapping(
        {
            "filesystem": "read-only",
            "writable": ["build", "~/cache"],
            "deny_read": [".env", "~/.ssh", "secrets/*.key", "**/id_*"],
            "network": True,
            "env": {"allow": ["PATH", "LC_*"], "set": {"LANG": "C", "N": 3}},
            "timeout": "1.5s",
            "max_output": "30KB",
            "max_memory": "512MiB",
            "max_processes": 64,
            "max_file_size": 1_000_000,
            "required": False,
        },
        base_dir=tmp_path,
    )
    home = str(Path.home())
    assert policy.filesystem == "read-only"
    assert policy.writable == (str(tmp_path / "build"), f"{home}/cache")
    assert policy.deny_read == ("/**/.env", f"{home}/.ssh", f"{tmp_path}/secrets/*.key", "/**/id_*")
    assert policy.network is True
    assert policy.env_allow == ("PATH", "LC_*")
    assert policy.env_set == {"LANG": "C", "N": "3"}
    assert policy.timeout == 1.5
    assert policy.max_output == 30_000
    assert policy.max_memory == 512 * 1024 * 1024
    assert (policy.max_processes, policy.max_file_size, policy.required) == (64, 1_000_000, False)


def test_from_mapping_merges_over_base(tmp_path: Path) -> None:
    base = SandboxPolicy.from_mapping(
        {"filesystem": "read-only", "timeout": 30, "env": {"set": {"A": "1"}}}, base_dir=tmp_path
    )
    merged = SandboxPolicy.from_mapping(
        {"network": True, "env": {"set": {"B": "2"}}}, base=base, base_dir=tmp_path
    )
    assert merged.filesystem == "read-only"
    assert merged.timeout == 30.0
    assert merged.network is True
    assert merged.env_set == {"A": "1", "B": "2"}


@pytest.mark.parametrize(
    ("text", "expected"), [("1TB", 10**12), ("2GiB", 2 * 1024**3), ("1.5k", 1500)]
)
def test_from_mapping_reads_sizes_as_the_manifest_does(
    tmp_path: Path, text: str, expected: int
) -> None:
    policy = SandboxPolicy.from_mapping({"max_file_size": text}, base_dir=tmp_path)
    manifest = load_manifest({"version": 1, "defaults": {"max_output": text}})
    assert policy.max_file_size == manifest.defaults.max_output == expected


@pytest.mark.parametrize(
    ("block", "field", "message"),
    [
        ({"filesytem": "full"}, "sandbox.filesytem", "did you mean 'filesystem'"),
        ({"filesystem": "workspace_write"}, "sandbox.filesystem", "did you mean 'workspace-write'"),
        ({"writable": "src"}, "sandbox.writable", "list of strings"),
        ({"deny_read": ["ok", 3]}, "sandbox.deny_read[1]", "non-empty string"),
        ({"network": ["http://x/"]}, "sandbox.network[0]", "host name"),
        ({"env": {"allow": ["A"], "sett": {}}}, "sandbox.env.sett", "did you mean 'set'"),
        ({"env": {"set": {"A": ["x"]}}}, "sandbox.env.set", "names to strings"),
        ({"timeout": "soon"}, "sandbox.timeout", "duration"),
        ({"max_memory": -1}, "sandbox.max_memory", "positive size"),
        ({"max_processes": "64MB"}, "sandbox.max_processes", "positive integer"),
        ({"required": "yes"}, "sandbox.required", "true or false"),
    ],
)
def test_from_mapping_rejects_bad_values(
    tmp_path: Path, block: dict[str, object], field: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        SandboxPolicy.from_mapping(block, base_dir=tmp_path)
    assert info.value.field == field


def test_tighten_takes_the_stricter_side_of_everything() -> None:
    loose = SandboxPolicy(
        filesystem="full", writable=("/a", "/b"), network=True, timeout=60, max_memory=None,
        deny_read=("/x",), env_allow=("PATH", "HOME"), required=False,
    )  # fmt: skip
    strict = SandboxPolicy(
        filesystem="workspace-write", writable=("/a/sub",), network=("h.example",), timeout=10,
        max_memory=100, deny_read=("/y",), env_allow=("PATH",), protected=(".git/hooks",),
    )  # fmt: skip
    both = loose.tighten(strict)
    assert both.filesystem == "workspace-write"
    assert both.writable == ("/a/sub",)
    assert both.network == ("h.example",)
    assert (both.timeout, both.max_memory) == (10, 100)
    assert both.deny_read == ("/x", "/y")
    assert both.env_allow == ("PATH",)
    assert both.protected == (".git/hooks",)
    assert both.required
    assert both.loosens(strict) == []
    assert both.loosens(loose) == []


def test_loosens_names_every_looser_aspect() -> None:
    base = SandboxPolicy(filesystem="read-only", timeout=10, deny_read=("/s",), required=True)
    override = SandboxPolicy(filesystem="full", network=True, timeout=None, required=False)
    problems = override.loosens(base)
    assert any(p.startswith("filesystem full") for p in problems)
    assert any(p.startswith("network True") for p in problems)
    assert any(p.startswith("timeout None") for p in problems)
    assert any("deny_read drops /s" in p for p in problems)
    assert any(p.startswith("required false") for p in problems)
    assert SandboxPolicy(filesystem="read-only", timeout=5, deny_read=("/s",)).loosens(base) == []


# --- confine_path -------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("x = 1\n")
    (ws / ".env").write_text("SECRET\n")
    (ws / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "extra").mkdir()
    (ws / "escape").symlink_to(tmp_path / "outside")
    (ws / "inner").symlink_to(ws / "src")
    return ws


def test_confine_path_resolves_inside_the_workspace(tree: Path) -> None:
    assert confine_path("src/a.py", workspace=tree) == tree / "src" / "a.py"
    assert confine_path(tree / "src" / "../src/a.py", workspace=tree) == tree / "src" / "a.py"
    assert confine_path("inner/a.py", workspace=tree) == tree / "src" / "a.py"
    new = confine_path("src/new/deeper/file.txt", workspace=tree, write=True)
    assert new == tree / "src" / "new" / "deeper" / "file.txt"


@pytest.mark.parametrize(
    "path",
    ["../outside/f", "escape/f", "escape/../../outside", "/etc/passwd", "src/../../outside",
     "/proc/self/root/etc/passwd", "escape/not/yet/there.txt", "~/.bashrc"],
)  # fmt: skip
def test_confine_path_refuses_escapes(tree: Path, path: str) -> None:
    with pytest.raises(PathRefused, match="outside the workspace"):
        confine_path(path, workspace=tree, write=True)


def test_confine_path_accepts_extra_roots(tree: Path) -> None:
    extra = tree.parent / "extra"
    assert confine_path(extra / "f.txt", workspace=tree, roots=[extra]) == extra / "f.txt"
    policy = SandboxPolicy(writable=(str(tree.parent / "outside"),))
    assert confine_path("escape/f", workspace=tree, policy=policy, write=True) == (
        tree.parent / "outside" / "f"
    )


def test_confine_path_applies_deny_read(tree: Path) -> None:
    policy = SandboxPolicy.from_mapping({"deny_read": ["**/.env", "src/*.py"]}, base_dir=tree)
    for path in (".env", "src/a.py", "inner/a.py", "deep/x/.env", ".env/inside"):
        with pytest.raises(PathRefused, match="deny_read"):
            confine_path(path, workspace=tree, policy=policy)
    assert confine_path("src/b.txt", workspace=tree, policy=policy) == tree / "src" / "b.txt"
    home = SandboxPolicy.from_mapping({"deny_read": ["~/.ssh"]}, base_dir=tree)
    with pytest.raises(PathRefused, match="deny_read"):
        confine_path(Path.home() / ".ssh" / "id_rsa", workspace=tree, roots=[Path.home()],
                     policy=home)  # fmt: skip


def test_confine_path_refuses_writes_the_policy_forbids(tree: Path) -> None:
    read_only = SandboxPolicy(filesystem="read-only")
    assert confine_path("src/a.py", workspace=tree, policy=read_only) == tree / "src" / "a.py"
    with pytest.raises(PathRefused, match="read-only"):
        confine_path("src/a.py", workspace=tree, policy=read_only, write=True)
    protected = SandboxPolicy(protected=(".git/hooks", ".git/config"))
    for path in (".git/hooks/pre-commit", ".git/config"):
        with pytest.raises(PathRefused, match="protected"):
            confine_path(path, workspace=tree, policy=protected, write=True)
    extra = tree.parent / "extra"
    with pytest.raises(PathRefused, match="only the workspace and the writable folders"):
        confine_path(extra / "f", workspace=tree, roots=[extra], policy=SandboxPolicy(), write=True)
    assert confine_path(extra / "f", workspace=tree, roots=[extra], write=True) == extra / "f"


@pytest.mark.anyio
async def test_a_program_in_a_virtualenv_under_tmp_still_starts(
    mechanism: str, ws: Path, tmp_path: Path
) -> None:
    # A clone (and its .venv) under /tmp must not vanish behind the sandbox's private /tmp.
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "lib").mkdir()
    (venv / "lib" / "data.txt").write_text("site-packages stand-in\n")
    program = venv / "bin" / "tool"
    program.write_text(f"#!/bin/sh\ncat {venv / 'lib' / 'data.txt'}\n")
    program.chmod(0o755)
    result = await run_process(
        [str(program)],
        cwd=ws,
        timeout=20,
        max_output=10_000,
        sandbox=SandboxPolicy(filesystem="read-only"),
        workspace=ws,
    )
    assert result.mechanism == mechanism
    assert (result.exit_code, result.stdout) == (0, "site-packages stand-in\n")


def test_the_manifest_schema_knows_every_sandbox_key() -> None:
    from toolnexus.runtime import sandbox

    package = Path(sandbox.__file__).parents[1]
    schema = json.loads((package / "manifest" / "schema.json").read_text())
    assert set(schema["$defs"]["sandbox"]["properties"]) == set(sandbox._KEYS)  # pyright: ignore[reportPrivateUsage]


@pytest.mark.anyio
async def test_a_denied_path_among_thousands_of_siblings(mechanism: str, ws: Path) -> None:
    """Landlock grants each sibling on the way to a denied path: more rules than one argument
    may hold (128 KiB) must still reach the launcher."""
    many = ws / "many"
    for i in range(2500):
        (many / f"sibling-with-a-long-name-{i:05}").mkdir(parents=True)
    (many / "sibling-with-a-long-name-00000" / ".env").write_text("ENV-SECRET\n")
    (many / "sibling-with-a-long-name-02499" / "f.txt").write_text("visible\n")
    policy = SandboxPolicy.from_mapping({"deny_read": ["**/.env"]}, base_dir=ws)
    script = "cat many/*/f.txt; cat many/*/.env || echo REFUSED; echo ok > many/new.txt"
    result = await sh(script, policy, ws, mechanism=mechanism)
    assert result.stdout.split() == ["visible", "REFUSED"], result.stderr
    assert (many / "new.txt").read_text() == "ok\n"
